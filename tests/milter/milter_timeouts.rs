//! Time limits on the real binary, driven by a raw milter client that can do what an
//! MTA must not: send a command one octet at a time, go quiet, or stop reading its
//! answer. Each limit (`connection_timeout` per command, `transaction_timeout` per mail
//! transaction, `reply_timeout` for the answer) closes the connection within its time,
//! is logged and counted, and frees the connection's slot (max_connections = 1: the
//! next MTA connection is served). A transaction the MTA abandons is logged and counted
//! too.

#[path = "../support/mod.rs"]
mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use support::mta::{free_port, Daemon};

/// Milter protocol options (libmilter's SMFIP_*) the raw client reads in the reply to
/// its negotiation.
const NR_CONN: u32 = 0x1000;
const NO_RCPT: u32 = 0x8;
const NR_RCPT: u32 = 0x8000;
const NR_HDR: u32 = 0x80;
const NR_EOH: u32 = 0x40000;
const NR_BODY: u32 = 0x80000;

/// A milter client on raw packets.
struct Raw {
    s: TcpStream,
    /// The protocol options the daemon asked for.
    opts: u32,
}

fn packet(cmd: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = ((payload.len() + 1) as u32).to_be_bytes().to_vec();
    p.push(cmd);
    p.extend_from_slice(payload);
    p
}

impl Raw {
    /// Connects to the daemon and negotiates as Postfix does (every action and option
    /// offered); `rcvbuf`: a small receive buffer, for a client that stops reading.
    /// Tries again for 2 s while the one slot is taken (the connection is closed at
    /// once then): the previous connection may not be quite gone yet.
    fn open(port: u16, rcvbuf: Option<usize>) -> Raw {
        let end = Instant::now() + Duration::from_secs(2);
        loop {
            match Raw::try_open(port, rcvbuf) {
                Some(r) => return r,
                None if Instant::now() < end => std::thread::sleep(Duration::from_millis(20)),
                None => panic!("no free connection slot within 2 s"),
            }
        }
    }

    fn try_open(port: u16, rcvbuf: Option<usize>) -> Option<Raw> {
        let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
        let sock =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        if let Some(n) = rcvbuf {
            sock.set_recv_buffer_size(n).unwrap();
        }
        sock.connect(&addr.into()).unwrap();
        let s: TcpStream = sock.into();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut r = Raw { s, opts: 0 };
        let mut neg = Vec::new();
        for w in [6u32, 0x1ff, 0x1f_ffff] {
            neg.extend_from_slice(&w.to_be_bytes());
        }
        r.send(b'O', &neg);
        let (kind, reply) = r.read().ok()?;
        assert_eq!(kind, b'O', "{reply:?}");
        r.opts = u32::from_be_bytes(reply[8..12].try_into().unwrap());
        Some(r)
    }

    fn send(&mut self, cmd: u8, payload: &[u8]) {
        self.s.write_all(&packet(cmd, payload)).unwrap();
    }

    /// The next packet, or the error (EOF: UnexpectedEof).
    fn read(&mut self) -> std::io::Result<(u8, Vec<u8>)> {
        let mut len = [0u8; 4];
        self.s.read_exact(&mut len)?;
        let mut p = vec![0u8; u32::from_be_bytes(len) as usize];
        self.s.read_exact(&mut p)?;
        Ok((p[0], p[1..].to_vec()))
    }

    /// Sends `cmd` and, unless the daemon negotiated no reply for it (`no_reply`),
    /// expects "continue".
    fn step(&mut self, cmd: u8, payload: &[u8], no_reply: u32) {
        self.send(cmd, payload);
        if self.opts & no_reply == 0 {
            let (kind, p) = self.read().unwrap();
            assert_eq!(kind, b'c', "reply to {}: {p:?}", cmd as char);
        }
    }

    fn connect(&mut self) {
        self.step(b'C', b"client.example\x004\xc3\x50192.0.2.1\0", NR_CONN);
    }

    /// MAIL FROM and RCPT TO (where the daemon wants it).
    fn envelope(&mut self) {
        self.step(b'M', b"<a@example.org>\0", 0);
        if self.opts & NO_RCPT == 0 {
            self.step(b'R', b"<b@example.net>\0", NR_RCPT);
        }
    }

    /// Header fields, end of header and the body in chunks of 64 KiB, then end of
    /// message (its answer is not read).
    fn message(&mut self, headers: &[(&str, &str)], body: &[u8]) {
        for (name, value) in headers {
            self.step(b'L', format!("{name}\0 {value}\0").as_bytes(), NR_HDR);
        }
        self.step(b'N', b"", NR_EOH);
        for chunk in body.chunks(65535) {
            self.step(b'B', chunk, NR_BODY);
        }
        self.send(b'E', b"");
    }

    /// The answer to end of message: its modifications, then the final reply's kind.
    fn verdict(&mut self) -> u8 {
        loop {
            let (kind, _) = self.read().expect("an answer to end of message");
            if matches!(kind, b'a' | b'c' | b'r' | b't' | b'y' | b'd') {
                return kind;
            }
        }
    }

