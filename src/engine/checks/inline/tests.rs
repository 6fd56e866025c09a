//! One message per shape of the catalogue's "Inline parts" section, with the cases where
//! no repair may be guessed.

use crate::engine::{check, fix, Options, Rule, Severity};

/// (part, rule id, fixable) of every finding of the rules of this section, and of the
/// rules they take the place of.
fn found(raw: &str) -> Vec<(String, &'static str, bool)> {
    check(raw.as_bytes(), &Options::default())
        .findings
        .into_iter()
        .filter(|f| {
            matches!(
                f.rule,
                Rule::RelatedPartDisposition
                    | Rule::RelatedPartDispositionMissing
                    | Rule::ContentIdMalformed
                    | Rule::RelatedRefMismatch
                    | Rule::CidOutsideRelated
                    | Rule::RelatedAttachmentHidden
                    | Rule::HtmlBaseRemote
                    | Rule::RelatedRefDangling
                    | Rule::ContentIdSyntax
            )
        })
        .map(|f| (f.part, f.rule.id(), f.fixable))
        .collect()
}

fn one(part: &str, rule: &'static str, fixable: bool) -> Vec<(String, &'static str, bool)> {
    vec![(part.to_string(), rule, fixable)]
}

/// The fixed message, after checking that fixing it again changes nothing and that
/// nothing fixable is left.
fn fixed(raw: &str) -> String {
    let (out, _) = fix(raw.as_bytes(), &Options::default()).unwrap();
    let (again, a) = fix(&out, &Options::default()).unwrap();
    assert_eq!(again, out, "fix is not idempotent");
    assert!(a.findings.iter().all(|f| !f.fixable), "{:?}", a.findings);
    String::from_utf8(out).unwrap()
}

/// multipart/related: the HTML (part 1) shows `cid:logo@x.test`; part 2 is the image
/// with heading `{IMG}`.
const RELATED: &str = "Content-Type: multipart/related; boundary=r; type=\"text/html\"\r\n\r\n--r\r\nContent-Type: text/html\r\n\r\n<p><img src=\"cid:{REF}\"></p>\r\n--r\r\n{IMG}\r\n\r\nPNG\r\n--r--\r\n";

fn related(reference: &str, img: &str) -> String {
    RELATED.replace("{REF}", reference).replace("{IMG}", img)
}

#[test]
fn an_image_the_html_shows_marked_attachment_becomes_inline() {
    // SendGrid's and Postmark's default for an attachment with a content_id.
    let raw = related(
        "logo@x.test",
        "Content-Type: image/png; name=\"logo.png\"\r\nContent-Disposition: attachment; filename=\"logo.png\"\r\nContent-ID: <logo@x.test>",
    );
    assert_eq!(found(&raw), one("2", "related-part-disposition", true));
    assert_eq!(
        fixed(&raw),
        raw.replace(
            "Disposition: attachment; filename",
            "Disposition: inline; filename"
        )
    );
    // Already inline: nothing.
    let ok = raw.replace("attachment;", "inline;");
    assert!(found(&ok).is_empty());
    // Two Content-Disposition fields: which one a reader takes is its own business.
    let two = raw.replace(
        "Content-ID:",
        "Content-Disposition: attachment\r\nContent-ID:",
    );
    assert_eq!(found(&two), one("2", "related-part-disposition", false));
}

#[test]
fn a_linked_attachment_stays_an_attachment() {
    let raw = related(
        "logo@x.test",
        "Content-Type: image/png\r\nContent-Disposition: inline\r\nContent-ID: <logo@x.test>",
    )
    .replace(
        "<p><img",
        "<a href=\"cid:doc@x.test\">the report</a><p><img",
    )
    .replace(
        "--r--",
        "--r\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=r.pdf\r\nContent-ID: <doc@x.test>\r\n\r\nPDF\r\n--r--",
    );
    assert!(found(&raw).is_empty(), "{:?}", found(&raw));
}

