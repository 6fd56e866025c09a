//! The milter protocol as independent clients drive it (issue 19, item 7): the real
//! daemon binary, and the MTA side played by the PyPI `miltertest` library through
//! tests/miltertest/mta.py, which models Postfix, Postfix at protocol 2, Stalwart
//! and go-milter on their sources. Where a message comes out, it is compared byte for
//! byte with `mimeref-milter fix --as-milter` on the same file. Needs
//! `sudo scripts/install-test-deps` (scripts/install-test-deps.d/py-miltertest.sh).
#[path = "../support/mod.rs"]
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use mta::Daemon;
use serde_json::Value;
use support::{message, mta};

/// A fixture as an MTA hands it on: CRLF line ends.
fn msg(rel: &str) -> Vec<u8> {
    message::to_crlf(&message::fixture(rel))
}

/// Runs `mta.py SCENARIO --mta MTA` against the daemon with `messages`; its JSON, or
/// what it printed when it failed.
fn converse(
    python: &Path,
    d: &Daemon,
    scenario: &str,
    mta_name: &str,
    messages: &[&[u8]],
    extra: &[&str],
) -> Result<Value, String> {
    let tmp = mta::TempDir::new("protocol");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/miltertest/mta.py");
    let mut cmd = Command::new(python);
    cmd.arg(script)
        .arg(scenario)
        .args(["--mta", mta_name, "--port", &d.port.to_string()])
        .args(extra);
    for (i, m) in messages.iter().enumerate() {
        let f = tmp.path().join(format!("m{i}.eml"));
        std::fs::write(&f, m).unwrap();
        cmd.arg("--message").arg(f);
    }
    let (ok, out, err) = mta::run_bounded(&mut cmd, mta::WAIT);
    if !ok {
        return Err(format!("{err}{out}"));
    }
    serde_json::from_str(&out).map_err(|e| format!("{e}: {out}"))
}

fn run(python: &Path, d: &Daemon, scenario: &str, mta_name: &str, messages: &[&[u8]]) -> Value {
    converse(python, d, scenario, mta_name, messages, &[]).unwrap_or_else(|e| {
        panic!(
            "{scenario} with {mta_name} failed:\n{e}\ndaemon log:\n{}",
            d.log()
        )
    })
}

/// The message the client delivered for its `i`-th transaction (latin-1 text).
fn delivered(v: &Value, i: usize) -> Option<Vec<u8>> {
    v["delivered"][i]
        .as_str()
        .map(|s| s.chars().map(|c| c as u32 as u8).collect())
}

/// The reply codes of the `i`-th end of message, last one the verdict.
fn replies(v: &Value, i: usize) -> Vec<String> {
    v["replies"][i]
        .as_array()
        .unwrap_or_else(|| panic!("no replies {i}: {v}"))
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect()
}

fn assert_same(what: &str, got: Option<Vec<u8>>, want: &[u8], d: &Daemon) {
    let got = got.unwrap_or_else(|| panic!("{what}: not delivered\n{}", d.log()));
    assert!(
        got == want,
        "{what}: delivered differs from fix --as-milter:\n{}\ndaemon log:\n{}",
        mta::show_diff(want, &got),
        d.log()
    );
}

fn python() -> Option<PathBuf> {
    mta::require_py_miltertest()
}

/// Inbound mail with an external-body defect is rejected, outbound mail is fixed: the
/// direction a transaction is given shows in its verdict.
const BY_DIRECTION: &str = "[policy.inbound]\n\"extbody-*\" = \"reject\"\n";

#[test]
fn quit_nc_starts_a_clean_smtp_session() {
    let Some(py) = python() else { return };
    // trusted_networks is loopback by default: the first client is outbound.
    let d = Daemon::start(BY_DIRECTION, &[]);
    let m = msg("milter/top-extbody.eml");
    let v = run(&py, &d, "quit-nc", "replying", &[&m, &m]);
    assert_eq!(replies(&v, 0).last().unwrap(), "a", "{v}");
    assert_same(
        "outbound, before QUIT_NC",
        delivered(&v, 0),
        &mta::as_milter("outbound", BY_DIRECTION, &m),
        &d,
    );
    // After QUIT_NC the CONNECT is answered and the remote client is inbound.
    let connects: Vec<&Value> = v["log"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e.get("connect"))
        .collect();
    assert_eq!(connects, ["c", "c"], "{v}");
    assert_eq!(replies(&v, 1), ["y"], "{v}");
    assert!(delivered(&v, 1).is_none());
    assert!(
        d.log()
            .contains("direction=inbound(default) verdict=reject "),
        "{}",
        d.log()
    );
}

