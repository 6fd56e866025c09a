//! Content-Type values and their parameters: RFC 2045 §5.1 syntax with RFC 5322 CFWS
//! (comments, quoted-pairs, folding) and RFC 2231 extended parameters and continuations.
//!
//! The parser keeps the byte span of every parameter so that fixes can rewrite one
//! parameter and leave the rest of the field alone. It never fails: what it cannot read
//! ends the parameter list and is kept in [`ContentType::trailing`] for the checks to
//! report (e.g. a missing `;`, RFC 2046 erratum 589).

use std::ops::Range;

use crate::engine::syntax::ascii::{field_name_is, hex_value};

use std::borrow::Cow;

/// A parsed Content-Type value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContentType {
    /// Lower-case type, e.g. `message`. Empty when the value has no readable type.
    pub mtype: Name,
    /// Lower-case subtype, e.g. `external-body`.
    pub subtype: Name,
    pub params: Params,
    /// Byte offset (within the parsed value) where parsing stopped on unreadable input,
    /// if it did. Parameters after it are not in `params`.
    pub trailing: Option<usize>,
    /// Offsets where a parameter follows the previous value without its `;` (RFC 2046
    /// erratum 589, RFC 2387 §5.1 as printed). Parsing reads on, as lenient readers do,
    /// and marks what follows `Param::after_defect`; [`ContentType::strict`] gives the
    /// view of a reader that stops there.
    pub defects: Vec<usize>,
}

/// One parameter as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    /// Lower-case attribute without any RFC 2231 section or `*` marker.
    pub name: Name,
    /// RFC 2231 section number (`name*3`), if any.
    pub section: Option<u32>,
    /// RFC 2231 `*` marker: the value is `%`-encoded (and, in section 0 or an unsectioned
    /// parameter, starts with `charset'language'`).
    pub extended: bool,
    /// The value was a quoted-string.
    pub quoted: bool,
    /// An unquoted value held octets an RFC 2045 token cannot (`/`, `:`, `=`, `@`…), as in
    /// `type=text/html` or `URL=http://…`. Readers take such a value up to the next
    /// whitespace or `;`, and so does this parser; the checks may report it.
    pub not_token: bool,
    /// Written after a missing `;`: a strict reader never sees this parameter.
    pub after_defect: bool,
    /// The value with quotes removed, quoted-pairs resolved and line breaks of folding
    /// removed (the folding whitespace itself stays). Not %-decoded.
    pub value: Vec<u8>,
    /// From the first octet of the attribute to the last octet of the value.
    pub span: Range<usize>,
    /// The value as written, quotes included.
    pub value_span: Range<usize>,
}

/// The parameters of one value. Nearly every Content-Type and Content-Disposition
/// has one or two (`charset`, `name`, `boundary`, `type`): held inline, they cost no
/// allocation of their own, which a part whose heading no other part repeats paid
/// once per part.
pub type Params = smallvec::SmallVec<[Param; 2]>;

/// Which form a merged parameter value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamForm {
    /// `name=value`
    Plain,
    /// `name*=charset'lang'%xx` (RFC 2231 §4)
    Extended,
    /// `name*0=…; name*1*=…` (RFC 2231 §3)
    Continued,
}

/// A parameter value after RFC 2231 reassembly and %-decoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamValue {
    pub value: Vec<u8>,
    pub charset: Option<String>,
    pub language: Option<String>,
    pub form: ParamForm,
    /// Section numbers were missing, repeated or did not start at 0.
    pub gaps: bool,
}

impl ContentType {
    /// Parses a Content-Type field value (the bytes after the colon).
    pub fn parse(value: &[u8]) -> ContentType {
        let mut p = Cursor { s: value, i: 0 };
        let mut ct = ContentType::default();
        p.skip_cfws();
        let t = p.token();
        p.skip_cfws();
        if t.is_empty() || !p.eat(b'/') {
            ct.trailing = Some(p.i.min(value.len()));
            if !t.is_empty() {
                // A bare "text" is unreadable, not text/plain: keep the type empty.
                ct.trailing = Some(0);
            }
            return ct;
        }
        p.skip_cfws();
        let st = p.token();
        if st.is_empty() {
            ct.trailing = Some(p.i);
            return ct;
        }
        ct.mtype = lower(t);
        ct.subtype = lower(st);
        parse_params(&mut p, &mut ct);
        ct
    }

