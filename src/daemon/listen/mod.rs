//! The listening socket and what wraps it: [`bind`], TCP connections that acknowledge
//! and send at once ([`NoDelay`]), the [`Gate`] that closes at shutdown, refuses
//! connections past `max_connections` and rides out failed accepts, and [`Counted`]
//! connections, which also turn away peers that do not speak milter.

use std::future::Future;
use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use indymilter::Listener;

use super::error::{BindError, DaemonError, Holder};
use super::health::Health;
use super::socket_file::OwnSocket;
use crate::config::{Config, SocketSpec};

/// Binds the listening socket. For unix: sockets, a socket file already at the path is
/// removed only when no process answers on it (a stale one, left by a process that
/// died); one that answers belongs to a running daemon and stops this start with
/// [`DaemonError::SocketInUse`], naming that process. `socket_mode` and
/// `socket_group` are applied; the [`OwnSocket`] returned removes the file when
/// dropped, if it is still this daemon's.
pub async fn bind_milter(
    spec: &SocketSpec,
    cfg: &Config,
) -> Result<(AnyListener, Option<OwnSocket>), DaemonError> {
    match spec {
        SocketSpec::Inet { host, port } => {
            match tokio::net::TcpListener::bind((host.as_str(), *port)).await {
                Ok(l) => Ok((AnyListener::Tcp(NoDelay(l)), None)),
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => Err(DaemonError::SocketInUse {
                    spec: spec.clone(),
                    holder: Holder::Listening(holder::of_tcp_port(*port)),
                }),
                Err(source) => Err(DaemonError::Bind(BindError::Listen {
                    spec: spec.clone(),
                    source,
                })),
            }
        }
        SocketSpec::Unix(path) => {
            let path_err = |f: fn(PathBuf, io::Error) -> BindError| {
                move |source| DaemonError::Bind(f(path.clone(), source))
            };
            if let Ok(m) = std::fs::symlink_metadata(path) {
                if !m.file_type().is_socket() {
                    return Err(DaemonError::Bind(BindError::NotASocket {
                        path: path.clone(),
                    }));
                }
                let holder = match probe(path) {
                    Probe::Stale => {
                        std::fs::remove_file(path).map_err(path_err(|path, source| {
                            BindError::RemoveStale { path, source }
                        }))?;
                        None
                    }
                    Probe::Served(holder) => Some(Holder::Serving(holder)),
                    Probe::Unknown(e) => Some(Holder::Unknown(e)),
                };
                if let Some(holder) = holder {
                    return Err(DaemonError::SocketInUse {
                        spec: spec.clone(),
                        holder,
                    });
                }
            }
            let l = tokio::net::UnixListener::bind(path).map_err(|source| {
                DaemonError::Bind(BindError::Listen {
                    spec: spec.clone(),
                    source,
                })
            })?;
            // Known from here on: removed on the way out whatever fails below.
            let own = OwnSocket::new(path).map_err(path_err(|path, source| {
                BindError::AfterBind { path, source }
            }))?;
            if let Some(mode) = cfg.listen().socket_mode {
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(
                    path_err(|path, source| BindError::SocketMode { path, source }),
                )?;
            }
            if let Some(group) = &cfg.listen().socket_group {
                let gid = crate::config::group_id(group).ok_or_else(|| {
                    DaemonError::Bind(BindError::NoSuchGroup {
                        group: group.clone(),
                    })
                })?;
                // In a set-group-ID directory of that group (as the Debian package
                // makes /var/spool/postfix/mimeref-milter) the socket has it already;
                // chown(2) is then not needed, and the unit's system call filter does
                // not allow it. Under the unit's PrivateUsers= the group shows as
                // nogroup: socket_has_group judges by the directory then.
                if !crate::config::socket_has_group(path, gid) {
                    std::os::unix::fs::chown(path, None, Some(gid)).map_err(path_err(
                        |path, source| BindError::SocketGroup { path, source },
                    ))?;
                }
            }
            Ok((AnyListener::Unix(l), Some(own)))
        }
    }
}

/// What a socket file found at start is.
enum Probe {
    /// Connection refused: no process listens on it any more.
    Stale,
    /// A process listens on it: the one named, if it could be found.
    Served(Option<String>),
    /// Connecting failed otherwise (no permission, for one).
    Unknown(io::Error),
}

