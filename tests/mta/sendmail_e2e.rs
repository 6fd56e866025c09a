//! End-to-end behind a real Sendmail run from the unpacked Debian packages
//! (see tests/support/mta/mod.rs). Needs root: `sudo scripts/install-test-deps`.
#[path = "../support/mod.rs"]
mod support;

use support::mta;

use mta::probe::{self, Action, Probe};
use mta::Sendmail;

const PLAIN: &[u8] = b"From: Alice <alice@sender.example>
To: bob@receiver.example
Subject: plain
Date: Sat, 01 Mar 2025 10:00:00 +0000
Message-ID: <sm-plain-1@sender.example>
X-Folded: first part
\tsecond part

Body line one.
.leading dot survives dot-stuffing

last line
";

#[test]
fn harness_no_milter_queues_every_byte() {
    if !mta::require_sendmail() {
        return;
    }
    let sm = Sendmail::new(None);
    let r = sm.send(PLAIN);
    assert_eq!(r.code, 250, "{r}");
    let q = sm.queued();
    assert_eq!(q.len(), 1, "queue: {q:?}");
    let got = q[0].without_trace();
    assert_eq!(got, PLAIN, "{}", mta::show_diff(PLAIN, &got));
}

const PROBE_MSG: &[u8] = b"From: alice@sender.example
To: bob@receiver.example
Subject: probe
Message-ID: <sm-probe-1@sender.example>
X-Dup: one
X-Dup: two
X-Fold: a
  b
X-Spaces:   three
X-Tab:\ttab
X-Empty:

body
";

#[test]
fn harness_probe_milter_header_semantics() {
    if !mta::require_sendmail() {
        return;
    }
    let probe = Probe::start(vec![
        Action::Change("X-Dup".into(), 2, Some("changed-two".into())),
        Action::Change("X-Fold".into(), 1, Some("c\n\td".into())),
        Action::Change("X-Empty".into(), 1, Some(" lead".into())),
        Action::Change("X-Tab".into(), 1, Some("no-lead".into())),
        Action::Add("X-Added".into(), "added".into()),
        Action::Insert(0, "X-Inserted-0".into(), "zero".into()),
    ]);
    let sm = Sendmail::new(Some(&probe.sendmail_spec()));
    let r = sm.send(PROBE_MSG);
    assert_eq!(r.code, 250, "{r}");
    let seen = probe.seen();
    assert_eq!(seen.len(), 1);
    let got: Vec<(String, String)> = seen[0]
        .headers
        .iter()
        .map(|(n, v)| (n.clone(), String::from_utf8_lossy(v).into_owned()))
        .collect();
    let want: Vec<(String, String)> = [
        ("From", "alice@sender.example"),
        ("To", "bob@receiver.example"),
        ("Subject", "probe"),
        ("Message-ID", "<sm-probe-1@sender.example>"),
        ("X-Dup", "one"),
        ("X-Dup", "two"),
        // Same as Postfix: folds as "\n" + original whitespace, one space
        // after the colon dropped (no SMFIP_HDR_LEADSPC negotiated), a tab
        // kept, and Sendmail's own Received: not shown.
        ("X-Fold", "a\n  b"),
        ("X-Spaces", "  three"),
        ("X-Tab", "\ttab"),
        ("X-Empty", ""),
    ]
    .iter()
    .map(|(n, v)| (n.to_string(), v.to_string()))
    .collect();
    assert_eq!(got, want);

    let q = sm.queued();
    assert_eq!(q.len(), 1);
    let text = String::from_utf8_lossy(&q[0].without_trace()).into_owned();
    assert!(text.contains("X-Dup: one\nX-Dup: changed-two\n"), "{text}");
    assert!(text.contains("X-Fold: c\n\td\n"), "{text}");
    assert!(text.contains("X-Spaces:   three\n"), "{text}");
    assert!(text.contains("X-Tab: no-lead\n"), "{text}");
    assert!(text.contains("X-Empty:  lead\n"), "{text}");
    assert!(text.contains("X-Added: added\n\nbody\n"), "{text}");
    // Index 0 lands before Sendmail's Received: (after the conditional
    // Return-Path it keeps first in the queue file).
    let all = String::from_utf8_lossy(&q[0].message()).into_owned();
    let ins = all.find("X-Inserted-0: zero\n").expect("inserted field");
    let rcv = all
        .find("Received: from client.example")
        .expect("trace field");
    assert!(ins < rcv, "{all}");
}