    /// What a strict RFC 2045 reader sees: the parameters before the first missing `;`,
    /// with `trailing` at that defect.
    pub fn strict(&self) -> ContentType {
        let Some(&first) = self.defects.first() else {
            return self.clone();
        };
        ContentType {
            mtype: self.mtype.clone(),
            subtype: self.subtype.clone(),
            params: self
                .params
                .iter()
                .filter(|p| !p.after_defect)
                .cloned()
                .collect(),
            trailing: Some(first),
            defects: Vec::new(),
        }
    }

    /// Read to the end without any defect: safe to rewrite in place.
    pub fn is_clean(&self) -> bool {
        self.trailing.is_none() && self.defects.is_empty()
    }

    /// `type/subtype` in lower case.
    pub fn essence(&self) -> String {
        format!("{}/{}", self.mtype, self.subtype)
    }

    pub fn is(&self, mtype: &str, subtype: &str) -> bool {
        self.mtype == mtype && self.subtype == subtype
    }

    pub fn is_multipart(&self) -> bool {
        self.mtype == "multipart"
    }

    /// The plain (`name=value`) parameter, first occurrence.
    pub fn plain(&self, name: &str) -> Option<&Param> {
        self.params
            .iter()
            .find(|p| p.name == name && p.section.is_none() && !p.extended)
    }

    /// Every RFC 2231 piece of `name` (`name*`, `name*0`, `name*1*`…), in written order.
    pub fn pieces<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'s Param> + 's {
        self.params
            .iter()
            .filter(move |p| p.name == name && (p.section.is_some() || p.extended))
    }

    /// The RFC 2231 value of `name`, reassembled (sections sorted, only `*`-marked
    /// sections %-decoded, once). `None` when there is no RFC 2231 piece.
    pub fn extended(&self, name: &str) -> Option<ParamValue> {
        self.extended_with(name, |raw| std::borrow::Cow::Borrowed(raw))
    }

    /// [`extended`](Self::extended) with `prepare` applied to each section's octets as
    /// written (after the charset and language of a first `*` section), before the
    /// %-decoding: e.g. RFC 2017's removal of the header's LWSP, which must not touch
    /// octets that only %-decoding produces.
    pub fn extended_with(
        &self,
        name: &str,
        prepare: impl Fn(&[u8]) -> std::borrow::Cow<'_, [u8]>,
    ) -> Option<ParamValue> {
        let mut pieces: Vec<&Param> = self.pieces(name).collect();
        if pieces.is_empty() {
            return None;
        }
        let single = pieces.len() == 1 && pieces[0].section.is_none();
        if single {
            let (charset, language, rest) = split_charset(&pieces[0].value);
            return Some(ParamValue {
                value: percent_decode(&prepare(rest)),
                charset,
                language,
                form: ParamForm::Extended,
                gaps: false,
            });
        }
        pieces.sort_by_key(|p| p.section.unwrap_or(0));
        let mut gaps = pieces.iter().any(|p| p.section.is_none());
        let mut value = Vec::new();
        let (mut charset, mut language) = (None, None);
        for (n, piece) in pieces.iter().enumerate() {
            if piece.section != Some(n as u32) {
                gaps = true;
            }
            let mut raw: &[u8] = &piece.value;
            if n == 0 && piece.extended {
                let (c, l, rest) = split_charset(raw);
                charset = c;
                language = l;
                raw = rest;
            }
            let raw = prepare(raw);
            if piece.extended {
                value.extend_from_slice(&percent_decode(&raw));
            } else {
                value.extend_from_slice(&raw);
            }
        }
        Some(ParamValue {
            value,
            charset,
            language,
            form: ParamForm::Continued,
            gaps,
        })
    }

