//! RFC 2017 §3.1 URL encoding and folding, and the header folds built on it.
//!
//! Everything here is a pure function over bytes; nothing knows about messages.
//!
//! - [`pct_encode_unsafe`]: step (1) of RFC 2017 §3.1, %-encode SP, CTLs, `"`, `\` and
//!   8-bit octets.
//! - [`extract_url`]: the reverse direction, "the enclosing quotes and any linear
//!   whitespace are removed".
//! - [`url_words`]: step (2), cut a URL into ≤40-octet words without splitting `%HH`.
//! - [`fold_url`]: step (3), the `URL="w1<eol> w2<eol> w3"` parameter.
//! - [`fold_plain`]: the same cut without quotes (Content-Location, RFC 2557 §4.4.2).
//! - `fold_params_after`: a fold of a Content-Type value between its parameters, for lines
//!   over the RFC 5322 §2.1.1 limit of 998 octets.
//! - `unfold`: the reverse of any fold, line breaks removed (RFC 5322 §2.2.3).

use std::borrow::Cow;

/// RFC 2017 §3.1(2): a URL-word holds at most 40 octets.
pub const MAX_URL_WORD: usize = 40;
/// RFC 5322 §2.1.1: lines SHOULD be no longer than 78 octets (line ending excluded).
pub(crate) const SOFT_LINE: usize = 78;
/// RFC 5322 §2.1.1: lines MUST be no longer than 998 octets (line ending excluded).
pub(crate) const HARD_LINE: usize = 998;

