//! The delimiter index and the multipart split: where each body part of a multipart
//! lies (RFC 2046 §5.1.1), found without copying or decoding the body.
//!
//! Every line that starts with `--` is indexed once per buffer, by what follows the
//! dashes: a multipart then looks its boundary up instead of searching the rest of the
//! message, which a message nested thousands deep would pay depth × size for.

use std::ops::Range;

use memchr::memmem;

use super::heading::line_end;
use crate::engine::syntax::ascii::same_octets;

/// Splits a multipart body into its parts (ranges of each part's heading and body) and
/// says whether the close delimiter was seen. RFC 2046 §5.1.1: the line break before a
/// delimiter belongs to the delimiter; after the boundary only `--` (close) and
/// transport padding may follow on the line, so a longer boundary that merely starts with
/// this one is not a delimiter. The candidate delimiter lines come from `index`, so that
/// nested multiparts do not each search the whole rest of the message (a message nested
/// thousands deep would otherwise cost depth × size).
pub(super) fn split_multipart_indexed(
    buf: &[u8],
    body: Range<usize>,
    boundary: &[u8],
    index: &DelimiterIndex,
) -> (Vec<Range<usize>>, bool) {
    let hay = &buf[body.clone()];
    let mut dash = Vec::with_capacity(boundary.len() + 2);
    dash.extend_from_slice(b"--");
    dash.extend_from_slice(boundary);
    let mut close_key = boundary.to_vec();
    close_key.extend_from_slice(b"--");
    let in_body = |key: &[u8]| -> &[usize] {
        let v = index.lines(key);
        let lo = v.partition_point(|&p| p < body.start);
        let hi = v.partition_point(|&p| p < body.end);
        &v[lo..hi]
    };
    let open = in_body(trim_lwsp(boundary));
    let close = in_body(&close_key);
    // A body that does not start at a line start can still open with a delimiter.
    // The index keyed every line that starts with `--`.
    let line_start = body.start == 0 || buf[body.start - 1] == b'\n';
    let first = (hay.starts_with(&dash) && !line_start).then_some(0);
    // Nor can a body that ends inside a line: the index keyed that line whole.
    let cut = buf
        .get(body.end)
        .is_some_and(|&c| c != b'\n' && !(c == b'\r' && buf.get(body.end + 1) == Some(&b'\n')));
    let last = if cut {
        let s = memchr::memrchr(b'\n', hay).map_or(0, |n| n + 1);
        (s > 0 || first.is_none()).then_some(s)
    } else {
        None
    };
    // A body that starts and ends at line starts, whose boundary has no trailing blank
    // and whose one close delimiter (if any) follows every delimiter line (nearly every
    // multipart): the index's lines are the candidates as they are, each a delimiter.
    let keyed_exactly = trim_lwsp(boundary).len() == boundary.len();
    if keyed_exactly
        && first.is_none()
        && last.is_none()
        && match (open.last(), close) {
            (_, []) | (None, [_]) => true,
            (Some(o), [c]) => o < c,
            _ => false,
        }
    {
        let candidates = open.iter().chain(close).map(|&p| p - body.start);
        return split_at_candidates(hay, body.start, dash.len(), candidates);
    }
    let mut merged = Vec::with_capacity(open.len() + close.len() + 2);
    merged.extend(first);
    let (mut i, mut j) = (0, 0);
    while i < open.len() || j < close.len() {
        let take_open = j >= close.len() || (i < open.len() && open[i] <= close[j]);
        let p = if take_open {
            i += 1;
            open[i - 1]
        } else {
            j += 1;
            close[j - 1]
        };
        if merged.last() != Some(&(p - body.start)) {
            merged.push(p - body.start);
        }
    }
    if let Some(l) = last {
        // The cut line is the last line of the body, so it comes last.
        while merged.last().is_some_and(|&m| m >= l) {
            merged.pop();
        }
        merged.push(l);
    }
    // A line the index keyed by the boundary itself starts with `--boundary`, and lies
    // whole in the body unless it is the cut line: only that line, and lines keyed by a
    // boundary with its trailing blanks removed, need the test (a call a part).
    let candidates = merged.into_iter().filter(|&at| {
        (keyed_exactly && Some(at) != last) || hay.get(at..).is_some_and(|t| t.starts_with(&dash))
    });
    split_at_candidates(hay, body.start, dash.len(), candidates)
}