    /// The value of `name` in whichever form it is given; the RFC 2231 form wins when
    /// both are present (RFC 2231 §4.1 lets senders add a plain fallback).
    pub fn get(&self, name: &str) -> Option<ParamValue> {
        if let Some(v) = self.extended(name) {
            return Some(v);
        }
        self.plain(name).map(|p| ParamValue {
            value: p.value.clone(),
            charset: None,
            language: None,
            form: ParamForm::Plain,
            gaps: false,
        })
    }

    /// The value of `name` as text (lossy UTF-8), whichever form.
    pub fn get_str(&self, name: &str) -> Option<String> {
        self.get(name)
            .map(|v| String::from_utf8_lossy(&v.value).into_owned())
    }
}

/// Where the subtype of a Content-Type value is written (`related` in
/// `multipart/related; …`), for a repair that changes the subtype alone.
pub fn subtype_span(value: &[u8]) -> Option<Range<usize>> {
    let mut p = Cursor { s: value, i: 0 };
    p.skip_cfws();
    if p.token().is_empty() {
        return None;
    }
    p.skip_cfws();
    if !p.eat(b'/') {
        return None;
    }
    p.skip_cfws();
    let start = p.i;
    (!p.token().is_empty()).then_some(start..p.i)
}

/// Where the media type of a Content-Type value is written, type and subtype
/// (`image/png` in ` image/png; name="a.png"`), for a repair that changes the media type
/// and keeps every parameter.
pub fn essence_span(value: &[u8]) -> Option<Range<usize>> {
    let start = skip_cfws(value, 0);
    subtype_span(value).map(|sub| start..sub.end)
}

/// A Content-Disposition value (RFC 2183 §2): a disposition type, then parameters in
/// the syntax of a Content-Type's (RFC 2231 included).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Disposition {
    /// Lower-case disposition type (`inline`, `attachment`, …); empty when unreadable.
    pub kind: Name,
    /// Where the type is written in the value.
    pub kind_span: Range<usize>,
    /// The parameters, held as those of a Content-Type with no type (`get`, `trailing`
    /// and `defects` as there).
    pub params: ContentType,
}

impl Disposition {
    pub fn parse(value: &[u8]) -> Disposition {
        let mut p = Cursor { s: value, i: 0 };
        let mut d = Disposition::default();
        p.skip_cfws();
        let start = p.i;
        let t = p.token();
        if t.is_empty() {
            d.params.trailing = Some(start);
            return d;
        }
        d.kind = lower(t);
        d.kind_span = start..p.i;
        parse_params(&mut p, &mut d.params);
        d
    }

    /// The file name a reader shows: `filename` (RFC 2183 §2.3, RFC 2231 forms).
    pub fn filename(&self) -> Option<String> {
        self.params.get_str("filename")
    }
}

/// The `charset'language'` an extended value (or its section 0) starts with, and the
/// rest; no charset when the two quotes are missing.
pub(crate) fn split_charset(v: &[u8]) -> (Option<String>, Option<String>, &[u8]) {
    let Some(a) = v.iter().position(|&b| b == b'\'') else {
        return (None, None, v);
    };
    let Some(b) = v[a + 1..].iter().position(|&b| b == b'\'') else {
        return (None, None, v);
    };
    let text = |s: &[u8]| (!s.is_empty()).then(|| String::from_utf8_lossy(s).into_owned());
    (text(&v[..a]), text(&v[a + 1..a + 1 + b]), &v[a + 2 + b..])
}

