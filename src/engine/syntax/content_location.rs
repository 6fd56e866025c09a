//! Content-Location values and their resolution (RFC 2557 §4, §5, §8.2; RFC 3986 §5.2).
//!
//! Resolution is RFC 3986 §5.2 strict, through `iri-string`: not RFC 1808 (they differ on
//! `../../../g`, `/./g`, `;x`) and not the WHATWG URL standard (which would lower-case,
//! %-decode and special-case `http`). Results are compared octet by octet: no case
//! folding, no %-decoding (`a%2eb/c%20d` stays as written, RFC 2557 §8.2(a)).
//!
//! Real Content-Locations are not always URIs (spaces, 8-bit file names, a stray `%`).
//! [`resolve`] refuses them; [`resolve_lenient`] %-encodes the offending octets first,
//! for comparison only (the message is never changed that way), so that two parts
//! labelled with the same broken name still compare equal and an HTML reference written
//! the same way still finds its part.
//!
//! The base of an entity, which needs the message structure, is in `model::base_uri`.

use std::borrow::Cow;

use iri_string::format::ToDedicatedString;
use iri_string::types::{UriAbsoluteStr, UriReferenceStr, UriStr};

use crate::engine::syntax::decode;

/// The last-resort base of RFC 2557 §5(e).
pub const THIS_MESSAGE: &str = "thismessage:/";

/// Why a reference could not be resolved strictly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResolveError {
    /// The base is not an absolute URI (RFC 3986 §4.3).
    BaseNotAbsolute,
    /// The reference is not a URI-reference (RFC 3986 §4.1).
    InvalidReference,
    /// RFC 3986 §5.2 gives a result that cannot be written as a URI (a path starting
    /// with `//` and no authority, e.g. `foo:` + `/..//bar`).
    Unrepresentable,
}

impl std::fmt::Display for ResolveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ResolveError::BaseNotAbsolute => "the base is not an absolute URI",
            ResolveError::InvalidReference => "the reference is not a URI reference",
            ResolveError::Unrepresentable => "the resolved URI cannot be written down",
        })
    }
}

impl std::error::Error for ResolveError {}

/// Resolves `reference` against `base` by RFC 3986 §5.2 (strict). A fragment on the base
/// is ignored (RFC 3986 §5.1). Nothing is case-folded or %-decoded; dot segments are
/// removed, as §5.2.4 requires.
pub fn resolve(base: &str, reference: &str) -> Result<String, ResolveError> {
    let base = strip_fragment(base);
    let base = UriAbsoluteStr::new(base).map_err(|_| ResolveError::BaseNotAbsolute)?;
    let reference = UriReferenceStr::new(reference).map_err(|_| ResolveError::InvalidReference)?;
    let resolved = reference.resolve_against(base);
    resolved
        .ensure_rfc3986_normalizable()
        .map_err(|_| ResolveError::Unrepresentable)?;
    Ok(resolved.to_dedicated_string().into())
}

/// Like [`resolve`], but a base or reference that is not a URI is first %-encoded where
/// it breaks the syntax (see [`encode_for_comparison`]); a first path segment holding a
/// `:` that cannot be a scheme gets `./` in front (RFC 3986 §4.2). `None` only when even
/// that does not give a URI (e.g. a non-numeric port) or the result is unrepresentable.
/// For comparison only: never write the result into a message.
pub fn resolve_lenient(base: &str, reference: &str) -> Option<String> {
    let base = as_base(base.as_bytes())?;
    resolve_bytes(&base, reference.as_bytes())
}

pub(crate) fn resolve_bytes(base: &str, reference: &[u8]) -> Option<String> {
    for candidate in reference_candidates(reference) {
        match resolve(base, &candidate) {
            Ok(s) => return Some(s),
            Err(ResolveError::InvalidReference) => continue,
            Err(_) => return None,
        }
    }
    None
}

/// The spellings of `reference` to try, from the faithful to the more repaired.
fn reference_candidates(reference: &[u8]) -> impl Iterator<Item = String> + '_ {
    (0..3).map(move |stage| {
        let enc = encode_for_comparison_stage(reference, stage >= 1);
        if stage == 2 {
            format!("./{enc}")
        } else {
            enc.into_owned()
        }
    })
}

