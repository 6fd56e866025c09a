use super::*;
use crate::engine::model::options::FixSigned;

#[test]
fn h_tag_is_read_across_folding() {
    let names = dkim_header_list(
        b" v=1; a=rsa-sha256; d=x.test;\r\n\th=From:To:\r\n\t Content-Type; bh=abc; b=def",
    );
    assert_eq!(names, ["from", "to", "content-type"]);
    assert!(dkim_header_list(b" v=1; d=x").is_empty());
}

/// Every signature that covers a fix names the rules of that fix, also when an
/// earlier signature already withheld it.
#[test]
fn each_signature_names_the_rules_it_protects() {
    let raw = b"DKIM-Signature: v=1; d=x.test; h=From:Content-Type; bh=a; b=b\r\n\
ARC-Message-Signature: i=1; d=x.test; h=From:Content-Type; bh=a; b=b\r\n\
Content-Type: message/external-body; access-type=URL; URL=http://x.test/a\r\n\
\r\n\
Content-Type: text/plain\r\n\r\n";
    for fix_signed in [FixSigned::Never, FixSigned::Always] {
        let opts = Options {
            fix_signed,
            ..Options::default()
        };
        let a = crate::engine::check(raw, &opts);
        let signed: Vec<&str> = a
            .findings
            .iter()
            .filter(|f| f.rule == Rule::SignedContent)
            .map(|f| f.message.as_str())
            .collect();
        assert_eq!(signed.len(), 2, "{signed:?}");
        for m in signed {
            assert!(
                m.contains("the fixes for extbody-url-unquoted would change"),
                "{m}"
            );
        }
    }
}

/// A message with one Outlook inline image whose repair (a Content-Disposition inserted
/// into part 2) lies under every signature in `head`; the body hashes of `head` are
/// written as `BH`, replaced by the real one (relaxed, sha256) here.
fn signed(head: &str) -> Vec<u8> {
    let body = "--b\r\nContent-Type: text/html\r\n\r\n<img src=\"cid:a@b\">\r\n--b\r\n\
Content-Type: image/png\r\nContent-ID: <a@b>\r\n\r\nx\r\n--b--\r\n";
    let h = crate::engine::syntax::dkim::body_hash(
        body.as_bytes(),
        crate::engine::syntax::dkim::BodyCanon::Relaxed,
        crate::engine::syntax::dkim::HashAlg::Sha256,
        None,
    );
    use base64::Engine as _;
    let bh = base64::engine::general_purpose::STANDARD.encode(&h.digest);
    format!(
        "{}Content-Type: multipart/related; boundary=b; type=text/html\r\n\r\n{body}",
        head.replace("BH", &bh)
    )
    .into_bytes()
}

fn sig(d: &str, b: &str) -> String {
    format!("DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d={d}; s=s1;\r\n\th=From; bh=BH; b={b}\r\n")
}

fn verified() -> Options {
    Options {
        fix_signed: FixSigned::Verified,
        trusted_authserv_ids: vec!["mx.test.example".into()],
        ..Options::default()
    }
}

/// Whether the disposition repair is made, and the signature records.
fn outcome(raw: &[u8], opts: &Options) -> (bool, Vec<crate::engine::Signature>) {
    let a = crate::engine::check(raw, opts);
    let fixed = a
        .findings
        .iter()
        .any(|f| f.rule == Rule::RelatedPartDispositionMissing && f.fixable);
    (fixed, a.signatures)
}

#[test]
fn a_verdict_counts_only_above_the_first_received_field() {
    let ar =
        "Authentication-Results: mx.test.example; dkim=pass header.d=x.test header.b=AAAABBBB\r\n";
    let rcvd = "Received: from a by b; Sat, 28 Nov 2026 10:00:00 +0000\r\n";
    let above = signed(&format!("{ar}{rcvd}{}", sig("x.test", "AAAABBBBCCCC")));
    let (fixed, s) = outcome(&above, &verified());
    assert!(fixed, "{s:?}");
    assert_eq!(s[0].decision, Ok(Lift::Verified));
    assert_eq!(
        s[0].relied_on().as_deref(),
        Some("verified=mx.test.example:dkim=pass")
    );
    let below = signed(&format!("{rcvd}{ar}{}", sig("x.test", "AAAABBBBCCCC")));
    let (fixed, s) = outcome(&below, &verified());
    assert!(!fixed);
    assert_eq!(s[0].decision, Err(Withheld::NoVerdict));
    // With no Received field at all (a message file, or what a milter sees of a
    // message from a client that sent none), every field is of this hop.
    let none = signed(&format!("{}{ar}", sig("x.test", "AAAABBBBCCCC")));
    assert!(outcome(&none, &verified()).0);
}

