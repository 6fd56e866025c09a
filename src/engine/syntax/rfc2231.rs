//! RFC 2231 parameter values as text, both ways: an extended value (`name*=`,
//! `name*0*=`, `name*1=`…) read into text (its continuations put in order, its
//! charset converted to UTF-8), and a text written as one (`utf-8''` and %-encoding,
//! in sections where one line would not hold it).
//!
//! Reading is strict where a repair would otherwise write a name the sender did not
//! give: a section missing or given twice, an unknown charset, octets the charset
//! does not allow or a control character all make the value [`Unreadable`], never a
//! guess. Out-of-order sections are not a defect (a parameter's place in the list
//! means nothing, RFC 2045 §5.1) and are read in order. Everything is linear in the
//! length of the value but for one sort of the sections.

use crate::engine::syntax::encoded_words::starts_new_line;
use crate::engine::syntax::fold::SOFT_LINE;
use crate::engine::syntax::params::{percent_decode, split_charset, ContentType, Param};

/// Why an RFC 2231 value gives no text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreadable {
    /// The sections do not make one value: one is missing or given twice, or the
    /// unsectioned form is given beside sections (what it says is the reason).
    Sections(String),
    /// A charset no decoder here knows.
    Charset(String),
    /// Octets the declared charset does not allow.
    Malformed(String),
    /// 8-bit octets with no charset, and not UTF-8.
    NoCharset,
    /// The text holds a control character.
    Control,
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unreadable::Sections(why) => f.write_str(why),
            Unreadable::Charset(c) => write!(
                f,
                "its charset \"{}\" is unknown",
                crate::engine::syntax::ascii::clip(c)
            ),
            Unreadable::Malformed(c) => write!(
                f,
                "its octets are not valid {}",
                crate::engine::syntax::ascii::clip(c)
            ),
            Unreadable::NoCharset => f.write_str("it has 8-bit octets and no charset"),
            Unreadable::Control => f.write_str("it holds a control character"),
        }
    }
}

/// The RFC 2231 value of parameter `attr` (lower case) of `params` as text, or why it
/// has none; `None` when `attr` has no RFC 2231 piece at all.
pub fn decode(params: &ContentType, attr: &str) -> Option<Result<String, Unreadable>> {
    let mut single: Option<&Param> = None;
    let mut singles = 0usize;
    let mut sections: Vec<(u32, &Param)> = Vec::new();
    for p in params.pieces(attr) {
        match p.section {
            None => {
                singles += 1;
                single = Some(p);
            }
            Some(n) => sections.push((n, p)),
        }
    }
    Some(match (single, singles, sections.is_empty()) {
        (None, _, true) => return None,
        (Some(p), 1, true) => {
            let (charset, _, raw) = split_charset(&p.value);
            to_text(percent_decode(raw), charset.as_deref())
        }
        (_, n, true) => Err(Unreadable::Sections(format!("{attr}* is given {n} times"))),
        (None, _, false) => sectioned(attr, sections),
        (Some(_), _, false) => Err(Unreadable::Sections(format!(
            "{attr}* and {attr}*0, {attr}*1… are both given"
        ))),
    })
}

/// Sections `attr*0`, `attr*1`… in any order, each %-decoded when `*`-marked, the
/// charset taken from section 0.
fn sectioned(attr: &str, mut sections: Vec<(u32, &Param)>) -> Result<String, Unreadable> {
    // Stable, and linear when the sections come in order (nearly always).
    sections.sort_by_key(|&(n, _)| n);
    let mut bytes = Vec::new();
    let mut charset = None;
    for (want, &(n, p)) in (0u32..).zip(&sections) {
        if n < want {
            return Err(Unreadable::Sections(format!(
                "section {attr}*{n} is given twice"
            )));
        }
        if n > want {
            return Err(Unreadable::Sections(format!(
                "section {attr}*{want} is missing"
            )));
        }
        let mut raw: &[u8] = &p.value;
        if n == 0 && p.extended {
            let (c, _, rest) = split_charset(raw);
            charset = c;
            raw = rest;
        }
        if p.extended {
            bytes.extend_from_slice(&percent_decode(raw));
        } else {
            bytes.extend_from_slice(raw);
        }
    }
    to_text(bytes, charset.as_deref())
}

/// `bytes` in `charset` as text: no replacement character is ever made up.
fn to_text(bytes: Vec<u8>, charset: Option<&str>) -> Result<String, Unreadable> {
    let text = match charset.map(str::trim).filter(|c| !c.is_empty()) {
        // ASCII octets read alike in every charset mail uses: an unknown label over
        // them hides nothing.
        _ if bytes.is_ascii() => String::from_utf8(bytes).map_err(|_| Unreadable::NoCharset)?,
        None => String::from_utf8(bytes).map_err(|_| Unreadable::NoCharset)?,
        Some(c) => {
            let enc = encoding_rs::Encoding::for_label(c.as_bytes())
                .ok_or_else(|| Unreadable::Charset(c.to_string()))?;
            enc.decode_without_bom_handling_and_without_replacement(&bytes)
                .ok_or_else(|| Unreadable::Malformed(c.to_string()))?
                .into_owned()
        }
    };
    if text.chars().any(char::is_control) {
        return Err(Unreadable::Control);
    }
    Ok(text)
}

