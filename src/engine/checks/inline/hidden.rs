//! `related-attachment-hidden`: an attachment placed inside a multipart/related.
//!
//! RFC 2387 makes every non-root part of a multipart/related a resource of the root:
//! a reader that follows it shows the root and what the root references, and nothing
//! else. Mailers and frameworks that put a PDF or an archive next to the inline images
//! (CodeIgniter, chatwoot, Nextcloud Mail's reports) lose it in iOS Mail and others.
//! Reported when nothing references the part and it is meant as an attachment: marked
//! `attachment`, or neither an image nor text. No header-only repair exists (the part
//! would have to move out of the multipart/related).

use std::collections::HashSet;

use crate::engine::model::analysis::{Context, Finding, Target};
use crate::engine::model::mime::{Kind, Message};
use crate::engine::model::rules::Rule;
use crate::engine::syntax::ascii::excerpt;
use crate::engine::syntax::msgid::addr_spec;
use crate::engine::syntax::params::Disposition;

/// The root of multipart/related `r`: the child its `start` names, else the first.
fn root(msg: &Message, r: usize) -> Option<usize> {
    let e = &msg.entities[r];
    let Some(start) = e.ctype.get("start") else {
        return msg.children(e).first().copied();
    };
    let want = addr_spec(&start.value);
    msg.children(e).iter().copied().find(|&c| {
        let ce = &msg.entities[c];
        msg.content_id(ce)
            .is_some_and(|f| addr_spec(msg.value(ce, f)) == want)
    })
}

/// Whether `root` is an HTML body: text/html, or a multipart/alternative holding one.
fn shows_html(msg: &Message, root: usize) -> bool {
    let e = &msg.entities[root];
    e.ctype.is("text", "html")
        || (e.ctype.is("multipart", "alternative")
            && msg
                .children(e)
                .iter()
                .any(|&c| msg.entities[c].ctype.is("text", "html")))
}

/// Whether part `c` is meant as an attachment, and how it says so.
fn meant_as_attachment(msg: &Message, c: usize) -> Option<String> {
    let e = &msg.entities[c];
    if let Some(f) = msg.field(e, "content-disposition") {
        let d = Disposition::parse(msg.value(e, f));
        if d.kind == "attachment" {
            return Some(match d.filename() {
                Some(n) => format!("marked attachment (\"{}\")", excerpt(n.as_bytes())),
                None => "marked attachment".to_string(),
            });
        }
    }
    let t = &e.ctype;
    (t.mtype != "image" && t.mtype != "text" && t.mtype != "multipart")
        .then(|| format!("a {}", t.essence()))
}

pub(super) fn check(cx: &mut Context) {
    // Not every reference was read: no part can be called unreferenced.
    if !cx.cid_refs_complete {
        return;
    }
    let msg = cx.msg;
    let mut hidden: Vec<(usize, usize, String)> = Vec::new();
    for &r in msg.related() {
        let e = &msg.entities[r];
        let root = root(msg, r);
        // Only an HTML root's references are known; another root (RFC 2387's SGML
        // examples) names its parts in ways this does not read.
        if !root.is_some_and(|x| shows_html(msg, x)) {
            continue;
        }
        for &c in msg.children(e) {
            if Some(c) == root || !matches!(msg.entities[c].kind, Kind::Leaf | Kind::Message) {
                continue;
            }
            if let Some(how) = meant_as_attachment(msg, c) {
                hidden.push((r, c, how));
            }
        }
    }
    if hidden.is_empty() {
        return;
    }
    // Built once: a message of many such parts must not scan the references per part.
    let referenced: HashSet<usize> = cx
        .refs
        .iter()
        .flat_map(|x| match &x.target {
            Target::Lenient(v) | Target::Candidates(v) => v.clone(),
            _ => x.part().into_iter().collect(),
        })
        .collect();
    for (r, c, how) in hidden {
        let ce = &msg.entities[c];
        let named = || {
            msg.content_id(ce).is_some_and(|f| {
                let id = addr_spec(msg.value(ce, f));
                !id.is_empty() && cx.content_id_used(&id, c)
            })
        };
        if referenced.contains(&c) || named() {
            continue;
        }
        cx.report(Finding::new(
            Rule::RelatedAttachmentHidden,
            msg.path(ce),
            format!(
                "part {} is {how}, but it sits in multipart/related (part {}) and nothing references it: readers that show a multipart/related as its root and the root's references (iOS Mail among them) do not show it (RFC 2387 §3.1)",
                msg.path(ce), msg.path(&msg.entities[r])
            ),
        ));
    }
}
