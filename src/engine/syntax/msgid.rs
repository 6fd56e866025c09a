//! Message-ID and Content-ID syntax (RFC 5322 §3.6.4, RFC 2045 §7): the msg-id
//! `<left@right>` and its addr-spec, the part between the angle brackets with comments
//! and folding whitespace removed. Identifiers are compared by that addr-spec, octet by
//! octet (`cid:` URLs name it, RFC 2392 §2).
//!
//! [`parse_msg_id`] is strict, with the obsolete forms real mail still uses;
//! [`addr_spec`] is lenient, for comparing whatever was written.

use std::borrow::Cow;

use crate::engine::syntax::ascii::same_octets;
use crate::engine::syntax::params;

/// Why a value is not a msg-id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MsgIdError {
    Empty,
    NoOpeningBracket,
    NoClosingBracket,
    NoAt,
    EmptyLeft,
    EmptyRight,
    BadLeft,
    BadRight,
    TrailingText,
}

impl MsgIdError {
    pub fn describe(self) -> &'static str {
        match self {
            MsgIdError::Empty => "it is empty",
            MsgIdError::NoOpeningBracket => "it is not enclosed in <>",
            MsgIdError::NoClosingBracket => "the closing > is missing",
            MsgIdError::NoAt => "there is no @",
            MsgIdError::EmptyLeft => "nothing before the @",
            MsgIdError::EmptyRight => "nothing after the @",
            MsgIdError::BadLeft => {
                "the part before the @ is neither a dot-atom nor a quoted-string"
            }
            MsgIdError::BadRight => {
                "the part after the @ is neither a dot-atom nor a [domain literal]"
            }
            MsgIdError::TrailingText => "text follows the closing >",
        }
    }
}

/// Parses a Content-ID or Message-ID value as a msg-id and returns its addr-spec
/// (`left@right`, comments and folding removed, a quoted-string left as written).
///
/// Accepts RFC 5322 §3.6.4 `msg-id` and the obsolete forms of §4.5.4 that are still
/// `<x@y>` shaped (quoted-string or CFWS between the words, a domain literal on the
/// right), and UTF-8 in atoms (RFC 6532). Rejects everything that is not enclosed in
/// angle brackets, has no `@`, or has empty or unreadable sides.
#[inline]
pub fn parse_msg_id(value: &[u8]) -> Result<Cow<'_, [u8]>, MsgIdError> {
    match plain_msg_id(value) {
        Some(id) => Ok(Cow::Borrowed(id)),
        None => parse_msg_id_full(value),
    }
}

/// [`parse_msg_id`] for the values [`plain_msg_id`] leaves. Out of line, so that the
/// plain form, nearly every Content-ID, does not pay this parser's set-up (~20
/// instructions a call, ~10 000 calls for a 10 000-part message).
#[inline(never)]
pub(crate) fn parse_msg_id_full(value: &[u8]) -> Result<Cow<'_, [u8]>, MsgIdError> {
    let mut c = Cur { s: value, i: 0 };
    c.cfws();
    if c.at_end() {
        return Err(MsgIdError::Empty);
    }
    if !c.eat(b'<') {
        return Err(MsgIdError::NoOpeningBracket);
    }
    // The id is never longer than the value: one allocation instead of one per atom.
    let mut out = Vec::with_capacity(value.len());
    // id-left: word *("." word), CFWS around the words being obsolete but accepted.
    c.cfws();
    if c.peek() == Some(b'@') {
        return Err(MsgIdError::EmptyLeft);
    }
    loop {
        c.cfws();
        if !c.word(&mut out) {
            return Err(if c.at_end() {
                MsgIdError::NoClosingBracket
            } else if c.peek() == Some(b'>') && !out.contains(&b'@') {
                MsgIdError::NoAt
            } else {
                MsgIdError::BadLeft
            });
        }
        c.cfws();
        if c.eat(b'.') {
            out.push(b'.');
            continue;
        }
        break;
    }
    if !c.eat(b'@') {
        return Err(match c.peek() {
            None => MsgIdError::NoClosingBracket,
            Some(b'>') => MsgIdError::NoAt,
            _ => MsgIdError::BadLeft,
        });
    }
    out.push(b'@');
    c.cfws();
    match c.peek() {
        Some(b'>') => return Err(MsgIdError::EmptyRight),
        None => return Err(MsgIdError::NoClosingBracket),
        Some(b'[') => {
            if !c.domain_literal(&mut out) {
                return Err(MsgIdError::BadRight);
            }
        }
        _ => loop {
            c.cfws();
            if !c.atom(&mut out) {
                return Err(if c.at_end() {
                    MsgIdError::NoClosingBracket
                } else {
                    MsgIdError::BadRight
                });
            }
            c.cfws();
            if c.eat(b'.') {
                out.push(b'.');
                continue;
            }
            break;
        },
    }
    c.cfws();
    if !c.eat(b'>') {
        return Err(if c.at_end() {
            MsgIdError::NoClosingBracket
        } else {
            MsgIdError::BadRight
        });
    }
    c.cfws();
    if !c.at_end() {
        return Err(MsgIdError::TrailingText);
    }
    Ok(Cow::Owned(out))
}

