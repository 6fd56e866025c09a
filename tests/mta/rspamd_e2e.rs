//! rspamd and mimeref-milter in the same `smtpd_milters` list of a real, private Postfix
//! (see tests/support/mta/mod.rs), in both orders. rspamd runs as bench/e2e runs it: a proxy
//! worker in milter mode scanning in process (self_scan), no rules, no DNS or redis,
//! plus the milter_headers module so that it adds header fields of its own. Each
//! delivered message must carry both milters' work: mimeref-milter's edits and report
//! header byte for byte as `mimeref-milter fix --as-milter` makes them, and rspamd's
//! fields naming the message's own queue id. Needs root, postfix and rspamd:
//! `sudo scripts/install-test-deps`.
#[path = "../support/mod.rs"]
mod support;

use support::mta;

use mta::{Daemon, Postfix, PostfixConfig, Rspamd};
use support::message::{self, drop_fields, fixture, with_message_id};

/// The fields rspamd's milter_headers adds here (the `use` list below).
const RSPAMD_FIELDS: [&str; 2] = ["X-Spamd-Result", "X-Rspamd-Queue-Id"];

/// No rules and no modules but milter_headers, as bench/rspamd.conf.
fn rspamd() -> Rspamd {
    Rspamd::start(
        "",
        None,
        r#"# Without this module rspamd's milter adds no field at all (measured with miltertest:
# accept, no modifications). skip_local and skip_authenticated are on by default and
# every client here is on loopback.
modules { path = "/usr/share/rspamd/plugins/milter_headers.lua"; }
milter_headers {
    skip_local = false;
    skip_authenticated = false;
    use = ["x-spamd-result", "x-rspamd-queue-id"];
}
"#,
    )
}

fn require() -> bool {
    mta::require_postfix() && mta::require_rspamd()
}

/// The Blink MHTML fixture from a real address: its stylesheet part gets a Content-ID
/// through a body replacement.
fn mhtml(id: &str) -> Vec<u8> {
    let m = String::from_utf8(fixture("html/chrome-cid-location.eml")).unwrap();
    let m = m.replacen("From: <Saved by Blink>", "From: alice@sender.example", 1);
    with_message_id(m.as_bytes(), id)
}

/// A top-level Content-Type with the URL unquoted: fixed by a header change.
fn extbody(id: &str) -> Vec<u8> {
    format!(
        "Message-ID: <{id}>
From: alice@sender.example
To: bob@receiver.example
Subject: external body
Date: Mon, 23 Nov 2026 10:00:00 +0000
MIME-Version: 1.0
Content-Type: message/external-body; access-type=URL; URL=http://files.example.org/report.pdf

Content-Type: application/pdf
Content-ID: <report@files.example.org>

"
    )
    .into_bytes()
}

/// Nothing to fix or report.
fn clean(id: &str) -> Vec<u8> {
    format!(
        "Message-ID: <{id}>
From: alice@sender.example
To: bob@receiver.example
Subject: plain
Date: Mon, 23 Nov 2026 10:00:00 +0000
MIME-Version: 1.0
Content-Type: text/plain; charset=us-ascii

Nothing to see here.
"
    )
    .into_bytes()
}

/// The queue id in Postfix's Received: field (`... with ESMTP id QUEUEID`).
fn postfix_queue_id(got: &mta::Delivered) -> String {
    let received = got.header("Received");
    let ours = received
        .iter()
        .find(|r| r.contains("(Postfix)"))
        .unwrap_or_else(|| panic!("no Received: by Postfix in {received:?}"));
    let (_, rest) = ours
        .split_once(" id ")
        .unwrap_or_else(|| panic!("no queue id in {ours:?}"));
    rest.split(|c: char| c.is_whitespace() || c == ';')
        .next()
        .unwrap()
        .to_string()
}

