//! Whether a message matches a scope's keys: envelope addresses (`local@domain`,
//! `@domain`, `@.domain`, `<>`), the client network, the SASL login and a top-level
//! header field with a pattern over its value. Every key given must match; a list
//! matches when one of its entries does. The header fields are read as [`TopFields`]
//! (which `survey` shows too), with the engine's heading scan. Which scope a message
//! then falls into is `scope`'s; what that does to a finding is `decide`'s.

use std::borrow::Cow;
use std::fmt;
use std::net::IpAddr;
use std::ops::ControlFlow;

use ipnet::IpNet;
use regex::bytes::Regex;

use super::direction::in_networks;
use crate::engine::model::mime;

/// An envelope address pattern of a scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    /// `<>`: the null sender of bounces and notifications.
    Null,
    /// `local@domain`, compared without regard to case.
    Exact(String),
    /// `@domain`: every address of that domain.
    Domain(String),
    /// `@.domain`: every address of a domain below it (not the domain itself).
    Subdomains(String),
}

impl Address {
    /// Parses a scope entry: `local@domain`, `@domain`, `@.domain` or `<>`.
    pub fn parse(text: &str) -> Result<Address, String> {
        let t = text.trim();
        if t == "<>" {
            return Ok(Address::Null);
        }
        if t.is_empty()
            || t.chars()
                .any(|c| c.is_control() || c.is_whitespace() || c == '<' || c == '>')
        {
            return Err(format!(
                "{text:?} is not an address: expected local@domain, @domain, @.domain or <>"
            ));
        }
        let Some((local, domain)) = t.rsplit_once('@') else {
            return Err(format!(
                "{text:?} has no @: expected local@domain, @domain, @.domain or <>"
            ));
        };
        let domain = domain.trim_end_matches('.').to_lowercase();
        let (sub, domain) = match domain.strip_prefix('.') {
            Some(d) => (true, d.to_string()),
            None => (false, domain),
        };
        if domain.is_empty() || domain.contains('@') || domain.starts_with('.') {
            return Err(format!("{text:?}: no domain after the @"));
        }
        match (local.is_empty(), sub) {
            (true, false) => Ok(Address::Domain(domain)),
            (true, true) => Ok(Address::Subdomains(domain)),
            (false, false) => Ok(Address::Exact(format!("{}@{domain}", local.to_lowercase()))),
            (false, true) => Err(format!(
                "{text:?}: @.domain stands for every address below a domain and takes no \
                 local part"
            )),
        }
    }

    /// Whether `addr` (as [`normalize_address`] gives it) matches.
    pub fn matches(&self, addr: &str) -> bool {
        match self {
            Address::Null => addr.is_empty(),
            Address::Exact(a) => a == addr,
            Address::Domain(d) => domain_of(addr) == Some(d.as_str()),
            Address::Subdomains(d) => domain_of(addr).is_some_and(|a| below(a, d)),
        }
    }

    /// Whether every address this one matches, `other` matches too.
    fn covered_by(&self, other: &Address) -> bool {
        match (self, other) {
            (a, b) if a == b => true,
            (Address::Exact(a), b) => b.matches(a),
            (Address::Domain(d), Address::Subdomains(p)) => below(d, p),
            (Address::Subdomains(d), Address::Subdomains(p)) => below(d, p),
            _ => false,
        }
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Null => f.write_str("<>"),
            Address::Exact(a) => f.write_str(a),
            Address::Domain(d) => write!(f, "@{d}"),
            Address::Subdomains(d) => write!(f, "@.{d}"),
        }
    }
}

fn domain_of(addr: &str) -> Option<&str> {
    addr.rsplit_once('@').map(|(_, d)| d)
}

/// Whether `name` is a domain strictly below `parent`.
fn below(name: &str, parent: &str) -> bool {
    name.len() > parent.len() + 1
        && name.ends_with(parent)
        && name.as_bytes()[name.len() - parent.len() - 1] == b'.'
}

