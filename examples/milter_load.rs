//! Drives a milter with many concurrent messages, the way Postfix hands them over
//! (header values with their leading space, folds as "\n", body in 64 KB chunks), and
//! prints the time taken. With `/proc/PID/status` of the milter (VmHWM) it measures peak
//! memory for a given number of bytes in flight (see bench/memory).
//!
//! `milter_load ADDR FILE CONCURRENCY [MESSAGES_PER_CONNECTION]`
//! ADDR: `HOST:PORT` or `unix:/PATH`. Every connection sends its messages one after the
//! other; the connections run at the same time, and each sends its body chunks only as
//! the milter accepts them, so at most CONCURRENCY messages are in flight.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use indymilter_test::{MacroStage, ProtoOpts, Status, TestConnection};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        eprintln!("usage: milter_load ADDR FILE CONCURRENCY [MESSAGES_PER_CONNECTION]");
        return ExitCode::from(2);
    }
    let addr = args[0].clone();
    let raw = match std::fs::read(&args[1]) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{}: {e}", args[1]);
            return ExitCode::from(2);
        }
    };
    let conc: usize = args[2].parse().unwrap_or(1);
    let per: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1);
    let msg = Arc::new(split(&raw));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..conc {
        let addr = addr.clone();
        let msg = msg.clone();
        tasks.push(tokio::spawn(async move { run(&addr, &msg, per).await }));
    }
    let mut failed = 0;
    for t in tasks {
        match t.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                eprintln!("milter_load: {e}");
                failed += 1;
            }
            Err(e) => {
                eprintln!("milter_load: {e}");
                failed += 1;
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let n = conc * per;
    println!(
        "messages={n} octets={} concurrency={conc} seconds={secs:.3} msgs_per_s={:.1} failed={failed}",
        raw.len(),
        n as f64 / secs
    );
    if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

struct Split {
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    body: Vec<u8>,
}

/// Header fields as (name, value with leading space, folds as "\n") and the body.
fn split(raw: &[u8]) -> Split {
    let mut headers: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut pos = 0;
    while pos < raw.len() {
        let end = memchr::memchr(b'\n', &raw[pos..]).map_or(raw.len(), |n| pos + n);
        let line = &raw[pos..end];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        pos = (end + 1).min(raw.len());
        if line.is_empty() {
            break;
        }
        if line[0] == b' ' || line[0] == b'\t' {
            if let Some(last) = headers.last_mut() {
                last.1.push(b'\n');
                last.1.extend_from_slice(line);
            }
            continue;
        }
        if let Some(c) = line.iter().position(|&b| b == b':') {
            headers.push((line[..c].to_vec(), line[c + 1..].to_vec()));
        }
    }
    Split {
        headers,
        body: raw[pos..].to_vec(),
    }
}

async fn run(addr: &str, m: &Split, per: usize) -> Result<(), String> {
    let b = TestConnection::configure().exact_leading_space(true);
    let mut c = match addr.strip_prefix("unix:") {
        Some(p) => b.open_unix(p).await,
        None => b.open_tcp(addr).await,
    }
    .map_err(|e| format!("connect {addr}: {e}"))?;
    let e = |what: &'static str| move |err| format!("{what}: {err}");
    c.macros(MacroStage::Connect, [("{client_addr}", "192.0.2.1")])
        .await
        .map_err(e("macros"))?;
    c.connect("client.example", ([192, 0, 2, 1], 50000))
        .await
        .map_err(e("connect"))?;
    for _ in 0..per {
        c.mail(["<alice@example.org>"]).await.map_err(e("mail"))?;
        if !c.negotiated_opts().contains(ProtoOpts::NO_RCPT) {
            c.rcpt(["<bob@example.net>"]).await.map_err(e("rcpt"))?;
        }
        for (n, v) in &m.headers {
            // Generated headers hold no NUL.
            let (n, v) = (
                std::ffi::CString::new(n.clone()).unwrap_or_default(),
                std::ffi::CString::new(v.clone()).unwrap_or_default(),
            );
            c.header(n, v).await.map_err(e("header"))?;
        }
        c.eoh().await.map_err(e("eoh"))?;
        for chunk in m.body.chunks(65535) {
            match c.body(chunk.to_vec()).await.map_err(e("body"))? {
                Status::Skip => break,
                Status::Continue | Status::Noreply => {}
                other => return Err(format!("body: {other:?}")),
            }
        }
        let (_, st) = c.eom().await.map_err(e("eom"))?;
        if !matches!(st, Status::Accept | Status::Continue) {
            return Err(format!("eom: {st:?}"));
        }
    }
    c.close().await.map_err(e("close"))?;
    Ok(())
}