/// Postfix with `milters`, three messages (a body fix, a header fix, a clean one), one
/// session each; every one must be accepted, delivered, and carry both milters' fields.
fn both_milters(mimeref_first: bool, tag: &str) {
    let rspamd = rspamd();
    let d = Daemon::start("", &[]);
    let milters = if mimeref_first {
        format!("{}, {}", d.postfix_spec(), rspamd.postfix_spec())
    } else {
        format!("{}, {}", rspamd.postfix_spec(), d.postfix_spec())
    };
    let pf = Postfix::start(&PostfixConfig::with_milter(&milters));
    let cases = [
        (mhtml(&format!("{tag}-mhtml@sender.example")), true),
        (extbody(&format!("{tag}-extbody@sender.example")), true),
        (clean(&format!("{tag}-clean@sender.example")), false),
    ];
    for (input, _) in &cases {
        let r = pf.send(input);
        assert_eq!(
            r.code,
            250,
            "{r}\ndaemon:\n{}\nrspamd:\n{}\npostfix:\n{}",
            d.log(),
            rspamd.log(),
            pf.log()
        );
    }
    let mut queue_ids = Vec::new();
    for (input, fixed) in &cases {
        let id = message::header_values(input, "Message-ID")[0].clone();
        let id = id.trim_matches(|c| c == '<' || c == '>');
        let got = pf.wait_delivered(id);
        let text = String::from_utf8_lossy(&got.message).into_owned();

        // mimeref-milter's part: exactly its offline edits, report header included.
        let want = mta::as_milter("outbound", "", input);
        let report = got.header("X-MIMERef");
        assert_eq!(report, message::header_values(&want, "X-MIMERef"), "{text}");
        if *fixed {
            assert_ne!(&want, input, "{id}: the fixture needs a fix");
            assert_eq!(report.len(), 1, "{text}");
            assert!(report[0].starts_with("fix;"), "{text}\n{}", d.log());
        } else {
            assert!(report.is_empty(), "{text}");
        }
        let mut body = got.without_trace();
        for f in RSPAMD_FIELDS {
            body = drop_fields(&body, f);
        }
        // A field order that differs from the offline one shows as a diff as well.
        assert_eq!(
            message::to_lf(&body),
            message::to_lf(&want),
            "{id}:\n{}",
            mta::show_diff(&want, &body)
        );

        // rspamd's part: its fields once each, naming this message's queue id.
        let qid = postfix_queue_id(&got);
        for f in RSPAMD_FIELDS {
            assert_eq!(got.header(f).len(), 1, "{id}: {f} once:\n{text}");
        }
        assert_eq!(
            got.header("X-Rspamd-Queue-Id"),
            std::slice::from_ref(&qid),
            "{text}"
        );
        let result = &got.header("X-Spamd-Result")[0];
        assert!(result.starts_with("default: False ["), "{result}");

        // Each milter appends its fields at end of message, in milter order.
        if *fixed {
            let at = |name: &str| text.find(&format!("\n{name}:")).unwrap();
            assert_eq!(
                at("X-MIMERef") < at("X-Spamd-Result"),
                mimeref_first,
                "{text}"
            );
        }
        queue_ids.push((qid, *fixed));
    }

    // Each milter gave each message one verdict, and nothing else passed through them.
    let log = d.log();
    assert_eq!(log.matches(" verdict=").count(), cases.len(), "{log}");
    let rlog = rspamd.log();
    assert_eq!(
        rlog.matches("rspamd_task_write_log:").count(),
        cases.len(),
        "{rlog}"
    );
    // Postfix hands the second milter the message as the first one left it: the size
    // each one logs shows which saw the other's edits.
    for (q, fixed) in &queue_ids {
        let mimeref_size = logged_number(&log, &format!("{q}: direction="), "size=");
        let rspamd_len = logged_number(&rlog, &format!("qid: <{q}>"), "len: ");
        if mimeref_first {
            if *fixed {
                assert!(
                    rspamd_len > mimeref_size,
                    "{q}: {rspamd_len} <= {mimeref_size}"
                );
            }
        } else {
            assert!(
                mimeref_size > rspamd_len,
                "{q}: {mimeref_size} <= {rspamd_len}"
            );
        }
    }
    assert_eq!(pf.delivered().len(), cases.len());
}

/// The number after `key` on the log line that contains `line_has`.
fn logged_number(log: &str, line_has: &str, key: &str) -> usize {
    let line = log
        .lines()
        .find(|l| l.contains(line_has))
        .unwrap_or_else(|| panic!("no line with {line_has:?} in\n{log}"));
    let (_, rest) = line
        .split_once(key)
        .unwrap_or_else(|| panic!("no {key:?} in {line}"));
    rest.split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number after {key:?} in {line}"))
}

#[test]
fn rspamd_after_mimeref_both_milters_apply_and_nothing_is_lost() {
    if !require() {
        return;
    }
    both_milters(true, "rspamd-after");
}

#[test]
fn rspamd_before_mimeref_both_milters_apply_and_nothing_is_lost() {
    if !require() {
        return;
    }
    both_milters(false, "rspamd-before");
}