/// The addr-spec of the form nearly every Content-ID takes, `<dot-atom@dot-atom>` with
/// nothing but whitespace around it, without copying it; `None` for anything else (the
/// full parser then decides). Saves an allocation per part of a many-part message.
#[inline(never)]
pub(crate) fn plain_msg_id(value: &[u8]) -> Option<&[u8]> {
    plain_msg_id_after(value, &[]).map(|(id, _)| id)
}

/// [`plain_msg_id`], with where the addr-spec's `@` is, given `at_right`: the `@` and
/// right side of an earlier plain id (from its `@` on), or nothing. An id that ends the
/// same has only its left side read: the ids of one message's parts mostly share
/// their right side (`image001.png@01D9C5A1.4B5E2F30`, `part1.x@example.org`), and
/// reading it again cost a 10 000-part message ~25 instructions a part.
#[inline(always)]
pub(crate) fn plain_msg_id_after<'v>(
    value: &'v [u8],
    at_right: &[u8],
) -> Option<(&'v [u8], usize)> {
    let inner = match value {
        // How nearly every value is written, `Content-ID: <…>`: no white space to look
        // for, at either end.
        [b' ', b'<', inner @ .., b'>'] => inner,
        _ => {
            let blank = |b: u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
            let mut start = 0;
            while start < value.len() && blank(value[start]) {
                start += 1;
            }
            let mut end = value.len();
            while end > start && blank(value[end - 1]) {
                end -= 1;
            }
            if end - start < 2 || value[start] != b'<' || value[end - 1] != b'>' {
                return None;
            }
            &value[start + 1..end - 1]
        }
    };
    // `at_right` is `@` and a dot-atom: the id is plain when what comes before it is a
    // dot-atom without `@`.
    if let Some(split) = inner.len().checked_sub(at_right.len()) {
        let left = &inner[..split];
        if !at_right.is_empty()
            && same_octets(&inner[split..], at_right)
            && dot_atoms(left, false) == Some(split)
        {
            return Some((inner, split));
        }
    }
    dot_atoms(inner, true).map(|at| (inner, at))
}

/// Reads `s` as a dot-atom, or (`with_at`) as `dot-atom@dot-atom`; returns the index of
/// its `@`, or its length when it has none. A dot-atom is atext and dots, neither at
/// its start or end nor two in a row.
#[inline(always)]
fn dot_atoms(s: &[u8], with_at: bool) -> Option<usize> {
    // One pass: `after_sep` is true at the start of each side and after a dot, where
    // neither a dot nor the end of a side may come. Atext, by far the most common, is
    // decided by one table look-up. The first eight octets are passed over at once
    // when all are letters or digits (`part1234@`, `image001.`): tried further on, at
    // each side or segment, the word test failed more often than it paid (domains
    // are short), and cost more than the octets it saved.
    let mut at = s.len();
    let mut after_sep = true;
    let mut i = 0;
    if let Some(w) = s.get(..8) {
        if not_alnum(u64::from_le_bytes(w.try_into().unwrap_or([0; 8]))) == 0 {
            after_sep = false;
            i = 8;
        }
    }
    while i < s.len() {
        let b = s[i];
        i += 1;
        if is_atext(b) {
            after_sep = false;
            continue;
        }
        match b {
            b'@' if with_at && at == s.len() && !after_sep => at = i - 1,
            b'.' if !after_sep => {}
            _ => return None,
        }
        after_sep = true;
    }
    (!after_sep && (!with_at || at < s.len())).then_some(at)
}

