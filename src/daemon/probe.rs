//! `mimeref-milter probe`: whether a running daemon takes mail, for a container's
//! `HEALTHCHECK` or a monitoring check, with nothing but this binary (no curl in the
//! image). Two ways of asking, both with plain blocking sockets and a deadline:
//!
//! - `/readyz` of `metrics_listen`, when the configuration has one: it knows what the
//!   socket alone does not (shutting down, the unix socket file lost, every
//!   `max_connections` slot taken);
//! - otherwise the milter socket itself: connect and complete an option negotiation, as
//!   the MTA's first exchange would.
//!
//! The answer is one line, for the health log of `podman inspect` or a check's output.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use crate::config::{Config, SocketSpec};

/// What to ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeTarget {
    /// `GET /readyz` on the HTTP endpoint.
    Readyz(SocketAddr),
    /// An option negotiation on the milter socket.
    Milter(SocketSpec),
}

impl ProbeTarget {
    /// `/readyz` when the configuration has `metrics_listen` and `milter` is false;
    /// else the milter socket, `socket` (as given to `serve --socket`) or the
    /// configuration's.
    pub fn from_config(cfg: &Config, socket: Option<SocketSpec>, milter: bool) -> ProbeTarget {
        match (cfg.listen().metrics_listen, socket, milter) {
            (Some(addr), None, false) => ProbeTarget::Readyz(addr),
            (_, Some(spec), _) => ProbeTarget::Milter(spec),
            _ => ProbeTarget::Milter(cfg.listen().socket.clone()),
        }
    }
}

/// Milter protocol version and the command bytes of the negotiation (libmilter's
/// mfdef.h): the probe offers what Postfix 3 offers.
const SMFI_VERSION: u32 = 6;
const SMFIC_OPTNEG: u8 = b'O';
const SMFIC_QUIT: u8 = b'Q';
const OFFERED_ACTIONS: u32 = 0x1ff;
const OFFERED_PROTOCOL: u32 = 0x1f_ffff;
/// Longer replies are not a milter's negotiation answer.
const MAX_REPLY: u32 = 64 * 1024;

/// Asks `target` within `timeout`: Ok with what it answered when it takes mail, Err
/// with why not. Never panics, never waits past the deadline (connect, write and
/// each read are bounded by what is left of it).
pub fn probe(target: &ProbeTarget, timeout: Duration) -> Result<String, String> {
    let deadline = Instant::now() + timeout;
    match target {
        ProbeTarget::Readyz(addr) => readyz(*addr, deadline),
        ProbeTarget::Milter(spec) => milter(spec, deadline),
    }
}

/// An address the daemon's wildcard listener also answers on: a probe cannot
/// connect to 0.0.0.0 or ::, and runs on the daemon's host (or in its container).
fn reachable(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V4(a) if a.ip().is_unspecified() => {
            SocketAddr::from(([127, 0, 0, 1], a.port()))
        }
        SocketAddr::V6(a) if a.ip().is_unspecified() => {
            SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, a.port()))
        }
        a => a,
    }
}

fn left(deadline: Instant) -> Result<Duration, String> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
        .ok_or_else(|| "no answer before the deadline".to_string())
}

fn tcp(addr: SocketAddr, deadline: Instant) -> Result<TcpStream, String> {
    let addr = reachable(addr);
    let s = TcpStream::connect_timeout(&addr, left(deadline)?)
        .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    Ok(s)
}

/// Bounds each read and write of `s` by what is left of the deadline.
trait Deadline {
    fn bound(&self, deadline: Instant) -> Result<(), String>;
}

impl Deadline for TcpStream {
    fn bound(&self, deadline: Instant) -> Result<(), String> {
        let d = left(deadline)?;
        self.set_read_timeout(Some(d))
            .and_then(|_| self.set_write_timeout(Some(d)))
            .map_err(|e| e.to_string())
    }
}

impl Deadline for UnixStream {
    fn bound(&self, deadline: Instant) -> Result<(), String> {
        let d = left(deadline)?;
        self.set_read_timeout(Some(d))
            .and_then(|_| self.set_write_timeout(Some(d)))
            .map_err(|e| e.to_string())
    }
}

fn io_error(what: &str, e: std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            format!("{what}: no answer before the deadline")
        }
        _ => format!("{what}: {e}"),
    }
}

fn readyz(addr: SocketAddr, deadline: Instant) -> Result<String, String> {
    let url = format!("http://{}/readyz", reachable(addr));
    let mut s = tcp(addr, deadline).map_err(|e| format!("{url}: {e}"))?;
    s.bound(deadline)?;
    s.write_all(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .map_err(|e| io_error(&url, e))?;
    // The body is one short line; more is not read.
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        s.bound(deadline).map_err(|e| format!("{url}: {e}"))?;
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if buf.len() > 16 * 1024 {
                    break;
                }
            }
            Err(e) => return Err(io_error(&url, e)),
        }
    }
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or_else(|| format!("{url}: not an HTTP answer"))?;
    let line = body.lines().next().unwrap_or("").trim();
    // From the network: no control character reaches the health log.
    let line: String = line
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .take(200)
        .collect();
    match status {
        200 => Ok(format!("{url}: {line}")),
        _ if line.is_empty() => Err(format!("{url}: HTTP {status}")),
        _ => Err(format!("{url}: HTTP {status}: {line}")),
    }
}

