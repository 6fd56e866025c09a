//! message/external-body (RFC 2046 §5.2.3) and its URL access-type (RFC 2017).
//!
//! Every `extbody-*` rule of the catalogue is checked here, on each entity the scanner
//! marked [`Kind::ExternalBody`]; its phantom heading and body is the child entity marked
//! [`Kind::Phantom`]. This file reads the access-type and checks what every reference
//! needs (parameters, encoding, phantom heading); then:
//!
//! - `url`: the URL access-type (RFC 2017): the forms of the URL parameter, its content,
//!   the scheme policy and the rewrite rules;
//! - `legacy`: FTP, ANON-FTP and TFTP, and their conversion to `access-type=URL`;
//! - `value`: the one repair both make, a rewrite of the Content-Type value that
//!   re-emits the URL parameter in RFC 2017 form (encoded, quoted, folded into ≤40-octet
//!   words) and keeps every other byte of the value. The encoding and folding live in
//!   [`crate::engine::syntax::fold`].

mod legacy;
mod url;
mod value;

use std::borrow::Cow;

use crate::engine::model::analysis::{Context, Finding};
use crate::engine::model::mime::{Entity, Kind};
use crate::engine::model::rules::Rule;
use crate::engine::syntax::ascii::excerpt;
use crate::engine::syntax::decode::Encoding;
use crate::engine::syntax::fold;
use crate::engine::syntax::params::ContentType;

/// Access types of RFC 2046 §5.2.3.2–5 and RFC 2017, lower-case.
const KNOWN_ACCESS_TYPES: &[&str] = &[
    "url",
    "ftp",
    "anon-ftp",
    "tftp",
    "local-file",
    "mail-server",
];

/// The Content-Type field of one message/external-body entity, as its checks read it.
struct ExtField<'v> {
    /// The entity.
    idx: usize,
    /// Its Content-Type field (an index into the entity's fields).
    fi: usize,
    /// The field value, with the edit an earlier check made to it, if any.
    value: &'v [u8],
    /// `value`, read strictly.
    ct: &'v ContentType,
    /// Whether an edit of the field may be offered.
    can_edit: bool,
}

/// Runs every `extbody-*` rule on every message/external-body entity.
pub fn check(cx: &mut Context) {
    for idx in 0..cx.msg.entities.len() {
        if matches!(cx.msg.entities[idx].kind, Kind::ExternalBody) {
            check_entity(cx, idx);
        }
    }
}

fn check_entity(cx: &mut Context, idx: usize) {
    let msg = cx.msg;
    let e = &msg.entities[idx];
    let Some(fi) = e.ctype_field else {
        return;
    };
    let field = &msg.fields(e)[fi];
    // An incomplete message only gets edits in its top-level heading (see `Options`).
    let can_edit = e.editable() && (cx.opts.octets_not_given == 0 || e.parent.is_none());
    let value: Cow<[u8]> = match cx.edits.pending(&field.value) {
        Some(v) if can_edit => Cow::Owned(v.to_vec()),
        _ => Cow::Borrowed(msg.value(e, field)),
    };
    // Strict: a parameter after a missing `;` (RFC 2046 erratum 589) is not there for a
    // strict reader, and the findings say where reading stopped.
    let ct = ContentType::parse(&value).strict();
    let f = ExtField {
        idx,
        fi,
        value: &value,
        ct: &ct,
        can_edit,
    };

    check_encoding(cx, e);

    let access = ct
        .get_str("access-type")
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty());
    let Some(access) = access else {
        cx.report(Finding::new(
            Rule::ExtbodyAccessTypeMissing,
            msg.path(e),
            format!(
                "message/external-body without an access-type parameter (RFC 2046 §5.2.3.1 makes it mandatory){}",
                stop_note(&ct, &value)
            ),
        ));
        check_phantom(cx, e, None);
        return;
    };

    check_needed_params(cx, &f, &access);
    match access.as_str() {
        "ftp" | "anon-ftp" | "tftp" => legacy::check(cx, &f, &access),
        a if !KNOWN_ACCESS_TYPES.contains(&a) => {
            cx.report(Finding::new(
                Rule::ExtbodyUnknownAccessType,
                msg.path(e),
                format!(
                    "access-type={} is not one of RFC 2046 §5.2.3 or RFC 2017 (FTP, ANON-FTP, TFTP, LOCAL-FILE, MAIL-SERVER, URL): passed through untouched",
                    excerpt(access.as_bytes())
                ),
            ));
        }
        _ => {}
    }

    check_phantom(cx, e, Some(&access));
    if access == "url" {
        url::check(cx, &f);
    }
}

