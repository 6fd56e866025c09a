//! End-to-end behind a real, private Postfix (see tests/support/mta/mod.rs).
//! Needs root and the `postfix` package: `sudo scripts/install-test-deps`.
#[path = "../support/mod.rs"]
mod support;

use support::mta;

use mta::probe::{self, Action, Probe};
use mta::{Postfix, PostfixConfig};

const PLAIN: &[u8] = b"From: Alice <alice@sender.example>
To: bob@receiver.example
Subject: plain
Date: Sat, 01 Mar 2025 10:00:00 +0000
Message-ID: <plain-1@sender.example>
X-Folded: first part
	second part

Body line one.
.leading dot survives dot-stuffing

last line
";

#[test]
fn harness_no_milter_delivers_every_byte() {
    if !mta::require_postfix() {
        return;
    }
    let pf = Postfix::start(&PostfixConfig::with_milter(""));
    let r = pf.send(PLAIN);
    assert_eq!(r.code, 250, "{r}");
    let d = pf.wait_delivered("plain-1@");
    assert!(
        d.envelope
            .iter()
            .any(|l| l.starts_with("X-Rcpt-Args: <bob@receiver.example>")),
        "{:?}",
        d.envelope
    );
    let got = d.without_trace();
    assert_eq!(got, PLAIN, "{}", mta::show_diff(PLAIN, &got));
}

/// What Postfix shows a milter and how it applies header edits: the facts
/// recorded in tests/mta/QUIRKS.md.
const PROBE_MSG: &[u8] = b"From: alice@sender.example
To: bob@receiver.example
Subject: probe
Message-ID: <probe-1@sender.example>
X-Dup: one
X-Dup: two
X-Fold: a
  b
X-NoSpace:tight
X-Empty:
X-Spaces:   three
X-Tab:\ttab
x-case: lower
X-CASE: upper

body
";

#[test]
fn harness_probe_milter_header_semantics() {
    if !mta::require_postfix() {
        return;
    }
    let msg: &[u8] = PROBE_MSG;
    let probe = Probe::start(vec![
        // Index 2 = second X-Dup occurrence.
        Action::Change("X-Dup".into(), 2, Some("changed-two".into())),
        // A folded replacement, continuation introduced by "\n\t".
        Action::Change("X-Fold".into(), 1, Some("c\n\td".into())),
        Action::Change("X-NoSpace".into(), 1, Some("still-tight".into())),
        Action::Add("X-Added".into(), "added".into()),
        // A replacement that carries its own leading space.
        Action::Change("X-Empty".into(), 1, Some(" lead".into())),
        // A fold written with CRLF instead of LF.
        Action::Change("Subject".into(), 1, Some("crlf\r\n\tfold".into())),
        Action::Insert(0, "X-Inserted-0".into(), "zero".into()),
        Action::Insert(2, "X-Inserted-2".into(), "two".into()),
        // Occurrences are counted without regard to case.
        Action::Change("X-Case".into(), 2, Some("changed".into())),
    ]);
    let pf = Postfix::start(&PostfixConfig::with_milter(&probe.postfix_spec()));
    let r = pf.send(msg);
    assert_eq!(r.code, 250, "{r}");
    let d = pf.wait_delivered("probe-1@");
    let seen = probe.seen();
    assert_eq!(seen.len(), 1);
    let names: Vec<&str> = seen[0].headers.iter().map(|(n, _)| n.as_str()).collect();
    // Postfix does not show the milter its own Received: header.
    assert_eq!(
        names,
        [
            "From",
            "To",
            "Subject",
            "Message-ID",
            "X-Dup",
            "X-Dup",
            "X-Fold",
            "X-NoSpace",
            "X-Empty",
            "X-Spaces",
            "X-Tab",
            "x-case",
            "X-CASE"
        ]
    );
    let val = |n: &str| {
        seen[0]
            .headers
            .iter()
            .find(|(h, _)| h == n)
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    // Folds arrive as "\n" followed by the original whitespace.
    assert_eq!(val("Subject"), b"probe");
    assert_eq!(val("X-Fold"), b"a\n  b");
    assert_eq!(val("X-NoSpace"), b"tight");
    // The body comes with CRLF line ends (the headers' folds with LF).
    assert_eq!(seen[0].body, b"body\r\n");
    // Exactly one space after the colon is dropped; a tab is kept.
    assert_eq!(val("X-Spaces"), b"  three");
    assert_eq!(val("X-Tab"), b"\ttab");
    assert_eq!(val("X-Empty"), b"");

    let out = d.without_trace();
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("X-Dup: one\nX-Dup: changed-two\n"), "{text}");
    assert!(text.contains("X-Fold: c\n\td\n"), "{text}");
    assert!(text.contains("X-NoSpace: still-tight\n"), "{text}");
    // Postfix writes "Name: " + value: a leading space in the value doubles.
    assert!(text.contains("X-Empty:  lead\n"), "{text}");
    // The changed field keeps the name as the milter spelled it.
    assert!(text.contains("x-case: lower\nX-Case: changed\n"), "{text}");
    // A "\r\n" fold in a value is stored as a plain line break.
    assert!(text.contains("Subject: crlf\n\tfold\n"), "{text}");
    // Added fields go last; insert indices count Postfix's own Received:
    // field, which the milter never saw.
    assert!(text.contains("X-Added: added\n\nbody\n"), "{text}");
    let all = String::from_utf8_lossy(&d.message);
    assert!(
        all.starts_with("X-Inserted-0: zero\nReceived: from "),
        "{all}"
    );
    assert!(
        all.contains("(UTC)\nX-Inserted-2: two\nFrom: alice"),
        "{all}"
    );
}

