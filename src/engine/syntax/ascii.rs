//! Case-insensitive comparison with a lower-case name, eight octets at a time, and
//! equality of short values without a call to `memcmp`.
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

/// The eight octets of `s` from `at`, as a little-endian word (0 past the end: callers
/// only load whole words).
#[inline(always)]
fn load(s: &[u8], at: usize) -> u64 {
    s.get(at..at + LANES)
        .and_then(|w| w.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// Whether `s` and `lower`, of one length of eight octets or more, are equal word by
/// word once `fold` has been applied to each word of `s`. The last eight octets first
/// (overlapping the others when the length is not a multiple): the names compared
/// mostly share their start (`content-type`, `content-base`).
#[inline(always)]
fn words_eq(s: &[u8], lower: &[u8], fold: impl Fn(u64) -> u64) -> bool {
    let n = s.len();
    if fold(load(s, n - LANES)) != load(lower, n - LANES) {
        return false;
    }
    let mut at = 0;
    while at + LANES < n {
        if fold(load(s, at)) != load(lower, at) {
            return false;
        }
        at += LANES;
    }
    true
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
    words_eq(s, lower, lower8)
}

/// [`eq_lower`] for a header field name as the structure scan reads it (ftext only:
/// printable ASCII but the colon) against `lower` (small letters, digits and `-`).
/// Setting bit 0x20 makes a capital small and leaves small letters, digits and `-`
/// alone; of the other octets it could turn into one of those only controls and
/// space do, and ftext has none: so one OR per eight octets does here what `lower8`
/// needs a dozen operations for. The scan compares the name of every field of every
/// part.
#[inline]
pub fn field_name_is(name: &[u8], lower: &[u8]) -> bool {
    const CASE: u64 = u64::from_ne_bytes([0x20; LANES]);
    let n = name.len();
    if n != lower.len() {
        return false;
    }
    if n < LANES {
        return name.iter().zip(lower).all(|(&a, &b)| a | 0x20 == b);
    }
    words_eq(name, lower, |x| x | CASE)
}

/// `a == b`, without a call to `memcmp` for short values: under 8 octets octet by
/// octet, 8 to 16 (most Content-Type values of a part, ` text/plain`, and most
/// Content-ID right sides) as their first and last eight octets. Both run once a part
/// of a many-part message, where the call cost more than the comparison.
#[inline]
pub fn same_octets(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    match n {
        0..LANES => a.iter().zip(b).all(|(x, y)| x == y),
        LANES..=16 => load(a, 0) == load(b, 0) && load(a, n - LANES) == load(b, n - LANES),
        _ => a == b,
    }
}

/// A message value as findings quote it: lossy UTF-8, folding whitespace collapsed to one SP, other
/// controls escaped, cut at 80 characters. Findings reach logs and
/// report headers, so no control character ever gets through.
pub fn excerpt(v: &[u8]) -> String {
    // Most quoted values (a URL, a Content-ID) are short printable ASCII without a
    // space: the loop below would give them back as they are, a character at a time.
    if v.len() <= 80 && v.iter().all(|b| (0x21..0x7f).contains(b)) {
        return String::from_utf8_lossy(v).into_owned();
    }
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
    fn excerpts_of_short_printable_values_are_the_values() {
        let url = "cid:pic@example.org";
        assert_eq!(excerpt(url.as_bytes()), url);
        let eighty = "x".repeat(80);
        assert_eq!(excerpt(eighty.as_bytes()), eighty);
        // Past 80, with white space, a control or 8-bit: the character loop.
        assert_eq!(excerpt("x".repeat(81).as_bytes()), format!("{eighty}…"));
        assert_eq!(excerpt(b"a \t\r\n b"), "a b");
        assert_eq!(excerpt(b"a\x01b"), "a\\u{1}b");
        assert_eq!(excerpt("é".as_bytes()), "é");
    }

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

    /// The comparison of short values against `==`, a difference at each place, at
    /// every length across the three ways.
    #[test]
    fn same_octets_is_equality() {
        for n in 0..24 {
            let a: Vec<u8> = (0..n as u8).map(|k| b'a' + k).collect();
            assert!(same_octets(&a, &a.clone()));
            for k in 0..n {
                let mut b = a.clone();
                b[k] ^= 0x20;
                assert!(!same_octets(&a, &b), "{n} {k}");
            }
            assert!(!same_octets(&a, &a[..n.saturating_sub(1)]) || n == 0);
        }
    }

    use proptest::prelude::*;

    proptest! {
        /// Pairs of every length up to 40 that differ in one octet, anywhere, or not at all.
        #[test]
        fn same_octets_is_slice_equality(
            a in proptest::collection::vec(any::<u8>(), 0..40),
            change in proptest::option::of((any::<usize>(), any::<u8>())),
            other_len in proptest::option::of(0usize..40),
        ) {
            let mut b = a.clone();
            if let Some((at, v)) = change.filter(|_| !b.is_empty()) {
                let at = at % b.len();
                b[at] = v;
            }
            if let Some(n) = other_len {
                b.resize(n, b'x');
            }
            prop_assert_eq!(same_octets(&a, &b), a == b);
        }
    }
}
