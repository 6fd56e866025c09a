//! The rewrite of a Content-Type value that both external-body repairs make: URL
//! parameters replaced by one RFC 2017 `URL="…"` parameter, every other byte kept.

use std::ops::Range;

use crate::engine::syntax::fold;
use crate::engine::syntax::params::{is_token_byte, Param};

/// One replacement in a value: the octets of the range give way to the new ones.
pub(super) type Cut = (Range<usize>, Vec<u8>);

/// How the URL parameter is written: the field name's length (the first line's prefix),
/// the message's line ending, whether URL-words are folded, and the parameter's name
/// (`None`: as the first replaced parameter wrote it).
pub(super) struct Form<'a> {
    pub name_len: usize,
    pub eol: &'a [u8],
    pub fold_words: bool,
    pub name: Option<&'a [u8]>,
}

/// The Content-Type value with the URL parameters `targets` replaced by one RFC 2017
/// parameter carrying `url` (already encoded), as [`url_cuts`] says.
pub(super) fn rewrite(value: &[u8], targets: &[&Param], url: &[u8], form: &Form) -> Vec<u8> {
    splice(value, url_cuts(value, targets, url, form))
}

/// The replacements that put one RFC 2017 parameter carrying `url` (already encoded) in
/// the place of the parameters `targets`: the first-written one becomes the folded
/// `URL="…"`, the others are removed with the `;` before them.
pub(super) fn url_cuts(value: &[u8], targets: &[&Param], url: &[u8], form: &Form) -> Vec<Cut> {
    let mut targets: Vec<&Param> = targets.to_vec();
    targets.sort_by_key(|p| p.span.start);
    let mut cuts: Vec<Cut> = Vec::with_capacity(targets.len());
    if let Some(first) = targets.first() {
        cuts.push(url_param(value, first, url, form));
    }
    for p in targets.iter().skip(1) {
        cuts.push((removal(value, p), Vec::new()));
    }
    cuts
}

/// The folded `URL="…"` parameter that replaces parameter `first`.
fn url_param(value: &[u8], first: &Param, url: &[u8], form: &Form) -> Cut {
    let name: Vec<u8> = match form.name {
        Some(n) => n.to_vec(),
        None => value[first.span.clone()]
            .iter()
            .take_while(|&&b| is_token_byte(b) && b != b'*')
            .copied()
            .collect(),
    };
    let line_start = value[..first.span.start]
        .iter()
        .rposition(|&b| b == b'\n')
        .map(|p| p + 1);
    let prefix = match line_start {
        Some(s) => first.span.start - s,
        None => form.name_len + first.span.start,
    };
    let eol = form.eol;
    let mut folded = fold::quote_url_param(&name, url, prefix, eol, form.fold_words);
    let mut start = first.span.start;
    if folded.starts_with(eol) {
        // The parameter moves to a line of its own: the whitespace that separated it
        // from the `;` would be left trailing, so it goes.
        while start > 0 && matches!(value[start - 1], b' ' | b'\t') {
            start -= 1;
        }
        if start == 0 || matches!(value[start - 1], b'\n' | b'\r') {
            // Already at the start of a continuation line: one SP is enough.
            folded.drain(..eol.len());
        }
    }
    (start..first.span.end, folded)
}

/// The octets that go with parameter `p` when it is removed: it and the `;` before it.
fn removal(value: &[u8], p: &Param) -> Range<usize> {
    let before = value[..p.span.start]
        .iter()
        .rposition(|&b| !fold::is_lwsp(b));
    match before {
        Some(s) if value[s] == b';' => s..p.span.end,
        _ => p.span.clone(),
    }
}

/// `value` with every cut made, in the order of the value.
pub(super) fn splice(value: &[u8], mut cuts: Vec<Cut>) -> Vec<u8> {
    cuts.sort_by_key(|(r, _)| r.start);
    let added: usize = cuts.iter().map(|(_, rep)| rep.len()).sum();
    let mut out = Vec::with_capacity(value.len() + added);
    let mut pos = 0;
    for (r, rep) in cuts {
        if r.start < pos {
            continue; // cannot happen with disjoint parameter spans; never corrupt
        }
        out.extend_from_slice(&value[pos..r.start]);
        out.extend_from_slice(&rep);
        pos = r.end;
    }
    out.extend_from_slice(&value[pos.min(value.len())..]);
    out
}