    /// Waits until the daemon closes the connection (EOF or reset), reading and
    /// dropping what it still sends; panics when it is still open after `within`.
    fn closed_within(&mut self, within: Duration) -> Duration {
        let t = Instant::now();
        self.s.set_read_timeout(Some(within)).unwrap();
        let mut buf = [0u8; 65536];
        loop {
            match self.s.read(&mut buf) {
                Ok(0) => return t.elapsed(),
                Ok(_) if t.elapsed() < within => {}
                Err(e)
                    if !matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return t.elapsed()
                }
                _ => panic!("connection still open after {:?}", t.elapsed()),
            }
        }
    }
}

const CLEAN: &[(&str, &str)] = &[
    ("From", "alice@example.org"),
    ("To", "bob@example.net"),
    ("Subject", "hello"),
    ("Message-ID", "<clean@example.org>"),
];

/// A whole clean message on a new connection: accepted, which shows that a slot is
/// free (the tests run with max_connections = 1).
fn served(port: u16) {
    let mut c = Raw::open(port, None);
    c.connect();
    c.envelope();
    c.message(CLEAN, b"Hello.\r\n");
    assert_eq!(c.verdict(), b'a');
    c.send(b'Q', b"");
}

fn start(config: &str) -> (Daemon, u16) {
    let http = free_port();
    let d = Daemon::start(
        &format!("metrics_listen = \"127.0.0.1:{http}\"\nmax_connections = 1\n{config}"),
        &[],
    );
    (d, http)
}

