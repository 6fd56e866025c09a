//! The base URI of an entity and the resolution of its Content-Location (RFC 2557 §5,
//! §8.2), which need the message structure; the URI syntax is in `syntax::content_location`.
//!
//! The base of an entity ([`base_for`]) is, innermost heading first: an absolute
//! Content-Location (or a relative one made absolute by a Content-Base in the same
//! heading), else an absolute Content-Base (RFC 2110 / the MHTML drafts; removed by
//! RFC 2557 §12, accepted on input only), else `thismessage:/` (RFC 2557 §5(e); the
//! drafts' `this_message:/` is not used). A relative Content-Location of an enclosing
//! heading is not a base.

use crate::engine::model::mime::{Entity, Message};
use crate::engine::syntax::content_location::{
    as_base, encode_for_comparison, is_absolute, parse_location, resolve_bytes, strip_fragment,
    Location, THIS_MESSAGE,
};

/// The first value of field `name` in `e`, read as a location.
fn location_field(msg: &Message, e: &Entity, name: &str) -> Option<Location> {
    msg.field(e, name).map(|f| parse_location(msg.value(e, f)))
}

/// Where an entity's base comes from: the heading that gives it and which of its fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseSource {
    /// The entity whose heading gives the base (the entity itself or an ancestor).
    pub entity: usize,
    /// Index among that heading's fields of the field that gives it: the Content-Base
    /// when `content_base`, else the Content-Location.
    pub field: usize,
    /// The base is a Content-Base alone (a Content-Location made absolute by a
    /// Content-Base beside it counts as the Content-Location).
    pub content_base: bool,
    /// The absolute base URI.
    pub base: String,
}

/// The absolute base an entity's own heading provides, if any (see the module doc).
fn heading_base(msg: &Message, entity: usize) -> Option<BaseSource> {
    let e = &msg.entities[entity];
    let first = |name: &'static str| msg.fields_named(e, name).next();
    let content_base = first("content-base").and_then(|(i, f)| {
        let l = parse_location(msg.value(e, f));
        as_base(&l.value).filter(|b| is_absolute(b)).map(|b| (i, b))
    });
    if let Some((fi, f)) = first("content-location") {
        let cl = parse_location(msg.value(e, f));
        if !cl.value.is_empty() {
            let base = as_base(&cl.value).or_else(|| {
                let (_, cb) = content_base.as_ref()?;
                resolve_bytes(cb, &cl.value).map(|r| strip_fragment(&r).to_string())
            });
            if let Some(base) = base {
                return Some(BaseSource {
                    entity,
                    field: fi,
                    content_base: false,
                    base,
                });
            }
        }
    }
    content_base.map(|(field, base)| BaseSource {
        entity,
        field,
        content_base: true,
        base,
    })
}

/// Where the base of `entity` comes from (see [`base_for`]); None when it is
/// `thismessage:/`.
pub fn base_source(msg: &Message, entity: usize) -> Option<BaseSource> {
    msg.entities.get(entity)?;
    std::iter::once(entity)
        .chain(msg.ancestors(entity))
        .find_map(|i| heading_base(msg, i))
}

/// The base URI for references inside entity `entity` (e.g. in its text/html body, after
/// any HTML `<base>`, RFC 2557 §5(a)): innermost heading first, an absolute
/// Content-Location, a relative one made absolute by a Content-Base beside it, or an
/// absolute Content-Base; else `thismessage:/`. Ill-formed octets are %-encoded as in
/// [`encode_for_comparison`]; a fragment is dropped.
pub fn base_for(msg: &Message, entity: usize) -> String {
    base_source(msg, entity)
        .map(|s| s.base)
        .unwrap_or_else(|| THIS_MESSAGE.to_string())
}

/// The resolved Content-Location of `entity` (its first Content-Location field), as
/// RFC 2557 §8.2 compares it: against a Content-Base of the same heading, else against
/// `parent_base` (the [`base_for`] of its parent, computed once for all the children of
/// one multipart). `None` when it has none or an empty one. A `Content-Location: cid:…`
/// resolves to itself: it never satisfies a `cid:` reference (RFC 2557 §8.3) but is
/// still a location. A value that cannot be resolved even leniently is returned as read,
/// so that equal values still compare equal.
pub(crate) fn resolved_location_with(
    msg: &Message,
    entity: usize,
    parent_base: &str,
) -> Option<String> {
    let e = msg.entities.get(entity)?;
    let cl = location_field(msg, e, "content-location")?;
    if cl.value.is_empty() {
        return None;
    }
    let own = location_field(msg, e, "content-base")
        .and_then(|l| as_base(&l.value))
        .filter(|b| is_absolute(b));
    let base = own.as_deref().unwrap_or(parent_base);
    Some(
        resolve_bytes(base, &cl.value)
            .unwrap_or_else(|| encode_for_comparison(&cl.value).into_owned()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::model::options::Limits;

    fn msg(raw: &[u8]) -> Message<'_> {
        Message::parse(raw, &Limits::default())
    }

    #[test]
    fn bases_follow_rfc2557_section_5() {
        let raw = b"Content-Type: multipart/related; boundary=b\nContent-Base: http://www.ietf.cnri.reston.va.us/\n\n--b\nContent-Location: http://other.test/dir/page.html\n\nx\n--b\nContent-Location: ietflogo.gif\n\ny\n--b\nContent-Location: foo2.bar2\nContent-Base: http://www.ietf.cnri.reston.va.us/frames/\n\nz\n--b--\n";
        let m = msg(raw);
        assert_eq!(base_for(&m, 0), "http://www.ietf.cnri.reston.va.us/");
        assert_eq!(base_for(&m, 1), "http://other.test/dir/page.html");
        assert_eq!(base_for(&m, 2), "http://www.ietf.cnri.reston.va.us/");
        assert_eq!(
            base_for(&m, 3),
            "http://www.ietf.cnri.reston.va.us/frames/foo2.bar2"
        );
        assert_eq!(
            resolved_location_with(&m, 2, &base_for(&m, 0)).as_deref(),
            Some("http://www.ietf.cnri.reston.va.us/ietflogo.gif")
        );
        assert_eq!(
            resolved_location_with(&m, 3, &base_for(&m, 0)).as_deref(),
            Some("http://www.ietf.cnri.reston.va.us/frames/foo2.bar2")
        );
        assert_eq!(resolved_location_with(&m, 0, THIS_MESSAGE), None);
    }

    #[test]
    fn relative_enclosing_location_is_not_a_base() {
        let raw = b"Content-Type: multipart/related; boundary=b\nContent-Location: dir/\n\n--b\nContent-Location: a.gif\n\nx\n--b--\n";
        let m = msg(raw);
        assert_eq!(base_for(&m, 1), THIS_MESSAGE);
        assert_eq!(
            resolved_location_with(&m, 1, &base_for(&m, 0)).as_deref(),
            Some("thismessage:/a.gif")
        );
        assert_eq!(
            resolved_location_with(&m, 0, THIS_MESSAGE).as_deref(),
            Some("thismessage:/dir/")
        );
        assert_eq!(base_for(&m, 99), THIS_MESSAGE);
    }
}
