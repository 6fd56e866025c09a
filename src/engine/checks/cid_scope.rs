//! Which part a `cid:` reference may name: the scope of a Content-ID (RFC 2557 §8.3,
//! RFC 2392 §2), and how readers that forgive more than the standard find a part anyway.
//!
//! A reference in an HTML part resolves to a Content-ID in the same or an enclosing
//! multipart/related, never one in a nested or sibling one; with no enclosing
//! multipart/related, to any Content-ID of its own message. Encapsulated messages are
//! scopes of their own.
//!
//! A Content-ID is matched first as every reader reads it (one pair of angle brackets,
//! `msgid::id_forms`'s `exact`), then as a lenient reader recovers it (`lenient`: bare,
//! doubled, `cid:` inside, encoded), then by the candidates of `related-ref-mismatch`
//! (the id in another letter case; a part whose file name is the id, with no
//! Content-ID or one no reference names; a Content-ID no reference names that the id
//! cuts short or that cuts it short). The sets are built once per multipart/related and per message, so many
//! references cost one walk. Used by the `html` check.

use std::collections::HashMap;

use crate::engine::model::mime::{Kind, Message};
use crate::engine::syntax::cid_url::{self, IdRef, IdUrl};
use crate::engine::syntax::msgid::{addr_spec, cut_short, id_forms, Malformed};
use crate::engine::syntax::params::Disposition;

/// The addr-spec of a Message-ID value as text to compare with a `mid:` reference
/// (which is text once %-decoded); `None` when nothing is left.
fn addr_spec_text(value: &[u8]) -> Option<String> {
    let a = addr_spec(value);
    (!a.is_empty()).then(|| String::from_utf8_lossy(&a).into_owned())
}

