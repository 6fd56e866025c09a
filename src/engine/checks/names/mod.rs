//! File names as readers show them (the catalogue's "Parts shown as the sender meant"):
//! a part's name given in a form some readers do not read, so that they show a made-up
//! one ("ATT00001.dat", "noname", "Untitled attachment"). The repair is the part's
//! heading alone:
//!
//! - `fields`: the Content-Type and Content-Disposition of a part as the repairs on
//!   offer leave them, and the rewrite of their parameters
//! - `eight_bit`: `part-name-8bit` (raw 8-bit octets in `name` or `filename`)
//! - `rfc2231_only`: `part-name-rfc2231-only` (the name only as `name*=`, `filename*=`)
//! - `one_field`: `part-name-one-field` (an attachment named in one field of two)
//! - `tests`: one message per shape, the parts left alone, the input no repair may
//!   guess
//!
//! The rules run in that order on each part, each judging the heading as the repairs
//! before it leave it, so that one `fix` leaves nothing to fix: the 8-bit repair
//! writes `filename*=utf-8''…` with its twin, which the other two find correct, and
//! what the last copies into the other field is in that form too. A defect an earlier
//! repair cures is not reported again by a later rule.
//!
//! Decisions where the catalogue is silent:
//!
//! - *Listed as an attachment* (`part-name-one-field` only; the other two rules look at
//!   every leaf and encapsulated message), as the inline rules read a part: no HTML
//!   reference loads it (an image the body shows is not listed), and it is marked
//!   `attachment`, or it is a leaf that is neither text nor an image marked `inline`
//!   or inside a multipart/related (a PDF that Apple Mail marks `inline` is still
//!   listed by every other reader). A `message/*` part counts only when marked
//!   `attachment` (unmarked, readers show it inline), and a signature or encrypted
//!   payload (the second part of multipart/signed, multipart/encrypted, S/MIME and
//!   PGP types) never: readers show a badge or the decrypted content instead.
//! - message/external-body and multiparts are never looked at: the `name` of an
//!   external body is its access-type's parameter (RFC 2046 §5.2.3), not a file name.
//! - An empty value names nothing. An RFC 2231 value that cannot be read for sure
//!   (a section missing or given twice, an unknown charset over 8-bit octets, octets
//!   the charset does not allow, 8-bit octets without a charset that are not UTF-8, a
//!   control character) is reported and never repaired: a twin would assert a name the
//!   sender may not have given. Sections out of order are read in order.
//! - A twin of printable ASCII that fits a line is written as it stands
//!   (`name="report.pdf"`), every reader reads that; other text as RFC 2047 words.
//! - A name longer than [`MAX_NAME`] octets is reported, not repaired: no file system
//!   keeps it, and a twin would only add kilobytes to the heading.
//! - `part-name-8bit` on an RFC 2231 form holding raw 8-bit octets is reported only;
//!   a raw 8-bit plain value beside an RFC 2231 form in the same field is replaced by
//!   the twin alone (a second `filename*` would make the value unreadable).
//! - `part-name-rfc2231-only` reports once per field it adds a twin to (each its own
//!   edit): Content-Type, and Content-Disposition where the part has one.
//! - `part-name-one-field` copies each sound form of the name (RFC 2231, re-encoded
//!   in UTF-8; the plain value as written), never raw 8-bit octets. Where the other
//!   field is a missing Content-Type nothing is inserted (a type would have to be
//!   made up); a missing Content-Disposition is inserted only under
//!   `Options::name_insert_disposition`. A name no repair can read (raw 8-bit octets
//!   that are not UTF-8, an unreadable RFC 2231 value) is not reported again by this
//!   rule: its own rule reports it, and there is nothing to copy.

mod eight_bit;
mod fields;
mod one_field;
mod rfc2231_only;

use std::collections::HashSet;