fn metrics(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// The value of the series `series` (name and labels, as /metrics writes them).
fn metric(port: u16, series: &str) -> u64 {
    let body = metrics(port);
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no series {series}:\n{body}"))
}

/// Waits (15 s at most) until the daemon's log has a line with every one of `parts`.
fn logged(d: &Daemon, parts: &[&str]) -> String {
    let end = Instant::now() + Duration::from_secs(15);
    loop {
        let log = d.log();
        if let Some(l) = log.lines().find(|l| parts.iter().all(|p| l.contains(p))) {
            return l.to_string();
        }
        assert!(Instant::now() < end, "no line with {parts:?}:\n{log}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_dripping_transaction_is_cut_at_transaction_timeout() {
    let (d, http) = start("transaction_timeout = 1\n");
    let mut c = Raw::open(d.port, None);
    c.connect();
    let t = Instant::now();
    c.envelope();
    // A header field one octet every 50 ms: each octet well within connection_timeout
    // (7210 s), the field never complete.
    let mut writer = c.s.try_clone().unwrap();
    let drip = std::thread::spawn(move || {
        for b in packet(b'L', &[b'X'; 200]) {
            if writer.write_all(&[b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    c.closed_within(Duration::from_secs(10));
    let took = t.elapsed();
    // Well before the drip would end (10 s) or connection_timeout would pass.
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "cut {took:?} after MAIL FROM, transaction_timeout = 1 s"
    );
    eprintln!("dripping transaction cut {took:?} after MAIL FROM");
    let line = logged(
        &d,
        &[
            "cut 1 mail transaction(s) not over within transaction_timeout",
            "in a mail transaction (queue id NOQUEUE), 1 s",
            "milter_default_action",
        ],
    );
    assert!(line.contains("from the MTA at 127.0.0.1:"), "{line}");
    assert_eq!(
        metric(http, "mimeref_timeouts_total{kind=\"transaction\"}"),
        1
    );
    assert_eq!(
        metric(
            http,
            "mimeref_transactions_cut_total{cause=\"transaction_timeout\"}"
        ),
        1
    );
    assert_eq!(metric(http, "mimeref_timeouts_total{kind=\"read\"}"), 0);
    // The slot is free.
    served(d.port);
    drip.join().unwrap();
    // A transaction within its time is not cut: two whole messages on one connection
    // take longer than transaction_timeout together, each less.
    let mut c = Raw::open(d.port, None);
    c.connect();
    for _ in 0..2 {
        c.envelope();
        std::thread::sleep(Duration::from_millis(600));
        c.message(CLEAN, b"Hello.\r\n");
        assert_eq!(c.verdict(), b'a');
    }
    c.send(b'Q', b"");
    assert_eq!(
        metric(http, "mimeref_timeouts_total{kind=\"transaction\"}"),
        1
    );
}

#[test]
fn an_idle_connection_is_closed_at_connection_timeout_and_logged() {
    let (d, http) = start("connection_timeout = 1\n");
    let mut c = Raw::open(d.port, None);
    c.connect();
    let took = c.closed_within(Duration::from_secs(5));
    eprintln!("idle connection closed after {took:?}");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(3),
        "closed after {took:?}, connection_timeout = 1 s"
    );
    logged(
        &d,
        &[
            "closed 1 milter connection(s) that sent no complete command within connection_timeout",
            "between mail transactions, 1 s",
        ],
    );
    assert_eq!(metric(http, "mimeref_timeouts_total{kind=\"read\"}"), 1);
    // Quiet in the middle of a transaction: the transaction is cut, and said so.
    let mut c = Raw::open(d.port, None);
    c.connect();
    c.envelope();
    c.closed_within(Duration::from_secs(5));
    logged(
        &d,
        &[
            "no complete command within connection_timeout",
            "in a mail transaction (queue id NOQUEUE), 1 s",
        ],
    );
    assert_eq!(metric(http, "mimeref_timeouts_total{kind=\"read\"}"), 2);
    assert_eq!(
        metric(
            http,
            "mimeref_transactions_cut_total{cause=\"read_timeout\"}"
        ),
        1
    );
    served(d.port);
}

#[test]
fn a_transaction_the_mta_abandons_is_logged_and_counted() {
    let (d, http) = start("");
    let mut c = Raw::open(d.port, None);
    c.connect();
    c.envelope();
    c.step(b'L', b"Subject\0 half a message\0", NR_HDR);
    c.s.shutdown(Shutdown::Both).unwrap();
    drop(c);
    logged(
        &d,
        &[
            "1 mail transaction(s) ended before end of message",
            "in a mail transaction (queue id NOQUEUE): the MTA closed the connection",
        ],
    );
    assert_eq!(
        metric(http, "mimeref_transactions_cut_total{cause=\"closed\"}"),
        1
    );
    // A QUIT between transactions is no cut.
    served(d.port);
    assert_eq!(
        metric(http, "mimeref_transactions_cut_total{cause=\"closed\"}"),
        1
    );
}

/// The nested external-body message of tests/fixtures/milter, its text part padded to
/// `size` octets: the daemon fixes the nested part and replaces the whole body.
fn big_fixable(size: usize) -> (Vec<(&'static str, &'static str)>, Vec<u8>) {
    let headers = vec![
        ("From", "alice@example.org"),
        ("To", "bob@example.net"),
        ("Subject", "nested"),
        ("Message-ID", "<nested-extbody@example.org>"),
        ("MIME-Version", "1.0"),
        ("Content-Type", "multipart/mixed; boundary=\"outer\""),
    ];
    let mut body = b"--outer\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\n".to_vec();
    let line = [b'x'; 76];
    while body.len() < size {
        body.extend_from_slice(&line);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(
        b"\r\n--outer\r\nContent-Type: message/external-body; access-type=URL;\r\n \
          URL=http://www.example.com/reports/2024/quarterly/finance/summary-of-all-departments.pdf\r\n\
          \r\nContent-Type: application/pdf\r\nContent-ID: <report2@example.org>\r\n\r\n--outer--\r\n",
    );
    (headers, body)
}

#[test]
fn an_mta_that_does_not_read_its_answer_is_cut_at_reply_timeout() {
    let (d, http) = start("reply_timeout = 1\n");
    // Larger than what the kernel buffers between the two ends (the daemon's send
    // buffer grows to net.ipv4.tcp_wmem's maximum, 4 MiB here; the client's receive
    // buffer is kept small).
    let (headers, body) = big_fixable(8 << 20);
    // The same message read at once: fixed, the body replaced (or this test proves
    // nothing).
    let mut c = Raw::open(d.port, None);
    c.connect();
    c.envelope();
    c.message(&headers, &body);
    let mut replaced = false;
    loop {
        let (kind, _) = c.read().expect("answer to end of message");
        replaced |= kind == b'b';
        if kind == b'a' {
            break;
        }
    }
    assert!(replaced, "the body was not replaced");
    c.send(b'Q', b"");
    drop(c);

    let mut c = Raw::open(d.port, Some(4096));
    c.connect();
    c.envelope();
    c.message(&headers, &body);
    let t = Instant::now();
    // Does not read; the daemon stops writing after reply_timeout and closes.
    let line = logged(
        &d,
        &[
            "closed 1 milter connection(s) whose MTA did not read the answer within reply_timeout",
            "answering end of message (queue id NOQUEUE), 1 s",
        ],
    );
    eprintln!("{:?} after end of message: {line}", t.elapsed());
    // The analysis of 8 MB comes first (a debug build on a loaded host: seconds).
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(metric(http, "mimeref_timeouts_total{kind=\"reply\"}"), 1);
    // What was written before the cut arrives, then the end: no final reply.
    let mut rest = Vec::new();
    c.s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = c.s.read_to_end(&mut rest);
    assert!(rest.len() < body.len(), "{} octets came", rest.len());
    served(d.port);
    // A timeout, not an internal error: no tempfail can reach the MTA any more.
    assert!(!d.log().contains("internal error"), "{}", d.log());
    assert_eq!(
        metric(
            http,
            "mimeref_internal_errors_total{cause=\"send\",action=\"tempfail\"}"
        ),
        0
    );
}
