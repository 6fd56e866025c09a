//! The two fields that name a part's file, Content-Type (`name`) and
//! Content-Disposition (`filename`), read as the repairs on offer so far leave them,
//! and the rewrite of their parameters that the three rules share: a parameter taken
//! out, new ones added after the last, each on the line where it fits.

use std::ops::Range;

use crate::engine::model::analysis::Context;
use crate::engine::model::edit::FieldLoc;
use crate::engine::model::mime::Entity;
use crate::engine::model::rules::Rule;
use crate::engine::syntax::encoded_words::{starts_new_line, write_quoted};
use crate::engine::syntax::params::{subtype_span, ContentType, Disposition, Param};
use crate::engine::syntax::rfc2231::{self, write_extended, Unreadable};

/// Which of the two fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Which {
    Type,
    Disposition,
}

impl Which {
    /// The parameter that names the file in this field.
    pub fn attr(self) -> &'static str {
        match self {
            Which::Type => "name",
            Which::Disposition => "filename",
        }
    }

    pub fn field(self) -> &'static str {
        match self {
            Which::Type => "Content-Type",
            Which::Disposition => "Content-Disposition",
        }
    }

    pub fn other(self) -> Which {
        match self {
            Which::Type => Which::Disposition,
            Which::Disposition => Which::Type,
        }
    }
}

/// One of the fields, as the repairs on offer so far leave it.
pub(super) struct NameField {
    pub which: Which,
    /// Index of the field in its heading.
    pub index: usize,
    /// The field's value range in the message (what an edit replaces).
    pub range: Range<usize>,
    /// The octets of the field name and colon, before the value on its first line.
    pub name_len: usize,
    /// The value: the pending rewrite, or the bytes of the message.
    pub value: Vec<u8>,
    pub params: ContentType,
    /// Where the parameters start: after the media type, or the disposition type.
    pub params_start: usize,
    /// The disposition type (lower case), for Content-Disposition.
    pub kind: String,
    /// A repair may rewrite it: the heading lies in the original bytes, holds this
    /// field once, and the value was read to its end without a defect.
    pub writable: bool,
}

impl NameField {
    pub fn attr(&self) -> &'static str {
        self.which.attr()
    }

    /// The plain (`name=`, `filename=`) parameter, when it names something.
    pub fn plain(&self) -> Option<&Param> {
        self.params
            .plain(self.attr())
            .filter(|p| !p.value.is_empty())
    }

    /// The RFC 2231 value as text, or why it has none; `None` where the field has no
    /// RFC 2231 form, or one that names nothing.
    pub fn extended(&self) -> Option<Result<String, Unreadable>> {
        rfc2231::decode(&self.params, self.attr()).filter(|v| !matches!(v, Ok(t) if t.is_empty()))
    }

    /// The field names the file in some form.
    pub fn named(&self) -> bool {
        self.plain().is_some() || self.extended().is_some()
    }
}

/// Field `which` of entity `i`, if the heading has it. Content-Type: the field the
/// entity's type was read from; Content-Disposition: the first.
pub(super) fn read(cx: &Context, i: usize, which: Which) -> Option<NameField> {
    let msg = cx.msg;
    let e = &msg.entities[i];
    let (index, count) = match which {
        Which::Type => {
            let fi = e.ctype_field?;
            (
                fi,
                if more_than_one(cx, e, "content-type") {
                    2
                } else {
                    1
                },
            )
        }
        Which::Disposition => {
            let first = e.disposition_field? as usize;
            let more = more_than_one(cx, e, "content-disposition");
            (first, if more { 2 } else { 1 })
        }
    };
    let field = &msg.fields(e)[index];
    let value = cx.current_value(e, field).to_vec();
    let (params, params_start, kind) = match which {
        Which::Type => {
            let start = subtype_span(&value).map_or(value.len(), |s| s.end);
            (ContentType::parse(&value), start, String::new())
        }
        Which::Disposition => {
            let d = Disposition::parse(&value);
            (d.params, d.kind_span.end, d.kind.into_owned())
        }
    };
    let readable = match which {
        Which::Type => !params.mtype.is_empty(),
        Which::Disposition => !kind.is_empty(),
    };
    Some(NameField {
        which,
        index,
        range: field.value.clone(),
        name_len: field.value.start - field.start,
        writable: e.editable() && count == 1 && readable && params.is_clean(),
        value,
        params,
        params_start,
        kind,
    })
}

fn more_than_one(cx: &Context, e: &Entity, name: &str) -> bool {
    cx.msg.fields_named(e, name).nth(1).is_some()
}