/// An address as the MTA gives it in MAIL or RCPT (`<Bob@Example.ORG>`, with a source
/// route, or `<>`), as scopes compare it: without brackets and route, lower case, and
/// the domain without a trailing dot. The null sender is the empty string.
pub fn normalize_address(arg: &[u8]) -> String {
    let s = String::from_utf8_lossy(arg);
    let s = s.trim();
    let s = s.strip_prefix('<').unwrap_or(s);
    let s = s.strip_suffix('>').unwrap_or(s);
    // RFC 5321 §4.1.2: "@relay,@relay:user@domain"; the route is to be ignored.
    let s = match s.strip_prefix('@') {
        Some(route) => route.split_once(':').map_or("", |(_, a)| a),
        None => s,
    };
    s.trim().trim_end_matches('.').to_lowercase()
}

/// A top-level header field a scope looks for: any occurrence of the field whose
/// unfolded value the pattern finds (case-insensitive), or any occurrence at all
/// without a pattern.
#[derive(Debug, Clone)]
pub struct HeaderMatch {
    pub name: String,
    pub pattern: Option<Regex>,
}

impl HeaderMatch {
    pub fn new(name: &str, pattern: Option<&str>) -> Result<HeaderMatch, String> {
        if name.is_empty() || !name.bytes().all(|b| (33..=126).contains(&b) && b != b':') {
            return Err(format!(
                "{name:?} is not a header field name (printable ASCII, no colon, RFC 5322 §3.6.8)"
            ));
        }
        let pattern = match pattern {
            None => None,
            Some(p) => Some(
                regex::bytes::RegexBuilder::new(p)
                    .case_insensitive(true)
                    // Linear-time matching either way; this bounds the compiled size.
                    .size_limit(1 << 20)
                    .build()
                    .map_err(|e| {
                        // The error spans lines (the pattern, a caret); a config error
                        // is one line.
                        let text = e.to_string();
                        let why = text
                            .lines()
                            .rev()
                            .find_map(|l| l.strip_prefix("error: "))
                            .map_or_else(
                                || text.split_whitespace().collect::<Vec<_>>().join(" "),
                                str::to_string,
                            );
                        format!("pattern {p:?} is not a regular expression: {why}")
                    })?,
            ),
        };
        Ok(HeaderMatch {
            name: name.to_string(),
            pattern,
        })
    }

    fn matches(&self, value: &[u8]) -> bool {
        self.pattern.as_ref().is_none_or(|p| p.is_match(value))
    }

    fn pattern_text(&self) -> Option<&str> {
        self.pattern.as_ref().map(Regex::as_str)
    }
}

impl PartialEq for HeaderMatch {
    fn eq(&self, other: &Self) -> bool {
        self.name.eq_ignore_ascii_case(&other.name) && self.pattern_text() == other.pattern_text()
    }
}

impl Eq for HeaderMatch {}

/// What a scope matches on. Every key given must match; a list matches when one entry
/// does. At least one key is given (the configuration checks it).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Matcher {
    pub recipients: Option<Vec<Address>>,
    pub senders: Option<Vec<Address>>,
    pub client_networks: Option<Vec<IpNet>>,
    /// Lower case: compared without regard to case.
    pub sasl_logins: Option<Vec<String>>,
    pub header: Option<HeaderMatch>,
}