use crate::engine::model::analysis::Context;
use crate::engine::model::mime::{Entity, Field, Kind, Message};
use crate::engine::syntax::ascii::eq_lower;
use crate::engine::syntax::params::{is_token_byte, ContentType};

use fields::{NameField, Which};

/// Names longer than this many octets (of UTF-8) are reported, never repaired.
pub const MAX_NAME: usize = 1024;

/// A part's two naming fields, re-read after each repair.
struct Part {
    i: usize,
    ct: Option<NameField>,
    cd: Option<NameField>,
}

impl Part {
    fn get(&self, which: Which) -> Option<&NameField> {
        match which {
            Which::Type => self.ct.as_ref(),
            Which::Disposition => self.cd.as_ref(),
        }
    }

    /// Reads field `which` again, after a repair changed it.
    fn reread(&mut self, cx: &Context, which: Which) {
        let f = fields::read(cx, self.i, which);
        match which {
            Which::Type => self.ct = f,
            Which::Disposition => self.cd = f,
        }
    }
}

/// Runs the rules on every part that names a file, after the inline rules (whose
/// disposition repairs they compose with) and the `html` check (whose references tell
/// which parts the body shows).
pub fn check(cx: &mut Context) {
    let msg = cx.msg;
    let mut shown: Option<HashSet<usize>> = None;
    for (i, e) in msg.entities.iter().enumerate() {
        if !matches!(e.kind, Kind::Leaf | Kind::Message) {
            continue;
        }
        let rewritten = rewritten_before(cx, e);
        if !rewritten && !may_have_finding(cx, e) {
            continue;
        }
        if e.ctype.is_multipart() {
            continue;
        }
        let cd = fields::read(cx, i, Which::Disposition);
        let ct_named = rewritten
            || (e.ctype_field.is_some() && e.ctype.params.iter().any(|p| p.name == "name"));
        if !ct_named && !cd.as_ref().is_some_and(NameField::named) {
            continue;
        }
        let mut part = Part {
            i,
            ct: fields::read(cx, i, Which::Type),
            cd,
        };
        eight_bit::check(cx, &mut part);
        rfc2231_only::check(cx, &mut part);
        let shown = shown.get_or_insert_with(|| shown_parts(cx));
        let ct = part.ct.as_ref().map(|c| &c.params);
        if listed(msg, i, ct, part.cd.as_ref(), shown) {
            // Listed only as a repair retypes it (an encoded forward offered as a
            // file): the copy of its name is made only with that repair.
            let retype = match &part.ct {
                Some(c) if !listed(msg, i, None, part.cd.as_ref(), shown) => {
                    cx.edits.find(&c.range)
                }
                _ => None,
            };
            one_field::check(cx, &mut part, retype);
        }
    }
}

/// Whether a part could have a finding of these rules, read from the bytes without the
/// parameter parser, which allocates: most parts name no file, and most attachments
/// name it plainly in both fields (`name="x.pdf"`, `attachment; filename="x.pdf"`).
/// A 10 000-attachment message must not pay a parse a part for that.
#[inline]
fn may_have_finding(cx: &Context, e: &Entity) -> bool {
    let msg = cx.msg;
    if e.disposition_field.is_none() && e.ctype.params.is_empty() {
        return false; // no parameter, no disposition: most body parts
    }
    let ct_name = match e.ctype_field {
        Some(_) => type_name(&e.ctype),
        None => None,
    };
    let cd = e
        .disposition_field
        .and_then(|fi| msg.fields(e).get(fi as usize));
    let Some(cd) = cd else {
        return ct_name.is_some();
    };
    let v = msg.value(e, cd);
    let Some(name) = ct_name else {
        // A `filename` (or `name`) parameter, in any form, holds the letters.
        return v.windows(4).any(|w| eq_lower(w, b"name"));
    };
    match name {
        Some(name) => !(same_name(v, name) || plain_filename_first(v)),
        None => true,
    }
}

