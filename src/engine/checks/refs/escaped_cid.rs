//! `cid-ref-escaped`: a `cid:` reference that names its part only once %-decoded, or
//! that holds white space.
//!
//! RFC 2392 §2 makes a `cid:` URL the Content-ID %-encoded, so `cid:a%40b` names
//! `<a@b>`, and readers that follow it decode (the `html` check resolves both forms).
//! Thunderbird compares the URL as written with the Content-ID and shows no image.
//! White space in the id (an HTML generator that wrapped a long attribute, a `%20`)
//! is in no Content-ID, so readers disagree on where it is dropped. Report only: the
//! HTML would have to change.

use crate::engine::model::analysis::{Context, Finding, Reference, Target};
use crate::engine::model::mime::Message;
use crate::engine::model::rules::Rule;
use crate::engine::syntax::ascii::clip;
use crate::engine::syntax::msgid::id_forms;

pub(super) fn check(cx: &mut Context) {
    let msg = cx.msg;
    let mut found = Vec::new();
    for r in &cx.refs {
        let Some((raw, decoded)) = &r.cid else {
            continue;
        };
        let blank = |s: &str| s.bytes().any(|b| b.is_ascii_whitespace());
        let message = if blank(raw) || (raw != decoded && blank(decoded)) {
            format!(
                "{} holds white space in its id: no Content-ID does, and readers differ on whether they drop it (Thunderbird compares the URL as written){}",
                r.describe(msg),
                resolved_note(msg, r)
            )
        } else if raw != decoded && !names_as_written(msg, r, raw) {
            let Target::ContentId { at, .. } = r.target else {
                continue;
            };
            format!(
                "{} names part {} only once %-decoded, as <{}> (RFC 2392 §2): Thunderbird compares the URL as written and shows no image there",
                r.describe(msg),
                msg.path(&msg.entities[at]),
                clip(decoded)
            )
        } else {
            continue;
        };
        found.push(Finding::new(
            Rule::CidRefEscaped,
            msg.path(&msg.entities[r.html]),
            message,
        ));
    }
    for f in found {
        cx.report(f);
    }
}

/// Whether the part reference `r` leads to has the id as written in the URL (RFC
/// 2392's own example, erratum 454), so that no decoding is needed to find it.
fn names_as_written(msg: &Message, r: &Reference, raw: &str) -> bool {
    let Target::ContentId { at, .. } = r.target else {
        return true;
    };
    let e = &msg.entities[at];
    msg.content_id(e)
        .and_then(|f| id_forms(msg.value(e, f)).exact)
        .is_some_and(|id| id == raw.as_bytes())
}

/// Where a reference with white space leads all the same, for the finding.
fn resolved_note(msg: &Message, r: &Reference) -> String {
    match r.part() {
        Some(at) => format!("; it leads to part {}", msg.path(&msg.entities[at])),
        None => String::new(),
    }
}
