//! MIME structure with byte offsets: every heading, every header field, every body.
//!
//! Our own scanner rather than a full parser: fixes need the exact bytes of each field,
//! and the checks never need decoded attachments, so bodies are only searched for
//! boundary delimiters (memmem), never copied or decoded. The walk is iterative, so deep
//! nesting costs heap, not stack, and it stops at the configured limits.
//!
//! Encapsulated messages sent base64- or quoted-printable-encoded are decoded into a
//! side buffer and analysed there; their offsets do not point into the original bytes,
//! so they are marked not editable (`buf != 0`).

use std::borrow::Cow;
use std::ops::{ControlFlow, Range};
use std::sync::{Arc, OnceLock};

use compact_str::CompactString;
use memchr::memmem;
use smallvec::SmallVec;

use crate::engine::model::options::Limits;
use crate::engine::syntax::ascii::{eq_lower, field_name_is, same_octets};
use crate::engine::syntax::cturi_map::uri_forms;
use crate::engine::syntax::decode::{self, parse_encoding, Encoding};
use crate::engine::syntax::params::ContentType;

/// One header field: `name: value EOL` (with any folded continuation lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// First octet of the name.
    pub start: usize,
    pub name: Range<usize>,
    /// After the colon up to (not including) the line ending that ends the field.
    pub value: Range<usize>,
    /// After the line ending that ends the field (or `value.end` at end of input).
    pub end: usize,
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
    /// The entities the rules that look at a few kinds start from, in document order:
    /// looking at every entity for them cost a 10 000-part message ~45 instructions a
    /// part. See [`Message::related`], [`Message::html_leaves`],
    /// [`Message::external_bodies`], [`Message::uri_types`].
    related: Vec<usize>,
    html_leaves: Vec<usize>,
    external_bodies: Vec<usize>,
    uri_types: Vec<usize>,
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
            related: Vec::new(),
            html_leaves: Vec::new(),
            external_bodies: Vec::new(),
            uri_types: Vec::new(),
            overflow: Overflow::default(),
            len: raw.len(),
        };
        m.scan(limits);
        m
    }

    /// The multipart/related entities (a multipart's kind and type), in document order.
    pub fn related(&self) -> &[usize] {
        &self.related
    }

    /// The text/html leaves (no phantom heading), in document order.
    pub fn html_leaves(&self) -> &[usize] {
        &self.html_leaves
    }

    /// The message/external-body entities, in document order.
    pub fn external_bodies(&self) -> &[usize] {
        &self.external_bodies
    }

    /// The entities whose Content-Type field has a form of a URI's mapping
    /// (draft-eastlake-cturi, see `cturi_map::uri_forms`), in document order.
    pub fn uri_types(&self) -> &[usize] {
        &self.uri_types
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
        match kind {
            Kind::Leaf if html => self.html_leaves.push(idx),
            Kind::Multipart { .. } if ctype.is("multipart", "related") => self.related.push(idx),
            Kind::ExternalBody => self.external_bodies.push(idx),
            _ => {}
        }
        if uri_type {
            self.uri_types.push(idx);
        }
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

/// The MIME fields a heading has (see [`Entity::has`]), one bit each.
pub const CONTENT_TYPE: u8 = 1;
pub const CONTENT_TRANSFER_ENCODING: u8 = 2;
pub const CONTENT_ID: u8 = 4;
pub const CONTENT_LOCATION: u8 = 8;
pub const CONTENT_BASE: u8 = 16;
pub const CONTENT_DISPOSITION: u8 = 32;

/// Which of the MIME fields the checks look for `name` is (its bit), or 0. The length
/// settles it for nearly every other name, so each field costs at most one comparison.
fn mime_field(name: &[u8]) -> u8 {
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

/// What the body of an entity of type `ctype` is, before a multipart's body is split.
fn kind_of(ctype: &ContentType, phantom: bool) -> Kind {
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
struct LastType {
    buf: usize,
    value: Range<usize>,
    entity: Option<Option<usize>>,
    /// The type is text/html.
    html: bool,
    /// The value has a form of a URI's mapping.
    uri_type: bool,
}

impl LastType {
    /// What the last value parsed to, when `value` of buffer `buf_index` repeats it.
    fn repeated(
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

/// text/plain, or message/rfc822 in a digest: made once, shared by every entity
/// without a readable Content-Type.
fn default_type(digest: bool) -> Arc<ContentType> {
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

struct Heading {
    header: Range<usize>,
    body: Range<usize>,
    crlf: bool,
    no_separator: bool,
}

/// Reads header fields from `range.start` until an empty line, or until a line that is
/// neither a field nor a continuation (then the body starts at that line).
/// The fields are appended to `all`.
fn read_heading(buf: &[u8], range: Range<usize>, top: bool, all: &mut Vec<Field>) -> Heading {
    let end = range.end;
    let mut pos = range.start;
    let first = all.len();
    let fields = all;
    let mut crlf_lines = 0usize;
    let mut lf_lines = 0usize;
    // An mbox "From " envelope line is not part of the message proper.
    if top && buf[pos..end].starts_with(b"From ") {
        pos = line_end(buf, pos, end).1;
    }
    let header_start = pos;
    let mut body_start = end;
    let mut no_separator = true;
    let mut last_line_end = pos;
    // Counts a line's ending: CRLF, LF, or none (the last line of the input).
    let mut count = |content_end: usize, next: usize| match next - content_end {
        2 => crlf_lines += 1,
        1 => lf_lines += 1,
        _ => {}
    };
    while pos < end {
        // Each kind of line is handled whole in its arm: the empty line that ends the
        // heading needs no search for its end, and a field's line is searched from its
        // colon, the name having just been read.
        match buf[pos] {
            b'\n' => {
                count(pos, pos + 1);
                body_start = pos + 1;
                no_separator = false;
                break;
            }
            b'\r' if pos + 1 < end && buf[pos + 1] == b'\n' => {
                count(pos, pos + 2);
                body_start = pos + 2;
                no_separator = false;
                break;
            }
            b' ' | b'\t' => {
                // A continuation. Before any field it belongs to nothing; keep it in the
                // heading so that the bytes are not mistaken for body.
                let (content_end, next) = line_end(buf, pos, end);
                count(content_end, next);
                if let Some(f) = fields[first..].last_mut() {
                    f.value.end = content_end;
                    f.end = next;
                }
                last_line_end = next;
                pos = next;
            }
            _ => match field_name_end(&buf[pos..end]) {
                Some((name_len, colon)) => {
                    let (content_end, next) = line_end(buf, pos + colon + 1, end);
                    count(content_end, next);
                    fields.push(Field {
                        start: pos,
                        name: pos..pos + name_len,
                        value: pos + colon + 1..content_end,
                        end: next,
                    });
                    last_line_end = next;
                    pos = next;
                }
                None => {
                    let (content_end, next) = line_end(buf, pos, end);
                    count(content_end, next);
                    body_start = pos;
                    break;
                }
            },
        }
    }
    if pos >= end {
        body_start = end;
    }
    let header_end = fields[first..]
        .last()
        .map_or(header_start, |f| f.end)
        .max(last_line_end.min(body_start));
    Heading {
        header: header_start..header_end.max(header_start),
        body: body_start.min(end)..end,
        crlf: crlf_lines >= lf_lines && crlf_lines > 0,
        no_separator,
    }
}

/// The top-level heading at the start of `buf` read on past the lines that are no field,
/// up to the empty line or the end: the fields the heading scan reads, and in its order
/// each line where it would start the body, with the continuation lines after it, as a
/// field whose name is empty and whose value starts at the line's first octet. For
/// readers that pass over a stray line rather than take the rest for the body: scope
/// matching and `survey`. An mbox `From ` line is such a line here.
pub fn fields_read_on(buf: &[u8]) -> Vec<Field> {
    let end = buf.len();
    let mut fields = Vec::new();
    let mut pos = 0;
    while pos < end {
        let h = read_heading(buf, pos..end, false, &mut fields);
        if !h.no_separator || h.body.start >= end {
            break;
        }
        let start = h.body.start;
        let (mut value_end, mut next) = line_end(buf, start, end);
        while next < end && matches!(buf[next], b' ' | b'\t') {
            (value_end, next) = line_end(buf, next, end);
        }
        fields.push(Field {
            start,
            name: start..start,
            value: start..value_end,
            end: next,
        });
        pos = next;
    }
    fields
}

/// [`fields_read_on`] over `buf` handed about `piece` octets at a time, each piece cut
/// where a line that is no continuation line begins, so that the scan reads the same
/// fields as over the whole: each piece's fields, with offsets into `buf`, go to `each`
/// until the heading ends or `each` breaks. A caller that keeps few of them holds one
/// piece's records at a time, not one per line of a large message file that has no
/// empty line.
pub fn fields_read_on_by_piece(
    buf: &[u8],
    piece: usize,
    mut each: impl FnMut(&[Field]) -> ControlFlow<()>,
) {
    let mut at = 0;
    while at < buf.len() {
        let cut = next_field_start(buf, (at + piece.max(1)).min(buf.len()), buf.len());
        let mut fields = fields_read_on(&buf[at..cut]);
        // The scan stopped before the cut at the empty line that ends the heading; a
        // first piece of nothing but continuation lines gives no field and no end.
        let ended = match fields.last() {
            Some(f) => f.end != cut - at,
            None => {
                let continuation = matches!(buf.first(), Some(b' ' | b'\t'));
                !(at == 0 && continuation && next_field_start(buf, 0, cut) == cut)
            }
        };
        for f in &mut fields {
            let shift = |r: &Range<usize>| r.start + at..r.end + at;
            (f.start, f.name, f.value, f.end) =
                (f.start + at, shift(&f.name), shift(&f.value), f.end + at);
        }
        if each(&fields).is_break() || ended {
            return;
        }
        at = cut;
    }
}

/// Where the first line at or after `from` that is no continuation line begins, or
/// `end`: a heading handed to the scan in two pieces cut there reads as one.
pub fn next_field_start(b: &[u8], from: usize, end: usize) -> usize {
    memchr::memchr_iter(b'\n', &b[from..end])
        .map(|lf| from + lf + 1)
        .find(|&next| next == end || !matches!(b[next], b' ' | b'\t'))
        .unwrap_or(end)
}

/// The length of the name and the position of the colon when `line` starts with a
/// field name (printable ASCII, no colon; obsolete whitespace before the colon allowed,
/// and not part of the name).
fn field_name_end(line: &[u8]) -> Option<(usize, usize)> {
    let i = name_len(line);
    if i == 0 {
        return None;
    }
    let mut j = i;
    while j < line.len() && matches!(line[j], b' ' | b'\t') {
        j += 1;
    }
    (j < line.len() && line[j] == b':').then_some((i, j))
}

/// How many octets at the start of `line` are [`FIELD_NAME`] octets. Eight at a time
/// while eight are left: it runs over the name of every field of every part.
fn name_len(line: &[u8]) -> usize {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let mut at = 0;
    while let Some(word) = line.get(at..at + 8) {
        let x = u64::from_le_bytes(word.try_into().unwrap_or([0; 8]));
        // Octets below 0x21, above 0x7e, and colons. In each test the lowest flagged
        // octet is a true one (a borrow or carry only flags octets above one), so the
        // lowest of all three is the first octet that is not ftext.
        let below = x.wrapping_sub(ONES * 0x21) & !x;
        let above = x.wrapping_add(ONES) | x;
        let colon = x ^ (ONES * u64::from(b':'));
        let colon = colon.wrapping_sub(ONES) & !colon;
        let bad = (below | above | colon) & HIGH;
        if bad != 0 {
            return at + (bad.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at + line[at..]
        .iter()
        .position(|&b| !FIELD_NAME[usize::from(b)])
        .unwrap_or(line.len() - at)
}

/// Octets of a field name (RFC 5322 ftext): printable ASCII but the colon.
static FIELD_NAME: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0x21;
    while b < 0x7f {
        t[b] = b != 0x3a;
        b += 1;
    }
    t
};

/// (end of line content, start of next line). CRLF or LF end a line; a bare CR does not.
pub(crate) fn line_end(buf: &[u8], pos: usize, end: usize) -> (usize, usize) {
    match find_lf(&buf[pos..end]) {
        Some(n) => {
            let lf = pos + n;
            let content_end = if lf > pos && buf[lf - 1] == b'\r' {
                lf - 1
            } else {
                lf
            };
            (content_end, lf + 1)
        }
        None => (end, end),
    }
}

/// Position of the first LF in `hay`. Called once per header line and per `--` line:
/// on x86-64 the SSE2 searcher (always present there) is called directly, which saves
/// `memchr`'s run-time choice of implementation on each of these short searches.
#[cfg(target_arch = "x86_64")]
fn find_lf(hay: &[u8]) -> Option<usize> {
    match memchr::arch::x86_64::sse2::memchr::One::new(b'\n') {
        Some(lf) => lf.find(hay),
        None => memchr::memchr(b'\n', hay),
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn find_lf(hay: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', hay)
}

/// Splits a multipart body into its parts (ranges of each part's heading and body) and
/// says whether the close delimiter was seen. RFC 2046 §5.1.1: the line break before a
/// delimiter belongs to the delimiter; after the boundary only `--` (close) and
/// transport padding may follow on the line, so a longer boundary that merely starts with
/// this one is not a delimiter. The candidate delimiter lines come from `index`, so that
/// nested multiparts do not each search the whole rest of the message (a message nested
/// thousands deep would otherwise cost depth × size).
fn split_multipart_indexed(
    buf: &[u8],
    body: Range<usize>,
    boundary: &[u8],
    index: &DelimiterIndex,
) -> (Vec<Range<usize>>, bool) {
    let hay = &buf[body.clone()];
    let mut dash = Vec::with_capacity(boundary.len() + 2);
    dash.extend_from_slice(b"--");
    dash.extend_from_slice(boundary);
    let mut close_key = boundary.to_vec();
    close_key.extend_from_slice(b"--");
    let in_body = |key: &[u8]| -> &[usize] {
        let v = index.lines(key);
        let lo = v.partition_point(|&p| p < body.start);
        let hi = v.partition_point(|&p| p < body.end);
        &v[lo..hi]
    };
    let open = in_body(trim_lwsp(boundary));
    let close = in_body(&close_key);
    // A body that does not start at a line start can still open with a delimiter.
    // The index keyed every line that starts with `--`.
    let line_start = body.start == 0 || buf[body.start - 1] == b'\n';
    let first = (hay.starts_with(&dash) && !line_start).then_some(0);
    // Nor can a body that ends inside a line: the index keyed that line whole.
    let cut = buf
        .get(body.end)
        .is_some_and(|&c| c != b'\n' && !(c == b'\r' && buf.get(body.end + 1) == Some(&b'\n')));
    let last = if cut {
        let s = memchr::memrchr(b'\n', hay).map_or(0, |n| n + 1);
        (s > 0 || first.is_none()).then_some(s)
    } else {
        None
    };
    // A body that starts and ends at line starts, whose boundary has no trailing blank
    // and whose one close delimiter (if any) follows every delimiter line (nearly every
    // multipart): the index's lines are the candidates as they are, each a delimiter.
    let keyed_exactly = trim_lwsp(boundary).len() == boundary.len();
    if keyed_exactly
        && first.is_none()
        && last.is_none()
        && match (open.last(), close) {
            (_, []) | (None, [_]) => true,
            (Some(o), [c]) => o < c,
            _ => false,
        }
    {
        let candidates = open.iter().chain(close).map(|&p| p - body.start);
        return split_at_candidates(hay, body.start, dash.len(), candidates);
    }
    let mut merged = Vec::with_capacity(open.len() + close.len() + 2);
    merged.extend(first);
    let (mut i, mut j) = (0, 0);
    while i < open.len() || j < close.len() {
        let take_open = j >= close.len() || (i < open.len() && open[i] <= close[j]);
        let p = if take_open {
            i += 1;
            open[i - 1]
        } else {
            j += 1;
            close[j - 1]
        };
        if merged.last() != Some(&(p - body.start)) {
            merged.push(p - body.start);
        }
    }
    if let Some(l) = last {
        // The cut line is the last line of the body, so it comes last.
        while merged.last().is_some_and(|&m| m >= l) {
            merged.pop();
        }
        merged.push(l);
    }
    // A line the index keyed by the boundary itself starts with `--boundary`, and lies
    // whole in the body unless it is the cut line: only that line, and lines keyed by a
    // boundary with its trailing blanks removed, need the test (a call a part).
    let candidates = merged.into_iter().filter(|&at| {
        (keyed_exactly && Some(at) != last) || hay.get(at..).is_some_and(|t| t.starts_with(&dash))
    });
    split_at_candidates(hay, body.start, dash.len(), candidates)
}

/// The delimiter logic proper, over candidate positions (ascending, relative to `hay`)
/// where `--boundary` (`dash_len` octets) occurs.
fn split_at_candidates(
    hay: &[u8],
    base: usize,
    dash_len: usize,
    candidates: impl Iterator<Item = usize>,
) -> (Vec<Range<usize>>, bool) {
    // At most one part per candidate: grown by doubling, a 10 000-part split copied
    // its list 14 times.
    let mut parts = Vec::with_capacity(candidates.size_hint().1.unwrap_or(0));
    let mut open: Option<usize> = None; // start of the current part (relative)
    let mut from = 0;
    for at in candidates {
        if at < from {
            continue;
        }
        from = at + 1;
        if at > 0 && hay[at - 1] != b'\n' {
            continue;
        }
        let mut k = at + dash_len;
        let close = hay[k..].starts_with(b"--");
        if close {
            k += 2;
        }
        while k < hay.len() && matches!(hay[k], b' ' | b'\t') {
            k += 1;
        }
        let line_ok = k == hay.len()
            || hay[k] == b'\n'
            || (hay[k] == b'\r' && hay.get(k + 1) == Some(&b'\n'));
        if !line_ok {
            continue;
        }
        let delim_start = if at == 0 {
            0
        } else if at >= 2 && hay[at - 2] == b'\r' {
            at - 2
        } else {
            at - 1
        };
        let next_line = if k == hay.len() {
            k
        } else if hay[k] == b'\n' {
            k + 1
        } else {
            k + 2
        };
        if let Some(s) = open.take() {
            parts.push(base + s..base + delim_start.max(s));
        }
        if close {
            return (parts, true);
        }
        open = Some(next_line);
        from = next_line.max(from);
    }
    if let Some(s) = open {
        parts.push(base + s..base + hay.len());
    }
    (parts, false)
}

/// Every `\n--` in `buf`. On x86-64 with AVX2 the vector searcher memmem would pick is
/// called directly: memmem's iterator and its choice of searcher cost ~40 instructions a
/// match, as much again as the search itself between the delimiters of small parts.
#[cfg(target_arch = "x86_64")]
fn dash_lines(buf: &[u8]) -> impl Iterator<Item = usize> + '_ {
    let direct = memchr::arch::x86_64::avx2::packedpair::Finder::new(DASH_LINE);
    let mut other = direct.is_none().then(|| memmem::find_iter(buf, DASH_LINE));
    let mut at = 0;
    std::iter::from_fn(move || match (&direct, other.as_mut()) {
        (Some(f), None) => {
            let hay = buf.get(at..)?;
            let n = if hay.len() >= f.min_haystack_len() {
                f.find(hay, DASH_LINE)
            } else {
                memmem::find(hay, DASH_LINE)
            }?;
            at += n + 1;
            Some(at - 1)
        }
        (_, Some(found)) => found.next(),
        (None, None) => None,
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn dash_lines(buf: &[u8]) -> impl Iterator<Item = usize> + '_ {
    memmem::find_iter(buf, DASH_LINE)
}

const DASH_LINE: &[u8] = b"\n--";

/// Whether the line at `at` in `buf` is `key` followed by nothing but blanks up to its
/// end: the line's key (see [`DelimiterIndex`]) is `key` (which is not empty and does not
/// end with a blank). Not for a key ending in CR, which may be the CR of the line break.
fn key_ends_at(buf: &[u8], at: usize, key: &[u8]) -> bool {
    if key.last() == Some(&b'\r') {
        return false;
    }
    let Some(rest) = buf
        .get(at..at + key.len())
        .filter(|line| same_octets(line, key))
        .map(|_| &buf[at + key.len()..])
    else {
        return false;
    };
    let rest = &rest[rest
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count()..];
    matches!(rest, [] | [b'\n', ..] | [b'\r', b'\n', ..])
}

fn trim_lwsp(b: &[u8]) -> &[u8] {
    let n = b
        .iter()
        .rposition(|&c| c != b' ' && c != b'\t')
        .map_or(0, |i| i + 1);
    &b[..n]
}

/// Every line of one buffer that starts with `--`, by what follows the dashes (trailing
/// blanks and the line ending removed), built once per buffer in one pass. A delimiter
/// for boundary B is on a line keyed `B` (or `B--` for the close delimiter).
#[derive(Debug, Default)]
struct DelimiterIndex {
    by_key: std::collections::HashMap<Vec<u8>, Vec<usize>>,
}

impl DelimiterIndex {
    fn new(buf: &[u8]) -> DelimiterIndex {
        let mut ix = DelimiterIndex::default();
        // Consecutive `--` lines usually carry the same key (a multipart's delimiters
        // with only its parts between them): gather such a run and hash its key once.
        let mut run: (&[u8], Vec<usize>) = (b"", Vec::new());
        // Only lines that start with `--` matter: find them directly rather than walking
        // every line of the message.
        let starts = buf
            .starts_with(b"--")
            .then_some(0)
            .into_iter()
            .chain(dash_lines(buf).map(|at| at + 1));
        for pos in starts {
            // Most lines repeat the run's key: that is settled by what follows it.
            if !run.0.is_empty() && key_ends_at(buf, pos + 2, run.0) {
                run.1.push(pos);
                continue;
            }
            let (content_end, _) = line_end(buf, pos, buf.len());
            let key = trim_lwsp(&buf[pos + 2..content_end]);
            if key != run.0 {
                ix.flush(&mut run);
                run.0 = key;
            }
            run.1.push(pos);
        }
        ix.flush(&mut run);
        ix
    }

    /// Adds a run of lines with one key; looks the key up before allocating it, since
    /// most runs repeat a boundary already seen.
    fn flush(&mut self, run: &mut (&[u8], Vec<usize>)) {
        if run.1.is_empty() {
            return;
        }
        match self.by_key.get_mut(run.0) {
            Some(lines) => lines.append(&mut run.1),
            None => {
                self.by_key
                    .insert(run.0.to_vec(), std::mem::take(&mut run.1));
            }
        }
    }

    fn lines(&self, key: &[u8]) -> &[usize] {
        self.by_key.get(key).map_or(&[], Vec::as_slice)
    }
}

/// The lengths of the physical lines of a field, name included, line endings excluded.
pub fn line_lengths<'b>(buf: &'b [u8], f: &Field) -> impl Iterator<Item = usize> + 'b {
    let bytes = &buf[f.start..f.value.end];
    bytes
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l).len())
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

    /// Handed in pieces, the heading scan read on past stray lines gives the fields it
    /// gives over the whole: lines of every kind (folds, stray lines, an mbox From line,
    /// empty lines, bare CR and LF, NUL, 8-bit) cut at sizes from one octet to past the end.
    #[test]
    fn fields_read_in_pieces_are_those_of_the_whole() {
        let lines: [&[u8]; 16] = [
            b"\r\n",
            b"\n",
            b" cont: x\r\n",
            b"\r",
            b"Subject: one\r\n",
            b" folded\r\n",
            b"\tand again\n",
            b"no colon here\r\n",
            b"From sender@example.org Thu Nov 26 2026\r\n",
            b"X-\0: nul\r\n",
            b"Sub ject: space\r\n",
            b"\xe9: eight-bit\r\n",
            b"X-Cr\r: y\r\n",
            b"List-Id: <l.example>\r\n",
            b": empty name\r\n",
            b"A: 1\n",
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for round in 0..2000 {
            let mut buf = Vec::new();
            for _ in 0..(round % 40 + 1) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                buf.extend_from_slice(lines[(seed % lines.len() as u64) as usize]);
            }
            if round % 3 == 0 {
                buf.extend_from_slice(b"\r\nbody: not read\r\nmore: body\r\n");
            } else if round % 3 == 1 {
                buf.extend_from_slice(b"last: no line end");
            }
            let whole = fields_read_on(&buf);
            for piece in [1, 2, 7, 30, 64, 1 << 14] {
                let mut pieced = Vec::new();
                fields_read_on_by_piece(&buf, piece, |f| {
                    pieced.extend_from_slice(f);
                    ControlFlow::Continue(())
                });
                assert_eq!(pieced, whole, "round {round}, piece {piece}: {buf:?}");
            }
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

#[cfg(test)]
mod split_index_tests {
    use super::*;
    use proptest::prelude::*;

    /// The split by a plain search of the whole body, the reference the indexed split must
    /// agree with.
    fn split_multipart(
        buf: &[u8],
        body: Range<usize>,
        boundary: &[u8],
    ) -> (Vec<Range<usize>>, bool) {
        let mut dash = Vec::with_capacity(boundary.len() + 2);
        dash.extend_from_slice(b"--");
        dash.extend_from_slice(boundary);
        let finder = memmem::Finder::new(&dash);
        let hay = &buf[body.clone()];
        let candidates = finder.find_iter(hay);
        split_at_candidates(hay, body.start, dash.len(), candidates)
    }

    /// The heading reader as it was before each kind of line got an arm of its own
    /// (2026-11-26), kept word for word as the reference the reader must agree with.
    fn read_heading_before(
        buf: &[u8],
        range: Range<usize>,
        top: bool,
        all: &mut Vec<Field>,
    ) -> Heading {
        let end = range.end;
        let mut pos = range.start;
        let first = all.len();
        let fields = all;
        let mut crlf_lines = 0usize;
        let mut lf_lines = 0usize;
        // An mbox "From " envelope line is not part of the message proper.
        if top && buf[pos..end].starts_with(b"From ") {
            pos = line_end(buf, pos, end).1;
        }
        let header_start = pos;
        let mut body_start = end;
        let mut no_separator = true;
        let mut last_line_end = pos;
        while pos < end {
            // The empty line that ends a heading needs no search for its end, and a
            // field's line is searched from its colon: the name was just read.
            let mut named = None;
            let (content_end, next) = match buf[pos] {
                b'\n' => (pos, pos + 1),
                b'\r' if pos + 1 < end && buf[pos + 1] == b'\n' => (pos, pos + 2),
                b' ' | b'\t' => line_end(buf, pos, end),
                _ => match field_name_end(&buf[pos..end]) {
                    Some((name_len, colon)) => {
                        named = Some((name_len, colon));
                        line_end(buf, pos + colon + 1, end)
                    }
                    None => line_end(buf, pos, end),
                },
            };
            if next - content_end == 2 {
                crlf_lines += 1;
            } else if next > content_end {
                lf_lines += 1;
            }
            let line = &buf[pos..content_end];
            if line.is_empty() {
                body_start = next;
                no_separator = false;
                break;
            }
            if line[0] == b' ' || line[0] == b'\t' {
                // A continuation. Before any field it belongs to nothing; keep it in the
                // heading so that the bytes are not mistaken for body.
                if let Some(f) = fields[first..].last_mut() {
                    f.value.end = content_end;
                    f.end = next;
                }
                last_line_end = next;
                pos = next;
                continue;
            }
            match named {
                Some((name_len, colon)) => {
                    fields.push(Field {
                        start: pos,
                        name: pos..pos + name_len,
                        value: pos + colon + 1..content_end,
                        end: next,
                    });
                    last_line_end = next;
                    pos = next;
                }
                None => {
                    body_start = pos;
                    break;
                }
            }
        }
        if pos >= end {
            body_start = end;
        }
        let header_end = fields[first..]
            .last()
            .map_or(header_start, |f| f.end)
            .max(last_line_end.min(body_start));
        Heading {
            header: header_start..header_end.max(header_start),
            body: body_start.min(end)..end,
            crlf: crlf_lines >= lf_lines && crlf_lines > 0,
            no_separator,
        }
    }

    proptest! {
        /// The heading reader reads what its earlier form read: the same fields, heading,
        /// body, line-ending style and separator, on headings of every kind of line
        /// (folds, stray lines, an mbox From line, empty lines, bare CR, CR at the end of
        /// the range), read from anywhere to anywhere.
        #[test]
        fn heading_reader_agrees_with_its_earlier_form(
            lines in proptest::collection::vec(
                prop_oneof![
                    Just(&b"Content-Type: text/plain\r\n"[..]), Just(&b"Content-ID: <a@b>\n"[..]),
                    Just(&b" folded\r\n"[..]), Just(&b"\tfolded\n"[..]), Just(&b"\r\n"[..]),
                    Just(&b"\n"[..]), Just(&b"\r"[..]), Just(&b"no colon\r\n"[..]),
                    Just(&b"X :  spaced\n"[..]), Just(&b"From a@b Thu\n"[..]),
                    Just(&b"Subject:"[..]), Just(&b"\xe9: x\r\n"[..]), Just(&b"X-\r: y\n"[..]),
                    Just(&b"body text\r\n"[..]), Just(&b":\n"[..]),
                ],
                0..12,
            ),
            start in 0usize..6,
            cut in 0usize..6,
            top in any::<bool>(),
        ) {
            let buf: Vec<u8> = lines.concat();
            let s = start.min(buf.len());
            let e = buf.len().saturating_sub(cut).max(s);
            let (mut now, mut before) = (Vec::new(), Vec::new());
            let a = read_heading(&buf, s..e, top, &mut now);
            let b = read_heading_before(&buf, s..e, top, &mut before);
            prop_assert_eq!(now, before);
            prop_assert_eq!(
                (a.header, a.body, a.crlf, a.no_separator),
                (b.header, b.body, b.crlf, b.no_separator)
            );
        }

        /// The word-at-a-time length of a field name is the octet-by-octet one, on
        /// lines mixing name octets with the octets around each limit of ftext.
        #[test]
        fn name_len_agrees_with_the_table(
            line in proptest::collection::vec(
                prop_oneof![
                    Just(b'a'), Just(b'C'), Just(b'-'), Just(b':'), Just(b' '), Just(b'\t'),
                    Just(0x20u8), Just(0x21u8), Just(0x7eu8), Just(0x7fu8), Just(0x80u8),
                    Just(0xffu8), Just(0u8), Just(b'\r'), Just(b'\n'), Just(0x39u8),
                    Just(0x3bu8), any::<u8>(),
                ],
                0..40,
            ),
            ones in 0usize..24,
        ) {
            let mut line = line;
            // Mostly-name prefixes, so that words without any stop octet are common.
            line.splice(0..0, std::iter::repeat_n(b'x', ones));
            let want = line
                .iter()
                .position(|&b| !FIELD_NAME[usize::from(b)])
                .unwrap_or(line.len());
            prop_assert_eq!(name_len(&line), want);
        }

        /// The direct search for `\n--` finds what memmem's iterator finds, on short
        /// buffers (below the vector searcher's minimum) and long ones alike.
        #[test]
        fn dash_lines_are_memmems(
            buf in proptest::collection::vec(
                prop_oneof![Just(b'\n'), Just(b'-'), Just(b'\r'), Just(b'x')],
                0..300,
            ),
        ) {
            let want: Vec<usize> = memmem::find_iter(&buf, DASH_LINE).collect();
            prop_assert_eq!(dash_lines(&buf).collect::<Vec<_>>(), want);
        }

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

        /// The indexed split finds exactly what the plain memmem split finds, on bodies
        /// made of delimiter-like lines, blanks, bare CRs and prefixes of the boundary.
        #[test]
        fn indexed_split_agrees_with_memmem(
            pieces in proptest::collection::vec(
                prop_oneof![
                    Just(&b"--b"[..]), Just(&b"--b--"[..]), Just(&b"--bb"[..]), Just(&b"--b "[..]),
                    Just(&b"--b\t--"[..]), Just(&b"\r\n"[..]), Just(&b"\n"[..]), Just(&b"\r"[..]),
                    Just(&b"x"[..]), Just(&b" "[..]), Just(&b"--"[..]), Just(&b"b"[..]),
                ],
                0..40,
            ),
            start in 0usize..8,
            cut in 0usize..8,
            boundary in prop_oneof![Just(&b"b"[..]), Just(&b"bb"[..]), Just(&b"b "[..])],
        ) {
            let buf: Vec<u8> = pieces.concat();
            let s = start.min(buf.len());
            let e = buf.len().saturating_sub(cut).max(s);
            let ix = DelimiterIndex::new(&buf);
            prop_assert_eq!(
                split_multipart(&buf, s..e, boundary),
                split_multipart_indexed(&buf, s..e, boundary, &ix)
            );
        }
    }
}