/// The delimiter logic proper, over candidate positions (ascending, relative to `hay`)
/// where `--boundary` (`dash_len` octets) occurs.
fn split_at_candidates(
    hay: &[u8],
    base: usize,
    dash_len: usize,
    candidates: impl Iterator<Item = usize>,
) -> (Vec<Range<usize>>, bool) {
    // At most one part per candidate: grown by doubling, a 10 000-part split copied
    // its list 14 times.
    let mut parts = Vec::with_capacity(candidates.size_hint().1.unwrap_or(0));
    let mut open: Option<usize> = None; // start of the current part (relative)
    let mut from = 0;
    for at in candidates {
        if at < from {
            continue;
        }
        from = at + 1;
        if at > 0 && hay[at - 1] != b'\n' {
            continue;
        }
        let mut k = at + dash_len;
        let close = hay[k..].starts_with(b"--");
        if close {
            k += 2;
        }
        while k < hay.len() && matches!(hay[k], b' ' | b'\t') {
            k += 1;
        }
        let line_ok = k == hay.len()
            || hay[k] == b'\n'
            || (hay[k] == b'\r' && hay.get(k + 1) == Some(&b'\n'));
        if !line_ok {
            continue;
        }
        let delim_start = if at == 0 {
            0
        } else if at >= 2 && hay[at - 2] == b'\r' {
            at - 2
        } else {
            at - 1
        };
        let next_line = if k == hay.len() {
            k
        } else if hay[k] == b'\n' {
            k + 1
        } else {
            k + 2
        };
        if let Some(s) = open.take() {
            parts.push(base + s..base + delim_start.max(s));
        }
        if close {
            return (parts, true);
        }
        open = Some(next_line);
        from = next_line.max(from);
    }
    if let Some(s) = open {
        parts.push(base + s..base + hay.len());
    }
    (parts, false)
}