/// Linear whitespace as RFC 2017 extraction removes it: SP, HTAB, CR, LF.
pub(crate) fn is_lwsp(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// The octets RFC 2017 §3.1(1) requires to be %-encoded inside a URL parameter: SP, CTLs
/// (0x00-0x1F, 0x7F), `"`, `\` and 8-bit octets. `%` is deliberately absent: a stray `%`
/// may be part of what the sender meant, and re-encoding it would change the URL.
pub(crate) fn must_encode(b: u8) -> bool {
    b <= 0x20 || b >= 0x7f || b == b'"' || b == b'\\'
}

/// %-encodes every octet `must_encode` names, with upper-case hex. Already-encoded
/// triplets and stray `%` pass through, so applying it twice changes nothing.
///
/// `http://example.com/a b/"q"\x/café?x=1&y=%zz` becomes
/// `http://example.com/a%20b/%22q%22%5Cx/caf%C3%A9?x=1&y=%zz`.
pub fn pct_encode_unsafe(url: &[u8]) -> Vec<u8> {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = Vec::with_capacity(url.len());
    for &b in url {
        if must_encode(b) {
            out.extend_from_slice(&[b'%', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
        } else {
            out.push(b);
        }
    }
    out
}

/// RFC 2017 §3.1 extraction: removes every LWSP octet from the content of a URL
/// parameter (the bytes between the quotes, or a reassembled RFC 2231 value). Plain
/// RFC 5322 unfolding is not enough: the spaces after each fold are not part of the URL.
pub fn extract_url(quoted_content: &[u8]) -> Vec<u8> {
    quoted_content
        .iter()
        .copied()
        .filter(|&b| !is_lwsp(b))
        .collect()
}

/// A `%HH` triplet starts at `i`.
fn triplet_at(url: &[u8], i: usize) -> bool {
    url.get(i) == Some(&b'%')
        && url.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
        && url.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
}

/// Cuts `url` into words of at most [`MAX_URL_WORD`] octets, greedily from the left,
/// moving a cut back when it would fall inside a `%HH` triplet (the decoder on the other
/// side may %-decode before removing whitespace). An empty URL gives no word.
pub fn url_words(url: &[u8]) -> Vec<&[u8]> {
    let mut words = Vec::with_capacity(url.len() / MAX_URL_WORD + 1);
    let mut start = 0;
    while start < url.len() {
        let mut end = (start + MAX_URL_WORD).min(url.len());
        if end < url.len() {
            // `%` is never a hex digit, so a `%` one or two octets before the cut that
            // starts a triplet really is one.
            for back in [1, 2] {
                let p = end - back;
                if p > start && triplet_at(url, p) {
                    end = p;
                    break;
                }
            }
        }
        words.push(&url[start..end]);
        start = end;
    }
    words
}

/// The RFC 2017 §3.1 URL parameter for `url` (already encoded, see
/// [`pct_encode_unsafe`]): `URL="w1<eol> w2<eol> w3"`, words from [`url_words`], each
/// later word on its own continuation line after one SP.
///
/// `first_line_prefix_len` is the number of octets already on the line where the
/// parameter starts (field name and colon included when that is the field's first line).
/// When `URL="` plus the first word would push that line past 78 octets, the result
/// starts with `<eol> ` so that the parameter begins a new line; the caller then drops
/// any whitespace it had between the `;` and the parameter.
///
/// Every line the result makes is at most 78 octets whenever the prefix allows it (a
/// continuation line holds at most 1 + 40 + 1 octets).
pub fn fold_url(url: &[u8], first_line_prefix_len: usize, eol: &[u8]) -> Vec<u8> {
    fold_url_param(b"URL", url, first_line_prefix_len, eol)
}

/// [`fold_url`] with the parameter name as the message wrote it (e.g. `url`), so that a
/// fix changes no more than it must.
pub fn fold_url_param(
    name: &[u8],
    url: &[u8],
    first_line_prefix_len: usize,
    eol: &[u8],
) -> Vec<u8> {
    let words = url_words(url);
    let first = words.first().map_or(0, |w| w.len());
    // name + `="` + first word, and the closing quote when the URL is a single word.
    let first_len = name.len() + 2 + first + usize::from(words.len() <= 1);
    let mut out = Vec::with_capacity(url.len() + words.len() * (eol.len() + 1) + 16);
    // A new line only helps when the prefix is longer than the one SP it would start with.
    if first_line_prefix_len > 1 && first_line_prefix_len + first_len > SOFT_LINE {
        out.extend_from_slice(eol);
        out.push(b' ');
    }
    out.extend_from_slice(name);
    out.extend_from_slice(b"=\"");
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(eol);
            out.push(b' ');
        }
        out.extend_from_slice(w);
    }
    out.push(b'"');
    out
}

/// The URL parameter as [`fold_url_param`] writes it when `fold_words`; otherwise as one
/// quoted word (`name="url"`, on a line of its own when the current one is already
/// long), which every reader tried returns unchanged, while the six mail libraries tried
/// and NeoMutt keep the folding whitespace of the RFC 2017 form inside the URL. The RFC 2017
/// fold is still used when the one-word line would pass 998 octets (RFC 5322 §2.1.1).
pub fn quote_url_param(
    name: &[u8],
    url: &[u8],
    first_line_prefix_len: usize,
    eol: &[u8],
    fold_words: bool,
) -> Vec<u8> {
    let word_len = name.len() + 3 + url.len();
    let new_line = first_line_prefix_len > 1 && first_line_prefix_len + word_len > SOFT_LINE;
    let line = if new_line { 1 } else { first_line_prefix_len } + word_len;
    // The `;` that may follow the closing quote on the same line counts too.
    if fold_words || line + 1 > HARD_LINE {
        return fold_url_param(name, url, first_line_prefix_len, eol);
    }
    let mut out = Vec::with_capacity(word_len + eol.len() + 1);
    if new_line {
        out.extend_from_slice(eol);
        out.push(b' ');
    }
    out.extend_from_slice(name);
    out.extend_from_slice(b"=\"");
    out.extend_from_slice(url);
    out.push(b'"');
    out
}

/// The RFC 2017 cut without quotes, for a field whose whole value is one URL (the
/// `location-line-too-long` fix of RFC 2557 §4.4.2): removes every LWSP octet of
/// `value`, then joins the ≤40-octet words of [`url_words`] with `<eol> HTAB`.
///
/// HTAB, not SP: both are folding whitespace (RFC 5322 §2.2.3), but Thunderbird keeps a
/// space at the fold inside the URL and then matches no part, and WebKit's MHTML reader
/// continues a field only on HTAB; Chromium drops either (docs/INTEROP.md).
///
/// The result carries no leading SP: the caller writes `Content-Location:` + SP + result.
/// The caller also strips comments first if the value may hold any (RFC 2557 §5 ignores
/// them; this function would keep their text as part of the URL).
pub fn fold_plain(value: &[u8], eol: &[u8]) -> Vec<u8> {
    let url = extract_url(value);
    let words = url_words(&url);
    let mut out = Vec::with_capacity(url.len() + words.len() * (eol.len() + 1));
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(eol);
            out.push(b'\t');
        }
        out.extend_from_slice(w);
    }
    out
}

