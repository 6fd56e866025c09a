//! What a heading's MIME fields make of its entity, read once by the scan so that the
//! rules need not read them again: which MIME fields it has (bits), the effective
//! Content-Type (a repeated value not parsed again), the kind of its body, and the lists
//! of entities by kind that rules looking at a few kinds start from.

use std::ops::Range;
use std::sync::{Arc, OnceLock};

use crate::engine::syntax::ascii::{field_name_is, same_octets};
use crate::engine::syntax::params::ContentType;

/// The MIME fields a heading has (see [`Entity::has`](super::Entity::has)), one bit each.
pub const CONTENT_TYPE: u8 = 1;
pub const CONTENT_TRANSFER_ENCODING: u8 = 2;
pub const CONTENT_ID: u8 = 4;
pub const CONTENT_LOCATION: u8 = 8;
pub const CONTENT_BASE: u8 = 16;
pub const CONTENT_DISPOSITION: u8 = 32;

/// Which of the MIME fields the checks look for `name` is (its bit), or 0. The length
/// settles it for nearly every other name, so each field costs at most one comparison.
/// Inlined, though the scan is in another file: called, it and [`kind_of`] put the
/// parts-10000 benchmark 2 % higher.
#[inline]
pub(super) fn mime_field(name: &[u8]) -> u8 {
    let is = |bit: u8, yes: bool| if yes { bit } else { 0 };
    match name.len() {
        10 => is(CONTENT_ID, field_name_is(name, b"content-id")),
        12 if name[8] | 0x20 == b'b' => is(CONTENT_BASE, field_name_is(name, b"content-base")),
        12 => is(CONTENT_TYPE, field_name_is(name, b"content-type")),
        16 => is(CONTENT_LOCATION, field_name_is(name, b"content-location")),
        19 => is(
            CONTENT_DISPOSITION,
            field_name_is(name, b"content-disposition"),
        ),
        25 => is(
            CONTENT_TRANSFER_ENCODING,
            field_name_is(name, b"content-transfer-encoding"),
        ),
        _ => 0,
    }
}

/// What an entity's body is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Leaf,
    /// A multipart; `children` are its body parts, in order.
    Multipart {
        boundary: Vec<u8>,
        /// The close delimiter was found.
        closed: bool,
        /// No delimiter line opens a part (the whole body is preamble; a close
        /// delimiter may still have been found, see `closed`).
        no_parts: bool,
    },
    /// message/rfc822 (or global/news): the child is the encapsulated message.
    Message,
    /// message/external-body: the child is the phantom heading and body.
    ExternalBody,
    /// The phantom heading and body inside a message/external-body.
    Phantom,
}

/// What the body of an entity of type `ctype` is, before a multipart's body is split.
#[inline]
pub(super) fn kind_of(ctype: &ContentType, phantom: bool) -> Kind {
    if phantom {
        Kind::Phantom
    } else if ctype.is_multipart() {
        match ctype.get("boundary") {
            Some(b) if !b.value.is_empty() => Kind::Multipart {
                boundary: b.value,
                closed: false,
                no_parts: true,
            },
            _ => Kind::Leaf,
        }
    } else if ctype.mtype == "message" {
        match &*ctype.subtype {
            "rfc822" | "global" | "news" => Kind::Message,
            "external-body" => Kind::ExternalBody,
            _ => Kind::Leaf,
        }
    } else {
        Kind::Leaf
    }
}

/// Where the last Content-Type value parsed is written, and the entity whose type it
/// gave (`None`: it was unreadable). The parts of a message mostly repeat a few values
/// (10 000 parts of `text/plain` spent a seventh of their analysis parsing the same
/// octets again), and the parse depends on the octets alone: a repeated value is
/// copied from that entity instead.
#[derive(Default)]
pub(super) struct LastType {
    pub(super) buf: usize,
    pub(super) value: Range<usize>,
    pub(super) entity: Option<Option<usize>>,
    /// The type is text/html.
    pub(super) html: bool,
    /// The value has a form of a URI's mapping.
    pub(super) uri_type: bool,
}

impl LastType {
    /// What the last value parsed to, when `value` of buffer `buf_index` repeats it.
    pub(super) fn repeated(
        &self,
        buf_index: usize,
        buf: &[u8],
        value: &Range<usize>,
    ) -> Option<Option<usize>> {
        let entity = self.entity?;
        let (Some(last), Some(this)) = (buf.get(self.value.clone()), buf.get(value.clone())) else {
            return None;
        };
        (buf_index == self.buf && same_octets(last, this)).then_some(entity)
    }
}