/// Every `\n--` in `buf`. On x86-64 with AVX2 the vector searcher memmem would pick is
/// called directly: memmem's iterator and its choice of searcher cost ~40 instructions a
/// match, as much again as the search itself between the delimiters of small parts.
#[cfg(target_arch = "x86_64")]
fn dash_lines(buf: &[u8]) -> impl Iterator<Item = usize> + '_ {
    let direct = memchr::arch::x86_64::avx2::packedpair::Finder::new(DASH_LINE);
    let mut other = direct.is_none().then(|| memmem::find_iter(buf, DASH_LINE));
    let mut at = 0;
    std::iter::from_fn(move || match (&direct, other.as_mut()) {
        (Some(f), None) => {
            let hay = buf.get(at..)?;
            let n = if hay.len() >= f.min_haystack_len() {
                f.find(hay, DASH_LINE)
            } else {
                memmem::find(hay, DASH_LINE)
            }?;
            at += n + 1;
            Some(at - 1)
        }
        (_, Some(found)) => found.next(),
        (None, None) => None,
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn dash_lines(buf: &[u8]) -> impl Iterator<Item = usize> + '_ {
    memmem::find_iter(buf, DASH_LINE)
}

const DASH_LINE: &[u8] = b"\n--";

/// Whether the line at `at` in `buf` is `key` followed by nothing but blanks up to its
/// end: the line's key (see [`DelimiterIndex`]) is `key` (which is not empty and does not
/// end with a blank). Not for a key ending in CR, which may be the CR of the line break.
fn key_ends_at(buf: &[u8], at: usize, key: &[u8]) -> bool {
    if key.last() == Some(&b'\r') {
        return false;
    }
    let Some(rest) = buf
        .get(at..at + key.len())
        .filter(|line| same_octets(line, key))
        .map(|_| &buf[at + key.len()..])
    else {
        return false;
    };
    let rest = &rest[rest
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count()..];
    matches!(rest, [] | [b'\n', ..] | [b'\r', b'\n', ..])
}

fn trim_lwsp(b: &[u8]) -> &[u8] {
    let n = b
        .iter()
        .rposition(|&c| c != b' ' && c != b'\t')
        .map_or(0, |i| i + 1);
    &b[..n]
}

/// Every line of one buffer that starts with `--`, by what follows the dashes (trailing
/// blanks and the line ending removed), built once per buffer in one pass. A delimiter
/// for boundary B is on a line keyed `B` (or `B--` for the close delimiter).
#[derive(Debug, Default)]
pub(super) struct DelimiterIndex {
    by_key: std::collections::HashMap<Vec<u8>, Vec<usize>>,
}

impl DelimiterIndex {
    pub(super) fn new(buf: &[u8]) -> DelimiterIndex {
        let mut ix = DelimiterIndex::default();
        // Consecutive `--` lines usually carry the same key (a multipart's delimiters
        // with only its parts between them): gather such a run and hash its key once.
        let mut run: (&[u8], Vec<usize>) = (b"", Vec::new());
        // Only lines that start with `--` matter: find them directly rather than walking
        // every line of the message.
        let starts = buf
            .starts_with(b"--")
            .then_some(0)
            .into_iter()
            .chain(dash_lines(buf).map(|at| at + 1));
        for pos in starts {
            // Most lines repeat the run's key: that is settled by what follows it.
            if !run.0.is_empty() && key_ends_at(buf, pos + 2, run.0) {
                run.1.push(pos);
                continue;
            }
            let (content_end, _) = line_end(buf, pos, buf.len());
            let key = trim_lwsp(&buf[pos + 2..content_end]);
            if key != run.0 {
                ix.flush(&mut run);
                run.0 = key;
            }
            run.1.push(pos);
        }
        ix.flush(&mut run);
        ix
    }

    /// Adds a run of lines with one key; looks the key up before allocating it, since
    /// most runs repeat a boundary already seen.
    fn flush(&mut self, run: &mut (&[u8], Vec<usize>)) {
        if run.1.is_empty() {
            return;
        }
        match self.by_key.get_mut(run.0) {
            Some(lines) => lines.append(&mut run.1),
            None => {
                self.by_key
                    .insert(run.0.to_vec(), std::mem::take(&mut run.1));
            }
        }
    }

    fn lines(&self, key: &[u8]) -> &[usize] {
        self.by_key.get(key).map_or(&[], Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The split by a plain search of the whole body, the reference the indexed split must
    /// agree with.
    fn split_multipart(
        buf: &[u8],
        body: Range<usize>,
        boundary: &[u8],
    ) -> (Vec<Range<usize>>, bool) {
        let mut dash = Vec::with_capacity(boundary.len() + 2);
        dash.extend_from_slice(b"--");
        dash.extend_from_slice(boundary);
        let finder = memmem::Finder::new(&dash);
        let hay = &buf[body.clone()];
        let candidates = finder.find_iter(hay);
        split_at_candidates(hay, body.start, dash.len(), candidates)
    }

    proptest! {
        /// The direct search for `\n--` finds what memmem's iterator finds, on short
        /// buffers (below the vector searcher's minimum) and long ones alike.
        #[test]
        fn dash_lines_are_memmems(
            buf in proptest::collection::vec(
                prop_oneof![Just(b'\n'), Just(b'-'), Just(b'\r'), Just(b'x')],
                0..300,
            ),
        ) {
            let want: Vec<usize> = memmem::find_iter(&buf, DASH_LINE).collect();
            prop_assert_eq!(dash_lines(&buf).collect::<Vec<_>>(), want);
        }

        /// The indexed split finds exactly what the plain memmem split finds, on bodies
        /// made of delimiter-like lines, blanks, bare CRs and prefixes of the boundary.
        #[test]
        fn indexed_split_agrees_with_memmem(
            pieces in proptest::collection::vec(
                prop_oneof![
                    Just(&b"--b"[..]), Just(&b"--b--"[..]), Just(&b"--bb"[..]), Just(&b"--b "[..]),
                    Just(&b"--b\t--"[..]), Just(&b"\r\n"[..]), Just(&b"\n"[..]), Just(&b"\r"[..]),
                    Just(&b"x"[..]), Just(&b" "[..]), Just(&b"--"[..]), Just(&b"b"[..]),
                ],
                0..40,
            ),
            start in 0usize..8,
            cut in 0usize..8,
            boundary in prop_oneof![Just(&b"b"[..]), Just(&b"bb"[..]), Just(&b"b "[..])],
        ) {
            let buf: Vec<u8> = pieces.concat();
            let s = start.min(buf.len());
            let e = buf.len().saturating_sub(cut).max(s);
            let ix = DelimiterIndex::new(&buf);
            prop_assert_eq!(
                split_multipart(&buf, s..e, boundary),
                split_multipart_indexed(&buf, s..e, boundary, &ix)
            );
        }
    }
}