/// Folds a field value (the bytes after the colon) between its parameters: a line break
/// goes after a `;` outside quoted-strings and comments, replacing the whitespace that
/// follows it, wherever the next parameter would push the line past 78 octets. Existing
/// folds and whitespace that need no change are kept byte for byte.
///
/// The first line holds `first_line_prefix_len` octets (field name and colon) before the
/// value. Returns `None` when some line would still be longer than 998 octets (one
/// parameter too long to fit: only its own kind of fold, such as [`fold_url`], can help).
pub(crate) fn fold_params_after(
    first_line_prefix_len: usize,
    value: &[u8],
    eol: &[u8],
) -> Option<Vec<u8>> {
    let items = split_top_level(value);
    let mut out = Vec::with_capacity(value.len() + items.len() * (eol.len() + 1));
    let mut line = first_line_prefix_len;
    for (n, item) in items.iter().enumerate() {
        let (sep, body) = if n == 0 {
            (&item[..0], *item)
        } else {
            let ws = item.iter().take_while(|&&b| is_lwsp(b)).count();
            item.split_at(ws)
        };
        let body_first = body
            .iter()
            .position(|&b| b == b'\n' || b == b'\r')
            .unwrap_or(body.len());
        if sep.iter().any(|&b| b == b'\n' || b == b'\r') {
            // The sender already folded here.
            out.extend_from_slice(sep);
            line = sep.len() - sep.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
        } else if n > 0 && line + sep.len() + body_first > SOFT_LINE && line > 1 {
            out.extend_from_slice(eol);
            out.push(b' ');
            line = 1;
        } else {
            out.extend_from_slice(sep);
            line += sep.len();
        }
        out.extend_from_slice(body);
        match body.iter().rposition(|&b| b == b'\n') {
            Some(p) => line = body.len() - p - 1,
            None => line += body.len(),
        }
    }
    let fits = line_lengths(first_line_prefix_len, &out).all(|l| l <= HARD_LINE);
    fits.then_some(out)
}

/// Lengths of the lines of a value that starts after `prefix` octets, endings excluded.
pub(crate) fn line_lengths(prefix: usize, value: &[u8]) -> impl Iterator<Item = usize> + '_ {
    value.split(|&b| b == b'\n').enumerate().map(move |(i, l)| {
        let l = l.strip_suffix(b"\r").unwrap_or(l).len();
        if i == 0 {
            l + prefix
        } else {
            l
        }
    })
}

