//! Soak: the real daemon behind a real, private Postfix, fed the corpus (tests/corpus) plus
//! generated messages of mixed sizes in a loop by several SMTP clients for a bounded
//! time. Not part of the default run (`#[ignore]`): `scripts/soak [SECONDS]` runs it.
//!
//! Counts: sent = delivered + rejected by policy, with no tempfail, nothing refused for
//! any other reason, nothing left in the queue, and the same daemon process from start
//! to end (no restart). Prints the figures.
#[path = "../support/mod.rs"]
mod support;

use support::mta;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mta::{Postfix, PostfixConfig};

const CLIENTS: usize = 4;

fn corpus() -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    // Every file of the corpus but its notes; the fixtures' inputs (.eml).
    let mut dirs = vec![
        (root.join("tests/corpus"), false),
        (root.join("tests/fixtures"), true),
    ];
    while let Some((d, eml_only)) = dirs.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let name = p.to_string_lossy().into_owned();
            if p.is_dir() {
                dirs.push((p, eml_only));
            } else if (eml_only && name.ends_with(".eml") && !name.ends_with(".fixed.eml"))
                || (!eml_only && !name.ends_with(".md"))
            {
                if let Ok(b) = std::fs::read(&p) {
                    out.push(b);
                }
            }
        }
    }
    out
}