/// A word with the high bit set in each octet that is not an ASCII letter or digit.
/// Each range test adds to octets whose high bit is clear, so no carry crosses octets.
fn not_alnum(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = ONES * 0x80;
    let v = w & !HIGH;
    let in_range = |x: u64, lo: u8, hi: u8| {
        (x + ONES * u64::from(0x80 - lo)) & !(x + ONES * u64::from(0x7f - hi)) & HIGH
    };
    // Setting 0x20 folds capitals onto small letters and nothing else onto them.
    let alnum = in_range(v, b'0', b'9') | in_range(v | (ONES * 0x20), b'a', b'z');
    (!alnum & HIGH) | (w & HIGH)
}

/// The identifier to compare, whatever was written: the msg-id's addr-spec when it parses,
/// else the value with CFWS at both ends, folding and one pair of enclosing `<>` removed.
/// Used for `start`, duplicates and `cid:` matching (RFC 2387 §3.2, RFC 2392 §2).
pub fn addr_spec(value: &[u8]) -> Vec<u8> {
    match parse_msg_id(value) {
        Ok(a) => a.into_owned(),
        Err(_) => lenient_addr_spec(value),
    }
}

/// [`addr_spec`] of a value that does not parse as a msg-id: comments (outside
/// quoted-strings) and line breaks removed, surrounding whitespace and one pair of angle
/// brackets (the closing one may be missing) stripped. A value without brackets keeps
/// its text (it is `content-id-syntax`, not a different identifier).
pub(crate) fn lenient_addr_spec(value: &[u8]) -> Vec<u8> {
    let out = strip_comments(value);
    let s = out.trim_ascii();
    let s = match s.strip_prefix(b"<") {
        Some(inner) => inner.strip_suffix(b">").unwrap_or(inner),
        None => s,
    };
    s.trim_ascii().to_vec()
}

/// Why a Content-ID that a lenient reader matches is missed by a strict one (the
/// readers of `content-id-malformed`): Thunderbird and rspamd strip one optional pair of
/// `<>` and compare the rest octet by octet; Gmail is reported to need the brackets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// `Content-ID: 1312` (Python's `add_attachment(cid=)`, genkgo/mail, dart mailer).
    NoBrackets,
    /// `<<x@y>>`: brackets added twice.
    Doubled,
    /// `<cid:x@y>`: the URL scheme written into the id.
    CidPrefix,
    /// `=?utf-8?Q?…?=`: an RFC 2047 encoded-word, which a msg-id cannot hold.
    EncodedWord,
    /// `< x@y >` or `<x @ y>`: white space or comments inside the brackets.
    SpaceInside,
    /// `<x@y` or `x@y>`: a bracket without its pair.
    Unbalanced,
}

impl Malformed {
    pub fn describe(self) -> &'static str {
        match self {
            Malformed::NoBrackets => "it has no angle brackets",
            Malformed::Doubled => "it has two pairs of angle brackets",
            Malformed::CidPrefix => "it holds the cid: scheme inside the brackets",
            Malformed::EncodedWord => "it is RFC 2047-encoded",
            Malformed::SpaceInside => "it has white space or comments inside the brackets",
            Malformed::Unbalanced => "an angle bracket lacks its pair",
        }
    }
}

