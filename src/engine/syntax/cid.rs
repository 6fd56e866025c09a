//! `cid:` and `mid:` URLs (RFC 2392 §2).
//!
//! ```text
//! cid-url = "cid" ":" content-id
//! mid-url = "mid" ":" message-id [ "/" content-id ]
//! content-id = message-id = url-addr-spec   ; a URL-encoded RFC 5322 addr-spec
//! ```
//!
//! A `cid:` URL stands for the Content-ID `<addr-spec>` obtained by %-decoding the URL
//! body. RFC 2392's own example (`cid:foo4%25foo1@bar.net` ↔ `<foo4%25foo1@bar.net>`)
//! contradicts that text (erratum 454), and many writers put the Content-ID in the URL
//! without encoding anything, so a reference is matched against a Content-ID in both
//! forms, %-decoded first ([`IdRef::matches`] says which one matched).
//!
//! Everything here works on text and never fails on odd input: parsing returns `None`
//! or an error value, and the checks decide what to report.

use std::fmt;

/// Which of the two URL schemes of RFC 2392.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Cid,
    Mid,
}

/// One identifier inside a `cid:`/`mid:` URL: the URL text as written and its %-decoded
/// form (the addr-spec of RFC 2392 §2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdRef {
    /// As written in the URL, still %-encoded.
    pub raw: String,
    /// %-decoded once (invalid UTF-8 after decoding is replaced, which only matters for
    /// identifiers that could not match a header anyway).
    pub decoded: String,
}

/// Which form of a reference equalled the addr-spec of a Content-ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// The %-decoded URL body (RFC 2392 §2 text).
    Decoded,
    /// The URL body as written (RFC 2392's example, erratum 454; common in real mail).
    Raw,
}

impl Match {
    pub fn as_str(self) -> &'static str {
        match self {
            Match::Decoded => "%-decoded",
            Match::Raw => "as written",
        }
    }
}

impl IdRef {
    fn new(raw: &str) -> IdRef {
        IdRef {
            raw: raw.to_string(),
            decoded: String::from_utf8_lossy(&crate::engine::syntax::params::percent_decode(
                raw.as_bytes(),
            ))
            .into_owned(),
        }
    }

    /// Whether this reference names the Content-ID (or Message-ID) whose addr-spec is
    /// `addr` (angle brackets already removed), and in which form. The decoded form is
    /// tried first; comparison is octet by octet.
    pub fn matches(&self, addr: &str) -> Option<Match> {
        if self.decoded == addr {
            Some(Match::Decoded)
        } else if self.raw == addr {
            Some(Match::Raw)
        } else {
            None
        }
    }

    /// The identifier as a header value, `<addr-spec>`.
    pub fn to_header(&self) -> String {
        format!("<{}>", self.decoded)
    }
}

/// A parsed `cid:` or `mid:` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdUrl {
    /// `cid:content-id`
    Cid(IdRef),
    /// `mid:message-id[/content-id]`
    Mid { message: IdRef, part: Option<IdRef> },
}

impl IdUrl {
    pub fn scheme(&self) -> Scheme {
        match self {
            IdUrl::Cid(_) => Scheme::Cid,
            IdUrl::Mid { .. } => Scheme::Mid,
        }
    }
}

/// Why a string is not a usable `cid:`/`mid:` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CidError {
    /// The scheme is neither `cid` nor `mid`.
    NotCidOrMid,
    /// Wrong scheme for the conversion asked for (`mid:` given where `cid:` is needed…).
    WrongScheme(Scheme),
    /// Nothing after the scheme.
    Empty,
    /// A Content-ID or Message-ID value without an addr-spec in it.
    NoAddrSpec,
}

impl fmt::Display for CidError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CidError::NotCidOrMid => f.write_str("not a cid: or mid: URL (RFC 2392 §2)"),
            CidError::WrongScheme(Scheme::Cid) => {
                f.write_str("a cid: URL was given where a mid: URL is expected")
            }
            CidError::WrongScheme(Scheme::Mid) => {
                f.write_str("a mid: URL was given where a cid: URL is expected")
            }
            CidError::Empty => f.write_str("the URL has nothing after the scheme"),
            CidError::NoAddrSpec => f.write_str("no <addr-spec> in the identifier"),
        }
    }
}

impl std::error::Error for CidError {}

