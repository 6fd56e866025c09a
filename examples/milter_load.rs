//! Drives a milter with many concurrent messages, the way Postfix hands them over
//! (header values with their leading space, folds as "\n", body in 64 KB chunks, the
//! macros Postfix would send), and prints the time taken. With `/proc/PID/status` of
//! the milter (VmHWM) it measures peak memory for a given number of bytes in flight
//! (see bench/memory); under callgrind, the instructions a milter spends per message.
//!
//! `milter_load [--connect-each] ADDR FILE CONCURRENCY [MESSAGES_PER_TASK]`
//! ADDR: `HOST:PORT` or `unix:/PATH`. CONCURRENCY tasks run at the same time, each
//! sending its messages one after the other: over one connection, or with
//! `--connect-each` over a new connection per message (Postfix's smtpd opens one milter
//! connection per SMTP session, and bench/e2e's smtp-source sends one message per
//! session). Each task sends its body chunks only as the milter accepts them, so at
//! most CONCURRENCY messages are in flight.
//!
//! Stages go out as Postfix sends them: HELO, RCPT and DATA only to a milter that did
//! not negotiate them away, and before each stage the macros the milter asked for, or
//! Postfix's default list for that stage when it asked for none.

#[path = "../tests/support/message.rs"]
mod message;

use std::ffi::CString;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use indymilter_test::{MacroStage, ProtoOpts, Status, TestConnection};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let connect_each = args.iter().any(|a| a == "--connect-each");
    args.retain(|a| a != "--connect-each");
    if args.len() < 3 {
        eprintln!("usage: milter_load [--connect-each] ADDR FILE CONCURRENCY [MESSAGES_PER_TASK]");
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
        tasks.push(tokio::spawn(async move {
            if connect_each {
                for _ in 0..per {
                    run(&addr, &msg, 1).await?;
                }
                Ok(())
            } else {
                run(&addr, &msg, per).await
            }
        }));
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
        "messages={n} octets={} concurrency={conc} connect_each={connect_each} seconds={secs:.3} msgs_per_s={:.1} failed={failed}",
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
    headers: Vec<(CString, CString)>,
    body: Vec<u8>,
}

/// Header fields as (name, value with leading space, folds as "\n") and the body.
fn split(raw: &[u8]) -> Split {
    let h = message::milter_heading(raw);
    Split {
        // Generated headers hold no NUL.
        headers: h
            .fields
            .into_iter()
            .map(|(n, v)| {
                (
                    CString::new(n).unwrap_or_default(),
                    CString::new(v).unwrap_or_default(),
                )
            })
            .collect(),
        body: raw[h.body_at..].to_vec(),
    }
}

/// Postfix's default macro lists (postconf milter_*_macros), for stages the milter
/// asked nothing for.
fn postfix_default(stage: MacroStage) -> &'static str {
    match stage {
        MacroStage::Connect => "j {daemon_name} {daemon_addr} v _",
        MacroStage::Helo => "{tls_version} {cipher} {cipher_bits} {cert_subject} {cert_issuer}",
        MacroStage::Mail => {
            "i {auth_type} {auth_authen} {auth_author} {mail_addr} {mail_host} {mail_mailer}"
        }
        MacroStage::Rcpt => "{rcpt_addr} {rcpt_host} {rcpt_mailer}",
        MacroStage::Data | MacroStage::Eoh | MacroStage::Eom => "i",
    }
}

/// What Postfix would give each macro for an unauthenticated client without TLS; None:
/// not defined, so not sent.
fn macro_value(name: &str) -> Option<&'static str> {
    Some(match name {
        "j" | "{daemon_name}" => "mx.example.net",
        "{daemon_addr}" => "192.0.2.25",
        "v" => "Postfix 3.7.11",
        "_" => "client.example [192.0.2.1]",
        "{client_addr}" => "192.0.2.1",
        "{client_name}" => "client.example",
        "i" => "4Xk9Qb1Zz3z4yAb",
        "{mail_addr}" => "alice@example.org",
        "{mail_host}" | "{rcpt_host}" => "mx.example.org",
        "{mail_mailer}" | "{rcpt_mailer}" => "smtp",
        "{rcpt_addr}" => "bob@example.net",
        _ => return None,
    })
}

async fn send_macros(c: &mut TestConnection, stage: MacroStage) -> Result<(), String> {
    let names = match c.requested_macros().get(&stage) {
        Some(n) => n.to_string_lossy().into_owned(),
        None => postfix_default(stage).to_string(),
    };
    let pairs: Vec<(String, &str)> = names
        .split_whitespace()
        .filter_map(|n| macro_value(n).map(|v| (n.to_string(), v)))
        .collect();
    if pairs.is_empty() {
        return Ok(());
    }
    c.macros(stage, pairs)
        .await
        .map_err(|e| format!("macros: {e}"))
}

async fn run(addr: &str, m: &Split, per: usize) -> Result<(), String> {
    let b = TestConnection::configure().exact_leading_space(true);
    let mut c = match addr.strip_prefix("unix:") {
        Some(p) => b.open_unix(p).await,
        None => b.open_tcp(addr).await,
    }
    .map_err(|e| format!("connect {addr}: {e}"))?;
    let e = |what: &'static str| move |err| format!("{what}: {err}");
    let opts = c.negotiated_opts();
    send_macros(&mut c, MacroStage::Connect).await?;
    c.connect("client.example", ([192, 0, 2, 1], 50000))
        .await
        .map_err(e("connect"))?;
    if !opts.contains(ProtoOpts::NO_HELO) {
        send_macros(&mut c, MacroStage::Helo).await?;
        c.helo("client.example").await.map_err(e("helo"))?;
    }
    for _ in 0..per {
        send_macros(&mut c, MacroStage::Mail).await?;
        c.mail(["<alice@example.org>"]).await.map_err(e("mail"))?;
        if !opts.contains(ProtoOpts::NO_RCPT) {
            send_macros(&mut c, MacroStage::Rcpt).await?;
            c.rcpt(["<bob@example.net>"]).await.map_err(e("rcpt"))?;
        }
        if !opts.contains(ProtoOpts::NO_DATA) {
            send_macros(&mut c, MacroStage::Data).await?;
            c.data().await.map_err(e("data"))?;
        }
        for (n, v) in &m.headers {
            c.header(n.clone(), v.clone()).await.map_err(e("header"))?;
        }
        send_macros(&mut c, MacroStage::Eoh).await?;
        c.eoh().await.map_err(e("eoh"))?;
        for chunk in m.body.chunks(65535) {
            match c.body(chunk.to_vec()).await.map_err(e("body"))? {
                Status::Skip => break,
                Status::Continue | Status::Noreply => {}
                other => return Err(format!("body: {other:?}")),
            }
        }
        send_macros(&mut c, MacroStage::Eom).await?;
        let (_, st) = c.eom().await.map_err(e("eom"))?;
        if !matches!(st, Status::Accept | Status::Continue) {
            return Err(format!("eom: {st:?}"));
        }
    }
    c.close().await.map_err(e("close"))?;
    Ok(())
}