#[test]
fn an_image_the_html_shows_without_a_disposition_gets_inline() {
    // Outlook 16: Content-ID and no Content-Disposition.
    let raw = related(
        "image001.png@01DA1B2C.3D4E5F60",
        "Content-Type: image/png; name=\"image001.png\"\r\nContent-Transfer-Encoding: base64\r\nContent-ID: <image001.png@01DA1B2C.3D4E5F60>",
    );
    let a = check(raw.as_bytes(), &Options::default());
    assert_eq!(a.findings.len(), 1);
    assert_eq!(a.findings[0].rule, Rule::RelatedPartDispositionMissing);
    assert_eq!(a.findings[0].severity, Severity::Info);
    assert_eq!(
        fixed(&raw),
        raw.replace(
            "01DA1B2C.3D4E5F60>\r\n\r\n",
            "01DA1B2C.3D4E5F60>\r\nContent-Disposition: inline\r\n\r\n"
        )
    );
    // A style sheet shown by the HTML is not an image: the rule is about images.
    let css = raw.replace("image/png", "text/css");
    assert!(found(&css).is_empty());
}

#[test]
fn cid_images_beside_the_html_in_mixed_make_it_related() {
    let raw = "Content-Type: multipart/mixed; boundary=m\r\n\r\n--m\r\nContent-Type: text/html\r\n\r\n<img src=\"cid:a@x.test\"><img src=\"cid:b@x.test\">\r\n--m\r\nContent-Type: image/png\r\nContent-Disposition: inline\r\nContent-ID: <a@x.test>\r\n\r\nA\r\n--m\r\nContent-Type: image/png\r\nContent-Disposition: inline\r\nContent-ID: <b@x.test>\r\n\r\nB\r\n--m--\r\n";
    assert_eq!(found(raw), one("1", "cid-outside-related", true));
    assert_eq!(
        fixed(raw),
        raw.replace(
            "multipart/mixed; boundary=m",
            "multipart/related; boundary=m; type=\"text/html\""
        )
    );
    // Once related, the images' dispositions count as in any multipart/related: the
    // whole repair is offered at once, so that fixing again finds nothing.
    let bare = raw.replace("Content-Disposition: inline\r\n", "");
    assert_eq!(
        found(&bare),
        [
            ("1".to_string(), "cid-outside-related", true),
            ("2".to_string(), "related-part-disposition-missing", true),
            ("3".to_string(), "related-part-disposition-missing", true)
        ]
    );
    assert_eq!(
        fixed(&bare),
        fixed(raw)
            .replace(
                "Content-Disposition: inline\r\nContent-ID: <a@x.test>\r\n",
                "Content-ID: <a@x.test>\r\nContent-Disposition: inline\r\n"
            )
            .replace(
                "Content-Disposition: inline\r\nContent-ID: <b@x.test>\r\n",
                "Content-ID: <b@x.test>\r\nContent-Disposition: inline\r\n"
            )
    );
    // The HTML inside a multipart/alternative: the type is the alternative's.
    let alt = "Content-Type: multipart/mixed;\r\n boundary=\"m\"\r\n\r\n--m\r\nContent-Type: multipart/alternative; boundary=a\r\n\r\n--a\r\nContent-Type: text/plain\r\n\r\nt\r\n--a\r\nContent-Type: text/html\r\n\r\n<img src=\"cid:a@x.test\">\r\n--a--\r\n--m\r\nContent-Type: image/png\r\nContent-Disposition: inline\r\nContent-ID: <a@x.test>\r\n\r\nA\r\n--m--\r\n";
    assert_eq!(found(alt), one("1.2", "cid-outside-related", true));
    assert!(fixed(alt).starts_with(
        "Content-Type: multipart/related;\r\n boundary=\"m\"; type=\"multipart/alternative\"\r\n"
    ));
    // A real attachment beside the images: a header cannot move it out.
    let pdf = raw.replace(
        "--m--",
        "--m\r\nContent-Type: application/pdf\r\n\r\nPDF\r\n--m--",
    );
    assert_eq!(found(&pdf), one("1", "cid-outside-related", false));
    // A reference of the HTML that leads outside the mixed would lead nowhere once the
    // mixed is the related scope: not changed.
    let outside = "Content-Type: multipart/mixed; boundary=o\r\n\r\n--o\r\n".to_string()
        + &raw.replace(
            "<img src=\"cid:b@x.test\">",
            "<img src=\"cid:b@x.test\"><img src=\"cid:c@x.test\">",
        )
        + "\r\n--o\r\nContent-Type: image/png\r\nContent-ID: <c@x.test>\r\n\r\nC\r\n--o--\r\n";
    assert!(
        found(&outside)
            .iter()
            .any(|(p, r, fixable)| p == "1.1" && *r == "cid-outside-related" && !fixable),
        "{:?}",
        found(&outside)
    );
    // An image nothing shows beside them: likewise.
    let unshown = raw.replace("<img src=\"cid:b@x.test\">", "");
    assert_eq!(found(&unshown), one("1", "cid-outside-related", false));
}

