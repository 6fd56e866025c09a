//! The admin's URL rewrite rules as the options carry them: a match on scheme, host and
//! path, and a template to rewrite through. Applying one as a repair (the policy checks
//! on its result, the change record) is `rewriting::rewrite`.
//!
//! Everything here works on URLs already in RFC 2017 §3.1 encoded form (`fold::
//! pct_encode_unsafe`): ASCII without SP, CTLs, `"` or `\`. The rules come in through
//! [`crate::engine::Options`] already chosen for the message's direction.

use std::borrow::Cow;
use std::fmt;

use iri_string::types::{UriAbsoluteStr, UriStr};

/// How a rule matches the host of a URL (compared case-insensitively; an IPv6 host is
/// written with its brackets, `[2001:db8::1]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostMatch {
    /// This host and nothing else.
    Exact(String),
    /// This domain and every name under it (`example.com` matches `example.com` and
    /// `ftp.example.com`, not `badexample.com`).
    Suffix(String),
}

impl HostMatch {
    pub fn matches(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        match self {
            HostMatch::Exact(h) => host == h.to_ascii_lowercase(),
            HostMatch::Suffix(d) => {
                let d = d.trim_start_matches('.').to_ascii_lowercase();
                host == d
                    || (host.len() > d.len()
                        && host.ends_with(&d)
                        && host.as_bytes()[host.len() - d.len() - 1] == b'.')
            }
        }
    }
}

/// A path regex (the `regex` crate: linear time whatever the input). Compared by its
/// pattern text so that [`crate::engine::Options`] stays comparable.
#[derive(Debug, Clone)]
pub struct PathRegex(pub regex::Regex);

impl PartialEq for PathRegex {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

impl Eq for PathRegex {}

impl PathRegex {
    /// Compiles `pattern` with a size limit (a config error, never a slow message).
    pub fn new(pattern: &str) -> Result<PathRegex, String> {
        regex::RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .build()
            .map(PathRegex)
            .map_err(|e| e.to_string())
    }
}

/// The placeholders a template may use. Each one that stands for an optional component
/// carries its delimiter, so that an absent component leaves nothing behind.
const VARS: &[&str] = &[
    "url",       // the whole URL, as in the message (RFC 2017-encoded)
    "url_pct",   // the whole URL %-encoded for a query value (every non-unreserved octet)
    "scheme",    // lower-case, without ':'
    "userinfo",  // `user:pw@`, or empty
    "host",      // as written; IPv6 with its brackets
    "port",      // `:8080`, or empty
    "authority", // userinfo@host:port as written, without `//`
    "path",      // as written, may be empty
    "query",     // `?q`, or empty
    "fragment",  // `#f`, or empty
];

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Lit(String),
    Var(&'static str),
}

/// A rewrite template such as `https://gateway.example.net/fetch?u={url_pct}` or
/// `https://{authority}{path}{query}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    text: String,
    pieces: Vec<Piece>,
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Template {
    /// Parses a template: `{name}` placeholders from the list above; literal text must be
    /// printable ASCII other than SP, `"`, `\`, `<`, `>`, `{`, `}` (it goes into a URL as is).
    /// The template must give an absolute URI for a sample URL.
    pub fn parse(text: &str) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut lit = String::new();
        let mut rest = text;
        while let Some(c) = rest.chars().next() {
            if c == '{' {
                let Some(close) = rest.find('}') else {
                    return Err("'{' without a closing '}'".into());
                };
                let name = &rest[1..close];
                let Some(&var) = VARS.iter().find(|v| **v == name) else {
                    return Err(format!(
                        "unknown placeholder {{{name}}} (known: {})",
                        VARS.iter()
                            .map(|v| format!("{{{v}}}"))
                            .collect::<Vec<_>>()
                            .join(" ")
                    ));
                };
                if !lit.is_empty() {
                    pieces.push(Piece::Lit(std::mem::take(&mut lit)));
                }
                pieces.push(Piece::Var(var));
                rest = &rest[close + 1..];
                continue;
            }
            if !c.is_ascii_graphic() || matches!(c, '"' | '\\' | '<' | '>' | '}') {
                return Err(format!(
                    "character {c:?} not allowed in a URL template (write it %-encoded)"
                ));
            }
            lit.push(c);
            rest = &rest[c.len_utf8()..];
        }
        if !lit.is_empty() {
            pieces.push(Piece::Lit(lit));
        }
        let t = Template {
            text: text.into(),
            pieces,
        };
        let sample = UrlParts::parse("http://user@h.example:8080/p/q?x=1").ok_or("internal")?;
        let out = t.render(&sample);
        if UriAbsoluteStr::new(&out).is_err() {
            return Err(format!(
                "does not give an absolute URI (RFC 3986 §4.3), e.g. {out:?}"
            ));
        }
        Ok(t)
    }

