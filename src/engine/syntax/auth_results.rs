//! Authentication-Results fields (RFC 8601 §2.2): which verifier (the authserv-id)
//! recorded which result of which method, and the properties that say what it checked.
//! A DKIM verdict a trusted verifier recorded names its signature by `header.d`,
//! `header.s` and a prefix of its `b=` (`header.b`, RFC 6008), so that it can be matched
//! to the DKIM-Signature field it is about.
//!
//! [`parse`] follows the grammar where real verifiers do, and is lenient where they are
//! not: a `key=value` that is neither `reason=` nor a property (Microsoft's `action=none`)
//! is passed over, a property value may be any run of printable octets
//! (`header.b=AbCd+/12`, `header.i=@example.com`, an IPv6 address), and one `;` may end
//! the field. Anything else it does not read makes the whole field count for nothing.
//! One pass, no recursion: comments nest by a counter, so hostile input costs linear
//! time and no stack.

/// One Authentication-Results field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthResults {
    /// The verifier that wrote it, as written (quotes removed).
    pub authserv_id: String,
    /// Empty for `none`: the verifier checked nothing.
    pub results: Vec<MethodResult>,
}

/// One `method=result`, with what the verifier recorded about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodResult {
    /// Lower case: `dkim`, `spf`, `dmarc`, `arc`, ...
    pub method: String,
    /// Lower case: `pass`, `fail`, `none`, ...
    pub result: String,
    /// `reason=`, as written.
    pub reason: Option<String>,
    pub props: Vec<Prop>,
}

/// A property, `ptype.property=value`: `header.d=example.com`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prop {
    /// Lower case: `header`, `smtp`, `policy`, `body`.
    pub ptype: String,
    /// Lower case: `d`, `b`, `from`, `mailfrom`.
    pub property: String,
    /// As written, quotes removed.
    pub value: String,
}

impl MethodResult {
    /// The value of the first `ptype.property`, either given in any case.
    pub fn prop(&self, ptype: &str, property: &str) -> Option<&str> {
        self.props
            .iter()
            .find(|p| {
                p.ptype.eq_ignore_ascii_case(ptype) && p.property.eq_ignore_ascii_case(property)
            })
            .map(|p| p.value.as_str())
    }
}

/// Reads the value of an Authentication-Results field (after the colon, folding
/// included). `None` when it does not parse: such a field counts for nothing.
pub fn parse(value: &[u8]) -> Option<AuthResults> {
    let mut c = Cur { s: value, i: 0 };
    c.cfws()?;
    let authserv_id = c.value()?;
    let before = c.i;
    c.cfws()?;
    if c.i > before && c.peek().is_some_and(|b| b.is_ascii_digit()) {
        // A version other than 1 is a syntax this parser does not know the meaning of.
        if c.digits()?.trim_start_matches('0') != "1" {
            return None;
        }
        c.cfws()?;
    }
    if !c.eat(b';') {
        return None;
    }
    c.cfws()?;
    let mut results = Vec::new();
    if c.none() {
        return Some(AuthResults {
            authserv_id,
            results,
        });
    }
    loop {
        results.push(c.resinfo()?);
        // A resinfo stops only at its `;` or the end.
        if !c.eat(b';') {
            break;
        }
        c.cfws()?;
        if c.at_end() {
            break;
        }
    }
    Some(AuthResults {
        authserv_id,
        results,
    })
}

struct Cur<'a> {
    s: &'a [u8],
    i: usize,
}

/// Octets that end a lenient property value: controls, space, `;`, comments, quotes.
fn ends_pvalue(b: u8) -> bool {
    b <= b' ' || b == 0x7f || matches!(b, b';' | b'(' | b')' | b'"')
}

/// RFC 2045 token octets (no tspecials, space or controls); 8-bit ones too, as UTF-8
/// may write them (RFC 6532).
fn is_token(b: u8) -> bool {
    b > b' ' && b != 0x7f && !b"()<>@,;:\\\"/[]?=".contains(&b)
}

