//! TCP milter connections that acknowledge at once and send at once ([`NoDelay`],
//! [`QuickAck`]).

use std::io;
use std::task::{Context, Poll};

use indymilter::Listener;

use super::PeerName;

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

impl PeerName for QuickAck {
    fn peer_name(&self) -> String {
        self.0.peer_name()
    }
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