#[test]
fn harness_probe_leading_space_mode() {
    if !mta::require_postfix() {
        return;
    }
    let probe = probe::leading_space_probe();
    let pf = Postfix::start(&PostfixConfig::with_milter(&probe.postfix_spec()));
    probe::leading_space_mode(|m| {
        let m = String::from_utf8_lossy(m).replace("@ID@", "ls-1@sender.example");
        let r = pf.send(m.as_bytes());
        assert_eq!(r.code, 250, "{r}");
        pf.wait_delivered("ls-1@").without_trace()
    });
    probe::leading_space_seen(&probe);
}

// ---------------------------------------------------------------------------
// mimeref-milter behind Postfix

use mta::Daemon;
use support::message::{drop_fields, fixture, with_message_id};

/// Loopback clients would be outbound through the default trusted_networks;
/// the tests decide direction through the smtpd they use instead.
fn config(tables: &str) -> String {
    format!(
        "trusted_networks = []\noutbound_daemons = [\"{}\"]\n{tables}",
        mta::SUBMISSION_DAEMON_NAME
    )
}

fn start(cfg: &str, extra: &[&str], pf: PostfixConfig) -> (Daemon, Postfix) {
    let d = Daemon::start(cfg, extra);
    let mut pf = pf;
    pf.milters = d.postfix_spec();
    (d, Postfix::start(&pf))
}

fn nested() -> (Vec<u8>, Vec<u8>) {
    mta::nested_fixture("nested-1@sender.example")
}

const LONG_URL_TOP: &[u8] = b"Message-ID: <top-1@sender.example>
From: alice@sender.example
X-MIMERef: forged one
To: bob@receiver.example
Subject: top-level external-body
X-MIMERef: forged two
MIME-Version: 1.0
X-Content-Type: message/external-body; access-type=URL; url=http://example.org/untouched
Content-Type: message/external-body; access-type=URL; url=http://reports.example.org/2024/quarterly-results-f\xc3\xbcr-alle-abteilungen.pdf
Content-Description: the report

Content-Type: application/pdf
Content-ID: <report@reports.example.org>

";

/// What the daemon logs (at debug) about the stages Postfix and it agreed on.
const NO_REPLY_LOG: &str = "negotiated: no reply at connect, header, end of header, body";
const REPLY_LOG: &str = "negotiated: a reply at every stage";

#[test]
fn nested_external_body_fold_changes_no_other_byte() {
    nested_fold("", NO_REPLY_LOG);
}

#[test]
fn nested_external_body_fold_with_a_reply_at_every_stage() {
    nested_fold("no_reply_stages = false\n", REPLY_LOG);
}

