//! The entity tree: every entity of a message (heading, body, kind, parent, children)
//! in document order, read by one iterative walk within the configured limits, and what
//! the checks ask of it (fields by name, part paths, ancestors).
//!
//! The entities, their fields and their children sit in three vectors for the whole
//! message rather than one per part, and a part's path is made only when asked for: a
//! 10 000-part message paid for every allocation and move a part.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use compact_str::CompactString;
use smallvec::SmallVec;

use super::delimiters::{split_multipart_indexed, DelimiterIndex};
use super::heading::{read_heading, Field};
use super::kinds::{
    default_type, kind_of, mime_field, ByKind, Kind, LastType, CONTENT_DISPOSITION, CONTENT_ID,
    CONTENT_TRANSFER_ENCODING, CONTENT_TYPE,
};
use crate::engine::model::options::Limits;
use crate::engine::syntax::ascii::eq_lower;
use crate::engine::syntax::cturi_map::uri_forms;
use crate::engine::syntax::decode::{self, parse_encoding, Encoding};
use crate::engine::syntax::params::ContentType;

/// One MIME entity: a heading and a body.
#[derive(Debug, Clone)]
pub struct Entity {
    /// Index into [`Message::buffers`]; 0 is the original message.
    pub buf: usize,
    pub parent: Option<usize>,
    /// 0 for the top level; +1 per multipart or encapsulation.
    pub depth: usize,
    /// From the first field to the end of the last one (the blank line excluded).
    pub header: Range<usize>,
    pub body: Range<usize>,
    /// This heading's fields: a range of [`Message::all_fields`] (read them with
    /// [`Message::fields`]). One vector for the whole message rather than one per part.
    pub field_span: Range<usize>,
    /// The effective Content-Type (defaults applied: text/plain, or message/rfc822
    /// inside multipart/digest). Shared between the parts that repeat one value: a
    /// 10 000-part message paid for copying, moving and dropping 10 000 of them.
    pub ctype: Arc<ContentType>,
    /// Index into the entity's fields of the Content-Type field used, if any.
    pub ctype_field: Option<usize>,
    /// Index into the entity's fields of its first Content-ID field, if any: the
    /// Content-ID rules look for it on every part, and comparing each field's name
    /// there cost a 10 000-part message ~50 instructions a part.
    pub cid_field: Option<usize>,
    /// Index into the entity's fields of its first Content-Disposition field, if any:
    /// the file-name rules read it on every part that names a file. 32 bits: a heading
    /// of more fields than that is not read whole anyway, and the entity stays small.
    pub disposition_field: Option<u32>,
    pub encoding: Encoding,
    pub kind: Kind,
    /// This entity's number among the body parts of its parent multipart (1, 2…; 0
    /// otherwise): with the parent's path it makes this entity's path, built only when
    /// asked for ([`Message::path`]), since most messages never print one.
    number: u32,
    /// This entity's children: a range of [`Message::all_children`] (read them with
    /// [`Message::children`]). One vector for the whole message rather than one per part.
    child_span: Range<usize>,
    /// The heading uses CRLF line endings (else LF).
    pub crlf: bool,
    /// The heading did not end with an empty line: the body starts at the first line
    /// that is not a header field.
    pub no_separator: bool,
    /// The MIME fields the heading has, as bits (`CONTENT_LOCATION`…): rules that look
    /// at every part can pass over one without the field they need without comparing
    /// the names of its fields.
    has: u8,
}

impl Entity {
    /// Whether the heading has one of the MIME fields `bits` names (`CONTENT_BASE | …`).
    pub fn has(&self, bits: u8) -> bool {
        self.has & bits != 0
    }

    /// Fields can be edited in place (they lie in the original bytes).
    pub fn editable(&self) -> bool {
        self.buf == 0
    }

    pub fn eol(&self) -> &'static [u8] {
        if self.crlf {
            b"\r\n"
        } else {
            b"\n"
        }
    }
}