/// %-encodes (upper-case hex) every octet that can never stand in a URI: CTLs, SP, `"`,
/// `<`, `>`, `\`, `^`, `` ` ``, `{`, `|`, `}`, DEL, 8-bit octets, and a `%` not followed
/// by two hex digits. Existing `%HH` triplets are kept as they are: nothing is decoded.
pub fn encode_for_comparison(s: &[u8]) -> Cow<'_, str> {
    encode_for_comparison_stage(s, false)
}

/// `delims` also encodes `[`, `]` and every `#` after the first, which are legal only in
/// a host literal or as the fragment separator.
fn encode_for_comparison_stage(s: &[u8], delims: bool) -> Cow<'_, str> {
    let mut seen_hash = false;
    let mut out: Option<String> = None;
    for (i, &b) in s.iter().enumerate() {
        let keep = match b {
            b'%' => {
                s.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                    && s.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
            }
            b'[' | b']' => !delims,
            b'#' => {
                let first = !seen_hash;
                seen_hash = true;
                first || !delims
            }
            _ => is_uri_char(b),
        };
        if keep {
            if let Some(o) = out.as_mut() {
                o.push(b as char);
            }
        } else {
            let o = out.get_or_insert_with(|| {
                // Everything before `i` was kept, hence ASCII.
                s[..i].iter().map(|&c| c as char).collect()
            });
            o.push('%');
            o.push_str(&format!("{b:02X}"));
        }
    }
    match out {
        Some(o) => Cow::Owned(o),
        // No octet needed encoding, so all are ASCII URI characters.
        None => Cow::Owned(s.iter().map(|&c| c as char).collect()),
    }
}

/// RFC 3986 unreserved and reserved characters (and `%`, judged by the caller).
fn is_uri_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~:/?#[]@!$&'()*+,;=".contains(&b)
}

pub(crate) fn strip_fragment(s: &str) -> &str {
    s.split_once('#').map_or(s, |(a, _)| a)
}

/// Whether `s` is an absolute URI as RFC 3986 §4.3 defines it (scheme, no fragment).
pub fn is_absolute(s: &str) -> bool {
    UriAbsoluteStr::new(s).is_ok()
}

/// `s` usable as a base: a URI with a scheme, after [`encode_for_comparison`], fragment
/// dropped (RFC 3986 §5.1). `None` for relative references and non-URIs.
pub fn as_base(s: &[u8]) -> Option<String> {
    for delims in [false, true] {
        let enc = encode_for_comparison_stage(s, delims);
        if let Ok(u) = UriStr::new(&enc) {
            if u.scheme_str().is_empty() {
                return None;
            }
            return Some(strip_fragment(&enc).to_string());
        }
    }
    None
}

/// A Content-Location (or Content-Base) value read for resolution (RFC 2557 §8.2(a)(b)).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Location {
    /// The URI: CFWS around it removed, every LWSP octet inside deleted (RFC 2017 §3.1
    /// unfolding), RFC 2047 encoded-words decoded. Not %-decoded.
    pub value: Vec<u8>,
    /// Whitespace inside the URI that is not folding (not next to a line break), i.e.
    /// an SP or HTAB that is really part of the value (RFC 2557 §4.4.1).
    pub interior_space: bool,
    /// Comments were removed around the URI.
    pub comments: bool,
    /// At least one RFC 2047 encoded-word was decoded.
    pub encoded_words: bool,
}