fn nested_fold(top: &str, negotiated: &str) {
    if !mta::require_postfix() {
        return;
    }
    let cfg = config(top);
    let (d, pf) = start(&cfg, &[], PostfixConfig::with_milter(""));
    let (input, fixed) = nested();
    let r = pf.send(&input);
    assert_eq!(r.code, 250, "{r}\n{}", d.log());
    let got = pf.wait_delivered("nested-1@");
    let report = got.header("X-MIMERef");
    assert_eq!(report.len(), 1, "one report header: {report:?}");
    assert!(report[0].starts_with("fix;"), "{report:?}");
    assert!(report[0].contains("extbody-url-unquoted"), "{report:?}");
    assert!(String::from_utf8_lossy(&got.message).contains("\nX-MIMERef: fix;"));
    let body = drop_fields(&got.without_trace(), "X-MIMERef");
    assert_eq!(
        body,
        fixed,
        "{}\ndaemon log:\n{}",
        mta::show_diff(&fixed, &body),
        d.log()
    );
    assert!(d.log().contains(negotiated), "{}", d.log());
    mta::assert_queue_id_in_verdict(&d.log(), "fix");
}

/// Postfix at milter protocol 2 offers no LEADING_SPACE: it drops the space after the
/// colon and writes "Name: " before a changed or added value. A header fix (with
/// forged report fields deleted) and a body fix come out as fix --as-milter writes
/// them, and every stage had its reply.
#[test]
fn milter_protocol_2_delivers_what_fix_as_milter_writes() {
    if !mta::require_postfix() {
        return;
    }
    let cfg = config("");
    let mut pf = PostfixConfig::with_milter("");
    pf.extra_main.push("milter_protocol = 2".into());
    let (d, pf) = start(&cfg, &[], pf);
    let (nested, _) = nested();
    for (id, input) in [("top-1@", LONG_URL_TOP.to_vec()), ("nested-1@", nested)] {
        let r = pf.send(&input);
        assert_eq!(r.code, 250, "{r}\n{}", d.log());
        let got = pf.wait_delivered(id).without_trace();
        let want = mta::as_milter("inbound", &cfg, &input);
        assert_ne!(want, input, "the fixture needs a fix");
        assert_eq!(got, want, "{}\n{}", mta::show_diff(&want, &got), d.log());
    }
    let log = d.log();
    assert!(
        log.contains("a reply at every stage; header values without their leading space"),
        "{log}"
    );
    assert!(!log.contains("ERROR"), "{log}");
}

#[test]
fn top_level_fix_lands_on_the_right_field_and_forged_reports_go() {
    if !mta::require_postfix() {
        return;
    }
    let cfg = config("");
    let (d, pf) = start(&cfg, &[], PostfixConfig::with_milter(""));
    let r = pf.send(LONG_URL_TOP);
    assert_eq!(r.code, 250, "{r}\n{}", d.log());
    let got = pf.wait_delivered("top-1@");
    let out = got.without_trace();
    let text = String::from_utf8_lossy(&out).into_owned();

    // The forged copies are gone, ours is there once.
    let report = got.header("X-MIMERef");
    assert_eq!(report.len(), 1, "{text}");
    assert!(!report[0].contains("forged"), "{text}");
    assert!(report[0].starts_with("fix;"), "{text}");

    // Same bytes as the offline fix, apart from report headers; the field
    // next to it with a similar name and the same defect is untouched.
    let want = drop_fields(&mta::offline_fix(&[], &cfg, LONG_URL_TOP), "X-MIMERef");
    let body = drop_fields(&out, "X-MIMERef");
    assert_eq!(
        body,
        want,
        "{}\ndaemon log:\n{}",
        mta::show_diff(&want, &body),
        d.log()
    );
    assert_ne!(
        want,
        drop_fields(LONG_URL_TOP, "X-MIMERef"),
        "the fixture needs a fix"
    );
    assert!(
        text.contains("X-Content-Type: message/external-body; access-type=URL; url=http://example.org/untouched\n"),
        "{text}"
    );
    // "Content-Type: value": exactly one space after the colon.
    assert!(
        text.contains("\nContent-Type: message/external-body;"),
        "{text}"
    );
}

#[test]
fn reject_gives_5xx_with_configured_text() {
    if !mta::require_postfix() {
        return;
    }
    let cfg = config(
        r#"[reply]
reject = "550 5.6.0 Refused by the e2e test: {rules}"
[policy.inbound]
"extbody-*" = "reject"
"#,
    );
    let (d, pf) = start(&cfg, &[], PostfixConfig::with_milter(""));
    let (input, _) = nested();
    let r = pf.send(&input);
    assert_eq!(r.code, 550, "{r}\n{}", d.log());
    assert!(r.text.starts_with("5.6.0 Refused by the e2e test: "), "{r}");
    assert!(r.text.contains("extbody-url-unquoted"), "{r}");
    // A clean message still passes in the same configuration.
    let r = pf.send(PLAIN);
    assert_eq!(r.code, 250, "{r}");
    pf.wait_delivered("plain-1@");
    assert!(pf
        .delivered()
        .iter()
        .all(|m| !String::from_utf8_lossy(&m.message).contains("nested-1@")));
}