/// RFC 2231 §7 attribute-char: what an extended value may hold without %-encoding.
fn plain_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b)
}

/// The %-encoded octets of each character of `text` (RFC 2231 §4, upper-case hex).
fn encoded_chars(text: &str) -> impl Iterator<Item = Vec<u8>> + '_ {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    text.chars().map(|c| {
        let mut buf = [0u8; 4];
        let mut out = Vec::with_capacity(12);
        for &b in c.encode_utf8(&mut buf).as_bytes() {
            if plain_char(b) {
                out.push(b);
            } else {
                out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
            }
        }
        out
    })
}

/// `text` written as the RFC 2231 parameter `attr*=utf-8''…`, or, when its line would
/// pass 78 octets, as sections `attr*0*=utf-8''…;` `attr*1*=…` one a line (RFC 2231
/// §3, §4.1), a character's octets never split between two sections (readers that
/// decode each section alone then still read whole characters).
///
/// `line_len` is the number of octets already on the line, the `;` the parameter
/// follows included. The result begins with the whitespace that goes before the
/// parameter: SP, or `eol` and SP when the first line would pass 78 octets.
pub fn write_extended(attr: &str, text: &str, line_len: usize, eol: &[u8]) -> Vec<u8> {
    let chars: Vec<Vec<u8>> = encoded_chars(text).collect();
    let total: usize = chars.iter().map(Vec::len).sum();
    // ` attr*=utf-8''…`, and the `;` that may follow it on its line.
    let single = 1 + attr.len() + 2 + 7 + total + 1;
    let mut out = Vec::with_capacity(total + 16);
    if single <= SOFT_LINE {
        if starts_new_line(line_len, single) {
            out.extend_from_slice(eol);
        }
        out.push(b' ');
        out.extend_from_slice(attr.as_bytes());
        out.extend_from_slice(b"*=utf-8''");
        chars.iter().for_each(|c| out.extend_from_slice(c));
        return out;
    }
    let mut section = 0usize;
    let mut at = 0usize;
    loop {
        let head = format!("{attr}*{section}*=");
        let lead = if section == 0 { "utf-8''".len() } else { 0 };
        // SP, head, charset, and the `;` that ends every section but the last.
        let room = SOFT_LINE.saturating_sub(1 + head.len() + lead + 1);
        if section > 0 || line_len > 1 {
            out.extend_from_slice(eol);
        }
        out.push(b' ');
        out.extend_from_slice(head.as_bytes());
        if section == 0 {
            out.extend_from_slice(b"utf-8''");
        }
        let mut used = 0;
        // At least one character a section, whatever the room: never an empty one.
        while let Some(c) = chars.get(at) {
            if used > 0 && used + c.len() > room {
                break;
            }
            out.extend_from_slice(c);
            used += c.len();
            at += 1;
        }
        if at >= chars.len() {
            return out;
        }
        out.push(b';');
        section += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::syntax::fold::line_lengths;

    fn read(v: &str) -> Option<Result<String, Unreadable>> {
        decode(&ContentType::parse(v.as_bytes()), "filename")
    }

    fn text(v: &str) -> String {
        read(v).unwrap().unwrap()
    }

    #[test]
    fn single_values_in_their_charsets() {
        // Python's email and nodemailer: UTF-8.
        assert_eq!(
            text("a/b; filename*=utf-8''%C3%9Cberweisung.pdf"),
            "Überweisung.pdf"
        );
        // ISO-8859-1, Windows-1252 (€ is 0x80 there), ISO-8859-2, a language.
        assert_eq!(
            text("a/b; filename*=iso-8859-1'de'%DCbersicht.txt"),
            "Übersicht.txt"
        );
        assert_eq!(
            text("a/b; filename*=windows-1252''%80%20Rechnung.pdf"),
            "€ Rechnung.pdf"
        );
        assert_eq!(
            text("a/b; filename*=ISO-8859-2''%A3%F3d%BC.txt"),
            "Łódź.txt"
        );
        assert_eq!(
            text("a/b; filename*=windows-1251''%CF%F0%E8.doc"),
            "При.doc"
        );
        // No charset: ASCII or UTF-8 only.
        assert_eq!(text("a/b; filename*=''a%20b"), "a b");
        assert_eq!(text("a/b; filename*=''%C3%A9"), "é");
        assert_eq!(
            read("a/b; filename*=''%E9"),
            Some(Err(Unreadable::NoCharset))
        );
        assert_eq!(read("a/b; name=x"), None);
    }

    #[test]
    fn unreadable_values_say_why_and_never_guess() {
        assert_eq!(
            read("a/b; filename*=x-klingon''%E9"),
            Some(Err(Unreadable::Charset("x-klingon".into())))
        );
        // An unknown label over ASCII octets hides nothing.
        assert_eq!(text("a/b; filename*=x-klingon''report.pdf"), "report.pdf");
        assert_eq!(
            read("a/b; filename*=utf-8''%C3"),
            Some(Err(Unreadable::Malformed("utf-8".into())))
        );
        assert_eq!(
            read("a/b; filename*=utf-8''a%0Ab"),
            Some(Err(Unreadable::Control))
        );
        let two = read("a/b; filename*=utf-8''a; filename*=utf-8''b").unwrap();
        assert!(matches!(two, Err(Unreadable::Sections(w)) if w.contains("2 times")));
        let both = read("a/b; filename*=utf-8''a; filename*0=b").unwrap();
        assert!(matches!(both, Err(Unreadable::Sections(_))));
    }

    #[test]
    fn sections_in_any_order_mixed_forms() {
        // Apple Mail: ISO-8859-1 in `*0*` and `*1*` sections.
        assert_eq!(
            text("a/b; filename*0*=ISO-8859-1''Pr%E4sentation%20f; filename*1*=%FCr%20M%E4rz.key"),
            "Präsentation für März.key"
        );
        // Out of order, encoded and plain sections mixed (RFC 2231 §4.1).
        assert_eq!(
            text(
                "a/b; filename*2=\" end\"; filename*0*=utf-8''%C3%A9t%C3%A9; filename*1=\"-x%41\""
            ),
            "été-x%41 end"
        );
        // A gap or a section twice: no value.
        let gap = read("a/b; filename*0=a; filename*2=c").unwrap();
        assert_eq!(
            gap,
            Err(Unreadable::Sections("section filename*1 is missing".into()))
        );
        let dup = read("a/b; filename*0=a; filename*1=b; filename*1=c").unwrap();
        assert_eq!(
            dup,
            Err(Unreadable::Sections(
                "section filename*1 is given twice".into()
            ))
        );
        let late = read("a/b; filename*1=b").unwrap();
        assert!(matches!(late, Err(Unreadable::Sections(_))));
    }

    #[test]
    fn ten_thousand_sections_reversed() {
        let mut v = String::from("a/b");
        for n in (0..10_000).rev() {
            if n == 0 {
                v.push_str("; filename*0*=utf-8''%C3%A9");
            } else {
                v.push_str(&format!("; filename*{n}*=%C3%A9"));
            }
        }
        assert_eq!(text(&v), "é".repeat(10_000));
    }

    /// The parameter written after `a/b;` read back, and its line lengths.
    fn round_trip(name: &str, line_len: usize) -> (String, Vec<usize>) {
        let w = write_extended("filename", name, line_len, b"\r\n");
        let mut value = b"a/b;".to_vec();
        value.extend_from_slice(&w);
        let got = read(std::str::from_utf8(&value).unwrap()).unwrap().unwrap();
        (got, line_lengths(line_len - 4, &value).collect())
    }

    #[test]
    fn written_values_read_back_within_the_line_limit() {
        let (got, lines) = round_trip("Überweisung März.pdf", 10);
        assert_eq!(got, "Überweisung März.pdf");
        assert_eq!(lines.len(), 1);
        assert_eq!(
            write_extended("name", "a b", 5, b"\n"),
            b" name*=utf-8''a%20b"
        );
        // Too long for the line it follows: a line of its own.
        assert_eq!(
            write_extended("name", "x.pdf", 70, b"\n"),
            b"\n name*=utf-8''x.pdf"
        );
        for name in [
            "Ж".repeat(200),
            "日本語のファイル名".repeat(9),
            "a".repeat(500),
            "😀".repeat(40),
        ] {
            let (got, lines) = round_trip(&name, 40);
            assert_eq!(got, name);
            assert!(lines.len() > 1);
            assert!(lines.iter().all(|&l| l <= SOFT_LINE), "{lines:?}");
        }
    }

    #[test]
    fn sections_hold_whole_characters() {
        let name = "€".repeat(100);
        let w = write_extended("filename", &name, 20, b"\n");
        let ct = ContentType::parse(&[b"a/b;".as_slice(), &w].concat());
        for p in ct.pieces("filename") {
            let (_, _, raw) = split_charset(&p.value);
            let raw = if p.section == Some(0) {
                raw
            } else {
                &p.value[..]
            };
            assert!(std::str::from_utf8(&percent_decode(raw)).is_ok());
        }
    }
}
