//! Decoders the checks need: transfer encodings (to read HTML and encoded encapsulated
//! messages), charsets (to read HTML) and RFC 2047 encoded-words (Content-Location).
//!
//! All are lenient in the way mail readers are: garbage is skipped, never an error, since
//! a finding about a reference must not depend on a perfect encoding elsewhere.

use crate::engine::syntax::ascii::hex_value;

/// Transfer encodings that matter to the checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    SevenBit,
    EightBit,
    Binary,
    Base64,
    QuotedPrintable,
    Other,
}

/// The transfer encoding a Content-Transfer-Encoding value names (RFC 2045 §6.1).
pub(crate) fn parse_encoding(v: &[u8]) -> Encoding {
    let start = v
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(v.len());
    let t = &v[start..];
    let t = &t[..t
        .iter()
        .position(|&b| b == b'(' || b.is_ascii_whitespace())
        .unwrap_or(t.len())];
    let is = |name: &[u8]| t.eq_ignore_ascii_case(name);
    if t.is_empty() || is(b"7bit") {
        Encoding::SevenBit
    } else if is(b"8bit") {
        Encoding::EightBit
    } else if is(b"binary") {
        Encoding::Binary
    } else if is(b"base64") {
        Encoding::Base64
    } else if is(b"quoted-printable") {
        Encoding::QuotedPrintable
    } else {
        Encoding::Other
    }
}

/// Decodes a body in `enc`; identity for 7bit/8bit/binary/unknown.
pub fn transfer_decode(body: &[u8], enc: Encoding) -> Vec<u8> {
    match enc {
        Encoding::Base64 => base64(body),
        Encoding::QuotedPrintable => quoted_printable(body),
        _ => body.to_vec(),
    }
}

/// The start of `body` decoded from `enc` into `out`, as much as fits; returns how many
/// octets were written. Only as much of the body is decoded as that takes, and nothing
/// is allocated for base64 or an identity encoding: a file signature is read this way
/// from every image an HTML part shows, whatever its size.
pub fn transfer_decode_head(body: &[u8], enc: Encoding, out: &mut [u8]) -> usize {
    match enc {
        Encoding::Base64 => base64_head(body, out),
        Encoding::QuotedPrintable => {
            // At least one octet for every three, and room for soft line breaks.
            let take = body
                .len()
                .min(out.len().saturating_mul(3).saturating_add(160));
            let mut decoded = quoted_printable(&body[..take]);
            if take < body.len() {
                // A `=HH` escape the cut split decodes to up to two octets the whole
                // body would not have there.
                decoded.truncate(decoded.len().saturating_sub(2));
            }
            let n = decoded.len().min(out.len());
            out[..n].copy_from_slice(&decoded[..n]);
            n
        }
        _ => {
            let n = body.len().min(out.len());
            out[..n].copy_from_slice(&body[..n]);
            n
        }
    }
}

/// The values of the base64 alphabet (also URL-safe), 64 for every other octet: read
/// once per octet of a signature's few dozen.
static B64: [u8; 256] = {
    let mut t = [64u8; 256];
    let mut i = 0;
    while i < 256 {
        if let Some(v) = b64_value(i as u8) {
            t[i] = v as u8;
        }
        i += 1;
    }
    t
};

/// [`base64`] of the start of `s` into `out`, stopping once it is full.
fn base64_head(s: &[u8], out: &mut [u8]) -> usize {
    let (mut acc, mut n, mut at) = (0u32, 0, 0);
    let len = out.len();
    let mut put = |b: u8, at: &mut usize| {
        if let Some(o) = out.get_mut(*at) {
            *o = b;
            *at += 1;
        }
    };
    for &c in s {
        if at >= len {
            break;
        }
        if c == b'=' {
            if n >= 2 {
                break;
            }
            continue;
        }
        let v = B64[usize::from(c)];
        if v == 64 {
            continue;
        }
        acc = acc << 6 | u32::from(v);
        n += 1;
        if n == 4 {
            put((acc >> 16) as u8, &mut at);
            put((acc >> 8) as u8, &mut at);
            put(acc as u8, &mut at);
            acc = 0;
            n = 0;
        }
    }
    match n {
        2 => put((acc >> 4) as u8, &mut at),
        3 => {
            put((acc >> 10) as u8, &mut at);
            put((acc >> 2) as u8, &mut at);
        }
        _ => {}
    }
    at
}

const fn b64_value(c: u8) -> Option<u32> {
    Some(match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' | b'-' => 62,
        b'/' | b'_' => 63,
        _ => return None,
    } as u32)
}

