//! DKIM behind a real, private Postfix (see tests/support/mta/mod.rs): OpenDKIM signing after
//! and before mimeref-milter in `smtpd_milters`, and inbound mail signed elsewhere;
//! the two orders again behind a private Sendmail (`INPUT_MAIL_FILTER`).
//! Signatures are checked with python3-dkim against the key generated for the test,
//! without DNS. Needs root, postfix, the unpacked Sendmail, opendkim, opendkim-tools
//! and python3-dkim: `sudo scripts/install-test-deps`.
#[path = "../support/mod.rs"]
mod support;

use support::mta;

use mta::{flip_body_byte, Daemon, Key, OpenDkim, Postfix, PostfixConfig, Sendmail, DOMAIN};
use support::message::{drop_fields, fixture, with_message_id};

/// Both needed here, and neither alone: fails loudly like the other MTA tests.
fn require() -> bool {
    mta::require_postfix() && mta::require_opendkim()
}

/// Postfix's trace field and the signature removed: what the milters saw, edits aside.
fn without_trace_and_signature(msg: &[u8]) -> Vec<u8> {
    drop_fields(&drop_fields(msg, "Received"), "DKIM-Signature")
}

/// The Blink MHTML fixture, from an address at the signing domain: its stylesheet
/// part gets a Content-ID through a body replacement.
fn mhtml(id: &str) -> Vec<u8> {
    let m = String::from_utf8(fixture("html/chrome-cid-location.eml")).unwrap();
    let m = m.replacen(
        "From: <Saved by Blink>",
        &format!("From: alice@{DOMAIN}"),
        1,
    );
    with_message_id(m.as_bytes(), id)
}

#[test]
fn opendkim_after_mimeref_signs_the_fixed_message() {
    if !require() {
        return;
    }
    let key = Key::generate();
    let od = OpenDkim::start(&key);
    let d = Daemon::start("", &[]);
    let pf = Postfix::start(&PostfixConfig::with_milter(&format!(
        "{}, {}",
        d.postfix_spec(),
        od.postfix_spec()
    )));
    let input = mhtml("dkim-after-1@sender.example");
    let r = pf.send(&input);
    assert_eq!(r.code, 250, "{r}\n{}", d.log());
    let got = pf.wait_delivered("dkim-after-1@");
    let text = String::from_utf8_lossy(&got.message).into_owned();

    let report = got.header("X-MIMERef");
    assert_eq!(report.len(), 1, "{text}");
    assert!(report[0].starts_with("fix;"), "{text}\n{}", d.log());
    let want = mta::as_milter("outbound", "", &input);
    assert_ne!(want, input, "the fixture needs a fix");
    let body = drop_fields(&without_trace_and_signature(&got.message), "X-MIMERef");
    let want = drop_fields(&want, "X-MIMERef");
    assert_eq!(body, want, "{}", mta::show_diff(&want, &body));

    let sig = got.header("DKIM-Signature");
    assert_eq!(sig.len(), 1, "{text}");
    assert!(sig[0].contains(&format!("d={DOMAIN}")), "{sig:?}");
    key.assert_holds(&got.message, &text);
}

/// The signer first: Postfix hands the second milter the message with the first
/// one's DKIM-Signature already in it, so the daemon sees the signature, withholds
/// the body edit (`signed-content`) and the signature still verifies.
#[test]
fn opendkim_before_mimeref_withholds_the_fix_and_the_signature_holds() {
    if !require() {
        return;
    }
    let (d, key, got, input) = signer_first("", "dkim-before-1@sender.example");
    let text = String::from_utf8_lossy(&got.message).into_owned();
    let log = d.log();
    assert_eq!(got.header("DKIM-Signature").len(), 1, "{text}");
    // OpenDKIM inserts at index 0, which lands before Postfix's Received: field.
    assert!(
        text.starts_with("DKIM-Signature: v=1;") && text.contains("\nReceived: from "),
        "{text}"
    );
    assert!(
        log.contains("signed-content info: the DKIM-Signature d=sender.example s=mimeref covers what the fixes for related-cid-location-only, related-part-disposition-missing would change: fixes withheld"),
        "{log}"
    );
    assert!(
        log.contains("verdict=report ") && log.contains("edits=0"),
        "{log}"
    );
    // The finding is still reported, the signature finding (info) only logged.
    assert_eq!(
        got.header("X-MIMERef"),
        ["report; rules=related-cid-location-only"],
        "{text}"
    );
    let body = drop_fields(&without_trace_and_signature(&got.message), "X-MIMERef");
    assert_eq!(body, input, "{}", mta::show_diff(&input, &body));
    key.assert_holds(&got.message, &text);
}