/// A Keyword (RFC 5321 Ldh-str), with `_` as some verifiers write it.
fn is_keyword(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

impl Cur<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn at_end(&self) -> bool {
        self.i >= self.s.len()
    }

    fn eat(&mut self, b: u8) -> bool {
        let hit = self.peek() == Some(b);
        self.i += usize::from(hit);
        hit
    }

    /// The longest run of octets `f` accepts, possibly empty.
    fn run(&mut self, f: impl Fn(u8) -> bool) -> &[u8] {
        let rest = self.s.get(self.i..).unwrap_or_default();
        let n = rest.iter().position(|&b| !f(b)).unwrap_or(rest.len());
        self.i += n;
        &rest[..n]
    }

    /// Skips whitespace, line breaks and comments. `None` for a comment that is never
    /// closed: what follows its `(` is all comment, and the field is cut short.
    fn cfws(&mut self) -> Option<()> {
        let mut depth = 0usize;
        while let Some(b) = self.peek() {
            match b {
                b'(' => depth += 1,
                b')' if depth > 0 => depth -= 1,
                b'\\' if depth > 0 => self.i += 1,
                b' ' | b'\t' | b'\r' | b'\n' => {}
                _ if depth > 0 => {}
                _ => break,
            }
            self.i += 1;
        }
        (depth == 0).then_some(())
    }

    fn keyword(&mut self) -> Option<String> {
        let k = self.run(is_keyword);
        (!k.is_empty()).then(|| String::from_utf8_lossy(k).to_ascii_lowercase())
    }

    fn digits(&mut self) -> Option<String> {
        let d = self.run(|b| b.is_ascii_digit());
        (!d.is_empty()).then(|| String::from_utf8_lossy(d).into_owned())
    }

    /// `value`: a token or a quoted-string (RFC 2045).
    fn value(&mut self) -> Option<String> {
        if self.peek() == Some(b'"') {
            return self.quoted();
        }
        let t = self.run(is_token);
        (!t.is_empty()).then(|| String::from_utf8_lossy(t).into_owned())
    }

    /// A quoted-string without its quotes, quoted-pairs undone, folding removed.
    fn quoted(&mut self) -> Option<String> {
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let b = self.peek()?;
            self.i += 1;
            match b {
                b'"' => return Some(String::from_utf8_lossy(&out).into_owned()),
                b'\\' => {
                    out.push(self.peek()?);
                    self.i += 1;
                }
                b'\r' | b'\n' => {}
                _ => out.push(b),
            }
        }
    }

    /// `pvalue`: a value, `[local-part] "@" domain`, or any run of printable octets as
    /// verifiers write them; empty when the value is left out. `spaced`: whitespace or a
    /// comment came after the `=`, so that a property that follows is the next one, not
    /// this one's value (`header.i= header.b=AbCd`).
    fn pvalue(&mut self, spaced: bool) -> Option<String> {
        if spaced && self.property_follows() {
            return Some(String::new());
        }
        if self.peek() != Some(b'"') {
            let v = self.run(|b| !ends_pvalue(b));
            return Some(String::from_utf8_lossy(v).into_owned());
        }
        let start = self.i;
        let unquoted = self.quoted()?;
        if self.peek() != Some(b'@') {
            return Some(unquoted);
        }
        // A quoted local-part: the address keeps its quotes.
        self.run(|b| !ends_pvalue(b));
        Some(String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }

    /// The CFWS after a property's `=`, and its value.
    fn spaced_pvalue(&mut self) -> Option<String> {
        let at = self.i;
        self.cfws()?;
        let spaced = self.i > at;
        self.pvalue(spaced)
    }

    /// `key=` or `ptype.property=` comes next (without consuming it). It looks no
    /// further than the value that would otherwise be read next: the pass stays linear.
    fn property_follows(&self) -> bool {
        let mut look = Cur {
            s: self.s,
            i: self.i,
        };
        if look.run(is_keyword).is_empty() {
            return false;
        }
        if look.eat(b'.') && look.run(is_keyword).is_empty() {
            return false;
        }
        look.peek() == Some(b'=')
    }

    /// `none` (after the first `;`), alone to the end but for one more `;`.
    fn none(&mut self) -> bool {
        let rest = self.s.get(self.i..).unwrap_or_default();
        let Some(after) = rest
            .get(..4)
            .filter(|w| w.eq_ignore_ascii_case(b"none"))
            .map(|_| self.i + 4)
        else {
            return false;
        };
        let mut look = Cur {
            s: self.s,
            i: after,
        };
        if look.peek().is_some_and(is_keyword) || look.cfws().is_none() {
            return false;
        }
        look.eat(b';');
        if look.cfws().is_none() || !look.at_end() {
            return false;
        }
        self.i = look.i;
        true
    }

    /// `methodspec [reasonspec] *propspec`, up to the `;` that ends it or the end.
    fn resinfo(&mut self) -> Option<MethodResult> {
        let method = self.keyword()?;
        self.cfws()?;
        if self.eat(b'/') {
            self.cfws()?;
            self.digits()?;
            self.cfws()?;
        }
        if !self.eat(b'=') {
            return None;
        }
        self.cfws()?;
        let mut r = MethodResult {
            method,
            result: self.keyword()?,
            reason: None,
            props: Vec::new(),
        };
        loop {
            self.cfws()?;
            if matches!(self.peek(), None | Some(b';')) {
                return Some(r);
            }
            let key = self.keyword()?;
            self.cfws()?;
            if self.eat(b'.') {
                self.cfws()?;
                let property = self.keyword()?;
                self.cfws()?;
                if !self.eat(b'=') {
                    return None;
                }
                let value = self.spaced_pvalue()?;
                r.props.push(Prop {
                    ptype: key,
                    property,
                    value,
                });
            } else if self.eat(b'=') {
                let value = self.spaced_pvalue()?;
                // Any other `key=value` (Microsoft's `action=none`) is no property and
                // says nothing this parser reads.
                if key == "reason" && r.reason.is_none() {
                    r.reason = Some(value);
                }
            } else {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ar(value: &str) -> AuthResults {
        parse(value.as_bytes()).unwrap_or_else(|| panic!("does not parse: {value:?}"))
    }

    /// (method, result) of each result.
    fn verdicts(a: &AuthResults) -> Vec<(&str, &str)> {
        a.results
            .iter()
            .map(|r| (r.method.as_str(), r.result.as_str()))
            .collect()
    }

    fn props(r: &MethodResult) -> Vec<String> {
        r.props
            .iter()
            .map(|p| format!("{}.{}={}", p.ptype, p.property, p.value))
            .collect()
    }

    #[test]
    fn opendkim() {
        let a = ar(" mx.example.org; dkim=pass (2048-bit key; unprotected) \
                    header.d=example.com header.i=@example.com header.a=rsa-sha256 \
                    header.s=s1 header.b=AbCdEfGh");
        assert_eq!(a.authserv_id, "mx.example.org");
        assert_eq!(verdicts(&a), [("dkim", "pass")]);
        let dkim = &a.results[0];
        assert_eq!(
            props(dkim),
            [
                "header.d=example.com",
                "header.i=@example.com",
                "header.a=rsa-sha256",
                "header.s=s1",
                "header.b=AbCdEfGh"
            ]
        );
        assert_eq!(dkim.prop("header", "b"), Some("AbCdEfGh"));
        assert_eq!(dkim.prop("HEADER", "S"), Some("s1"));
        assert_eq!(dkim.prop("header", "from"), None);
        assert_eq!(dkim.reason, None);
    }

    #[test]
    fn rspamd_folded_with_crlf() {
        let a = ar(
            " mx.example.org;\r\n\tdkim=pass header.d=example.com header.s=s1 \
                    header.b=AbCdEfGh;\r\n\tspf=pass (mx.example.org: domain of a@example.com \
                    designates 192.0.2.1 as permitted sender) smtp.mailfrom=a@example.com;\r\n\t\
                    dmarc=pass (policy=none) header.from=example.com",
        );
        assert_eq!(
            verdicts(&a),
            [("dkim", "pass"), ("spf", "pass"), ("dmarc", "pass")]
        );
        assert_eq!(props(&a.results[1]), ["smtp.mailfrom=a@example.com"]);
        assert_eq!(a.results[2].prop("header", "from"), Some("example.com"));
    }

    #[test]
    fn gmail() {
        let a = ar(" mx.google.com;\n       dkim=pass header.i=@example.com \
                    header.s=20230601 header.b=AbCd+/12;\n       arc=pass (i=1 spf=pass \
                    spfdomain=example.com dkim=pass dkdomain=example.com dmarc=pass \
                    fromdomain=example.com);\n       spf=pass (google.com: domain of \
                    x@example.com designates 2001:db8::1 as permitted sender) \
                    smtp.mailfrom=x@example.com;\n       dmarc=pass (p=REJECT sp=REJECT \
                    dis=NONE) header.from=example.com");
        assert_eq!(
            verdicts(&a),
            [
                ("dkim", "pass"),
                ("arc", "pass"),
                ("spf", "pass"),
                ("dmarc", "pass")
            ]
        );
        assert_eq!(a.results[0].prop("header", "b"), Some("AbCd+/12"));
        assert_eq!(a.results[0].prop("header", "i"), Some("@example.com"));
        assert!(a.results[1].props.is_empty());
    }

    /// No space before `;`, and `key=value` pairs that are no property.
    #[test]
    fn microsoft() {
        let a = ar(
            " spf=pass (sender IP is 192.0.2.1) smtp.mailfrom=x; dkim=none (message \
                    not signed) header.d=none;dmarc=none action=none header.from=x;\
                    compauth=pass reason=100"
                .replacen(' ', " mx.example.net; ", 1)
                .as_str(),
        );
        assert_eq!(a.authserv_id, "mx.example.net");
        assert_eq!(
            verdicts(&a),
            [
                ("spf", "pass"),
                ("dkim", "none"),
                ("dmarc", "none"),
                ("compauth", "pass")
            ]
        );
        assert_eq!(props(&a.results[1]), ["header.d=none"]);
        assert_eq!(props(&a.results[2]), ["header.from=x"]);
        assert_eq!(a.results[3].reason.as_deref(), Some("100"));
        assert!(a.results[3].props.is_empty());
    }

    #[test]
    fn none_with_and_without_a_version() {
        for v in [
            "example.org 1; none",
            "example.org; none",
            "example.org (v) 01 ;\r\n NONE (nothing checked)",
            "example.org; none;",
        ] {
            let a = ar(v);
            assert_eq!(a.authserv_id, "example.org", "{v}");
            assert!(a.results.is_empty(), "{v}");
        }
        // A version other than 1 is a syntax of unknown meaning.
        assert_eq!(parse(b"example.org 2; none"), None);
        assert_eq!(parse(b"example.org 2; dkim=pass"), None);
        // With a version, results as usual.
        assert_eq!(
            verdicts(&ar("example.org 1; dkim=pass")),
            [("dkim", "pass")]
        );
        // `none` as a method name, or followed by text, is no `none`.
        assert_eq!(verdicts(&ar("example.org; none=pass")), [("none", "pass")]);
        assert_eq!(parse(b"example.org; none spf=pass"), None);
        assert_eq!(parse(b"example.org; nonesuch"), None);
    }

    #[test]
    fn quoted_values() {
        let a = ar(
            "\"mx.example.org\"; dkim=pass reason=\"signature ok; (really)\" \
                    header.d=\"Example.COM\" header.b=\"Ab\\\"Cd\" \
                    smtp.mailfrom=\"a b\"@example.com",
        );
        assert_eq!(a.authserv_id, "mx.example.org");
        let dkim = &a.results[0];
        assert_eq!(dkim.reason.as_deref(), Some("signature ok; (really)"));
        assert_eq!(
            props(dkim),
            [
                "header.d=Example.COM",
                "header.b=Ab\"Cd",
                "smtp.mailfrom=\"a b\"@example.com"
            ]
        );
    }

    #[test]
    fn comments_nest_and_hold_quoted_pairs_and_semicolons() {
        let a = ar(
            "(a (nested) comment) mx.example.org (x) ; (y) dkim (z) = (w) pass \
                    (outer (inner; \\) still inner) ;) header (c) . (c) d (c) = (c) x.org \
                    (;;) ; spf=fail",
        );
        assert_eq!(verdicts(&a), [("dkim", "pass"), ("spf", "fail")]);
        assert_eq!(props(&a.results[0]), ["header.d=x.org"]);
    }

    #[test]
    fn names_lower_case_values_as_written() {
        let a = ar("MX.Example.org; DKIM/1=Pass Header.D=Example.COM REASON=Fine");
        assert_eq!(a.authserv_id, "MX.Example.org");
        assert_eq!(verdicts(&a), [("dkim", "pass")]);
        assert_eq!(props(&a.results[0]), ["header.d=Example.COM"]);
        assert_eq!(a.results[0].reason.as_deref(), Some("Fine"));
    }

    #[test]
    fn folding_with_lf_and_a_trailing_semicolon() {
        let a = ar("mx.example.org;\n dkim=pass\n\theader.d=example.com;\n spf=none;\n");
        assert_eq!(verdicts(&a), [("dkim", "pass"), ("spf", "none")]);
    }

    #[test]
    fn lenient_property_values() {
        let a = ar(
            "mx; iprev=pass policy.iprev=2001:db8::1 smtp.helo=[192.0.2.1] \
                    smtp.mailfrom=<> header.i= header.b=AbCd+/12== smtp.auth=a+tag@x",
        );
        assert_eq!(
            props(&a.results[0]),
            [
                "policy.iprev=2001:db8::1",
                "smtp.helo=[192.0.2.1]",
                "smtp.mailfrom=<>",
                "header.i=",
                "header.b=AbCd+/12==",
                "smtp.auth=a+tag@x"
            ]
        );
    }

    #[test]
    fn the_first_reason_is_kept() {
        let a = ar("mx; dkim=fail reason=first header.d=x reason=second");
        assert_eq!(a.results[0].reason.as_deref(), Some("first"));
    }

    #[test]
    fn fields_that_do_not_parse() {
        for v in [
            "",
            "   ",
            "(only a comment)",
            "example.org",
            "example.org;",
            "example.org; ;",
            "example.org dkim=pass",
            "example.org; dkim",
            "example.org; dkim=",
            "example.org; =pass",
            "example.org; dkim=pass (never closed",
            "example.org; dkim=pass header.d=\"never closed",
            "example.org; dkim=pass header.d=\"x\\",
            "example.org; dkim=pass;; spf=pass",
            "example.org; dkim=pass header.=x",
            "example.org; dkim=pass header.d",
            "example.org; dkim=pass header.d x",
            "example.org; dkim=pass stray",
            "example.org; dkim=pass )",
            "example.org; dkim=pass header.d=\"x\"y",
            "example.org; dkim/=pass",
            "exa@mple.org; dkim=pass",
            "example.org; none; none",
        ] {
            assert_eq!(parse(v.as_bytes()), None, "{v:?}");
        }
    }

    /// Inputs that cost a quadratic or recursive parser dearly finish, with the right
    /// answer; a recursive comment reader would overflow its stack on the deep one.
    #[test]
    fn hostile_input_finishes() {
        let n = 200_000;
        let open = "(".repeat(n);
        assert_eq!(parse(open.as_bytes()), None);
        assert_eq!(parse(format!("mx; dkim=pass {open}").as_bytes()), None);
        let deep = format!("{open}{} mx; none", ")".repeat(n));
        assert_eq!(ar(&deep).authserv_id, "mx");
        assert_eq!(parse(format!("mx{}", ";".repeat(n)).as_bytes()), None);
        assert_eq!(
            parse(format!("mx; dkim=pass{}", ";".repeat(n)).as_bytes()),
            None
        );
        let escapes = format!("mx; dkim=pass ({}", "\\(".repeat(n));
        assert_eq!(parse(escapes.as_bytes()), None);
        let quote = format!("mx; dkim=pass reason=\"{}", "\\\"".repeat(n));
        assert_eq!(parse(quote.as_bytes()), None);
        let many = format!("mx{}", "; dkim=pass header.d=a".repeat(10_000));
        let a = ar(&many);
        assert_eq!(a.results.len(), 10_000);
        assert!(a.results.iter().all(|r| r.prop("header", "d") == Some("a")));
        let props = format!("mx; dkim=pass{}", " header.b=x".repeat(20_000));
        assert_eq!(ar(&props).results[0].props.len(), 20_000);
    }

    #[test]
    fn arbitrary_octets_never_panic() {
        // Every prefix of a real field, and every octet in every position of a short one.
        let real = b"mx.example.org; dkim=pass (c\\) (d)) header.b=\"Ab\\\"\" reason=x; spf=none";
        for k in 0..=real.len() {
            let _ = parse(&real[..k]);
        }
        let mut v = b"m; d=p h.d=\"x\" (c)".to_vec();
        for k in 0..v.len() {
            let keep = v[k];
            for b in 0..=255u8 {
                v[k] = b;
                let _ = parse(&v);
            }
            v[k] = keep;
        }
    }
}