    fn render(&self, u: &UrlParts) -> String {
        let mut out = String::new();
        for p in &self.pieces {
            match p {
                Piece::Lit(s) => out.push_str(s),
                Piece::Var(v) => out.push_str(&u.var(v)),
            }
        }
        out
    }
}

/// One rewrite rule of the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlRewrite {
    /// How the rule is named in messages (e.g. `rewrite #2 (line 40)`).
    pub name: String,
    /// Lower-case scheme the URL must have, if given.
    pub scheme: Option<String>,
    pub host: Option<HostMatch>,
    /// Searched in the URL's path (as written, %-encoded).
    pub path: Option<PathRegex>,
    pub template: Template,
}

impl UrlRewrite {
    pub fn matches(&self, u: &UrlParts) -> bool {
        self.scheme
            .as_ref()
            .is_none_or(|s| s.eq_ignore_ascii_case(u.scheme))
            && self
                .host
                .as_ref()
                .is_none_or(|h| u.host.is_some_and(|host| h.matches(host)))
            && self.path.as_ref().is_none_or(|p| p.0.is_match(u.path))
    }
}

/// The components of a URL (RFC 3986 §3), borrowed from the URL text.
#[derive(Debug, Clone)]
pub struct UrlParts<'a> {
    pub url: &'a str,
    pub scheme: &'a str,
    pub userinfo: Option<&'a str>,
    pub host: Option<&'a str>,
    pub port: Option<&'a str>,
    pub authority: Option<&'a str>,
    pub path: &'a str,
    pub query: Option<&'a str>,
    pub fragment: Option<&'a str>,
}

impl<'a> UrlParts<'a> {
    /// Splits an absolute URI (a fragment allowed); None if it is not one.
    pub fn parse(url: &'a str) -> Option<UrlParts<'a>> {
        let u = UriStr::new(url).ok()?;
        let auth = u.authority_components();
        Some(UrlParts {
            url,
            scheme: u.scheme_str(),
            userinfo: auth.as_ref().and_then(|a| a.userinfo()),
            host: auth.as_ref().map(|a| a.host()),
            port: auth.as_ref().and_then(|a| a.port()),
            authority: u.authority_str(),
            path: u.path_str(),
            query: u.query_str(),
            fragment: u.fragment_str(),
        })
    }

    fn var(&self, name: &str) -> Cow<'a, str> {
        let with = |pre: &str, v: Option<&str>, post: &str| -> Cow<'a, str> {
            match v {
                Some(v) => Cow::Owned(format!("{pre}{v}{post}")),
                None => Cow::Borrowed(""),
            }
        };
        match name {
            "url" => Cow::Borrowed(self.url),
            "url_pct" => Cow::Owned(pct_component(self.url)),
            "scheme" => Cow::Owned(self.scheme.to_ascii_lowercase()),
            "userinfo" => with("", self.userinfo, "@"),
            "host" => Cow::Borrowed(self.host.unwrap_or("")),
            "port" => with(":", self.port, ""),
            "authority" => Cow::Borrowed(self.authority.unwrap_or("")),
            "path" => Cow::Borrowed(self.path),
            "query" => with("?", self.query, ""),
            "fragment" => with("#", self.fragment, ""),
            _ => Cow::Borrowed(""),
        }
    }
}

/// Every octet outside RFC 3986 `unreserved` %-encoded (upper-case hex): the form a whole
/// URL takes as one query value, `%` included so that the original comes back intact.
pub fn pct_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3 / 2);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// What the rewrite rules make of one URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewritten {
    /// The rule that matched.
    pub rule: String,
    /// The rewritten URL (not yet checked against the scheme policy).
    pub url: String,
}