/// Base64 (also the URL-safe alphabet), skipping every octet outside the alphabet and
/// stopping at the first `=`-padded end.
pub fn base64(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    let (mut acc, mut n) = (0u32, 0);
    for &c in s {
        if c == b'=' {
            if n >= 2 {
                break;
            }
            continue;
        }
        let Some(v) = b64_value(c) else { continue };
        acc = acc << 6 | v;
        n += 1;
        if n == 4 {
            out.extend_from_slice(&[(acc >> 16) as u8, (acc >> 8) as u8, acc as u8]);
            acc = 0;
            n = 0;
        }
    }
    match n {
        2 => out.push((acc >> 4) as u8),
        3 => out.extend_from_slice(&[(acc >> 10) as u8, (acc >> 2) as u8]),
        _ => {}
    }
    out
}

/// Quoted-printable body (RFC 2045 §6.7): soft line breaks removed, `=HH` decoded, a bad
/// escape kept as written.
pub fn quoted_printable(s: &[u8]) -> Vec<u8> {
    qp(s, false)
}

fn qp(s: &[u8], underscore_space: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        // The octets up to the next `=` (or `_`) are literal: copied as one run, not
        // octet by octet (most of an HTML part's octets).
        let next = if underscore_space {
            memchr::memchr2(b'=', b'_', &s[i..])
        } else {
            memchr::memchr(b'=', &s[i..])
        };
        let Some(run) = next else {
            out.extend_from_slice(&s[i..]);
            break;
        };
        out.extend_from_slice(&s[i..i + run]);
        i += run;
        let c = s[i];
        if c == b'=' {
            // soft break: "=" [WSP...] CRLF / LF
            let mut j = i + 1;
            while j < s.len() && matches!(s[j], b' ' | b'\t') {
                j += 1;
            }
            if j < s.len() && s[j] == b'\n' {
                i = j + 1;
                continue;
            }
            if j + 1 < s.len() && s[j] == b'\r' && s[j + 1] == b'\n' {
                i = j + 2;
                continue;
            }
            if i + 2 < s.len() {
                if let (Some(h), Some(l)) = (hex_value(s[i + 1]), hex_value(s[i + 2])) {
                    out.push(h << 4 | l);
                    i += 3;
                    continue;
                }
            }
            out.push(c);
        } else if underscore_space && c == b'_' {
            out.push(b' ');
        } else {
            out.push(c);
        }
        i += 1;
    }
    out
}

/// Decodes `bytes` from `charset` (a MIME charset name) into UTF-8. Unknown or missing
/// charsets are read as UTF-8 with replacement characters; malformed input never fails.
pub fn charset_decode(bytes: &[u8], charset: Option<&str>) -> String {
    let enc = charset
        .and_then(|c| encoding_rs::Encoding::for_label(c.trim().as_bytes()))
        .unwrap_or(encoding_rs::UTF_8);
    let (text, _, _) = enc.decode(bytes);
    text.into_owned()
}

/// [`charset_decode`] of a buffer the caller gives away, as the UTF-8 octets of the
/// text: text that is already UTF-8 as it stands (the common case) is returned as it is,
/// without a copy and without being validated a second time (encoding_rs has just done
/// so: turning it into a `String` would walk it again).
pub fn charset_decode_to_utf8(bytes: Vec<u8>, charset: Option<&str>) -> Vec<u8> {
    let enc = charset
        .and_then(|c| encoding_rs::Encoding::for_label(c.trim().as_bytes()))
        .unwrap_or(encoding_rs::UTF_8);
    let (text, _, _) = enc.decode(&bytes);
    match text {
        // Borrowed and as long as the input: no BOM removed, nothing replaced.
        std::borrow::Cow::Borrowed(t) if t.len() == bytes.len() => bytes,
        t => t.into_owned().into_bytes(),
    }
}

/// Decodes RFC 2047 encoded-words in an unstructured value; whitespace between two
/// adjacent encoded-words is dropped (RFC 2047 §6.2). Text that only looks like an
/// encoded-word is kept as written.
pub fn rfc2047(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len());
    let mut i = 0;
    let mut pending_ws: Option<std::ops::Range<usize>> = None;
    let mut last_was_word = false;
    while i < value.len() {
        if value[i..].starts_with(b"=?") {
            if let Some((decoded, len)) = encoded_word(&value[i..]) {
                if let Some(ws) = pending_ws.take() {
                    if !last_was_word {
                        out.extend_from_slice(&value[ws]);
                    }
                }
                out.extend_from_slice(decoded.as_bytes());
                i += len;
                last_was_word = true;
                continue;
            }
        }
        if matches!(value[i], b' ' | b'\t' | b'\r' | b'\n') {
            let start = i;
            while i < value.len() && matches!(value[i], b' ' | b'\t' | b'\r' | b'\n') {
                i += 1;
            }
            pending_ws = Some(start..i);
            continue;
        }
        if let Some(ws) = pending_ws.take() {
            out.extend_from_slice(&value[ws]);
        }
        out.push(value[i]);
        last_was_word = false;
        i += 1;
    }
    if let Some(ws) = pending_ws {
        out.extend_from_slice(&value[ws]);
    }
    out
}