#[test]
fn harness_probe_leading_space_mode() {
    if !mta::require_sendmail() {
        return;
    }
    let probe = probe::leading_space_probe();
    let sm = Sendmail::new(Some(&probe.sendmail_spec()));
    probe::leading_space_mode(|m| {
        let m = String::from_utf8_lossy(m).replace("@ID@", "sm-ls-1@sender.example");
        let r = sm.send(m.as_bytes());
        assert_eq!(r.code, 250, "{r}");
        sm.queued()[0].without_trace()
    });
    probe::leading_space_seen(&probe);
}

// ---------------------------------------------------------------------------
// mimeref-milter behind Sendmail

use mta::Daemon;
use support::message::drop_fields;

fn config(tables: &str) -> String {
    format!("trusted_networks = []\n{tables}")
}

fn nested() -> (Vec<u8>, Vec<u8>) {
    mta::nested_fixture("sm-nested-1@sender.example")
}

#[test]
fn nested_external_body_fold_and_report_header() {
    nested_fold(
        "",
        "negotiated: no reply at connect, header, end of header, body",
    );
}

#[test]
fn nested_external_body_fold_with_a_reply_at_every_stage() {
    nested_fold(
        "no_reply_stages = false\n",
        "negotiated: a reply at every stage",
    );
}

fn nested_fold(top: &str, negotiated: &str) {
    if !mta::require_sendmail() {
        return;
    }
    let d = Daemon::start(&config(top), &[]);
    let sm = Sendmail::new(Some(&d.sendmail_spec()));
    let (input, fixed) = nested();
    // A forged report header from the client must not survive.
    let mut forged = b"X-MIMERef: ok\n".to_vec();
    forged.extend_from_slice(&input);
    let r = sm.send(&forged);
    assert_eq!(r.code, 250, "{r}\n{}", d.log());
    let q = sm.queued();
    assert_eq!(q.len(), 1);
    let report = q[0].header("X-MIMERef");
    assert_eq!(report.len(), 1, "{report:?}\n{}", q[0].qf);
    assert!(report[0].starts_with("fix;"), "{report:?}");
    assert!(report[0].contains("extbody-url-unquoted"), "{report:?}");
    // One space after the colon, as written by the client fields around it.
    assert!(q[0].qf.contains("\nH??X-MIMERef: fix;"), "{}", q[0].qf);
    let got = drop_fields(&q[0].without_trace(), "X-MIMERef");
    assert_eq!(got, fixed, "{}\n{}", mta::show_diff(&fixed, &got), d.log());
    assert!(d.log().contains(negotiated), "{}", d.log());
    mta::assert_queue_id_in_verdict(&d.log(), "fix");
}

#[test]
fn reject_gives_5xx_with_configured_text() {
    if !mta::require_sendmail() {
        return;
    }
    let d = Daemon::start(
        &config(
            r#"[reply]
reject = "550 5.6.0 Refused by the e2e test: {rules}"
[policy.inbound]
"extbody-*" = "reject"
"#,
        ),
        &[],
    );
    let sm = Sendmail::new(Some(&d.sendmail_spec()));
    let (input, _) = nested();
    let r = sm.send(&input);
    assert_eq!(r.code, 550, "{r}\n{}", d.log());
    assert!(r.text.starts_with("5.6.0 Refused by the e2e test: "), "{r}");
    assert!(r.text.contains("extbody-url-unquoted"), "{r}");
    assert!(
        sm.queued().is_empty(),
        "a rejected message stays out of the queue"
    );
}

