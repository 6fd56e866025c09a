//! `ref-unreachable`: an image or style sheet that the HTML loads from somewhere only
//! the sender's machine knows.
//!
//! A composer that keeps its own URL for an image it has not embedded sends that URL:
//! a pasted image as WebKit's `webkit-fake-url:` placeholder (Apple Mail, Safari; the
//! form trix issue #47 and WebKit bug 49141 describe) or as a `blob:` of the composer's
//! page (iOS pastes images as blob URLs, WebKit pull request 60112; a blob's URL holds
//! its page's origin, `applewebdata:` in Apple's mail views, whose links surface as
//! `applewebdata://…` in O365-iOS-Connect issue #5); Word and Outlook paste images
//! from Office's clipboard folder as `file:///…/msohtmlclip1/…`; Thunderbird forwards
//! and replies that lost an image keep its mailbox URL (`imap://…/fetch>UID>…?part=…`,
//! php-imap issue #179; `mailbox:///…?number=…&part=…` for local folders). No
//! recipient loads any of them, nor a loopback or `.local` host. Report only: the
//! repair would change the HTML. The finding names the composer where the URL's form
//! shows it.
//!
//! Links (`<a href>`) are not judged: a link to a local file is a poor link, but
//! nothing is shown broken.

use crate::engine::model::analysis::{Context, Finding};
use crate::engine::model::rules::Rule;
use crate::engine::syntax::ascii::clip;
use crate::engine::syntax::unreachable::{unreachable, Unreachable};

use super::loads_image_or_style;

pub(super) fn check(cx: &mut Context) {
    let msg = cx.msg;
    let mut found = Vec::new();
    for part in &cx.html_parts {
        for o in &part.outside {
            if !loads_image_or_style(&o.place) {
                continue;
            }
            let Some(why) = unreachable(&o.url) else {
                continue;
            };
            let mut message = format!(
                "{} \"{}\" names {}, which no recipient can load: readers show a broken image or no style there",
                o.place,
                clip(&o.url),
                what(&why)
            );
            if let Some(c) = composer(&o.url, &why) {
                message.push_str(&format!("; its form is that of {c}"));
            }
            found.push(Finding::new(
                Rule::RefUnreachable,
                msg.path(&msg.entities[part.idx]),
                message,
            ));
        }
    }
    for f in found {
        cx.report(f);
    }
}

/// What the URL names, for the finding.
fn what(why: &Unreachable) -> String {
    match why {
        Unreachable::Host(h) => format!(
            "the host {} (the reader's own machine or local network)",
            clip(h)
        ),
        Unreachable::Scheme(s) => match s.as_str() {
            "blob" => "a blob in the memory of the program that wrote it".into(),
            "file" => "a file on the sender's disk".into(),
            "imap" | "imaps" | "mailbox" => "a message part in the sender's own mailbox".into(),
            "webkit-fake-url" => "WebKit's placeholder for a pasted image".into(),
            "applewebdata" => "a resource of Apple's mail view on the sender's device".into(),
            "about" => "a page of the sender's browser".into(),
            s if s.starts_with("x-") => format!("the private scheme {}:", clip(s)),
            s => format!("a resource of the sending program ({}:)", clip(s)),
        },
    }
}

/// The composer whose form `url` has, when it shows one.
fn composer(url: &str, why: &Unreachable) -> Option<&'static str> {
    let Unreachable::Scheme(scheme) = why else {
        return None;
    };
    let lower = url.to_ascii_lowercase();
    match scheme.as_str() {
        "blob" if lower.contains("applewebdata") => Some("Apple Mail or iOS Mail"),
        "blob"
            if [
                "outlook.office.com",
                "outlook.office365.com",
                "outlook.live.com",
            ]
            .iter()
            .any(|h| lower.contains(h)) =>
        {
            Some("Outlook on the web")
        }
        "blob" if lower.contains("mail.google.com") => Some("Gmail"),
        "file" if lower.contains("/msohtmlclip") => Some("a paste from Word or Outlook"),
        "imap" | "imaps" | "mailbox" => Some("a Thunderbird forward or reply"),
        "webkit-fake-url" => Some("a paste into Apple Mail or Safari"),
        "applewebdata" => Some("Apple Mail or iOS Mail"),
        "x-apple-data-detectors" => Some("Apple Mail's data detectors"),
        _ => None,
    }
}