impl Matcher {
    /// Whether every message this matcher takes, `earlier` takes too: `earlier` then
    /// wins every time, being tried first.
    pub fn covered_by(&self, earlier: &Matcher) -> bool {
        fn list<T>(
            mine: &Option<Vec<T>>,
            theirs: &Option<Vec<T>>,
            c: impl Fn(&T, &T) -> bool,
        ) -> bool {
            match (mine, theirs) {
                (_, None) => true,
                (None, Some(_)) => false,
                (Some(m), Some(t)) => m.iter().all(|a| t.iter().any(|b| c(a, b))),
            }
        }
        list(&self.recipients, &earlier.recipients, Address::covered_by)
            && list(&self.senders, &earlier.senders, Address::covered_by)
            && list(&self.client_networks, &earlier.client_networks, |a, b| {
                b.contains(a)
            })
            && list(&self.sasl_logins, &earlier.sasl_logins, |a, b| a == b)
            && match (&self.header, &earlier.header) {
                (_, None) => true,
                (None, Some(_)) => false,
                (Some(m), Some(e)) => {
                    m.name.eq_ignore_ascii_case(&e.name)
                        && (e.pattern.is_none() || m.pattern_text() == e.pattern_text())
                }
            }
    }
}

impl Matcher {
    /// Whether a recipient (None: no recipient known) satisfies the recipient key; a
    /// matcher without one is satisfied by any.
    pub fn takes_recipient(&self, addr: Option<&str>) -> bool {
        match (&self.recipients, addr) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(l), Some(a)) => l.iter().any(|p| p.matches(a)),
        }
    }

    /// Whether every key but the recipient matches: the sender (as
    /// [`normalize_address`] gives it), the client address, the SASL login (in lower
    /// case) and the header field, read from `fields` only when asked for.
    pub fn takes(
        &self,
        sender: Option<&str>,
        client_addr: Option<IpAddr>,
        login: Option<&str>,
        fields: &mut FieldCache,
    ) -> bool {
        self.senders
            .as_ref()
            .is_none_or(|l| sender.is_some_and(|a| l.iter().any(|p| p.matches(a))))
            && self
                .client_networks
                .as_ref()
                .is_none_or(|nets| client_addr.is_some_and(|a| in_networks(nets, a)))
            && self
                .sasl_logins
                .as_ref()
                .is_none_or(|l| login.is_some_and(|a| l.iter().any(|x| x == a)))
            && self.header.as_ref().is_none_or(|h| fields.any(h))
    }
}

/// The top-level header fields of a message, read once and only when a scope asks.
pub struct FieldCache<'a> {
    raw: &'a [u8],
    extra: &'a [(String, Vec<u8>)],
    fields: Option<TopFields<'a>>,
}

impl<'a> FieldCache<'a> {
    /// The message `raw`, with `extra` fields counting as its own (see
    /// `scope::Envelope::extra_headers`).
    pub fn new(raw: &'a [u8], extra: &'a [(String, Vec<u8>)]) -> FieldCache<'a> {
        FieldCache {
            raw,
            extra,
            fields: None,
        }
    }

    fn any(&mut self, h: &HeaderMatch) -> bool {
        if self
            .extra
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case(&h.name) && h.matches(v))
        {
            return true;
        }
        let raw = self.raw;
        self.fields
            .get_or_insert_with(|| TopFields::read(raw))
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case(h.name.as_bytes()) && h.matches(v))
    }
}

/// The top-level header fields of a message as scopes match them and `survey` shows
/// them: each name, and its value unfolded and without surrounding white space, in
/// message order.
///
/// Read with the engine's heading scan, read on past the lines that are no field
/// ([`mime::fields_read_on`]), where a message file may have a stray line and the
/// fields after it still count. Such a line is taken as it always was here: as a field
/// when a colon follows a name without spaces (white space before the colon dropped),
/// else passed over with its continuation lines.
/// How much of a message [`TopFields::read`] hands the heading scan at a time.
const READ_AT_ONCE: usize = 16 * 1024;

pub struct TopFields<'a> {
    fields: Vec<(&'a [u8], Cow<'a, [u8]>)>,
}

