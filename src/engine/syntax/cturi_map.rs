//! `ContentType:` URIs and the `uri.` media subtype tree (draft-eastlake-cturi-02).
//!
//! The draft maps Content-Types to URIs and back:
//!
//! | from | to | draft |
//! |---|---|---|
//! | `image/JPEG` | `ContentType:image/jpeg` | §2.1 |
//! | `http://x.test/a?b=c#d` | `application/uri.http%3A%2F%2Fx.test%2Fa; b="c"; URI-Fragment="d"` | §2.2 |
//! | `application/uri.…` (any top-level type) | the URI it encodes | §2.3 |
//! | `ContentType:text/plain?charset="x"` | `text/plain; charset="x"` | §2.4 |
//! | `type/sub; URI-Body="u"` | `u?MIME-Type="type/sub"` | §3 |
//! | `u?MIME-Type="type/sub"` | `type/sub; URI-Body="u"` | §3 |
//!
//! Decisions where the draft is silent or its examples are wrong:
//! - Parameter values travel %-encoded in the Content-Type form: URI → Content-Type
//!   encodes the troublesome characters of §4 (plus `"` and 8-bit octets, which a token
//!   cannot hold either) in the subtype, the parameter values and `URI-Fragment`, and the
//!   way back undoes exactly one level (§2.3, §2.4). A native Content-Type mapped to a
//!   `ContentType:` URI has `%`, `&`, `#`, `"`, SP, CTLs and 8-bit octets of its values
//!   encoded so that §2.4 gives the value back.
//! - A parameter value that holds 8-bit octets or controls once decoded comes out of
//!   the URI → Content-Type direction in RFC 2231 extended form (`name*=utf-8''caf%C3%A9`):
//!   a quoted-string in a header cannot carry them.
//! - `URI-Body` is carried as written (the §3 example shows `mailto:joe@blow.test`).
//! - A query that is not a list of `name=value` pairs is kept in the URI body (the §2.2
//!   note allows schemes whose `?` is not a query), so nothing is lost.
//! - The examples' typos are not followed: §2.2 drops `U@` from the mailto URI and
//!   writes `abc.text` for `abc.test`; §2.3 separates parameters with `,`, which is not
//!   a Content-Type and is refused; §3 writes `blow.text` for `blow.test`.
//! - The draft's own `ContentType:` scheme is never subject to the scheme policy: it
//!   names a media type, it fetches nothing.

use std::fmt;

use crate::engine::syntax::ascii::clip;
use crate::engine::syntax::fold::unfold;
use crate::engine::syntax::params::{is_token_byte, percent_decode, ContentType};
use crate::engine::syntax::uri;

/// Why a Content-Type or URI cannot be mapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CturiError {
    /// The Content-Type has no readable `type/subtype`.
    BadContentType(String),
    /// The Content-Type's parameters stop being readable at this text.
    BadParameters(String),
    /// Only absolute URIs are mappable (draft §1.2(2)).
    NotAbsolute(String),
    /// `ContentType://…` is reserved by the draft (§2.1.1).
    ReservedAuthority,
    /// A `ContentType:` URI or `MIME-Type` parameter that does not hold `type/subtype`.
    BadMediaType(String),
    /// A `ContentType:` URI query item that is not `name=value`.
    BadQueryItem(String),
    /// `URI-Body` holds a fragment; it belongs in `URI-Fragment`.
    FragmentInUriBody(String),
}

impl fmt::Display for CturiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CturiError::BadContentType(v) => write!(
                f,
                "not a Content-Type: no readable type/subtype in \"{}\"",
                clip(v)
            ),
            CturiError::BadParameters(rest) => write!(
                f,
                "unreadable Content-Type parameters from \"{}\" (parameters are separated by ';')",
                clip(rest)
            ),
            CturiError::NotAbsolute(v) => write!(
                f,
                "\"{}\" is not an absolute URI: only absolute URIs can be mapped (draft-eastlake-cturi §1.2)",
                clip(v)
            ),
            CturiError::ReservedAuthority => f.write_str(
                "\"ContentType://\" URIs are reserved by draft-eastlake-cturi §2.1.1 and have no mapping",
            ),
            CturiError::BadMediaType(v) => {
                write!(f, "\"{}\" is not a media type/subtype", clip(v))
            }
            CturiError::BadQueryItem(v) => write!(
                f,
                "query item \"{}\" of a ContentType: URI is not name=value (draft-eastlake-cturi §2.4)",
                clip(v)
            ),
            CturiError::FragmentInUriBody(v) => write!(
                f,
                "URI-Body \"{}\" holds a fragment; it belongs in URI-Fragment (draft-eastlake-cturi §3)",
                clip(v)
            ),
        }
    }
}

