//! Memory per idle milter connection: opens connections to a running daemon in steps,
//! each negotiated and taken through connect and HELO the way Postfix's smtpd does at
//! the start of an SMTP session, and after each step prints the daemon's VmRSS (from
//! `/proc/PID/status`). The connections then stay open, idle, until the end; the slope
//! is the cost of one idle connection. Run by bench/idle-connections.
//!
//! `idle_conns ADDR PID N [STEP]` (ADDR `HOST:PORT`; N at most 20000).

use std::process::ExitCode;
use std::time::Duration;

use indymilter_test::{MacroStage, ProtoOpts, TestConnection};

fn vm_rss_kb(pid: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
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

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        eprintln!("usage: idle_conns ADDR PID N [STEP]");
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
    let step: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(n).max(1);
    let Some(base) = vm_rss_kb(pid) else {
        eprintln!("no /proc/{pid}/status");
        return ExitCode::from(2);
    };
    println!("connections=0 VmRSS_kB={base}");
    let mut conns = Vec::with_capacity(n);
    while conns.len() < n {
        for _ in 0..step.min(n - conns.len()) {
            match open(addr).await {
                Ok(c) => conns.push(c),
                Err(e) => {
                    eprintln!("connection {}: {e}", conns.len() + 1);
                    return ExitCode::from(1);
                }
            }
        }
        // Let the daemon's tasks settle (the CONNECT and HELO replies are not awaited
        // where "no reply" was negotiated).
        tokio::time::sleep(Duration::from_millis(500)).await;
        let rss = vm_rss_kb(pid).unwrap_or(0);
        println!(
            "connections={} VmRSS_kB={rss} per_connection_kB={:.1}",
            conns.len(),
            (rss.saturating_sub(base)) as f64 / conns.len() as f64
        );
    }
    for c in conns {
        let _ = c.close().await;
    }
    ExitCode::SUCCESS
}