/// Reads a Content-Location or Content-Base field value (the bytes after the colon).
///
/// RFC 2557 allows `[CFWS] URI [CFWS]`: comments are recognised only before the URI and
/// after it when separated by whitespace, because `(` and `)` are legal inside a URI
/// (`…/wiki/Mercury_(planet)`). Encoded-words are decoded only as whole words (RFC 2047
/// §5); the decoded text is kept as it is, spaces included.
pub fn parse_location(raw: &[u8]) -> Location {
    let mut loc = Location::default();
    let start = skip_leading_cfws(raw, &mut loc.comments);
    let end = trailing_cfws_start(raw, start, &mut loc.comments);
    let middle = &raw[start..end];
    let is_lwsp = |b: &u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
    let mut i = 0;
    while i < middle.len() {
        if is_lwsp(&middle[i]) {
            let run_start = i;
            while i < middle.len() && is_lwsp(&middle[i]) {
                i += 1;
            }
            if !middle[run_start..i]
                .iter()
                .any(|&b| b == b'\r' || b == b'\n')
            {
                loc.interior_space = true;
            }
            continue;
        }
        let word_start = i;
        while i < middle.len() && !is_lwsp(&middle[i]) {
            i += 1;
        }
        let word = &middle[word_start..i];
        if word.len() >= 8 && word.starts_with(b"=?") && word.ends_with(b"?=") {
            let decoded = decode::rfc2047(word);
            if decoded != word {
                loc.encoded_words = true;
                loc.value.extend_from_slice(&decoded);
                continue;
            }
        }
        loc.value.extend_from_slice(word);
    }
    loc
}

/// The URI of a Content-Location (or Content-Base) field value, as text: unfolded by
/// deleting all LWSP, comments around it removed, encoded-words decoded (lossy UTF-8).
pub fn location_value(raw_field_value: &[u8]) -> String {
    String::from_utf8_lossy(&parse_location(raw_field_value).value).into_owned()
}

fn skip_leading_cfws(s: &[u8], comments: &mut bool) -> usize {
    let end = crate::engine::syntax::params::skip_cfws(s, 0);
    // Any `(` in what was skipped opened a comment.
    *comments |= s[..end].contains(&b'(');
    end
}

/// Where trailing CFWS begins in `s[start..]`: a `(…)` at the end is a comment only when
/// whitespace (or the start) precedes its opening parenthesis.
fn trailing_cfws_start(s: &[u8], start: usize, comments: &mut bool) -> usize {
    let mut end = s.len();
    loop {
        while end > start && matches!(s[end - 1], b' ' | b'\t' | b'\r' | b'\n') {
            end -= 1;
        }
        if end <= start || s[end - 1] != b')' {
            return end;
        }
        let mut depth = 0usize;
        let mut j = end;
        let mut open = None;
        while j > start {
            j -= 1;
            match s[j] {
                b')' => depth += 1,
                b'(' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        open = Some(j);
                        break;
                    }
                }
                _ => {}
            }
        }
        match open {
            Some(p) if p == start || is_comment_gap(s, start, p, end) => {
                *comments = true;
                end = p;
            }
            _ => return end,
        }
    }
}

