//! One message per shape of the three name rules, the parts they leave alone, and the
//! input no repair may guess.

use crate::engine::{check, fix, Options, Rule};

/// (part, rule id, fixable) of every finding of the three rules.
fn found_with(raw: &str, opts: &Options) -> Vec<(String, &'static str, bool)> {
    check(raw.as_bytes(), opts)
        .findings
        .into_iter()
        .filter(|f| {
            matches!(
                f.rule,
                Rule::PartName8bit | Rule::PartNameRfc2231Only | Rule::PartNameOneField
            )
        })
        .map(|f| (f.part, f.rule.id(), f.fixable))
        .collect()
}

fn found(raw: &str) -> Vec<(String, &'static str, bool)> {
    found_with(raw, &Options::default())
}

fn f(part: &str, rule: &'static str, fixable: bool) -> (String, &'static str, bool) {
    (part.to_string(), rule, fixable)
}

/// The fixed message, after checking that fixing it again changes nothing and that
/// nothing fixable is left.
fn fixed_with(raw: &str, opts: &Options) -> String {
    let (out, _) = fix(raw.as_bytes(), opts).unwrap();
    let (again, a) = fix(&out, opts).unwrap();
    assert_eq!(again, out, "fix is not idempotent");
    assert!(a.findings.iter().all(|f| !f.fixable), "{:?}", a.findings);
    String::from_utf8(out).unwrap()
}

fn fixed(raw: &str) -> String {
    fixed_with(raw, &Options::default())
}

/// multipart/mixed: a text body, then part 2 with heading `{H}`.
fn mixed(heading: &str) -> String {
    format!(
        "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nSee attached.\r\n--b\r\n{heading}\r\n\r\nQUJD\r\n--b--\r\n"
    )
}

#[test]
fn a_plain_ascii_name_in_both_fields_is_nothing() {
    for h in [
        "Content-Type: application/pdf; name=\"a.pdf\"\r\nContent-Disposition: attachment; filename=\"a.pdf\"",
        "Content-Type: application/pdf; name=a.pdf\r\nContent-Disposition: attachment;\r\n\tfilename=a.pdf; size=3",
        "Content-Type: application/pdf; charset=x; NAME=\"a.pdf\"\r\nContent-Disposition: ATTACHMENT; FileName=\"a.pdf\"",
        // Two different names: each field names the file, which is all these rules ask.
        "Content-Type: application/pdf; name=\"a.pdf\"\r\nContent-Disposition: attachment; filename=\"b.pdf\"",
    ] {
        assert!(found(&mixed(h)).is_empty(), "{h}");
    }
}

#[test]
fn thunderbirds_mixed_form_is_correct() {
    let raw = mixed(
        "Content-Type: application/pdf; name=\"=?UTF-8?B?w5xiZXJ3ZWlzdW5nLnBkZg==?=\"\r\nContent-Disposition: attachment;\r\n filename*=UTF-8''%C3%9Cberweisung.pdf",
    );
    assert!(found(&raw).is_empty());
    // Outlook's: RFC 2047 in both fields.
    let outlook = mixed(
        "Content-Type: application/pdf;\r\n\tname=\"=?utf-8?B?w5xiZXJ3ZWlzdW5nLnBkZg==?=\"\r\nContent-Disposition: attachment;\r\n\tfilename=\"=?utf-8?B?w5xiZXJ3ZWlzdW5nLnBkZg==?=\"",
    );
    assert!(found(&outlook).is_empty());
}

#[test]
fn an_rfc2231_only_name_gets_its_twin_in_both_fields() {
    let raw = mixed(
        "Content-Type: application/pdf\r\nContent-Disposition: attachment; filename*=utf-8''r%C3%A9sum%C3%A9.pdf",
    );
    assert_eq!(
        found(&raw),
        [
            f("2", "part-name-rfc2231-only", true),
            f("2", "part-name-rfc2231-only", true)
        ]
    );
    assert_eq!(
        fixed(&raw),
        raw.replace(
            "application/pdf\r\n",
            "application/pdf; name=\"=?UTF-8?B?csOpc3Vtw6kucGRm?=\"\r\n"
        )
        .replace(
            "sum%C3%A9.pdf\r\n",
            "sum%C3%A9.pdf;\r\n filename=\"=?UTF-8?B?csOpc3Vtw6kucGRm?=\"\r\n"
        )
    );
    // An ASCII name in RFC 2231 form: the twin as it stands.
    let ascii = mixed("Content-Type: application/pdf; name*=''report.pdf");
    assert_eq!(
        fixed(&ascii),
        ascii.replace("''report.pdf", "''report.pdf; name=\"report.pdf\"")
    );
}

