//! Memory per idle milter connection: opens connections to a running daemon in steps,
//! each negotiated and taken through connect and HELO the way Postfix's smtpd does at
//! the start of an SMTP session, and after each step prints the daemon's VmRSS (from
//! `/proc/PID/status`), its open file descriptors and how fast the step's connections
//! were opened (one after the other: TCP connect, negotiation, CONNECT, HELO). The
//! connections then stay open, idle, until the end; the slope is the cost of one idle
//! connection. Run by bench/idle-connections.
//!
//! With `--messages K FILE`, once all N are open, K of them (as K smtpd sessions of the
//! N would) each carry one complete message from FILE at the same time, while the rest
//! stay idle: every one must get its verdict; prints the wall time, the per-message
//! times (MAIL to the end-of-message reply) and the daemon's VmHWM.
//!
//! `idle_conns ADDR PID N [STEP] [--messages K FILE]` (ADDR `HOST:PORT`; N at most 20000).

#[path = "../tests/support/message.rs"]
mod message;

use std::ffi::CString;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use indymilter_test::{MacroStage, ProtoOpts, Status, TestConnection};

fn proc_status_kb(pid: &str, key: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(key))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn vm_rss_kb(pid: &str) -> Option<u64> {
    proc_status_kb(pid, "VmRSS:")
}

/// Open file descriptors of the process (sockets, listeners, log, epoll...).
fn fd_count(pid: &str) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

async fn open(addr: &str) -> Result<TestConnection, String> {
    let mut c = TestConnection::configure()
        .exact_leading_space(true)
        .open_tcp(addr)
        .await
        .map_err(|e| format!("open: {e}"))?;
    let opts = c.negotiated_opts();
    c.macros(
        MacroStage::Connect,
        [
            ("j", "mx.example.net"),
            ("{daemon_name}", "mx.example.net"),
            ("_", "client.example [192.0.2.1]"),
        ],
    )
    .await
    .map_err(|e| format!("macros: {e}"))?;
    c.connect("client.example", ([192, 0, 2, 1], 50000))
        .await
        .map_err(|e| format!("connect: {e}"))?;
    if !opts.contains(ProtoOpts::NO_HELO) {
        c.helo("client.example")
            .await
            .map_err(|e| format!("helo: {e}"))?;
    }
    Ok(c)
}

/// Header fields as (name, value with leading space, folds as "\n") and the body, as
/// Postfix hands them over.
fn split(raw: &[u8]) -> (Vec<(CString, CString)>, Vec<u8>) {
    let h = message::milter_heading(raw);
    let headers = h
        .fields
        .into_iter()
        .map(|(n, v)| {
            (
                CString::new(n).unwrap_or_default(),
                CString::new(v).unwrap_or_default(),
            )
        })
        .collect();
    (headers, raw[h.body_at..].to_vec())
}

/// The macros the daemon asked for at `stage`, with the values Postfix would give them
/// for an unauthenticated client (only the ones it could ask for here).
async fn send_macros(c: &mut TestConnection, stage: MacroStage) -> Result<(), String> {
    let Some(names) = c.requested_macros().get(&stage) else {
        return Ok(());
    };
    let pairs: Vec<(String, &str)> = names
        .to_string_lossy()
        .split_whitespace()
        .filter_map(|n| {
            let v = match n {
                "i" => "4Xk9Qb1Zz3z4yAb",
                "{client_addr}" => "192.0.2.1",
                "{daemon_name}" => "mx.example.net",
                _ => return None,
            };
            Some((n.to_string(), v))
        })
        .collect();
    if pairs.is_empty() {
        return Ok(());
    }
    c.macros(stage, pairs)
        .await
        .map_err(|e| format!("macros: {e}"))
}