/// `=?charset?B|Q?text?=` at the start of `s`: (decoded text, octets consumed).
fn encoded_word(s: &[u8]) -> Option<(String, usize)> {
    let body = &s[2..];
    let q1 = body.iter().position(|&b| b == b'?')?;
    let charset = std::str::from_utf8(&body[..q1]).ok()?;
    // RFC 2231 §5 language suffix: charset*lang
    let charset = charset.split('*').next().unwrap_or(charset);
    let rest = &body[q1 + 1..];
    if rest.len() < 2 || rest[1] != b'?' {
        return None;
    }
    let enc = rest[0].to_ascii_lowercase();
    let text_and_end = &rest[2..];
    let end = memchr::memmem::find(text_and_end, b"?=")?;
    let text = &text_and_end[..end];
    if text
        .iter()
        .any(|&b| b == b' ' || b == b'\t' || b == b'\r' || b == b'\n')
    {
        return None;
    }
    let bytes = match enc {
        b'b' => base64(text),
        b'q' => qp(text, true),
        _ => return None,
    };
    let consumed = 2 + q1 + 1 + 2 + end + 2;
    Some((charset_decode(&bytes, Some(charset)), consumed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_lenient() {
        assert_eq!(base64(b"aGVs\r\nbG8=\r\n"), b"hello");
        assert_eq!(base64(b"aGVsbG8"), b"hello");
        assert_eq!(base64(b"!!!"), b"");
    }

    /// The head of a body is the start of the whole body decoded, however the cut falls.
    #[test]
    fn heads_are_prefixes_of_the_whole() {
        let data: Vec<u8> = (0..3000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut b64 = String::new();
        {
            use base64::Engine as _;
            let text = base64::engine::general_purpose::STANDARD.encode(&data);
            for line in text.as_bytes().chunks(76) {
                b64.push_str(std::str::from_utf8(line).unwrap());
                b64.push_str("\r\n");
            }
        }
        let mut qp = String::new();
        for (i, b) in data.iter().enumerate() {
            qp.push_str(&format!("={b:02X}"));
            if i % 25 == 24 {
                qp.push_str("=\r\n");
            }
        }
        for (body, enc) in [
            (b64.as_bytes(), Encoding::Base64),
            (qp.as_bytes(), Encoding::QuotedPrintable),
            (&data[..], Encoding::Binary),
        ] {
            for limit in [0, 1, 3, 16, 512, 5000] {
                let mut out = vec![0; limit];
                let n = transfer_decode_head(body, enc, &mut out);
                assert_eq!(&out[..n], &data[..limit.min(data.len())], "{enc:?} {limit}");
            }
        }
        // Garbage decodes to little, never panics.
        let mut out = [0; 512];
        assert_eq!(
            transfer_decode_head(&[b'!'; 100_000], Encoding::Base64, &mut out),
            0
        );
        let n = transfer_decode_head(b"iVB", Encoding::Base64, &mut out);
        assert_eq!(&out[..n], b"\x89P");
    }

    #[test]
    fn qp_soft_breaks_and_bad_escapes() {
        assert_eq!(quoted_printable(b"a=3Db=\r\nc=\nd=zz="), b"a=bcd=zz=");
    }

    #[test]
    fn encoded_words() {
        assert_eq!(
            rfc2047(b"=?utf-8?q?caf=C3=A9?= =?us-ascii?b?eA==?= y"),
            "caféx y".as_bytes()
        );
        assert_eq!(rfc2047(b"a =?bogus"), b"a =?bogus");
        assert_eq!(rfc2047(b" http://x/"), b" http://x/");
    }

    #[test]
    fn charsets_of_a_buffer_given_away_decode_alike() {
        let cases: &[(&[u8], Option<&str>)] = &[
            (b"plain ascii", None),
            (b"caf\xc3\xa9", Some("utf-8")),
            (b"\xef\xbb\xbfwith a BOM", Some("utf-8")),
            (b"\xef\xbb\xbfwith a BOM", Some("iso-8859-1")),
            (b"caf\xe9", Some("iso-8859-1")),
            (b"caf\xe9", Some("x-unknown")),
            (b"caf\xe9", None),
            (b"\xff\xfeu\0t\0f\0", None),
        ];
        for &(b, cs) in cases {
            assert_eq!(
                charset_decode_to_utf8(b.to_vec(), cs),
                charset_decode(b, cs).into_bytes(),
                "{b:?} {cs:?}"
            );
        }
    }

    #[test]
    fn charsets() {
        assert_eq!(charset_decode(b"caf\xe9", Some("iso-8859-1")), "café");
        assert_eq!(charset_decode(b"caf\xe9", Some("x-unknown")), "caf\u{fffd}");
    }
}