#[test]
fn content_ids_only_a_lenient_reader_matches_are_rewritten() {
    for (id, reference) in [
        ("1312", "1312"),
        ("logo@x.test", "logo@x.test"),
        ("<<logo@x.test>>", "logo@x.test"),
        ("<cid:logo@x.test>", "logo@x.test"),
        ("< logo@x.test >", "logo@x.test"),
        ("=?utf-8?B?PGxvZ29AeC50ZXN0Pg==?=", "logo@x.test"),
    ] {
        let raw = related(
            reference,
            &format!("Content-Type: image/png\r\nContent-Disposition: inline\r\nContent-ID: {id}"),
        );
        assert_eq!(found(&raw), one("2", "content-id-malformed", true), "{id}");
        assert_eq!(
            fixed(&raw),
            raw.replace(
                &format!("Content-ID: {id}"),
                &format!("Content-ID: <{reference}>")
            ),
            "{id}"
        );
    }
    // Gmail's <ii_…> are read as written by every reader: only content-id-syntax, info.
    let gmail = related(
        "ii_m3x9",
        "Content-Type: image/png\r\nContent-Disposition: inline\r\nContent-ID: <ii_m3x9>",
    );
    assert_eq!(found(&gmail), one("2", "content-id-syntax", false));
    // Two parts with the same bare id: which one is meant cannot be told.
    let two = related(
        "1312",
        "Content-Type: image/png\r\nContent-ID: 1312\r\n\r\nA\r\n--r\r\nContent-Type: image/png\r\nContent-ID: 1312",
    );
    let f = found(&two);
    assert!(
        f.iter()
            .all(|(_, r, fixable)| !fixable && *r != "related-ref-dangling"),
        "{f:?}"
    );
    assert!(f
        .iter()
        .any(|(p, r, _)| p == "1" && *r == "content-id-malformed"));
}