/// Decodes `%HH`; a `%` not followed by two hex digits stays as it is.
pub fn percent_decode(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' && i + 2 < s.len() {
            if let (Some(h), Some(l)) = (hex_value(s[i + 1]), hex_value(s[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(s[i]);
        i += 1;
    }
    out
}

/// RFC 2045 tspecials plus SP and CTLs end a token.
pub fn is_token_byte(b: u8) -> bool {
    TOKEN[usize::from(b)]
}

/// [`is_token_byte`] as a table: it runs for every octet of every Content-Type.
static TOKEN: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0x21;
    while b < 0x7f {
        t[b] = true;
        b += 1;
    }
    // 8-bit octets are not tspecials: a lenient token may hold them.
    while b < 0x100 {
        t[b] = b != 0x7f;
        b += 1;
    }
    let tspecials = b"()<>@,;:\\\"/[]?=";
    let mut i = 0;
    while i < tspecials.len() {
        t[tspecials[i] as usize] = false;
        i += 1;
    }
    t
};

/// Reads the parameters into `ct` where they are kept, rather than returning them: the
/// inline list is a few hundred octets, copied again by every move.
fn parse_params(p: &mut Cursor, ct: &mut ContentType) {
    let ContentType {
        params,
        trailing,
        defects,
        ..
    } = ct;
    let mut after_defect = false;
    loop {
        p.skip_cfws();
        if p.at_end() {
            break;
        }
        let before = p.i;
        if !p.eat(b';') {
            // Read on past a missing `;` only when a parameter really follows; anything
            // else is unreadable.
            if params.is_empty() || !p.param_follows() {
                *trailing = Some(before);
                break;
            }
            defects.push(before);
            after_defect = true;
        }
        p.skip_cfws();
        if p.at_end() {
            break; // a trailing ";" is common and harmless
        }
        if p.peek() == Some(b';') {
            continue; // ";;" likewise
        }
        let start = p.i;
        // The attribute may carry `*N` and `*`, which is_token_byte allows (`*` is not a
        // tspecial), so split them off afterwards.
        let attr = p.token();
        if attr.is_empty() {
            *trailing = Some(start);
            break;
        }
        p.skip_cfws();
        if !p.eat(b'=') {
            *trailing = Some(start);
            break;
        }
        p.skip_cfws();
        let vstart = p.i;
        let (value, quoted) = if p.peek() == Some(b'"') {
            match p.quoted_string() {
                Some(v) => (v, true),
                None => {
                    // Unterminated quoted-string: take the rest as the value, as most
                    // readers do, and say so.
                    *trailing = Some(vstart);
                    break;
                }
            }
        } else {
            let t = p.lenient_value();
            if t.is_empty() {
                *trailing = Some(vstart);
                break;
            }
            (t.to_vec(), false)
        };
        let vend = p.i;
        let not_token = !quoted && !value.iter().all(|&b| is_token_byte(b));
        let (name, section, extended) = split_attribute(attr);
        params.push(Param {
            name,
            section,
            extended,
            not_token,
            after_defect,
            quoted,
            value,
            span: start..vend,
            value_span: vstart..vend,
        });
    }
}

/// A lower-case media type, subtype or parameter name. The common ones point at a
/// static string: a Content-Type is parsed for every part of a message, and a
/// 10 000-part message should not pay two copies or allocations per part for them.
pub type Name = Cow<'static, str>;

/// Names common enough to have a static copy, about most frequent first.
const COMMON_NAMES: [&str; 37] = [
    "text",
    "plain",
    "html",
    "charset",
    "multipart",
    "mixed",
    "alternative",
    "related",
    "boundary",
    "image",
    "application",
    "octet-stream",
    "name",
    "filename",
    "type",
    "start",
    "format",
    "delsp",
    "png",
    "jpeg",
    "gif",
    "pdf",
    "message",
    "rfc822",
    "external-body",
    "access-type",
    "url",
    "signed",
    "protocol",
    "micalg",
    "pkcs7-signature",
    "pkcs7-mime",
    "report",
    "report-type",
    "delivery-status",
    "calendar",
    "method",
];

/// Where a name of this length and these lower-case octets (first, second, last) sits in
/// [`COMMON_SLOTS`]. The constants were searched for: no two common names share a slot.
const fn common_slot(len: usize, first: u8, second: u8, last: u8) -> usize {
    (len * 3 + first as usize + second as usize * 3 + last as usize * 19) % 128
}

/// Index + 1 into [`COMMON_NAMES`] by [`common_slot`], 0 for none. Built at compile time;
/// a name added that collides with another fails the build.
static COMMON_SLOTS: [u8; 128] = {
    let mut t = [0u8; 128];
    let mut i = 0;
    while i < COMMON_NAMES.len() {
        let n = COMMON_NAMES[i].as_bytes();
        let s = common_slot(n.len(), n[0], n[1], n[n.len() - 1]);
        assert!(
            t[s] == 0,
            "two common names share a slot: change common_slot"
        );
        t[s] = i as u8 + 1;
        i += 1;
    }
    t
};

/// The static copy of `t` in lower case when it is one of [`COMMON_NAMES`]. One table
/// probe and one comparison rather than a comparison with each name in turn: it runs
/// twice for every part of a message. `t` is a token (no controls, no space), and the
/// common names are small letters, digits, `-` and `.`: setting bit 0x20 of a token's
/// octets lowers its capitals and turns no other octet into one of those, so the
/// comparison is `field_name_is`'s, a word at a time.
fn common_name(t: &[u8]) -> Option<&'static str> {
    let (&first, &second, &last) = (t.first()?, t.get(1)?, t.last()?);
    let slot = common_slot(t.len(), first | 0x20, second | 0x20, last | 0x20);
    let name = COMMON_NAMES.get(usize::from(COMMON_SLOTS[slot]).checked_sub(1)?)?;
    debug_assert!(t.iter().all(|&b| is_token_byte(b)), "{t:?}");
    field_name_is(t, name.as_bytes()).then_some(*name)
}