/// `extbody-param-missing`: the parameters access-type `access` (lower-case) needs.
fn check_needed_params(cx: &mut Context, f: &ExtField, access: &str) {
    let (needed, section): (&[&str], &str) = match access {
        "url" => (&["url"], "RFC 2017 §3(2)"),
        "ftp" | "tftp" => (&["name", "site"], "RFC 2046 §5.2.3.2"),
        "anon-ftp" => (&["name", "site"], "RFC 2046 §5.2.3.3"),
        "local-file" => (&["name"], "RFC 2046 §5.2.3.4"),
        "mail-server" => (&["server"], "RFC 2046 §5.2.3.5"),
        _ => (&[], ""),
    };
    let msg = cx.msg;
    for &name in needed {
        // A URL parameter that is there but empty is `extbody-url-invalid` (url::check):
        // the parameter is not absent, its value is not an absolute URI.
        let present =
            f.ct.get(name)
                .is_some_and(|v| name == "url" || !v.value.is_empty());
        if !present {
            cx.report(Finding::new(
                Rule::ExtbodyParamMissing,
                msg.path(&msg.entities[f.idx]),
                format!(
                    "access-type={access} needs a non-empty {} parameter ({section}){}",
                    name.to_ascii_uppercase(),
                    stop_note(f.ct, f.value)
                ),
            ));
        }
    }
}

/// `extbody-bad-encoding`: RFC 2046 §5.2.3 allows only 7bit on the external-body entity.
fn check_encoding(cx: &mut Context, e: &Entity) {
    if e.encoding == Encoding::SevenBit {
        return;
    }
    let cte = cx
        .msg
        .field(e, "content-transfer-encoding")
        .map(|f| excerpt(cx.msg.value(e, f).trim_ascii()))
        .unwrap_or_default();
    cx.report(Finding::new(
        Rule::ExtbodyBadEncoding,
        cx.msg.path(e),
        format!("Content-Transfer-Encoding: {cte} on a message/external-body (RFC 2046 §5.2.3: only 7bit is allowed)"),
    ));
}

/// The phantom heading rules: Content-ID MUST be there (RFC 2046 §5.2.3); with the URL
/// access-type the phantom body SHOULD be blank (RFC 2017 §3(3)).
fn check_phantom(cx: &mut Context, e: &Entity, access: Option<&str>) {
    let msg = cx.msg;
    // No phantom entity when the depth limit stopped the scan: nothing to judge.
    let Some(ph) = msg
        .children(e)
        .iter()
        .map(|&c| &msg.entities[c])
        .find(|c| matches!(c.kind, Kind::Phantom))
    else {
        return;
    };
    if msg.content_id(ph).is_none() {
        cx.report(Finding::new(
            Rule::ExtbodyInnerContentIdMissing,
            msg.path(e),
            "the phantom heading inside this message/external-body has no Content-ID (RFC 2046 §5.2.3: MUST)",
        ));
    }
    if access == Some("url") {
        let body = msg.body(ph);
        if let Some(start) = body.iter().position(|&b| !fold::is_lwsp(b)) {
            let end = body.len().min(start + 120);
            cx.report(Finding::new(
                Rule::ExtbodyPhantomBodyNotEmpty,
                msg.path(e),
                format!(
                    "access-type=URL with a phantom body that is not blank (RFC 2017 §3(3): should be left blank): {}",
                    excerpt(&body[start..end])
                ),
            ));
        }
    }
}