/// The scheme of `url` if it is `cid:` or `mid:` (case-insensitive), and the rest.
pub fn split_scheme(url: &str) -> Option<(Scheme, &str)> {
    let url = url.trim_matches(|c: char| c.is_ascii_whitespace());
    let head = url.get(..4)?;
    let rest = &url[4..];
    if head.eq_ignore_ascii_case("cid:") {
        Some((Scheme::Cid, rest))
    } else if head.eq_ignore_ascii_case("mid:") {
        Some((Scheme::Mid, rest))
    } else {
        None
    }
}

/// Parses a `cid:` or `mid:` URL (scheme case-insensitive, surrounding whitespace
/// ignored). A fragment (`#…`) is not part of the identifier and is dropped. Returns
/// `None` for other schemes. The identifiers are not validated: see [`syntax_problem`].
pub fn parse(url: &str) -> Option<IdUrl> {
    let (scheme, rest) = split_scheme(url)?;
    let body = rest.split('#').next().unwrap_or("");
    Some(match scheme {
        Scheme::Cid => IdUrl::Cid(IdRef::new(body)),
        Scheme::Mid => {
            // RFC 2392 §2: a "/" inside either identifier must be %-encoded, so the first
            // one is the separator.
            let (m, c) = match body.split_once('/') {
                Some((m, c)) => (m, Some(c)),
                None => (body, None),
            };
            IdUrl::Mid {
                message: IdRef::new(m),
                part: c.map(IdRef::new),
            }
        }
    })
}

/// `cid:` URL → Content-ID header value `<addr-spec>` (RFC 2392 §2: drop the scheme,
/// %-decode, add angle brackets). `cid:foo4%25foo1@bar.net` → `<foo4%foo1@bar.net>`.
pub fn cid_to_content_id(url: &str) -> Result<String, CidError> {
    match parse(url) {
        None => Err(CidError::NotCidOrMid),
        Some(IdUrl::Mid { .. }) => Err(CidError::WrongScheme(Scheme::Mid)),
        Some(IdUrl::Cid(r)) if r.raw.is_empty() => Err(CidError::Empty),
        Some(IdUrl::Cid(r)) => Ok(r.to_header()),
    }
}

/// `mid:` URL → (Message-ID, optional Content-ID), both as header values `<addr-spec>`.
pub fn mid_to_ids(url: &str) -> Result<(String, Option<String>), CidError> {
    match parse(url) {
        None => Err(CidError::NotCidOrMid),
        Some(IdUrl::Cid(_)) => Err(CidError::WrongScheme(Scheme::Cid)),
        Some(IdUrl::Mid { message, .. }) if message.raw.is_empty() => Err(CidError::Empty),
        Some(IdUrl::Mid { message, part }) => {
            Ok((message.to_header(), part.as_ref().map(IdRef::to_header)))
        }
    }
}

/// Content-ID (with or without angle brackets, comments and folding) → `cid:` URL, with
/// every octet that may not appear in a URL %-encoded (`%` itself included).
pub fn content_id_to_cid(content_id: &str) -> Result<String, CidError> {
    let addr = addr_spec_of(content_id.as_bytes()).ok_or(CidError::NoAddrSpec)?;
    Ok(format!("cid:{}", encode(&addr, false)))
}

/// Message-ID and optional Content-ID → `mid:` URL. `/` is encoded too, since it
/// separates the two identifiers (RFC 2392 §2).
pub fn ids_to_mid(message_id: &str, content_id: Option<&str>) -> Result<String, CidError> {
    let m = addr_spec_of(message_id.as_bytes()).ok_or(CidError::NoAddrSpec)?;
    let mut url = format!("mid:{}", encode(&m, true));
    if let Some(c) = content_id {
        let c = addr_spec_of(c.as_bytes()).ok_or(CidError::NoAddrSpec)?;
        url.push('/');
        url.push_str(&encode(&c, true));
    }
    Ok(url)
}

/// Octets allowed as they are in the body of a cid/mid URL: RFC 3986 unreserved,
/// sub-delims, `:`, `@`, and `/` where it is not the mid separator. `?` is allowed in a
/// URL too, but as it may start a query in generic parsers it is encoded on output.
fn url_safe(b: u8, slash_reserved: bool) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'.'
                | b'_'
                | b'~'
                | b'!'
                | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'@'
        )
        || (b == b'/' && !slash_reserved)
}

