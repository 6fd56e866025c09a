//! `ref-image-type`: a part that the HTML shows as an image, typed as something else.
//!
//! Send APIs and mail libraries that take an attachment's type from a default rather
//! than from the file write `application/octet-stream` on an inline PNG (Swift Mailer
//! users, SendGrid and Mailgun API calls without a type); converters copy one image
//! type onto every image (a GIF typed `image/png`). Thunderbird lists such a part as an
//! attachment and shows a broken image in its place, Apple Mail lists it. Which image
//! it is shows in its first octets, its signature (`syntax::image_signature`), read
//! from the decoded body.
//!
//! Repair: the media type the signature names, every parameter kept; only for the
//! formats readers show inline (PNG, JPEG, GIF, WebP, BMP, ICO), never SVG (it can
//! carry scripts), and only when no file name the part gives has an extension that
//! says otherwise (`report.pdf` on PNG octets may be a PDF that a sender mislabels, or
//! a lure: the name a reader shows would then contradict the type).

use std::collections::BTreeMap;

use crate::engine::model::analysis::{Context, Finding};
use crate::engine::model::mime::{Kind, Message};
use crate::engine::model::rules::Rule;
use crate::engine::syntax::ascii::excerpt;
use crate::engine::syntax::decode::transfer_decode_head;
use crate::engine::syntax::image_signature::{may_be_markup, sniff, Image, HEAD, SIGNATURE};
use crate::engine::syntax::params::{essence_span, ContentType, Disposition};

use super::shows_image;

pub(super) fn check(cx: &mut Context) {
    // Part -> the first reference that shows it as an image, in document order of the
    // parts, so that a part shown twice is judged once.
    let mut shown: BTreeMap<usize, usize> = BTreeMap::new();
    for (n, r) in cx.refs.iter().enumerate() {
        if shows_image(&r.place) {
            if let Some(at) = r.part() {
                shown.entry(at).or_insert(n);
            }
        }
    }
    for (at, n) in shown {
        check_part(cx, at, n);
    }
}

/// What part `at`'s type and content say, when they disagree: the format its content
/// has, if known.
enum Wrong {
    NotImage(Option<Image>),
    OtherImage(Image),
}

fn check_part(cx: &mut Context, at: usize, n: usize) {
    let msg = cx.msg;
    let e = &msg.entities[at];
    if !matches!(e.kind, Kind::Leaf) || at == cx.refs[n].html {
        return;
    }
    // The fixed signatures first; the rest of a document's start only when it may be
    // markup (an SVG's `<svg` can come after a declaration and comments).
    let mut head = [0u8; HEAD];
    let mut got = transfer_decode_head(msg.body(e), e.encoding, &mut head[..SIGNATURE]);
    if got == SIGNATURE && may_be_markup(&head[..got]) {
        got = transfer_decode_head(msg.body(e), e.encoding, &mut head);
    }
    let sig = sniff(&head[..got]);
    // A CSS `url()` also imports style sheets and loads fonts: through one, only a part
    // whose content is an image is an image.
    let css = cx.refs[n].place == "style" || cx.refs[n].place.ends_with("@style");
    let wrong = match (e.ctype.mtype == "image", sig) {
        (false, None) if css => return,
        (false, sig) => Wrong::NotImage(sig),
        (true, Some(k)) if !k.has_subtype(&e.ctype.subtype) => Wrong::OtherImage(k),
        (true, _) => return,
    };
    let r = &cx.refs[n];
    let mut f = match wrong {
        Wrong::NotImage(sig) => Finding::new(
            Rule::RefImageType,
            msg.path(e),
            format!(
                "{} is shown as an image by {}{}: Thunderbird lists it and shows a broken image, Apple Mail lists it",
                e.ctype.essence(),
                r.describe(msg),
                match sig {
                    Some(k) => format!(", and its content is {} image", k.a_name()),
                    None => ", and its content is no image format that readers show inline".into(),
                }
            ),
        ),
        Wrong::OtherImage(k) => Finding::new(
            Rule::RefImageType,
            msg.path(e),
            format!(
                "{} is shown by {}, but its content is {} image: readers that trust the type show a broken image",
                e.ctype.essence(),
                r.describe(msg),
                k.a_name()
            ),
        ),
    };
    let Some(k) = sig else {
        cx.report(f);
        return;
    };
    match repair(cx, at, k) {
        Ok((edit, to)) => {
            f.message
                .push_str(&format!("; fix: Content-Type {to}, keeping its parameters"));
            f = f.with_edit(edit);
            cx.retyped.insert(at, (to, edit));
        }
        Err(why) => {
            f.message.push_str("; not retyped: ");
            f.message.push_str(&why);
        }
    }
    cx.report(f);
}

/// Offers part `at`'s Content-Type with the media type of format `k`, every parameter
/// kept: the edit and the type written, or why not.
fn repair(cx: &mut Context, at: usize, k: Image) -> Result<(usize, &'static str), String> {
    let msg = cx.msg;
    let e = &msg.entities[at];
    let Some(to) = k.media_type() else {
        return Err("SVG can carry scripts, and no repair announces it as an image".into());
    };
    if let Some(name) = contradicting_name(msg, at, k) {
        return Err(format!(
            "its file name \"{}\" says it is something else",
            excerpt(name.as_bytes())
        ));
    }
    let mut fields = msg.fields_named(e, "content-type");
    let (Some((fi, field)), None) = (fields.next(), fields.next()) else {
        return Err("it has no Content-Type field, or more than one".into());
    };
    if !e.editable() {
        return Err("the part lies inside an encoded message".into());
    }
    let value = cx.current_value(e, field).to_vec();
    let span = essence_span(&value)
        .filter(|_| !ContentType::parse(&value).mtype.is_empty())
        .ok_or("its Content-Type cannot be read")?;
    let mut new = value[..span.start].to_vec();
    new.extend_from_slice(to.as_bytes());
    new.extend_from_slice(&value[span.end..]);
    let loc = msg.field_loc(e, fi);
    Ok((
        cx.edits
            .rewrite(field.value.clone(), loc, new, Rule::RefImageType),
        to,
    ))
}

/// The first file name of part `at` (Content-Disposition `filename`, Content-Type
/// `name`) whose extension is not one of format `k`'s. A name without an extension
/// says nothing.
fn contradicting_name(msg: &Message, at: usize, k: Image) -> Option<String> {
    let e = &msg.entities[at];
    let disposition = msg
        .field(e, "content-disposition")
        .and_then(|f| Disposition::parse(msg.value(e, f)).filename());
    [disposition, e.ctype.get_str("name")]
        .into_iter()
        .flatten()
        .find(|name| extension(name).is_some_and(|ext| !k.has_extension(ext)))
}

/// The extension of file name `name`: what follows its last dot, when that is 1 to 10
/// letters and digits.
fn extension(name: &str) -> Option<&str> {
    let (_, ext) = name.trim_end().rsplit_once('.')?;
    (!ext.is_empty() && ext.len() <= 10 && ext.bytes().all(|b| b.is_ascii_alphanumeric()))
        .then_some(ext)
}