/// Whether the `(…)` from `open` to `end` after a URI is a comment: whitespace must
/// precede it, and when that whitespace is a fold it must hold whitespace itself, since an
/// RFC 2017 fold may put a URI piece such as `(planet)` at the start of a line.
fn is_comment_gap(s: &[u8], start: usize, open: usize, end: usize) -> bool {
    let mut k = open;
    let mut line_break = false;
    while k > start && matches!(s[k - 1], b' ' | b'\t' | b'\r' | b'\n') {
        line_break |= matches!(s[k - 1], b'\r' | b'\n');
        k -= 1;
    }
    if k == open {
        return false;
    }
    !line_break || s[open..end].iter().any(|&b| matches!(b, b' ' | b'\t'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn r(base: &str, reference: &str) -> String {
        resolve(base, reference).unwrap_or_else(|e| panic!("{base} + {reference}: {e}"))
    }

    #[test]
    fn rules_worked_vectors() {
        let t = THIS_MESSAGE;
        assert_eq!(r(t, "images/a.gif"), "thismessage:/images/a.gif");
        assert_eq!(r(t, "../../a"), "thismessage:/a");
        assert_eq!(r(t, "//host/a"), "thismessage://host/a");
        assert_eq!(r(t, "http:g"), "http:g");
        assert_eq!(r(t, "a%2eb/c%20d"), "thismessage:/a%2eb/c%20d");
        assert_eq!(
            r("http://www.netscape.com/people/index.html", "jwz/jwz6.jpg"),
            "http://www.netscape.com/people/jwz/jwz6.jpg"
        );
    }

    const BASE: &str = "http://a/b/c/d;p?q";

    #[test]
    fn rfc3986_section_5_4_1_normal_examples() {
        for (reference, want) in [
            ("g:h", "g:h"),
            ("g", "http://a/b/c/g"),
            ("./g", "http://a/b/c/g"),
            ("g/", "http://a/b/c/g/"),
            ("/g", "http://a/g"),
            ("//g", "http://g"),
            ("?y", "http://a/b/c/d;p?y"),
            ("g?y", "http://a/b/c/g?y"),
            ("#s", "http://a/b/c/d;p?q#s"),
            ("g#s", "http://a/b/c/g#s"),
            ("g?y#s", "http://a/b/c/g?y#s"),
            (";x", "http://a/b/c/;x"),
            ("g;x", "http://a/b/c/g;x"),
            ("g;x?y#s", "http://a/b/c/g;x?y#s"),
            ("", "http://a/b/c/d;p?q"),
            (".", "http://a/b/c/"),
            ("./", "http://a/b/c/"),
            ("..", "http://a/b/"),
            ("../", "http://a/b/"),
            ("../g", "http://a/b/g"),
            ("../..", "http://a/"),
            ("../../", "http://a/"),
            ("../../g", "http://a/g"),
        ] {
            assert_eq!(r(BASE, reference), want, "{reference}");
        }
    }

    #[test]
    fn rfc3986_section_5_4_2_abnormal_examples() {
        for (reference, want) in [
            ("../../../g", "http://a/g"),
            ("../../../../g", "http://a/g"),
            ("/./g", "http://a/g"),
            ("/../g", "http://a/g"),
            ("g.", "http://a/b/c/g."),
            (".g", "http://a/b/c/.g"),
            ("g..", "http://a/b/c/g.."),
            ("..g", "http://a/b/c/..g"),
            ("./../g", "http://a/b/g"),
            ("./g/.", "http://a/b/c/g/"),
            ("g/./h", "http://a/b/c/g/h"),
            ("g/../h", "http://a/b/c/h"),
            ("g;x=1/./y", "http://a/b/c/g;x=1/y"),
            ("g;x=1/../y", "http://a/b/c/y"),
            ("g?y/./x", "http://a/b/c/g?y/./x"),
            ("g?y/../x", "http://a/b/c/g?y/../x"),
            ("g#s/./x", "http://a/b/c/g#s/./x"),
            ("g#s/../x", "http://a/b/c/g#s/../x"),
            // Strict parsers (RFC 3986 §5.4.2 last paragraph).
            ("http:g", "http:g"),
        ] {
            assert_eq!(r(BASE, reference), want, "{reference}");
        }
    }

    #[test]
    fn nothing_is_case_folded_or_decoded() {
        assert_eq!(r("HTTP://A/b/", "C%2e%7E"), "HTTP://A/b/C%2e%7E");
    }

    #[test]
    fn strict_refusals_and_lenient_fallback() {
        assert_eq!(
            resolve("images/", "a.gif"),
            Err(ResolveError::BaseNotAbsolute)
        );
        assert_eq!(
            resolve(THIS_MESSAGE, "a b.gif"),
            Err(ResolveError::InvalidReference)
        );
        assert_eq!(
            resolve("foo:", "/..//bar"),
            Err(ResolveError::Unrepresentable)
        );
        assert_eq!(
            resolve_lenient(THIS_MESSAGE, "a b.gif").as_deref(),
            Some("thismessage:/a%20b.gif")
        );
        assert_eq!(
            resolve_lenient(THIS_MESSAGE, "café/100%.gif").as_deref(),
            Some("thismessage:/caf%C3%A9/100%25.gif")
        );
        assert_eq!(
            resolve_lenient(THIS_MESSAGE, "x#a#b").as_deref(),
            Some("thismessage:/x#a%23b")
        );
        assert_eq!(
            resolve_lenient(THIS_MESSAGE, "1a:b").as_deref(),
            Some("thismessage:/1a:b")
        );
        assert_eq!(resolve_lenient("rel/", "x"), None);
    }

    #[test]
    fn base_fragment_is_ignored() {
        assert_eq!(r("http://x/a/b#f", "c"), "http://x/a/c");
    }

    #[test]
    fn location_values() {
        assert_eq!(
            location_value(b"\r\n      http://www.ietf.cnri.reston.va.us/images/ietflogo.gif"),
            "http://www.ietf.cnri.reston.va.us/images/ietflogo.gif"
        );
        // RFC 2017 folding: every LWSP deleted.
        assert_eq!(
            location_value(b" http://a/b\r\n /c\r\n\t/d"),
            "http://a/b/c/d"
        );
        assert_eq!(
            location_value(b" (c1) CID:something@else (this header is disregarded) "),
            "CID:something@else"
        );
        assert_eq!(
            location_value(b" https://en.wikipedia.org/wiki/Mercury_(planet)"),
            "https://en.wikipedia.org/wiki/Mercury_(planet)"
        );
        assert_eq!(location_value(b" =?us-ascii?q?a=2Fb_c.gif?="), "a/b c.gif");
        assert_eq!(location_value(b" a%2eb/c%20d"), "a%2eb/c%20d");
        // A fold before a parenthesised URI piece is not a comment.
        assert_eq!(location_value(b" http://x/a_\r\n (b)"), "http://x/a_(b)");
        assert_eq!(location_value(b" http://x/a\r\n (a comment)"), "http://x/a");
        let l = parse_location(b" http://x/a b.gif");
        assert!(l.interior_space);
        assert!(!parse_location(b" http://x/a\r\n b.gif").interior_space);
        for junk in [&b""[..], b"(", b")", b" ( ) ", b"(()", b"=?", b"=?x?q??="] {
            let _ = parse_location(junk);
        }
    }

    fn segment() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "a", "b", ".", "..", "%2e", "c%20d", "g;x", "", "x=1", "~u",
        ])
        .prop_map(str::to_string)
    }

    fn relative_ref() -> impl Strategy<Value = String> {
        (
            prop::bool::ANY,
            prop::collection::vec(segment(), 0..6),
            prop::option::of("[a-z0-9=]{0,4}"),
            prop::option::of("[a-z0-9/]{0,4}"),
        )
            .prop_map(|(abs, segs, q, f)| {
                let mut s = if abs { "/".to_string() } else { String::new() };
                s.push_str(&segs.join("/"));
                if let Some(q) = q {
                    s.push('?');
                    s.push_str(&q);
                }
                if let Some(f) = f {
                    s.push('#');
                    s.push_str(&f);
                }
                if s.split('/').next().is_some_and(|x| x.contains(':')) {
                    s.insert_str(0, "./");
                }
                s
            })
    }

    fn base() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "thismessage:/",
            "http://a/b/c/d;p?q",
            "http://www.netscape.com/people/index.html",
            "cid:x@y",
            "file:///C:/dir/",
            "ftp://u@h:21/",
        ])
        .prop_map(str::to_string)
    }

    proptest! {
        #[test]
        fn resolving_against_an_absolute_base_gives_an_absolute_uri(
            b in base(), rel in relative_ref()
        ) {
            if let Ok(out) = resolve(&b, &rel) {
                let u = UriStr::new(&out);
                prop_assert!(u.is_ok_and(|u| !u.scheme_str().is_empty()), "{out}");
                // Dot segments are gone from the path (RFC 3986 §5.2.4).
                let path = u.map(|u| u.path_str().to_string()).unwrap_or_default();
                prop_assert!(!path.split('/').any(|seg| seg == "." || seg == ".."), "{out}");
            }
        }

        #[test]
        fn an_absolute_reference_ignores_the_base(
            b1 in base(), b2 in base(), rel in relative_ref()
        ) {
            if let Ok(abs) = resolve("http://h/x/", &rel) {
                let once = resolve(&b1, &abs);
                prop_assert_eq!(&once, &resolve(&b2, &abs));
                // Resolving is idempotent on its own output.
                prop_assert_eq!(once, Ok(abs));
            }
        }

        #[test]
        fn lenient_never_panics_and_agrees_with_strict(
            b in base(), raw in prop::collection::vec(any::<u8>(), 0..40)
        ) {
            let s = String::from_utf8_lossy(&raw).into_owned();
            let lenient = resolve_lenient(&b, &s);
            if let Ok(strict) = resolve(&b, &s) {
                prop_assert_eq!(lenient, Some(strict));
            }
            let _ = parse_location(&raw);
        }
    }
}
