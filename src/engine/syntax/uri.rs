//! URI schemes (RFC 3986 §3.1) and the schemes that retrieve nothing (RFC 2017 §2).

/// Schemes that name or contact something rather than retrieve it. RFC 2017 §2: the URL
/// access-type "is only intended for use with URLs that actually retrieve something.
/// Other URL mechanisms, e.g. mailto, may not be used". `news` is here as RULES.md asks
/// (it names a group or an article by Message-ID, and reaching it depends on the
/// reader's own server); `nntp`, which names a server, stays allowed. `cid` and `mid`
/// point inside messages, never to an external body. Dangerous schemes (`file`,
/// `javascript`, `data`…) are a policy matter: see [`crate::engine::SchemePolicy`].
pub const NON_RETRIEVAL_SCHEMES: &[&str] = &[
    "mailto", "news", "snews", "telnet", "tn3270", "rlogin", "tel", "fax", "modem", "sms", "sip",
    "sips", "callto", "xmpp", "irc", "ircs", "urn", "cid", "mid", "geo", "about",
];

/// The scheme of an absolute URI as written, if `url` starts with one: RFC 3986 §3.1
/// `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )` before the first `:`. Case is kept;
/// schemes compare case-insensitively.
pub fn scheme(url: &[u8]) -> Option<&str> {
    let colon = url.iter().position(|&b| b == b':')?;
    let s = &url[..colon];
    let ok = s.first().is_some_and(u8::is_ascii_alphabetic)
        && s.iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    // Only ASCII gets here, so the conversion cannot fail.
    ok.then(|| std::str::from_utf8(s).ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheme_is_read_before_the_first_colon() {
        assert_eq!(scheme(b"HTTP://x/"), Some("HTTP"));
        assert_eq!(scheme(b"a+b-c.d:x"), Some("a+b-c.d"));
        assert_eq!(scheme(b"urn:x:y"), Some("urn"));
        assert_eq!(scheme(b"1a:x"), None);
        assert_eq!(scheme(b":x"), None);
        assert_eq!(scheme(b"no colon"), None);
        assert_eq!(scheme(b"a b:x"), None);
        assert_eq!(scheme("é:x".as_bytes()), None);
    }
}
