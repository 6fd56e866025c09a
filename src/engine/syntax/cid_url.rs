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

use std::borrow::Cow;

use crate::engine::syntax::msgid::is_atext;
use crate::engine::syntax::params::percent_decode;

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

impl IdRef {
    fn new(raw: &str) -> IdRef {
        IdRef {
            raw: raw.to_string(),
            decoded: percent_decoded(raw).into_owned(),
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

/// Octets allowed as they are in the body of a cid/mid URL: RFC 3986 unreserved,
/// sub-delims, `:`, `@`, and `/` where it is not the mid separator. `?` is allowed in a
/// URL too, but as it may start a query in generic parsers it is encoded on output.
/// `s` %-decoded (RFC 2392 §2), malformed UTF-8 replaced. Most ids have no `%`: they
/// are their own decoded form, without a decoding pass and a copy (every `cid:`
/// reference of an HTML part is decoded twice, for its target and for its syntax).
fn percent_decoded(s: &str) -> Cow<'_, str> {
    if !s.contains('%') {
        return Cow::Borrowed(s);
    }
    Cow::Owned(String::from_utf8_lossy(&percent_decode(s.as_bytes())).into_owned())
}

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

/// Why `url` (a `cid:` or `mid:` URL) is not a URL-encoded addr-spec per RFC 2392 §2, in
/// words for a mail admin; `None` when it is fine or is not a cid/mid URL.
pub fn syntax_problem(url: &str) -> Option<String> {
    let (scheme, rest) = split_scheme(url)?;
    let body = rest.split('#').next().unwrap_or("");
    let pieces: [Option<(&str, &str)>; 2] = match scheme {
        Scheme::Cid => [Some(("Content-ID", body)), None],
        Scheme::Mid => match body.split_once('/') {
            Some((m, c)) => [Some(("Message-ID", m)), Some(("Content-ID", c))],
            None => [Some(("Message-ID", body)), None],
        },
    };
    for (what, piece) in pieces.into_iter().flatten() {
        if piece.is_empty() {
            return Some(format!("the {what} is empty"));
        }
        if let Some(p) = url_encoding_problem(piece, scheme == Scheme::Mid) {
            return Some(format!("the {what} {p}"));
        }
        if let Some(p) = addr_spec_problem(&percent_decoded(piece)) {
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
        let Some(IdUrl::Cid(r)) = parse(url) else {
            panic!("not parsed as cid")
        };
        assert_eq!(r.matches("foo4%foo1@bar.net"), Some(Match::Decoded));
        // The RFC's example pairs it with <foo4%25foo1@bar.net> (erratum 454).
        assert_eq!(r.matches("foo4%25foo1@bar.net"), Some(Match::Raw));
        assert_eq!(r.matches("foo4foo1@bar.net"), None);
        assert_eq!(syntax_problem(url), None);
    }

    #[test]
    fn ids_decode_alike_with_and_without_a_percent() {
        for (raw, decoded) in [
            ("a@b", "a@b"),
            ("a%41@b", "aA@b"),
            ("a%4@b", "a%4@b"),
            ("a%zz@b", "a%zz@b"),
            ("a%@b", "a%@b"),
            ("%C3%A9@b", "\u{e9}@b"),
            ("%C3@b", "\u{fffd}@b"),
            ("\u{e9}@b", "\u{e9}@b"),
            ("", ""),
        ] {
            assert_eq!(percent_decoded(raw), decoded, "{raw}");
            let Some(IdUrl::Cid(r)) = parse(&format!("cid:{raw}")) else {
                panic!("not parsed as cid")
            };
            assert_eq!(r.decoded, decoded, "{raw}");
        }
        // Without a `%` an id is its own decoded form: nothing is copied.
        assert!(matches!(percent_decoded("a@b"), Cow::Borrowed("a@b")));
        assert_eq!(
            syntax_problem("mid:m%zz@x/c@y").as_deref(),
            Some("the Message-ID has a '%' that is not followed by two hex digits")
        );
        assert_eq!(
            syntax_problem("mid:m@x/c").as_deref(),
            Some("the Content-ID is not an addr-spec: no '@'")
        );
        assert_eq!(
            syntax_problem("mid:m@x/"),
            Some("the Content-ID is empty".into())
        );
    }

    #[test]
    fn rfc2392_html_example_image() {
        // <IMG SRC="cid:foo4*foo1@bar.net"> with Content-ID: <foo4*foo1@bar.net>
        let url = "cid:foo4*foo1@bar.net";
        let Some(IdUrl::Cid(r)) = parse(url) else {
            panic!("not parsed as cid")
        };
        assert_eq!(r.matches("foo4*foo1@bar.net"), Some(Match::Decoded));
        assert_eq!(syntax_problem(url), None);
    }

    #[test]
    fn rfc2392_mid_example_long_form() {
        let url = "mid:960830.1639@XIson.com/partA.960830.1639@XIson.com";
        assert_eq!(syntax_problem(url), None);
        // The draft's second example: a message whose own Message-ID differs.
        let Some(IdUrl::Mid { message, part }) = parse(url) else {
            panic!("not parsed as mid")
        };
        assert_eq!(
            message.matches("960830.1639@XIson.com"),
            Some(Match::Decoded)
        );
        assert_eq!(
            part.and_then(|p| p.matches("partA.960830.1639@XIson.com")),
            Some(Match::Decoded)
        );
        assert_eq!(message.matches("970701.32784@VIers.none.com"), None);
    }

    #[test]
    fn scheme_is_case_insensitive_and_others_are_refused() {
        assert_eq!(split_scheme("CiD:a@b"), Some((Scheme::Cid, "a@b")));
        assert_eq!(split_scheme("MID:a@b"), Some((Scheme::Mid, "a@b")));
        assert!(parse("http://x/").is_none());
        assert!(parse("ci").is_none());
        assert!(parse("é").is_none());
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
        }
    }
}
