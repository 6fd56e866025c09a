//! One message per shape of the references that reach people wrong or not at all, with
//! the cases where no repair may be made.

use crate::engine::{check, fix, Options, Rule};

/// (part, rule id, fixable) of every finding of this folder's rules and of the inline
/// rules the type repair affects.
fn found(raw: &str) -> Vec<(String, &'static str, bool)> {
    check(raw.as_bytes(), &Options::default())
        .findings
        .into_iter()
        .filter(|f| {
            matches!(
                f.rule,
                Rule::RefImageType
                    | Rule::RefUnreachable
                    | Rule::RefDataUri
                    | Rule::CidRefEscaped
                    | Rule::RelatedPartDisposition
                    | Rule::RelatedPartDispositionMissing
                    | Rule::RelatedRefDangling
            )
        })
        .map(|f| (f.part, f.rule.id(), f.fixable))
        .collect()
}

fn messages(raw: &str, rule: Rule) -> Vec<String> {
    check(raw.as_bytes(), &Options::default())
        .findings
        .into_iter()
        .filter(|f| f.rule == rule)
        .map(|f| f.message)
        .collect()
}

fn one(part: &str, rule: &'static str, fixable: bool) -> (String, &'static str, bool) {
    (part.to_string(), rule, fixable)
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

/// multipart/related: the HTML (part 1) is `{HTML}`; part 2 has heading `{IMG}` and
/// base64 body `{BODY}`.
const RELATED: &str = "Content-Type: multipart/related; boundary=r; type=\"text/html\"\n\n--r\nContent-Type: text/html\n\n{HTML}\n--r\n{IMG}\nContent-Transfer-Encoding: base64\n\n{BODY}\n--r--\n";

/// A 1×1 PNG, a 1×1 GIF and an SVG, base64.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
const GIF: &str = "R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw==";
const SVG: &str = "PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciLz4=";

fn related(html: &str, img: &str, body: &str) -> String {
    RELATED
        .replace("{HTML}", html)
        .replace("{IMG}", img)
        .replace("{BODY}", body)
}

const IMG: &str = "<img src=\"cid:logo@x.test\">";

#[test]
fn an_octet_stream_png_becomes_an_inline_png_in_one_pass() {
    // A send API's default type, no disposition: once a PNG, the part also needs its
    // disposition, and both are offered in the same pass.
    let raw = related(
        IMG,
        "Content-Type: application/octet-stream; name=\"logo.png\"\nContent-ID: <logo@x.test>",
        PNG,
    );
    assert_eq!(
        found(&raw),
        [
            one("2", "ref-image-type", true),
            one("2", "related-part-disposition-missing", true)
        ]
    );
    assert_eq!(
        fixed(&raw),
        raw.replace(
            "application/octet-stream; name=\"logo.png\"\n",
            "image/png; name=\"logo.png\"\nContent-Disposition: inline\n"
        )
    );
    // The disposition is made with the type or not at all: an octet stream marked
    // inline is no repair any reader was rated on.
    let a = check(raw.as_bytes(), &Options::default());
    assert!(a
        .edits_for(|f| f.rule == Rule::RelatedPartDispositionMissing)
        .is_empty());
    // The type alone, when only it is asked for: the disposition is its own rule's,
    // and the admin's policy for it decides.
    let only_type = crate::engine::apply(
        raw.as_bytes(),
        a.edits_for(|f| f.rule == Rule::RefImageType),
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(only_type).unwrap(),
        raw.replace("application/octet-stream;", "image/png;")
    );
    let m = &messages(&raw, Rule::RefImageType)[0];
    assert!(
        m.contains("a PNG image") && m.contains("fix: Content-Type image/png"),
        "{m}"
    );
    // Shown by a background, a CSS url() or an image button alike.
    for html in [
        "<td background=\"cid:logo@x.test\">x</td>",
        "<div style=\"background-image: url('cid:logo@x.test')\">x</div>",
        "<style>p { background: url(cid:logo@x.test) }</style>",
        "<input type=\"image\" src=\"cid:logo@x.test\">",
    ] {
        let raw = raw.replace(IMG, html);
        assert_eq!(found(&raw)[0], one("2", "ref-image-type", true), "{html}");
    }
    // A style sheet or a font that a CSS url() loads is no image, a PNG there is one.
    let font = related(
        "<style>@font-face { src: url(cid:logo@x.test) }</style>",
        "Content-Type: application/octet-stream\nContent-ID: <logo@x.test>",
        "d09GMgABAAAAAAKsAAsAAAAABlQAAAJg",
    );
    assert!(found(&font).is_empty(), "{:?}", found(&font));
    // A link to it does not show it: nothing to say.
    let link = raw.replace(IMG, "<a href=\"cid:logo@x.test\">logo</a>");
    assert!(found(&link).is_empty(), "{:?}", found(&link));
}

#[test]
fn an_image_typed_as_another_takes_its_content_type() {
    // A GIF typed image/png (a converter that types every image alike).
    let raw = related(
        IMG,
        "Content-Type: image/png\nContent-Disposition: inline\nContent-ID: <logo@x.test>",
        GIF,
    );
    assert_eq!(found(&raw), [one("2", "ref-image-type", true)]);
    assert_eq!(
        fixed(&raw),
        raw.replace("Content-Type: image/png\n", "Content-Type: image/gif\n")
    );
    // A type that is one of the format's names is no contradiction.
    let jpg_alias = raw.replace("image/png", "image/GIF");
    assert!(found(&jpg_alias).is_empty());
    // Content the engine cannot name, typed as an image: nothing to say.
    let unknown = related(
        IMG,
        "Content-Type: image/png\nContent-Disposition: inline\nContent-ID: <logo@x.test>",
        "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
    );
    assert!(found(&unknown).is_empty());
}

#[test]
fn svg_and_a_contradicting_name_are_reported_but_not_retyped() {
    let svg = related(
        IMG,
        "Content-Type: application/octet-stream\nContent-Disposition: inline\nContent-ID: <logo@x.test>",
        SVG,
    );
    assert_eq!(found(&svg), [one("2", "ref-image-type", false)]);
    assert!(messages(&svg, Rule::RefImageType)[0].contains("SVG can carry scripts"));
    let pdf = related(
        IMG,
        "Content-Type: application/octet-stream; name=\"invoice.pdf\"\nContent-Disposition: inline; filename=\"invoice.pdf\"\nContent-ID: <logo@x.test>",
        PNG,
    );
    assert_eq!(found(&pdf), [one("2", "ref-image-type", false)]);
    assert!(messages(&pdf, Rule::RefImageType)[0].contains("invoice.pdf"));
    // A name without an extension says nothing against the content.
    let bare = pdf.replace("invoice.pdf", "logo");
    assert_eq!(found(&bare), [one("2", "ref-image-type", true)]);
}

#[test]
fn short_or_broken_bodies_are_no_image() {
    // A PNG signature cut to three octets, and garbage base64: reported as no image the
    // engine knows, never retyped, never a panic.
    for body in ["iVBO", "!!!!####", "", "iVBORw0KGgo"] {
        let raw = related(
            IMG,
            "Content-Type: application/octet-stream\nContent-Disposition: inline\nContent-ID: <logo@x.test>",
            body,
        );
        let f = found(&raw);
        let want = if body == "iVBORw0KGgo" {
            one("2", "ref-image-type", true)
        } else {
            one("2", "ref-image-type", false)
        };
        assert_eq!(f, [want], "{body}");
        let (out, _) = fix(raw.as_bytes(), &Options::default()).unwrap();
        assert!(out.ends_with(format!("{body}\n--r--\n").as_bytes()));
    }
}

/// (place of the first reference) for the `ref-unreachable` findings of an HTML part.
fn unreachable(html: &str) -> Vec<String> {
    let raw = format!("Content-Type: text/html\n\n{html}\n");
    messages(&raw, Rule::RefUnreachable)
}

#[test]
fn references_only_the_sender_can_load_name_their_composer() {
    for (html, composer) in [
        (
            "<img src=\"blob:applewebdata://2F4C7A1B-1B0E-4D5C/9E7D\">",
            Some("Apple Mail or iOS Mail"),
        ),
        (
            "<img src=\"blob:https://outlook.office.com/6c1f0d2e-8d7a\">",
            Some("Outlook on the web"),
        ),
        (
            "<img width=\"64\" src=\"file:///C:/Users/ann/AppData/Local/Temp/msohtmlclip1/01/clip_image002.png\">",
            Some("Word or Outlook"),
        ),
        (
            "<img src=\"imap://ann%40example.org@imap.example.org:143/fetch%3EUID%3E.INBOX%3E35?part=1.1.2&amp;filename=image001.jpg\">",
            Some("Thunderbird"),
        ),
        (
            "<img src=\"mailbox:///home/ann/.thunderbird/Mail/Local%20Folders/Inbox?number=12&amp;part=1.2&amp;filename=logo.png\">",
            Some("Thunderbird"),
        ),
        ("<img src=\"webkit-fake-url://5B9E2C31/image.png\">", Some("Apple Mail or Safari")),
        ("<link rel=\"stylesheet\" href=\"http://localhost:8080/mail.css\">", None),
        ("<p style=\"background:url(http://127.0.0.1/bg.png)\">x</p>", None),
        ("<img src=\"https://nas.local/photo.jpg\">", None),
        ("<img src=\"file:///Users/ann/Desktop/sig.png\">", None),
    ] {
        let got = unreachable(html);
        assert_eq!(got.len(), 1, "{html}: {got:?}");
        match composer {
            Some(c) => assert!(got[0].contains(c), "{html}: {}", got[0]),
            None => assert!(!got[0].contains("its form"), "{html}: {}", got[0]),
        }
    }
    // Links are not loaded; about:blank and the network are reachable.
    for html in [
        "<a href=\"file:///C:/share/report.pdf\">report</a>",
        "<img src=\"about:blank\">",
        "<img src=\"https://cdn.example.org/logo.png\">",
        "<img src=\"logo.png\">",
    ] {
        assert!(unreachable(html).is_empty(), "{html}");
    }
    // A file: URL that names a part (a page saved as MHTML) is in the message.
    let mhtml = "Content-Type: multipart/related; boundary=r; type=\"text/html\"\n\n--r\nContent-Type: text/html\nContent-Location: file:///C:/site/index.html\n\n<img src=\"file:///C:/site/a.png\"><img src=\"file:///C:/site/b.png\">\n--r\nContent-Type: image/png\nContent-Location: file:///C:/site/a.png\n\nPNG\n--r--\n";
    let got = messages(mhtml, Rule::RefUnreachable);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].contains("b.png"), "{}", got[0]);
    // The same URL as a link first, then as an image: the image counts, once.
    let twice = "<a href=\"file:///tmp/a.png\">a</a><img src=\"file:///tmp/a.png\"><img src=\"file:///tmp/a.png\">";
    let got = unreachable(twice);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].starts_with("img@src"), "{}", got[0]);
}