#[test]
fn tempfail_gives_4xx_with_configured_text() {
    if !mta::require_postfix() {
        return;
    }
    let cfg = config(
        r#"[reply]
tempfail = "451 4.6.0 Try later, e2e: {rules}"
[policy.inbound]
"*" = "tempfail"
"#,
    );
    let (d, pf) = start(&cfg, &[], PostfixConfig::with_milter(""));
    let (input, _) = nested();
    let r = pf.send(&input);
    assert_eq!(r.code, 451, "{r}\n{}", d.log());
    assert!(r.text.starts_with("4.6.0 Try later, e2e: "), "{r}");
}

#[test]
fn quarantine_puts_the_message_on_hold() {
    if !mta::require_postfix() {
        return;
    }
    let cfg = config("[policy.inbound]\n\"*\" = \"quarantine\"\n");
    let (d, pf) = start(&cfg, &[], PostfixConfig::with_milter(""));
    let (input, _) = nested();
    let r = pf.send(&input);
    assert_eq!(r.code, 250, "{r}\n{}", d.log());
    let held = mta::wait_for(mta::WAIT, || {
        let h = pf.held();
        (!h.is_empty()).then_some(h)
    })
    .unwrap_or_else(|| panic!("nothing on hold: {:?}\n{}", pf.queue_json(), pf.log()));
    assert_eq!(held.len(), 1, "{held:?}");
    assert!(held[0].contains("bob@receiver.example"), "{held:?}");
    // Postfix logs the reason the milter gave; postlogd writes the line after the
    // queue file is on hold, later still on a loaded machine.
    let logged = mta::wait_for(mta::WAIT, || pf.log().contains("hold: ").then_some(()));
    assert!(logged.is_some(), "{}", pf.log());
    assert!(pf.delivered().is_empty());
}

#[test]
fn dry_run_changes_nothing() {
    if !mta::require_postfix() {
        return;
    }
    let cfg = config("[policy.inbound]\n\"*\" = \"reject\"\n");
    let (d, pf) = start(&cfg, &["--dry-run"], PostfixConfig::with_milter(""));
    let (input, _) = nested();
    let r = pf.send(&input);
    assert_eq!(r.code, 250, "dry run must not reject: {r}\n{}", d.log());
    let got = pf.wait_delivered("nested-1@").without_trace();
    assert_eq!(got, input, "{}", mta::show_diff(&input, &got));
    let r = pf.send(LONG_URL_TOP);
    assert_eq!(r.code, 250, "{r}");
    let got = pf.wait_delivered("top-1@").without_trace();
    assert_eq!(got, LONG_URL_TOP, "{}", mta::show_diff(LONG_URL_TOP, &got));
}

#[test]
fn inbound_and_submission_get_their_own_policy() {
    if !mta::require_postfix() {
        return;
    }
    let cfg = config(
        r#"[reply]
reject = "550 5.6.0 inbound refused: {rules}"
[policy.inbound]
"*" = "reject"
[policy.outbound]
"*" = "fix"
"#,
    );
    let mut pfc = PostfixConfig::with_milter("");
    pfc.submission = true;
    let (d, pf) = start(&cfg, &[], pfc);
    let (input, fixed) = nested();
    let r = pf.send(&input);
    assert_eq!(r.code, 550, "plain smtpd is inbound: {r}\n{}", d.log());
    let mut c = pf.submission();
    let r = c.send("alice@sender.example", &["bob@receiver.example"], &input);
    c.quit();
    assert_eq!(
        r.code,
        250,
        "submission smtpd is outbound: {r}\n{}",
        d.log()
    );
    let got = pf.wait_delivered("nested-1@");
    assert_eq!(drop_fields(&got.without_trace(), "X-MIMERef"), fixed);
}