#[test]
fn milter_down_tempfails_with_f_t() {
    if !mta::require_sendmail() {
        return;
    }
    let mut d = Daemon::start(&config(""), &[]);
    let sm = Sendmail::new(Some(&d.sendmail_spec()));
    d.stop();
    let (input, _) = nested();
    let r = sm.send(&input);
    assert_eq!(r.class(), 4, "F=T: milter down must tempfail: {r}");
    d.restart();
    let r = sm.send(&input);
    assert_eq!(r.code, 250, "after restart: {r}\n{}", d.log());
    assert_eq!(sm.queued().len(), 1);
}

#[test]
fn quarantine_holds_the_message_with_the_configured_reason() {
    if !mta::require_sendmail() {
        return;
    }
    let d = Daemon::start(
        &config(
            r#"[reply]
quarantine = "Held by the e2e test: {rules}"
[policy.inbound]
"extbody-*" = "quarantine"
"#,
        ),
        &[],
    );
    let sm = Sendmail::new(Some(&d.sendmail_spec()));
    let (input, _) = nested();
    let r = sm.send(&input);
    assert_eq!(r.code, 250, "quarantine accepts: {r}\n{}", d.log());
    let control = |q: Vec<mta::Queued>| q.into_iter().map(|m| m.qf).collect::<Vec<_>>();
    assert!(
        sm.queued().is_empty(),
        "a quarantined message must not wait for delivery: {:?}",
        control(sm.queued())
    );
    let held = sm.quarantined();
    assert_eq!(held.len(), 1, "{:?}\n{}", control(held), d.log());
    let m = &held[0];
    assert!(r.text.contains(&m.id), "{r} / {}", m.id);
    assert!(
        m.qf.contains("\nrRFC822; bob@receiver.example\n"),
        "{}",
        m.qf
    );

    // The reason names the rules the report header names, in the
    // configured text.
    let report = m.header("X-MIMERef");
    assert_eq!(report.len(), 1, "{report:?}\n{}", m.qf);
    assert!(report[0].starts_with("quarantine;"), "{report:?}");
    let rules = report[0]
        .split_once("rules=")
        .map(|(_, r)| r.split([';', ' ']).next().unwrap_or(""))
        .unwrap_or_else(|| panic!("no rules= in {report:?}"));
    assert!(rules.contains("extbody-url-unquoted"), "{report:?}");
    let reason = format!("Held by the e2e test: {}", rules.replace(',', ", "));
    assert_eq!(m.quarantine_reason().as_deref(), Some(&*reason), "{}", m.qf);
    assert!(
        d.log().contains(&format!(
            "{}: direction=inbound(default) verdict=quarantine ",
            m.id
        )),
        "{}",
        d.log()
    );

    // What an admin sees: only the quarantine listing shows it, with the
    // reason (-v: the plain listing cuts it at 60 characters).
    let (ok, normal, err) = sm.run(&["-bp"]);
    assert!(ok && !normal.contains(&m.id), "{normal}{err}");
    let (ok, listing, err) = sm.run(&["-bp", "-qQ", "-v"]);
    assert!(ok, "{err}");
    assert!(listing.contains(&m.id), "{listing}");
    assert!(
        listing.contains(&format!("QUARANTINE: {reason}\n")),
        "{listing}"
    );

    // A queue run, which delivers every qf file, leaves it alone.
    let (ok, out, err) = sm.run(&["-q"]);
    assert!(ok, "{out}{err}");
    assert!(sm.queued().is_empty(), "{:?}", control(sm.queued()));
    assert_eq!(sm.quarantined().len(), 1);

    // Released, it is an ordinary queued message with every byte the
    // client sent (quarantine alone changes nothing but the report).
    let release = format!("-qI{}", m.id);
    let (ok, out, err) = sm.run(&["-qQ", "-Q", &release]);
    assert!(ok, "{out}{err}");
    assert!(
        sm.quarantined().is_empty(),
        "{:?}",
        control(sm.quarantined())
    );
    let q = sm.queued();
    assert_eq!(q.len(), 1, "released: {:?}", control(q));
    assert_eq!(q[0].quarantine_reason(), None, "{}", q[0].qf);
    let got = drop_fields(&q[0].without_trace(), "X-MIMERef");
    assert_eq!(got, input, "{}", mta::show_diff(&input, &got));
}
