//! systemd's service notifications (sd_notify(3)), for `Type=notify` units: the unit
//! is started only once the daemon says READY=1, so an MTA ordered after it never
//! starts while the milter socket is missing: the unit's `Before=` names
//! `postfix.service`, `postfix@-.service` (Debian 12's real Postfix daemon, where
//! `postfix.service` is a oneshot `/bin/true`) and `sendmail.service`, and the
//! package's drop-in for `postfix@.service` orders every other Postfix instance.
//!
//! What is sent, and when:
//! - `READY=1` once every socket is bound (the milter socket and `metrics_listen`);
//! - `RELOADING=1` with `MONOTONIC_USEC` when SIGHUP arrives, then `READY=1` once the
//!   reload is over, whether it loaded the file or kept the running configuration
//!   (systemd 253 and later take a reload without the clock reading as a protocol
//!   error);
//! - `STOPPING=1` when SIGTERM starts the drain;
//! - `WATCHDOG=1` every half `WatchdogSec=` (`WATCHDOG_USEC`), from a task on the
//!   daemon's own runtime, so pings stop when the runtime stops answering and systemd
//!   restarts the service.
//!
//! No libsystemd: the protocol is one datagram per message to the socket named in
//! `NOTIFY_SOCKET`, a path or, with a leading `@`, an abstract name. The sending socket
//! is non-blocking, so a receiver that does not read cannot stall the runtime; a failed
//! send is logged and counted (`mimeref_events_total{event="sd_notify_failed"}`).

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

use tracing::debug;

/// Where notifications go, from `NOTIFY_SOCKET` (unset outside systemd).
pub struct Notifier {
    socket: UnixDatagram,
    addr: SocketAddr,
    /// `NOTIFY_SOCKET` as given, for log lines.
    name: String,
    watchdog: Option<Duration>,
}

impl Notifier {
    /// The notifier the environment asks for: None when `NOTIFY_SOCKET` is unset or
    /// empty (not started by systemd, or a unit type that does not listen).
    pub fn from_env() -> Option<Notifier> {
        let name = std::env::var("NOTIFY_SOCKET").ok()?;
        if name.is_empty() {
            return None;
        }
        let watchdog = watchdog_interval(
            std::env::var("WATCHDOG_USEC").ok().as_deref(),
            std::env::var("WATCHDOG_PID").ok().as_deref(),
            std::process::id(),
        );
        match Notifier::open(&name, watchdog) {
            Ok(n) => Some(n),
            Err(e) => {
                failed(&name, "open", &e);
                None
            }
        }
    }

    fn open(name: &str, watchdog: Option<Duration>) -> io::Result<Notifier> {
        let addr = match name.strip_prefix('@') {
            Some(abstract_name) => SocketAddr::from_abstract_name(abstract_name.as_bytes())?,
            None if name.starts_with('/') => SocketAddr::from_pathname(name)?,
            // systemd 254 may also name an AF_VSOCK address (for virtual machines): a
            // milter has no use for it.
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "neither an absolute path nor an abstract name (@...)",
                ))
            }
        };
        let socket = UnixDatagram::unbound()?;
        socket.set_nonblocking(true)?;
        Ok(Notifier {
            socket,
            addr,
            name: name.to_string(),
            watchdog,
        })
    }

    /// Every socket is bound: `status` says what the daemon listens on.
    pub fn ready(&self, status: &str) {
        self.send(&format!("READY=1\nSTATUS={status}\n"));
    }

    /// A reload begins.
    pub fn reloading(&self) {
        self.send(&format!(
            "RELOADING=1\nMONOTONIC_USEC={}\nSTATUS=reloading the configuration\n",
            monotonic_usec()
        ));
    }

    /// The drain begins.
    pub fn stopping(&self) {
        self.send("STOPPING=1\nSTATUS=draining: messages in flight are finishing\n");
    }

    /// How often to ping the watchdog: half `WatchdogSec=`, or None without one.
    pub fn watchdog(&self) -> Option<Duration> {
        self.watchdog
    }

    pub fn watchdog_ping(&self) {
        self.send("WATCHDOG=1\n");
    }

    fn send(&self, message: &str) {
        debug!(
            "sd_notify {}: {}",
            self.name,
            message.trim_end().replace('\n', " ")
        );
        match self.socket.send_to_addr(message.as_bytes(), &self.addr) {
            Ok(n) if n == message.len() => {}
            Ok(n) => failed(
                &self.name,
                "send",
                &io::Error::other(format!("only {n} of {} octets sent", message.len())),
            ),
            Err(e) => failed(&self.name, "send", &e),
        }
    }
}