#[test]
fn a_part_without_content_type_gets_the_twin_where_it_can() {
    let raw = mixed("Content-Disposition: attachment; filename*=utf-8''%C3%A9.txt");
    assert_eq!(
        found(&raw),
        [
            f("2", "part-name-rfc2231-only", true),
            // No Content-Type to copy the name into: a type would have to be made up.
            f("2", "part-name-one-field", false)
        ]
    );
    assert!(fixed(&raw).contains("%C3%A9.txt;\r\n filename=\"=?UTF-8?B?w6kudHh0?=\""));
}

#[test]
fn raw_utf8_becomes_rfc2231_with_its_twin() {
    let raw = mixed("Content-Type: application/pdf; name=\"é.pdf\"; x=1");
    assert_eq!(
        found(&raw),
        [
            f("2", "part-name-8bit", true),
            f("2", "part-name-one-field", false)
        ]
    );
    assert_eq!(
        fixed(&raw),
        raw.replace(
            "name=\"é.pdf\"; x=1",
            "x=1; name*=utf-8''%C3%A9.pdf;\r\n name=\"=?UTF-8?B?w6kucGRm?=\""
        )
    );
    // Beside an RFC 2231 form of its own: the twin alone replaces it.
    let both = mixed(
        "Content-Type: application/pdf; name=\"é.pdf\"; name*=utf-8''%C3%A9.pdf\r\nContent-Disposition: attachment; filename*=utf-8''%C3%A9.pdf",
    );
    assert_eq!(found(&both), [f("2", "part-name-8bit", true)]);
    assert!(fixed(&both).contains(
        "application/pdf; name*=utf-8''%C3%A9.pdf;\r\n name=\"=?UTF-8?B?w6kucGRm?=\"\r\n"
    ));
}

#[test]
fn octets_that_are_not_utf8_are_reported_only() {
    let raw = b"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: application/pdf; name=\"\xe9t\xe9.pdf\"\r\nContent-Disposition: attachment\r\n\r\nQUJD\r\n--b--\r\n";
    let a = check(raw, &Options::default());
    let got: Vec<_> = a.findings.iter().map(|f| (f.rule, f.fixable)).collect();
    // Not spread to the other field either: one-field stays silent.
    assert_eq!(got, [(Rule::PartName8bit, false)]);
    assert!(a.findings[0].message.contains("not UTF-8"));
    // Raw 8-bit octets inside an RFC 2231 value: reported, never rewritten.
    let raw = mixed("Content-Type: application/pdf; name*=utf-8''é.pdf");
    let got = found(&raw);
    assert!(got.contains(&f("2", "part-name-8bit", false)), "{got:?}");
}

#[test]
fn one_field_copies_the_name_in_the_form_it_has() {
    // CT only, CD without a name: plain ASCII copied as written.
    let raw = mixed(
        "Content-Type: application/pdf; name=\"a \\\"b\\\".pdf\"\r\nContent-Disposition: attachment",
    );
    assert_eq!(found(&raw), [f("2", "part-name-one-field", true)]);
    assert!(fixed(&raw).contains("attachment; filename=\"a \\\"b\\\".pdf\"\r\n"));
    // CD only, as RFC 2231 with an ASCII fallback (RFC 2231 §4.1): both forms copied.
    let raw = mixed(
        "Content-Type: application/pdf\r\nContent-Disposition: attachment; filename=\"resume.pdf\";\r\n filename*=iso-8859-1''r%E9sum%E9.pdf",
    );
    assert_eq!(found(&raw), [f("2", "part-name-one-field", true)]);
    let out = fixed(&raw);
    assert!(
        out.contains(
            "application/pdf; name*=utf-8''r%C3%A9sum%C3%A9.pdf;\r\n name=\"resume.pdf\"\r\n"
        ),
        "{out}"
    );
}

#[test]
fn a_missing_disposition_is_inserted_only_under_the_option() {
    let raw = mixed("Content-Type: application/pdf; name=\"a.pdf\"");
    assert_eq!(found(&raw), [f("2", "part-name-one-field", false)]);
    assert_eq!(fixed(&raw), raw);
    let opts = Options {
        name_insert_disposition: true,
        ..Options::default()
    };
    assert_eq!(
        found_with(&raw, &opts),
        [f("2", "part-name-one-field", true)]
    );
    assert_eq!(
        fixed_with(&raw, &opts),
        raw.replace(
            "name=\"a.pdf\"\r\n",
            "name=\"a.pdf\"\r\nContent-Disposition: attachment; filename=\"a.pdf\"\r\n"
        )
    );
    // Never in the top-level heading: the milter would add it after the other fields.
    let top = "MIME-Version: 1.0\r\nContent-Type: application/pdf; name=\"a.pdf\"\r\n\r\nQUJD\r\n";
    assert_eq!(
        found_with(top, &opts),
        [f("0", "part-name-one-field", false)]
    );
}