/// Limits hit while scanning.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overflow {
    /// Entity whose children were not analysed because of the depth limit.
    pub depth_at: Option<usize>,
    /// Entity whose further children were not analysed because of the part limit.
    pub parts_at: Option<usize>,
}

/// A scanned message.
#[derive(Debug, Clone)]
pub struct Message<'a> {
    /// 0 is the original message; later buffers hold decoded encapsulated messages.
    pub buffers: Vec<Cow<'a, [u8]>>,
    /// Entities in document order; 0 is the top level.
    pub entities: Vec<Entity>,
    /// The header fields of every entity, entity after entity.
    pub all_fields: Vec<Field>,
    /// The children of every container entity, entity after entity, each in document
    /// order.
    all_children: Vec<usize>,
    /// The entities listed by kind.
    by_kind: ByKind,
    pub overflow: Overflow,
    /// Length of the original input.
    pub len: usize,
}

impl<'a> Message<'a> {
    pub fn parse(raw: &'a [u8], limits: &Limits) -> Message<'a> {
        let mut m = Message {
            buffers: vec![Cow::Borrowed(raw)],
            entities: Vec::new(),
            all_fields: Vec::new(),
            all_children: Vec::new(),
            by_kind: ByKind::default(),
            overflow: Overflow::default(),
            len: raw.len(),
        };
        m.scan(limits);
        m
    }

    /// The multipart/related entities (a multipart's kind and type), in document order.
    pub fn related(&self) -> &[usize] {
        &self.by_kind.related
    }

    /// The text/html leaves (no phantom heading), in document order.
    pub fn html_leaves(&self) -> &[usize] {
        &self.by_kind.html_leaves
    }

    /// The message/external-body entities, in document order.
    pub fn external_bodies(&self) -> &[usize] {
        &self.by_kind.external_bodies
    }

    /// The entities whose Content-Type field has a form of a URI's mapping
    /// (draft-eastlake-cturi, see `cturi_map::uri_forms`), in document order.
    pub fn uri_types(&self) -> &[usize] {
        &self.by_kind.uri_types
    }

    /// The header fields of `e`, in order.
    pub fn fields(&self, e: &Entity) -> &[Field] {
        self.all_fields.get(e.field_span.clone()).unwrap_or(&[])
    }

    /// The children of `e` (body parts, encapsulated message or phantom heading), in
    /// document order.
    pub fn children(&self, e: &Entity) -> &[usize] {
        self.all_children.get(e.child_span.clone()).unwrap_or(&[])
    }

    /// The IMAP-style part path of `e` (`0`, `1`, `2.3`, `2.0` for the message
    /// encapsulated in 2), made from the numbers of its ancestors.
    pub fn path(&self, e: &Entity) -> CompactString {
        // Checks ask for paths of every part with a finding: the ancestors are kept
        // inline, and the path is written as octets in place (each CompactString::push
        // checks its capacity and UTF-8 width) and made a string once.
        let mut chain: SmallVec<[&Entity; 16]> = SmallVec::new();
        let mut at = e;
        while let Some(p) = at.parent {
            chain.push(at);
            at = &self.entities[p];
        }
        let mut path = PathOctets::new();
        for child in chain.into_iter().rev() {
            let Some(parent) = child.parent else { break };
            match self.entities[parent].kind {
                Kind::Multipart { .. } => push_child_number(&mut path, child.number),
                Kind::Message => push_encapsulated(&mut path),
                // The phantom heading of an external body has the path of the body's part.
                _ => {}
            }
        }
        // Empty for the message itself; only digits and dots otherwise.
        match std::str::from_utf8(&path) {
            Ok(p) if !p.is_empty() => CompactString::new(p),
            _ => CompactString::const_new("0"),
        }
    }

    pub fn buf(&self, e: &Entity) -> &[u8] {
        &self.buffers[e.buf]
    }

    pub fn name<'s>(&'s self, e: &Entity, f: &Field) -> &'s [u8] {
        &self.buffers[e.buf][f.name.clone()]
    }

    pub fn value<'s>(&'s self, e: &Entity, f: &Field) -> &'s [u8] {
        &self.buffers[e.buf][f.value.clone()]
    }

    /// The fields of `e` named `name` (given in lower case; fields match in any case), in
    /// order.
    pub fn fields_named<'s>(
        &'s self,
        e: &'s Entity,
        name: &'s str,
    ) -> impl Iterator<Item = (usize, &'s Field)> + 's {
        self.fields(e)
            .iter()
            .enumerate()
            .filter(move |(_, f)| eq_lower(self.name(e, f), name.as_bytes()))
    }

    /// The first Content-ID field of `e`, as the scan found it.
    pub fn content_id<'s>(&'s self, e: &'s Entity) -> Option<&'s Field> {
        e.cid_field.and_then(|i| self.fields(e).get(i))
    }

    /// The Content-ID fields of `e`, in order, with their indexes (the first as the
    /// scan found it, without comparing the names of the fields before it).
    pub fn content_ids<'s>(
        &'s self,
        e: &'s Entity,
    ) -> impl Iterator<Item = (usize, &'s Field)> + 's {
        let first = e.cid_field.unwrap_or(usize::MAX);
        let buf = self.buf(e);
        self.fields(e)
            .iter()
            .enumerate()
            .skip(first)
            .filter(move |(i, f)| *i == first || eq_lower(&buf[f.name.clone()], b"content-id"))
    }

    /// The first field of `e` named `name` (given in lower case).
    pub fn field<'s>(&'s self, e: &'s Entity, name: &'s str) -> Option<&'s Field> {
        self.fields_named(e, name).next().map(|(_, f)| f)
    }

    /// 1-based occurrence of field `i` among the same-named fields of its heading.
    pub fn occurrence(&self, e: &Entity, i: usize) -> usize {
        let fields = self.fields(e);
        let Some(field) = fields.get(i) else {
            return 0;
        };
        let name = self.name(e, field);
        fields[..=i]
            .iter()
            .filter(|f| self.name(e, f).eq_ignore_ascii_case(name))
            .count()
    }

    /// The location of field `i` of entity `e` for an edit.
    pub fn field_loc(&self, e: &Entity, i: usize) -> crate::engine::model::edit::FieldLoc {
        crate::engine::model::edit::FieldLoc {
            part: self.path(e).to_string(),
            name: String::from_utf8_lossy(self.name(e, &self.fields(e)[i])).into_owned(),
            occurrence: self.occurrence(e, i),
            top_level: e.parent.is_none() && e.buf == 0,
        }
    }

    /// The body bytes of `e` (still transfer-encoded).
    pub fn body(&self, e: &Entity) -> &[u8] {
        &self.buffers[e.buf][e.body.clone()]
    }

    /// Ancestors of entity `i`, innermost first.
    pub fn ancestors(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        std::iter::successors(self.entities[i].parent, move |&p| self.entities[p].parent)
    }

    /// Reads every entity, depth first in document order, within `limits`.
    fn scan(&mut self, limits: &Limits) {
        let mut p = Pending {
            buf: 0,
            range: 0..self.buffers[0].len(),
            parent: None,
            depth: 0,
            number: 0,
            slot: 0,
            digest: false,
            phantom: false,
        };
        // The children still to be read, innermost container last; `queued` counts them.
        let mut work: Vec<Children> = Vec::new();
        let mut queued = 0;
        // One delimiter index per buffer, built when its first multipart is split.
        let mut index: Vec<Option<DelimiterIndex>> = Vec::new();
        let mut last_type = LastType::default();
        loop {
            let idx = self.entities.len();
            let depth = p.depth;
            // The entity goes straight into place: it is large, and a 10 000-part
            // message paid for every extra move of it.
            let container = self.read_entity(&p, depth, &mut last_type);
            if p.parent.is_some() {
                self.all_children[p.slot] = idx;
            }
            if container {
                let descend = if depth >= limits.max_depth {
                    if self.overflow.depth_at.is_none() {
                        self.overflow.depth_at = Some(idx);
                    }
                    false
                } else {
                    true
                };
                if let Some(c) = self.children_of(idx, descend, &mut index, queued, limits) {
                    queued += c.ranges.len();
                    work.push(c);
                }
            }
            // The next entity is the first child left of the innermost container: a
            // container's children are all read before its next sibling.
            p = loop {
                let Some(c) = work.last_mut() else {
                    return;
                };
                if let Some(p) = c.next() {
                    break p;
                }
                work.pop();
            };
            queued -= 1;
        }
    }

    /// The children of container entity `idx` still to be read (`queued` are already
    /// waiting). A multipart's body is split whatever `descend` says (its kind records
    /// what the split found); its parts, an encapsulated message or a phantom heading
    /// are read only with `descend`.
    fn children_of(
        &mut self,
        idx: usize,
        descend: bool,
        index: &mut Vec<Option<DelimiterIndex>>,
        queued: usize,
        limits: &Limits,
    ) -> Option<Children> {
        let e = &self.entities[idx];
        let (ebuf, body) = (e.buf, e.body.clone());
        match e.kind.clone() {
            Kind::Multipart { boundary, .. } => {
                self.split_parts(idx, boundary, descend, index, queued, limits)
            }
            Kind::Message if descend => {
                // Decoded first: the buffers are numbered as they were before admit().
                let (buf, range) = self.encapsulated(idx);
                (self.admit(idx, 1, queued, limits) == 1)
                    .then(|| Children::one(self, idx, buf, range, false))
            }
            Kind::ExternalBody if descend && self.admit(idx, 1, queued, limits) == 1 => {
                Some(Children::one(self, idx, ebuf, body, true))
            }
            _ => None,
        }
    }

    /// How many of `wanted` children of `parent` fit `limits.max_parts` beside the
    /// entities read and the `queued` ones; the first overflow is recorded when not all
    /// do. Their slots are added to [`Message::all_children`] as `parent`'s range.
    fn admit(&mut self, parent: usize, wanted: usize, queued: usize, limits: &Limits) -> usize {
        let room = limits
            .max_parts
            .saturating_sub(self.entities.len() + queued);
        let fits = wanted.min(room);
        if fits < wanted && self.overflow.parts_at.is_none() {
            self.overflow.parts_at = Some(parent);
        }
        let start = self.all_children.len();
        self.all_children.resize(start + fits, 0);
        self.entities[parent].child_span = start..start + fits;
        fits
    }

    /// Splits the body of multipart `idx` at `boundary`, records what the split found in
    /// its kind, and returns its parts to read when `descend`.
    fn split_parts(
        &mut self,
        idx: usize,
        boundary: Vec<u8>,
        descend: bool,
        index: &mut Vec<Option<DelimiterIndex>>,
        queued: usize,
        limits: &Limits,
    ) -> Option<Children> {
        let (ebuf, body) = (self.entities[idx].buf, self.entities[idx].body.clone());
        while index.len() <= ebuf {
            index.push(None);
        }
        let ix = index[ebuf].get_or_insert_with(|| DelimiterIndex::new(&self.buffers[ebuf]));
        let (mut parts, closed) = split_multipart_indexed(&self.buffers[ebuf], body, &boundary, ix);
        let e = &mut self.entities[idx];
        e.kind = Kind::Multipart {
            boundary,
            closed,
            no_parts: parts.is_empty(),
        };
        if !descend {
            return None;
        }
        let digest = e.ctype.subtype == "digest";
        let depth = e.depth + 1;
        // The parts beyond max_parts are the first ones (parts were once queued from
        // the last one, and the count checked at each): kept as they were.
        let fits = self.admit(idx, parts.len(), queued, limits);
        let skipped = parts.len() - fits;
        parts.drain(..skipped);
        self.entities.reserve(fits);
        self.all_fields.reserve(2 * fits);
        Some(Children {
            parent: idx,
            depth,
            buf: ebuf,
            ranges: parts.into_iter(),
            number: u32::try_from(skipped + 1).unwrap_or(u32::MAX),
            slot: self.all_children.len() - fits,
            digest,
            phantom: false,
        })
    }

    /// Where the message encapsulated in message/rfc822 entity `idx` lies (buffer and
    /// range), transfer-decoded into a buffer of its own when the entity is base64 or
    /// quoted-printable.
    fn encapsulated(&mut self, idx: usize) -> (usize, Range<usize>) {
        let e = &self.entities[idx];
        let (ebuf, body, encoding) = (e.buf, e.body.clone(), e.encoding);
        match encoding {
            Encoding::Base64 | Encoding::QuotedPrintable => {
                let decoded = decode::transfer_decode(&self.buffers[ebuf][body], encoding);
                let len = decoded.len();
                self.buffers.push(Cow::Owned(decoded));
                (self.buffers.len() - 1, 0..len)
            }
            _ => (ebuf, body),
        }
    }

    /// Reads the heading at `p` and appends the entity to `entities`; says whether it
    /// is a container (a multipart, an encapsulated message or an external body).
    fn read_entity(&mut self, p: &Pending, depth: usize, last_type: &mut LastType) -> bool {
        let buf: &[u8] = &self.buffers[p.buf];
        let first_field = self.all_fields.len();
        let h = read_heading(
            buf,
            p.range.clone(),
            p.parent.is_none() && p.buf == 0,
            &mut self.all_fields,
        );
        let fields = &self.all_fields[first_field..];
        let mut ctype = None;
        let mut ctype_field = None;
        let mut cid_field = None;
        let mut disposition_field = None;
        let mut encoding = Encoding::SevenBit;
        let mut parsed_type = None;
        let (mut html, mut uri_type) = (false, false);
        let mut has = 0;
        for (i, f) in fields.iter().enumerate() {
            let name = &buf[f.name.clone()];
            let known = mime_field(name);
            has |= known;
            if known == 0 {
                continue;
            }
            if ctype_field.is_none() && known == CONTENT_TYPE {
                match last_type.repeated(p.buf, buf, &f.value) {
                    Some(from) => {
                        ctype = from.map(|j| Arc::clone(&self.entities[j].ctype));
                        (html, uri_type) = (last_type.html, last_type.uri_type);
                    }
                    None => {
                        let ct = ContentType::parse(&buf[f.value.clone()]);
                        // RFC 2045 §5.2: an unreadable Content-Type means text/plain.
                        html = ct.is("text", "html");
                        let (tree, controlled) = uri_forms(&ct);
                        uri_type = tree || controlled;
                        if !ct.mtype.is_empty() {
                            ctype = Some(Arc::new(ct));
                        }
                        parsed_type = Some(f.value.clone());
                    }
                }
                ctype_field = Some(i);
            } else if known == CONTENT_TRANSFER_ENCODING {
                encoding = parse_encoding(&buf[f.value.clone()]);
            } else if cid_field.is_none() && known == CONTENT_ID {
                cid_field = Some(i);
            } else if disposition_field.is_none() && known == CONTENT_DISPOSITION {
                disposition_field = u32::try_from(i).ok();
            }
        }
        let ctype_read = ctype.is_some();
        let ctype = ctype.unwrap_or_else(|| default_type(p.digest));
        let kind = kind_of(&ctype, p.phantom);
        if let Some(value) = parsed_type {
            *last_type = LastType {
                buf: p.buf,
                value,
                entity: Some(ctype_read.then_some(self.entities.len())),
                html,
                uri_type,
            };
        }
        let idx = self.entities.len();
        self.by_kind.note(idx, &kind, &ctype, html, uri_type);
        // Built in the push, not in a local moved into it: two copies of this large
        // struct a part were a visible share of scanning 10 000 parts.
        let container = !matches!(kind, Kind::Leaf | Kind::Phantom);
        self.entities.push(Entity {
            buf: p.buf,
            parent: p.parent,
            depth,
            header: h.header,
            body: h.body,
            field_span: first_field..self.all_fields.len(),
            ctype,
            ctype_field,
            cid_field,
            disposition_field,
            encoding,
            kind,
            number: p.number,
            child_span: 0..0,
            crlf: h.crlf,
            no_separator: h.no_separator,
            has,
        });
        container
    }
}

