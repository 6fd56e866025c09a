//! Applying the admin's URL rewrite rules (`model::url_rules`) as a repair: whether a
//! rewritten URL may be written, and the display-safe record of the change.
//!
//! Everything here works on URLs already in RFC 2017 §3.1 encoded form (`fold::
//! pct_encode_unsafe`): ASCII without SP, CTLs, `"` or `\`.

use iri_string::types::UriAbsoluteStr;

use crate::engine::model::analysis::Context;
use crate::engine::model::edit::UrlChange;
use crate::engine::model::rules::Rule;
use crate::engine::model::url_rules::apply_rules;
use crate::engine::syntax::uri;

/// Why a rewritten URL cannot be written, or None when it can: it must be an absolute URI
/// (RFC 3986 §4.3; RFC 2017 allows no fragment), retrieve something (RFC 2017 §2), have an
/// allowed scheme, and not be rewritten again by the rules (else every pass through a
/// milter would rewrite it once more).
pub fn refuse(cx: &Context, url: &str) -> Option<String> {
    if UriAbsoluteStr::new(url).is_err() {
        return Some("is not an absolute URI without fragment (RFC 3986 §4.3)".into());
    }
    let scheme = uri::scheme(url.as_bytes())
        .unwrap_or("")
        .to_ascii_lowercase();
    if uri::NON_RETRIEVAL_SCHEMES.contains(&scheme.as_str()) {
        return Some(format!(
            "has scheme {scheme}:, which retrieves nothing (RFC 2017 §2)"
        ));
    }
    if cx.opts.schemes.denies(&scheme) {
        return Some(format!("has scheme {scheme}:, denied by the scheme policy"));
    }
    if let Some(again) = apply_rules(&cx.opts.rewrites, url.as_bytes()) {
        if again.url != url {
            return Some(format!(
                "would be rewritten again by {} (rules must not match their own output)",
                again.rule
            ));
        }
    }
    None
}

/// Most characters of a URL shown in a log line, the report header or `check --actions`.
pub const DISPLAY_MAX: usize = 100;

/// A URL as it may be shown anywhere: printable ASCII only (every other octet, and `"`,
/// `\`, `<`, `>`, %-encoded: no CR, LF or NUL can ever come through), cut at `max`
/// characters without splitting a `%HH`, `...` marking the cut.
pub fn display_url(url: &[u8], max: usize) -> String {
    let mut out = String::new();
    for &b in url {
        let piece = if (0x21..0x7f).contains(&b) && !matches!(b, b'"' | b'\\' | b'<' | b'>') {
            (b as char).to_string()
        } else {
            format!("%{b:02X}")
        };
        if out.len() + piece.len() > max {
            out.push_str("...");
            return out;
        }
        out.push_str(&piece);
    }
    out
}

/// The change record of a rewrite, display-safe.
pub fn change(rule: Rule, old: &[u8], new: Option<&[u8]>) -> UrlChange {
    UrlChange {
        rule,
        old: display_url(old, DISPLAY_MAX),
        new: new.map(|n| display_url(n, DISPLAY_MAX)),
    }
}

/// Whether `url` (any bytes) is shown by `display_url` without a CR, LF or NUL: always.
#[cfg(test)]
fn display_is_safe(s: &str) -> bool {
    s.bytes().all(|b| (0x21..0x7f).contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_never_carries_controls_and_cuts_cleanly() {
        let s = display_url(b"http://a/\r\nX-Evil: 1\0\"<>\\\xff", 200);
        assert_eq!(s, "http://a/%0D%0AX-Evil:%201%00%22%3C%3E%5C%FF");
        assert!(display_is_safe(&s));
        let long = display_url(&[b'%'; 10], 5);
        assert_eq!(long, "%%%%%...");
        let cut = display_url("é".repeat(10).as_bytes(), 10);
        assert_eq!(cut, "%C3%A9%C3...");
        assert!(!cut.contains("%C..."));
    }
}