/// Why `fix_signed = true` belongs only before the signer: after it, the fix is
/// made and breaks the signature the message already carries.
#[test]
fn opendkim_before_mimeref_with_fix_signed_breaks_the_signature() {
    if !require() {
        return;
    }
    let (d, key, got, input) = signer_first("fix_signed = true\n", "dkim-before-2@sender.example");
    let text = String::from_utf8_lossy(&got.message).into_owned();
    let log = d.log();
    assert!(
        log.contains("fixes applied anyway (fix_signed), breaking it"),
        "{log}"
    );
    assert!(got.header("X-MIMERef")[0].starts_with("fix;"), "{text}");
    let want = drop_fields(&mta::as_milter("outbound", "", &input), "X-MIMERef");
    let body = drop_fields(&without_trace_and_signature(&got.message), "X-MIMERef");
    assert_eq!(body, want, "{}", mta::show_diff(&want, &body));
    assert_eq!(got.header("DKIM-Signature").len(), 1, "{text}");
    assert!(
        !key.verifies(&got.message),
        "a fixed body still verifies:\n{text}"
    );
}

/// `smtpd_milters = <opendkim>, <mimeref-milter>` with the daemon's config `cfg`;
/// sends the MHTML fixture and returns what was delivered.
fn signer_first(cfg: &str, id: &str) -> (Daemon, Key, mta::Delivered, Vec<u8>) {
    let key = Key::generate();
    let od = OpenDkim::start(&key);
    let d = Daemon::start(cfg, &[]);
    let pf = Postfix::start(&PostfixConfig::with_milter(&format!(
        "{}, {}",
        od.postfix_spec(),
        d.postfix_spec()
    )));
    let input = mhtml(id);
    let r = pf.send(&input);
    assert_eq!(r.code, 250, "{r}\n{}", d.log());
    let got = pf.wait_delivered(id);
    (d, key, got, input)
}

/// A top-level Content-Type with the URL unquoted: fixed by change_header when unsigned.
const EXTBODY: &[u8] = b"From: carol@sender.example
To: bob@receiver.example
Subject: signed external-body
Date: Mon, 23 Nov 2026 10:00:00 +0000
Message-ID: <dkim-in-1@sender.example>
MIME-Version: 1.0
Content-Type: message/external-body; access-type=URL; URL=http://files.example.org/report.pdf

Content-Type: application/pdf
Content-ID: <report@files.example.org>

";

/// Mail signed elsewhere, arriving with `h=` covering the Content-Type the daemon
/// would fix: delivered as it came (report header and Postfix's trace aside), the
/// withheld fix logged as `signed-content`, and the signature still verifies.
#[test]
fn inbound_signed_content_type_is_left_alone_and_verifies() {
    if !require() {
        return;
    }
    let key = Key::generate();
    let input = key.sign(
        EXTBODY,
        "from:to:subject:date:message-id:mime-version:content-type",
    );
    assert_ne!(
        drop_fields(&mta::as_milter("inbound", "", EXTBODY), "X-MIMERef"),
        EXTBODY,
        "unsigned, the fixture gets a fix"
    );
    assert!(key.verifies(&input), "freshly signed input does not verify");
    assert!(
        !key.verifies(&flip_body_byte(&input)),
        "a changed body still verifies"
    );
    // No trusted networks: the loopback client is inbound.
    let d = Daemon::start("trusted_networks = []\n", &[]);
    let pf = Postfix::start(&PostfixConfig::with_milter(&d.postfix_spec()));
    let r = pf.send(&input);
    assert_eq!(r.code, 250, "{r}\n{}", d.log());
    let got = pf.wait_delivered("dkim-in-1@");
    let text = String::from_utf8_lossy(&got.message).into_owned();
    let log = d.log();
    assert!(log.contains("direction inbound"), "{log}");
    assert!(
        log.contains("signed-content info: the DKIM-Signature d=sender.example s=mimeref covers what the fixes for extbody-url-unquoted would change: fixes withheld"),
        "{log}"
    );
    assert!(
        log.contains("verdict=report ")
            && log.contains("signed-content")
            && log.contains("edits=0"),
        "{log}"
    );
    assert_eq!(
        got.header("X-MIMERef"),
        ["report; rules=extbody-url-unquoted"],
        "{text}"
    );
    let body = drop_fields(&got.without_trace(), "X-MIMERef");
    assert_eq!(body, input, "{}", mta::show_diff(&input, &body));
    key.assert_holds(&got.message, &text);
}

// ---------------------------------------------------------------------------
// The same two orders behind Sendmail (see tests/support/mta/mod.rs), the filters listed
// with INPUT_MAIL_FILTER in the order they are called.