#[test]
fn a_reference_whose_part_has_another_id_or_none_gets_it() {
    // A gateway upper-cased the id (isotope-mail, DavMail).
    let upper = related(
        "image001.png@01d1b2c3",
        "Content-Type: image/png\r\nContent-Disposition: inline\r\nContent-ID: <IMAGE001.PNG@01D1B2C3>",
    );
    assert_eq!(found(&upper), one("1", "related-ref-mismatch", true));
    assert_eq!(
        fixed(&upper),
        upper.replace("<IMAGE001.PNG@01D1B2C3>", "<image001.png@01d1b2c3>")
    );
    // No Content-ID, and the file name is the reference (osTicket, apprise): reported,
    // but a Content-ID with no @ is not a msg-id, and is not added.
    let named = related(
        "chart.png",
        "Content-Type: image/png; name=\"chart.png\"\r\nContent-Disposition: inline; filename=\"chart.png\"",
    );
    assert_eq!(found(&named), one("1", "related-ref-mismatch", false));
    let a = check(named.as_bytes(), &Options::default());
    assert!(
        a.findings[0].message.contains("not inserted"),
        "{}",
        a.findings[0].message
    );
    // The same with an id that is one: inserted.
    let named = related(
        "chart.png@x.test",
        "Content-Type: image/png; name=\"chart.png@x.test\"\r\nContent-Disposition: inline",
    );
    assert_eq!(found(&named), one("1", "related-ref-mismatch", true));
    assert_eq!(
        fixed(&named),
        named.replace(
            "Content-Disposition: inline\r\n",
            "Content-Disposition: inline\r\nContent-ID: <chart.png@x.test>\r\n"
        )
    );
    // The file name is the id's part before @ (Outlook-style ids, name kept).
    let outlook = related(
        "chart.png@01D1B2C3",
        "Content-Type: image/png; name=\"chart.png\"\r\nContent-Disposition: inline",
    );
    assert_eq!(found(&outlook), one("1", "related-ref-mismatch", true));
    assert!(fixed(&outlook).contains("Content-ID: <chart.png@01D1B2C3>\r\n"));
    // One part two references could each mean, by different ids: given neither.
    let contested = related(
        "chart.png@a.test",
        "Content-Type: image/png; name=\"chart.png\"\r\nContent-Disposition: inline",
    )
    .replace("<p><img", "<p><img src=\"cid:chart.png@b.test\"><img");
    let f = found(&contested);
    assert_eq!(f.len(), 2, "{f:?}");
    assert!(
        f.iter()
            .all(|(_, r, fixable)| *r == "related-ref-mismatch" && !fixable),
        "{f:?}"
    );
    // Two parts could be meant: none is guessed.
    let two = related(
        "chart.png",
        "Content-Type: image/png; name=\"chart.png\"\r\n\r\nA\r\n--r\r\nContent-Type: image/png; name=\"chart.png\"",
    );
    assert_eq!(found(&two), one("1", "related-ref-mismatch", false));
    // Another reference finds the part by the id it has: it is not taken from it.
    let used = upper.replace("<p><img", "<p><img src=\"cid:IMAGE001.PNG@01D1B2C3\"><img");
    assert_eq!(found(&used), one("1", "related-ref-mismatch", false));
    // Nothing like it: still dangling.
    let none = related(
        "other@x.test",
        "Content-Type: image/png\r\nContent-Disposition: inline\r\nContent-ID: <logo@x.test>",
    );
    assert_eq!(found(&none), one("1", "related-ref-dangling", false));
}

/// The candidates that have a Content-ID of their own: a generated id beside a
/// reference by file name (Symfony Mailer), an id cut short (simple-java-mail #307).
/// Each is taken only while no reference names the id it has, and only for a msg-id.
#[test]
fn a_generated_or_cut_id_no_reference_names_is_replaced_by_a_msg_id() {
    // Symfony's Twig asset path as the reference: reported, never written.
    let symfony = related(
        "@images/email/logo.png",
        "Content-Type: image/png; name=\"@images/email/logo.png\"\r\nContent-Disposition: inline; filename=\"@images/email/logo.png\"\r\nContent-ID: <aa626acc7d7fff2efc324d6e4c732d02@symfony>",
    );
    assert_eq!(found(&symfony), one("1", "related-ref-mismatch", false));
    let a = check(symfony.as_bytes(), &Options::default());
    let m = &a.findings[0].message;
    assert!(
        m.contains("generated id") && m.contains("not a msg-id"),
        "{m}"
    );
    // The file name is the id's part before @, and the id is a msg-id: rewritten.
    let named = related(
        "logo@example.org",
        "Content-Type: image/png; name=\"logo\"\r\nContent-Disposition: inline; filename=\"logo\"\r\nContent-ID: <5f1c0e9a@symfony>",
    );
    assert_eq!(found(&named), one("1", "related-ref-mismatch", true));
    assert_eq!(
        fixed(&named),
        named.replace("<5f1c0e9a@symfony>", "<logo@example.org>")
    );
    // Another reference names the generated id: the part is no candidate, and the
    // reference dangles.
    let used = named.replace("<p><img", "<p><img src=\"cid:5f1c0e9a@symfony\"><img");
    assert_eq!(found(&used), one("1", "related-ref-dangling", false));
    // A converter cut the id at a dot; or the reference is the cut one.
    let cut = related(
        "image001.png@01D719B4.37AF4500",
        "Content-Type: image/png\r\nContent-Disposition: inline\r\nContent-ID: <image001.png@01D719B4>",
    );
    assert_eq!(found(&cut), one("1", "related-ref-mismatch", true));
    assert_eq!(
        fixed(&cut),
        cut.replace(
            "<image001.png@01D719B4>",
            "<image001.png@01D719B4.37AF4500>"
        )
    );
    let cut_ref = related(
        "image001.png@01D719B4",
        "Content-Type: image/png\r\nContent-Disposition: inline\r\nContent-ID: <image001.png@01D719B4.37AF4500>",
    );
    assert_eq!(found(&cut_ref), one("1", "related-ref-mismatch", true));
    // Shorter than 8 octets: a prefix by chance, not a cut.
    let short = related(
        "img@x.t",
        "Content-Type: image/png\r\nContent-Disposition: inline\r\nContent-ID: <img@x.test>",
    );
    assert_eq!(found(&short), one("1", "related-ref-dangling", false));
    // A reference that lost its dots (a phishing kit's copy of an Outlook id) is no
    // cut and no file name: it dangles, and is never repaired.
    let dots = related(
        "image003png@01D9C1A2.5B3E7F80",
        "Content-Type: image/png; name=\"image003.png\"\r\nContent-Disposition: inline; filename=\"image003.png\"\r\nContent-ID: <image003.png@01D9C1A2.5B3E7F80>",
    );
    assert_eq!(found(&dots), one("1", "related-ref-dangling", false));
}