impl std::error::Error for CturiError {}

/// The characters of §4 plus `"` and 8-bit octets: what cannot stand in an RFC 2045
/// token, and `%`, which the mapping uses for its own escapes.
fn troublesome(b: u8) -> bool {
    b >= 127 || b == b'%' || !crate::engine::syntax::params::is_token_byte(b)
}

fn encode_with(bytes: &[u8], enc: impl Fn(u8) -> bool) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if enc(b) {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(b as char);
        }
    }
    out
}

/// Encoding for the Content-Type side (uppercase hex, §2.2).
fn enc_ct(bytes: &[u8]) -> String {
    encode_with(bytes, troublesome)
}

/// Encoding for the URI side: octets no URI may hold, plus `extra`.
fn enc_uri(bytes: &[u8], extra: &[u8]) -> String {
    encode_with(bytes, |b| b <= 32 || b >= 127 || extra.contains(&b))
}

/// A quoted-string holding `v` (RFC 5322 §3.2.4).
fn quoted(v: &[u8]) -> String {
    let mut out = String::with_capacity(v.len() + 2);
    out.push('"');
    for c in String::from_utf8_lossy(v).chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// `; name="value"`, or `; name*=utf-8''value` (RFC 2231 §4) when the value holds
/// octets a quoted-string in a header cannot: 8-bit octets and controls. The charset
/// is `utf-8` when the octets are UTF-8, else left empty (RFC 2231 allows it).
fn parameter(name: &str, v: &[u8]) -> String {
    if v.iter().all(|&b| (32..127).contains(&b)) {
        return format!("; {name}={}", quoted(v));
    }
    let charset = if std::str::from_utf8(v).is_ok() {
        "utf-8"
    } else {
        ""
    };
    // RFC 2231 attribute-char: a token octet other than `*`, `'` and `%`.
    let value = encode_with(v, |b| {
        b >= 127 || !is_token_byte(b) || matches!(b, b'*' | b'\'' | b'%')
    });
    format!("; {name}*={charset}''{value}")
}

fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_token_byte(b))
}

/// A Content-Type taken apart: type and subtype as written (case kept, since a `uri.`
/// subtype holds a case-sensitive URI), and parameters in written order, RFC 2231
/// reassembled, names lower-case.
struct Parsed {
    mtype: String,
    subtype: String,
    params: Vec<(String, Vec<u8>)>,
}

fn parse_content_type(input: &str) -> Result<Parsed, CturiError> {
    let unfolded = unfold(input.as_bytes());
    let mut v: &[u8] = &unfolded;
    // Accept a whole header line as well as a field value.
    if v.len() >= 13 && v[..13].eq_ignore_ascii_case(b"content-type:") {
        v = &v[13..];
    }
    let ct = ContentType::parse(v).strict();
    if ct.mtype.is_empty() {
        return Err(CturiError::BadContentType(input.trim().to_string()));
    }
    if let Some(at) = ct.trailing {
        let rest = String::from_utf8_lossy(v.get(at..).unwrap_or_default());
        let rest = rest.trim();
        if !rest.is_empty() {
            return Err(CturiError::BadParameters(rest.to_string()));
        }
    }
    let (mtype, subtype) = raw_type(v).ok_or_else(|| CturiError::BadContentType(input.into()))?;
    let mut params: Vec<(String, Vec<u8>)> = Vec::new();
    for p in &ct.params {
        if params.iter().any(|(n, _)| *n == p.name) {
            continue;
        }
        if let Some(val) = ct.get(&p.name) {
            params.push((p.name.to_string(), val.value));
        }
    }
    Ok(Parsed {
        mtype,
        subtype,
        params,
    })
}

