//! The listening socket and what wraps it: [`bind`], TCP connections that acknowledge
//! and send at once ([`NoDelay`]), the [`Gate`] that closes at shutdown and refuses
//! connections past `max_connections`, and [`Counted`] connections.

use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use indymilter::Listener;

use super::endpoint::Status;
use crate::config::{Config, SocketSpec};

/// Binds the listening socket; for unix: sockets removes a stale socket file first (only
/// if it is a socket) and applies `socket_mode` / `socket_group`.
pub async fn bind(spec: &SocketSpec, cfg: &Config) -> Result<AnyListener, String> {
    match spec {
        SocketSpec::Inet { host, port } => tokio::net::TcpListener::bind((host.as_str(), *port))
            .await
            .map(|l| AnyListener::Tcp(NoDelay(l)))
            .map_err(|e| format!("cannot listen on {spec}: {e}")),
        SocketSpec::Unix(path) => {
            if let Ok(m) = std::fs::symlink_metadata(path) {
                if m.file_type().is_socket() {
                    std::fs::remove_file(path).map_err(|e| {
                        format!("cannot remove stale socket {}: {e}", path.display())
                    })?;
                } else {
                    return Err(format!(
                        "{} exists and is not a socket; not touching it",
                        path.display()
                    ));
                }
            }
            let l = tokio::net::UnixListener::bind(path)
                .map_err(|e| format!("cannot listen on {spec}: {e}"))?;
            if let Some(mode) = cfg.listen.socket_mode {
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                    .map_err(|e| format!("socket_mode on {}: {e}", path.display()))?;
            }
            if let Some(group) = &cfg.listen.socket_group {
                let gid = group_id(group)
                    .ok_or_else(|| format!("socket_group {group:?}: no such group"))?;
                std::os::unix::fs::chown(path, None, Some(gid))
                    .map_err(|e| format!("socket_group on {}: {e}", path.display()))?;
            }
            Ok(AnyListener::Unix(l))
        }
    }
}

/// A numeric gid, or a name looked up in /etc/group.
fn group_id(group: &str) -> Option<u32> {
    if let Ok(n) = group.parse() {
        return Some(n);
    }
    let text = std::fs::read_to_string("/etc/group").ok()?;
    text.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        let _pw = f.next()?;
        let gid = f.next()?;
        (name == group).then(|| gid.parse().ok()).flatten()
    })
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
pub(super) struct Gate<L> {
    inner: Option<L>,
    state: Arc<GateState>,
    status: Arc<Status>,
    max_connections: usize,
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
        status: Arc<Status>,
        max_connections: usize,
    ) -> (Gate<L>, Arc<GateState>) {
        let state = Arc::new(GateState::default());
        let gate = Gate {
            inner: Some(inner),
            state: state.clone(),
            status,
            max_connections,
        };
        (gate, state)
    }

    fn refuse(&mut self, open: usize) {
        crate::milter::metrics::connection_refused();
        let max = self.max_connections;
        crate::milter::throttle::CONNECTIONS_REFUSED
            .hit(|| format!("{open} open, max_connections = {max}"));
    }
}

impl<L: Listener<Io: PeerName>> Listener for Gate<L> {
    type Io = Counted<L::Io>;

    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Self::Io>> {
        if let Ok(mut g) = self.state.waker.lock() {
            *g = Some(cx.waker().clone());
        }
        if self.state.closed.load(Ordering::SeqCst) {
            self.inner = None;
        }
        // A flood of connections over the limit must not keep this task from others.
        for _ in 0..64 {
            let Some(l) = self.inner.as_mut() else {
                return Poll::Pending;
            };
            let io = match l.poll_accept(cx) {
                Poll::Ready(Ok(io)) => io,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            let open = self.status.open_connections().load(Ordering::SeqCst);
            if open >= self.max_connections {
                // Dropping it closes it: the MTA reads end of file (or a reset).
                drop(io);
                self.refuse(open);
                continue;
            }
            return Poll::Ready(Ok(Counted::new(io, self.status.clone())));
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// How log lines name the MTA end of an accepted milter connection.
pub trait PeerName {
    fn peer_name(&self) -> String;
}

impl PeerName for tokio::net::TcpStream {
    fn peer_name(&self) -> String {
        self.peer_addr()
            .map_or_else(|_| "an unknown TCP peer".into(), |a| a.to_string())
    }
}

impl PeerName for QuickAck {
    fn peer_name(&self) -> String {
        self.0.peer_name()
    }
}

impl PeerName for tokio::net::UnixStream {
    fn peer_name(&self) -> String {
        // Unix socket peers are unnamed; the path is the listening socket's.
        "unix socket".into()
    }
}

impl<A: PeerName, B: PeerName> PeerName for indymilter::EitherStream<A, B> {
    fn peer_name(&self) -> String {
        match self {
            indymilter::EitherStream::Tcp(a) => a.peer_name(),
            indymilter::EitherStream::Unix(b) => b.peer_name(),
        }
    }
}

/// A milter connection, counted as open in [`Status`] until dropped.
pub struct Counted<T> {
    io: T,
    status: Arc<Status>,
    peer: String,
}

impl<T: PeerName> Counted<T> {
    fn new(io: T, status: Arc<Status>) -> Counted<T> {
        status.open_connections().fetch_add(1, Ordering::SeqCst);
        crate::milter::metrics::connections_open(1.0);
        let peer = io.peer_name();
        Counted { io, status, peer }
    }
}

impl<T> Counted<T> {
    /// The MTA's address ("127.0.0.1:41234") or "unix socket".
    pub fn peer(&self) -> &str {
        &self.peer
    }
}

impl<T> Drop for Counted<T> {
    fn drop(&mut self) {
        self.status
            .open_connections()
            .fetch_sub(1, Ordering::SeqCst);
        crate::milter::metrics::connections_open(-1.0);
    }
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Counted<T> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_read(cx, buf)
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