/// The first rule that matches `url` (RFC 2017-encoded), and its result; None when no
/// rule matches or the URL is not an absolute URI.
pub fn apply_rules(rules: &[UrlRewrite], url: &[u8]) -> Option<Rewritten> {
    let url = std::str::from_utf8(url).ok()?;
    let parts = UrlParts::parse(url)?;
    let r = rules.iter().find(|r| r.matches(&parts))?;
    Some(Rewritten {
        rule: r.name.clone(),
        url: r.template.render(&parts),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::syntax::fold;

    fn rule(
        scheme: Option<&str>,
        host: Option<HostMatch>,
        path: Option<&str>,
        t: &str,
    ) -> UrlRewrite {
        UrlRewrite {
            name: "rewrite #1".into(),
            scheme: scheme.map(str::to_string),
            host,
            path: path.map(|p| PathRegex::new(p).unwrap()),
            template: Template::parse(t).unwrap(),
        }
    }

    fn enc(u: &str) -> Vec<u8> {
        fold::pct_encode_unsafe(u.as_bytes())
    }

    fn run(r: &UrlRewrite, url: &str) -> Option<String> {
        apply_rules(std::slice::from_ref(r), &enc(url)).map(|x| x.url)
    }

    #[test]
    fn upgrade_to_https_keeps_what_the_template_names() {
        let up = rule(Some("http"), None, None, "https://{authority}{path}{query}");
        assert_eq!(
            run(&up, "http://a.example/x?y=1").as_deref(),
            Some("https://a.example/x?y=1")
        );
        // Ports, userinfo and IPv6 hosts come through {authority} as written.
        assert_eq!(
            run(&up, "http://u:p@[2001:db8::1]:8080/f").as_deref(),
            Some("https://u:p@[2001:db8::1]:8080/f")
        );
        // The short form drops userinfo, port and query.
        let short = rule(Some("http"), None, None, "https://{host}{path}");
        assert_eq!(
            run(&short, "http://u@[2001:db8::1]:8080/f?q").as_deref(),
            Some("https://[2001:db8::1]/f")
        );
        assert_eq!(
            run(&short, "HTTP://A.example:81/").as_deref(),
            Some("https://A.example/")
        );
        assert_eq!(run(&short, "ftp://a.example/"), None);
        let port = rule(
            None,
            None,
            None,
            "{scheme}://{userinfo}{host}{port}/x{fragment}",
        );
        assert_eq!(
            run(&port, "ftp://me@h.example:21/a#f").as_deref(),
            Some("ftp://me@h.example:21/x#f")
        );
        assert_eq!(
            run(&port, "ftp://h.example/a").as_deref(),
            Some("ftp://h.example/x")
        );
    }

    #[test]
    fn gateway_template_encodes_the_whole_url() {
        let gw = rule(
            None,
            Some(HostMatch::Suffix("example.com".into())),
            None,
            "https://gateway.example.net/fetch?u={url_pct}",
        );
        // `%`, `"`, `\`, SP and 8-bit octets: first RFC 2017-encoded, then once more
        // as a query value, so that `%` becomes `%25` and the original comes back.
        let out = run(&gw, "http://files.example.com/a b/\"q\"\\x/caf\u{e9}?p=%41").unwrap();
        assert_eq!(
            out,
            "https://gateway.example.net/fetch?u=http%3A%2F%2Ffiles.example.com%2Fa%2520b%2F%2522q%2522%255Cx%2Fcaf%25C3%25A9%3Fp%3D%2541"
        );
        assert!(UriAbsoluteStr::new(&out).is_ok());
        assert_eq!(run(&gw, "http://example.com/").map(|_| ()), Some(()));
        assert_eq!(run(&gw, "http://badexample.com/"), None);
        assert_eq!(run(&gw, "http://example.com.evil.test/"), None);
    }

    #[test]
    fn host_and_path_matching() {
        assert!(HostMatch::Exact("A.Example".into()).matches("a.example"));
        assert!(!HostMatch::Exact("a.example".into()).matches("b.a.example"));
        assert!(HostMatch::Suffix(".example".into()).matches("b.a.example"));
        assert!(HostMatch::Exact("[2001:db8::1]".into()).matches("[2001:DB8::1]"));
        let r = rule(
            Some("ftp"),
            None,
            Some("^/pub/"),
            "https://mirror.example/{path}",
        );
        assert!(run(&r, "ftp://h.example/pub/x").is_some());
        assert!(run(&r, "ftp://h.example/private/pub/x").is_none());
        // A URL that is not an absolute URI is never rewritten.
        assert!(run(&r, "pub/x").is_none());
        assert!(run(&r, "ftp://h.example/pub/%zz").is_none());
    }

    #[test]
    fn templates_are_checked() {
        assert!(Template::parse("https://{host}{path}").is_ok());
        assert!(Template::parse("https://{hots}")
            .unwrap_err()
            .contains("unknown"));
        assert!(Template::parse("https://{host").is_err());
        assert!(Template::parse("https://x/ {path}").is_err());
        assert!(Template::parse("https://x/\"{path}").is_err());
        assert!(Template::parse("https://x/\r\nX: {path}").is_err());
        assert!(Template::parse("{host}{path}")
            .unwrap_err()
            .contains("absolute"));
        assert!(Template::parse("https://x/#{path}").is_err());
    }
}