/// The children of one container still to be read, in document order.
struct Children {
    parent: usize,
    /// The children's depth (see [`Entity::depth`]).
    depth: usize,
    buf: usize,
    ranges: std::vec::IntoIter<Range<usize>>,
    /// The number of the next one (see [`Entity::number`]): 0 for the single child of
    /// an encapsulation or external body.
    number: u32,
    /// The slot of the next one (see [`Pending::slot`]).
    slot: usize,
    digest: bool,
    phantom: bool,
}

impl Children {
    /// The single child of `parent`, whose slot [`Message::admit`] just added.
    fn one(m: &Message, parent: usize, buf: usize, range: Range<usize>, phantom: bool) -> Self {
        Children {
            parent,
            depth: m.entities[parent].depth + 1,
            buf,
            ranges: vec![range].into_iter(),
            number: 0,
            slot: m.all_children.len() - 1,
            digest: false,
            phantom,
        }
    }
}

impl Iterator for Children {
    type Item = Pending;

    fn next(&mut self) -> Option<Pending> {
        let range = self.ranges.next()?;
        let p = Pending {
            buf: self.buf,
            range,
            parent: Some(self.parent),
            depth: self.depth,
            number: self.number,
            slot: self.slot,
            digest: self.digest,
            phantom: self.phantom,
        };
        self.slot += 1;
        if self.number > 0 {
            self.number = self.number.saturating_add(1);
        }
        Some(p)
    }
}

