//! Which part a `cid:` reference may name: the scope of a Content-ID (RFC 2557 §8.3,
//! RFC 2392 §2).
//!
//! A reference in an HTML part resolves to a Content-ID in the same or an enclosing
//! multipart/related, never one in a nested or sibling one; with no enclosing
//! multipart/related, to any Content-ID of its own message. Encapsulated messages are
//! scopes of their own. The Content-ID sets are built once per multipart/related and
//! per message, so many references cost one walk. Used by the `html` check.

use std::collections::HashMap;

use crate::engine::model::mime::{Kind, Message};
use crate::engine::syntax::cid_url::{self, IdRef, IdUrl};
use crate::engine::syntax::msgid::addr_spec;

/// The addr-spec of a Content-ID or Message-ID value as text to compare with a `cid:` or
/// `mid:` reference (which is text once %-decoded); `None` when nothing is left.
fn addr_spec_text(value: &[u8]) -> Option<String> {
    let a = addr_spec(value);
    (!a.is_empty()).then(|| String::from_utf8_lossy(&a).into_owned())
}

/// Content-IDs (addr-specs) found in a scope, each with the first entity carrying it.
type IdSet = HashMap<String, usize>;

/// Per-analysis caches, so that many HTML parts in one multipart/related cost one walk.
pub(super) struct CidScopes<'m, 'a> {
    msg: &'m Message<'a>,
    ids: Vec<Option<String>>,
    related: HashMap<usize, IdSet>,
    messages: HashMap<usize, IdSet>,
    /// Per multipart/related, the parts with a `Content-Location: cid:…` and no
    /// Content-ID, by that location's addr-spec as written.
    cid_locations: HashMap<usize, IdSet>,
}

impl<'m, 'a> CidScopes<'m, 'a> {
    pub(super) fn new(msg: &'m Message<'a>) -> Self {
        let ids = msg
            .entities
            .iter()
            .map(|e| {
                msg.field(e, "content-id")
                    .and_then(|f| addr_spec_text(msg.value(e, f)))
            })
            .collect();
        CidScopes {
            msg,
            ids,
            related: HashMap::new(),
            messages: HashMap::new(),
            cid_locations: HashMap::new(),
        }
    }

    /// Parts directly in the scope of multipart/related `r` (as for [`Self::related_ids`])
    /// that have no Content-ID and a `Content-Location: cid:X`, by X.
    fn related_cid_locations(&mut self, r: usize) -> &IdSet {
        if !self.cid_locations.contains_key(&r) {
            let mut set = IdSet::new();
            let mut stack: Vec<usize> = self.msg.entities[r].children.clone();
            while let Some(i) = stack.pop() {
                let e = &self.msg.entities[i];
                if self.ids[i].is_none() && self.msg.field(e, "content-id").is_none() {
                    if let Some(id) = self.msg.field(e, "content-location").and_then(|f| {
                        let v = crate::engine::syntax::fold::unfold(self.msg.value(e, f));
                        let v = String::from_utf8_lossy(&v).trim().to_string();
                        match cid_url::parse(&v) {
                            Some(IdUrl::Cid(id)) if !id.raw.is_empty() => Some(id.raw),
                            _ => None,
                        }
                    }) {
                        set.entry(id).or_insert(i);
                    }
                }
                if self.is_message_boundary(i) || self.is_related(i) {
                    continue;
                }
                stack.extend(self.msg.entities[i].children.iter().copied());
            }
            self.cid_locations.insert(r, set);
        }
        &self.cid_locations[&r]
    }

    fn is_related(&self, i: usize) -> bool {
        self.msg.entities[i].ctype.is("multipart", "related")
    }

    /// Crossing into an encapsulated message leaves the scope of a cid: reference.
    fn is_message_boundary(&self, i: usize) -> bool {
        matches!(
            self.msg.entities[i].kind,
            Kind::Message | Kind::ExternalBody
        )
    }

    /// The multipart/related entities enclosing `i`, innermost first, within its message.
    fn related_ancestors(&self, i: usize) -> Vec<usize> {
        self.msg
            .ancestors(i)
            .take_while(|&a| !self.is_message_boundary(a))
            .filter(|&a| self.is_related(a))
            .collect()
    }

