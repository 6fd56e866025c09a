//! The disposition of a part that the HTML shows: `related-part-disposition` and
//! `related-part-disposition-missing`.
//!
//! A part that an HTML body inside multipart/related loads (an image, a background, a
//! style sheet) is part of the body, and `Content-Disposition: inline` says so (RFC
//! 2183 §2.1). Send APIs that default to `attachment` (SendGrid, Postmark, nodemailer
//! users) make readers that follow the disposition list it as an attachment, and some
//! show it a second time below the body. Outlook and IBM Notes write no disposition,
//! and Thunderbird for Android hides an image from the attachment list only when it is
//! explicitly `inline`, has a Content-ID and an `image/*` type.
//!
//! Only references that every reader resolves count (a Content-ID read strictly, inside
//! the same or an enclosing multipart/related, or a Content-Location there): a part that
//! only a lenient reader finds is `content-id-malformed` or `related-ref-mismatch`
//! first. Links (`<a href>`) do not count: a linked attachment is meant as one.

use std::collections::BTreeMap;

use crate::engine::model::analysis::{Context, Finding, Reference, Target};
use crate::engine::model::mime::Message;
use crate::engine::model::rules::Rule;
use crate::engine::syntax::params::Disposition;

use super::{insert_field, Repaired};

/// The part a reference shows in the body of a multipart/related, if it shows one, once
/// the repairs on offer (`after`) are made: a Content-ID repaired, a multipart/mixed made
/// related.
fn shown_part(msg: &Message, r: &Reference, after: &Repaired) -> Option<usize> {
    if !r.loads() {
        return None;
    }
    match r.target {
        Target::CidLocation(at) | Target::Location(at) => Some(at),
        _ => match after.target(r)? {
            (at, true) => Some(at),
            (at, false) => msg.entities[at]
                .parent
                .filter(|p| after.related.contains(p))
                .map(|_| at),
        },
    }
}

pub(super) fn check(cx: &mut Context, after: &Repaired) {
    let msg = cx.msg;
    // Part -> the first reference that shows it, in document order of the parts.
    let mut shown: BTreeMap<usize, usize> = BTreeMap::new();
    for (n, r) in cx.refs.iter().enumerate() {
        if let Some(at) = shown_part(msg, r, after) {
            shown.entry(at).or_insert(n);
        }
    }
    for (at, n) in shown {
        check_part(cx, at, n);
    }
}

fn check_part(cx: &mut Context, at: usize, n: usize) {
    let msg = cx.msg;
    let e = &msg.entities[at];
    let r = &cx.refs[n];
    // Made only for a finding: most parts shown by a reference have none.
    let by = || r.describe(msg);
    let fields: Vec<usize> = msg
        .fields_named(e, "content-disposition")
        .map(|(i, _)| i)
        .collect();
    // An image typed as something else is an image once `ref-image-type`'s repair is
    // made: judged as that repair leaves it, so that one fix leaves nothing to fix.
    let retyped = cx.retyped.get(&at).copied();
    let essence = || retyped.map_or_else(|| e.ctype.essence(), |(t, _)| t.to_string());
    let Some(&fi) = fields.first() else {
        if retyped.is_none() && e.ctype.mtype != "image" {
            return;
        }
        let mut f = Finding::new(
            Rule::RelatedPartDispositionMissing,
            msg.path(e),
            format!(
                "{} is shown by {} but has no Content-Disposition: readers that hide only images marked inline from the attachment list (Thunderbird for Android) list it as an attachment (RFC 2183 §2.1)",
                essence(),
                by()
            ),
        );
        let edit = match retyped {
            Some((_, retype)) => with_retype(cx, at, retype),
            None => insert_field(
                cx,
                at,
                "Content-Disposition",
                "inline",
                Rule::RelatedPartDispositionMissing,
            ),
        };
        if let Some(edit) = edit {
            f.message
                .push_str("; fix: insert Content-Disposition: inline");
            if retyped.is_some() {
                f.message
                    .push_str(", with the type ref-image-type gives it");
            }
            f = f.with_edit(edit);
        }
        cx.report(f);
        return;
    };
    let field = &msg.fields(e)[fi];
    let value = msg.value(e, field);
    let d = Disposition::parse(value);
    if d.kind != "attachment" {
        return;
    }
    let mut f = Finding::new(
        Rule::RelatedPartDisposition,
        msg.path(e),
        format!(
            "{} is shown by {} but has Content-Disposition: attachment: readers list it as an attachment, and some show it a second time below the body (RFC 2183 §2.1)",
            essence(),
            by()
        ),
    );
    // One field, read to its end, in the original bytes: the type alone is replaced.
    if fields.len() == 1 && d.params.is_clean() && e.editable() && e.depth > 0 {
        let current = cx.edits.pending(&field.value).unwrap_or(value);
        let d_now = Disposition::parse(current);
        if d_now.kind == "attachment" {
            let mut new = current[..d_now.kind_span.start].to_vec();
            new.extend_from_slice(b"inline");
            new.extend_from_slice(&current[d_now.kind_span.end..]);
            let loc = msg.field_loc(e, fi);
            let edit =
                cx.edits
                    .rewrite(field.value.clone(), loc, new, Rule::RelatedPartDisposition);
            f.message
                .push_str("; fix: make it inline, keeping its parameters");
            f = f.with_edit(edit);
        }
    } else if fields.len() > 1 {
        f.message.push_str(&format!(
            "; it has {} Content-Disposition fields, so it is not changed",
            fields.len()
        ));
    }
    cx.report(f);
}

/// The disposition a retyped part needs, inserted on the line after its only
/// Content-Type field and made only together with `retype`, the edit of that field:
/// an `application/octet-stream` marked inline is what no reader was rated on
/// (docs/INTEROP.md), and the type's repair must not bring a disposition the policy of
/// `related-part-disposition-missing` does not ask for. Where both are made, one pass
/// leaves nothing to fix.
fn with_retype(cx: &mut Context, at: usize, retype: usize) -> Option<usize> {
    let msg = cx.msg;
    let e = &msg.entities[at];
    if !e.editable() || e.depth == 0 {
        return None;
    }
    let mut types = msg.fields_named(e, "content-type");
    let (fi, field) = types.next()?;
    if types.next().is_some() || field.end == field.value.end {
        return None; // two types, or the heading ends the input
    }
    let mut line = b"Content-Disposition: inline".to_vec();
    line.extend_from_slice(e.eol());
    let mut loc = msg.field_loc(e, fi);
    loc.name = "Content-Disposition".to_string();
    loc.occurrence = 1;
    let edit = cx
        .edits
        .insert_field(field.end, loc, line, Rule::RelatedPartDispositionMissing);
    cx.edits.ride_on(edit, retype);
    Some(edit)
}
