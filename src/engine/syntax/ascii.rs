//! Case-insensitive comparison with a lower-case name, eight octets at a time.
//!
//! Field and parameter names are compared for every field of every part; the standard
//! `eq_ignore_ascii_case` goes octet by octet, which a 10 000-part message paid for
//! several times per part.

const LANES: usize = 8;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The eight octets of `x` with `A`–`Z` lowered; every other octet, 8-bit ones included,
/// as it was.
fn lower8(x: u64) -> u64 {
    let low7 = x & !HIGH;
    // Per octet (no carry can cross into the next one: low7 ≤ 0x7f, the sums ≤ 0xbe):
    // bit 7 set when the octet is ≥ 'A', resp. > 'Z'.
    let ge_a = low7 + 0x3f3f_3f3f_3f3f_3f3f;
    let gt_z = low7 + 0x2525_2525_2525_2525;
    let upper = (ge_a & !gt_z) & !x & HIGH;
    x | (upper >> 2)
}

fn load(s: &[u8], at: usize) -> u64 {
    let mut b = [0u8; LANES];
    b.copy_from_slice(&s[at..at + LANES]);
    u64::from_le_bytes(b)
}

/// `s` equals `lower` (which must be lower case) ignoring ASCII case.
#[inline]
pub fn eq_lower(s: &[u8], lower: &[u8]) -> bool {
    debug_assert!(!lower.iter().any(u8::is_ascii_uppercase), "{lower:?}");
    let n = s.len();
    if n != lower.len() {
        return false;
    }
    if n < LANES {
        // Two overlapping 4-octet words measured no faster for short type names.
        return s
            .iter()
            .zip(lower)
            .all(|(&a, &b)| a.to_ascii_lowercase() == b);
    }
    // The last eight octets first (overlapping the others when n is not a multiple):
    // the names compared mostly share their start (`content-type`, `content-base`).
    if lower8(load(s, n - LANES)) != load(lower, n - LANES) {
        return false;
    }
    let mut at = 0;
    while at + LANES < n {
        if lower8(load(s, at)) != load(lower, at) {
            return false;
        }
        at += LANES;
    }
    true
}

/// A message value as findings quote it: lossy UTF-8, folding whitespace collapsed to one SP, other
/// controls escaped, cut at 80 characters. Findings reach logs and
/// report headers, so no control character ever gets through.
pub fn excerpt(v: &[u8]) -> String {
    let text = String::from_utf8_lossy(v);
    let mut out = String::new();
    let mut n = 0;
    let mut blank = false;
    for ch in text.chars() {
        if n == 80 {
            out.push('…');
            break;
        }
        if matches!(ch, ' ' | '\t' | '\r' | '\n') {
            blank = true;
            continue;
        }
        if blank && n > 0 {
            out.push(' ');
            n += 1;
        }
        blank = false;
        if ch.is_control() {
            out.extend(ch.escape_default());
        } else {
            out.push(ch);
        }
        n += 1;
    }
    out
}

/// [`excerpt`] of a text.
pub fn clip(s: &str) -> String {
    excerpt(s.as_bytes())
}

/// The value of a hexadecimal digit, either case.
pub fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowers_exactly_the_capital_letters() {
        for b in 0..=255u8 {
            let x = u64::from_le_bytes([b, b'A', b'z', b'@', b'[', 0x80 | b'A', b'Z', 0xff]);
            let want: Vec<u8> = x.to_le_bytes().iter().map(u8::to_ascii_lowercase).collect();
            assert_eq!(lower8(x).to_le_bytes().to_vec(), want, "octet {b:#x}");
        }
    }

    #[test]
    fn agrees_with_the_standard_comparison() {
        let names = [
            "content-type",
            "content-id",
            "content-transfer-encoding",
            "cc",
            "x",
            "",
            "content-location",
            "content-base",
            "text",
            "plain",
            "mixed",
            "related",
        ];
        let probes = [
            "Content-Type",
            "CONTENT-TYPE",
            "content-typE",
            "Content-Typf",
            "Content-Type ",
            // Equal last eight octets, a difference before them (and the reverse).
            "Dontent-Type",
            "Content_Base",
            "Content-Base",
            "CONTENT-BASE",
            "Content-Basf",
            "Xontent-Location",
            "Content-ID",
            "Content_ID",
            "Content-Transfer-Encoding",
            "Content-Transfer-Encodinh",
            "CC",
            "X",
            "",
            "Content\u{c4}Location",
            "content\rlocation",
            "TEXT",
            "Text",
            "texT",
            "tex",
            "Plain",
            "plaiN",
            "pLain",
            "plai\u{c5}",
            "MIXED",
            "Related",
            "relate\u{c4}",
            "Relate",
        ];
        for n in names {
            for p in probes {
                assert_eq!(
                    eq_lower(p.as_bytes(), n.as_bytes()),
                    p.as_bytes().eq_ignore_ascii_case(n.as_bytes()),
                    "{p:?} vs {n:?}"
                );
            }
        }
    }
}