fn milter(spec: &SocketSpec, deadline: Instant) -> Result<String, String> {
    let name = spec.to_string();
    let answer = match spec {
        SocketSpec::Inet { host, port } => {
            let addr = (host.as_str(), *port)
                .to_socket_addrs()
                .map_err(|e| format!("{name}: {e}"))?
                .next()
                .ok_or_else(|| format!("{name}: no address for {host}"))?;
            let mut s = tcp(addr, deadline).map_err(|e| format!("{name}: {e}"))?;
            negotiate(&mut s, deadline)
        }
        SocketSpec::Unix(path) => {
            // connect(2) on a unix socket does not wait for the peer's accept: no
            // deadline needed before the first read.
            let mut s =
                UnixStream::connect(path).map_err(|e| format!("{name}: cannot connect: {e}"))?;
            negotiate(&mut s, deadline)
        }
    };
    answer
        .map(|v| format!("{name}: milter protocol version {v} negotiated"))
        .map_err(|e| format!("{name}: {e}"))
}

/// Offers the options and reads the milter's answer: its protocol version, or why
/// the answer is not one. Says goodbye (SMFIC_QUIT) so that the daemon counts a
/// connection closed as clients close it.
fn negotiate<S: Read + Write + Deadline>(s: &mut S, deadline: Instant) -> Result<u32, String> {
    let mut packet = Vec::with_capacity(17);
    packet.extend_from_slice(&13u32.to_be_bytes());
    packet.push(SMFIC_OPTNEG);
    for v in [SMFI_VERSION, OFFERED_ACTIONS, OFFERED_PROTOCOL] {
        packet.extend_from_slice(&v.to_be_bytes());
    }
    s.bound(deadline)?;
    s.write_all(&packet)
        .map_err(|e| io_error("sending the negotiation", e))?;
    let mut len = [0u8; 4];
    s.bound(deadline)?;
    s.read_exact(&mut len).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => {
            "closed the connection instead of negotiating".to_string()
        }
        _ => io_error("reading the negotiation", e),
    })?;
    let len = u32::from_be_bytes(len);
    if len == 0 || len > MAX_REPLY {
        return Err(format!("answered a packet of {len} octets, not a milter's"));
    }
    let mut reply = vec![0u8; len as usize];
    s.bound(deadline)?;
    s.read_exact(&mut reply)
        .map_err(|e| io_error("reading the negotiation", e))?;
    if reply[0] != SMFIC_OPTNEG || reply.len() < 13 {
        return Err(format!(
            "answered command {:?} ({} octets), not the option negotiation",
            char::from(reply[0]),
            reply.len()
        ));
    }
    let version = u32::from_be_bytes([reply[1], reply[2], reply[3], reply[4]]);
    let _ = s.bound(deadline);
    let _ = s.write_all(&[0, 0, 0, 1, SMFIC_QUIT]);
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::thread;

    /// A server that reads what comes and writes `answer`, once.
    fn serve_once(answer: &'static [u8]) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = [0u8; 512];
            let _ = s.read(&mut buf);
            let _ = s.write_all(answer);
        });
        addr
    }

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn readyz_status_decides() {
        let ok = serve_once(b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nready\n");
        assert_eq!(
            probe(&ProbeTarget::Readyz(ok), SECOND),
            Ok(format!("http://{ok}/readyz: ready"))
        );
        let draining =
            serve_once(b"HTTP/1.1 503 Service Unavailable\r\n\r\nnot ready: shutting down\n");
        assert_eq!(
            probe(&ProbeTarget::Readyz(draining), SECOND),
            Err(format!(
                "http://{draining}/readyz: HTTP 503: not ready: shutting down"
            ))
        );
        let garbage = serve_once(b"\x00\x00\x00\x01Q");
        assert!(probe(&ProbeTarget::Readyz(garbage), SECOND)
            .unwrap_err()
            .ends_with("not an HTTP answer"));
    }

    #[test]
    fn a_silent_peer_meets_the_deadline() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let spec = SocketSpec::Inet {
            host: "127.0.0.1".into(),
            port: addr.port(),
        };
        let start = Instant::now();
        let err = probe(&ProbeTarget::Milter(spec), Duration::from_millis(300)).unwrap_err();
        assert!(err.ends_with("no answer before the deadline"), "{err}");
        assert!(start.elapsed() < Duration::from_secs(2));
        drop(l);
    }

    #[test]
    fn a_peer_that_is_no_milter_is_not_ready() {
        let http = serve_once(b"HTTP/1.1 400 Bad Request\r\n\r\n");
        let spec = SocketSpec::Inet {
            host: "0.0.0.0".into(),
            port: http.port(),
        };
        let err = probe(&ProbeTarget::Milter(spec), SECOND).unwrap_err();
        assert!(err.contains("not a milter's"), "{err}");
    }

    #[test]
    fn nothing_listening_says_so() {
        let gone = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let err = probe(&ProbeTarget::Readyz(gone), SECOND).unwrap_err();
        assert!(err.contains("cannot connect"), "{err}");
        let err = probe(
            &ProbeTarget::Milter(SocketSpec::Unix("/nonexistent/milter.sock".into())),
            SECOND,
        )
        .unwrap_err();
        assert!(
            err.starts_with("unix:/nonexistent/milter.sock: cannot connect"),
            "{err}"
        );
    }
}