/// Splits a header value after every `;` that is outside quoted-strings and comments;
/// each piece but the last ends with its `;`.
fn split_top_level(value: &[u8]) -> Vec<&[u8]> {
    let mut items = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    let mut comment = 0usize;
    let mut i = 0;
    while i < value.len() {
        match value[i] {
            b'\\' if quoted || comment > 0 => i += 1,
            b'"' if comment == 0 => quoted = !quoted,
            b'(' if !quoted => comment += 1,
            b')' if !quoted && comment > 0 => comment -= 1,
            b';' if !quoted && comment == 0 => {
                items.push(&value[start..i + 1]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if start < value.len() || items.is_empty() {
        items.push(&value[start.min(value.len())..]);
    }
    items
}

/// Removes the line breaks of folding (CR and LF), keeping the whitespace after them.
pub(crate) fn unfold(v: &[u8]) -> Cow<'_, [u8]> {
    if !v.iter().any(|&b| b == b'\n' || b == b'\r') {
        return Cow::Borrowed(v);
    }
    Cow::Owned(
        v.iter()
            .copied()
            .filter(|&b| b != b'\n' && b != b'\r')
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Octets before a Content-Type value on its first line: `Content-Type:`.
    const CONTENT_TYPE_PREFIX: usize = "Content-Type:".len();

    /// Folds a Content-Type field value (the bytes after the colon) between its parameters:
    /// a line break goes after a `;` outside quoted-strings and comments, replacing the
    /// whitespace that follows it, wherever the next parameter would push the line past 78
    /// octets. Existing folds and whitespace that need no change are kept byte for byte.
    ///
    /// The first line is taken to start with `Content-Type:` (13 octets).
    fn fold_params(value: &[u8], eol: &[u8]) -> Option<Vec<u8>> {
        fold_params_after(CONTENT_TYPE_PREFIX, value, eol)
    }

    /// The URL inside a `fold_url` result: quotes and name dropped, then extraction.
    fn unfold_param(p: &[u8]) -> Vec<u8> {
        let open = p.iter().position(|&b| b == b'"').unwrap();
        extract_url(&p[open + 1..p.len() - 1])
    }

    #[test]
    fn rules_md_encoding_vector() {
        let url = "http://example.com/a b/\"q\"\\x/café?x=1&y=%zz";
        assert_eq!(
            pct_encode_unsafe(url.as_bytes()),
            b"http://example.com/a%20b/%22q%22%5Cx/caf%C3%A9?x=1&y=%zz"
        );
        assert_eq!(pct_encode_unsafe(b"\x00\x1f\x7f\xff~%"), b"%00%1F%7F%FF~%");
    }

    #[test]
    fn rules_md_fold_vector() {
        let url =
            b"ftp://ftp.deepdirs.org/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17/18/20/21/file.html";
        // The parameter already starts a continuation line: ` URL="…`.
        let folded = fold_url(url, 1, b"\r\n");
        assert_eq!(
            folded,
            b"URL=\"ftp://ftp.deepdirs.org/1/2/3/4/5/6/7/8/9\r\n /10/11/12/13/14/15/16/17/18/20/21/file.h\r\n tml\""
        );
        // Written after `access-type=URL; ` on the first line, it moves to a new one.
        let prefix = "Content-Type: message/external-body; access-type=URL; ".len();
        let folded = fold_url(url, prefix, b"\n");
        assert!(folded.starts_with(b"\n URL=\"ftp://"));
        assert_eq!(unfold_param(&folded), url);
    }

    #[test]
    fn short_url_stays_on_its_line() {
        assert_eq!(fold_url(b"http://a/", 20, b"\n"), b"URL=\"http://a/\"");
        assert_eq!(fold_url(b"", 20, b"\n"), b"URL=\"\"");
        assert_eq!(fold_url_param(b"url", b"x:y", 1, b"\n"), b"url=\"x:y\"");
    }

    #[test]
    fn cut_moves_before_a_triplet() {
        let url = format!("{}%41%42rest", "a".repeat(39));
        let words = url_words(url.as_bytes());
        assert_eq!(words[0], "a".repeat(39).as_bytes());
        assert_eq!(words[1], b"%41%42rest");
        // A stray `%` is no triplet and may be cut.
        let url = format!("{}%zzrest", "a".repeat(39));
        assert_eq!(url_words(url.as_bytes())[0].len(), 40);
    }

    #[test]
    fn plain_fold_for_content_location() {
        let loc = format!("http://example.com/{}", "x".repeat(70));
        let folded = fold_plain(format!("  {loc}\r\n ").as_bytes(), b"\r\n");
        let lines: Vec<&[u8]> = folded.split(|&b| b == b'\n').collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[1].starts_with(b"\t"));
        assert_eq!(extract_url(&folded), loc.as_bytes());
        assert_eq!(fold_plain(b"", b"\n"), b"");
    }

    #[test]
    fn params_fold_between_parameters() {
        let long = "x".repeat(60);
        let value = format!(" text/plain; name=\"{long}\"; charset=us-ascii; format=flowed");
        let folded = fold_params(value.as_bytes(), b"\n").unwrap();
        assert_eq!(
            String::from_utf8(folded).unwrap(),
            format!(" text/plain;\n name=\"{long}\";\n charset=us-ascii; format=flowed")
        );
        // `;` inside quotes and comments is no break point; existing folds stay.
        let value = b" a/b; x=\"1;2\" (c;d);\r\n\ty=2";
        assert_eq!(fold_params(value, b"\r\n").unwrap(), value);
        // One parameter over 998 octets cannot be helped by folding between parameters.
        let value = format!(" a/b; name=\"{}\"", "y".repeat(1000));
        assert_eq!(fold_params(value.as_bytes(), b"\n"), None);
    }

    #[test]
    fn params_fold_cures_a_long_line() {
        let mut value = String::from(" multipart/mixed");
        for i in 0..60 {
            value.push_str(&format!("; p{i}=\"{}\"", "v".repeat(20)));
        }
        let folded = fold_params(value.as_bytes(), b"\n").unwrap();
        assert!(line_lengths(13, &folded).all(|l| l <= SOFT_LINE));
        assert_eq!(extract_url(&folded), extract_url(value.as_bytes()));
    }

    fn url_strategy() -> impl Strategy<Value = Vec<u8>> {
        // URL-ish octets, triplets, stray `%` and the octets that need encoding.
        let piece = prop_oneof![
            "[a-zA-Z0-9/:.?&=_~-]{1,12}".prop_map(|s| s.into_bytes()),
            "%[0-9A-Fa-f]{2}".prop_map(|s| s.into_bytes()),
            Just(b"%".to_vec()),
            Just(b"%z".to_vec()),
            any::<u8>().prop_map(|b| vec![b]),
        ];
        proptest::collection::vec(piece, 0..40).prop_map(|v| v.concat())
    }

    proptest! {
        #[test]
        fn fold_then_extract_round_trips(url in url_strategy(), prefix in 0usize..120) {
            let enc = pct_encode_unsafe(&url);
            let folded = fold_url(&enc, prefix, b"\r\n");
            prop_assert_eq!(unfold_param(&folded), enc.clone());
            prop_assert_eq!(extract_url(&fold_plain(&enc, b"\n")), enc.clone());
            // Encoding is idempotent, so the fix never encodes twice.
            prop_assert_eq!(pct_encode_unsafe(&enc), enc);
        }

        #[test]
        fn words_are_short_and_keep_triplets(url in url_strategy()) {
            let enc = pct_encode_unsafe(&url);
            let words = url_words(&enc);
            prop_assert_eq!(words.concat(), enc.clone());
            let mut at = 0;
            for w in &words {
                prop_assert!(!w.is_empty() && w.len() <= MAX_URL_WORD);
                at += w.len();
                // No triplet may start one or two octets before a cut.
                if at < enc.len() {
                    let split = triplet_at(&enc, at - 1) || (at >= 2 && triplet_at(&enc, at - 2));
                    prop_assert!(!split);
                }
            }
        }

        #[test]
        fn folding_folded_input_changes_nothing(url in url_strategy(), prefix in 0usize..72) {
            let enc = pct_encode_unsafe(&url);
            let once = fold_url(&enc, prefix, b"\n");
            let twice = fold_url(&unfold_param(&once), prefix, b"\n");
            prop_assert_eq!(&twice, &once);
            let plain = fold_plain(&enc, b"\n");
            prop_assert_eq!(fold_plain(&plain, b"\n"), plain);
        }

        #[test]
        fn folded_lines_fit(url in url_strategy(), prefix in 0usize..72) {
            let enc = pct_encode_unsafe(&url);
            let folded = fold_url(&enc, prefix, b"\r\n");
            for l in line_lengths(prefix, &folded) {
                prop_assert!(l <= SOFT_LINE, "line of {} octets", l);
            }
        }

        #[test]
        fn params_fold_never_panics_and_keeps_content(v in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Some(f) = fold_params(&v, b"\n") {
                prop_assert_eq!(extract_url(&f), extract_url(&v));
            }
        }
    }
}