#[test]
fn an_empty_macro_packet_clears_the_stage() {
    let Some(py) = python() else { return };
    let cfg = format!("trusted_networks = []\n{BY_DIRECTION}");
    let d = Daemon::start(&cfg, &[]);
    let m = msg("milter/top-extbody.eml");
    let v = run(&py, &d, "macros", "postfix", &[&m, &m]);
    // Authenticated: outbound, fixed.
    assert_eq!(replies(&v, 0).last().unwrap(), "a", "{v}");
    assert_same(
        "authenticated",
        delivered(&v, 0),
        &mta::as_milter("outbound", &cfg, &m),
        &d,
    );
    // The next MAIL's macro packet holds no value: no {auth_authen} any more.
    assert_eq!(replies(&v, 1), ["y"], "{v}\n{}", d.log());
}

/// A macro packet before the option negotiation, as libmilter takes in any state: the
/// connection goes on and the transaction after it gets its verdict and its fix. The
/// PyPI library sends packets in whatever order it is told; OpenDKIM's miltertest
/// (Lua) negotiates by itself before any macro, so it cannot send this one.
#[test]
fn a_macro_packet_before_negotiation_is_taken() {
    let Some(py) = python() else { return };
    let cfg = "trusted_networks = []\n";
    let d = Daemon::start(cfg, &[]);
    let m = msg("milter/top-extbody.eml");
    let v = run(&py, &d, "macro-first", "postfix", &[&m]);
    assert_eq!(replies(&v, 0).last().unwrap(), "a", "{v}");
    assert_same(
        "after a macro packet before the negotiation",
        delivered(&v, 0),
        &mta::as_milter("inbound", cfg, &m),
        &d,
    );
    assert!(
        !d.log().contains("not a milter"),
        "refused as a stranger:\n{}",
        d.log()
    );
}

#[test]
fn end_of_message_with_body_octets_is_answered() {
    let Some(py) = python() else { return };
    let cfg = "trusted_networks = []\n";
    let d = Daemon::start(cfg, &[]);
    // A nested fix: the body is replaced, so every body octet counts.
    let m = msg("milter/nested-extbody.eml");
    let v = run(&py, &d, "eom-body", "noreply-body", &[&m]);
    let negotiated = v["log"][0]["negotiated"]["protocol"].as_u64().unwrap();
    assert_ne!(negotiated & 0x80000, 0, "no reply for body chunks: {v}");
    assert_same(
        "end of message with body octets",
        delivered(&v, 0),
        &mta::as_milter("inbound", cfg, &m),
        &d,
    );
}

#[test]
fn macro_lists_only_when_the_mta_allows_them() {
    let Some(py) = python() else { return };
    let cfg = "trusted_networks = []\n";
    let d = Daemon::start(cfg, &[]);
    let m = msg("milter/top-extbody.eml");
    let want = mta::as_milter("inbound", cfg, &m);
    // Without SMFIF_SETSYMLIST the reply is three words, which this client insists on.
    let v = run(&py, &d, "message", "no-symlist", &[&m]);
    let actions = v["log"][0]["negotiated"]["actions"].as_u64().unwrap();
    assert_eq!(actions & 0x100, 0, "{v}");
    assert_same("no SMFIF_SETSYMLIST", delivered(&v, 0), &want, &d);
    // Offered, the milter asks for it (its lists follow, which this client skips).
    let v = run(&py, &d, "message", "postfix", &[&m]);
    let actions = v["log"][0]["negotiated"]["actions"].as_u64().unwrap();
    assert_ne!(actions & 0x100, 0, "{v}");
    assert_same("SMFIF_SETSYMLIST", delivered(&v, 0), &want, &d);
}

/// The MTAs that do not offer LEADING_SPACE, each with a header fix (change_header)
/// and a nested fix (replace_body), every message compared with fix --as-milter.
fn without_leading_space(mta_name: &str, cfg: &str, report_first: bool) {
    let Some(py) = python() else { return };
    let d = Daemon::start(cfg, &[]);
    for f in ["milter/top-extbody.eml", "milter/nested-extbody.eml"] {
        let m = msg(f);
        let v = run(&py, &d, "message", mta_name, &[&m]);
        let protocol = v["log"][0]["negotiated"]["protocol"].as_u64().unwrap();
        assert_eq!(protocol & 0x100000, 0, "{v}");
        let mut want = mta::as_milter("inbound", cfg, &m);
        if report_first {
            want = report_field_first(&want);
        }
        assert_same(&format!("{mta_name}, {f}"), delivered(&v, 0), &want, &d);
    }
    assert!(
        !d.log().contains("ERROR"),
        "no refusal, no error:\n{}",
        d.log()
    );
}