fn require_sendmail() -> bool {
    mta::require_sendmail() && mta::require_opendkim()
}

/// Sends the MHTML fixture through a private Sendmail calling `filters` in order,
/// returns the queued message.
fn sendmail_queued(filters: &[(&str, &str)], d: &Daemon, id: &str) -> (mta::Queued, Vec<u8>) {
    let sm = Sendmail::with_milters(filters);
    let input = mhtml(id);
    let r = sm.send(&input);
    assert_eq!(r.code, 250, "{r}\n{}", d.log());
    let q = sm.queued();
    assert_eq!(q.len(), 1, "{q:?}");
    (q.into_iter().next().unwrap(), input)
}

/// The queued message as Sendmail would send it on: its conditional fields
/// (`H?P?Return-Path`, a macro template, not yet expanded) left out, its
/// `Received:` kept.
fn outgoing(q: &mta::Queued) -> Vec<u8> {
    let mut m: Vec<u8> = q
        .fields
        .iter()
        .filter(|(flags, _)| flags.is_empty())
        .flat_map(|(_, f)| f.clone())
        .collect();
    m.push(b'\n');
    m.extend_from_slice(&q.body);
    m
}

#[test]
fn sendmail_opendkim_after_mimeref_signs_the_fixed_message() {
    if !require_sendmail() {
        return;
    }
    let key = Key::generate();
    let od = OpenDkim::start(&key);
    let d = Daemon::start("", &[]);
    let (q, input) = sendmail_queued(
        &[
            ("mimeref", &d.sendmail_spec()),
            ("opendkim", &od.sendmail_spec()),
        ],
        &d,
        "sm-dkim-after-1@sender.example",
    );
    let msg = outgoing(&q);
    let text = String::from_utf8_lossy(&msg).into_owned();
    let log = d.log();

    let report = q.header("X-MIMERef");
    assert_eq!(report.len(), 1, "{text}");
    assert!(report[0].starts_with("fix;"), "{text}\n{log}");
    // `sendmail -bs` has no client address: the daemon takes the message as inbound.
    assert!(
        log.contains("direction=inbound(default) verdict=fix "),
        "{log}"
    );
    let want = mta::as_milter("inbound", "", &input);
    assert_ne!(want, input, "the fixture needs a fix");
    let body = drop_fields(
        &drop_fields(&q.without_trace(), "DKIM-Signature"),
        "X-MIMERef",
    );
    let want = drop_fields(&want, "X-MIMERef");
    assert_eq!(body, want, "{}", mta::show_diff(&want, &body));

    let sig = q.header("DKIM-Signature");
    assert_eq!(sig.len(), 1, "{text}");
    assert!(sig[0].contains(&format!("d={DOMAIN}")), "{sig:?}");
    key.assert_holds(&msg, &text);
}

/// The signer first: like Postfix, Sendmail hands the second filter the header
/// with the first one's DKIM-Signature already in it, so the daemon sees the
/// signature, withholds the body edit (`signed-content`) and the signature
/// still verifies.
#[test]
fn sendmail_opendkim_before_mimeref_withholds_the_fix_and_the_signature_holds() {
    if !require_sendmail() {
        return;
    }
    let key = Key::generate();
    let od = OpenDkim::start(&key);
    let d = Daemon::start("", &[]);
    let (q, input) = sendmail_queued(
        &[
            ("opendkim", &od.sendmail_spec()),
            ("mimeref", &d.sendmail_spec()),
        ],
        &d,
        "sm-dkim-before-1@sender.example",
    );
    let msg = outgoing(&q);
    let text = String::from_utf8_lossy(&msg).into_owned();
    let log = d.log();
    assert_eq!(q.header("DKIM-Signature").len(), 1, "{text}");
    // OpenDKIM inserts at index 0, before Sendmail's Received: field.
    assert!(
        text.starts_with("DKIM-Signature: v=1;")
            && text.contains("\nReceived: from client.example"),
        "{text}"
    );
    assert!(
        log.contains("signed-content info: the DKIM-Signature d=sender.example s=mimeref covers what the fixes for related-cid-location-only, related-part-disposition-missing would change: fixes withheld"),
        "{log}"
    );
    assert!(
        log.contains("verdict=report ") && log.contains("edits=0"),
        "{log}"
    );
    assert_eq!(
        q.header("X-MIMERef"),
        ["report; rules=related-cid-location-only"],
        "{text}"
    );
    let body = drop_fields(
        &drop_fields(&q.without_trace(), "DKIM-Signature"),
        "X-MIMERef",
    );
    assert_eq!(body, input, "{}", mta::show_diff(&input, &body));
    key.assert_holds(&msg, &text);
}