impl<'a> TopFields<'a> {
    pub fn read(raw: &'a [u8]) -> TopFields<'a> {
        let mut fields = Vec::new();
        // A piece at a time: a message file with no empty line and many short lines that
        // are no field would otherwise be a record per line before they are passed over.
        mime::fields_read_on_by_piece(raw, READ_AT_ONCE, |piece| {
            fields.extend(piece.iter().filter_map(|f| {
                let (name, value) = if f.name.is_empty() {
                    stray_field(&raw[f.value.clone()])?
                } else {
                    (&raw[f.name.clone()], &raw[f.value.clone()])
                };
                Some((name, unfold(value)))
            }));
            ControlFlow::Continue(())
        });
        TopFields { fields }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.fields.iter().map(|(n, v)| (*n, &**v))
    }

    /// The value of the first field named `name` (in any case) for display: white
    /// space runs as one space, octets that are not UTF-8 replaced.
    pub fn first_text(&self, name: &str) -> Option<String> {
        let (_, v) = self
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))?;
        Some(
            String::from_utf8_lossy(v)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
        )
    }
}

/// A stray line (with its continuation lines) as a field: when a colon follows a name
/// without spaces on its first line, that name without the white space before the
/// colon, and the rest.
fn stray_field(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = memchr::memchr(b':', line)?;
    let name = line[..colon].trim_ascii_end();
    let one_word = !name.is_empty() && !name.contains(&b' ') && !name.contains(&b'\n');
    one_word.then(|| (name, &line[colon + 1..]))
}

