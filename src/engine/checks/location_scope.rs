//! Which part a URL in an HTML part names through its Content-Location (RFC 2557 §8.2):
//! the URL, resolved against the part's base (the document's own `<base href>`, else
//! the MIME base of `model::base_uri`), equals the resolved Content-Location of a part
//! in the same or an enclosing multipart/related. Compared octet by octet, as
//! `related-location-duplicate` compares them. Used by the `html` check.

use std::collections::HashMap;

use crate::engine::model::base_uri;
use crate::engine::model::mime::Message;
use crate::engine::syntax::content_location::{
    as_base, is_absolute, resolve_lenient, strip_fragment,
};

use super::cid_scope::{related_ancestors, scope};

/// Resolved Content-Location -> the first part carrying it.
type LocationSet = HashMap<String, usize>;

/// Where a URL of an HTML part leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Located {
    /// The part of the message it names.
    Part(usize),
    /// A relative reference that names no part: a reader fetches it from the base.
    Relative,
    /// Anything else: an absolute URL to the network, a fragment, a `cid:`.
    Other,
}

/// The Content-Location sets of the multipart/related entities, built once each.
pub(super) struct LocationScopes<'m, 'a> {
    msg: &'m Message<'a>,
    sets: HashMap<usize, LocationSet>,
}

impl<'m, 'a> LocationScopes<'m, 'a> {
    pub(super) fn new(msg: &'m Message<'a>) -> Self {
        LocationScopes {
            msg,
            sets: HashMap::new(),
        }
    }

    fn set(&mut self, related: usize) -> &LocationSet {
        if !self.sets.contains_key(&related) {
            let msg = self.msg;
            let mut set = LocationSet::new();
            let mut bases: HashMap<usize, String> = HashMap::new();
            for i in scope(msg, related, true) {
                let Some(parent) = msg.entities[i].parent else {
                    continue;
                };
                let base = bases
                    .entry(parent)
                    .or_insert_with(|| base_uri::base_for(msg, parent));
                if let Some(loc) = base_uri::resolved_location_with(msg, i, base) {
                    set.entry(strip_fragment(&loc).to_string()).or_insert(i);
                }
            }
            self.sets.insert(related, set);
        }
        &self.sets[&related]
    }

    /// The base the references of text/html part `html` resolve against: its own
    /// `<base href>` when that is absolute, else its MIME base.
    pub(super) fn base(&self, html: usize, own_base: Option<&str>) -> String {
        own_base
            .and_then(|b| as_base(b.as_bytes()))
            .filter(|b| is_absolute(b))
            .unwrap_or_else(|| base_uri::base_for(self.msg, html))
    }

    /// Where `url`, written in text/html part `html` whose base is `base`, leads.
    /// `with_locations`: [`Self::any_location`] of `html`.
    pub(super) fn locate(
        &mut self,
        html: usize,
        base: &str,
        url: &str,
        with_locations: bool,
    ) -> Located {
        let relative = !has_scheme(url);
        if url.starts_with('#') || (!relative && !with_locations) {
            return Located::Other;
        }
        if !with_locations {
            return Located::Relative;
        }
        let Some(resolved) = resolve_lenient(base, url) else {
            return Located::Other;
        };
        let resolved = strip_fragment(&resolved).to_string();
        for r in related_ancestors(self.msg, html) {
            if let Some(&at) = self.set(r).get(&resolved) {
                return Located::Part(at);
            }
        }
        if relative {
            Located::Relative
        } else {
            Located::Other
        }
    }

    /// Whether some multipart/related around `html` has a part with a Content-Location:
    /// no URL can name a part otherwise.
    pub(super) fn any_location(&mut self, html: usize) -> bool {
        related_ancestors(self.msg, html)
            .into_iter()
            .any(|r| !self.set(r).is_empty())
    }
}

/// `url` starts with a URI scheme (RFC 3986 §3.1): it is not a relative reference.
fn has_scheme(url: &str) -> bool {
    crate::engine::syntax::uri::scheme(url.as_bytes()).is_some()
}