#[test]
fn only_a_trusted_id_and_the_signature_it_names_count() {
    let with = |ar: &str, sigs: &str| signed(&format!("{ar}{sigs}"));
    let one = sig("x.test", "AAAABBBBCCCC");
    // The id in another case is the same id; another id is not trusted.
    let upper = with(
        "Authentication-Results: MX.Test.Example; dkim=pass header.b=AAAABBBB\r\n",
        &one,
    );
    assert!(outcome(&upper, &verified()).0);
    let other = with(
        "Authentication-Results: mx.other.example; dkim=pass header.b=AAAABBBB\r\n",
        &one,
    );
    assert_eq!(
        outcome(&other, &verified()).1[0].decision,
        Err(Withheld::NoVerdict)
    );
    // header.b of another signature; header.d of another domain.
    let b = with(
        "Authentication-Results: mx.test.example; dkim=pass header.b=ZZZZ\r\n",
        &one,
    );
    assert!(!outcome(&b, &verified()).0);
    let d = with(
        "Authentication-Results: mx.test.example; dkim=pass header.d=y.test\r\n",
        &one,
    );
    assert!(!outcome(&d, &verified()).0);
    // header.d alone names the signature only when it is the only one of that domain.
    let two = format!("{one}{}", sig("x.test", "DDDDEEEE"));
    let ambiguous = with(
        "Authentication-Results: mx.test.example; dkim=pass header.d=x.test\r\n",
        &two,
    );
    let (fixed, s) = outcome(&ambiguous, &verified());
    assert!(
        !fixed && s.iter().all(|s| s.decision == Err(Withheld::NoVerdict)),
        "{s:?}"
    );
    // Each of two signatures verified by its own header.b: repaired.
    let both = with(
        "Authentication-Results: mx.test.example; dkim=pass header.b=AAAABBBB;\r\n\tdkim=fail header.b=DDDDEEEE\r\n",
        &two,
    );
    let (fixed, s) = outcome(&both, &verified());
    assert!(fixed, "{s:?}");
    // header.i names the identity: @domain is d='s default.
    let i = with(
        "Authentication-Results: mx.test.example; dkim=pass header.i=@X.TEST\r\n",
        &one,
    );
    assert!(outcome(&i, &verified()).0);
    let i = with(
        "Authentication-Results: mx.test.example; dkim=pass header.i=bob@x.test\r\n",
        &one,
    );
    assert!(!outcome(&i, &verified()).0);
    // Other methods say nothing about the signature.
    let spf = with(
        "Authentication-Results: mx.test.example; spf=pass smtp.mailfrom=x.test\r\n",
        &one,
    );
    assert!(!outcome(&spf, &verified()).0);
}

#[test]
fn a_field_that_does_not_parse_counts_for_nothing() {
    for ar in [
        "Authentication-Results: mx.test.example dkim=pass header.b=AAAABBBB\r\n",
        "Authentication-Results: (mx.test.example; dkim=pass header.b=AAAABBBB\r\n",
        "Authentication-Results: ; dkim=pass header.b=AAAABBBB\r\n",
        "Authentication-Results: mx.test.example; dkim header.b=AAAABBBB\r\n",
        // What OpenDKIM's RemoveARFrom cannot parse and so leaves in place
        // (tests/mta/QUIRKS.md): it must count for nothing here either.
        "Authentication-Results: mx.test.example; dkim=pass header.d=x.test; ;\r\n",
        "Authentication-Results: mx.test.example; dkim=pass header.d=x.test x=\"unterminated\r\n",
        "Authentication-Results: mx.test.example; dkim=pass header.d=x.test, spf=pass\r\n",
    ] {
        let raw = signed(&format!("{ar}{}", sig("x.test", "AAAABBBBCCCC")));
        let (fixed, s) = outcome(&raw, &verified());
        assert!(!fixed, "{ar}: {s:?}");
    }
}