fn failed(name: &str, what: &str, e: &io::Error) {
    crate::milter::metrics::event("sd_notify_failed");
    crate::milter::throttle::NOTIFY_FAILED.hit(|| format!("{what} to NOTIFY_SOCKET={name}: {e}"));
}

/// Half the watchdog timeout systemd gives in `WATCHDOG_USEC`, as sd_watchdog_enabled(3)
/// advises; None when there is none, it cannot be read, or `WATCHDOG_PID` names another
/// process (the variables were inherited, not meant for this one).
fn watchdog_interval(usec: Option<&str>, pid: Option<&str>, own: u32) -> Option<Duration> {
    if let Some(p) = pid {
        if p.trim().parse::<u32>().ok() != Some(own) {
            return None;
        }
    }
    let usec: u64 = usec?.trim().parse().ok().filter(|&u| u > 0)?;
    Some(Duration::from_micros(usec / 2).max(Duration::from_millis(1)))
}

/// CLOCK_MONOTONIC in microseconds, the clock systemd compares a reload's time with.
fn monotonic_usec() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let micros = u64::try_from(t.tv_nsec).unwrap_or(0) / 1000;
    secs.saturating_mul(1_000_000).saturating_add(micros)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watchdog_interval_is_half_the_timeout_and_only_for_this_process() {
        let half = Some(Duration::from_secs(15));
        assert_eq!(watchdog_interval(Some("30000000"), None, 7), half);
        assert_eq!(watchdog_interval(Some("30000000"), Some("7"), 7), half);
        assert_eq!(watchdog_interval(Some("30000000"), Some("8"), 7), None);
        assert_eq!(watchdog_interval(Some("30000000"), Some("x"), 7), None);
        assert_eq!(watchdog_interval(None, Some("7"), 7), None);
        assert_eq!(watchdog_interval(Some("0"), None, 7), None);
        assert_eq!(watchdog_interval(Some("soon"), None, 7), None);
    }

    #[test]
    fn a_relative_notify_socket_is_refused() {
        assert!(Notifier::open("run/notify", None).is_err());
        assert!(Notifier::open("vsock:2:1234", None).is_err());
    }

    #[test]
    fn messages_reach_a_path_and_an_abstract_name() {
        let dir = std::env::temp_dir().join(format!("mimeref-notify-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify");
        let by_path = UnixDatagram::bind(&path).unwrap();
        let abstract_name = format!("mimeref-notify-unit-{}", std::process::id());
        let by_name =
            UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(&abstract_name).unwrap())
                .unwrap();
        for (sock, name) in [
            (&by_path, path.display().to_string()),
            (&by_name, format!("@{abstract_name}")),
        ] {
            sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let n = Notifier::open(&name, None).unwrap();
            n.reloading();
            let mut buf = [0u8; 256];
            let len = sock.recv(&mut buf).unwrap();
            let got = std::str::from_utf8(&buf[..len]).unwrap();
            let usec: u64 = got
                .lines()
                .find_map(|l| l.strip_prefix("MONOTONIC_USEC="))
                .unwrap()
                .parse()
                .unwrap();
            assert!(got.starts_with("RELOADING=1\n"), "{got:?}");
            assert!(usec > 0 && usec <= monotonic_usec(), "{got:?}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