/// Stalwart adds fields at the top of the heading, not at the end.
fn report_field_first(m: &[u8]) -> Vec<u8> {
    let at = message::header_values(m, "X-MIMERef");
    assert_eq!(at.len(), 1, "{}", String::from_utf8_lossy(m));
    let start = m.windows(12).position(|w| w == b"\r\nX-MIMERef:").unwrap() + 2;
    let end = start
        + m[start..]
            .windows(2)
            .enumerate()
            .position(|(i, w)| w == b"\r\n" && !matches!(m.get(start + i + 2), Some(b' ' | b'\t')))
            .unwrap()
        + 2;
    let mut out = m[start..end].to_vec();
    out.extend_from_slice(&m[..start]);
    out.extend_from_slice(&m[end..]);
    out
}

#[test]
fn postfix_at_protocol_2_is_served_without_leading_space() {
    without_leading_space("postfix-v2", "trusted_networks = []\n", false);
}

#[test]
fn stalwart_default_negotiation_is_served() {
    without_leading_space(
        "stalwart",
        "trusted_networks = []\n[report]\nenabled = false\n",
        false,
    );
    without_leading_space("stalwart", "trusted_networks = []\n", true);
}

#[test]
fn stalwart_sends_the_heading_again_as_the_body() {
    let Some(py) = python() else { return };
    let cfg = "trusted_networks = []\n";
    let d = Daemon::start(cfg, &[]);
    // Subject is not UTF-8 here: Stalwart sends it empty, and only the copy in the
    // body has its octets.
    let m = msg("milter/nested-extbody.eml");
    assert!(std::str::from_utf8(&m).is_err());
    let v = run(&py, &d, "message", "stalwart", &[&m]);
    assert!(
        d.log()
            .contains("the body began with a copy of the heading; analysed as the heading"),
        "{}",
        d.log()
    );
    let got = delivered(&v, 0).unwrap();
    assert_eq!(
        got.windows(9).filter(|w| w == b"Subject: ").count(),
        1,
        "one heading: {}",
        String::from_utf8_lossy(&got)
    );
    assert_same(
        "stalwart, 8-bit Subject",
        Some(got),
        &report_field_first(&mta::as_milter("inbound", cfg, &m)),
        &d,
    );
}

/// Stalwart sends MAIL and RCPT in lower case (the model does as its source does);
/// scopes compare addresses without regard to case, so a scope written with capitals
/// takes the same mail behind Stalwart as behind Postfix, which sends them as the
/// client wrote them.
#[test]
fn stalwart_lower_cases_the_envelope_and_scopes_still_match() {
    let Some(py) = python() else { return };
    let cfg = format!(
        "{BY_DIRECTION}[[scope]]\nname = \"bob\"\nrecipients = [\"Bob.Smith@Receiver.Example\"]\nexempt = \"ignore\"\n"
    );
    let d = Daemon::start(&cfg, &[]);
    let m = msg("milter/top-extbody.eml");
    let conv = |mta_name: &str, rcpt: &str| {
        converse(
            &py,
            &d,
            "message",
            mta_name,
            &[&m],
            &["--sender", "Alice@Sender.Example", "--recipient", rcpt],
        )
        .unwrap_or_else(|e| panic!("{mta_name} {rcpt}: {e}\n{}", d.log()))
    };
    let envelope = |v: &Value| {
        v["log"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|e| e.get("envelope"))
            .cloned()
            .unwrap_or_else(|| panic!("no envelope in {v}"))
    };
    let v = conv("stalwart", "Bob.Smith@Receiver.Example");
    assert_eq!(
        envelope(&v),
        serde_json::json!(["<alice@sender.example>", "<bob.smith@receiver.example>"])
    );
    // Exempt: accepted as it came.
    assert_eq!(replies(&v, 0).last().unwrap(), "a", "{v}\n{}", d.log());
    assert_eq!(delivered(&v, 0).as_deref(), Some(&m[..]), "{}", d.log());
    let v = conv("postfix", "Bob.Smith@Receiver.Example");
    assert_eq!(
        envelope(&v),
        serde_json::json!(["<Alice@Sender.Example>", "<Bob.Smith@Receiver.Example>"])
    );
    assert_eq!(replies(&v, 0).last().unwrap(), "a", "{v}\n{}", d.log());
    // Another recipient keeps the inbound policy: rejected.
    let v = conv("stalwart", "Carol@Receiver.Example");
    assert_eq!(replies(&v, 0), ["y"], "{v}\n{}", d.log());
}