/// One complete transaction on an open connection; the time from MAIL to the reply at
/// end of message, and the number of modifications in that reply.
async fn message(
    c: &mut TestConnection,
    headers: &[(CString, CString)],
    body: &[u8],
) -> Result<(Duration, usize), String> {
    let e = |what: &'static str| move |err| format!("{what}: {err}");
    let opts = c.negotiated_opts();
    let t0 = Instant::now();
    send_macros(c, MacroStage::Mail).await?;
    c.mail(["<alice@example.org>"]).await.map_err(e("mail"))?;
    if !opts.contains(ProtoOpts::NO_RCPT) {
        c.rcpt(["<bob@example.net>"]).await.map_err(e("rcpt"))?;
    }
    if !opts.contains(ProtoOpts::NO_DATA) {
        c.data().await.map_err(e("data"))?;
    }
    for (n, v) in headers {
        c.header(n.clone(), v.clone()).await.map_err(e("header"))?;
    }
    send_macros(c, MacroStage::Eoh).await?;
    c.eoh().await.map_err(e("eoh"))?;
    for chunk in body.chunks(65535) {
        match c.body(chunk.to_vec()).await.map_err(e("body"))? {
            Status::Skip => break,
            Status::Continue | Status::Noreply => {}
            other => return Err(format!("body: {other:?}")),
        }
    }
    let (actions, st) = c.eom().await.map_err(e("eom"))?;
    if !matches!(st, Status::Accept | Status::Continue) {
        return Err(format!("eom: {st:?}"));
    }
    Ok((t0.elapsed(), actions.actions.len()))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut messages: Option<(usize, Vec<u8>)> = None;
    if let Some(i) = args.iter().position(|a| a == "--messages") {
        let parsed = args.get(i + 1).and_then(|k| k.parse::<usize>().ok()).zip(
            args.get(i + 2)
                .and_then(|f| std::fs::read(f).map_err(|e| eprintln!("{f}: {e}")).ok()),
        );
        let Some(m) = parsed else {
            eprintln!("--messages K FILE: a number and a readable file");
            return ExitCode::from(2);
        };
        messages = Some(m);
        args.drain(i..(i + 3).min(args.len()));
    }
    if args.len() < 3 {
        eprintln!("usage: idle_conns ADDR PID N [STEP] [--messages K FILE]");
        return ExitCode::from(2);
    }
    let (addr, pid) = (&args[0], &args[1]);
    let n: usize = match args[2].parse() {
        Ok(n) if n <= 20_000 => n,
        _ => {
            eprintln!("N: a number up to 20000");
            return ExitCode::from(2);
        }
    };
    if messages.as_ref().is_some_and(|(k, _)| *k > n) {
        eprintln!("--messages K: at most N");
        return ExitCode::from(2);
    }
    let step: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(n).max(1);
    let Some(base) = vm_rss_kb(pid) else {
        eprintln!("no /proc/{pid}/status");
        return ExitCode::from(2);
    };
    println!("connections=0 VmRSS_kB={base} fds={}", fd_count(pid));
    let mut conns = Vec::with_capacity(n);
    let all = Instant::now();
    while conns.len() < n {
        let t0 = Instant::now();
        let k = step.min(n - conns.len());
        for _ in 0..k {
            match open(addr).await {
                Ok(c) => conns.push(c),
                Err(e) => {
                    eprintln!("connection {}: {e}", conns.len() + 1);
                    return ExitCode::from(1);
                }
            }
        }
        let took = t0.elapsed();
        // Let the daemon's tasks settle (the CONNECT and HELO replies are not awaited
        // where "no reply" was negotiated).
        tokio::time::sleep(Duration::from_millis(500)).await;
        let rss = vm_rss_kb(pid).unwrap_or(0);
        println!(
            "connections={} VmRSS_kB={rss} per_connection_kB={:.1} fds={} step_s={:.2} opened_per_s={:.0}",
            conns.len(),
            (rss.saturating_sub(base)) as f64 / conns.len() as f64,
            fd_count(pid),
            took.as_secs_f64(),
            k as f64 / took.as_secs_f64()
        );
    }
    println!(
        "opened={n} seconds={:.2} (with 0.5 s pauses between steps)",
        all.elapsed().as_secs_f64()
    );

    let mut failed = 0;
    if let Some((k, raw)) = messages {
        let (headers, body) = split(&raw);
        let hwm_before = proc_status_kb(pid, "VmHWM:").unwrap_or(0);
        // Spread over the open connections, as busy smtpd processes would be.
        let stride = n / k.max(1);
        let mut set = tokio::task::JoinSet::new();
        let t0 = Instant::now();
        for i in (0..k).rev() {
            let mut c = conns.swap_remove(i * stride);
            let (h, b) = (headers.clone(), body.clone());
            set.spawn(async move {
                let r = message(&mut c, &h, &b).await;
                (c, r)
            });
        }
        let mut times = Vec::with_capacity(k);
        let mut modified = 0;
        while let Some(done) = set.join_next().await {
            match done {
                Ok((c, Ok((t, mods)))) => {
                    times.push(t);
                    modified += usize::from(mods > 0);
                    conns.push(c);
                }
                Ok((c, Err(e))) => {
                    eprintln!("message: {e}");
                    failed += 1;
                    conns.push(c);
                }
                Err(e) => {
                    eprintln!("message task: {e}");
                    failed += 1;
                }
            }
        }
        let wall = t0.elapsed();
        times.sort();
        let q = |p: f64| {
            times
                .get(((times.len() as f64 * p).ceil() as usize).saturating_sub(1))
                .map_or(0.0, |d| ms(*d))
        };
        println!(
            "messages={k} octets={} verdicts={} modified={modified} failed={failed} wall_s={:.3} \
             p50_ms={:.1} p99_ms={:.1} max_ms={:.1} open_connections={} VmRSS_kB={} \
             VmHWM_kB={} (before: {hwm_before}) fds={}",
            raw.len(),
            times.len(),
            wall.as_secs_f64(),
            q(0.5),
            q(0.99),
            q(1.0),
            conns.len(),
            vm_rss_kb(pid).unwrap_or(0),
            proc_status_kb(pid, "VmHWM:").unwrap_or(0),
            fd_count(pid)
        );
    }
    for c in conns {
        let _ = c.close().await;
    }
    if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