#[test]
fn an_attachment_nothing_references_inside_related_is_reported() {
    let raw = related(
        "logo@x.test",
        "Content-Type: image/png\r\nContent-Disposition: inline\r\nContent-ID: <logo@x.test>",
    )
    .replace(
        "--r--",
        "--r\r\nContent-Type: application/pdf; name=\"invoice.pdf\"\r\nContent-Disposition: attachment; filename=\"invoice.pdf\"\r\n\r\nPDF\r\n--r--",
    );
    let a = check(raw.as_bytes(), &Options::default());
    assert_eq!(found(&raw), one("3", "related-attachment-hidden", false));
    assert!(a.findings[0].message.contains("invoice.pdf"));
    // An image nobody references is a picture the sender forgot, not an attachment.
    let img = raw.replace("application/pdf", "image/png").replace(
        "Content-Disposition: attachment; filename=\"invoice.pdf\"\r\n",
        "",
    );
    assert!(found(&img).is_empty());
    // A root that is not HTML references its parts in its own way.
    let sgml = raw
        .replace("type=\"text/html\"", "type=\"application/x-sgml\"")
        .replacen(
            "Content-Type: text/html",
            "Content-Type: application/x-sgml",
            1,
        );
    assert!(!found(&sgml)
        .iter()
        .any(|f| f.1 == "related-attachment-hidden"));
}