/// `; parameters unreadable from …` when the parser stopped early (e.g. a missing `;`,
/// RFC 2046 erratum 589), so that an admin sees why a parameter counts as missing.
fn stop_note(ct: &ContentType, value: &[u8]) -> String {
    match ct.trailing {
        Some(t) if t < value.len() => format!(
            "; the parameter list is unreadable from {} (missing ';'?)",
            excerpt(&value[t..])
        ),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::legacy::legacy_url;
    use super::url::has_inline_space;
    use super::*;
    use crate::engine::{check, fix, Options};

    /// `(part, rule, fixable)` of the extbody findings, in report order.
    fn found(raw: &str, opts: &Options) -> Vec<(String, Rule, bool)> {
        check(raw.as_bytes(), opts)
            .findings
            .into_iter()
            .filter(|f| f.rule.id().starts_with("extbody-"))
            .map(|f| (f.part, f.rule, f.fixable))
            .collect()
    }

    fn rules(raw: &str) -> Vec<Rule> {
        found(raw, &Options::default())
            .into_iter()
            .map(|f| f.1)
            .collect()
    }

    fn fixed(raw: &str, opts: &Options) -> String {
        String::from_utf8(fix(raw.as_bytes(), opts).unwrap().0).unwrap()
    }

    /// A top-level external-body with `params` after the type and a phantom part.
    fn ext(params: &str, phantom: &str) -> String {
        format!("Subject: x\nContent-Type: message/external-body;{params}\n\n{phantom}")
    }

    const PH: &str = "Content-Type: text/plain\nContent-ID: <a@b>\n\n";

    #[test]
    fn access_type_missing() {
        assert_eq!(
            rules(&ext(" name=\"x.url\"", PH)),
            [Rule::ExtbodyAccessTypeMissing]
        );
        assert_eq!(
            rules(&ext(" access-type=\"\"", PH)),
            [Rule::ExtbodyAccessTypeMissing]
        );
        assert!(rules(&ext(" access-type=URL; URL=\"http://a.example/\"", PH)).is_empty());
    }

    #[test]
    fn mandatory_parameters_per_access_type() {
        assert_eq!(
            rules(&ext(" access-type=local-file", PH)),
            [Rule::ExtbodyParamMissing]
        );
        assert!(rules(&ext(" access-type=local-file; name=\"/tmp/x\"", PH)).is_empty());
        assert_eq!(
            rules(&ext(" access-type=anon-ftp; name=x", PH)),
            [Rule::ExtbodyParamMissing, Rule::ExtbodyLegacyAccessType]
        );
        assert_eq!(
            rules(&ext(" access-type=URL", PH)),
            [Rule::ExtbodyParamMissing]
        );
        // RFC 2231 form counts as present.
        assert!(rules(&ext(
            " access-type=mail-server; server*=''a%40b.example",
            PH
        ))
        .is_empty());
        // Erratum 589: the missing `;` hides SERVER, and the message says why.
        let a = check(
            ext(
                " access-type=mail-server\n server=\"listserv@bogus.bitnet\"",
                PH,
            )
            .as_bytes(),
            &Options::default(),
        );
        let f = &a.findings[0];
        assert_eq!(f.rule, Rule::ExtbodyParamMissing);
        assert!(f.message.contains("missing ';'"), "{}", f.message);
    }

    #[test]
    fn unquoted_url_is_read_whole_and_quoted() {
        let raw = ext(" access-type=URL; URL=http://a.example/b?c=d; x=y", PH);
        assert_eq!(rules(&raw), [Rule::ExtbodyUrlUnquoted]);
        let out = fixed(&raw, &Options::default());
        // `URL="` and the URL would push the first line past 78 octets: a line of its own.
        assert!(
            out.contains("access-type=URL;\n URL=\"http://a.example/b?c=d\"; x=y\n"),
            "{out}"
        );
        assert!(rules(&out).is_empty());
        // A quoted URL is not reported.
        assert!(rules(&ext(" access-type=URL; URL=\"http://a.example/b?c=d\"", PH)).is_empty());
    }

    #[test]
    fn whole_url_words_quote_without_folding() {
        let long = "http://a.example/reports/2024/quarterly/finance/summary-of-all.pdf";
        let raw = ext(&format!(" access-type=URL; URL={long}"), PH);
        let whole = Options {
            whole_url_words: true,
            ..Options::default()
        };
        let out = fixed(&raw, &whole);
        assert!(
            out.contains("access-type=URL;\n URL=\"http://a.example/reports/2024/quarterly/finance/summary-of-all.pdf\"\n"),
            "{out}"
        );
        // The long word stays, reported without a fix; fixing again changes nothing.
        assert_eq!(
            found(&out, &whole),
            [("0".into(), Rule::ExtbodyUrlWordTooLong, false)]
        );
        assert_eq!(fixed(&out, &whole), out);
        // The RFC 2017 form of the same repair folds.
        let folded = fixed(&raw, &Options::default());
        assert!(folded.contains("/quarterly/\n finance/"), "{folded}");
    }

    #[test]
    fn a_space_inside_a_line_of_the_url_is_not_rewritten() {
        // RFC 2017 drops it, readers keep it: no rewrite picks one reading.
        let raw = ext(
            " access-type=URL;\n URL=\"http://a.example/a b/caf\u{e9}.pdf\"",
            PH,
        );
        assert_eq!(
            found(&raw, &Options::default()),
            [("0".into(), Rule::ExtbodyUrlUnencoded, false)]
        );
        assert!(has_inline_space(b"a b"));
        assert!(!has_inline_space(b"a/b\r\n c"));
        assert!(!has_inline_space(b"a/b \r\n c"));
        assert!(!has_inline_space(b" ab "));
        // The same URL folded at a line break is rewritten as before.
        let folded = ext(
            " access-type=URL;\n URL=\"http://a.example/a\n b/caf\u{e9}.pdf\"",
            PH,
        );
        let out = fixed(&folded, &Options::default());
        assert!(
            out.contains("URL=\"http://a.example/ab/caf%C3%A9.pdf\""),
            "{out}"
        );
    }

    #[test]
    fn unencoded_octets_are_encoded() {
        let raw = ext(
            " access-type=URL; URL=\"http://a.example/caf\u{e9}\\\"q\"",
            PH,
        );
        assert_eq!(
            found(&raw, &Options::default()),
            [("0".into(), Rule::ExtbodyUrlUnencoded, true)]
        );
        let out = fixed(&raw, &Options::default());
        assert!(
            out.contains("URL=\"http://a.example/caf%C3%A9%22q\"\n"),
            "{out}"
        );
        // Encoded octets are fine; a stray `%` is not encoded, but RFC 3986 rejects it.
        assert!(rules(&ext(
            " access-type=URL; URL=\"http://a.example/caf%C3%A9\"",
            PH
        ))
        .is_empty());
        assert_eq!(
            rules(&ext(" access-type=URL; URL=\"http://a.example/?%zz\"", PH)),
            [Rule::ExtbodyUrlInvalid]
        );
        assert!(rules(&ext(" access-type=URL; URL=\"http://a.example/ a b\"", PH)).is_empty());
    }

    #[test]
    fn rules_md_fold_vector() {
        let raw = ext(
            " access-type=URL; URL=\"ftp://ftp.deepdirs.org/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17/18/20/21/file.html\"",
            "Content-type: text/html\nContent-ID: <a@b>\n",
        );
        assert_eq!(
            found(&raw, &Options::default()),
            [("0".into(), Rule::ExtbodyUrlWordTooLong, true)]
        );
        let out = fixed(&raw, &Options::default());
        assert!(
            out.contains(concat!(
                "Content-Type: message/external-body; access-type=URL;\n",
                " URL=\"ftp://ftp.deepdirs.org/1/2/3/4/5/6/7/8/9\n",
                " /10/11/12/13/14/15/16/17/18/20/21/file.h\n",
                " tml\"\n\n"
            )),
            "{out}"
        );
        assert!(rules(&out).is_empty());
        // 40 octets exactly is a legal URL-word.
        let w40 = format!("http://a.example/{}", "x".repeat(23));
        assert!(rules(&ext(&format!(" access-type=URL; URL=\"{w40}\""), PH)).is_empty());
    }

    #[test]
    fn fix_changes_only_the_url_parameter() {
        let raw = ext(
            " (c) access-type=URL;\r\n\tURL=http://a.example/\u{fc}; expiration=\"x\"",
            PH,
        );
        let out = fixed(&raw, &Options::default());
        assert_eq!(
            out,
            ext(
                " (c) access-type=URL;\r\n\tURL=\"http://a.example/%C3%BC\"; expiration=\"x\"",
                PH
            )
        );
    }

    #[test]
    fn continuations_are_info_and_normalised_on_request() {
        let raw = ext(
            " access-type=URL;\n URL*0=\"ftp://\";\n URL*1=\"cs.utk.edu/pub/moore/bulk-mailer/bulk-mailer.tar\"",
            PH,
        );
        assert_eq!(
            found(&raw, &Options::default()),
            [("0".into(), Rule::ExtbodyUrlContinuation, false)]
        );
        assert_eq!(fixed(&raw, &Options::default()), raw);
        let opts = Options {
            normalize_url_continuations: true,
            ..Options::default()
        };
        assert_eq!(
            found(&raw, &opts),
            [("0".into(), Rule::ExtbodyUrlContinuation, true)]
        );
        let out = fixed(&raw, &opts);
        assert_eq!(
            out,
            ext(
                " access-type=URL;\n URL=\"ftp://cs.utk.edu/pub/moore/bulk-mailer/b\n ulk-mailer.tar\"",
                PH
            )
        );
        assert!(found(&out, &opts).is_empty());
    }

    /// RFC 2017's LWSP removal applies to the header's whitespace, not to octets
    /// decoded from %-escapes of a `*`-marked RFC 2231 segment: a decoded space stays in
    /// the URL, is reported unencoded, and the normalisation writes it back as `%20`.
    #[test]
    fn a_decoded_space_in_a_continuation_is_kept_and_reencoded() {
        let raw = ext(
            " access-type=URL;\n URL*0*=us-ascii''http://a.example/my%20file;\n URL*1=\".txt\"",
            PH,
        );
        let a = check(raw.as_bytes(), &Options::default());
        let unenc: Vec<&Finding> = a
            .findings
            .iter()
            .filter(|f| f.rule == Rule::ExtbodyUrlUnencoded)
            .collect();
        assert_eq!(unenc.len(), 1, "{:?}", a.findings);
        assert!(
            unenc[0].message.contains("http://a.example/my file.txt"),
            "{}",
            unenc[0].message
        );
        let opts = Options {
            normalize_url_continuations: true,
            ..Options::default()
        };
        assert_eq!(
            found(&raw, &opts),
            [
                ("0".into(), Rule::ExtbodyUrlContinuation, true),
                ("0".into(), Rule::ExtbodyUrlUnencoded, true)
            ]
        );
        let out = fixed(&raw, &opts);
        assert!(
            out.contains("URL=\"http://a.example/my%20file.txt\""),
            "{out}"
        );
        assert!(found(&out, &opts).is_empty());
        assert_eq!(fixed(&out, &opts), out, "idempotent");
        // The same URL in both forms is no conflict.
        let both = ext(
            " access-type=URL; URL=\"http://a.example/my%20file\";\n URL*=us-ascii''http://a.example/my%20file",
            PH,
        );
        assert!(!rules(&both).contains(&Rule::ExtbodyUrlConflict));
        // LWSP written in the header inside a segment is still removed.
        let folded = ext(" access-type=URL;\n URL*0=\"http://a.example/ x\"", PH);
        assert!(!rules(&folded).contains(&Rule::ExtbodyUrlUnencoded));
    }

    #[test]
    fn ambiguous_continuations_are_not_normalised() {
        // Found by fuzzing: `URL*` beside `URL*0`, an unterminated quoted-string and
        // text after it. The rewrite removed the pieces but left the unread text, and
        // the next pass found continuations again (fix not idempotent).
        let raw = "Content-Type: message/external-body; access-type=URL; URL*=utf-8''%41; charset=utf-8; URL*0=\"http://; URL*0=\"http://; URL*=utf-8''%41; URL*0=\"http://; URL*0=\"http://";
        let opts = Options {
            normalize_url_continuations: true,
            ..Options::default()
        };
        let (fixed, a) = crate::engine::fix(raw.as_bytes(), &opts).unwrap();
        assert!(a
            .findings
            .iter()
            .any(|f| f.rule == Rule::ExtbodyUrlContinuation && !f.fixable));
        assert_eq!(fixed, raw.as_bytes());
        // Two URL*0 sections, well formed otherwise: which one counts is a guess.
        let twice = "Content-Type: message/external-body; access-type=URL;\n URL*0=\"http://a/\"; URL*0=\"http://b/\"\n\nContent-ID: <x@y>\n\n";
        let (fixed, _) = crate::engine::fix(twice.as_bytes(), &opts).unwrap();
        assert_eq!(fixed, twice.as_bytes());
        // The plain case still normalises.
        let plain = "Content-Type: message/external-body; access-type=URL;\n URL*0=\"http://a/\"; URL*1=\"b\"\n\nContent-ID: <x@y>\n\n";
        let (fixed, _) = crate::engine::fix(plain.as_bytes(), &opts).unwrap();
        assert!(String::from_utf8_lossy(&fixed).contains("URL=\"http://a/b\""));
    }

    #[test]
    fn conflicting_forms_are_an_error_and_not_fixed() {
        let raw = ext(
            " access-type=URL; URL=\"http://a.example/\"; URL*0=\"http://b.example/\"",
            PH,
        );
        let f = found(&raw, &Options::default());
        assert!(f.contains(&("0".into(), Rule::ExtbodyUrlConflict, false)));
        let same = ext(
            " access-type=URL; URL=\"http://a.example/\"; URL*0=\"http://a.example/\"",
            PH,
        );
        assert!(!rules(&same).contains(&Rule::ExtbodyUrlConflict));
    }

    #[test]
    fn invalid_and_non_retrieval_and_denied_urls() {
        assert_eq!(
            rules(&ext(" access-type=URL; URL=\"a.example/x\"", PH)),
            [Rule::ExtbodyUrlInvalid]
        );
        assert_eq!(
            rules(&ext(
                " access-type=URL; URL=\"http://a.example/x#frag\"",
                PH
            )),
            [Rule::ExtbodyUrlInvalid]
        );
        assert_eq!(
            rules(&ext(" access-type=URL; URL=\"mailto:a@b.example\"", PH)),
            [Rule::ExtbodyUrlNotRetrieval]
        );
        assert_eq!(
            rules(&ext(" access-type=URL; URL=\"file:///etc/passwd\"", PH)),
            [Rule::ExtbodyUrlSchemeDenied]
        );
        assert!(rules(&ext(" access-type=URL; URL=\"nntp://n.example/g/1\"", PH)).is_empty());
        let mut opts = Options::default();
        opts.schemes.allow = vec!["https".into()];
        let f = found(
            &ext(" access-type=URL; URL=\"http://a.example/\"", PH),
            &opts,
        );
        assert_eq!(f, [("0".into(), Rule::ExtbodyUrlSchemeDenied, false)]);
        assert!(found(
            &ext(" access-type=URL; URL=\"https://a.example/\"", PH),
            &opts
        )
        .is_empty());
    }

    /// `URL=""` is one defect, not two: the parameter is there, its value is not an
    /// absolute URI.
    #[test]
    fn an_empty_url_is_one_finding() {
        for params in [
            " access-type=URL; URL=\"\"",
            " access-type=URL; URL=\" \"",
            " access-type=URL; URL*0=\"\"",
        ] {
            let a = check(ext(params, PH).as_bytes(), &Options::default());
            let got: Vec<(Rule, &str)> = a
                .findings
                .iter()
                .filter(|f| {
                    f.rule.id().starts_with("extbody-url-") || f.rule == Rule::ExtbodyParamMissing
                })
                .filter(|f| f.rule != Rule::ExtbodyUrlContinuation)
                .map(|f| (f.rule, f.message.as_str()))
                .collect();
            assert_eq!(got.len(), 1, "{params}: {got:?}");
            assert_eq!(got[0].0, Rule::ExtbodyUrlInvalid, "{params}");
            assert!(got[0].1.contains("empty"), "{}", got[0].1);
        }
    }

    #[test]
    fn legacy_and_unknown_access_types() {
        let raw = ext(
            " access-type=ANON-FTP; site=ftp.example; directory=pub; name=a.txt; mode=ascii",
            PH,
        );
        let a = check(raw.as_bytes(), &Options::default());
        assert_eq!(a.findings.len(), 1);
        assert_eq!(a.findings[0].rule, Rule::ExtbodyLegacyAccessType);
        assert!(a.findings[0]
            .message
            .contains("ftp://ftp.example/pub/a.txt;type=a"));
        assert!(!a.findings[0].fixable);
        assert_eq!(
            rules(&ext(" access-type=x-mutt-deleted; expiration=x", PH)),
            [Rule::ExtbodyUnknownAccessType]
        );
        assert!(rules(&ext(" access-type=\"local-file\"; name=x", PH)).is_empty());
    }

    #[test]
    fn legacy_url_escapes_file_names() {
        let ct = ContentType::parse(
            b"message/external-body; access-type=tftp; site=h; name=\"a/b c\"; mode=octet",
        );
        assert_eq!(
            legacy_url("tftp", &ct).unwrap(),
            b"tftp://h/a%2Fb%20c;mode=octet"
        );
        let ct = ContentType::parse(b"message/external-body; access-type=ftp; site=h");
        assert_eq!(legacy_url("ftp", &ct), None);
    }

    #[test]
    fn transfer_encoding_other_than_7bit() {
        let p = " access-type=URL; URL=\"http://a.example/\"";
        let with = |cte: &str| {
            format!("Subject: x\nContent-Type: message/external-body;{p}\nContent-Transfer-Encoding: {cte}\n\n{PH}")
        };
        assert_eq!(rules(&with("base64")), [Rule::ExtbodyBadEncoding]);
        assert_eq!(rules(&with("8bit")), [Rule::ExtbodyBadEncoding]);
        assert!(rules(&with("7BIT (plain)")).is_empty());
    }

    #[test]
    fn phantom_heading_and_body() {
        let p = " access-type=URL; URL=\"http://a.example/\"";
        assert_eq!(
            rules(&ext(p, "Content-Type: text/plain\n\n")),
            [Rule::ExtbodyInnerContentIdMissing]
        );
        assert_eq!(
            rules(&ext(
                p,
                "Content-ID: <a@b>\n\nTHIS IS NOT REALLY THE BODY!\n"
            )),
            [Rule::ExtbodyPhantomBodyNotEmpty]
        );
        assert!(rules(&ext(p, "Content-ID: <a@b>\n\n \n\t\n")).is_empty());
        // MAIL-SERVER puts its commands in the phantom body: that is no finding.
        assert!(rules(&ext(
            " access-type=mail-server; server=a@b.example",
            "Content-ID: <a@b>\n\nget x\n"
        ))
        .is_empty());
    }

    #[test]
    fn encoded_encapsulation_is_reported_not_fixed() {
        let inner = ext(" access-type=URL; URL=http://a.example/", PH);
        // Quoted-printable of ASCII lines only needs `=` written as `=3D`.
        let qp = inner.replace('=', "=3D");
        let raw = format!("Subject: o\nContent-Type: message/rfc822\nContent-Transfer-Encoding: quoted-printable\n\n{qp}\n");
        assert_eq!(
            found(&raw, &Options::default()),
            [("1.0".into(), Rule::ExtbodyUrlUnquoted, false)]
        );
        assert_eq!(fixed(&raw, &Options::default()), raw);
    }

    #[test]
    fn url_on_an_over_long_line_is_folded() {
        let url = format!("http://a.example/{}", "x/".repeat(600));
        let raw = ext(
            &format!(" access-type=URL; URL=\"{}\"", url.replace("x/x/", "x/ x/")),
            PH,
        );
        // Every URL-word is short, but the line is over 998 octets.
        assert!(rules(&raw).is_empty());
        let a = check(raw.as_bytes(), &Options::default());
        assert_eq!(a.findings.len(), 1);
        assert_eq!(
            (a.findings[0].rule, a.findings[0].fixable),
            (Rule::HeaderLineTooLong, true)
        );
        let out = fixed(&raw, &Options::default());
        assert!(out.lines().all(|l| l.len() <= 78), "{out}");
        assert!(check(out.as_bytes(), &Options::default())
            .findings
            .is_empty());
        // The same when the long line is a later line of the parameter.
        let raw = raw.replace("URL=\"http://a.example/", "URL=\"http://a.example/\n ");
        let a = check(raw.as_bytes(), &Options::default());
        assert_eq!(a.findings.len(), 1);
        assert!(a.findings[0].fixable);
        assert!(fixed(&raw, &Options::default())
            .lines()
            .all(|l| l.len() <= 78));
    }

    fn with_rules(rules: &[(&str, &str)]) -> Options {
        Options {
            rewrites: rules
                .iter()
                .enumerate()
                .map(|(n, (scheme, t))| crate::engine::UrlRewrite {
                    name: format!("rewrite #{}", n + 1),
                    scheme: Some(scheme.to_string()),
                    host: None,
                    path: None,
                    template: crate::engine::Template::parse(t).unwrap(),
                })
                .collect(),
            ..Options::default()
        }
    }

    #[test]
    fn rewrite_rule_replaces_every_url_form_and_folds() {
        let opts = with_rules(&[("http", "https://gateway.example.net/fetch?u={url_pct}")]);
        let raw = ext(
            " access-type=URL; expiration=\"x\";\n URL*0=\"http://a.example/\";\n URL*1=\"caf\u{e9}\"",
            PH,
        );
        let f = found(&raw, &opts);
        assert_eq!(
            f,
            [
                ("0".into(), Rule::ExtbodyUrlContinuation, true),
                ("0".into(), Rule::ExtbodyUrlUnencoded, true),
                ("0".into(), Rule::ExtbodyUrlRewritten, true),
            ]
        );
        let a = check(raw.as_bytes(), &opts);
        let ch = a.edits[0].change.clone().unwrap();
        assert_eq!(ch.old, "http://a.example/caf%C3%A9");
        assert_eq!(
            ch.new.as_deref(),
            Some("https://gateway.example.net/fetch?u=http%3A%2F%2Fa.example%2Fcaf%25C3%25A9")
        );
        let out = fixed(&raw, &opts);
        assert_eq!(
            out,
            ext(
                " access-type=URL; expiration=\"x\";\n URL=\"https://gateway.example.net/fetch?u=http\n %3A%2F%2Fa.example%2Fcaf%25C3%25A9\"",
                PH
            )
        );
        assert!(found(&out, &opts).is_empty());
        // No rule, no rewrite; a rule for another scheme, no rewrite.
        let plain = ext(" access-type=URL; URL=\"ftp://a.example/x\"", PH);
        assert!(found(&plain, &opts).is_empty());
    }

    #[test]
    fn rewrite_cures_a_denied_scheme_or_fails_safely() {
        let mut opts = with_rules(&[("http", "https://{authority}{path}{query}")]);
        opts.schemes.allow = vec!["https".into()];
        let raw = ext(
            " access-type=URL; URL=\"http://[2001:db8::1]:8080/a?b\"",
            PH,
        );
        assert_eq!(
            found(&raw, &opts),
            [
                ("0".into(), Rule::ExtbodyUrlSchemeDenied, true),
                ("0".into(), Rule::ExtbodyUrlRewritten, true),
            ]
        );
        assert!(fixed(&raw, &opts).contains("URL=\"https://[2001:db8::1]:8080/a?b\""));
        // A template whose result is denied is refused, and the URL is left as is.
        let mut bad = with_rules(&[("http", "file:///{host}{path}")]);
        bad.schemes = Default::default();
        let raw = ext(" access-type=URL; URL=\"http://a.example/x\"", PH);
        assert_eq!(
            found(&raw, &bad),
            [("0".into(), Rule::ExtbodyUrlRewriteFailed, false)]
        );
        assert_eq!(fixed(&raw, &bad), raw);
        // A rule that would match its own output again is refused.
        let looping = with_rules(&[("http", "http://gw.example/?u={url_pct}")]);
        assert_eq!(
            found(&raw, &looping),
            [("0".into(), Rule::ExtbodyUrlRewriteFailed, false)]
        );
    }

    #[test]
    fn rewrite_is_applied_only_when_its_own_finding_asks() {
        let opts = with_rules(&[("http", "https://{host}{path}")]);
        let raw = ext(" access-type=URL; URL=http://a.example/x", PH);
        let a = check(raw.as_bytes(), &opts);
        // The unquoted URL alone wants a fix, the rewrite is reported only: nothing.
        let only_unquoted = a.edits_for(|f| f.rule == Rule::ExtbodyUrlUnquoted);
        assert!(only_unquoted.is_empty());
        let both = a.edits_for(|f| f.fixable);
        assert_eq!(both.len(), 1);
        assert!(fixed(&raw, &opts).contains("URL=\"https://a.example/x\""));
    }

    fn legacy_opts() -> Options {
        Options {
            legacy_to_url: true,
            ..Options::default()
        }
    }

    #[test]
    fn legacy_conversion_keeps_the_other_parameters() {
        let raw = ext(
            " access-type=ANON-FTP;\n site=\"ftp.example\"; directory=\"/pub/my dir\";\n name=\"a;b.tar\"; mode=image;\n expiration=\"Fri, 14 Jun 2030 19:13:14 -0400 (EDT)\"; size=1234; permission=read",
            "Content-Type: application/x-tar\nContent-ID: <t@x>\n\n",
        );
        assert_eq!(
            found(&raw, &Options::default()),
            [("0".into(), Rule::ExtbodyLegacyAccessType, false)]
        );
        assert_eq!(
            found(&raw, &legacy_opts()),
            [("0".into(), Rule::ExtbodyLegacyAccessType, true)]
        );
        let out = fixed(&raw, &legacy_opts());
        assert_eq!(
            out,
            ext(
                " access-type=URL;\n URL=\"ftp://ftp.example/%2Fpub/my%20dir/a%3Bb.\n tar;type=i\";\n expiration=\"Fri, 14 Jun 2030 19:13:14 -0400 (EDT)\"; size=1234; permission=read",
                "Content-Type: application/x-tar\nContent-ID: <t@x>\n\n",
            )
        );
        assert!(found(&out, &legacy_opts()).is_empty());
        let a = check(raw.as_bytes(), &legacy_opts());
        let ch = a.edits[0].change.clone().unwrap();
        assert_eq!(ch.rule, Rule::ExtbodyLegacyAccessType);
        // Old: the legacy reference as written; new: the URL it became.
        assert!(
            ch.old.starts_with("access-type=ANON-FTP;site="),
            "{}",
            ch.old
        );
        assert_eq!(
            ch.new.as_deref(),
            Some("ftp://ftp.example/%2Fpub/my%20dir/a%3Bb.tar;type=i")
        );
    }

    #[test]
    fn legacy_tftp_and_ftp_with_login_and_never_mail_server_or_local_file() {
        let tftp = ext(
            " access-type=TFTP; site=h.example; name=boot.img; mode=octet",
            PH,
        );
        assert_eq!(
            fixed(&tftp, &legacy_opts()),
            ext(
                " access-type=URL;\n URL=\"tftp://h.example/boot.img;mode=octet\"",
                PH
            )
        );
        let ftp = ext(" access-type=FTP; site=h.example; name=x", PH);
        assert_eq!(
            found(&ftp, &legacy_opts()),
            [("0".into(), Rule::ExtbodyLegacyAccessType, false)]
        );
        let a = check(ftp.as_bytes(), &legacy_opts());
        assert!(
            a.findings[0].message.contains("needs a login"),
            "{}",
            a.findings[0].message
        );
        let login = Options {
            legacy_ftp_with_login: true,
            ..legacy_opts()
        };
        assert_eq!(
            fixed(&ftp, &login),
            ext(" access-type=URL; URL=\"ftp://h.example/x\"", PH)
        );
        for other in [
            " access-type=mail-server; server=\"listserv@example.org\"",
            " access-type=local-file; name=\"/u/x\"; site=h.example",
        ] {
            let raw = ext(other, PH);
            assert_eq!(fixed(&raw, &login), raw);
        }
        // A denied ftp scheme: not converted, and the reference is denied itself.
        let mut deny = legacy_opts();
        deny.schemes.deny.push("tftp".into());
        assert_eq!(
            found(&tftp, &deny),
            [
                ("0".into(), Rule::ExtbodyLegacyAccessType, false),
                ("0".into(), Rule::ExtbodyUrlSchemeDenied, false)
            ]
        );
        // The rewrite rules see the converted URL.
        let mut via = with_rules(&[("ftp", "https://mirror.example/ftp/{host}{path}")]);
        via.legacy_to_url = true;
        let raw = ext(
            " access-type=anon-ftp; site=h.example; directory=pub; name=x",
            PH,
        );
        assert_eq!(
            found(&raw, &via),
            [
                ("0".into(), Rule::ExtbodyLegacyAccessType, true),
                ("0".into(), Rule::ExtbodyUrlRewritten, true)
            ]
        );
        assert!(fixed(&raw, &via)
            .replace("\n ", "")
            .contains("URL=\"https://mirror.example/ftp/h.example/pub/x\""));
    }

    /// A nested multipart with an external-body part at 1.2.
    fn nested(url: &str) -> String {
        format!(
            "Subject: n\nContent-Type: multipart/mixed; boundary=o\n\n--o\nContent-Type: multipart/alternative; boundary=i\n\n--i\nContent-Type: text/plain\n\nhi\n--i\nContent-Type: message/external-body; access-type=URL;\n URL=\"{url}\"\n\nContent-Type: text/html\nContent-ID: <p@x>\n\n--i--\n--o--\n"
        )
    }

    #[test]
    fn denied_scheme_part_is_stripped_when_enabled() {
        let raw = nested("javascript:alert(document.cookie)//caf\u{e9}");
        assert_eq!(
            found(&raw, &Options::default()),
            [
                ("1.2".into(), Rule::ExtbodyUrlUnencoded, true),
                ("1.2".into(), Rule::ExtbodyUrlSchemeDenied, false)
            ]
        );
        let opts = Options {
            strip_denied: true,
            ..Options::default()
        };
        let f = found(&raw, &opts);
        assert_eq!(f[1], ("1.2".into(), Rule::ExtbodyUrlSchemeDenied, true));
        let a = check(raw.as_bytes(), &opts);
        // The fold of the URL and the strip: only the strip is applied.
        assert_eq!(a.edits.len(), 2);
        assert_eq!(a.edits_for(|f| f.fixable).len(), 1);
        let out = fixed(&raw, &opts);
        let start = raw.find("Content-Type: message/external-body").unwrap();
        let end = raw.find("\n--i--").unwrap();
        assert_eq!(&out[..start], &raw[..start]);
        assert!(out.ends_with(&raw[end..]));
        let notice = &out[start..out.len() - (raw.len() - end)];
        assert!(
            notice.starts_with("Content-Type: text/plain; charset=\"us-ascii\"\n"),
            "{notice}"
        );
        assert!(
            notice.ends_with("\n\nRemoved URL:\n  javascript:alert(document.cookie)//caf%C3%A9"),
            "{notice}"
        );
        assert!(check(out.as_bytes(), &opts).findings.is_empty());
        // Only the strip, with the denial reported only: the fold alone is applied.
        let fold_only = a.edits_for(|f| f.rule == Rule::ExtbodyUrlUnencoded);
        assert_eq!(fold_only.len(), 1);
        assert_eq!(fold_only[0].kind, crate::engine::EditKind::Field);
        // A top-level external-body is never stripped.
        let top = ext(" access-type=URL; URL=\"javascript:x\"", PH);
        assert_eq!(
            found(&top, &opts),
            [("0".into(), Rule::ExtbodyUrlSchemeDenied, false)]
        );
    }

    #[test]
    fn garbage_never_panics() {
        for params in [
            "",
            ";",
            " access-type",
            " access-type=URL; URL=",
            " access-type=URL; URL=\"",
            " access-type=URL; URL=:",
            " access-type=URL; URL=a:b:c;;; x",
            " access-type=URL; URL*9=x; URL*=''%",
            " access-type=URL; URL=\"\"",
        ] {
            let _ = fix(ext(params, "").as_bytes(), &Options::default());
            let _ = fix(
                ext(params, PH).replace('\n', "\r\n").as_bytes(),
                &Options::default(),
            );
        }
    }
}