/// Connects to the socket at `path` without waiting: a listener answers at once, or
/// with EAGAIN when its backlog is full (alive, only busy); a file nobody listens on
/// refuses. The connection is closed again without a word, which the daemon there
/// takes as a probe (neither logged nor counted as a stranger).
fn probe(path: &std::path::Path) -> Probe {
    use socket2::{Domain, SockAddr, Socket, Type};
    let attempt = || -> io::Result<Socket> {
        let s = Socket::new(Domain::UNIX, Type::STREAM, None)?;
        s.set_nonblocking(true)?;
        s.connect(&SockAddr::unix(path)?)?;
        Ok(s)
    };
    match attempt() {
        Ok(s) => Probe::Served(holder::of_connected(s).or_else(|| holder::of_unix_path(path))),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Probe::Stale,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            Probe::Served(holder::of_unix_path(path))
        }
        Err(e) => Probe::Unknown(e),
    }
}

/// Which process holds a socket, as "pid 1234: /usr/bin/mimeref-milter serve ...", for
/// the error line when the socket is taken. Best effort: Linux's /proc, and only the
/// processes this user may look at.
mod holder {
    use std::path::Path;

    /// The process at the other end of a connected unix socket: the one that called
    /// listen(2) (SO_PEERCRED, through tokio, which reads it without unsafe code here).
    pub(super) fn of_connected(s: socket2::Socket) -> Option<String> {
        let s = tokio::net::UnixStream::from_std(std::os::unix::net::UnixStream::from(
            std::os::fd::OwnedFd::from(s),
        ))
        .ok()?;
        // 0: a process in another PID namespace.
        let pid = s.peer_cred().ok()?.pid().filter(|&p| p > 0)?;
        Some(describe(pid as u32))
    }

