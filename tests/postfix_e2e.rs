//! End-to-end behind a real, private Postfix (see tests/mta/mod.rs).
//! Needs root and the `postfix` package: `sudo scripts/install-test-deps`.
#[path = "mta/mod.rs"]
mod mta;

use mta::probe::{Action, Probe};
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
            "X-Tab"
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