/// text/plain, or message/rfc822 in a digest: made once, shared by every entity
/// without a readable Content-Type.
pub(super) fn default_type(digest: bool) -> Arc<ContentType> {
    static DEFAULTS: OnceLock<[Arc<ContentType>; 2]> = OnceLock::new();
    let made = |t: &'static str, s: &'static str| {
        Arc::new(ContentType {
            mtype: t.into(),
            subtype: s.into(),
            ..Default::default()
        })
    };
    let [plain, rfc822] =
        DEFAULTS.get_or_init(|| [made("text", "plain"), made("message", "rfc822")]);
    Arc::clone(if digest { rfc822 } else { plain })
}

/// The entities the rules that look at a few kinds start from, in document order:
/// looking at every entity for them cost a 10 000-part message ~45 instructions a part.
/// See [`Message::related`](super::Message::related) and the next three.
#[derive(Debug, Clone, Default)]
pub(super) struct ByKind {
    pub(super) related: Vec<usize>,
    pub(super) html_leaves: Vec<usize>,
    pub(super) external_bodies: Vec<usize>,
    pub(super) uri_types: Vec<usize>,
}

impl ByKind {
    /// Lists entity `idx` of kind `kind` and type `ctype` where it belongs; `html` and
    /// `uri_type` as [`LastType`] has them.
    #[inline]
    pub(super) fn note(
        &mut self,
        idx: usize,
        kind: &Kind,
        ctype: &ContentType,
        html: bool,
        uri_type: bool,
    ) {
        match kind {
            Kind::Leaf if html => self.html_leaves.push(idx),
            Kind::Multipart { .. } if ctype.is("multipart", "related") => self.related.push(idx),
            Kind::ExternalBody => self.external_bodies.push(idx),
            _ => {}
        }
        if uri_type {
            self.uri_types.push(idx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::model::mime::heading::name_len;
    use crate::engine::model::mime::{Entity, Message};
    use crate::engine::model::options::Limits;
    use crate::engine::syntax::ascii::eq_lower;
    use crate::engine::syntax::cturi_map::uri_forms;
    use proptest::prelude::*;

    fn parse(raw: &[u8]) -> Message<'_> {
        Message::parse(raw, &Limits::default())
    }

    /// The lists of entities by kind are those a look at every entity finds, in
    /// document order: on every message of tests/corpus and tests/fixtures, and on
    /// repeated text/html, multipart/related and URI mapping values, a text/html
    /// phantom heading and an encapsulated message.
    #[test]
    fn entities_listed_by_kind_are_those_of_a_full_look() {
        let crafted: [&[u8]; 1] = [b"Content-Type: multipart/mixed; boundary=b\n\n\
            --b\nContent-Type: text/html\n\n<p>1\n\
            --b\nContent-Type: text/html\n\n<p>2\n\
            --b\nContent-Type: multipart/related; boundary=r\n\n\
            --r\nContent-Type: text/html\n\n<p>3\n--r--\n\
            --b\nContent-Type: multipart/related; boundary=r\n\n\
            --r\nContent-Type: TEXT/HTML\n\n<p>4\n--r--\n\
            --b\nContent-Type: message/external-body; access-type=URL; URL=\"http://a/\"\n\n\
            Content-Type: text/html\n\n\
            --b\nContent-Type: message/rfc822\n\n\
            Content-Type: text/html\n\n<p>5\n\
            --b\nContent-Type: application/uri.http; uri-body=\"//a/\"\n\n\
            --b\nContent-Type: application/uri.http; uri-body=\"//a/\"\n\n\
            --b\nContent-Type: text/plain; URI-Fragment=x\n\n\
            --b--\n"];
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
        let mut files: Vec<Vec<u8>> = crafted.iter().map(|m| m.to_vec()).collect();
        for dir in ["corpus", "fixtures"] {
            let mut stack = vec![root.join(dir)];
            while let Some(d) = stack.pop() {
                for entry in std::fs::read_dir(&d).unwrap().flatten() {
                    let path = entry.path();
                    if path.is_dir() {
                        stack.push(path);
                    } else {
                        files.push(std::fs::read(&path).unwrap());
                    }
                }
            }
        }
        assert!(files.len() > 500, "{} files", files.len());
        let mut seen = [0usize; 3];
        for raw in &files {
            let m = parse(raw);
            let look = |keep: &dyn Fn(&Entity) -> bool| -> Vec<usize> {
                (0..m.entities.len())
                    .filter(|&i| keep(&m.entities[i]))
                    .collect()
            };
            let related = look(&|e| {
                matches!(e.kind, Kind::Multipart { .. }) && e.ctype.is("multipart", "related")
            });
            let html = look(&|e| matches!(e.kind, Kind::Leaf) && e.ctype.is("text", "html"));
            let external = look(&|e| matches!(e.kind, Kind::ExternalBody));
            let uri = look(&|e| {
                let (tree, controlled) = uri_forms(&e.ctype);
                e.ctype_field.is_some() && (tree || controlled)
            });
            assert_eq!(m.related(), related);
            assert_eq!(m.html_leaves(), html);
            assert_eq!(m.external_bodies(), external);
            assert_eq!(m.uri_types(), uri);
            for (n, list) in seen.iter_mut().zip([&related, &html, &external]) {
                *n += list.len();
            }
        }
        // The message set has each kind, many times.
        assert!(seen.iter().all(|&n| n > 20), "{seen:?}");
        let m = parse(crafted[0]);
        assert_eq!(m.html_leaves().len(), 5, "{:?}", m.html_leaves());
        assert_eq!(m.uri_types().len(), 3, "{:?}", m.uri_types());
    }

    /// A Content-Type value repeated from the part before is taken from that part's
    /// parse: every part must still get exactly what its own value parses to, the
    /// default type where the value is unreadable (message/rfc822 in a digest, text/plain
    /// right after it), also in an encapsulated message's decoded buffer.
    #[test]
    fn repeated_content_types_are_each_parts_own() {
        let inner = "Content-Type: multipart/mixed; boundary=i\n\n--i\nContent-Type: text/html; charset=x\n\nh\n--i\nContent-Type: text/html; charset=x\n\nh\n--i--\n";
        let qp = inner.replace('=', "=3D");
        let raw = format!(
            "Content-Type: multipart/mixed; boundary=b\n\n\
             --b\nContent-Type: text/plain\n\n1\n\
             --b\nContent-Type: text/plain\n\n2\n\
             --b\nContent-Type: garbage\n\n3\n\
             --b\nContent-Type: garbage\n\n4\n\
             --b\nContent-Type: multipart/digest; boundary=d\n\n\
             --d\nContent-Type: text/plain; charset=\"a\"\n\n5\n\
             --d\nContent-Type: text/plain; charset=\"a\"\n\n6\n\
             --d\nContent-Type: garbage\n\n7\n\
             --d\nContent-Type: garbage\n\n8\n\
             --d--\n\
             --b\nContent-Type: garbage\n\n9\n\
             --b\nContent-Type: message/rfc822\nContent-Transfer-Encoding: quoted-printable\n\n{qp}\n\
             --b\nContent-Type: text/html; charset=x\n\nh\n\
             --b--\n"
        );
        let m = parse(raw.as_bytes());
        let mut digests = 0;
        for e in &m.entities {
            let digest = e
                .parent
                .is_some_and(|p| m.entities[p].ctype.is("multipart", "digest"));
            digests += usize::from(digest);
            let want = match e.ctype_field {
                Some(i) => {
                    let ct = ContentType::parse(m.value(e, &m.fields(e)[i]));
                    if ct.mtype.is_empty() {
                        default_type(digest)
                    } else {
                        Arc::new(ct)
                    }
                }
                None => default_type(digest),
            };
            assert_eq!(*e.ctype, *want, "part {}", m.path(e));
        }
        assert_eq!(digests, 4);
        let html = m.entities.iter().filter(|e| e.ctype.is("text", "html"));
        assert_eq!(html.map(|e| e.buf).collect::<Vec<_>>(), [1, 1, 0]);
    }

    /// The scan's Content-ID index names the same fields as a look at every name: in any
    /// place and case, twice, not at all, on a phantom heading and in an encapsulated
    /// message's decoded buffer.
    #[test]
    fn content_id_index_is_the_first_content_id_field() {
        let inner = "Content-Type: multipart/mixed; boundary=i\nContent-ID: <in@x>\n\n--i\nCONTENT-id: <a@x>\nContent-Type: text/html; charset=x\n\nh\n--i--\n";
        let qp = inner.replace('=', "=3D");
        let raw = format!(
            "Content-ID: <top@x>\nContent-Type: multipart/mixed; boundary=b\n\n\
             --b\nContent-Type: text/plain\n\n1\n\
             --b\nContent-Type: text/plain\nContent-IDs: <no@x>\nContent-Id: <b@x>\nContent-ID: <c@x>\n\
             Content-Dispositions: x\nCONTENT-disposition: attachment\nContent-Disposition: inline\n\n2\n\
             --b\nContent-Type: message/external-body; access-type=URL; URL=\"http://x/\"\n\n\
             Content-Type: text/plain\nContent-ID: <ph@x>\n\n\
             --b\nContent-Type: message/rfc822\nContent-Transfer-Encoding: quoted-printable\n\n{qp}\n\
             --b--\n"
        );
        let m = parse(raw.as_bytes());
        let mut with_id = Vec::new();
        for e in &m.entities {
            let want: Vec<usize> = m.fields_named(e, "content-id").map(|(i, _)| i).collect();
            let got: Vec<usize> = m.content_ids(e).map(|(i, _)| i).collect();
            assert_eq!(got, want, "part {}", m.path(e));
            assert_eq!(e.cid_field, want.first().copied(), "part {}", m.path(e));
            let cd = m
                .fields_named(e, "content-disposition")
                .map(|(i, _)| i)
                .next();
            assert_eq!(
                e.disposition_field.map(|i| i as usize),
                cd,
                "part {}",
                m.path(e)
            );
            assert_eq!(
                m.content_id(e).map(|f| m.value(e, f)),
                m.field(e, "content-id").map(|f| m.value(e, f)),
            );
            if let Some(f) = m.content_id(e) {
                with_id.push((e.buf, m.value(e, f).trim_ascii().to_vec()));
            }
        }
        let ids: Vec<(usize, &[u8])> = with_id.iter().map(|(b, v)| (*b, &v[..])).collect();
        assert_eq!(
            ids,
            [
                (0, &b"<top@x>"[..]),
                (0, b"<b@x>"),
                (0, b"<ph@x>"),
                (1, b"<in@x>"),
                (1, b"<a@x>")
            ]
        );
    }

    proptest! {
        /// The scan's field-name comparison answers as `eq_lower` does for every name the
        /// scan can read (ftext only): the six names in any case, names one octet off,
        /// and the octets that OR 0x20 could confuse.
        #[test]
        fn mime_field_names_compare_as_eq_lower(
            which in 0usize..6,
            flips in proptest::collection::vec(any::<bool>(), 25),
            swap in proptest::option::of((0usize..25, prop_oneof![
                Just(b'-'), Just(b'\r' | 0x20), Just(b'@'), Just(b'`'), Just(b'{'),
                Just(b'['), Just(b'^'), Just(b'~'), Just(b'0'), Just(b'_'), 0x21u8..0x7f,
            ])),
        ) {
            const NAMES: [(&[u8], u8); 6] = [
                (b"content-id", CONTENT_ID), (b"content-base", CONTENT_BASE),
                (b"content-type", CONTENT_TYPE), (b"content-location", CONTENT_LOCATION),
                (b"content-disposition", CONTENT_DISPOSITION),
                (b"content-transfer-encoding", CONTENT_TRANSFER_ENCODING),
            ];
            let mut name = NAMES[which].0.to_vec();
            for (b, up) in name.iter_mut().zip(&flips) {
                if *up {
                    *b = b.to_ascii_uppercase();
                }
            }
            if let Some((at, b)) = swap {
                let at = at % name.len();
                name[at] = b;
            }
            // Only names the scan reads: a CR or a colon ends a name there.
            if name_len(&name) != name.len() {
                return Ok(());
            }
            for (lower, _) in NAMES {
                prop_assert_eq!(field_name_is(&name, lower), eq_lower(&name, lower));
            }
            let want = NAMES.iter().find(|(lower, _)| eq_lower(&name, lower)).map_or(0, |&(_, bit)| bit);
            prop_assert_eq!(mime_field(&name), want);
        }
    }
}