fn text(b: Vec<u8>) -> String {
    String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Content-IDs found in a scope, each with the first entity carrying it.
type IdSet = HashMap<String, usize>;

/// Lenient ids found in a scope, with every entity carrying each.
type LenientSet = HashMap<String, Vec<usize>>;

/// How each entity's first Content-ID reads.
struct Ids {
    /// As every reader reads it.
    exact: Vec<Option<String>>,
    /// As only a lenient reader recovers it, and why a strict one does not.
    lenient: Vec<Option<(String, Malformed)>>,
    /// The entity has a Content-ID field at all.
    present: Vec<bool>,
}

/// Per-analysis caches, so that many HTML parts in one multipart/related cost one walk.
pub(super) struct CidScopes<'m, 'a> {
    msg: &'m Message<'a>,
    ids: Ids,
    related: HashMap<usize, IdSet>,
    messages: HashMap<usize, IdSet>,
    lenient: HashMap<usize, LenientSet>,
    /// Per multipart/related, the parts with a `Content-Location: cid:…` and no
    /// Content-ID, by that location's addr-spec as written.
    cid_locations: HashMap<usize, IdSet>,
}

impl<'m, 'a> CidScopes<'m, 'a> {
    pub(super) fn new(msg: &'m Message<'a>) -> Self {
        let n = msg.entities.len();
        let mut ids = Ids {
            exact: vec![None; n],
            lenient: vec![None; n],
            present: vec![false; n],
        };
        for (i, e) in msg.entities.iter().enumerate() {
            let Some(f) = msg.content_id(e) else {
                continue;
            };
            ids.present[i] = true;
            let forms = id_forms(msg.value(e, f));
            ids.exact[i] = forms.exact.map(text);
            ids.lenient[i] = forms.lenient.map(|(id, why)| (text(id), why));
        }
        CidScopes {
            msg,
            ids,
            related: HashMap::new(),
            messages: HashMap::new(),
            lenient: HashMap::new(),
            cid_locations: HashMap::new(),
        }
    }

    fn scope(&self, root: usize, stop_at_related: bool) -> Vec<usize> {
        scope(self.msg, root, stop_at_related)
    }

    /// Parts directly in the scope of multipart/related `r` that have no Content-ID and
    /// a `Content-Location: cid:X`, by X.
    fn related_cid_locations(&mut self, r: usize) -> &IdSet {
        if !self.cid_locations.contains_key(&r) {
            let mut set = IdSet::new();
            for i in self.scope(r, true) {
                let e = &self.msg.entities[i];
                if self.ids.present[i] {
                    continue;
                }
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
            self.cid_locations.insert(r, set);
        }
        &self.cid_locations[&r]
    }

    fn is_message_boundary(&self, i: usize) -> bool {
        is_message_boundary(self.msg, i)
    }

    pub(super) fn related_ancestors(&self, i: usize) -> Vec<usize> {
        related_ancestors(self.msg, i)
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

    /// The scope a reference of `idx` is resolved in when nothing matches exactly: the
    /// innermost enclosing multipart/related, else its message. (root, stop at nested
    /// multipart/related).
    fn narrowest(&self, idx: usize) -> (usize, bool) {
        match self.related_ancestors(idx).first() {
            Some(&r) => (r, true),
            None => (self.message_root(idx), false),
        }
    }

    fn exact_set(&self, root: usize, stop_at_related: bool) -> IdSet {
        let mut set = IdSet::new();
        for i in self.scope(root, stop_at_related) {
            if let Some(id) = &self.ids.exact[i] {
                set.entry(id.clone()).or_insert(i);
            }
        }
        set
    }

    fn related_ids(&mut self, r: usize) -> &IdSet {
        if !self.related.contains_key(&r) {
            let s = self.exact_set(r, true);
            self.related.insert(r, s);
        }
        &self.related[&r]
    }

    fn message_ids(&mut self, root: usize) -> &IdSet {
        if !self.messages.contains_key(&root) {
            let mut s = self.exact_set(root, false);
            if let Some(id) = &self.ids.exact[root] {
                s.entry(id.clone()).or_insert(root);
            }
            self.messages.insert(root, s);
        }
        &self.messages[&root]
    }

    fn lenient_ids(&mut self, root: usize, stop_at_related: bool) -> &LenientSet {
        if !self.lenient.contains_key(&root) {
            let mut set = LenientSet::new();
            for i in self.scope(root, stop_at_related) {
                if let Some((id, _)) = &self.ids.lenient[i] {
                    set.entry(id.clone()).or_default().push(i);
                }
            }
            self.lenient.insert(root, set);
        }
        &self.lenient[&root]
    }

    /// The parts of `idx`'s narrowest scope that `related-ref-mismatch` may mean for
    /// `r`: a Content-ID equal to it but for ASCII case; no Content-ID and a file name
    /// equal to it or to its part before `@`; or a Content-ID beside such a file name
    /// (Symfony Mailer writes a generated id beside a reference by file name), or one
    /// that is a prefix of the id or has it as a prefix, the shorter at least
    /// `msgid::MIN_CUT` octets (converters that cut ids at a dot, simple-java-mail #307).
    /// The last two count only while no reference names the Content-ID the part has,
    /// which is known once every reference is read: each comes with that id, for the
    /// caller to check then.
    fn candidates(&self, idx: usize, r: &IdRef) -> Vec<(usize, Option<String>)> {
        let (root, stop) = self.narrowest(idx);
        let forms = [r.decoded.as_str(), r.raw.as_str()];
        let local = |s: &str| s.split('@').next().unwrap_or(s).to_string();
        let names = [
            forms[0].to_string(),
            forms[1].to_string(),
            local(forms[0]),
            local(forms[1]),
        ];
        let named = |i: usize| {
            file_names(self.msg, i)
                .iter()
                .any(|n| names.iter().any(|x| !x.is_empty() && x == n))
        };
        let mut out = Vec::new();
        for i in self.scope(root, stop) {
            let e = &self.msg.entities[i];
            if i == idx || !matches!(e.kind, Kind::Leaf) {
                continue;
            }
            if !self.ids.present[i] {
                if named(i) {
                    out.push((i, None));
                }
                continue;
            }
            let own = [
                self.ids.exact[i].as_deref(),
                self.ids.lenient[i].as_ref().map(|(id, _)| id.as_str()),
            ];
            let own = own.into_iter().flatten();
            if own
                .clone()
                .any(|id| forms.iter().any(|f| f.eq_ignore_ascii_case(id)))
            {
                out.push((i, None));
            } else if let Some(id) = own.clone().next() {
                if named(i) || forms.iter().any(|f| cut_short(f, id)) {
                    out.push((i, Some(id.to_string())));
                }
            }
        }
        out
    }

    /// The message headings that enclose entity `i` (its own message first).
    pub(super) fn message_headings_around(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        std::iter::once(i)
            .chain(self.msg.ancestors(i))
            .filter(|&a| {
                let e = &self.msg.entities[a];
                e.parent.is_none_or(|p| self.is_message_boundary(p))
            })
    }

    /// The Message-IDs of the headings of every message enclosing `i`.
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

fn is_related(msg: &Message, i: usize) -> bool {
    msg.entities[i].ctype.is("multipart", "related")
}

/// Crossing into an encapsulated message leaves the scope of a reference.
fn is_message_boundary(msg: &Message, i: usize) -> bool {
    matches!(msg.entities[i].kind, Kind::Message | Kind::ExternalBody)
}

/// The multipart/related entities enclosing `i`, innermost first, within its message.
pub(super) fn related_ancestors(msg: &Message, i: usize) -> Vec<usize> {
    msg.ancestors(i)
        .take_while(|&a| !is_message_boundary(msg, a))
        .filter(|&a| is_related(msg, a))
        .collect()
}

/// The entities directly in the scope of `root` (itself excluded): not descending into
/// encapsulated messages, nor into nested multipart/related when `stop_at_related`. In
/// document order.
pub(super) fn scope(msg: &Message, root: usize, stop_at_related: bool) -> Vec<usize> {
    let mut out = Vec::new();
    let mut stack: Vec<usize> = msg
        .children(&msg.entities[root])
        .iter()
        .rev()
        .copied()
        .collect();
    while let Some(i) = stack.pop() {
        out.push(i);
        if is_message_boundary(msg, i) || (stop_at_related && is_related(msg, i)) {
            continue;
        }
        stack.extend(msg.children(&msg.entities[i]).iter().rev().copied());
    }
    out
}

/// The names a reader shows for part `i`: the Content-Disposition `filename` and the
/// Content-Type `name`.
pub(super) fn file_names(msg: &Message, i: usize) -> Vec<String> {
    let e = &msg.entities[i];
    let mut out = Vec::new();
    if let Some(f) = msg.field(e, "content-disposition") {
        if let Some(n) = Disposition::parse(msg.value(e, f)).filename() {
            out.push(n);
        }
    }
    if let Some(n) = e.ctype.get_str("name") {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// The entity of `set` a reference names: by its %-decoded form first, then as written
/// (RFC 2392 §2 and erratum 454).
fn lookup(set: &IdSet, r: &IdRef) -> Option<usize> {
    set.get(&r.decoded).or_else(|| set.get(&r.raw)).copied()
}

/// Where a `cid:` reference leads.
pub(super) enum Resolution {
    /// The part whose Content-ID every reader matches; `in_related`: found in an
    /// enclosing multipart/related (else by RFC 2392's message-wide scope, there being
    /// no multipart/related around the reference).
    Found(usize, bool),
    /// Only a lenient reading of these parts' Content-IDs matches (more than one:
    /// ambiguous), in the narrowest scope.
    Lenient(Vec<usize>),
    /// No Content-ID matches, but this part of the enclosing multipart/related has no
    /// Content-ID and `Content-Location: cid:` with the same id (Chrome's "Save as
    /// MHTML" writes its stylesheets so): Chromium finds it, RFC 2392 readers do not.
    LocationOnly(usize),
    /// No Content-ID matches in any reading, but these parts of the narrowest scope are
    /// candidates (`related-ref-mismatch`), each with the Content-ID that no reference
    /// may name for it to stay one (see `CidScopes::candidates`).
    Candidates(Vec<(usize, Option<String>)>),
    /// Nothing matches: the innermost enclosing multipart/related (None: there is none)
    /// and a part outside it that has the Content-ID, if any.
    Dangling(Option<usize>, Option<usize>),
}

pub(super) fn resolve_cid(scopes: &mut CidScopes, idx: usize, id: &IdRef) -> Resolution {
    let related = scopes.related_ancestors(idx);
    for &rel in &related {
        if let Some(at) = lookup(scopes.related_ids(rel), id) {
            return Resolution::Found(at, true);
        }
    }
    let root = scopes.message_root(idx);
    let elsewhere = lookup(scopes.message_ids(root), id);
    if let (None, Some(at)) = (related.first(), elsewhere) {
        // RFC 2392 scopes cid: to the message; no multipart/related narrows it here.
        return Resolution::Found(at, false);
    }
    let (scope, stop) = scopes.narrowest(idx);
    let lenient = scopes.lenient_ids(scope, stop);
    if let Some(parts) = lenient.get(&id.decoded).or_else(|| lenient.get(&id.raw)) {
        return Resolution::Lenient(parts.clone());
    }
    for &rel in &related {
        if let Some(at) = lookup(scopes.related_cid_locations(rel), id) {
            return Resolution::LocationOnly(at);
        }
    }
    let candidates = scopes.candidates(idx, id);
    if !candidates.is_empty() && elsewhere.is_none() {
        return Resolution::Candidates(candidates);
    }
    Resolution::Dangling(related.first().copied(), elsewhere)
}
