//! Protocol faults against the running daemon: clients that vanish mid-body, abort,
//! talk HTTP or garbage, send oversized packets, stall, or come 500 at once; reloads and
//! SIGTERM under load on the real binary. The daemon stays up (or exits cleanly on
//! SIGTERM), and every complete message gets an explicit verdict.
//!
//! "Nothing left behind" is checked through shutdown: a message still counted in flight
//! would make `stop()` wait for the whole `shutdown_timeout` (set far above the bound).

#[path = "../support/mod.rs"]
mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indymilter_test::{ProtoOpts, Status};
use support::milter::*;

/// In-flight messages left behind would hold shutdown for this long.
const HOLD: &str = "shutdown_timeout = 120\n";

async fn stop_quickly(m: Milter) {
    let t = Instant::now();
    m.stop().await;
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "shutdown waited {:?}: a message was left in flight",
        t.elapsed()
    );
}

/// A full message on a fresh connection gets a verdict.
async fn still_serves(m: &Milter) {
    let mut c = m.conn().await;
    accept_one(&mut c, "192.0.2.1", "milter/clean.eml").await;
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_disconnects_mid_body_and_aborts() {
    let m = Milter::start("faults-disconnect", HOLD).await;
    let msg = eml(&fixture("milter/nested-extbody.eml"));
    for _ in 0..20 {
        let mut c = m.conn().await;
        connect(&mut c, "192.0.2.1", None).await;
        c.mail(["<a@example.org>"]).await.unwrap();
        send_headers(&mut c, &msg).await;
        c.body(msg.body[..msg.body.len() / 2].to_vec())
            .await
            .unwrap();
        drop(c); // the MTA process died
    }
    // Abort mid-body, then a whole message on the same connection.
    let mut c = m.conn().await;
    connect(&mut c, "192.0.2.1", None).await;
    c.mail(["<a@example.org>"]).await.unwrap();
    send_headers(&mut c, &msg).await;
    c.abort().await.unwrap();
    let (_, st) = send(&mut c, &Envelope::default(), &msg).await;
    assert_eq!(st, Status::Accept, "after abort");
    c.close().await.unwrap();
    still_serves(&m).await;
    stop_quickly(m).await;
}

/// Writes `bytes` (then closes its sending side, as a probe does, when `hang_up`), and
/// reads until the daemon closes (or 10 s pass). Returns what it answered; the point is
/// that it closes rather than hangs, and survives.
fn poke(addr: SocketAddr, bytes: &[u8], hang_up: bool) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // The daemon may close before it has read everything: a broken pipe is fine.
    let _ = s.write_all(bytes);
    if hang_up {
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
    let mut out = Vec::new();
    let t = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                panic!("daemon neither answered nor closed after {:?}", t.elapsed())
            }
            Err(_) => break, // reset
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_probes_and_oversized_packets() {
    let m = Milter::start("faults-garbage", HOLD).await;
    let addr = m.addr;
    let probes: Vec<(&str, Vec<u8>)> = vec![
        ("TCP health check", Vec::new()),
        (
            "HTTP GET",
            b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "TLS hello",
            vec![0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc],
        ),
        ("length 4 GB", vec![0xff, 0xff, 0xff, 0xff, b'O']),
        ("length 0", vec![0, 0, 0, 0]),
        ("unknown command", vec![0, 0, 0, 1, b'Z']),
        ("truncated packet", vec![0, 0, 0, 100, b'O', 0, 0]),
        ("optneg too short", vec![0, 0, 0, 2, b'O', 6]),
        ("header before negotiation", b"\0\0\0\x06LX\0y\0\0".to_vec()),
        ("10 MB packet", {
            // A valid header command, over the 1 MB the protocol allows.
            let len: u32 = 10 * 1024 * 1024;
            let mut v = len.to_be_bytes().to_vec();
            v.push(b'L');
            v.resize(4 + len as usize, b'a');
            v
        }),
        (
            "random",
            (0..65536u32)
                .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
                .collect(),
        ),
    ];
    for (name, bytes) in probes {
        let t = Instant::now();
        let answer = tokio::task::spawn_blocking(move || poke(addr, &bytes, true))
            .await
            .unwrap();
        eprintln!(
            "{name}: closed after {:?}, {} octets answered",
            t.elapsed(),
            answer.len()
        );
        still_serves(&m).await;
    }
    stop_quickly(m).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_client_is_timed_out_and_others_are_served() {
    let m = Milter::start("faults-slow", &format!("connection_timeout = 2\n{HOLD}")).await;
    let addr = m.addr;
    let t = Instant::now();
    // Connects, negotiates nothing, says nothing.
    let silent = tokio::task::spawn_blocking(move || poke(addr, b"", false));
    // Meanwhile everyone else is served.
    still_serves(&m).await;
    silent.await.unwrap();
    let took = t.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(30),
        "silent client closed after {took:?} (timeout 2 s)"
    );
    // Stalls in the middle of a message.
    let mut c = m.conn().await;
    connect(&mut c, "192.0.2.1", None).await;
    c.mail(["<a@example.org>"]).await.unwrap();
    // About elapsed time: the stall must outlast connection_timeout (2 s).
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        c.rcpt(["<b@example.net>"]).await.is_err(),
        "stalled connection still open after the timeout"
    );
    still_serves(&m).await;
    stop_quickly(m).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_concurrent_connections() {
    let m = Milter::start(
        "faults-500",
        &format!("max_connections = 1000\n{HOLD}[policy.inbound]\n\"related-cid-duplicate\" = \"reject\"\n"),
    )
    .await;
    let m = Arc::new(m);
    let clean = Arc::new(eml(&fixture("milter/clean.eml")));
    let cid = Arc::new(eml(&fixture("milter/cid-dup.eml")));
    let mut tasks = Vec::new();
    // All 500 open first, then all send: the daemon holds 500 sessions at once.
    let barrier = Arc::new(tokio::sync::Barrier::new(500));
    for i in 0..500 {
        let (m, clean, cid, barrier) = (m.clone(), clean.clone(), cid.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            let mut c = m.conn().await;
            connect(&mut c, "192.0.2.1", None).await;
            barrier.wait().await;
            let bad = i % 5 == 0;
            let (_, st) = send(
                &mut c,
                &Envelope::default(),
                if bad { &cid } else { &clean },
            )
            .await;
            c.close().await.unwrap();
            (bad, st)
        }));
    }
    let (mut accepted, mut rejected) = (0, 0);
    for t in tasks {
        match tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .expect("a connection got no verdict")
            .unwrap()
        {
            (false, Status::Accept) => accepted += 1,
            (true, Status::Reject { .. }) => rejected += 1,
            other => panic!("unexpected verdict {other:?}"),
        }
    }
    assert_eq!((accepted, rejected), (400, 100));
    let m = Arc::try_unwrap(m).unwrap_or_else(|_| panic!("milter still shared"));
    stop_quickly(m).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloads_under_load_lose_nothing() {
    let m = Arc::new(Milter::start("faults-reload", HOLD).await);
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let (m, done) = (m.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let msg = eml(&fixture("milter/nested-extbody.eml"));
            for _ in 0..10 {
                let mut c = m.conn().await;
                connect(&mut c, "192.0.2.1", None).await;
                let (_, st) = send(&mut c, &Envelope::default(), &msg).await;
                assert_eq!(st, Status::Accept);
                c.close().await.unwrap();
                done.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    for i in 0..10 {
        m.reload_with(&format!("{HOLD}report.always = {}\n", i % 2 == 0))
            .await;
        // Spread the reloads over the load: the next one once another message is
        // through (or all are).
        let before = done.load(Ordering::SeqCst);
        support::wait_until(
            "a message through after the reload",
            Duration::from_secs(30),
            Duration::from_millis(5),
            || async {
                let now = done.load(Ordering::SeqCst);
                if now > before || now == 200 {
                    Ok(())
                } else {
                    Err(format!("{now} of 200 done"))
                }
            },
        )
        .await;
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(done.load(Ordering::SeqCst), 200);
    let m = Arc::try_unwrap(m).unwrap_or_else(|_| panic!("milter still shared"));
    stop_quickly(m).await;
}

// ---------------------------------------------------------------------------------------
// Signals to the real binary.

struct Daemon {
    child: Child,
    addr: SocketAddr,
}

impl Daemon {
    fn start(name: &str, config: &str) -> Daemon {
        let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("milter-tests");
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = dir.join(format!("{name}.toml"));
        std::fs::write(&cfg, config).unwrap();
        // A free port: bound, read, released, then given to the daemon.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_mimeref-milter"))
            .args(["serve", "--config"])
            .arg(&cfg)
            .args(["--socket", &format!("inet:127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        support::mta::wait_listening("daemon", &mut child, port, support::mta::WAIT, String::new);
        Daemon { child, addr }
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig}");
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.alive() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

async fn open(
    addr: SocketAddr,
) -> Result<indymilter_test::TestConnection, indymilter_test::TestError> {
    indymilter_test::TestConnection::configure()
        .exact_leading_space(true)
        .open_tcp(addr)
        .await
}

/// Sends messages in a loop until the daemon stops taking connections; counts verdicts.
/// Once MAIL is answered, the message must end with Accept; after SIGTERM, MAIL may be
/// tempfailed or the connection closed between transactions; never before.
async fn client_loop(
    addr: SocketAddr,
    verdicts: Arc<AtomicUsize>,
    tempfails: Arc<AtomicUsize>,
    terminating: Arc<AtomicBool>,
) {
    let msg = eml(&fixture("milter/nested-extbody.eml"));
    loop {
        let Ok(mut c) = open(addr).await else {
            return; // listener closed: the MTA applies its default action
        };
        let want = accumulating(&c, ProtoOpts::NOREPLY_CONNECT);
        match c
            .connect(
                "client.example",
                ("192.0.2.1".parse::<std::net::IpAddr>().unwrap(), 50000),
            )
            .await
        {
            Ok(st) if st == want => {}
            _ => return,
        }
        match c.mail(["<a@example.org>"]).await {
            Ok(Status::Continue) => {}
            Ok(Status::Tempfail { .. }) => {
                tempfails.fetch_add(1, Ordering::SeqCst);
                return;
            }
            // Between transactions a closing daemon may hang up: no message was in
            // flight, the MTA applies its default action to the next one. Never before
            // SIGTERM.
            Err(_) if terminating.load(Ordering::SeqCst) => return,
            other => panic!("MAIL: {other:?}"),
        }
        send_headers(&mut c, &msg).await;
        let want = accumulating(&c, ProtoOpts::NOREPLY_BODY);
        for chunk in msg.body.chunks(1000) {
            assert_eq!(c.body(chunk.to_vec()).await.unwrap(), want);
            // Paced on purpose: keeps every client's message in flight long enough
            // for the signals to land in the middle of transactions.
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let (_, st) = c.eom().await.expect("message in flight lost its verdict");
        assert_eq!(st, Status::Accept);
        verdicts.fetch_add(1, Ordering::SeqCst);
        let _ = c.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_and_sigterm_under_load_on_the_real_binary() {
    let mut d = Daemon::start(
        "faults-signals",
        "shutdown_timeout = 20\nlog_level = \"warn\"\n",
    );
    let verdicts = Arc::new(AtomicUsize::new(0));
    let tempfails = Arc::new(AtomicUsize::new(0));
    let terminating = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..16)
        .map(|_| {
            tokio::spawn(client_loop(
                d.addr,
                verdicts.clone(),
                tempfails.clone(),
                terminating.clone(),
            ))
        })
        .collect();
    // Load flowing before the first signal, and messages still getting through after
    // each SIGHUP before the next.
    let through = |after: usize| {
        let verdicts = verdicts.clone();
        async move {
            support::wait_until(
                "a verdict",
                Duration::from_secs(30),
                Duration::from_millis(10),
                || async {
                    let n = verdicts.load(Ordering::SeqCst);
                    if n > after {
                        Ok(())
                    } else {
                        Err(format!("{n} verdicts so far"))
                    }
                },
            )
            .await
        }
    };
    through(0).await;
    for _ in 0..5 {
        let before = verdicts.load(Ordering::SeqCst);
        d.signal("HUP");
        through(before).await;
    }
    assert!(d.alive(), "SIGHUP killed the daemon");
    let before_term = verdicts.load(Ordering::SeqCst);
    assert!(before_term > 0, "no message got through before SIGTERM");
    terminating.store(true, Ordering::SeqCst);
    d.signal("TERM");
    let t = Instant::now();
    let status = loop {
        if let Some(s) = d.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(40),
            "no exit after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "exit after SIGTERM: {status}");
    for c in clients {
        tokio::time::timeout(Duration::from_secs(30), c)
            .await
            .expect("client hung after shutdown")
            .expect("a message in flight lost its verdict");
    }
    eprintln!(
        "verdicts: {} ({before_term} before SIGTERM), tempfailed after it: {}",
        verdicts.load(Ordering::SeqCst),
        tempfails.load(Ordering::SeqCst)
    );
}

/// Resident memory of a process, from /proc (kB).
fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

/// One round of faults: 100 concurrent complete messages, 100 clients that vanish
/// mid-body, and garbage probes. Every complete message must get its verdict.
async fn fault_storm(addr: SocketAddr) {
    let msg = Arc::new(eml(&fixture("milter/nested-extbody.eml")));
    let mut tasks = Vec::new();
    for i in 0..200 {
        let msg = msg.clone();
        tasks.push(tokio::spawn(async move {
            let mut c = open(addr).await.expect("connect");
            let ip = "192.0.2.1".parse::<std::net::IpAddr>().unwrap();
            assert_eq!(
                c.connect("client.example", (ip, 50000)).await.unwrap(),
                accumulating(&c, ProtoOpts::NOREPLY_CONNECT)
            );
            assert_eq!(c.mail(["<a@example.org>"]).await.unwrap(), Status::Continue);
            send_headers(&mut c, &msg).await;
            let half = msg.body.len() / 2;
            let want = accumulating(&c, ProtoOpts::NOREPLY_BODY);
            assert_eq!(c.body(msg.body[..half].to_vec()).await.unwrap(), want);
            if i % 2 == 0 {
                return; // vanish mid-body: the connection is dropped here
            }
            assert_eq!(c.body(msg.body[half..].to_vec()).await.unwrap(), want);
            let (_, st) = c.eom().await.expect("verdict");
            assert_eq!(st, Status::Accept);
            let _ = c.close().await;
        }));
    }
    for t in tasks {
        t.await.expect("a complete message lost its verdict");
    }
    for probe in [
        &b"GET / HTTP/1.0\r\n\r\n"[..],
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
        b"\xff\xff\xff\xffgarbage",
    ] {
        let p = probe.to_vec();
        tokio::task::spawn_blocking(move || poke(addr, &p, true))
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_returns_to_its_baseline_after_faults() {
    let mut d = Daemon::start("faults-memory", "log_level = \"warn\"\n");
    let pid = d.child.id();
    let idle = rss_kb(pid);
    // The first storms bring the allocator and the thread pools to their working size;
    // that is the baseline a loaded daemon returns to. With the default max_connections
    // all 200 sessions of a storm run at once, and glibc's per-thread arenas were seen
    // to keep growing through the third storm (19.5 -> 21.3 -> 21.9 MB, then flat), so
    // three warm-up storms, the largest reading of them as the baseline.
    let mut baseline = 0;
    // The 500 ms after each storm are part of the measure: the daemon has closed the
    // storm's sessions and the allocator has had the same time to hand memory back
    // before every reading, so the readings compare.
    for _ in 0..3 {
        fault_storm(d.addr).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        baseline = baseline.max(rss_kb(pid));
    }
    let mut after = Vec::new();
    for _ in 0..4 {
        fault_storm(d.addr).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        after.push(rss_kb(pid));
    }
    eprintln!("RSS kB: idle {idle}, after three storms {baseline}, after four more {after:?}");
    assert!(d.alive(), "the daemon died under faults");
    // Leaked sessions or buffers grow with every storm: one leaked session per
    // connection is about 19 kB x 200 connections, some 3.8 MB a storm, so four storms
    // would pass the 2 MB allowed for allocator noise several times over.
    for (i, rss) in after.iter().enumerate() {
        assert!(
            *rss <= baseline + 2048,
            "after storm {}: {rss} kB, baseline {baseline} kB",
            i + 4
        );
    }
}