/// An earlier repair (an encoded forward offered as a file, an image retyped) rewrites
/// one of the two fields: they are read as it leaves them, whatever the bytes say.
fn rewritten_before(cx: &Context, e: &Entity) -> bool {
    if !cx.edits.rewrites_any() {
        return false;
    }
    let fields = cx.msg.fields(e);
    let pending = |fi: Option<usize>| {
        fi.and_then(|fi| fields.get(fi))
            .is_some_and(|f: &Field| cx.edits.pending(&f.value).is_some())
    };
    pending(e.ctype_field) || pending(e.disposition_field.map(|d| d as usize))
}

/// Whether a Content-Type names a file (`name`, any form): then, when it does so with
/// a plain value and no form holds an 8-bit octet, that value. One pass over the
/// parameters.
#[inline]
fn type_name(ct: &ContentType) -> Option<Option<&[u8]>> {
    let mut found = None;
    let mut sound = true;
    for p in ct.params.iter().filter(|p| p.name.as_bytes() == b"name") {
        sound &= ascii(&p.value);
        let plain = p.section.is_none() && !p.extended && !p.value.is_empty();
        match found {
            Some(Some(_)) => {}
            _ => found = Some(plain.then_some(p.value.as_slice())),
        }
    }
    found.map(|v| v.filter(|_| sound))
}

/// `v.is_ascii()`, in two overlapping words for the 8 to 16 octets of most file names
/// rather than a word and an octet at a time.
#[inline]
fn ascii(v: &[u8]) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let word = |w: &[u8]| <[u8; 8]>::try_from(w).map_or(0, u64::from_le_bytes);
    match v.len() {
        8..=16 => (word(&v[..8]) | word(&v[v.len() - 8..])) & HIGH == 0,
        _ => v.is_ascii(),
    }
}

/// Whether a Content-Disposition value is exactly ` attachment; filename="NAME"`, with
/// `name` (the Content-Type's plain `name`, ASCII) for NAME, as most senders write an
/// attachment's two fields: three word comparisons and one of NAME, not a reading
/// octet by octet.
#[inline]
fn same_name(v: &[u8], name: &[u8]) -> bool {
    let n = name.len();
    let end = HEAD.len() + n;
    v.len() == end + 1
        && n > 0
        && !matches!(name[0], b'"' | b'\r' | b'\n')
        && v[end] == b'"'
        // A quoted-pair there could hide the closing quote.
        && v[end - 1] != b'\\'
        && head_is(v)
        && &v[HEAD.len()..end] == name
}

/// What [`same_name`] looks for before NAME: 23 octets, read as words at 0, 8 and 15.
const HEAD: &[u8; 23] = b" attachment; filename=\"";
const HEAD_AT: [usize; 3] = [0, 8, 15];

/// Bit 0x20 at each letter of the word of `HEAD` at `at`: setting it on both sides
/// compares the letters without case (only a capital and its small letter differ
/// there) and every other octet exactly.
const fn head_word(at: usize, mask_only: bool) -> u64 {
    let mut w = 0u64;
    let mut k = 0;
    while k < 8 {
        let b = HEAD[at + k];
        let bit = if b.is_ascii_lowercase() { 0x20 } else { 0 };
        w |= (if mask_only { bit } else { b } as u64) << (8 * k);
        k += 1;
    }
    w
}

const HEAD_WORDS: [(u64, u64); 3] = [
    (head_word(0, false), head_word(0, true)),
    (head_word(8, false), head_word(8, true)),
    (head_word(15, false), head_word(15, true)),
];

fn head_is(v: &[u8]) -> bool {
    HEAD_AT.iter().zip(HEAD_WORDS).all(|(&at, (want, case))| {
        v.get(at..at + 8)
            .and_then(|w| <[u8; 8]>::try_from(w).ok())
            .is_some_and(|w| u64::from_le_bytes(w) | case == want)
    })
}