/// `type` and `subtype` exactly as written (comments before the type are skipped by
/// the caller's parser having succeeded; here only whitespace and comments around `/`).
fn raw_type(v: &[u8]) -> Option<(String, String)> {
    let mut i = 0;
    let skip = |i: &mut usize| *i = crate::engine::syntax::params::skip_cfws(v, *i);
    let token = |i: &mut usize| {
        *i = (*i).min(v.len());
        let s = *i;
        while *i < v.len() && is_token_byte(v[*i]) {
            *i += 1;
        }
        String::from_utf8_lossy(&v[s..*i]).into_owned()
    };
    skip(&mut i);
    let t = token(&mut i);
    skip(&mut i);
    if v.get(i) != Some(&b'/') {
        return None;
    }
    i += 1;
    skip(&mut i);
    let s = token(&mut i);
    (!t.is_empty() && !s.is_empty()).then_some((t, s))
}

fn uri_tree_body(subtype: &str) -> Option<&str> {
    let head = subtype.get(..4)?;
    head.eq_ignore_ascii_case("uri.").then(|| &subtype[4..])
}

/// Whether a parsed Content-Type is in a form this draft gives to a URI's mapping: a
/// subtype in the `uri.` tree (§2.3), and URI-Body or URI-Fragment parameters (§3).
pub fn uri_forms(ct: &ContentType) -> (bool, bool) {
    let uri_tree = ct.subtype.starts_with("uri.");
    let controlled = ct
        .params
        .iter()
        .any(|p| p.name == "uri-body" || p.name == "uri-fragment");
    (uri_tree, controlled)
}

/// Content-Type → URI (draft §2.1, with the special cases of §2.3 and §3).
///
/// ```
/// use mimeref_milter::engine::syntax::cturi_map::to_uri;
/// assert_eq!(to_uri("image/JPEG").unwrap(), "ContentType:image/jpeg");
/// assert_eq!(to_uri("application/uri.mailto%3Auser%40host.example").unwrap(),
///            "mailto:user@host.example");
/// ```
pub fn to_uri(content_type: &str) -> Result<String, CturiError> {
    let ct = parse_content_type(content_type)?;
    let named = |n: &str| ct.params.iter().find(|(k, _)| k == n).map(|(_, v)| v);
    let query_of = |skip: &[&str]| -> Vec<String> {
        ct.params
            .iter()
            .filter(|(n, _)| !skip.contains(&n.as_str()))
            .map(|(n, v)| format!("{n}=\"{}\"", enc_uri(&percent_decode(v), b"&#\"")))
            .collect()
    };
    let fragment = named("uri-fragment").map(|f| enc_uri(&percent_decode(f), b"#\""));

    // §2.3: the URI comes back out of the subtype; the top-level type is ignored.
    if let Some(body) = uri_tree_body(&ct.subtype) {
        let decoded = percent_decode(body.as_bytes());
        let mut uri = enc_uri(&decoded, b"");
        if uri::scheme(uri.as_bytes()).is_none() {
            return Err(CturiError::NotAbsolute(uri));
        }
        push_query(&mut uri, &query_of(&["uri-fragment"]));
        if let Some(f) = fragment {
            uri.push('#');
            uri.push_str(&f);
        }
        return Ok(uri);
    }

    // §3: URI-Body chooses the URI; the media type travels as MIME-Type.
    if let Some(body) = named("uri-body") {
        let body = String::from_utf8_lossy(body).trim().to_string();
        if uri::scheme(body.as_bytes()).is_none() {
            return Err(CturiError::NotAbsolute(body));
        }
        if body.contains('#') {
            return Err(CturiError::FragmentInUriBody(body));
        }
        let mut uri = enc_uri(body.as_bytes(), b"");
        let mut query = vec![format!(
            "MIME-Type=\"{}/{}\"",
            ct.mtype.to_ascii_lowercase(),
            ct.subtype.to_ascii_lowercase()
        )];
        query.extend(query_of(&["uri-body", "uri-fragment"]));
        push_query(&mut uri, &query);
        if let Some(f) = fragment {
            uri.push('#');
            uri.push_str(&f);
        }
        return Ok(uri);
    }

    // §2.1: ContentType:type/subtype?name="value"&…  (lower-case type, quoted values).
    let mut uri = format!(
        "ContentType:{}/{}",
        enc_uri(ct.mtype.to_ascii_lowercase().as_bytes(), b"%"),
        enc_uri(ct.subtype.to_ascii_lowercase().as_bytes(), b"%")
    );
    let query: Vec<String> = ct
        .params
        .iter()
        .map(|(n, v)| {
            format!(
                "{}=\"{}\"",
                enc_uri(n.as_bytes(), b"%"),
                enc_uri(v, b"%&#\"")
            )
        })
        .collect();
    push_query(&mut uri, &query);
    Ok(uri)
}