    /// The process holding the listening unix socket bound at `path`
    /// (/proc/net/unix gives its inode).
    pub(super) fn of_unix_path(path: &Path) -> Option<String> {
        let want = path.to_str()?;
        let table = std::fs::read_to_string("/proc/net/unix").ok()?;
        // Num RefCount Protocol Flags Type St Inode Path; flags 00010000: listening.
        let inode = table.lines().skip(1).find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 8 && f[7] == want && f[3] == "00010000").then(|| f[6].parse().ok())?
        })?;
        of_inode(inode)
    }

    /// The process holding the TCP socket that listens on `port`.
    pub(super) fn of_tcp_port(port: u16) -> Option<String> {
        let want = format!(":{port:04X}");
        ["/proc/net/tcp", "/proc/net/tcp6"].iter().find_map(|t| {
            let table = std::fs::read_to_string(t).ok()?;
            // sl local_address rem_address st ... inode (the 10th field); st 0A: LISTEN.
            let inode = table.lines().skip(1).find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() >= 10 && f[1].ends_with(&want) && f[3] == "0A")
                    .then(|| f[9].parse().ok())?
            })?;
            of_inode(inode)
        })
    }

    /// The process with a descriptor for socket `inode`.
    fn of_inode(inode: u64) -> Option<String> {
        let target = format!("socket:[{inode}]");
        let me = std::process::id();
        std::fs::read_dir("/proc").ok()?.flatten().find_map(|p| {
            let pid: u32 = p.file_name().to_str()?.parse().ok()?;
            if pid == me {
                return None;
            }
            let fds = std::fs::read_dir(p.path().join("fd")).ok()?;
            fds.flatten()
                .any(|fd| {
                    std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == target.as_str())
                })
                .then(|| describe(pid))
        })
    }

    /// "pid N: command line", or "pid N" when /proc hides it.
    fn describe(pid: u32) -> String {
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
            .ok()
            .map(|c| {
                c.split(|&b| b == 0)
                    .filter(|a| !a.is_empty())
                    .map(String::from_utf8_lossy)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .filter(|c| !c.is_empty());
        match cmd {
            Some(c) => format!("pid {pid}: {}", c.escape_debug()),
            None => format!("pid {pid}"),
        }
    }
}

/// Either kind of listening socket.
pub type AnyListener = indymilter::EitherListener<NoDelay, tokio::net::UnixListener>;

/// A TCP listener whose connections acknowledge at once and send at once.
///
/// The MTA writes some packets back to back without waiting for a reply (a macro
/// packet, then its command; every stage negotiated "no reply"); with Nagle on its side
/// the second one waits until the first is acknowledged, and a milter that has nothing
/// to send yet delays that ACK by about 40 ms on Linux. So every read re-arms
/// TCP_QUICKACK (the kernel drops out of quick-ACK mode on its own), and TCP_NODELAY
/// covers our own back-to-back writes at end of message (change header, replace body,
/// add header, accept). Measured in BENCHMARKS.md.
pub struct NoDelay(pub tokio::net::TcpListener);

impl Listener for NoDelay {
    type Io = QuickAck;

    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Self::Io>> {
        self.0.poll_accept(cx).map_ok(|(s, _)| {
            // Best effort: a socket without them still works, only slower.
            let _ = s.set_nodelay(true);
            let _ = socket2::SockRef::from(&s).set_tcp_quickack(true);
            QuickAck(s)
        })
    }
}

/// A milter connection over TCP that re-arms TCP_QUICKACK after each read.
pub struct QuickAck(tokio::net::TcpStream);

/// The other end of a connection as log lines name it: "127.0.0.1:41234" (or
/// "[::1]:41234"), or "unix socket".
pub trait PeerName {
    fn peer_name(&self) -> String;
}

impl PeerName for tokio::net::TcpStream {
    fn peer_name(&self) -> String {
        // Fails only when the peer has already gone (ENOTCONN).
        self.peer_addr()
            .map_or_else(|_| "unknown peer".to_string(), |a| a.to_string())
    }
}

impl PeerName for QuickAck {
    fn peer_name(&self) -> String {
        self.0.peer_name()
    }
}

impl PeerName for tokio::net::UnixStream {
    fn peer_name(&self) -> String {
        "unix socket".to_string()
    }
}

impl<T: PeerName, U: PeerName> PeerName for indymilter::EitherStream<T, U> {
    fn peer_name(&self) -> String {
        match self {
            indymilter::EitherStream::Tcp(s) => s.peer_name(),
            indymilter::EitherStream::Unix(s) => s.peer_name(),
        }
    }
}

/// How long accepting pauses after an error that would recur at once (out of file
/// descriptors or memory). Long enough not to spin on a listener that stays readable,
/// short enough that the MTA's connections, waiting in the listen queue meanwhile, are
/// taken soon after descriptors are free again.
pub(super) const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// Which listening socket failed, for the log line and the metric's `listener` label.
#[derive(Clone, Copy)]
pub(super) enum Socket {
    Milter,
    Http,
}

/// Logs (throttled) and counts a failed accept on `socket`, with `open` connections
/// being served there. Returns whether to pause before the next accept: errors of the
/// process or the system recur at once until something is freed, while an error of one
/// connection (gone before it was accepted) leaves the next one unaffected.
pub(super) fn accept_failed(socket: Socket, e: &io::Error, open: usize) -> bool {
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

impl tokio::io::AsyncRead for QuickAck {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let r = std::pin::Pin::new(&mut self.0).poll_read(cx, buf);
        if r.is_ready() {
            let _ = socket2::SockRef::from(&self.0).set_tcp_quickack(true);
        }
        r
    }
}

impl tokio::io::AsyncWrite for QuickAck {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// Stops accepting as soon as shutdown begins (the listening socket is closed, so the
/// MTA gets "connection refused" and uses another milter or its default action), while
/// open connections finish their messages.
///
/// Also enforces `max_connections`: a connection over the limit is accepted and closed
/// at once, so that the MTA applies its default action straight away. Left unaccepted
/// (what indymilter's own limit does) it would wait in the kernel's backlog until the
/// MTA's connect timeout, 30 s with Postfix, holding up the SMTP session meanwhile.
///
/// A failed accept never ends the daemon (indymilter's loop would stop on the first
/// one): it is logged and counted, and after one that would recur at once (no file
/// descriptor left) accepting pauses for [`ACCEPT_PAUSE`] while the open connections
/// go on being served.
pub(super) struct Gate<L> {
    inner: Option<L>,
    state: Arc<GateState>,
    health: Arc<Health>,
    max_connections: usize,
    pause: Option<Pin<Box<tokio::time::Sleep>>>,
}

#[derive(Default)]
pub(super) struct GateState {
    closed: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl GateState {
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let w = match self.waker.lock() {
            Ok(mut g) => g.take(),
            Err(p) => p.into_inner().take(),
        };
        if let Some(w) = w {
            w.wake();
        }
    }
}

impl<L> Gate<L> {
    /// A gate around `inner`, and the state that closes it.
    pub(super) fn new(
        inner: L,
        health: Arc<Health>,
        max_connections: usize,
    ) -> (Gate<L>, Arc<GateState>) {
        let state = Arc::new(GateState::default());
        let gate = Gate {
            inner: Some(inner),
            state: state.clone(),
            health,
            max_connections,
            pause: None,
        };
        (gate, state)
    }

    fn refuse(&mut self, open: usize, peer: impl FnOnce() -> String) {
        let id = next_connection();
        crate::milter::metrics::connection_refused();
        let max = self.max_connections;
        crate::milter::throttle::CONNECTIONS_REFUSED.hit(|| {
            format!(
                "among them connection {id} from {}: {open} open, max_connections = {max}",
                peer()
            )
        });
    }
}

/// The number of the next milter connection accepted since the daemon started (from
/// 1, refused ones included), which every log line about a connection names.
fn next_connection() -> u64 {
    static CONNECTIONS: AtomicU64 = AtomicU64::new(0);
    CONNECTIONS.fetch_add(1, Ordering::Relaxed) + 1
}

impl<L: Listener> Listener for Gate<L>
where
    L::Io: PeerName,
{
    type Io = Counted<L::Io>;

    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Self::Io>> {
        if let Ok(mut g) = self.state.waker.lock() {
            *g = Some(cx.waker().clone());
        }
        if self.state.closed.load(Ordering::SeqCst) {
            self.inner = None;
        }
        if let Some(p) = self.pause.as_mut() {
            if p.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.pause = None;
        }
        // A flood of connections over the limit must not keep this task from others.
        for _ in 0..64 {
            let Some(l) = self.inner.as_mut() else {
                return Poll::Pending;
            };
            let io = match l.poll_accept(cx) {
                Poll::Ready(Ok(io)) => io,
                Poll::Ready(Err(e)) => {
                    let open = self.health.open_connections().load(Ordering::SeqCst);
                    if accept_failed(Socket::Milter, &e, open) {
                        let mut p = Box::pin(tokio::time::sleep(ACCEPT_PAUSE));
                        // Polled once so that it wakes this task when it ends.
                        if p.as_mut().poll(cx).is_pending() {
                            self.pause = Some(p);
                            return Poll::Pending;
                        }
                    }
                    continue;
                }
                Poll::Pending => return Poll::Pending,
            };
            let open = self.health.open_connections().load(Ordering::SeqCst);
            if open >= self.max_connections {
                let peer = io.peer_name();
                // Dropping it closes it: the MTA reads end of file (or a reset).
                drop(io);
                self.refuse(open, || peer);
                continue;
            }
            return Poll::Ready(Ok(Counted::new(io, self.health.clone())));
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// A milter connection, counted as open in [`Health`] until dropped.
///
/// Its first octets are checked before the milter library reads them: every milter
/// client starts with the option negotiation (or, rarely, a macro packet), and a peer
/// that starts otherwise (a browser, a TLS client, a port scanner) is logged, counted
/// and closed at once rather than held until `connection_timeout`.
pub struct Counted<T> {
    io: T,
    health: Arc<Health>,
    peer: String,
    /// See [`next_connection`].
    id: u64,
    /// The first octets read, up to [`HEAD`].
    head: [u8; HEAD],
    /// How many of `head` were read, and how many of those passed on.
    head_len: usize,
    head_passed: usize,
    phase: Phase,
}

/// Octets looked at before the milter library gets them: enough to recognise an HTTP
/// method and to show what a stranger sent.
const HEAD: usize = 16;

/// How every milter connection starts: SMFIC_OPTNEG, a 4-octet length then the command
/// `O`. The packet is 13 octets (the command, then version, actions and protocol
/// options, 4 octets each) for protocol versions 2 to 6; a longer one (a later
/// extension) is still a milter client, so lengths up to [`NEGOTIATION_MAX`] pass.
const NEGOTIATION_MIN: usize = 13;
const NEGOTIATION_MAX: usize = 4096;

/// Or a macro packet (`D`) first: libmilter takes one in any state, before the
/// negotiation too (which then clears it), so an MTA that sent one would find every
/// libmilter filter answering. The command and the stage octet at least; at most
/// 64 KiB, what libmilter reads in one packet before a larger size is negotiated, as
/// octets 0 and 1 of the length are zero.
const EARLY_MACROS_MIN: usize = 2;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reading `head` until it can tell.
    Checking,
    /// A milter client: passing on `head`, then reading straight through.
    Milter,
    /// Not milter: every read is end of file.
    Refused,
}

/// What the first octets of a connection are, as far as they go.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Milter,
    NotYet,
    Stranger,
}

fn verdict(head: &[u8]) -> Verdict {
    for (i, &b) in head.iter().enumerate().take(5) {
        let fits = match i {
            // The high half of the length, which no first packet needs.
            0 | 1 => b == 0,
            // Any: a macro packet may be up to 64 KiB.
            2 => true,
            3 => usize::from(head[2]) << 8 | usize::from(b) >= EARLY_MACROS_MIN,
            _ => {
                let len = usize::from(head[2]) << 8 | usize::from(head[3]);
                match b {
                    b'O' => (NEGOTIATION_MIN..=NEGOTIATION_MAX).contains(&len),
                    b'D' => len >= EARLY_MACROS_MIN,
                    _ => false,
                }
            }
        };
        if !fits {
            return Verdict::Stranger;
        }
    }
    if head.len() >= 5 {
        Verdict::Milter
    } else {
        Verdict::NotYet
    }
}

/// What a stranger's first octets look like, for the log line.
fn looks_like(head: &[u8]) -> &'static str {
    // A TLS record: handshake (22), then the major version 3.
    if head.first() == Some(&0x16) && head.get(1).is_none_or(|&b| b == 3) {
        return "TLS handshake";
    }
    const METHODS: [&[u8]; 10] = [
        b"GET ",
        b"HEAD ",
        b"POST ",
        b"PUT ",
        b"DELETE ",
        b"OPTIONS ",
        b"CONNECT ",
        b"PATCH ",
        b"TRACE ",
        b"PRI * HTTP",
    ];
    if METHODS.iter().any(|m| head.starts_with(m)) {
        return "HTTP request";
    }
    "not a milter negotiation"
}

impl<T: PeerName> Counted<T> {
    fn new(io: T, health: Arc<Health>) -> Counted<T> {
        health.open_connections().fetch_add(1, Ordering::SeqCst);
        crate::milter::metrics::connections_open(1.0);
        Counted {
            peer: io.peer_name(),
            id: next_connection(),
            io,
            health,
            head: [0; HEAD],
            head_len: 0,
            head_passed: 0,
            phase: Phase::Checking,
        }
    }
}

impl<T> Counted<T> {
    /// The MTA's end of the connection: "127.0.0.1:41234", or "unix socket".
    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// This connection's number, for log lines.
    pub fn id(&self) -> u64 {
        self.id
    }

    fn refuse(&mut self) {
        self.phase = Phase::Refused;
        let head = &self.head[..self.head_len];
        crate::milter::metrics::event("non_milter_peer");
        crate::milter::throttle::NON_MILTER_PEERS.hit(|| {
            let hex: Vec<String> = head.iter().take(8).map(|b| format!("{b:02x}")).collect();
            format!(
                "among them connection {} from {}: {} (first octets {})",
                self.id,
                self.peer(),
                looks_like(head),
                hex.join(" ")
            )
        });
    }
}

impl<T> Drop for Counted<T> {
    fn drop(&mut self) {
        self.health
            .open_connections()
            .fetch_sub(1, Ordering::SeqCst);
        crate::milter::metrics::connections_open(-1.0);
    }
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Counted<T> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            match this.phase {
                Phase::Refused => return Poll::Ready(Ok(())),
                Phase::Milter if this.head_passed < this.head_len => {
                    let rest = &this.head[this.head_passed..this.head_len];
                    let n = rest.len().min(buf.remaining());
                    buf.put_slice(&rest[..n]);
                    this.head_passed += n;
                    return Poll::Ready(Ok(()));
                }
                Phase::Milter => return std::pin::Pin::new(&mut this.io).poll_read(cx, buf),
                Phase::Checking => {
                    let mut more = tokio::io::ReadBuf::new(&mut this.head[this.head_len..]);
                    std::task::ready!(std::pin::Pin::new(&mut this.io).poll_read(cx, &mut more))?;
                    let n = more.filled().len();
                    if n == 0 {
                        // End of file. Nothing at all is a TCP health check or a port
                        // probe: no stranger. A part of a negotiation is one.
                        if this.head_len > 0 {
                            this.refuse();
                        }
                        this.phase = Phase::Refused;
                        return Poll::Ready(Ok(()));
                    }
                    this.head_len += n;
                    match verdict(&this.head[..this.head_len]) {
                        Verdict::Milter => this.phase = Phase::Milter,
                        Verdict::NotYet => {}
                        Verdict::Stranger => {
                            this.refuse();
                            return Poll::Ready(Err(io::Error::new(
                                io::ErrorKind::InvalidData,
                                "not a milter client",
                            )));
                        }
                    }
                }
            }
        }
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Counted<T> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    impl PeerName for tokio::io::DuplexStream {
        fn peer_name(&self) -> String {
            "duplex".into()
        }
    }

    /// Postfix's negotiation (version 6, all actions, all protocol options) and the
    /// macro packet that follows it.
    const POSTFIX: &[u8] = b"\0\0\0\x0dO\0\0\0\x06\0\0\x01\xff\0\x1f\xff\xff\0\0\0\x02Dx";

    #[test]
    fn first_octets() {
        assert_eq!(verdict(&POSTFIX[..5]), Verdict::Milter);
        assert_eq!(verdict(&POSTFIX[..3]), Verdict::NotYet);
        assert_eq!(verdict(&[0, 0, 0, 12, b'O']), Verdict::Stranger);
        // A macro packet first, as libmilter takes: a stage at least, under 64 KiB.
        assert_eq!(verdict(&[0, 0, 0, 13, b'D']), Verdict::Milter);
        assert_eq!(verdict(&[0, 0, 0x40, 0, b'D']), Verdict::Milter);
        assert_eq!(verdict(&[0, 0, 0, 1, b'D']), Verdict::Stranger);
        assert_eq!(verdict(&[0, 0, 0x40, 0, b'O']), Verdict::Stranger);
        assert_eq!(verdict(&[0, 0, 0, 13, b'C']), Verdict::Stranger);
        assert_eq!(verdict(&[0, 0, 0, 17, b'O']), Verdict::Milter);
        assert_eq!(verdict(&[0, 0, 0x10, 1, b'O']), Verdict::Stranger);
        assert_eq!(verdict(&[0, 0, 0x20]), Verdict::NotYet);
        assert_eq!(verdict(&[0, 1]), Verdict::Stranger);
        assert_eq!(verdict(b"G"), Verdict::Stranger);
        assert_eq!(looks_like(b"GET / HTTP/1.1\r\n"), "HTTP request");
        assert_eq!(looks_like(b"OPTIONS * HTTP/1"), "HTTP request");
        assert_eq!(looks_like(&[0x16, 3, 1, 2, 0]), "TLS handshake");
        assert_eq!(looks_like(&[0x16]), "TLS handshake");
        assert_eq!(looks_like(&[0x16, 4]), "not a milter negotiation");
        assert_eq!(looks_like(b"GETS"), "not a milter negotiation");
        assert_eq!(looks_like(&[0xff; 5]), "not a milter negotiation");
    }

    /// What a reader of `Counted` gets when the peer writes `chunks` one by one.
    async fn read_through(chunks: Vec<Vec<u8>>) -> (io::Result<Vec<u8>>, usize) {
        let (mut peer, ours) = tokio::io::duplex(64);
        let health = Arc::new(Health::default());
        let mut c = Counted::new(ours, health.clone());
        assert_eq!(c.peer(), "duplex");
        let writer = tokio::spawn(async move {
            for ch in chunks {
                peer.write_all(&ch).await.unwrap();
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        });
        let mut got = Vec::new();
        let mut buf = [0u8; 7];
        let r = loop {
            match c.read(&mut buf).await {
                Ok(0) => break Ok(got),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) => break Err(e),
            }
        };
        writer.await.unwrap();
        let open = health.open_connections().load(Ordering::SeqCst);
        (r, open)
    }

    #[tokio::test]
    async fn a_negotiation_in_pieces_passes_unchanged() {
        let pieces = POSTFIX.iter().map(|&b| vec![b]).collect();
        let (got, open) = read_through(pieces).await;
        assert_eq!(got.unwrap(), POSTFIX);
        assert_eq!(open, 1, "counted while open");
        let (got, _) = read_through(vec![POSTFIX[..4].to_vec(), POSTFIX[4..].to_vec()]).await;
        assert_eq!(got.unwrap(), POSTFIX);
    }

    #[tokio::test]
    async fn a_stranger_is_cut_off_at_the_first_wrong_octet() {
        let (got, _) = read_through(vec![vec![0, 0], vec![1], b"rest".to_vec()]).await;
        let e = got.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        let (got, _) = read_through(vec![b"GET / HTTP/1.0\r\n\r\n".to_vec()]).await;
        assert!(got.is_err());
        // Nothing at all, then end of file: a probe, read as end of file.
        let (got, _) = read_through(vec![]).await;
        assert_eq!(got.unwrap(), b"");
        // Half a negotiation, then end of file: end of file to the reader.
        let (got, _) = read_through(vec![vec![0, 0, 0]]).await;
        assert_eq!(got.unwrap(), b"");
    }
}