fn encode(s: &str, slash_reserved: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if url_safe(b, slash_reserved) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The addr-spec inside a Content-ID or Message-ID field value: folding and comments
/// removed, surrounding whitespace and one pair of angle brackets stripped. A value
/// without brackets is accepted (it is `content-id-syntax`, not a different identifier).
/// `None` when nothing is left.
pub fn addr_spec_of(value: &[u8]) -> Option<String> {
    let mut out = Vec::with_capacity(value.len());
    let mut depth = 0usize;
    let mut quoted = false;
    let mut i = 0;
    while i < value.len() {
        let b = value[i];
        match b {
            b'\r' | b'\n' => {}
            b'\\' if quoted || depth > 0 => {
                if depth == 0 {
                    out.push(b);
                    if let Some(&n) = value.get(i + 1) {
                        out.push(n);
                    }
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
    let s = String::from_utf8_lossy(&out);
    let s = s.trim_matches(|c: char| c.is_ascii_whitespace());
    let s = match s.strip_prefix('<') {
        Some(inner) => inner.strip_suffix('>').unwrap_or(inner),
        None => s,
    };
    let s = s.trim_matches(|c: char| c.is_ascii_whitespace());
    (!s.is_empty()).then(|| s.to_string())
}

/// Why `url` (a `cid:` or `mid:` URL) is not a URL-encoded addr-spec per RFC 2392 §2, in
/// words for a mail admin; `None` when it is fine or is not a cid/mid URL.
pub fn syntax_problem(url: &str) -> Option<String> {
    let (scheme, rest) = split_scheme(url)?;
    let body = rest.split('#').next().unwrap_or("");
    let pieces: Vec<(&str, &str)> = match scheme {
        Scheme::Cid => vec![("Content-ID", body)],
        Scheme::Mid => match body.split_once('/') {
            Some((m, c)) => vec![("Message-ID", m), ("Content-ID", c)],
            None => vec![("Message-ID", body)],
        },
    };
    for (what, piece) in pieces {
        if piece.is_empty() {
            return Some(format!("the {what} is empty"));
        }
        if let Some(p) = url_encoding_problem(piece, scheme == Scheme::Mid) {
            return Some(format!("the {what} {p}"));
        }
        let decoded = String::from_utf8_lossy(&crate::engine::syntax::params::percent_decode(
            piece.as_bytes(),
        ))
        .into_owned();
        if let Some(p) = addr_spec_problem(&decoded) {
            return Some(format!("the {what} is not an addr-spec: {p}"));
        }
    }
    None
}

fn url_encoding_problem(piece: &str, mid: bool) -> Option<String> {
    let b = piece.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'%' {
            let ok = b.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit);
            if !ok {
                return Some("has a '%' that is not followed by two hex digits".into());
            }
            i += 3;
            continue;
        }
        // `?` is a legal URL octet even though encode() escapes it.
        if !url_safe(c, mid) && c != b'?' {
            let shown = if c.is_ascii_graphic() {
                format!("'{}'", c as char)
            } else {
                format!("octet 0x{c:02X}")
            };
            return Some(format!("holds {shown}, which must be %-encoded in a URL"));
        }
        i += 1;
    }
    None
}

fn is_atext(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || b >= 0x80 // RFC 6532 UTF-8
        || matches!(
            b,
            b'!' | b'#'
                | b'$'
                | b'%'
                | b'&'
                | b'\''
                | b'*'
                | b'+'
                | b'-'
                | b'/'
                | b'='
                | b'?'
                | b'^'
                | b'_'
                | b'`'
                | b'{'
                | b'|'
                | b'}'
                | b'~'
        )
}

fn dot_atom_problem(s: &str) -> Option<String> {
    if s.is_empty() {
        return Some("empty".into());
    }
    for atom in s.split('.') {
        if atom.is_empty() {
            return Some("leading, trailing or doubled '.'".into());
        }
        if let Some(&c) = atom.as_bytes().iter().find(|&&c| !is_atext(c)) {
            return Some(if c.is_ascii_graphic() {
                format!("'{}' is not allowed unquoted", c as char)
            } else {
                format!("octet 0x{c:02X} is not allowed")
            });
        }
    }
    None
}

/// RFC 5322 §3.4.1 addr-spec: (dot-atom / quoted-string) "@" (dot-atom / domain-literal).
fn addr_spec_problem(s: &str) -> Option<String> {
    let b = s.as_bytes();
    // The local part may be a quoted-string holding '@', so find its end first.
    let at = if b.first() == Some(&b'"') {
        let mut i = 1;
        let mut close = None;
        while i < b.len() {
            match b[i] {
                b'\\' => i += 1,
                b'"' => {
                    close = Some(i);
                    break;
                }
                b'\r' | b'\n' => return Some("line break in the quoted local part".into()),
                _ => {}
            }
            i += 1;
        }
        let Some(close) = close else {
            return Some("unterminated quoted local part".into());
        };
        if b.get(close + 1) != Some(&b'@') {
            return Some("no '@' after the quoted local part".into());
        }
        close + 1
    } else {
        let Some(at) = s.rfind('@') else {
            return Some("no '@'".into());
        };
        if let Some(p) = dot_atom_problem(&s[..at]) {
            return Some(format!("local part: {p}"));
        }
        at
    };
    let domain = &s[at + 1..];
    if let Some(lit) = domain.strip_prefix('[') {
        let Some(inner) = lit.strip_suffix(']') else {
            return Some("unterminated domain literal".into());
        };
        if inner
            .bytes()
            .any(|c| matches!(c, b'[' | b']' | b'\\') || c < 0x21 || c == 0x7f)
        {
            return Some("bad octet in the domain literal".into());
        }
        return None;
    }
    dot_atom_problem(domain).map(|p| format!("domain: {p}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc2392_text_decodes_and_erratum_example_also_matches() {
        // RFC 2392 §2 (and both seed drafts): "cid:foo4%25foo1@bar.net".
        let url = "cid:foo4%25foo1@bar.net";
        assert_eq!(cid_to_content_id(url).unwrap(), "<foo4%foo1@bar.net>");
        let Some(IdUrl::Cid(r)) = parse(url) else {
            panic!("not parsed as cid")
        };
        assert_eq!(r.matches("foo4%foo1@bar.net"), Some(Match::Decoded));
        // The RFC's example pairs it with <foo4%25foo1@bar.net> (erratum 454).
        assert_eq!(r.matches("foo4%25foo1@bar.net"), Some(Match::Raw));
        assert_eq!(r.matches("foo4foo1@bar.net"), None);
        // Reversing the process gives the original URL back.
        assert_eq!(content_id_to_cid("<foo4%foo1@bar.net>").unwrap(), url);
        assert_eq!(syntax_problem(url), None);
    }

    #[test]
    fn rfc2392_html_example_image() {
        // <IMG SRC="cid:foo4*foo1@bar.net"> with Content-ID: <foo4*foo1@bar.net>
        let url = "cid:foo4*foo1@bar.net";
        assert_eq!(cid_to_content_id(url).unwrap(), "<foo4*foo1@bar.net>");
        assert_eq!(content_id_to_cid("<foo4*foo1@bar.net>").unwrap(), url);
        assert_eq!(syntax_problem(url), None);
    }

    #[test]
    fn rfc2392_mid_example_long_form() {
        let url = "mid:960830.1639@XIson.com/partA.960830.1639@XIson.com";
        let (m, c) = mid_to_ids(url).unwrap();
        assert_eq!(m, "<960830.1639@XIson.com>");
        assert_eq!(c.as_deref(), Some("<partA.960830.1639@XIson.com>"));
        assert_eq!(
            ids_to_mid(&m, c.as_deref()).unwrap(),
            "mid:960830.1639@XIson.com/partA.960830.1639@XIson.com"
        );
        assert_eq!(syntax_problem(url), None);
        // The draft's second example: a message whose own Message-ID differs.
        let Some(IdUrl::Mid { message, .. }) = parse(url) else {
            panic!("not parsed as mid")
        };
        assert_eq!(message.matches("970701.32784@VIers.none.com"), None);
    }

    #[test]
    fn mid_short_form_and_slash_encoding() {
        assert_eq!(
            mid_to_ids("MID:950124.162336@XIson.com").unwrap(),
            ("<950124.162336@XIson.com>".to_string(), None)
        );
        // A "/" inside an identifier must be encoded for mid, not for cid.
        assert_eq!(
            ids_to_mid("<a/b@x.test>", Some("<c/d@x.test>")).unwrap(),
            "mid:a%2Fb@x.test/c%2Fd@x.test"
        );
        assert_eq!(content_id_to_cid("<a/b@x.test>").unwrap(), "cid:a/b@x.test");
        assert_eq!(
            mid_to_ids("mid:a%2Fb@x.test/c%2Fd@x.test").unwrap(),
            ("<a/b@x.test>".to_string(), Some("<c/d@x.test>".to_string()))
        );
    }

    #[test]
    fn scheme_is_case_insensitive_and_others_are_refused() {
        assert_eq!(cid_to_content_id("CiD:a@b").unwrap(), "<a@b>".to_string());
        assert_eq!(cid_to_content_id("http://x/"), Err(CidError::NotCidOrMid));
        assert_eq!(
            cid_to_content_id("mid:a@b"),
            Err(CidError::WrongScheme(Scheme::Mid))
        );
        assert_eq!(
            mid_to_ids("cid:a@b"),
            Err(CidError::WrongScheme(Scheme::Cid))
        );
        assert_eq!(cid_to_content_id("cid:"), Err(CidError::Empty));
        assert!(parse("ci").is_none());
        assert!(parse("é").is_none());
    }

    #[test]
    fn encoding_of_unsafe_octets() {
        assert_eq!(
            content_id_to_cid(" <\"a b\"@x.test> (comment)").unwrap(),
            "cid:%22a%20b%22@x.test"
        );
        assert_eq!(
            cid_to_content_id("cid:%22a%20b%22@x.test").unwrap(),
            "<\"a b\"@x.test>"
        );
        assert_eq!(content_id_to_cid("<>"), Err(CidError::NoAddrSpec));
    }

    #[test]
    fn addr_spec_extraction_from_headers() {
        assert_eq!(addr_spec_of(b" <a@b>").as_deref(), Some("a@b"));
        assert_eq!(addr_spec_of(b"\r\n <a@b> (x (y))").as_deref(), Some("a@b"));
        assert_eq!(addr_spec_of(b" a@b").as_deref(), Some("a@b"));
        assert_eq!(addr_spec_of(b" (only a comment)"), None);
        assert_eq!(
            addr_spec_of(b"<\"(not) a comment\"@b>").as_deref(),
            Some("\"(not) a comment\"@b")
        );
    }

    #[test]
    fn syntax_problems_fire_on_bad_urls_only() {
        // RFC 2387 §5.2's typo: a ':' in the local part is not an addr-spec.
        let p = syntax_problem("cid:950118:AFDH@XIson.com").unwrap();
        assert!(p.contains("':'"), "{p}");
        assert_eq!(syntax_problem("cid:950118.AFDH@XIson.com"), None);
        // No '@' (Gmail-style ii_… identifiers).
        assert!(syntax_problem("cid:ii_kx81").unwrap().contains("no '@'"));
        assert!(syntax_problem("cid:").unwrap().contains("empty"));
        assert!(syntax_problem("cid:a b@c").unwrap().contains("%-encoded"));
        assert!(syntax_problem("cid:a%zz@c").unwrap().contains("hex"));
        assert!(syntax_problem("cid:a..b@c").is_some());
        assert!(syntax_problem("mid:a@b/").unwrap().contains("Content-ID"));
        assert_eq!(syntax_problem("mid:a@b/c@d"), None);
        assert_eq!(syntax_problem("cid:%22a%20b%22@x.test"), None);
        assert_eq!(syntax_problem("cid:a@%5B10.0.0.1%5D"), None);
        assert!(syntax_problem("cid:a@[10.0.0.1]").is_some());
        assert_eq!(syntax_problem("cid:part1.06090408@x.test#frag"), None);
        assert_eq!(syntax_problem("http://x"), None);
    }

    #[test]
    fn never_panics_on_odd_input() {
        for s in [
            "cid:%",
            "cid:%4",
            "cid:\"",
            "cid:\"a\\",
            "mid:/",
            "cid:@",
            "cid:a@",
            "cid:@b",
            "cid:é@ü",
            "cid:a@[",
            "mid:\u{0}",
            "cid:#",
        ] {
            let _ = syntax_problem(s);
            let _ = parse(s);
            let _ = cid_to_content_id(s);
            let _ = mid_to_ids(s);
        }
    }
}