/// Generated messages: small to 4 MB, nested, related with many parts, long URLs, and
/// one in ten with a duplicate Content-ID (rejected by the soak policy).
fn generated(n: usize) -> Vec<u8> {
    let mut m = format!(
        "From: soak@sender.example\nTo: bob@receiver.example\nSubject: soak {n}\n\
         Message-ID: <soak-{n}@sender.example>\nMIME-Version: 1.0\n\
         Content-Type: multipart/related; boundary=\"s{n}\"; type=\"text/html\"\n\n"
    );
    let parts = 1 + n % 40;
    m.push_str(&format!(
        "--s{n}\nContent-Type: text/html\n\n<img src=\"cid:p0@x\"><a href=\"http://example.org/{}\">x</a>\n",
        "d/".repeat(n % 300)
    ));
    for i in 0..parts {
        let id = if n % 10 == 0 { 0 } else { i };
        m.push_str(&format!(
            "--s{n}\nContent-Type: message/external-body; access-type=URL;\n URL=\"http://www.example.com/{}/file-{i}.pdf\"\nContent-ID: <p{id}@x>\n\n\
             Content-Type: application/pdf\n\n",
            "long-directory-name".repeat(1 + (n + i) % 5)
        ));
    }
    m.push_str(&format!(
        "--s{n}\nContent-Type: application/octet-stream\n\n"
    ));
    let size = [0usize, 1_000, 50_000, 400_000, 4_000_000][n % 5];
    let line = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAxMjM0\n";
    while m.len() < size {
        m.push_str(line);
    }
    m.push_str(&format!("--s{n}--\n"));
    m.into_bytes()
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

#[derive(Default)]
struct Counts {
    sent: AtomicUsize,
    accepted: AtomicUsize,
    rejected_policy: AtomicUsize,
    tempfailed: AtomicUsize,
    refused_other: AtomicUsize,
}

#[test]
#[ignore = "minutes long; run by scripts/soak"]
fn soak() {
    if !mta::require_postfix() {
        return;
    }
    let seconds: u64 = std::env::var("MIMEREF_SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150);

    let dir = mta::TempDir::new("soak");
    let cfg = dir.path().join("soak.toml");
    std::fs::write(
        &cfg,
        r#"log_level = "warn"
[policy.inbound]
"related-cid-duplicate" = "reject"
[policy.outbound]
"related-cid-duplicate" = "reject"
"#,
    )
    .unwrap();
    let port = mta::free_port();
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_mimeref-milter"))
        .args(["serve", "--config"])
        .arg(&cfg)
        .args(["--socket", &format!("inet:127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("milter.log")).unwrap())
        .spawn()
        .unwrap();
    assert!(mta::wait_port(port, mta::WAIT), "milter did not listen");
    let pid = daemon.id();
    let rss_start = rss_kib(pid);

    let mut pc = PostfixConfig::with_milter(&format!("inet:127.0.0.1:{port}"));
    // The default action stays tempfail: any milter failure shows as a tempfail.
    pc.extra_main.push(
        "message_size_limit = 20000000\nmilter_content_timeout = 120s\nhopcount_limit = 1000"
            .into(),
    );
    let pf = Arc::new(Postfix::start(&pc));

    let mut pool = corpus();
    let corpus_len = pool.len();
    pool.extend((0..60).map(generated));
    let pool = Arc::new(pool);
    let counts = Arc::new(Counts::default());
    let stop = Arc::new(AtomicBool::new(false));
    let odd: Arc<Mutex<Vec<String>>> = Arc::default();
    let started = Instant::now();
    let workers: Vec<_> = (0..CLIENTS)
        .map(|w| {
            let (pf, pool, counts, stop, odd) = (
                pf.clone(),
                pool.clone(),
                counts.clone(),
                stop.clone(),
                odd.clone(),
            );
            std::thread::spawn(move || {
                let mut i = w;
                let mut c = pf.smtp();
                let mut on_conn = 0;
                while !stop.load(Ordering::SeqCst) {
                    let msg = &pool[i % pool.len()];
                    i += CLIENTS;
                    counts.sent.fetch_add(1, Ordering::SeqCst);
                    let r = c.send("alice@sender.example", &["bob@receiver.example"], msg);
                    match r.code {
                        200..=299 => counts.accepted.fetch_add(1, Ordering::SeqCst),
                        550 if r.text.contains("MIME reference") => {
                            counts.rejected_policy.fetch_add(1, Ordering::SeqCst)
                        }
                        400..=499 => {
                            odd.lock()
                                .unwrap()
                                .push(format!("message {}: {r}", i - CLIENTS));
                            counts.tempfailed.fetch_add(1, Ordering::SeqCst)
                        }
                        _ => {
                            odd.lock()
                                .unwrap()
                                .push(format!("message {}: {r}", i - CLIENTS));
                            counts.refused_other.fetch_add(1, Ordering::SeqCst)
                        }
                    };
                    if !r.is_ok() {
                        let _ = c.cmd("RSET");
                    }
                    // Several messages per connection, then a new one, as MTAs do.
                    on_conn += 1;
                    if on_conn == 20 {
                        c.quit();
                        c = pf.smtp();
                        on_conn = 0;
                    }
                }
                c.quit();
            })
        })
        .collect();
    // The soak is about elapsed time: the clients send for `seconds`.
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::SeqCst);
    for w in workers {
        w.join().unwrap();
    }
    let sending = started.elapsed();

    // Everything accepted must come out of the queue into the sink.
    let accepted = counts.accepted.load(Ordering::SeqCst);
    // Whole messages only: smtp-sink creates its dump file when a transaction starts.
    let whole = || pf.delivered().len();
    let drained = mta::wait_for(Duration::from_secs(120), || {
        (whole() >= accepted).then_some(())
    })
    .is_some();
    let delivered = whole();
    let rss_end = rss_kib(pid);
    let alive = daemon.try_wait().unwrap().is_none();

    let sent = counts.sent.load(Ordering::SeqCst);
    let rejected = counts.rejected_policy.load(Ordering::SeqCst);
    let tempfailed = counts.tempfailed.load(Ordering::SeqCst);
    let other = counts.refused_other.load(Ordering::SeqCst);
    println!("soak: {:.0} s of sending, {CLIENTS} clients, pool of {corpus_len} corpus + 60 generated messages", sending.as_secs_f64());
    println!("soak: sent {sent} = delivered {delivered} + rejected by policy {rejected} (+ tempfailed {tempfailed}, refused otherwise {other})");
    println!(
        "soak: losses {}; daemon pid {pid} {} (restarts 0), RSS {rss_start} KiB -> {rss_end} KiB",
        sent as i64 - delivered as i64 - rejected as i64,
        if alive { "still running" } else { "DIED" }
    );
    for o in odd.lock().unwrap().iter().take(20) {
        println!("soak: {o}");
    }
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert!(alive, "the daemon died during the soak");
    assert!(
        drained,
        "queue not drained: {delivered} of {accepted} delivered"
    );
    assert_eq!(tempfailed, 0, "tempfails");
    assert_eq!(other, 0, "messages refused for other reasons");
    assert_eq!(sent, delivered + rejected, "sent != delivered + rejected");
}