#[test]
fn milter_down_follows_default_action_and_restart_recovers() {
    if !mta::require_postfix() {
        return;
    }
    let cfg = config("");
    let (mut d, pf) = start(&cfg, &[], PostfixConfig::with_milter(""));
    let (input, fixed) = nested();
    let r = pf.send(&input);
    assert_eq!(r.code, 250, "{r}");
    pf.wait_delivered("nested-1@");

    d.stop();
    let second = with_message_id(
        &fixture("extbody/nested-rfc822-mixed.eml"),
        "nested-2@sender.example",
    );
    let r = pf.send(&second);
    // milter_default_action = tempfail: the client keeps the message.
    assert_eq!(r.class(), 4, "milter down must tempfail: {r}");

    d.restart();
    // The client retries after the restart: delivered, and fixed.
    let r = pf.send(&second);
    assert_eq!(r.code, 250, "after restart: {r}\n{}", d.log());
    let got = pf.wait_delivered("nested-2@");
    let want = with_message_id(
        &fixture("extbody/nested-rfc822-mixed.delivered"),
        "nested-2@sender.example",
    );
    assert_eq!(drop_fields(&got.without_trace(), "X-MIMERef"), want);
    assert_eq!(pf.delivered().len(), 2);
    let _ = fixed;
}

#[test]
fn milter_down_with_default_accept_passes_mail_unchanged() {
    if !mta::require_postfix() {
        return;
    }
    let cfg = config("");
    let mut pfc = PostfixConfig::with_milter("");
    pfc.default_action = "accept".into();
    let (mut d, pf) = start(&cfg, &[], pfc);
    d.stop();
    let (input, _) = nested();
    let r = pf.send(&input);
    assert_eq!(r.code, 250, "{r}");
    let got = pf.wait_delivered("nested-1@").without_trace();
    assert_eq!(got, input);
}

/// SMTP AUTH makes a session outbound (ANONYMOUS: see `mta::sasl_anonymous`).
#[test]
fn sasl_authenticated_session_is_outbound() {
    if !mta::require_postfix() {
        return;
    }
    let (_sasl, sasl_main_cf) = mta::sasl_anonymous();
    let cfg = config("[policy.inbound]\n\"*\" = \"reject\"\n[policy.outbound]\n\"*\" = \"fix\"\n");
    let mut pfc = PostfixConfig::with_milter("");
    pfc.extra_main = sasl_main_cf;
    let (d, pf) = start(&cfg, &[], pfc);
    let (input, fixed) = nested();

    let mut c = pf.smtp();
    let r = c.send("alice@sender.example", &["bob@receiver.example"], &input);
    assert!(
        r.code == 550 && r.text.contains("MIME reference error"),
        "before AUTH: inbound: {r}\n{}",
        d.log()
    );
    // Allowed between transactions (RFC 4954 section 4): one session, both directions.
    let r = c.cmd("AUTH ANONYMOUS dGVzdA==");
    assert_eq!(r.code, 235, "AUTH: {r}\n{}", pf.log());
    let r = c.send("alice@sender.example", &["bob@receiver.example"], &input);
    c.quit();
    assert_eq!(r.code, 250, "after AUTH: outbound: {r}\n{}", d.log());
    let got = pf.wait_delivered("nested-1@");
    assert_eq!(drop_fields(&got.without_trace(), "X-MIMERef"), fixed);
    let log = d.log();
    let verdicts: Vec<&str> = log.lines().filter(|l| l.contains("direction=")).collect();
    assert_eq!(verdicts.len(), 2, "{log}");
    assert!(verdicts[0].contains("direction=inbound"), "{log}");
    assert!(verdicts[1].contains("direction=outbound"), "{log}");
    // Written by postlogd, which may not have caught up with the delivery.
    let logged = mta::wait_for(mta::WAIT, || {
        pf.log().contains("sasl_method=ANONYMOUS").then_some(())
    });
    assert!(logged.is_some(), "{}", pf.log());
}

#[test]
fn trusted_network_client_is_outbound() {
    if !mta::require_postfix() {
        return;
    }
    // The default trusted_networks holds 127.0.0.0/8: the test client is
    // outbound, so only the outbound table applies.
    let cfg = "[policy.inbound]\n\"*\" = \"reject\"\n[policy.outbound]\n\"*\" = \"fix\"\n";
    let (d, pf) = start(cfg, &[], PostfixConfig::with_milter(""));
    let (input, fixed) = nested();
    let r = pf.send(&input);
    assert_eq!(r.code, 250, "{r}\n{}", d.log());
    let got = pf.wait_delivered("nested-1@");
    assert_eq!(drop_fields(&got.without_trace(), "X-MIMERef"), fixed);
    assert!(d.log().contains("direction=outbound"), "{}", d.log());
}

