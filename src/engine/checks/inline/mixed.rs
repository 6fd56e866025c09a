//! `cid-outside-related`: an HTML body that shows `cid:` images which are its siblings
//! in a multipart/mixed, with no multipart/related around them.
//!
//! RFC 2392 lets a `cid:` URL name any part of its message, so the reference is valid,
//! but what readers make of it differs: Thunderbird resolves `cid:` only inside
//! multipart/related (elsewhere the image stays blank and the part is shown as an
//! attachment), several webmails list the images as attachments, Gmail is reported to
//! fail. Mail libraries and scripts that build "mixed, HTML first, images after" produce
//! it (pyramid_mailer, tarayo, Home Assistant, MimeKit users, Roundcube's reports).
//!
//! Repair, only where it is the whole story: the mixed's first child is the HTML body
//! (text/html, or a multipart/alternative holding it) and **every** other child is shown
//! by it. Then the multipart/mixed is the multipart/related RFC 2387 describes, and its
//! Content-Type becomes `multipart/related; type="<first child's type>"` with its
//! boundary and other parameters kept. A real attachment beside the images would need
//! a restructure (a new multipart level), which a header-only fix cannot make.

use std::collections::{BTreeMap, BTreeSet};

use crate::engine::model::analysis::{Context, Finding};
use crate::engine::model::mime::{Kind, Message};
use crate::engine::model::rules::Rule;
use crate::engine::syntax::params::{subtype_span, ContentType};

use super::Repaired;

/// RFC 5322 §2.1.1 soft line limit: the inserted `type=` goes on a new line beyond it.
const SOFT_LINE: usize = 78;

fn is_mixed(msg: &Message, i: usize) -> bool {
    let e = &msg.entities[i];
    e.ctype.is("multipart", "mixed") && matches!(e.kind, Kind::Multipart { .. })
}

/// Reports the rule; returns the multipart/mixed entities whose repair is on offer.
/// `after`: the Content-ID repairs on offer, which make more references lead to parts.
pub(super) fn check(cx: &mut Context, after: &Repaired) -> BTreeSet<usize> {
    let msg = cx.msg;
    // (HTML part, the multipart/mixed) -> the parts it shows that are that mixed's
    // children.
    let mut found: BTreeMap<(usize, usize), BTreeSet<usize>> = BTreeMap::new();
    for r in &cx.refs {
        let Some((at, false)) = after.target(r) else {
            continue;
        };
        if !r.loads() {
            continue;
        }
        let Some(m) = msg.entities[at].parent else {
            continue;
        };
        if is_mixed(msg, m) && msg.ancestors(r.html).any(|a| a == m) {
            found.entry((r.html, m)).or_default().insert(at);
        }
    }
    // One repair per multipart/mixed, whichever HTML part asks for it.
    let mut repaired: BTreeMap<usize, Option<usize>> = BTreeMap::new();
    for ((html, m), shown) in found {
        let paths: Vec<_> = shown.iter().map(|&p| msg.path(&msg.entities[p])).collect();
        let mut f = Finding::new(
            Rule::CidOutsideRelated,
            msg.path(&msg.entities[html]),
            format!(
                "the HTML shows part{} {} by cid:, but {} beside it in multipart/mixed (part {}) with no multipart/related: Thunderbird shows none of them in the HTML, several webmails list them as attachments (RFC 2387 §1, RFC 2557 §8.3)",
                if paths.len() == 1 { "" } else { "s" },
                paths.join(", "),
                if paths.len() == 1 { "it lies" } else { "they lie" },
                msg.path(&msg.entities[m])
            ),
        );
        let edit = *repaired
            .entry(m)
            .or_insert_with(|| repair(cx, after, html, m, &shown));
        match edit {
            Some(i) => {
                f.message
                    .push_str("; fix: make the multipart/mixed a multipart/related");
                f = f.with_edit(i);
            }
            None => f.message.push_str(
                "; not changed: the mixed holds more than the HTML body and the parts it shows",
            ),
        }
        cx.report(f);
    }
    repaired
        .into_iter()
        .filter_map(|(m, edit)| edit.map(|_| m))
        .collect()
}

/// The first child of `m` when it is the body holding `html`: `html` itself, or a
/// multipart/alternative with `html` among its children.
fn body_child(msg: &Message, m: usize, html: usize) -> Option<usize> {
    let first = *msg.children(&msg.entities[m]).first()?;
    let e = &msg.entities[first];
    let holds = first == html
        || (e.ctype.is("multipart", "alternative") && msg.children(e).contains(&html));
    holds.then_some(first)
}

/// Offers `multipart/mixed` → `multipart/related; type="…"` on `m`'s Content-Type, when
/// its first child is the body holding `html` and every other child is in `shown`.
fn repair(
    cx: &mut Context,
    after: &Repaired,
    html: usize,
    m: usize,
    shown: &BTreeSet<usize>,
) -> Option<usize> {
    let msg = cx.msg;
    let first = body_child(msg, m, html)?;
    let e = &msg.entities[m];
    if !msg.children(e).iter().skip(1).all(|c| shown.contains(c)) || msg.children(e).len() < 2 {
        return None;
    }
    // Made related, the mixed is the scope of every cid: reference in its first child
    // (RFC 2557 §8.3): one that leads outside it now would lead nowhere then.
    let inside = |p: usize| p == m || msg.ancestors(p).any(|a| a == m);
    let leaves = cx.refs.iter().any(|r| {
        (r.html == first || msg.ancestors(r.html).any(|a| a == first))
            && r.cid.is_some()
            && after.target(r).is_some_and(|(at, _)| !inside(at))
    });
    if leaves {
        return None;
    }
    if !e.editable() {
        return None;
    }
    let fi = e.ctype_field?;
    let field = &msg.fields(e)[fi];
    let value = cx.current_value(e, field).to_vec();
    let ct = ContentType::parse(&value);
    if !ct.is_clean() || !ct.is("multipart", "mixed") || ct.get("type").is_some() {
        return None;
    }
    let sub = subtype_span(&value)?;
    let root_type = msg.entities[first].ctype.essence();
    let mut new = value[..sub.start].to_vec();
    new.extend_from_slice(b"related");
    let tail = &value[sub.end..];
    // `; type="…"` after the last parameter, on a line of its own when that one is full.
    let at = ct.params.last().map_or(sub.end, |p| p.value_span.end) - sub.end;
    new.extend_from_slice(&tail[..at]);
    let line_start = new.iter().rposition(|&b| b == b'\n').map_or(0, |n| n + 1);
    let name_len = if line_start == 0 {
        field.value.start - field.start
    } else {
        0
    };
    let param = format!("type=\"{root_type}\"");
    new.push(b';');
    if name_len + (new.len() - line_start) + 1 + param.len() > SOFT_LINE {
        new.extend_from_slice(e.eol());
    }
    new.push(b' ');
    new.extend_from_slice(param.as_bytes());
    new.extend_from_slice(&tail[at..]);
    let loc = msg.field_loc(e, fi);
    Some(
        cx.edits
            .rewrite(field.value.clone(), loc, new, Rule::CidOutsideRelated),
    )
}