/// A Content-ID value as the readers that match `cid:` references against it see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdForms {
    /// What a strict reader compares: the text inside one pair of angle brackets, with
    /// only white space and comments outside them and none inside. None when the value
    /// is not so written.
    pub exact: Option<Vec<u8>>,
    /// What a lenient reader recovers, when it differs from `exact`: encoded-words
    /// decoded, comments, white space, every pair of brackets and a `cid:` prefix
    /// removed; with the first reason a strict reader misses it.
    pub lenient: Option<(Vec<u8>, Malformed)>,
}

/// The [`IdForms`] of a Content-ID value.
pub fn id_forms(value: &[u8]) -> IdForms {
    let exact = bracketed(value);
    // Nearly every Content-ID: one pair of brackets, nothing a lenient reader reads
    // differently. Parsed once per part, so the common case skips the copies below.
    if let Some(id) = &exact {
        let cid = id.len() > 4 && id[..4].eq_ignore_ascii_case(b"cid:");
        if !cid && !value.windows(2).any(|w| w == b"=?") {
            return IdForms {
                exact,
                lenient: None,
            };
        }
    }
    let mut why: Option<Malformed> = None;
    let mut note = |w: Malformed| {
        if why.is_none() {
            why = Some(w);
        }
    };
    let decoded;
    let mut text: &[u8] = value;
    if value.windows(2).any(|w| w == b"=?") {
        decoded = crate::engine::syntax::decode::rfc2047(value);
        if decoded != value {
            note(Malformed::EncodedWord);
            text = &decoded;
        }
    }
    let trimmed = strip_comments(text);
    let mut s: &[u8] = trimmed.trim_ascii();
    let mut pairs = 0;
    while s.len() >= 2 && s[0] == b'<' && s[s.len() - 1] == b'>' {
        s = s[1..s.len() - 1].trim_ascii();
        pairs += 1;
    }
    if let Some(inner) = s.strip_prefix(b"<").or_else(|| s.strip_suffix(b">")) {
        s = inner.trim_ascii();
        note(Malformed::Unbalanced);
    }
    match pairs {
        0 => note(Malformed::NoBrackets),
        1 => {}
        _ => note(Malformed::Doubled),
    }
    if s.len() > 4 && s[..4].eq_ignore_ascii_case(b"cid:") {
        s = &s[4..];
        note(Malformed::CidPrefix);
    }
    let squeezed: Vec<u8> = s
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    if squeezed.len() != s.len() || (pairs == 1 && exact.is_none()) {
        note(Malformed::SpaceInside);
    }
    let lenient = match why {
        Some(w) if !squeezed.is_empty() && exact.as_deref() != Some(&squeezed[..]) => {
            Some((squeezed, w))
        }
        _ => None,
    };
    IdForms { exact, lenient }
}

/// The text inside one pair of angle brackets that make up the whole value but for
/// white space and comments around them; None when there is white space, a comment or
/// another bracket inside, or nothing.
fn bracketed(value: &[u8]) -> Option<Vec<u8>> {
    let start = params::skip_cfws(value, 0);
    let rest = value.get(start..)?;
    if rest.first() != Some(&b'<') {
        return None;
    }
    let close = rest.iter().position(|&b| b == b'>')?;
    let inner = &rest[1..close];
    if inner.is_empty()
        || inner
            .iter()
            .any(|&b| b <= b' ' || b == 0x7f || matches!(b, b'<' | b'(' | b')'))
    {
        return None;
    }
    let after = start + close + 1;
    (params::skip_cfws(value, after) == value.len()).then(|| inner.to_vec())
}

/// `value` without its comments (outside quoted-strings) and line breaks.
fn strip_comments(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len());
    let (mut depth, mut quoted, mut i) = (0usize, false, 0);
    while i < value.len() {
        let b = value[i];
        match b {
            b'\r' | b'\n' => {}
            b'\\' if quoted || depth > 0 => {
                if depth == 0 {
                    out.extend_from_slice(&value[i..(i + 2).min(value.len())]);
                }
                i += 1;
            }
            b'"' if depth == 0 => {
                quoted = !quoted;
                out.push(b);
            }
            b'(' if !quoted => depth += 1,
            b')' if !quoted && depth > 0 => depth -= 1,
            _ if depth > 0 => {}
            _ => out.push(b),
        }
        i += 1;
    }
    out
}

