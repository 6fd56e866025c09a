//! Resources and strangers, on the real binary: file descriptors run out (the daemon
//! under `prlimit`), idle HTTP connections pile up on the metrics endpoint, a burst of
//! connections comes over `max_connections`, and peers that do not speak milter (curl,
//! `openssl s_client`, random octets) connect to the milter port. The daemon stays up,
//! serves the connections it holds, takes new ones once descriptors are free, and logs
//! each kind of event at most about once a second with counts that add up to its
//! metric.

#[path = "../support/mod.rs"]
mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use indymilter_test::{Status, TestConnection};
use support::milter::*;
use support::mta::{free_port, run_bounded, Daemon};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One test at a time: they hold hundreds of connections each (the test process has
/// its own descriptor limit) and time how fast the daemon closes some.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The daemon with its metrics endpoint on a port of its own, under `prlimit
/// --nofile=NOFILE` unless `nofile` is None. Returns it and the endpoint's port.
fn start(nofile: Option<&str>, config: &str) -> (Daemon, u16) {
    let http = free_port();
    let config = format!("metrics_listen = \"127.0.0.1:{http}\"\n{config}");
    let limit = nofile.map(|n| format!("--nofile={n}"));
    let wrapper: Vec<&str> = match &limit {
        Some(l) => vec!["prlimit", l, "--"],
        None => vec![],
    };
    (Daemon::start_under(&wrapper, &config, &[]), http)
}

/// A whole message on `c` (already past CONNECT), which must be accepted.
async fn one_message(c: &mut TestConnection) {
    let (_, st) = send(c, &Envelope::default(), &eml(&fixture("milter/clean.eml"))).await;
    assert_eq!(st, Status::Accept);
}

/// `GET /metrics`: the body, or None when the endpoint closed the connection without
/// an answer (refused at `metrics_max_connections`).
async fn try_metrics(port: u16) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    // Refused connections are closed before the request is read: writing may fail.
    let _ = s
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        .await;
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf))
        .await
        .expect("metrics endpoint answered or closed within 10 s");
    let text = String::from_utf8_lossy(&buf).into_owned();
    text.starts_with("HTTP/1.").then(|| {
        text.split_once("\r\n\r\n")
            .map_or(String::new(), |(_, b)| b.to_string())
    })
}

async fn metrics(port: u16) -> String {
    try_metrics(port).await.expect("an answer from /metrics")
}

/// The sum of every series of `name` (with any labels).
fn metric_sum(body: &str, name: &str) -> u64 {
    body.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with(' ') || r.starts_with('{'))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// The log lines that contain `before` followed by a count, and `kind`; and their
/// counts added up.
fn logged(log: &str, before: &str, kind: &str) -> (Vec<String>, u64) {
    let lines: Vec<String> = log
        .lines()
        .filter(|l| l.contains(before) && l.contains(kind))
        .map(str::to_string)
        .collect();
    let sum = lines
        .iter()
        .map(|l| {
            let rest = &l[l.find(before).unwrap() + before.len()..];
            let n: String = rest.chars().take_while(char::is_ascii_digit).collect();
            n.parse::<u64>()
                .unwrap_or_else(|_| panic!("no count after {before:?}: {l}"))
        })
        .sum();
    (lines, sum)
}

