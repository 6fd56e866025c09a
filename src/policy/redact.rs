//! URLs as they may be shown in log lines and the report header: without the password
//! (or, when there is no password, the whole user information, which is where access
//! tokens go) and without the query, where signed links keep their tokens. A message's
//! URLs are often capabilities: whoever reads the log or the header of a forwarded
//! message could use them.
//!
//! Works on finished text (a change record, a finding's message, a note), so that every
//! line is covered whatever built it: each `scheme://authority…` and each `scheme:…?…`
//! in it is cut down; everything else is left as it is.

use std::borrow::Cow;

/// What stands for a removed password, user information or query.
pub const MASK: &str = "***";

/// `text` with the secrets of every URL in it replaced by [`MASK`]:
/// `http://alice:S3cret@h/p?token=1` → `http://alice:***@h/p?***`.
pub fn redact(text: &str) -> Cow<'_, str> {
    if !text.contains(':') {
        return Cow::Borrowed(text);
    }
    let b = text.as_bytes();
    let mut out = String::new();
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        let Some(colon) = text[i..].find(':').map(|c| c + i) else {
            break;
        };
        let end = url_end(b, colon + 1);
        let masked = has_scheme(b, colon)
            .then(|| redacted(&text[colon + 1..end]))
            .flatten();
        match masked {
            Some(rest) => {
                out.push_str(&text[copied..=colon]);
                out.push_str(&rest);
                copied = end;
                i = end;
            }
            None => i = colon + 1,
        }
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// Whether a scheme ends at the `:` at `colon`: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )
/// (RFC 3986 §3.1).
fn has_scheme(b: &[u8], colon: usize) -> bool {
    let mut s = colon;
    while s > 0 && (b[s - 1].is_ascii_alphanumeric() || matches!(b[s - 1], b'+' | b'-' | b'.')) {
        s -= 1;
    }
    // The scheme is the longest run ending at the colon; it must begin with a letter.
    while s < colon && !b[s].is_ascii_alphabetic() {
        s += 1;
    }
    s < colon
}

/// Where the URL that continues at `from` ends: at white space, a quote or an angle
/// bracket (what surrounds URLs in our texts and in mail).
fn url_end(b: &[u8], from: usize) -> usize {
    b[from..]
        .iter()
        .position(|&c| c.is_ascii_whitespace() || matches!(c, b'"' | b'\'' | b'<' | b'>' | b'`'))
        .map_or(b.len(), |p| from + p)
}

/// The part after `scheme:` with its secrets masked, or None when it has none.
fn redacted(rest: &str) -> Option<String> {
    let (hier, fragment) = match rest.find('#') {
        Some(h) => rest.split_at(h),
        None => (rest, ""),
    };
    let (before_query, query) = match hier.find('?') {
        Some(q) => (&hier[..q], Some(&hier[q + 1..])),
        None => (hier, None),
    };
    let mut out = String::with_capacity(rest.len());
    let mut changed = false;
    match before_query.strip_prefix("//") {
        Some(after) => {
            let auth_end = after.find('/').unwrap_or(after.len());
            let (authority, path) = after.split_at(auth_end);
            out.push_str("//");
            match authority.rfind('@') {
                Some(at) => {
                    let userinfo = &authority[..at];
                    match userinfo.find(':') {
                        Some(c) => {
                            out.push_str(&userinfo[..=c]);
                            out.push_str(MASK);
                        }
                        None => out.push_str(MASK),
                    }
                    out.push_str(&authority[at..]);
                    changed = true;
                }
                None => out.push_str(authority),
            }
            out.push_str(path);
        }
        // No authority (mailto:, cid:, a bare word followed by a colon): only a query
        // can carry a secret.
        None => out.push_str(before_query),
    }
    if let Some(q) = query {
        out.push('?');
        if !q.is_empty() {
            out.push_str(MASK);
            changed = true;
        }
    }
    out.push_str(fragment);
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_tokens_and_queries_go() {
        let cases = [
            (
                "http://alice:S3cretPass@files.example/hr/x.xlsx?token=abcdef0123456789",
                "http://alice:***@files.example/hr/x.xlsx?***",
            ),
            (
                "https://ghp_T0KEN@git.example/r",
                "https://***@git.example/r",
            ),
            ("ftp://u:p@h", "ftp://u:***@h"),
            ("http://h/p?a=1#frag", "http://h/p?***#frag"),
            ("mailto:a@b.example?body=secret", "mailto:a@b.example?***"),
            (
                "2.1 extbody-url-rewritten <http://a:b@h/x?q> -> <https://a:b@h/x?q>",
                "2.1 extbody-url-rewritten <http://a:***@h/x?***> -> <https://a:***@h/x?***>",
            ),
            (
                "URL=\"http://u:pw@h/?x=1\" is unquoted",
                "URL=\"http://u:***@h/?***\" is unquoted",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(redact(text), want, "{text}");
        }
    }

    #[test]
    fn text_without_secrets_is_left_alone() {
        for text in [
            "http://files.example/hr/x.xlsx",
            "cid:part1@example.org",
            "direction=inbound verdict=fix rules=a,b",
            "note: something happened at 12:30",
            "http://h/p?",
            "",
            ":::",
            "a:b@c",
        ] {
            assert!(matches!(redact(text), Cow::Borrowed(_)), "{text}");
        }
    }

    #[test]
    fn never_panics_on_odd_text() {
        for text in ["é:x?y", "x:?é", "://@?", "a://@", "1:2?3", "€€:€@€?€"] {
            let _ = redact(text);
        }
    }
}
