//! A failed accept, on the milter socket or the HTTP endpoint: logged (throttled),
//! counted, and whether accepting pauses before the next one.

use std::io;
use std::time::Duration;

/// How long accepting pauses after an error that would recur at once (out of file
/// descriptors or memory). Long enough not to spin on a listener that stays readable,
/// short enough that the MTA's connections, waiting in the listen queue meanwhile, are
/// taken soon after descriptors are free again.
pub(in crate::daemon) const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// Which listening socket failed, for the log line and the metric's `listener` label.
#[derive(Clone, Copy)]
pub(in crate::daemon) enum Socket {
    Milter,
    Http,
}

/// Logs (throttled) and counts a failed accept on `socket`, with `open` connections
/// being served there. Returns whether to pause before the next accept: errors of the
/// process or the system recur at once until something is freed, while an error of one
/// connection (gone before it was accepted) leaves the next one unaffected.
pub(in crate::daemon) fn accept_failed(socket: Socket, e: &io::Error, open: usize) -> bool {
    use rustix::io::Errno;
    let errno = Errno::from_io_error(e);
    let is = |x: Errno| errno == Some(x);
    let (label, pause, meaning) = if is(Errno::MFILE) {
        (
            "emfile",
            true,
            "the process is out of file descriptors: raise LimitNOFILE= in the \
             systemd unit (ulimit -n outside systemd) or lower max_connections",
        )
    } else if is(Errno::NFILE) {
        (
            "enfile",
            true,
            "the system is out of file descriptors (sysctl fs.file-max)",
        )
    } else if is(Errno::NOBUFS) || is(Errno::NOMEM) {
        let label = if is(Errno::NOBUFS) {
            "enobufs"
        } else {
            "enomem"
        };
        (label, true, "the kernel is out of memory for sockets")
    } else if is(Errno::CONNABORTED) {
        (
            "econnaborted",
            false,
            "the client went away before it was accepted",
        )
    } else if [
        // accept(2) on Linux: network errors of the pending connection, to be
        // treated like EAGAIN.
        Errno::PROTO,
        Errno::PERM,
        Errno::NETDOWN,
        Errno::NOPROTOOPT,
        Errno::HOSTDOWN,
        Errno::NONET,
        Errno::HOSTUNREACH,
        Errno::OPNOTSUPP,
        Errno::NETUNREACH,
        Errno::TIMEDOUT,
    ]
    .into_iter()
    .any(is)
    {
        ("other", false, "an error of that one connection")
    } else {
        ("other", true, "unexpected")
    };
    let (name, metric) = match socket {
        Socket::Milter => ("milter socket", "milter"),
        Socket::Http => ("metrics endpoint", "http"),
    };
    crate::milter::metrics::accept_error(metric, label);
    crate::milter::throttle::ACCEPT_ERRORS.hit(|| {
        if pause {
            format!(
                "{name}: {e}; {meaning}; the {open} connection(s) open are still served, \
                 new ones wait in the listen queue (retried every {} ms)",
                ACCEPT_PAUSE.as_millis()
            )
        } else {
            format!("{name}: {e}; {meaning}")
        }
    });
    pause
}