#[test]
fn go_milter_defaults_are_served() {
    without_leading_space("go-milter", "trusted_networks = []\n", false);
}

/// What the flood of refused negotiations costs in log lines, and that their counts
/// add up to the metric.
#[test]
fn refused_negotiations_are_logged_once_a_second_with_the_peer_and_the_fix() {
    let metrics = mta::free_port();
    let d = Daemon::start(&format!("metrics_listen = \"127.0.0.1:{metrics}\"\n"), &[]);
    let n = 1000;
    let started = Instant::now();
    for _ in 0..n {
        // SMFIC_OPTNEG, protocol 6, offering only SMFIF_ADDHDRS: the default
        // configuration fixes, which needs SMFIF_CHGHDRS and SMFIF_CHGBODY.
        let mut s = TcpStream::connect(("127.0.0.1", d.port)).unwrap();
        s.set_read_timeout(Some(mta::WAIT)).unwrap();
        let mut p = vec![0, 0, 0, 13, b'O'];
        p.extend_from_slice(&6u32.to_be_bytes());
        p.extend_from_slice(&1u32.to_be_bytes());
        p.extend_from_slice(&0x1f_ffffu32.to_be_bytes());
        s.write_all(&p).unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        assert!(rest.is_empty(), "refused without a reply: {rest:?}");
    }
    let took = started.elapsed();
    // The rest of the count comes at the next flush, at most a second later.
    let counted = |log: &str| -> (u64, usize) {
        let re = regex::Regex::new(r"refused (\d+) milter negotiation\(s\)").unwrap();
        let lines: Vec<u64> = re
            .captures_iter(log)
            .map(|c| c[1].parse().unwrap())
            .collect();
        (lines.iter().sum(), lines.len())
    };
    let (sum, lines) = mta::wait_for(Duration::from_secs(5), || {
        let c = counted(&d.log());
        (c.0 == n).then_some(c)
    })
    .unwrap_or_else(|| panic!("the lines do not add up to {n}:\n{}", d.log()));
    let secs = took.as_secs() as usize + 2;
    assert!(
        lines <= secs,
        "{lines} lines for {n} refusals in {took:?}:\n{}",
        d.log()
    );
    let log = d.log();
    let line = log
        .lines()
        .find(|l| l.contains("milter negotiation(s)"))
        .unwrap();
    assert!(line.contains("ERROR"), "{line}");
    assert!(line.contains("the MTA at 127.0.0.1:"), "{line}");
    assert!(line.contains("milter_protocol = 6"), "{line}");
    // Stalwart 0.16 calls the actions mask flagsAction.
    assert!(line.contains("flagsAction"), "{line}");
    assert!(line.contains("SMFIF_CHGHDRS"), "{line}");
    let scrape = http_get(metrics, "/metrics");
    let metric = scrape
        .lines()
        .find(|l| l.starts_with("mimeref_events_total{event=\"negotiation_refused\"}"))
        .unwrap_or_else(|| panic!("{scrape}"));
    assert!(metric.ends_with(&format!(" {sum}")), "{metric} vs {sum}");
    eprintln!("{n} refused negotiations in {took:?}: {lines} log line(s), counts {sum}");
}