/// A field value without the line breaks of its folds (LF, and a CR before it; a CR
/// alone stays) and without white space around it.
fn unfold(v: &[u8]) -> Cow<'_, [u8]> {
    if !v.contains(&b'\n') {
        return Cow::Borrowed(v.trim_ascii());
    }
    let mut out = Vec::with_capacity(v.len());
    for (i, &b) in v.iter().enumerate() {
        if !(b == b'\n' || (b == b'\r' && v.get(i + 1) == Some(&b'\n'))) {
            out.push(b);
        }
    }
    Cow::Owned(out.trim_ascii().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> Address {
        Address::parse(s).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn address_patterns() {
        assert_eq!(addr("<>"), Address::Null);
        assert_eq!(
            addr("Bob@Example.ORG."),
            Address::Exact("bob@example.org".into())
        );
        assert_eq!(addr("@Example.org"), Address::Domain("example.org".into()));
        assert_eq!(
            addr("@.example.org"),
            Address::Subdomains("example.org".into())
        );
        for bad in [
            "",
            "bob",
            "bob@",
            "@",
            "a b@c",
            "<bob@c>",
            "x@.example.org",
            "@..x",
        ] {
            assert!(Address::parse(bad).is_err(), "{bad:?}");
        }
        let n = |s: &str| normalize_address(s.as_bytes());
        assert_eq!(n("<Bob@Example.ORG>"), "bob@example.org");
        assert_eq!(
            n("<@relay.example,@b.example:bob@example.org>"),
            "bob@example.org"
        );
        assert_eq!(n("<>"), "");
        assert_eq!(n(" bob@example.org. "), "bob@example.org");
        assert!(addr("@example.org").matches("bob@example.org"));
        assert!(!addr("@example.org").matches("bob@a.example.org"));
        assert!(addr("@.example.org").matches("bob@a.example.org"));
        assert!(!addr("@.example.org").matches("bob@example.org"));
        assert!(!addr("@.example.org").matches("bob@badexample.org"));
        assert!(addr("bob@example.org").matches("bob@example.org"));
        assert!(!addr("bob@example.org").matches("bobby@example.org"));
        assert!(addr("<>").matches("") && !addr("@example.org").matches(""));
        // A quoted local part may hold an @: the domain is after the last one.
        assert!(addr("@example.org").matches(&n("<\"a@b\"@example.org>")));
    }

    #[test]
    fn header_fields_are_unfolded_and_end_at_the_empty_line() {
        let raw = b"From: a@example.org\r\nList-Id: Announcements\r\n <announce.example.org>\r\n\
                    Subject :x\r\nno colon here\r\n\r\nList-Id: <body.example.org>\r\n";
        let read = TopFields::read(raw);
        let f: Vec<(&[u8], &[u8])> = read.iter().collect();
        let names: Vec<&[u8]> = f.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, [&b"From"[..], b"List-Id", b"Subject"]);
        assert_eq!(f[1].1, b"Announcements <announce.example.org>");
        assert_eq!(f[2].1, b"x");
        assert_eq!(
            read.first_text("list-id").as_deref(),
            Some("Announcements <announce.example.org>")
        );
    }

    /// The fields of a heading as scope matching reads them, one `name=value` each.
    fn fields(raw: &[u8]) -> String {
        TopFields::read(raw)
            .iter()
            .map(|(n, v)| format!("{}={}", n.escape_ascii(), v.escape_ascii()))
            .collect::<Vec<_>>()
            .join("|")
    }

    /// Headings that bend the rules, and what scope matching and `survey` read in them:
    /// a line that is no field is passed over (the engine's scan would start the body
    /// there), a name keeps its case, and only the first occurrence is shown.
    #[test]
    fn tricky_headings_are_read_as_ever() {
        let cases: [(&[u8], &str); 16] = [
            (
                b"List-Id: Announcements\r\n <a.example>\r\n\tmore\r\n\r\nX: body\r\n",
                "List-Id=Announcements <a.example>\\tmore",
            ),
            (b"A: 1\nB: 2\r\n c\n\nBody: x\n", "A=1|B=2 c"),
            (
                b"From: a\r\nno colon here\r\n cont: x\r\nList-Id: <l.example>\r\n\r\n",
                "From=a|List-Id=<l.example>",
            ),
            (
                b"X-\0: v\r\nSubject: a\0b\r\nList-Id: <after-nul>\r\n\r\n",
                "X-\\x00=v|Subject=a\\x00b|List-Id=<after-nul>",
            ),
            (b"Subject: hi\r\nX-A: 1", "Subject=hi|X-A=1"),
            (b"Subject: x\r\n\r", "Subject=x"),
            (
                b"From sender@example.org Thu Nov 26 13:09:07 2026\r\n cont\r\nFrom : a@b\r\n\r\n",
                "From=a@b",
            ),
            (
                b"List-Id\x0c: <ff.example>\r\nSubject \t: s\r\nX-Cr\r: y\r\n\r\n",
                "List-Id=<ff.example>|Subject=s|X-Cr=y",
            ),
            (b" lead\r\nA: 1\r\n", "A=1"),
            (
                b": x\r\nSub ject: x\r\n\rX: y\r\nList-Id: <z>\r\n",
                "\\rX=y|List-Id=<z>",
            ),
            (
                b"message-id: <A@B>\r\nMessage-ID: <second@x>\r\n",
                "message-id=<A@B>|Message-ID=<second@x>",
            ),
            (b"\r\r\nA: 1\r\n", "A=1"),
            (b"A:\r\nB:   \r\nC: \x0c v \x0c\r\n", "A=|B=|C=v"),
            (b"A: 1\r\n\r\nB: 2", "A=1"),
            (b"A: a\r\r\n b\r", "A=a\\r b"),
            (
                b"Bad line\r\n Odd: fold\r\nX\x0cY: 1\r\n Z: fold of it\r\nC: 3\r\n",
                "X\\x0cY=1 Z: fold of it|C=3",
            ),
        ];
        for (raw, want) in cases {
            assert_eq!(fields(raw), want, "{}", raw.escape_ascii());
        }
        let raw = b"x-mailer: One\r\n  two\tthree\r\nX-Mailer: second\r\nbogus\r\nMessage-ID\x0c: <id@example.org>\r\n\r\n";
        assert_eq!(
            TopFields::read(raw).first_text("X-Mailer").as_deref(),
            Some("One two three")
        );
        assert_eq!(
            TopFields::read(raw).first_text("message-id").as_deref(),
            Some("<id@example.org>")
        );
        assert_eq!(TopFields::read(raw).first_text("User-Agent"), None);
    }
}