/// Whether a Content-Disposition value gives, all in ASCII, a plain `filename` with a
/// value as its first parameter (`attachment; filename="x.pdf"`): then the parser
/// would read that parameter too. Any other shape answers no. Read in a few fixed
/// comparisons rather than octet by octet: the value is read for every attachment.
fn plain_filename_first(v: &[u8]) -> bool {
    if !v.is_ascii() {
        return false;
    }
    let ws = |mut i: usize| {
        while i < v.len() && matches!(v[i], b' ' | b'\t' | b'\r' | b'\n') {
            i += 1;
        }
        i
    };
    // The disposition type and its `;`, the common ones compared whole.
    let mut i = if v.len() > 12 && eq_lower(&v[1..12], b"attachment;") && v[0] == b' ' {
        12
    } else {
        let start = ws(0);
        let mut end = start;
        while end < v.len() && is_token_byte(v[end]) {
            end += 1;
        }
        let semi = ws(end);
        if end == start || v.get(semi) != Some(&b';') {
            return false;
        }
        semi + 1
    };
    i = ws(i);
    if !v.get(i..i + 8).is_some_and(|n| eq_lower(n, b"filename")) {
        return false;
    }
    i = ws(i + 8);
    if v.get(i) != Some(&b'=') {
        return false;
    }
    i = ws(i + 1);
    match v.get(i..) {
        // A quoted value that does not start empty, closed by the value's last octet
        // (or an earlier quote) with no quoted-pair that could hide it: the parser
        // reads it.
        Some([b'"', first, .., before, b'"']) => {
            !matches!(first, b'"' | b'\r' | b'\n') && *before != b'\\'
        }
        // Unquoted: the parser takes it up to white space, `;`, `"` or `(`.
        Some([b, ..]) => *b > b' ' && *b != 0x7f && !matches!(b, b';' | b'"' | b'('),
        _ => false,
    }
}

/// The parts an HTML reference loads into the body (an image, a background).
fn shown_parts(cx: &Context) -> HashSet<usize> {
    cx.refs
        .iter()
        .filter(|r| r.loads())
        .filter_map(|r| r.part())
        .collect()
}

/// Whether readers list part `i` as an attachment (see the module doc), typed `ct` as
/// the repairs on offer leave it: an encoded forward offered as
/// `application/octet-stream` is listed under any disposition but `inline`, so the
/// copy of its name is judged in the same pass as its retype.
fn listed(
    msg: &Message,
    i: usize,
    ct: Option<&ContentType>,
    cd: Option<&NameField>,
    shown: &HashSet<usize>,
) -> bool {
    if shown.contains(&i) {
        return false;
    }
    let kind = cd.map_or("", |d| d.kind.as_str());
    if kind == "attachment" {
        return true;
    }
    let e = &msg.entities[i];
    let t = ct.unwrap_or(&e.ctype);
    let parent = e.parent.map(|p| &msg.entities[p].ctype);
    // A signature or an encrypted payload: readers show a badge or the decrypted
    // content, never the part.
    let secured = parent.is_some_and(|p| {
        p.is("multipart", "encrypted")
            || (p.is("multipart", "signed")
                && msg.children(&msg.entities[e.parent.unwrap_or(0)]).first() != Some(&i))
    }) || matches!(
        (t.mtype.as_ref(), t.subtype.as_ref()),
        (
            "application",
            "pkcs7-signature"
                | "x-pkcs7-signature"
                | "pkcs7-mime"
                | "x-pkcs7-mime"
                | "pgp-signature"
                | "pgp-encrypted"
        )
    );
    if secured || t.mtype == "text" || t.mtype == "message" {
        return false;
    }
    let in_related = parent.is_some_and(|p| p.is("multipart", "related"));
    !(t.mtype == "image" && (kind == "inline" || in_related))
}

/// The text of a value for a finding: lossy UTF-8, controls escaped, clipped.
fn show(v: &[u8]) -> String {
    crate::engine::syntax::ascii::excerpt(v)
}

#[cfg(test)]
mod tests;
