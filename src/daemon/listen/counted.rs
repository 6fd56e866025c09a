//! [`Counted`] milter connections: counted as open while they last, numbered for the
//! log, and closed at once when the peer does not speak milter.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use super::PeerName;
use crate::daemon::health::Health;

/// The number of the next milter connection accepted since the daemon started (from
/// 1, refused ones included), which every log line about a connection names.
pub(super) fn next_connection() -> u64 {
    static CONNECTIONS: AtomicU64 = AtomicU64::new(0);
    CONNECTIONS.fetch_add(1, Ordering::Relaxed) + 1
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
    pub(super) fn new(io: T, health: Arc<Health>) -> Counted<T> {
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
    use std::time::Duration;
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