#[test]
fn a_remote_base_from_a_mime_header_is_reported_and_content_base_may_go() {
    let raw = "Content-Type: multipart/related; boundary=r; type=\"text/html\"\r\n\r\n--r\r\nContent-Type: text/html\r\nContent-Base: http://login.example.net/\r\n\r\n<a href=\"account/verify\">verify</a><img src=\"cid:a@x.test\">\r\n--r\r\nContent-Type: image/png\r\nContent-Disposition: inline\r\nContent-ID: <a@x.test>\r\n\r\nA\r\n--r--\r\n";
    assert_eq!(found(raw), one("1", "html-base-remote", true));
    let a = check(raw.as_bytes(), &Options::default());
    assert!(a.findings[0].message.contains("login.example.net"));
    assert_eq!(
        fixed(raw),
        raw.replace("Content-Base: http://login.example.net/\r\n", "")
    );
    // From a Content-Location: the part's name in the message, only reported.
    let loc = raw.replace("Content-Base:", "Content-Location:");
    assert_eq!(found(&loc), one("1", "html-base-remote", false));
    // Absolute links only, or a base that is the message itself: nothing.
    assert!(found(&raw.replace("account/verify", "https://x.test/")).is_empty());
    assert!(found(&raw.replace("Content-Base: http://login.example.net/\r\n", "")).is_empty());
    // A part found through the Content-Base keeps it: here the multipart/related's
    // Content-Base makes both the image's Content-Location and the reference absolute.
    let needed = raw
        .replace("cid:a@x.test", "logo.png")
        .replace("Content-ID: <a@x.test>", "Content-Location: logo.png")
        .replace("Content-Base: http://login.example.net/\r\n", "")
        .replacen(
            "\r\n\r\n",
            "\r\nContent-Base: http://login.example.net/\r\n\r\n",
            1,
        );
    assert_eq!(found(&needed), one("1", "html-base-remote", false));
    // Two Content-Base fields, or one above that would take its place: taking one out
    // would not end the remote base, so nothing is offered.
    let two = raw.replace(
        "Content-Base: http://login.example.net/\r\n",
        "Content-Base: http://login.example.net/\r\nContent-Base: http://other.example.net/\r\n",
    );
    assert_eq!(found(&two), one("1", "html-base-remote", false));
    let above = raw.replacen(
        "\r\n\r\n",
        "\r\nContent-Base: http://other.example.net/\r\n\r\n",
        1,
    );
    assert_eq!(found(&above), one("1", "html-base-remote", false));
    // A top-level Content-Base nothing else needs may go too (change_header).
    let top = raw
        .replace("Content-Base: http://login.example.net/\r\n", "")
        .replacen(
            "\r\n\r\n",
            "\r\nContent-Base: http://login.example.net/\r\n\r\n",
            1,
        );
    assert_eq!(found(&top), one("1", "html-base-remote", true));
    assert_eq!(
        fixed(&top),
        top.replace("Content-Base: http://login.example.net/\r\n", "")
    );
}

#[test]
fn repairs_are_withheld_under_a_dkim_signature() {
    let raw = format!(
        "DKIM-Signature: v=1; a=rsa-sha256; d=x.test; s=s; h=from:subject; bh=x; b=y\r\n{}",
        related(
            "logo@x.test",
            "Content-Type: image/png\r\nContent-Disposition: attachment\r\nContent-ID: <logo@x.test>",
        )
    );
    let a = check(raw.as_bytes(), &Options::default());
    let rules: Vec<(&str, bool)> = a
        .findings
        .iter()
        .map(|f| (f.rule.id(), f.fixable))
        .collect();
    assert_eq!(
        rules,
        [
            ("signed-content", false),
            ("related-part-disposition", false)
        ]
    );
    let opts = Options {
        fix_signed: crate::engine::FixSigned::Always,
        ..Options::default()
    };
    let (out, _) = fix(raw.as_bytes(), &opts).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        raw.replace("attachment", "inline")
    );
}

#[test]
fn repairs_that_depend_on_each_other_are_offered_in_one_pass() {
    // Bare ids in a multipart/mixed with no disposition: the ids are repaired, which
    // makes the images the HTML's, which makes the mixed related, which makes their
    // dispositions count. All in one pass, so that fixing again finds nothing.
    let raw = "Content-Type: multipart/mixed; boundary=m\r\n\r\n--m\r\nContent-Type: text/html\r\n\r\n<img src=\"cid:a@x.test\">\r\n--m\r\nContent-Type: image/png\r\nContent-ID: a@x.test\r\n\r\nA\r\n--m--\r\n";
    let mut f = found(raw);
    f.sort();
    assert_eq!(
        f,
        [
            ("1".to_string(), "cid-outside-related", true),
            ("2".to_string(), "content-id-malformed", true),
            ("2".to_string(), "related-part-disposition-missing", true),
        ]
    );
    let out = fixed(raw);
    assert!(
        out.contains("Content-ID: <a@x.test>\r\nContent-Disposition: inline\r\n"),
        "{out}"
    );
    assert!(out.starts_with("Content-Type: multipart/related; boundary=m; type=\"text/html\""));
}