/// The shortest id taken for a cut form of a longer one (`related-ref-mismatch`):
/// shorter ones (`image001`, `part1`) begin unrelated ids by chance.
pub const MIN_CUT: usize = 8;

/// Whether one of ids `a` and `b` is the other cut short, the shorter at least
/// [`MIN_CUT`] octets: converters that cut a Content-ID at a dot (simple-java-mail
/// #307: `<image001.png@01D719B4>` for `cid:image001.png@01D719B4.37AF4500`).
pub fn cut_short(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short.len() >= MIN_CUT
        && short.len() < long.len()
        && long.as_bytes().starts_with(short.as_bytes())
}

/// Whether `id` can be written between angle brackets as a Content-ID that every reader
/// reads back as `id`: printable ASCII with no bracket, quote, backslash or parenthesis.
pub fn writable_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'<' | b'>' | b'(' | b')' | b'"' | b'\\'))
}

/// RFC 5322 §3.2.3 atext, with UTF-8 (RFC 6532).
pub(crate) fn is_atext(b: u8) -> bool {
    ATEXT[b as usize]
}

/// RFC 5322 atext plus UTF-8 (RFC 6532), as a table: Content-IDs are parsed once per
/// part, and a 10 000-part message spends its time here.
static ATEXT: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = b.is_ascii_alphanumeric() || b >= 0x80;
        i += 1;
    }
    let specials = b"!#$%&'*+-/=?^_`{|}~";
    let mut j = 0;
    while j < specials.len() {
        t[specials[j] as usize] = true;
        j += 1;
    }
    t
};

struct Cur<'s> {
    s: &'s [u8],
    i: usize,
}