fn http_get(port: u16, path: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(mta::WAIT)).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// The repairs of what readers show go through the protocol as `fix --as-milter` makes
/// them: a disposition and a Content-ID inside the body (replace_body), a top-level
/// multipart/mixed made related (change_header), and a top-level Content-Base taken
/// out (change_header with no value, which deletes the field).
#[test]
fn inline_part_repairs_reach_the_mta_as_fix_as_milter_makes_them() {
    let Some(py) = python() else { return };
    // Inbound, with the repairs the defaults make outbound asked for.
    let cfg = "trusted_networks = []\n[policy.inbound]\n\"related-part-disposition\" = \"fix\"\n\"cid-outside-related\" = \"fix\"\n\"html-base-remote\" = \"fix\"\n";
    let d = Daemon::start(cfg, &[]);
    // The remote base on the top-level heading instead of the HTML part's.
    let top_base = String::from_utf8(msg("inline/base-remote.eml"))
        .unwrap()
        .replace(
            "Content-Base: https://login.example-attacker.test/portal/\r\n",
            "",
        )
        .replace(
            "MIME-Version: 1.0\r\n",
            "MIME-Version: 1.0\r\nContent-Base: https://login.example-attacker.test/portal/\r\n",
        )
        .into_bytes();
    let cases = [
        (
            "disposition-attachment",
            msg("inline/disposition-attachment.eml"),
        ),
        ("content-id-doubled", msg("inline/content-id-doubled.eml")),
        ("cid-in-mixed", msg("inline/cid-in-mixed.eml")),
        ("top-level Content-Base", top_base),
    ];
    for (name, m) in &cases {
        let v = run(&py, &d, "message", "postfix", &[m]);
        let want = mta::as_milter("inbound", cfg, m);
        assert!(
            message::header_values(&want, "X-MIMERef")
                .iter()
                .any(|h| h.contains("fixed=")),
            "{name}: fix --as-milter fixes it:\n{}",
            String::from_utf8_lossy(&want)
        );
        assert_same(name, delivered(&v, 0), &want, &d);
    }
    let last = delivered(&run(&py, &d, "message", "postfix", &[&cases[3].1]), 0).unwrap();
    assert!(
        !String::from_utf8_lossy(&last).contains("Content-Base"),
        "the field is gone"
    );
}

/// The file-name repairs (issue 39) go through the protocol as `fix --as-milter` makes
/// them: twins and RFC 2231 forms inside a part (replace_body), 8-bit octets in a
/// header field the MTA hands over as they came, and a top-level attachment's own
/// Content-Type and Content-Disposition (two change_header).
#[test]
fn name_repairs_reach_the_mta_as_fix_as_milter_makes_them() {
    let Some(py) = python() else { return };
    let cfg = "trusted_networks = []\n[policy.inbound]\n\"part-name-rfc2231-only\" = \"fix\"\n\"part-name-8bit\" = \"fix\"\n\"part-name-one-field\" = \"fix\"\n";
    let d = Daemon::start(cfg, &[]);
    // Python's email with a scanner's habit: the attachment is the whole message.
    let top = b"From: scanner@example.org\r\nTo: bob@example.net\r\nSubject: Scan\r\nMIME-Version: 1.0\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename*=utf-8''Scan%20%E2%80%93%20M%C3%A4rz.pdf\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n".to_vec();
    let cases = [
        ("python-email", msg("names/python-email.eml")),
        (
            "apple-mail-continuations",
            msg("names/apple-mail-continuations.eml"),
        ),
        ("gmail-8bit", msg("names/gmail-8bit.eml")),
        ("filename-only", msg("names/filename-only.eml")),
        ("top-level attachment", top),
    ];
    for (name, m) in &cases {
        let v = run(&py, &d, "message", "postfix", &[m]);
        let want = mta::as_milter("inbound", cfg, m);
        assert!(
            want != *m,
            "{name}: fix --as-milter fixes it:\n{}",
            String::from_utf8_lossy(&want)
        );
        assert_same(name, delivered(&v, 0), &want, &d);
    }
}

/// The repairs of parts shown as the sender meant go through the protocol as `fix
/// --as-milter` makes them, inside the body (replace_body): an image's media type with
/// the disposition it then needs, a base64 forward offered as an .eml file, a
/// Content-ID a converter cut made whole.
#[test]
fn part_type_repairs_reach_the_mta_as_fix_as_milter_makes_them() {
    let Some(py) = python() else { return };
    // Inbound, with the repairs asked for that the defaults only log.
    let cfg = "trusted_networks = []\n[policy.inbound]\n\"ref-image-type\" = \"fix\"\n\"related-part-disposition-missing\" = \"fix\"\n\"rfc822-encoded\" = \"fix\"\n\"related-ref-mismatch\" = \"fix\"\n";
    let d = Daemon::start(cfg, &[]);
    for (name, fixed) in [
        (
            "refs/octet-stream-png-no-disposition.eml",
            "Content-Type: image/png; name=logo.png",
        ),
        (
            "rfc822/exchange-forward-base64.eml",
            "Content-Type: application/octet-stream;",
        ),
        (
            "refs/cut-id.eml",
            "Content-ID: <image001.png@01D719B4.37AF4500>",
        ),
    ] {
        let m = msg(name);
        let v = run(&py, &d, "message", "postfix", &[&m]);
        let want = mta::as_milter("inbound", cfg, &m);
        assert!(
            String::from_utf8_lossy(&want).contains(fixed),
            "{name}: fix --as-milter fixes it:\n{}",
            String::from_utf8_lossy(&want)
        );
        assert_same(name, delivered(&v, 0), &want, &d);
    }
}