/// A parameter a repair adds, named by the field it goes into.
pub(super) enum NewParam {
    /// `attr*=utf-8''…` (sections where long) of this text.
    Extended(String),
    /// The twin `attr="…"`: the text as it stands when short ASCII, else RFC 2047
    /// encoded-words.
    Twin(String),
    /// `attr="…"` with this value as written in the other field (quotes removed).
    Copy(Vec<u8>),
}

impl NewParam {
    /// The octets of the name it writes.
    pub fn len(&self) -> usize {
        match self {
            NewParam::Extended(t) | NewParam::Twin(t) => t.len(),
            NewParam::Copy(v) => v.len(),
        }
    }
}

/// `f`'s value with the parameter `remove` (an index into its parameters) taken out,
/// with the `;` and white space before it, and `add` after the last parameter, each
/// behind a `;`.
pub(super) fn rewritten(
    f: &NameField,
    remove: Option<usize>,
    add: &[NewParam],
    eol: &[u8],
) -> Vec<u8> {
    let value = &f.value;
    let ps = &f.params.params;
    let cut = remove.and_then(|k| {
        let p = ps.get(k)?;
        let from = if k == 0 {
            f.params_start
        } else {
            ps[k - 1].value_span.end
        };
        Some(from.min(p.span.start)..p.span.end)
    });
    let at = ps
        .iter()
        .enumerate()
        .filter(|&(k, _)| Some(k) != remove)
        .map(|(_, p)| p.value_span.end)
        .max()
        .unwrap_or(f.params_start)
        .min(value.len());
    let (mut out, tail) = match &cut {
        Some(c) if c.start >= at => (value[..at].to_vec(), &value[c.end.max(at)..]),
        Some(c) => (
            [&value[..c.start], &value[c.end..at]].concat(),
            &value[at..],
        ),
        None => (value[..at].to_vec(), &value[at..]),
    };
    for p in add {
        out.push(b';');
        let line = match out.iter().rposition(|&b| b == b'\n') {
            Some(n) => out.len() - n - 1,
            None => f.name_len + out.len(),
        };
        let attr = f.attr();
        let written = match p {
            NewParam::Extended(text) => write_extended(attr, text, line, eol),
            NewParam::Twin(text) => write_quoted(attr, text, line, eol),
            NewParam::Copy(v) => write_copy(attr, v, line, eol),
        };
        out.extend_from_slice(&written);
    }
    out.extend_from_slice(tail);
    out
}

/// `attr="v"`, quoted-pairs where `v` needs them, on a new line when the current one
/// would pass 78 octets.
fn write_copy(attr: &str, v: &[u8], line: usize, eol: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() + attr.len() + 8);
    let escapes = v.iter().filter(|&&b| b == b'"' || b == b'\\').count();
    if starts_new_line(line, 1 + attr.len() + 2 + v.len() + escapes + 2) {
        out.extend_from_slice(eol);
    }
    out.push(b' ');
    out.extend_from_slice(attr.as_bytes());
    out.extend_from_slice(b"=\"");
    for &b in v {
        if b == b'"' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'"');
    out
}

/// Offers the rewrite of field `f` of entity `i` to `new`, for `rule`: composed with
/// what earlier repairs made of the field.
pub(super) fn offer(cx: &mut Context, i: usize, f: &NameField, new: Vec<u8>, rule: Rule) -> usize {
    let loc = cx.msg.field_loc(&cx.msg.entities[i], f.index);
    cx.edits.rewrite(f.range.clone(), loc, new, rule)
}

/// Offers the insertion of `Content-Disposition: attachment` with the parameters `add`
/// at the end of entity `i`'s heading. Not in the top-level heading (the milter would
/// add it at the end of the message's header), nor where the heading is not in the
/// original bytes or ends the input.
pub(super) fn insert_disposition(cx: &mut Context, i: usize, add: &[NewParam]) -> Option<usize> {
    let msg = cx.msg;
    let e = &msg.entities[i];
    if !e.editable() || e.depth == 0 {
        return None;
    }
    let last = msg.fields(e).last()?;
    if last.end == last.value.end {
        return None;
    }
    let field = NameField {
        which: Which::Disposition,
        index: 0,
        range: 0..0,
        name_len: Which::Disposition.field().len() + 1,
        value: b" attachment".to_vec(),
        params: ContentType::default(),
        params_start: " attachment".len(),
        kind: "attachment".into(),
        writable: true,
    };
    let name = Which::Disposition.field();
    let mut line = format!("{name}:").into_bytes();
    line.extend_from_slice(&rewritten(&field, None, add, e.eol()));
    line.extend_from_slice(e.eol());
    let loc = FieldLoc {
        part: msg.path(e).to_string(),
        name: name.to_string(),
        occurrence: 1,
        top_level: false,
    };
    Some(
        cx.edits
            .insert_field(last.end, loc, line, Rule::PartNameOneField),
    )
}