#[test]
fn data_images_are_one_finding_per_part() {
    let raw = "Content-Type: text/html\n\n<img src=\"data:image/png;base64,iVBORw0KGgo=\"><img src=\"DATA:image/gif;base64,R0lGODlh\"><a href=\"data:text/plain,x\">x</a>\n";
    assert_eq!(found(raw), [one("0", "ref-data-uri", false)]);
    let m = &messages(raw, Rule::RefDataUri)[0];
    assert!(m.contains("and one more carry"), "{m}");
    let css = "Content-Type: text/html\n\n<p style=\"background:url(data:image/png;base64,iVBO)\">x</p>\n";
    assert!(found(css).is_empty());
}

#[test]
fn cid_references_found_only_decoded_or_with_white_space_are_reported() {
    let shape = |reference: &str, id: &str| {
        related(
            &format!("<img src=\"cid:{reference}\">"),
            &format!("Content-Type: image/png\nContent-Disposition: inline\nContent-ID: <{id}>"),
            PNG,
        )
    };
    let escaped = shape("logo%40x.test", "logo@x.test");
    assert_eq!(found(&escaped), [one("1", "cid-ref-escaped", false)]);
    assert!(messages(&escaped, Rule::CidRefEscaped)[0].contains("only once %-decoded"));
    // Written as the id is (RFC 2392's own example): found as it stands.
    assert!(found(&shape("foo4%25foo1@bar.net", "foo4%25foo1@bar.net")).is_empty());
    assert!(found(&shape("logo@x.test", "logo@x.test")).is_empty());
    // A wrapped attribute: white space in the id, which matches nothing.
    let wrapped = shape("logo@x\n.test", "logo@x.test");
    let f = found(&wrapped);
    assert!(f.contains(&one("1", "cid-ref-escaped", false)), "{f:?}");
    assert!(
        f.contains(&one("1", "related-ref-dangling", false)),
        "{f:?}"
    );
    let spaced = shape("logo%20@x.test", "logo@x.test");
    assert!(found(&spaced).contains(&one("1", "cid-ref-escaped", false)));
}
