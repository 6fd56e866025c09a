//! Inline parts as readers show them (the rule catalogue's "Inline parts: what readers
//! show"): the references the `html` check recorded (`Context::refs`), held against the
//! headings of the parts they lead to. An image that a reader lists as an attachment,
//! shows twice or not at all is nearly always a heading the sender got wrong, and the
//! repair is that heading alone:
//!
//! - `disposition`: `related-part-disposition` (a referenced part marked `attachment`)
//!   and `related-part-disposition-missing` (a referenced image with no disposition)
//! - `content_id`: `content-id-malformed` (an id only a lenient reader matches) and
//!   `related-ref-mismatch` (a reference whose part has another id, or none)
//! - `mixed`: `cid-outside-related` (`cid:` images beside the HTML in multipart/mixed)
//! - `hidden`: `related-attachment-hidden` (an attachment inside multipart/related)
//! - `base`: `html-base-remote` (relative links sent to a host by a MIME header)
//!
//! A repair is offered only where it connects a reference to exactly one part; where
//! several parts could be meant, the finding says so and nothing is changed.

mod base;
mod content_id;
mod disposition;
mod hidden;
mod mixed;

use std::collections::BTreeSet;

use crate::engine::model::analysis::{Context, Reference, Target};
use crate::engine::model::rules::Rule;

/// Runs the rules, after the `html` check has recorded the references.
pub fn check(cx: &mut Context) {
    // Each rule judges the message as the repairs offered before it leave it, so that
    // fixing everything once leaves nothing to fix: a Content-ID repaired makes its
    // references lead to the part (for the mixed and disposition rules), and a
    // multipart/mixed made related makes its images related parts (for dispositions).
    let repaired_ids = content_id::check(cx);
    let after = Repaired {
        ids: repaired_ids,
        related: BTreeSet::new(),
    };
    let related = mixed::check(cx, &after);
    let after = Repaired { related, ..after };
    disposition::check(cx, &after);
    hidden::check(cx);
    base::check(cx);
}

/// What the repairs on offer so far change about where references lead.
struct Repaired {
    /// Parts whose Content-ID is repaired (`content-id-malformed`, `related-ref-mismatch`):
    /// the references that find them only leniently, or by candidate, will find them.
    ids: BTreeSet<usize>,
    /// multipart/mixed entities made multipart/related (`cid-outside-related`).
    related: BTreeSet<usize>,
}

impl Repaired {
    /// The part reference `r` will lead to once the Content-ID repairs are made, and
    /// whether through a multipart/related around it.
    fn target(&self, r: &Reference) -> Option<(usize, bool)> {
        match &r.target {
            Target::ContentId { at, in_related } => Some((*at, *in_related)),
            Target::Lenient(v) | Target::Candidates(v)
                if v.len() == 1 && self.ids.contains(&v[0]) =>
            {
                Some((v[0], r.in_related))
            }
            _ => None,
        }
    }
}

/// Offers the insertion of the field `name: value` at the end of entity `i`'s heading:
/// a new line of that heading, every other byte unchanged. Not in the top-level heading
/// (the milter would add it at the end of the message's header, where `Content-*`
/// fields of a body part do not belong), nor where the heading is not in the original
/// bytes or has no field to follow.
fn insert_field(cx: &mut Context, i: usize, name: &str, value: &str, rule: Rule) -> Option<usize> {
    let msg = cx.msg;
    let e = &msg.entities[i];
    if !e.editable() || e.depth == 0 {
        return None;
    }
    let last = msg.fields(e).last()?;
    if last.end == last.value.end {
        return None; // the heading ends the input: no line ending to follow
    }
    let mut line = format!("{name}: {value}").into_bytes();
    line.extend_from_slice(e.eol());
    let loc = crate::engine::model::edit::FieldLoc {
        part: msg.path(e).to_string(),
        name: name.to_string(),
        occurrence: msg.fields_named(e, &name.to_ascii_lowercase()).count() + 1,
        top_level: false,
    };
    Some(cx.edits.insert_field(last.end, loc, line, rule))
}

#[cfg(test)]
mod tests;