/// Waits (10 s at most) until the daemon's log contains `text`.
async fn log_shows(d: &Daemon, text: &str) {
    support::wait_until(
        &format!("the log to show {text:?}"),
        Duration::from_secs(10),
        Duration::from_millis(20),
        || async {
            if d.log().contains(text) {
                Ok(())
            } else {
                Err(d.log())
            }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_descriptors_the_daemon_stays_up_and_serves() {
    let _serial = SERIAL.lock().await;
    // 64 descriptors with the default max_connections = 2000: about 50 connections fit.
    let (mut d, http) = start(Some("64"), "");
    assert!(
        d.log().contains("the file descriptor limit is 64"),
        "no warning at start:\n{}",
        d.log()
    );
    // A session the MTA holds, in the middle of its SMTP conversation.
    let mut held = open_local(d.port).await;
    connect(&mut held, REMOTE, None).await;

    // More connections than descriptors: the ones past the limit wait in the listen
    // queue (150 fit in it, so none of these connects hangs).
    let out_from = Instant::now();
    let mut flood = Vec::new();
    for _ in 0..150 {
        flood.push(TcpStream::connect(("127.0.0.1", d.port)).await.unwrap());
    }
    log_shows(&d, "Too many open files").await;
    // Some more time out of descriptors: the daemon keeps retrying, without spinning.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(d.try_wait(), None, "the daemon exited:\n{}", d.log());

    // The connection it holds is served meanwhile.
    one_message(&mut held).await;

    // The flood goes away; a new connection, behind it in the queue, is taken and
    // served as soon as descriptors are free.
    drop(flood);
    let t = Instant::now();
    let mut fresh = open_local(d.port).await;
    connect(&mut fresh, REMOTE, None).await;
    one_message(&mut fresh).await;
    let out_for = out_from.elapsed();
    eprintln!(
        "new connection served {:?} after the flood closed",
        t.elapsed()
    );
    fresh.close().await.unwrap();
    one_message(&mut held).await;
    held.close().await.unwrap();

    let body = metrics(http).await;
    let errors = metric_sum(&body, "mimeref_accept_errors_total");
    assert!(
        body.contains("mimeref_accept_errors_total{listener=\"milter\",error=\"emfile\"}"),
        "{body}"
    );
    assert!(errors > 0, "{body}");
    d.stop();
    let log = d.log();
    assert!(!log.contains("milter exited with error"), "{log}");
    let (lines, sum) = logged(&log, "accept failed ", "");
    assert_eq!(sum, errors, "the log's counts add up to the metric:\n{log}");
    eprintln!(
        "{errors} failed accepts, {} log lines:\n{}",
        lines.len(),
        lines.join("\n")
    );
    assert!(
        lines[0].contains("LimitNOFILE=") && lines[0].contains("still served"),
        "{}",
        lines[0]
    );
    // One try per pause (50 ms) while out of descriptors; a spinning loop would make
    // thousands.
    let most = out_for.as_millis() as u64 / 50 + 2;
    assert!(errors <= most, "{errors} failed accepts in {out_for:?}");
    // 64 descriptors less the daemon's own (14 when idle): the connections it held.
    let held: u64 = lines[0]
        .split(" connection(s) open are still served")
        .next()
        .and_then(|r| r.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{}", lines[0]));
    assert!(held >= 40, "only {held} connections held: {}", lines[0]);
    eprintln!("under --nofile=64: {held} connections held, 150 attempted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_http_connections_do_not_starve_the_milter() {
    let _serial = SERIAL.lock().await;
    // 256 descriptors hold 100 milter connections, the 32 HTTP connections of the
    // default metrics_max_connections and the daemon's own, not 300 idle HTTP ones.
    let (mut d, http) = start(Some("256"), "max_connections = 100\n");
    let mut idle = Vec::new();
    for _ in 0..300 {
        idle.push(TcpStream::connect(("127.0.0.1", http)).await.unwrap());
    }
    // Those over the cap are closed at once; the rest stay open, waiting for a request.
    let checks: Vec<_> = idle
        .into_iter()
        .map(|mut s| {
            tokio::spawn(async move {
                let mut b = [0u8; 1];
                match tokio::time::timeout(Duration::from_secs(2), s.read(&mut b)).await {
                    Ok(_) => None,
                    Err(_) => Some(s),
                }
            })
        })
        .collect();
    let mut kept = Vec::new();
    for c in checks {
        kept.extend(c.await.unwrap());
    }
    assert_eq!(kept.len(), 32, "HTTP connections left open");

    // Meanwhile the MTA gets all its connections, and they work.
    let mut conns = Vec::new();
    for _ in 0..100 {
        let mut c = open_local(d.port).await;
        connect(&mut c, REMOTE, None).await;
        conns.push(c);
    }
    one_message(&mut conns[0]).await;
    one_message(&mut conns[99]).await;
    assert_eq!(d.try_wait(), None, "the daemon exited:\n{}", d.log());
    for c in conns {
        c.close().await.unwrap();
    }
    drop(kept);

    // Slots come free as the endpoint sees the idle connections close; a scrape that
    // comes before that is refused like the others, and counted.
    let mut refused_scrapes = 0;
    let body = loop {
        match try_metrics(http).await {
            Some(b) => break b,
            None if refused_scrapes < 50 => {
                refused_scrapes += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            None => panic!("/metrics refused 50 times"),
        }
    };
    let refused = metric_sum(&body, "mimeref_http_connections_refused_total");
    assert_eq!(refused, 268 + refused_scrapes, "{body}");
    d.stop();
    let log = d.log();
    let (lines, sum) = logged(&log, "refused ", "HTTP connection(s)");
    assert_eq!(
        sum, refused,
        "the log's counts add up to the metric:\n{log}"
    );
    assert!(
        lines[0].contains("metrics_max_connections = 32"),
        "{}",
        lines[0]
    );
    assert_eq!(
        logged(&log, "refused ", "milter connection(s)").1,
        0,
        "no milter connection was refused:\n{log}"
    );
    eprintln!(
        "{refused} refused HTTP connections, {} log lines:\n{}",
        lines.len(),
        lines.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_refused_connections_adds_up_in_the_log() {
    let _serial = SERIAL.lock().await;
    let (mut d, http) = start(None, "max_connections = 2\n");
    // The daemon's own start-up probe must be gone before the two slots are taken.
    support::wait_until(
        "no connection open",
        Duration::from_secs(10),
        Duration::from_millis(20),
        || async {
            let b = metrics(http).await;
            if b.contains("mimeref_connections_open 0\n") {
                Ok(())
            } else {
                Err(b)
            }
        },
    )
    .await;
    let mut a = open_local(d.port).await;
    connect(&mut a, REMOTE, None).await;
    let mut b = open_local(d.port).await;
    connect(&mut b, REMOTE, None).await;

    let port = d.port;
    let t = Instant::now();
    let burst: Vec<_> = (0..160)
        .map(|_| {
            tokio::spawn(async move {
                let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
                let mut buf = [0u8; 1];
                tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
                    .await
                    .expect("a connection over the limit is closed at once")
            })
        })
        .collect();
    for c in burst {
        // End of file or a reset: closed either way.
        if let Ok(n) = c.await.unwrap() {
            assert_eq!(n, 0, "the daemon sent octets unasked");
        }
    }
    eprintln!("160 refused connections closed within {:?}", t.elapsed());
    one_message(&mut a).await;
    one_message(&mut b).await;
    let body = metrics(http).await;
    assert_eq!(
        metric_sum(&body, "mimeref_connections_refused_total"),
        160,
        "{body}"
    );
    a.close().await.unwrap();
    b.close().await.unwrap();
    d.stop();
    let log = d.log();
    let (lines, sum) = logged(&log, "refused ", "milter connection(s)");
    assert_eq!(sum, 160, "the log's counts add up to the metric:\n{log}");
    assert!(
        lines.len() <= 4,
        "{} lines for one burst:\n{log}",
        lines.len()
    );
    assert!(lines[0].contains("max_connections = 2"), "{}", lines[0]);
    eprintln!(
        "160 refused connections, {} log lines:\n{}",
        lines.len(),
        lines.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_at_the_milter_port_are_logged_counted_and_closed() {
    let _serial = SERIAL.lock().await;
    let (mut d, http) = start(None, "");
    let port = d.port;
    let mut held = open_local(port).await;
    connect(&mut held, REMOTE, None).await;

    // A TCP health check (connect, close) is no stranger.
    drop(TcpStream::connect(("127.0.0.1", port)).await.unwrap());

    // curl: an HTTP request.
    let url = format!("http://127.0.0.1:{port}/");
    let t = Instant::now();
    let (ok, _, err) = tokio::task::spawn_blocking(move || {
        run_bounded(
            Command::new("curl").args(["-sS", "--max-time", "10", &url]),
            Duration::from_secs(15),
        )
    })
    .await
    .unwrap();
    let took = t.elapsed();
    assert!(!ok, "curl got an answer: {err}");
    assert!(!err.contains("timed out"), "{err}");
    assert!(
        took < Duration::from_secs(2),
        "HTTP request closed after {took:?}"
    );
    log_shows(&d, "HTTP request").await;

    // openssl s_client: a TLS ClientHello.
    let target = format!("127.0.0.1:{port}");
    let t = Instant::now();
    let (ok, _, err) = tokio::task::spawn_blocking(move || {
        run_bounded(
            Command::new("openssl").args([
                "s_client",
                "-connect",
                &target,
                "-servername",
                "mail.example",
            ]),
            Duration::from_secs(15),
        )
    })
    .await
    .unwrap();
    let took = t.elapsed();
    assert!(!ok, "a TLS handshake succeeded: {err}");
    assert!(
        took < Duration::from_secs(2),
        "TLS handshake closed after {took:?}"
    );
    log_shows(&d, "TLS handshake").await;

    // Three random octets, and the peer waits: it is closed at once all the same, not
    // after connection_timeout.
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    s.write_all(&[0x8a, 0x13, 0xf0]).await.unwrap();
    let t = Instant::now();
    let mut b = [0u8; 1];
    let r = tokio::time::timeout(Duration::from_secs(5), s.read(&mut b))
        .await
        .expect("random octets: connection closed");
    assert!(matches!(r, Ok(0) | Err(_)), "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    log_shows(&d, "not a milter negotiation (first octets 8a 13 f0)").await;

    // The MTA's connection goes on.
    one_message(&mut held).await;
    held.close().await.unwrap();
    let body = metrics(http).await;
    assert!(
        body.contains("mimeref_events_total{event=\"non_milter_peer\"} 3\n"),
        "{body}"
    );
    d.stop();
    let log = d.log();
    let (lines, sum) = logged(&log, "closed ", "does not speak milter");
    assert_eq!(sum, 3, "{log}");
    for what in ["HTTP request", "TLS handshake", "not a milter negotiation"] {
        assert!(
            lines.iter().any(|l| l.contains("among them connection ")
                && l.contains(" from 127.0.0.1:")
                && l.contains(what)),
            "no line names the peer and {what:?}:\n{log}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_soft_descriptor_limit_is_raised_at_start() {
    let _serial = SERIAL.lock().await;
    let (mut d, _) = start(Some("100:8192"), "");
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", d.pid().unwrap())).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields[3..5], ["8192", "8192"], "{line}");
    d.stop();
    let log = d.log();
    assert!(
        log.contains("file descriptor limit raised from 100 to 8192"),
        "{log}"
    );
    // 2 × 2000 + 32 + 32 fit in 8192: no warning.
    assert!(!log.contains("the file descriptor limit is"), "{log}");

    // config-check says what serve would: here the hard limit itself is too small.
    let dir = support::mta::TempDir::new("nofile-check");
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        "max_connections = 100\nmetrics_listen = \"127.0.0.1:9357\"\n",
    )
    .unwrap();
    let out = Command::new("prlimit")
        .args(["--nofile=64", "--"])
        .arg(support::mta::daemon_bin())
        .arg("config-check")
        .arg("--config")
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the file descriptor limit is 64, but max_connections = 100 may need 264")
            && err.contains("LimitNOFILE="),
        "{err}"
    );
    // 64 leave nothing for connections once the reserve is taken.
    assert!(!err.contains("lower max_connections"), "{err}");
}