#[test]
fn trusted_verdicts_that_disagree_withhold() {
    let raw = signed(&format!(
        "Authentication-Results: mx.test.example; dkim=pass header.b=AAAABBBB\r\n\
Authentication-Results: mx.test.example; dkim=temperror header.b=AAAABBBB\r\n{}",
        sig("x.test", "AAAABBBBCCCC")
    ));
    let (fixed, s) = outcome(&raw, &verified());
    assert!(!fixed);
    assert_eq!(s[0].decision, Err(Withheld::Disagree));
    // The same result twice (two verifiers, one id) is one verdict.
    let raw = signed(&format!(
        "Authentication-Results: mx.test.example; dkim=pass header.b=AAAABBBB\r\n\
Authentication-Results: mx.test.example; dkim=pass header.d=x.test\r\n{}",
        sig("x.test", "AAAABBBBCCCC")
    ));
    assert!(outcome(&raw, &verified()).0);
}

#[test]
fn every_result_is_a_verdict_taken() {
    for result in [
        "pass",
        "fail",
        "neutral",
        "policy",
        "permerror",
        "temperror",
        "none",
    ] {
        let raw = signed(&format!(
            "Authentication-Results: mx.test.example; dkim={result} header.b=AAAABBBB\r\n{}",
            sig("x.test", "AAAABBBBCCCC")
        ));
        let (fixed, s) = outcome(&raw, &verified());
        assert!(fixed, "{result}: {s:?}");
    }
}

#[test]
fn under_false_a_verdict_is_noted_but_withholds() {
    let raw = signed(&format!(
        "Authentication-Results: mx.test.example; dkim=pass header.b=AAAABBBB\r\n{}",
        sig("x.test", "AAAABBBBCCCC")
    ));
    let opts = Options {
        fix_signed: FixSigned::Never,
        ..verified()
    };
    let (fixed, s) = outcome(&raw, &opts);
    assert!(!fixed);
    assert_eq!(s[0].decision, Err(Withheld::NotEnabled));
}

#[test]
fn a_verdict_never_lifts_smime_or_multipart_signed() {
    let raw = b"Authentication-Results: mx.test.example; dkim=pass header.d=x.test\r\n\
DKIM-Signature: v=1; a=rsa-sha256; d=x.test; s=s1; h=From; bh=AAAA; b=AAAABBBB\r\n\
Content-Type: multipart/signed; protocol=\"application/pkcs7-signature\"; boundary=s\r\n\r\n\
--s\r\nContent-Type: multipart/related; boundary=r\r\n\r\n--r\r\nContent-Type: text/html\r\n\r\n\
<p>x</p>\r\n--r--\r\n--s\r\nContent-Type: application/pkcs7-signature\r\n\r\nMIAG\r\n--s--\r\n";
    let a = crate::engine::check(raw, &verified());
    let related = a
        .findings
        .iter()
        .find(|f| f.rule == Rule::RelatedTypeMissing)
        .expect("a type= to insert");
    assert!(!related.fixable);
    assert!(
        a.signatures
            .iter()
            .any(|s| s.decision == Err(Withheld::MultipartSigned)),
        "{:?}",
        a.signatures
    );
}

#[test]
fn a_body_not_seen_whole_is_not_known_to_be_broken() {
    let raw = signed(&sig("x.test", "AAAABBBBCCCC"));
    let mut broken = raw.clone();
    let at = broken.len() - 10;
    broken[at] = b'Y';
    assert!(
        outcome(&broken, &Options::default()).0,
        "a changed body protects nothing"
    );
    let opts = Options {
        octets_not_given: 100,
        ..Options::default()
    };
    let a = crate::engine::check(&broken, &opts);
    assert!(
        a.signatures
            .iter()
            .all(|s| s.decision == Err(Withheld::Unknown)),
        "{:?}",
        a.signatures
    );
}

#[test]
fn body_hashes_per_message_are_bounded() {
    // 20 signatures with 20 different l= values, all broken: the first
    // MAX_BODY_HASHES are judged broken, the rest are not known, and still protect.
    let mut head = String::new();
    for n in 0..20 {
        head.push_str(&format!(
            "DKIM-Signature: v=1; a=rsa-sha256; d=x{n}.test; s=s1; l={n}; h=From; bh=AAAA; b=AAAA{n}\r\n"
        ));
    }
    let raw = signed(&head);
    let (fixed, s) = outcome(&raw, &Options::default());
    assert!(!fixed);
    let broken = s
        .iter()
        .filter(|s| s.decision == Ok(Lift::BodyHashBroken))
        .count();
    assert_eq!(broken, super::standing::MAX_BODY_HASHES, "{s:?}");
}