#[test]
fn parts_readers_do_not_list_are_left_alone() {
    for h in [
        // A body, an image marked inline, a forwarded message not marked attachment.
        "Content-Type: text/plain; name=\"notes.txt\"",
        "Content-Type: image/png; name=\"a.png\"\r\nContent-Disposition: inline",
        "Content-Type: message/rfc822; name=\"fwd.eml\"",
        // A signature, an external body (its `name` is the access-type's).
        "Content-Type: application/pkcs7-signature; name=\"smime.p7s\"",
        "Content-Type: message/external-body; access-type=local-file; name=\"/tmp/x\"",
    ] {
        assert!(found(&mixed(h)).is_empty(), "{h}");
    }
    // An image the HTML shows is part of the body, not an attachment.
    let related = "MIME-Version: 1.0\r\nContent-Type: multipart/related; boundary=r; type=\"text/html\"\r\n\r\n--r\r\nContent-Type: text/html\r\n\r\n<img src=\"cid:a@x\">\r\n--r\r\nContent-Type: image/png; name=\"a.png\"\r\nContent-Disposition: inline\r\nContent-ID: <a@x>\r\n\r\nPNG\r\n--r--\r\n";
    assert!(found(related).is_empty());
    // A PDF that Apple Mail marks inline is listed by every other reader.
    let pdf = mixed("Content-Type: application/pdf; name=\"a.pdf\"\r\nContent-Disposition: inline");
    assert_eq!(found(&pdf), [f("2", "part-name-one-field", true)]);
}

#[test]
fn the_name_of_a_referenced_image_composes_with_its_disposition_repair() {
    // SendGrid: a referenced image marked attachment, its name raw UTF-8.
    let raw = "MIME-Version: 1.0\r\nContent-Type: multipart/related; boundary=r; type=\"text/html\"\r\n\r\n--r\r\nContent-Type: text/html\r\n\r\n<img src=\"cid:a@x\">\r\n--r\r\nContent-Type: image/png; name=\"logo.png\"\r\nContent-Disposition: attachment; filename=\"lögo.png\"\r\nContent-ID: <a@x>\r\n\r\nPNG\r\n--r--\r\n";
    let out = fixed(raw);
    assert!(
        out.contains("Content-Disposition: inline; filename*=utf-8''l%C3%B6go.png;\r\n filename=\"=?UTF-8?B?bMO2Z28ucG5n?=\"\r\n"),
        "{out}"
    );
}

#[test]
fn unreadable_values_and_unwritable_fields_are_reported_without_a_repair() {
    for (h, why) in [
        (
            "Content-Type: application/pdf\r\nContent-Disposition: attachment; filename*0=a; filename*2=c",
            "filename*1 is missing",
        ),
        (
            "Content-Type: application/pdf\r\nContent-Disposition: attachment; filename*=x-unknown''%E9",
            "unknown",
        ),
        (
            "Content-Type: application/pdf\r\nContent-Disposition: attachment; filename*=utf-8''%FF%FE",
            "not valid utf-8",
        ),
    ] {
        let a = check(mixed(h).as_bytes(), &Options::default());
        assert!(!a.findings.is_empty(), "{h}");
        for x in &a.findings {
            assert_eq!(x.rule, Rule::PartNameRfc2231Only, "{h}");
            assert!(!x.fixable && x.message.contains(why), "{h}: {}", x.message);
        }
    }
    // Two Content-Disposition fields: which one a reader takes is its own business.
    let two = mixed(
        "Content-Type: application/pdf; name=\"a.pdf\"\r\nContent-Disposition: attachment\r\nContent-Disposition: attachment",
    );
    assert_eq!(found(&two), [f("2", "part-name-one-field", false)]);
    // The name twice in one field (found by the engine_rfc822 fuzz target): which one a
    // reader takes is its own business, so neither is rewritten.
    let twice = mixed("Content-Type: application/pdf; name=\"Ü.pdf\"; name=\"Ü.pdf\"\r\nContent-Disposition: attachment");
    let a = check(twice.as_bytes(), &Options::default());
    let eight: Vec<_> = a
        .findings
        .iter()
        .filter(|f| f.rule == Rule::PartName8bit)
        .collect();
    assert_eq!(eight.len(), 1);
    assert!(
        !eight[0].fixable && eight[0].message.contains("name 2 times"),
        "{}",
        eight[0].message
    );
    fixed(&twice);
    // A name longer than any file system keeps.
    let long = mixed(&format!(
        "Content-Type: application/pdf; name=\"{}.pdf\"",
        "é".repeat(600)
    ));
    assert_eq!(
        found(&long),
        [
            f("2", "part-name-8bit", false),
            f("2", "part-name-one-field", false)
        ]
    );
}