/// `t` in ASCII lower case (8-bit octets, which a lenient token may hold, as lossy UTF-8).
fn lower(t: &[u8]) -> Name {
    if let Some(known) = common_name(t) {
        return Cow::Borrowed(known);
    }
    // One copy, lowered as it is made; the UTF-8 check is a word at a time for ASCII,
    // where the lossy conversion walks chunks.
    Cow::Owned(
        String::from_utf8(t.to_ascii_lowercase()).unwrap_or_else(|e| {
            let mut s = String::from_utf8_lossy(e.as_bytes()).into_owned();
            s.make_ascii_lowercase();
            s
        }),
    )
}

fn split_attribute(attr: &[u8]) -> (Name, Option<u32>, bool) {
    let mut a = attr;
    let mut extended = false;
    if a.len() > 1 && a.ends_with(b"*") {
        extended = true;
        a = &a[..a.len() - 1];
    }
    let mut section = None;
    if let Some(star) = a.iter().rposition(|&b| b == b'*') {
        let digits = &a[star + 1..];
        if !digits.is_empty() && digits.len() <= 9 && digits.iter().all(u8::is_ascii_digit) {
            // RFC 2231 forbids leading zeros except for 0 itself; accept them anyway.
            section = std::str::from_utf8(digits)
                .ok()
                .and_then(|d| d.parse().ok());
            a = &a[..star];
        }
    }
    (lower(a), section, extended)
}