    /// The heading of the message holding `i` (0, or an encapsulated `N.0`).
    fn message_root(&self, i: usize) -> usize {
        let mut root = i;
        for a in self.msg.ancestors(i) {
            if self.is_message_boundary(a) {
                break;
            }
            root = a;
        }
        root
    }

    /// Content-IDs under `root` (itself excluded), not descending into encapsulated
    /// messages, nor into nested multipart/related when `stop_at_related`.
    fn walk(&self, root: usize, stop_at_related: bool) -> IdSet {
        let mut set = IdSet::new();
        let mut stack: Vec<usize> = self.msg.entities[root].children.clone();
        while let Some(i) = stack.pop() {
            if let Some(id) = &self.ids[i] {
                set.entry(id.clone()).or_insert(i);
            }
            if self.is_message_boundary(i) || (stop_at_related && self.is_related(i)) {
                continue;
            }
            stack.extend(self.msg.entities[i].children.iter().copied());
        }
        set
    }

    fn related_ids(&mut self, r: usize) -> &IdSet {
        if !self.related.contains_key(&r) {
            let s = self.walk(r, true);
            self.related.insert(r, s);
        }
        &self.related[&r]
    }

    fn message_ids(&mut self, root: usize) -> &IdSet {
        if !self.messages.contains_key(&root) {
            let mut s = self.walk(root, false);
            if let Some(id) = &self.ids[root] {
                s.entry(id.clone()).or_insert(root);
            }
            self.messages.insert(root, s);
        }
        &self.messages[&root]
    }

    /// Message-IDs of the headings of every message enclosing `i`.
    /// The message headings that enclose entity `i` (its own message first).
    pub(super) fn message_headings_around(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        std::iter::once(i)
            .chain(self.msg.ancestors(i))
            .filter(|&a| {
                let e = &self.msg.entities[a];
                e.parent.is_none_or(|p| self.is_message_boundary(p))
            })
    }

    pub(super) fn message_ids_around(&self, i: usize) -> Vec<String> {
        self.message_headings_around(i)
            .filter_map(|a| {
                let e = &self.msg.entities[a];
                self.msg
                    .field(e, "message-id")
                    .and_then(|f| addr_spec_text(self.msg.value(e, f)))
            })
            .collect()
    }
}

/// The entity of `set` a reference names: by its %-decoded form first, then as written
/// (RFC 2392 §2 and erratum 454).
fn lookup(set: &IdSet, r: &IdRef) -> Option<usize> {
    set.get(&r.decoded).or_else(|| set.get(&r.raw)).copied()
}

/// Where a `cid:` reference leads.
pub(super) enum Resolution {
    /// The part whose Content-ID it matches.
    Found(usize),
    /// No Content-ID matches, but this part of the enclosing multipart/related has no
    /// Content-ID and `Content-Location: cid:` with the same id (Chrome's "Save as
    /// MHTML" writes its stylesheets so): Chromium finds it, RFC 2392 readers do not.
    LocationOnly(usize),
    /// Nothing matches: the innermost enclosing multipart/related (None: there is none)
    /// and a part outside it that has the Content-ID, if any.
    Dangling(Option<usize>, Option<usize>),
}

pub(super) fn resolve_cid(scopes: &mut CidScopes, idx: usize, id: &IdRef) -> Resolution {
    let related = scopes.related_ancestors(idx);
    for &rel in &related {
        if let Some(at) = lookup(scopes.related_ids(rel), id) {
            return Resolution::Found(at);
        }
    }
    let root = scopes.message_root(idx);
    let elsewhere = lookup(scopes.message_ids(root), id);
    match (related.first(), elsewhere) {
        // RFC 2392 scopes cid: to the message; no multipart/related narrows it here.
        (None, Some(at)) => Resolution::Found(at),
        _ => {
            for &rel in &related {
                if let Some(at) = lookup(scopes.related_cid_locations(rel), id) {
                    return Resolution::LocationOnly(at);
                }
            }
            Resolution::Dangling(related.first().copied(), elsewhere)
        }
    }
}