impl Cur<'_> {
    fn at_end(&self) -> bool {
        self.i >= self.s.len()
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        let hit = self.peek() == Some(b);
        if hit {
            self.i += 1;
        }
        hit
    }

    /// Skips folding whitespace and (nested) comments.
    fn cfws(&mut self) {
        self.i = params::skip_cfws(self.s, self.i);
    }

    fn atom(&mut self, out: &mut Vec<u8>) -> bool {
        let start = self.i;
        while self.peek().is_some_and(is_atext) {
            self.i += 1;
        }
        out.extend_from_slice(&self.s[start..self.i]);
        self.i > start
    }

    /// An atom or a quoted-string (kept with its quotes, as a `cid:` URL would carry it).
    fn word(&mut self, out: &mut Vec<u8>) -> bool {
        if self.peek() != Some(b'"') {
            return self.atom(out);
        }
        let start = self.i;
        self.i += 1;
        while let Some(c) = self.peek() {
            self.i += 1;
            match c {
                b'"' => {
                    out.extend(
                        self.s[start..self.i]
                            .iter()
                            .filter(|&&b| b != b'\r' && b != b'\n'),
                    );
                    return true;
                }
                b'\\' => self.i = (self.i + 1).min(self.s.len()),
                _ => {}
            }
        }
        self.i = start;
        false
    }

    fn domain_literal(&mut self, out: &mut Vec<u8>) -> bool {
        let start = self.i;
        self.i += 1;
        while let Some(c) = self.peek() {
            self.i += 1;
            match c {
                b']' => {
                    out.extend(
                        self.s[start..self.i]
                            .iter()
                            .filter(|&&b| !matches!(b, b'\r' | b'\n' | b' ' | b'\t')),
                    );
                    return true;
                }
                b'[' | b'\\' => return false,
                _ => {}
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The eight-octet test flags exactly the octets that are not ASCII letters or
    /// digits, in every position of the word, whatever its neighbours.
    #[test]
    fn not_alnum_flags_each_octet_that_is_not_a_letter_or_digit() {
        for pos in 0..8 {
            for v in 0..=255u8 {
                for fill in [b'a', b'Z', b'0', b'~', 0x80, 0xff] {
                    let mut w = [fill; 8];
                    w[pos] = v;
                    let got = not_alnum(u64::from_le_bytes(w));
                    for (k, &o) in w.iter().enumerate() {
                        let flagged = got >> (k * 8) & 0x80 != 0;
                        assert_eq!(flagged, !o.is_ascii_alphanumeric(), "{w:?} octet {k}");
                    }
                }
            }
        }
    }

    /// Passing over the first eight octets at once reads a plain id as the octet-by-octet
    /// reading did, whatever comes at and after the eighth: a separator there, an empty
    /// side, a second `@`, an octet a msg-id cannot hold.
    #[test]
    fn plain_id_first_word_read_as_octets() {
        fn octet_by_octet(inner: &[u8]) -> bool {
            let (mut at, mut after_sep) = (false, true);
            for &b in inner {
                if is_atext(b) {
                    after_sep = false;
                    continue;
                }
                match b {
                    b'@' if !at && !after_sep => at = true,
                    b'.' if !after_sep => {}
                    _ => return false,
                }
                after_sep = true;
            }
            at && !after_sep
        }
        let heads: [&[u8]; 6] = [
            b"abcdefgh",
            b"ABCD1234",
            b"abcdefg",
            b"abc.efgh",
            b"abcdef-h",
            b"a\xc3\xa9cdefg",
        ];
        let tails: [&[u8]; 9] = [
            b"@x.y", b"@", b".@x", b"@x.", b"@x@y", b"x@y", b"", b" @x", b"@[x]",
        ];
        for h in heads {
            for t in tails {
                let inner = [h, t].concat();
                let value = [b"<".as_slice(), &inner, b">"].concat();
                let want = octet_by_octet(&inner).then_some(inner.as_slice());
                assert_eq!(
                    plain_msg_id(&value),
                    want,
                    "{:?}",
                    String::from_utf8_lossy(&value)
                );
            }
        }
    }

    /// Given the `@right` of an earlier plain id, a value is read as without it: the same
    /// addr-spec, or none, and its `@` where it is, whether it ends the same or not, and
    /// whatever the left side holds; and every plain id is one the full parser reads
    /// alike.
    #[test]
    fn plain_id_after_an_earlier_right_side_reads_as_without() {
        let lefts: [&[u8]; 14] = [
            b"part1234",
            b"part12345",
            b"p",
            b"a.b",
            b"image001.png",
            b"a..b",
            b".a",
            b"a.",
            b"a@b",
            b"",
            b"a b",
            b"\xc3\xa9t\xc3\xa9",
            b"abcdefgh.",
            b"ABCDEFGH@x",
        ];
        let rights: [&[u8]; 12] = [
            b"example.org",
            b"x",
            b"01D9C5A1.4B5E2F30",
            b"a.b.c.d.e.f.g.h.i.j",
            b"",
            b"x.",
            b".x",
            b"x..y",
            b"x@y",
            b"exampleXorg",
            b"[1.2.3.4]",
            b"example.org ",
        ];
        let earlier: [&[u8]; 7] = [
            b"",
            b"@x",
            b"@example.org",
            b"@01D9C5A1.4B5E2F30",
            b"@a.b.c.d.e.f.g.h.i.j",
            b"@xample.org",
            b"@e",
        ];
        for l in lefts {
            for r in rights {
                for (pre, post) in [
                    (" <", ">"),
                    ("<", ">"),
                    ("  <", ">"),
                    (" <", ">\r\n"),
                    ("\t<", "> "),
                    (" ", ">"),
                    (" <", ""),
                    (" <", " "),
                    ("", ">"),
                ] {
                    let value = [pre.as_bytes(), l, b"@", r, post.as_bytes()].concat();
                    let want = plain_msg_id(&value);
                    if let Some(id) = want {
                        assert_eq!(parse_msg_id(&value).as_deref(), Ok(id));
                    }
                    for e in earlier {
                        let got = plain_msg_id_after(&value, e);
                        let shown = String::from_utf8_lossy(&value);
                        assert_eq!(got.map(|(id, _)| id), want, "{shown:?} after {e:?}");
                        if let Some((id, at)) = got {
                            assert_eq!(id.iter().position(|&b| b == b'@'), Some(at), "{shown:?}");
                        }
                    }
                }
            }
        }
    }

    /// Values too short to hold an id, in the form the first test reads at once.
    #[test]
    fn plain_id_of_almost_nothing() {
        for v in [
            &b" <>"[..],
            b" <@>",
            b" <a@>",
            b" <@a>",
            b" <a>",
            b" >",
            b" <",
            b" ",
        ] {
            assert_eq!(plain_msg_id(v), None, "{v:?}");
            assert_eq!(plain_msg_id_after(v, b"@a"), None, "{v:?}");
        }
        assert_eq!(plain_msg_id_after(b" <a@a>", b"@a"), Some((&b"a@a"[..], 1)));
    }

    fn forms(v: &str) -> (Option<String>, Option<(String, Malformed)>) {
        let f = id_forms(v.as_bytes());
        let s = |b: Vec<u8>| String::from_utf8(b).unwrap();
        (f.exact.map(s), f.lenient.map(|(b, w)| (s(b), w)))
    }

    #[test]
    fn content_id_forms_as_strict_and_lenient_readers_see_them() {
        let exact = |v: &str, id: &str| assert_eq!(forms(v), (Some(id.into()), None), "{v}");
        exact(" <a@b>", "a@b");
        exact(
            "\r\n <image001.png@01D9C5A1.4B5E2F30>\r\n",
            "image001.png@01D9C5A1.4B5E2F30",
        );
        exact(" (c) <a@b> (d)", "a@b");
        // Gmail's ids have no @: every reader still matches them as written.
        exact(" <ii_m3x9k2>", "ii_m3x9k2");
        let lenient = |v: &str, id: &str, why: Malformed, strict: Option<&str>| {
            assert_eq!(
                forms(v),
                (strict.map(str::to_string), Some((id.to_string(), why))),
                "{v}"
            )
        };
        lenient(" 1312", "1312", Malformed::NoBrackets, None);
        lenient(" logo@x.test", "logo@x.test", Malformed::NoBrackets, None);
        lenient(" <<x@y>>", "x@y", Malformed::Doubled, None);
        lenient(" <cid:x@y>", "x@y", Malformed::CidPrefix, Some("cid:x@y"));
        lenient(" cid:x@y", "x@y", Malformed::NoBrackets, None);
        lenient(" < x@y >", "x@y", Malformed::SpaceInside, None);
        lenient(" <ii_kx81", "ii_kx81", Malformed::Unbalanced, None);
        lenient(" <a . b @ c>", "a.b@c", Malformed::SpaceInside, None);
        lenient(
            " =?utf-8?B?PGxvZ29AeC50ZXN0Pg==?=",
            "logo@x.test",
            Malformed::EncodedWord,
            None,
        );
        // Nothing to recover.
        assert_eq!(forms(" "), (None, None));
        assert_eq!(forms(" <>"), (None, None));
        assert_eq!(forms(" (only a comment)"), (None, None));
    }

    #[test]
    fn addr_spec_is_lenient() {
        assert_eq!(addr_spec(b" <a@b> "), b"a@b");
        assert_eq!(addr_spec(b" (x) <a:b@c:d>\r\n "), b"a:b@c:d");
        assert_eq!(addr_spec(b"bare@id"), b"bare@id");
        assert_eq!(addr_spec(b"\r\n <a@b> (x (y))"), b"a@b");
        assert_eq!(addr_spec(b" (only a comment)"), b"");
        assert_eq!(
            addr_spec(b"<\"(not) a comment\"@b>"),
            b"\"(not) a comment\"@b"
        );
        // CFWS between the words of a msg-id is not part of its addr-spec.
        assert_eq!(addr_spec(b"<a . b @ c>"), b"a.b@c");
        // Values that are not msg-ids: comments go, brackets come off even unclosed.
        assert_eq!(addr_spec(b"<a:b@c> (x)"), b"a:b@c");
        assert_eq!(addr_spec(b"<ii_kx81"), b"ii_kx81");
        // 8-bit octets are kept as written, never replaced.
        assert_eq!(addr_spec(b"<\xff:@x>"), b"\xff:@x");
    }
}