#[test]
fn top_level_fix_keeps_the_white_space_after_the_colon() {
    if !mta::require_postfix() {
        return;
    }
    let msg: &[u8] = b"Message-ID: <tab-1@sender.example>
From: alice@sender.example
MIME-Version: 1.0
Content-Type:\tmessage/external-body; access-type=URL;\n\turl=http://example.org/a/b/report.pdf

Content-Type: application/pdf
Content-ID: <report@example.org>

";
    let cfg = config("");
    let (d, pf) = start(&cfg, &[], PostfixConfig::with_milter(""));
    let r = pf.send(msg);
    assert_eq!(r.code, 250, "{r}");
    let got = drop_fields(&pf.wait_delivered("tab-1@").without_trace(), "X-MIMERef");
    let want = drop_fields(&mta::offline_fix(&[], &cfg, msg), "X-MIMERef");
    assert_ne!(want, msg, "the fixture needs a fix");
    assert_eq!(got, want, "{}\n{}", mta::show_diff(&want, &got), d.log());
    assert!(String::from_utf8_lossy(&got).contains("\nContent-Type:\tmessage/external-body;"));
}

#[test]
fn top_level_fix_lands_on_the_second_of_two_same_named_fields() {
    if !mta::require_postfix() {
        return;
    }
    // Two Content-Locations (itself a finding, location-multiple); only the second is
    // too long, so change_header must address index 2 and leave the first alone.
    let msg: &[u8] = b"Message-ID: <occ-2@sender.example>
From: alice@sender.example
MIME-Version: 1.0
Content-Location: http://example.org/short.html
Content-Type: text/html
Content-Location: http://example.org/a/very/long/path/that/goes/on/and/on/beyond/the/seventy-eight/octets/index.html

<p>x</p>
";
    // The fold is off by default (it reads worse in some readers): asked for here.
    let cfg = config(
        r#"[policy.inbound]
"location-line-too-long" = "fix"
[policy.outbound]
"location-line-too-long" = "fix"
"#,
    );
    let (d, pf) = start(&cfg, &[], PostfixConfig::with_milter(""));
    let r = pf.send(msg);
    assert_eq!(r.code, 250, "{r}");
    let got = drop_fields(&pf.wait_delivered("occ-2@").without_trace(), "X-MIMERef");
    let want = drop_fields(&mta::offline_fix(&[], &cfg, msg), "X-MIMERef");
    assert_ne!(want, msg, "the fixture needs a fix");
    assert_eq!(got, want, "{}\n{}", mta::show_diff(&want, &got), d.log());
    let text = String::from_utf8_lossy(&got);
    assert!(text.contains("\nContent-Location: http://example.org/short.html\nContent-Type: text/html\nContent-Location: http://example.org/a/very/long/path/that\n\t/goes/"), "{text}");
}

/// A URL rewrite and a strip inside a nested multipart go through Postfix as one
/// body replacement; the delivered message is the offline fix, byte for byte, and the
/// report header and the log name both changes.
#[test]
fn rewrite_and_strip_inside_a_nested_multipart() {
    if !mta::require_postfix() {
        return;
    }
    let cfg = config(
        r#"[schemes]
strip_denied = true
[[rewrite]]
scheme = "http"
host_suffix = "example.com"
template = "https://{authority}{path}{query}"
"#,
    );
    let (d, pf) = start(&cfg, &[], PostfixConfig::with_milter(""));
    let input = with_message_id(
        &fixture("milter/url-policy-nested.eml"),
        "url-policy-1@sender.example",
    );
    let fixed = mta::offline_fix(&[], &cfg, &input);
    assert!(fixed != input, "the offline fix must change something");
    let r = pf.send(&input);
    assert_eq!(r.code, 250, "{r}\n{}", d.log());
    let got = pf.wait_delivered("url-policy-1@");
    let report = got.header("X-MIMERef");
    assert_eq!(report.len(), 1, "one report header: {report:?}");
    assert!(report[0].starts_with("fix;"), "{report:?}");
    assert!(
        report[0].contains("changed=2.1 extbody-url-rewritten <http://files.example.com/report.pdf> -> <https://files.example.com/report.pdf>"),
        "{report:?}"
    );
    assert!(
        report[0].contains(
            "changed=2.2 extbody-url-scheme-denied <javascript:alert(document.cookie)> -> stripped"
        ),
        "{report:?}"
    );
    let body = drop_fields(&got.without_trace(), "X-MIMERef");
    assert_eq!(
        body,
        fixed,
        "{}\ndaemon log:\n{}",
        mta::show_diff(&fixed, &body),
        d.log()
    );
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.contains("URL=\"https://files.example.com/report.pdf\""),
        "{text}"
    );
    assert!(
        text.contains("Removed URL:\n  javascript:alert(document.cookie)\n--inner--"),
        "{text}"
    );
    let log = d.log();
    assert!(
        log.contains("changed 2.1 extbody-url-rewritten <http://files.example.com/report.pdf> -> <https://files.example.com/report.pdf>"),
        "{log}"
    );
    assert!(
        log.contains("changed 2.2 extbody-url-scheme-denied"),
        "{log}"
    );
}