fn push_query(uri: &mut String, items: &[String]) {
    if items.is_empty() {
        return;
    }
    uri.push(if uri.contains('?') { '&' } else { '?' });
    uri.push_str(&items.join("&"));
}

/// Splits a query at `&` outside double quotes.
fn query_items(q: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    for (i, b) in q.bytes().enumerate() {
        match b {
            b'"' => quoted = !quoted,
            b'&' if !quoted => {
                items.push(&q[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&q[start..]);
    items.retain(|s| !s.is_empty());
    items
}

/// `name=value` with the value's quotes removed; `None` when the name is not a token.
fn name_value(item: &str) -> Option<(&str, &str)> {
    let (n, v) = item.split_once('=')?;
    if !is_token(n.as_bytes()) {
        return None;
    }
    let v = v
        .strip_prefix('"')
        .and_then(|x| x.strip_suffix('"'))
        .unwrap_or(v);
    Some((n, v))
}

fn media_type(s: &str) -> Option<String> {
    let (t, st) = s.split_once('/')?;
    (is_token(t.as_bytes()) && is_token(st.as_bytes())).then(|| format!("{t}/{st}"))
}

/// URI → Content-Type (draft §2.2, with the special cases of §2.4 and §3). Angle
/// brackets around the URI (the draft's presentation) are accepted.
///
/// ```
/// use mimeref_milter::engine::syntax::cturi_map::to_content_type;
/// assert_eq!(to_content_type("http://example.com/tag42").unwrap(),
///            "application/uri.http%3A%2F%2Fexample.com%2Ftag42");
/// ```
pub fn to_content_type(uri: &str) -> Result<String, CturiError> {
    let uri = uri.trim();
    let uri = uri
        .strip_prefix('<')
        .and_then(|u| u.strip_suffix('>'))
        .unwrap_or(uri)
        .trim();
    let Some(scheme) = uri::scheme(uri.as_bytes()) else {
        return Err(CturiError::NotAbsolute(uri.to_string()));
    };
    let (before_frag, fragment) = match uri.split_once('#') {
        Some((a, f)) => (a, Some(f)),
        None => (uri, None),
    };
    let (body, query) = match before_frag.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (before_frag, None),
    };

    // §2.4: a ContentType: URI gives its Content-Type back.
    if scheme.eq_ignore_ascii_case("contenttype") {
        let rest = &body[scheme.len() + 1..];
        if rest.starts_with("//") {
            return Err(CturiError::ReservedAuthority);
        }
        let mt = String::from_utf8_lossy(&percent_decode(rest.as_bytes())).into_owned();
        let mut out = media_type(&mt).ok_or(CturiError::BadMediaType(mt))?;
        for item in query.map(query_items).unwrap_or_default() {
            let (n, v) = name_value(item).ok_or_else(|| CturiError::BadQueryItem(item.into()))?;
            out.push_str(&parameter(n, &percent_decode(v.as_bytes())));
        }
        if let Some(f) = fragment {
            out.push_str(&parameter("URI-Fragment", &percent_decode(f.as_bytes())));
        }
        return Ok(out);
    }

    // A query that is all name=value pairs becomes parameters; any other query stays in
    // the URI body.
    let items = query.map(query_items).unwrap_or_default();
    let pairs: Option<Vec<(&str, &str)>> = items.iter().map(|i| name_value(i)).collect();
    let (body, pairs) = match pairs {
        Some(p) => (body, p),
        None => (before_frag, Vec::new()),
    };
    let param = |n: &str, v: &str| format!("; {n}=\"{}\"", enc_ct(v.as_bytes()));
    let frag = fragment
        .map(|f| param("URI-Fragment", f))
        .unwrap_or_default();

    // §3: MIME-Type chooses the media type; the URI body is kept in URI-Body.
    if let Some(&(_, mt)) = pairs
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("mime-type"))
    {
        let mut out = media_type(mt).ok_or_else(|| CturiError::BadMediaType(mt.into()))?;
        out.push_str(&parameter("URI-Body", body.as_bytes()));
        for (n, v) in pairs
            .iter()
            .filter(|(n, _)| !n.eq_ignore_ascii_case("mime-type"))
        {
            out.push_str(&param(n, v));
        }
        out.push_str(&frag);
        return Ok(out);
    }

    // §2.2: application/uri.<encoded URI body>; query → parameters; fragment.
    let mut out = format!("application/uri.{}", enc_ct(body.as_bytes()));
    for (n, v) in &pairs {
        out.push_str(&param(n, v));
    }
    out.push_str(&frag);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // §2.1.1
    #[test]
    fn basic_case_image_jpeg() {
        assert_eq!(to_uri("image/JPEG").unwrap(), "ContentType:image/jpeg");
        assert_eq!(
            to_uri("Content-Type: image/JPEG").unwrap(),
            "ContentType:image/jpeg"
        );
        // A trailing ";" without parameters adds no "?".
        assert_eq!(to_uri("image/jpeg;").unwrap(), "ContentType:image/jpeg");
    }

    // §2.1.2
    #[test]
    fn parameters_become_a_quoted_query() {
        assert_eq!(
            to_uri(
                "text/plain; charset=\"us-ascii\";\r\n    x-mac-type=\"54455854\"; x-mac-creator=\"4D4F5353\""
            )
            .unwrap(),
            "ContentType:text/plain?charset=\"us-ascii\"&x-mac-type=\"54455854\"&x-mac-creator=\"4D4F5353\""
        );
        assert_eq!(
            to_uri("image/tiff; application=faxbw").unwrap(),
            "ContentType:image/tiff?application=\"faxbw\""
        );
    }

    // §2.2 (the draft's second and third results have typos: see the module notes)
    #[test]
    fn uri_to_uri_tree() {
        assert_eq!(
            to_content_type("<http://example.com/tag42>").unwrap(),
            "application/uri.http%3A%2F%2Fexample.com%2Ftag42"
        );
        assert_eq!(
            to_content_type("mailto:U@example.net?subject=\"misc\"&body=\"line1%0D%0Aline2\"")
                .unwrap(),
            "application/uri.mailto%3AU%40example.net; subject=\"misc\"; body=\"line1%250D%250Aline2\""
        );
        assert_eq!(
            to_content_type("xyz://abc.test/def?h=ijk#lmn").unwrap(),
            "application/uri.xyz%3A%2F%2Fabc.test%2Fdef; h=\"ijk\"; URI-Fragment=\"lmn\""
        );
    }

    // §2.3
    #[test]
    fn uri_tree_back_to_uri() {
        assert_eq!(
            to_uri("application/uri.mailto%3Auser%40host.example").unwrap(),
            "mailto:user@host.example"
        );
        assert_eq!(
            to_uri("application/uri.http%3A%2F%2Fx.test; foo=\"123\";\n    bar=\"abcd\"").unwrap(),
            "http://x.test?foo=\"123\"&bar=\"abcd\""
        );
        assert_eq!(
            to_uri("\r\n    application/uri.http%3A%2F%2Fa%3Ab%40c.text%2Fx%2Fy;\r\n    URI-Fragment=\"z\"")
                .unwrap(),
            "http://a:b@c.text/x/y#z"
        );
        // The draft prints the second one with "," between the parameters: refused.
        let err =
            to_uri("application/uri.http%3A%2F%2Fx.test; foo=\"123\", bar=\"abcd\"").unwrap_err();
        assert!(matches!(err, CturiError::BadParameters(_)), "{err}");
        // The top-level type is ignored (§2.3 note, §5(2)).
        assert_eq!(
            to_uri("image/uri.http%3A%2F%2Fx.test").unwrap(),
            "http://x.test"
        );
        // The URI keeps its case although media types are case-insensitive.
        assert_eq!(
            to_uri("application/URI.http%3A%2F%2FX.test%2FPath").unwrap(),
            "http://X.test/Path"
        );
    }

    // §2.4
    #[test]
    fn content_type_uri_back_to_content_type() {
        assert_eq!(
            to_content_type("<ContentType:model/vnd.example.longish.subtype.name>").unwrap(),
            "model/vnd.example.longish.subtype.name"
        );
        assert_eq!(
            to_content_type("ContentType:text/plain?charset=\"US-ASCII\"&x-obscure=\"value\"")
                .unwrap(),
            "text/plain; charset=\"US-ASCII\"; x-obscure=\"value\""
        );
        assert_eq!(
            to_content_type("ContentType://x/y"),
            Err(CturiError::ReservedAuthority)
        );
        assert!(matches!(
            to_content_type("contenttype:text?x=1"),
            Err(CturiError::BadMediaType(_))
        ));
        assert!(matches!(
            to_content_type("ContentType:text/plain?junk"),
            Err(CturiError::BadQueryItem(_))
        ));
    }

    // §3
    #[test]
    fn controlled_mapping_both_ways() {
        assert_eq!(
            to_uri("application/xml; URI-Body=\"http://xml.example\"").unwrap(),
            "http://xml.example?MIME-Type=\"application/xml\""
        );
        assert_eq!(
            to_content_type("<mailto:joe@blow.test?MIME-Type=\"message/rfc822\"#123>").unwrap(),
            "message/rfc822; URI-Body=\"mailto:joe@blow.test\"; URI-Fragment=\"123\""
        );
        assert_eq!(
            to_uri("message/rfc822; URI-Body=\"mailto:joe@blow.test\"; URI-Fragment=\"123\"")
                .unwrap(),
            "mailto:joe@blow.test?MIME-Type=\"message/rfc822\"#123"
        );
        assert!(matches!(
            to_uri("text/plain; URI-Body=\"relative/path\""),
            Err(CturiError::NotAbsolute(_))
        ));
    }

    #[test]
    fn closure_round_trips() {
        for ct in [
            "text/plain; charset=\"us-ascii\"; x-mac-type=\"54455854\"",
            "image/tiff; application=\"faxbw\"",
            "text/plain; name=\"100% & more #1\"",
        ] {
            let uri = to_uri(ct).unwrap();
            let back = to_content_type(&uri).unwrap();
            assert_eq!(to_uri(&back).unwrap(), uri, "{ct} -> {uri} -> {back}");
        }
        assert_eq!(
            to_content_type(&to_uri("text/plain; name=\"100% & more #1\"").unwrap()).unwrap(),
            "text/plain; name=\"100% & more #1\""
        );
        for uri in [
            "http://example.com/tag42",
            "mailto:U@example.net?subject=\"misc\"&body=\"line1%0D%0Aline2\"",
            "xyz://abc.test/def?h=\"ijk\"#lmn",
            "urn:x:y?not a pair",
        ] {
            let ct = to_content_type(uri).unwrap();
            assert_eq!(
                to_uri(&ct).unwrap(),
                uri.replace(' ', "%20"),
                "{uri} -> {ct}"
            );
        }
    }

    /// Non-ASCII (and control) octets never go raw into a header value: they come out in
    /// RFC 2231 extended form, and the round trip is exact.
    #[test]
    fn non_ascii_values_come_out_in_rfc2231_form() {
        let ct = "application/pdf; name*=utf-8''caf%C3%A9.pdf";
        let uri = to_uri(ct).unwrap();
        assert_eq!(uri, "ContentType:application/pdf?name=\"caf%C3%A9.pdf\"");
        let back = to_content_type(&uri).unwrap();
        assert_eq!(back, ct);
        assert!(back.is_ascii());
        assert_eq!(to_uri(&back).unwrap(), uri);
        // A control octet, a fragment and a URI-Body: never raw either.
        let back = to_content_type("ContentType:text/plain?x=\"a%0D%0Ab\"#caf%C3%A9").unwrap();
        assert_eq!(
            back,
            "text/plain; x*=utf-8''a%0D%0Ab; URI-Fragment*=utf-8''caf%C3%A9"
        );
        let back = to_content_type("http://x.test/caf\u{e9}?MIME-Type=\"text/plain\"").unwrap();
        assert!(back.is_ascii(), "{back}");
        assert_eq!(
            to_uri(&back).unwrap(),
            "http://x.test/caf%C3%A9?MIME-Type=\"text/plain\""
        );
    }

    #[test]
    fn errors_are_clear() {
        assert!(matches!(
            to_content_type("relative/path"),
            Err(CturiError::NotAbsolute(_))
        ));
        assert!(matches!(
            to_uri("nonsense"),
            Err(CturiError::BadContentType(_))
        ));
        assert!(matches!(
            to_uri("application/uri.no-scheme-here"),
            Err(CturiError::NotAbsolute(_))
        ));
        let msg = to_uri("a/b; x=\"1\" junk").unwrap_err().to_string();
        assert!(msg.contains("junk"), "{msg}");
        for bad in [
            "",
            ":",
            "<>",
            "a:#",
            "ContentType:",
            "ContentType:?",
            "a/uri.%",
        ] {
            let _ = to_uri(bad);
            let _ = to_content_type(bad);
        }
    }
}
