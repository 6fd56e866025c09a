//! The daemon driven by miltertest (OpenDKIM's Lua milter client), a second
//! protocol client independent of both MTAs and of indymilter. Scripts live
//! in tests/miltertest/. Needs the `miltertest` package:
//! `sudo scripts/install-test-deps`.
#[path = "../support/mod.rs"]
mod support;

use support::{message, mta};

use mta::Daemon;
use std::path::Path;
use std::process::Command;

fn run(script: &str, cfg: &str, defines: &[(&str, String)]) {
    if !mta::require_miltertest() {
        return;
    }
    let d = Daemon::start(cfg, &[]);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/miltertest");
    let mut cmd = Command::new("miltertest");
    cmd.arg("-s")
        .arg(dir.join(script))
        .arg("-D")
        .arg(format!("SOCK={}", d.sendmail_spec()))
        .arg("-D")
        .arg(format!("DIR={}", dir.display()));
    for (k, v) in defines {
        cmd.arg("-D").arg(format!("{k}={v}"));
    }
    let (ok, out, err) = mta::run_bounded(&mut cmd, mta::WAIT);
    assert!(ok, "{script} failed:\n{out}{err}\ndaemon log:\n{}", d.log());
    assert!(out.contains(&format!("{script}: ok")), "{out}{err}");
}

const INBOUND: &str = "trusted_networks = []\n";

#[test]
fn nested_fold_replaces_body_and_reports() {
    if !mta::require_miltertest() {
        return;
    }
    // miltertest sends the body file as is: give it CRLF line ends, as an
    // MTA would.
    let msg = message::fixture("extbody/nested-rfc822-mixed.eml");
    let (_, rest) = message::split_fields(&msg);
    let body = rest.strip_prefix(b"\n").unwrap_or(&rest);
    let crlf: Vec<u8> = mta::smtp_data(body);
    let crlf = &crlf[..crlf.len() - 3]; // without the final ".\r\n"
    let tmp = mta::TempDir::new("miltertest");
    let f = tmp.path().join("body");
    std::fs::write(&f, crlf).unwrap();
    run(
        "nested_fold.lua",
        INBOUND,
        &[("BODY", f.display().to_string())],
    );
}

#[test]
fn top_level_fix_is_a_header_change() {
    run("top_level.lua", INBOUND, &[]);
}

#[test]
fn reject_policy_replies_550() {
    run(
        "reject.lua",
        "trusted_networks = []\n[policy.inbound]\n\"extbody-*\" = \"reject\"\n",
        &[],
    );
}

#[test]
fn clean_message_is_not_touched() {
    run("clean.lua", INBOUND, &[]);
}