/// The offset after the CFWS (whitespace, line breaks of folding, nested comments with
/// quoted-pairs) that starts at `i`. An unterminated comment runs to the end. Iterative,
/// so comment nesting costs no stack. Shared by every structured-field reader.
pub fn skip_cfws(s: &[u8], mut i: usize) -> usize {
    while let Some(&b) = s.get(i) {
        match b {
            b' ' | b'\t' | b'\r' | b'\n' => i += 1,
            b'(' => {
                let mut depth = 0usize;
                while let Some(&c) = s.get(i) {
                    i += 1;
                    match c {
                        b'\\' => i = (i + 1).min(s.len()),
                        b'(' => depth += 1,
                        b')' => {
                            depth = depth.saturating_sub(1);
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => break,
        }
    }
    i
}

/// The octets that end the plain run of a quoted-string: its closing quote, a
/// quoted-pair, a line break of folding. A table: one test per octet, not four.
static QUOTED_STOP: [bool; 256] = {
    let mut t = [false; 256];
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t[b'\r' as usize] = true;
    t[b'\n' as usize] = true;
    t
};

struct Cursor<'s> {
    s: &'s [u8],
    i: usize,
}

impl<'s> Cursor<'s> {
    fn at_end(&self) -> bool {
        self.i >= self.s.len()
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn token(&mut self) -> &'s [u8] {
        // An iterator over the rest, not an indexed peek per octet: no bounds check in
        // a loop that runs over every type, subtype and attribute.
        let rest = self.s.get(self.i..).unwrap_or_default();
        let n = rest
            .iter()
            .position(|&b| !is_token_byte(b))
            .unwrap_or(rest.len());
        self.i += n;
        &rest[..n]
    }

    /// `attribute =` comes next (without consuming it).
    fn param_follows(&self) -> bool {
        let mut look = Cursor {
            s: self.s,
            i: self.i,
        };
        if look.token().is_empty() {
            return false;
        }
        look.skip_cfws();
        look.peek() == Some(b'=')
    }

    /// An unquoted parameter value as readers take it: up to whitespace, `;`, `"` or a
    /// comment. A strict RFC 2045 token is a special case of it.
    fn lenient_value(&mut self) -> &'s [u8] {
        let start = self.i;
        while self
            .peek()
            .is_some_and(|b| b > 0x20 && b != 0x7f && !matches!(b, b';' | b'"' | b'('))
        {
            self.i += 1;
        }
        &self.s[start..self.i]
    }

    /// Skips whitespace, line breaks of folding and (nested) comments.
    fn skip_cfws(&mut self) {
        self.i = skip_cfws(self.s, self.i);
    }

    /// At a `"`: returns the content with quoted-pairs resolved and CR/LF of folding
    /// removed, or `None` (cursor unchanged) when the closing quote is missing.
    fn quoted_string(&mut self) -> Option<Vec<u8>> {
        let start = self.i;
        self.i += 1;
        // Nearly every quoted value (`name="part1.pdf"`, `charset="utf-8"`) holds no
        // quoted-pair and no line break: one copy of the right size, rather than a vector
        // grown octet by octet, which cost two reallocations per value of a
        // 10 000-part message.
        let body = &self.s[self.i..];
        let plain = body.iter().position(|&c| QUOTED_STOP[usize::from(c)]);
        if let Some(n) = plain.filter(|&n| body[n] == b'"') {
            self.i += n + 1;
            return Some(body[..n].to_vec());
        }
        let mut out = Vec::new();
        while let Some(c) = self.peek() {
            self.i += 1;
            match c {
                b'"' => return Some(out),
                b'\\' => {
                    if let Some(n) = self.peek() {
                        out.push(n);
                        self.i += 1;
                    }
                }
                b'\r' | b'\n' => {}
                _ => out.push(c),
            }
        }
        self.i = start;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispositions_and_subtype_spans() {
        let v = b" attachment;\r\n filename=\"image001.png\"; size=1234";
        let d = Disposition::parse(v);
        assert_eq!(d.kind, "attachment");
        assert_eq!(&v[d.kind_span.clone()], b"attachment");
        assert_eq!(d.filename().as_deref(), Some("image001.png"));
        assert!(d.params.is_clean());
        let d = Disposition::parse(b" INLINE; filename*=UTF-8''caf%C3%A9.png");
        assert_eq!(d.kind, "inline");
        assert_eq!(d.filename().as_deref(), Some("café.png"));
        assert_eq!(Disposition::parse(b" ;x").kind, "");
        let v = b" multipart/mixed; boundary=b";
        assert_eq!(&v[subtype_span(v).unwrap()], b"mixed");
        let v = b" (c) Multipart / Mixed (d);boundary=b";
        assert_eq!(&v[subtype_span(v).unwrap()], b"Mixed");
        assert_eq!(subtype_span(b" text"), None);
    }

    #[test]
    fn type_subtype_and_params_with_comments_and_quotes() {
        let ct = ContentType::parse(b" Message/External-Body (c) ; access-type = \"URL\" (x\\)y);\r\n\tURL=\"ftp://a/b\\\"c\"");
        assert_eq!(ct.essence(), "message/external-body");
        assert_eq!(ct.trailing, None);
        assert_eq!(ct.get_str("access-type").as_deref(), Some("URL"));
        let url = ct.plain("url").unwrap();
        assert!(url.quoted);
        assert_eq!(url.value, b"ftp://a/b\"c");
    }

    #[test]
    fn token_octets_are_rfc2045s() {
        for b in 0..=255u8 {
            let tspecial = b"()<>@,;:\\\"/[]?=".contains(&b);
            let want = b > b' ' && b != 0x7f && !tspecial;
            assert_eq!(is_token_byte(b), want, "{b:#x}");
        }
    }

    #[test]
    fn names_are_lowered_common_or_not() {
        for name in COMMON_NAMES {
            let upper = name.to_ascii_uppercase();
            assert!(matches!(lower(upper.as_bytes()), Cow::Borrowed(n) if n == name));
        }
        // Look-alikes of common names (same length, same first, second and last octet)
        // and rare names are lowered into a copy.
        for (t, want) in [
            ("TeXt", "text"),
            ("TEAT", "teat"),
            ("PL-IN", "pl-in"),
            ("X-Custom-Type", "x-custom-type"),
            ("vnd.ms-excel", "vnd.ms-excel"),
            ("a", "a"),
        ] {
            let got = lower(t.as_bytes());
            assert_eq!(got, want);
            assert_eq!(matches!(got, Cow::Borrowed(_)), t == "TeXt", "{t}");
        }
        assert_eq!(lower(b"te\xc4t"), "te\u{fffd}t");
    }

    #[test]
    fn spans_point_into_the_value() {
        let v = b"text/plain; charset=us-ascii; name=\"a b\"";
        let ct = ContentType::parse(v);
        let name = ct.plain("name").unwrap();
        assert_eq!(&v[name.span.clone()], b"name=\"a b\"");
        assert_eq!(&v[name.value_span.clone()], b"\"a b\"");
    }

    #[test]
    fn rfc2231_section3_continuations() {
        // RFC 2231 §3 example, plus §4.1's mix of encoded and plain sections.
        let ct = ContentType::parse(
            b"message/external-body; access-type=URL;\r\n URL*0=\"ftp://\";\r\n URL*1=\"cs.utk.edu/pub/moore/bulk-mailer/bulk-mailer.tar\"",
        );
        let v = ct.get("url").unwrap();
        assert_eq!(v.form, ParamForm::Continued);
        assert_eq!(
            v.value,
            b"ftp://cs.utk.edu/pub/moore/bulk-mailer/bulk-mailer.tar"
        );
        let ct = ContentType::parse(
            b"application/x-stuff; title*0*=us-ascii'en'This%20is%20even%20more%20; title*2=\"isn't it!\"; title*1*=%2A%2A%2Afun%2A%2A%2A%20",
        );
        let v = ct.get("title").unwrap();
        assert_eq!(v.value, b"This is even more ***fun*** isn't it!");
        assert_eq!(v.charset.as_deref(), Some("us-ascii"));
        assert_eq!(v.language.as_deref(), Some("en"));
        assert!(!v.gaps);
    }

    #[test]
    fn unquoted_values_with_tspecials_are_read_whole() {
        // RFC 2392's own example, Outlook's boundaries, an unquoted URL.
        let ct = ContentType::parse(
            b"multipart/related; boundary=----=_NextPart_000_0; type=Text/HTML; x=1",
        );
        assert_eq!(ct.get_str("type").as_deref(), Some("Text/HTML"));
        assert_eq!(
            ct.get_str("boundary").as_deref(),
            Some("----=_NextPart_000_0")
        );
        assert!(ct.plain("type").unwrap().not_token);
        assert!(!ct.plain("x").unwrap().not_token);
        assert_eq!(ct.get_str("x").as_deref(), Some("1"));
        let ct = ContentType::parse(
            b"message/external-body; access-type=URL; URL=http://x.test/a?b=c;\r\n name=n",
        );
        assert_eq!(ct.get_str("url").as_deref(), Some("http://x.test/a?b=c"));
        assert_eq!(ct.get_str("name").as_deref(), Some("n"));
        assert_eq!(ct.trailing, None);
    }

    #[test]
    fn missing_semicolon_is_read_past_and_recorded() {
        // RFC 2046 §5.2.3.7 as printed (erratum 589).
        let v =
            b"message/external-body; access-type=mail-server\r\n server=\"listserv@bogus.bitnet\"";
        let ct = ContentType::parse(v);
        assert_eq!(ct.get_str("access-type").as_deref(), Some("mail-server"));
        assert_eq!(
            ct.get_str("server").as_deref(),
            Some("listserv@bogus.bitnet")
        );
        assert_eq!(ct.defects, [49]);
        assert!(!ct.is_clean());
        let strict = ct.strict();
        assert!(strict.get("server").is_none());
        assert_eq!(strict.trailing, Some(49));
        // RFC 2387 §5.1 as printed, and Opera's unquoted start=<…>.
        let ct = ContentType::parse(b"Multipart/Related; boundary=example-1\r\n start=\"<950120.aaCC@XIson.com>\";\r\n type=\"Application/X-FixedRecord\"");
        assert_eq!(
            ct.get_str("start").as_deref(),
            Some("<950120.aaCC@XIson.com>")
        );
        assert_eq!(
            ct.get_str("type").as_deref(),
            Some("Application/X-FixedRecord")
        );
        let ct = ContentType::parse(b"multipart/related; start=<op.mhtml.1@x>; type=\"text/html\"");
        assert_eq!(ct.get_str("start").as_deref(), Some("<op.mhtml.1@x>"));
        assert!(ct.is_clean());
        // Something that is not a parameter still ends the list.
        let ct = ContentType::parse(b"text/plain; a=b c d");
        assert_eq!(ct.trailing, Some(16));
        assert!(ct.defects.is_empty());
    }

    #[test]
    fn unreadable_values_never_panic() {
        for v in [
            &b""[..],
            b"/",
            b"text/",
            b"text",
            b"(",
            b"a/b; x=\"unterminated",
            b"a/b; =v",
            b"a/b;;; c=d;",
            b"a/b; x*=''",
        ] {
            let _ = ContentType::parse(v);
        }
        assert_eq!(
            ContentType::parse(b"a/b;;; c=d;").get_str("c").as_deref(),
            Some("d")
        );
    }

    #[test]
    fn quoted_values_plain_or_with_pairs_and_folding() {
        // The plain copy and the octet-by-octet reading must agree on value and end.
        let v = b"a/b; n=\"part1.pdf\"; q=\"a\\\"b\\\\c\"; f=\"x\r\n y\"; e=\"\"; t=\"1;2\"";
        let ct = ContentType::parse(v);
        assert!(ct.is_clean());
        let got: Vec<(&str, &[u8], &[u8])> = ct
            .params
            .iter()
            .map(|p| (&*p.name, &p.value[..], &v[p.value_span.clone()]))
            .collect();
        assert_eq!(
            got,
            [
                ("n", &b"part1.pdf"[..], &b"\"part1.pdf\""[..]),
                ("q", b"a\"b\\c", b"\"a\\\"b\\\\c\""),
                ("f", b"x y", b"\"x\r\n y\""),
                ("e", b"", b"\"\""),
                ("t", b"1;2", b"\"1;2\""),
            ]
        );
        // Unterminated, with and without a quoted-pair: the rest is trailing.
        for v in [&b"a/b; n=\"abc"[..], b"a/b; n=\"a\\\"bc", b"a/b; n=\"a\\"] {
            let ct = ContentType::parse(v);
            assert!(ct.params.is_empty());
            assert_eq!(ct.trailing, Some(7));
        }
    }

    #[test]
    fn percent_decode_leaves_stray_percent() {
        assert_eq!(percent_decode(b"a%41%zz%4"), b"aA%zz%4");
        assert_eq!(percent_decode(b"%"), b"%");
    }
}