/// A Chrome "Save as MHTML" stylesheet referenced as `cid:` but carrying only
/// `Content-Location: cid:…`: under the built-in policy the daemon inserts the
/// Content-ID (one body replacement) and adds the report header, and Postfix delivers
/// exactly what `fix --as-milter` writes offline, report header included.
#[test]
fn content_id_insertion_is_what_fix_as_milter_writes() {
    if !mta::require_postfix() {
        return;
    }
    let cfg = config("");
    let (d, pf) = start(&cfg, &[], PostfixConfig::with_milter(""));
    let page = String::from_utf8(fixture("html/chrome-cid-location.eml"))
        .unwrap()
        .replace("From: <Saved by Blink>", "From: alice@sender.example");
    let input = with_message_id(page.as_bytes(), "cid-loc-1@sender.example");
    let r = pf.send(&input);
    assert_eq!(r.code, 250, "{r}\n{}", d.log());
    let got = pf.wait_delivered("cid-loc-1@").without_trace();
    let want = mta::as_milter("inbound", &cfg, &input);
    assert_ne!(want, input, "the fixture needs a fix");
    assert_eq!(got, want, "{}\n{}", mta::show_diff(&want, &got), d.log());
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.contains(
            "Content-Location: cid:css-1234@mhtml.blink\nContent-ID: <css-1234@mhtml.blink>\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("\nX-MIMERef: fix; rules=related-cid-location-only"),
        "{text}"
    );
}

/// A transaction that outlasts `transaction_timeout` (an SMTP client that stalls in
/// the middle of DATA): the milter closes its connection, Postfix applies its
/// `milter_default_action` (tempfail here, its default) and the client gets a 4xx
/// to retry; the milter says so in its log; the next SMTP session is served.
#[test]
fn a_transaction_over_transaction_timeout_is_tempfailed_by_postfix() {
    if !mta::require_postfix() {
        return;
    }
    let cfg = config("transaction_timeout = 2\n");
    let (d, pf) = start(&cfg, &[], PostfixConfig::with_milter(""));
    let s = std::net::TcpStream::connect(("127.0.0.1", pf.port)).unwrap();
    let mut raw = s.try_clone().unwrap();
    let mut c = mta::Smtp::over(
        Box::new(s.try_clone().unwrap()),
        Box::new(s.try_clone().unwrap()),
    );
    assert_eq!(c.greeting.code, 220);
    c.ehlo("client.example");
    assert_eq!(c.cmd("MAIL FROM:<alice@sender.example>").code, 250);
    assert_eq!(c.cmd("RCPT TO:<bob@receiver.example>").code, 250);
    assert_eq!(c.cmd("DATA").code, 354);
    let data = mta::smtp_data(PLAIN);
    let (first, rest) = data.split_at(data.len() / 2);
    use std::io::Write;
    raw.write_all(first).unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    raw.write_all(rest).unwrap();
    let r = c.reply();
    assert_eq!(r.class(), 4, "{r}\n{}\n{}", d.log(), pf.log());
    assert!(
        d.log()
            .contains("cut 1 mail transaction(s) not over within transaction_timeout"),
        "{}",
        d.log()
    );
    eprintln!("Postfix answered the stalled transaction: {r}");
    c.quit();
    let r = pf.send(PLAIN);
    assert_eq!(r.code, 250, "{r}\n{}", d.log());
}