/// One entity to read.
struct Pending {
    buf: usize,
    range: Range<usize>,
    parent: Option<usize>,
    depth: usize,
    /// See [`Entity::number`].
    number: u32,
    /// Where in [`Message::all_children`] the entity's index goes (with a parent).
    slot: usize,
    digest: bool,
    phantom: bool,
}

/// A part path being written: empty stands for `0`, the message itself.
type PathOctets = SmallVec<[u8; 24]>;

/// Turns the path of a multipart into the path of its body part `n`: the top-level
/// heading `0` numbers its parts 1, 2…; an encapsulated heading `P.0` numbers them P.1…
fn push_child_number(path: &mut PathOctets, n: u32) {
    if !path.is_empty() {
        if path.ends_with(b".0") {
            path.truncate(path.len() - 2);
        }
        path.push(b'.');
    }
    let mut digits = [0u8; 10];
    let mut at = digits.len();
    let mut n = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    path.extend_from_slice(&digits[at..]);
}

/// Turns the path of a message/rfc822 entity into that of the message it encapsulates:
/// a body part P holds message P.0; a heading whose own type is message/rfc822 (`0`,
/// `P.0`) has the encapsulated message as its body part 1, as IMAP numbers it.
fn push_encapsulated(path: &mut PathOctets) {
    if path.is_empty() {
        path.extend_from_slice(b"1.0");
    } else if path.ends_with(b".0") {
        path.truncate(path.len() - 2);
        path.extend_from_slice(b".1.0");
    } else {
        path.extend_from_slice(b".0");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &[u8]) -> Message<'_> {
        Message::parse(raw, &Limits::default())
    }

    /// A path as `Message::path` writes it: `0` is empty.
    fn octets(path: &str) -> PathOctets {
        if path == "0" {
            PathOctets::new()
        } else {
            PathOctets::from_slice(path.as_bytes())
        }
    }

    #[test]
    fn child_paths_match_decimal_numbering() {
        for (parent, n, want) in [
            ("0", 1, "1"),
            ("0", 10, "10"),
            ("2.1", 9, "2.1.9"),
            ("3.0", 10_000, "3.10000"),
            ("0", u32::MAX, "4294967295"),
        ] {
            let mut path = octets(parent);
            push_child_number(&mut path, n);
            assert_eq!(&*path, want.as_bytes());
        }
        for (parent, want) in [
            ("0", "1.0"),
            ("2", "2.0"),
            ("2.0", "2.1.0"),
            ("3.1.0", "3.1.1.0"),
        ] {
            let mut path = octets(parent);
            push_encapsulated(&mut path);
            assert_eq!(&*path, want.as_bytes());
        }
    }

    #[test]
    fn fields_and_body_offsets() {
        let raw = b"From: a\r\nSubject: x\r\n  y\r\nContent-Type: text/plain\r\n\r\nbody\r\n";
        let m = parse(raw);
        let e = &m.entities[0];
        assert_eq!(m.fields(e).len(), 3);
        assert_eq!(m.value(e, &m.fields(e)[1]), b" x\r\n  y");
        assert_eq!(
            &raw[m.fields(e)[1].start..m.fields(e)[1].end],
            b"Subject: x\r\n  y\r\n"
        );
        assert_eq!(m.body(e), b"body\r\n");
        assert!(e.crlf);
        assert_eq!(m.path(e), "0");
    }

    #[test]
    fn nested_multipart_paths_and_ranges() {
        let raw = b"Content-Type: multipart/mixed; boundary=a\n\npre\n--a\nContent-Type: text/plain\n\none\n--a\nContent-Type: multipart/related; boundary=\"ab\"\n\n--ab\n\ntwo\n--ab\nContent-Type: message/rfc822\n\nSubject: in\n\nthree\n--ab--\n--a--\nepi\n";
        let m = parse(raw);
        let paths: Vec<_> = m.entities.iter().map(|e| m.path(e)).collect();
        assert_eq!(paths, ["0", "1", "2", "2.1", "2.2", "2.2.0"]);
        assert_eq!(m.body(&m.entities[1]), b"one");
        assert_eq!(m.body(&m.entities[3]), b"two");
        assert_eq!(m.body(&m.entities[5]), b"three");
        assert_eq!(m.children(&m.entities[0]), [1, 2]);
        assert_eq!(m.children(&m.entities[2]), [3, 4]);
        assert!(matches!(
            m.entities[0].kind,
            Kind::Multipart { closed: true, .. }
        ));
    }

    /// Paths are made from the parents when asked for: body parts, encapsulated
    /// messages (`P.0`, `1.0` under a top-level message/rfc822), phantom headings (their
    /// external body's path), and the parts kept when max_parts cut the first ones.
    #[test]
    fn paths_are_derived_from_the_parents() {
        let raw = b"Content-Type: multipart/mixed; boundary=a\n\n--a\n\none\n--a\nContent-Type: message/rfc822\n\nContent-Type: multipart/mixed; boundary=b\n\n--b\n\nx\n--b\nContent-Type: message/external-body; access-type=x\n\nContent-ID: <p@x>\n\n--b--\n--a\nContent-Type: message/rfc822\n\nContent-Type: message/rfc822\n\nSubject: in\n\nz\n--a--\n";
        let m = parse(raw);
        let paths: Vec<_> = m.entities.iter().map(|e| m.path(e)).collect();
        assert_eq!(
            paths,
            ["0", "1", "2", "2.0", "2.1", "2.2", "2.2", "3", "3.0", "3.1.0"]
        );
        assert!(matches!(m.entities[6].kind, Kind::Phantom));
        assert_eq!(m.children(&m.entities[0]), [1, 2, 7]);
        assert_eq!(m.children(&m.entities[3]), [4, 5]);
        assert_eq!(m.children(&m.entities[5]), [6]);
        assert_eq!(m.children(&m.entities[1]), [0usize; 0]);

        let m = parse(b"Content-Type: message/rfc822\n\nContent-Type: multipart/mixed; boundary=c\n\n--c\n\n1\n--c\n\n2\n--c--\n");
        let paths: Vec<_> = m.entities.iter().map(|e| m.path(e)).collect();
        assert_eq!(paths, ["0", "1.0", "1.1", "1.2"]);

        let raw = b"Content-Type: multipart/mixed; boundary=a\n\n--a\n\n1\n--a\n\n2\n--a\n\n3\n--a\n\n4\n--a--\n";
        let limits = Limits {
            max_parts: 3,
            ..Limits::default()
        };
        let m = Message::parse(raw, &limits);
        let paths: Vec<_> = m.entities.iter().map(|e| m.path(e)).collect();
        assert_eq!(paths, ["0", "3", "4"]);
        assert_eq!(m.body(&m.entities[1]), b"3");
        assert_eq!(m.children(&m.entities[0]), [1, 2]);
        assert_eq!(m.overflow.parts_at, Some(0));
    }

    #[test]
    fn prefix_boundaries_are_not_delimiters() {
        let raw =
            b"Content-Type: multipart/mixed; boundary=abc\n\n--abc\n\nx\n--abcd\n\ny\n--abc--\n";
        let m = parse(raw);
        assert_eq!(m.entities.len(), 2);
        assert_eq!(m.body(&m.entities[1]), b"x\n--abcd\n\ny");
    }

    #[test]
    fn limits_stop_descent() {
        let mut raw = Vec::new();
        for i in 0..200 {
            raw.extend_from_slice(
                format!("Content-Type: multipart/mixed; boundary=b{i}\n\n--b{i}\n").as_bytes(),
            );
        }
        let m = Message::parse(
            &raw,
            &Limits {
                max_depth: 10,
                ..Limits::default()
            },
        );
        assert_eq!(m.entities.len(), 11);
        assert!(m.overflow.depth_at.is_some());
        let m = Message::parse(
            &raw,
            &Limits {
                max_parts: 5,
                ..Limits::default()
            },
        );
        assert_eq!(m.entities.len(), 5);
        assert!(m.overflow.parts_at.is_some());
    }

    #[test]
    fn missing_separator_and_garbage_never_panic() {
        for raw in [
            &b""[..],
            b"\n",
            b"no colon here\nx",
            b" leading continuation\nA: b\n\nc",
            b"A: b",
            b"A:\r",
            b"\r\n\r\n",
            b"Content-Type: multipart/mixed\n\n--\n",
        ] {
            let m = parse(raw);
            assert!(!m.entities.is_empty());
        }
        let m = parse(b"A: b\nnot a field\nmore");
        assert!(m.entities[0].no_separator);
        assert_eq!(m.body(&m.entities[0]), b"not a field\nmore");
    }

    #[test]
    fn mbox_from_line_is_skipped() {
        let m = parse(b"From someone Mon Jan  1 00:00:00 2001\nSubject: x\n\nb");
        assert_eq!(m.fields(&m.entities[0]).len(), 1);
    }

    #[test]
    fn occurrence_counts_same_name_fields() {
        let raw = b"Received: a\nX: 1\nreceived: b\n\n";
        let m = parse(raw);
        let e = &m.entities[0];
        assert_eq!(m.occurrence(e, 2), 2);
        assert_eq!(m.field_loc(e, 2).name, "received");
    }
}
