//! The reference engine: raw message bytes in, findings and byte-range edits out.
//!
//! Pure by design: no I/O, no async, no logging, no globals. The milter, the CLI, the
//! tests and the fuzzers all drive it through [`check`] and [`fix`].
//!
//! Layout, one file per standard:
//! - `mime` (structure scan with byte offsets), `params` (RFC 2045/2231 parameters),
//!   `decode` (transfer encodings, charsets, RFC 2047)
//! - `extbody` (RFC 2046 §5.2.3 / RFC 2017), `fold` (the RFC 2017 folding and %-encoding)
//! - `related` (RFC 2387 / RFC 2557), `resolve` (RFC 3986 resolution of Content-Location),
//!   `html` (references inside text/html)
//! - `cid` (RFC 2392 URLs), `cturi` (draft-eastlake-cturi), `ids` (Content-ID rules),
//!   `headers` (line limits), `signed` (DKIM / S/MIME protection)
//! - `edit` (edits and `apply`), `rules` (the catalogue)

pub mod checks;
pub mod model;
pub mod repair;
pub mod syntax;

use std::collections::{HashMap, HashSet};

use checks::{cturi, extbody, headers, html, ids, related, signed};
use model::mime;

pub use model::edit::{apply, ApplyError, Edit, EditKind, EditSet, FieldLoc, UrlChange};
pub use model::rules::{Rule, Severity};
pub use repair::rewrite::{HostMatch, PathRegex, Template, UrlRewrite};

/// Structural limits. Exceeding one is a finding, never a panic or a hang.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Deepest nesting of multiparts and encapsulated messages analysed.
    pub max_depth: usize,
    /// Most MIME entities analysed per message.
    pub max_parts: usize,
    /// Largest message analysed, in octets (`message-too-large` beyond it).
    pub max_message_size: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 64,
            max_parts: 20_000,
            max_message_size: 64 * 1024 * 1024,
        }
    }
}

/// URL scheme policy shared by external-body URLs and ContentType: URIs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemePolicy {
    /// When non-empty, only these schemes (lower-case) are allowed.
    pub allow: Vec<String>,
    /// Schemes (lower-case) that are always denied.
    pub deny: Vec<String>,
}

impl Default for SchemePolicy {
    fn default() -> Self {
        SchemePolicy {
            allow: Vec::new(),
            deny: ["file", "javascript", "data", "vbscript"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
        }
    }
}

impl SchemePolicy {
    pub fn denies(&self, scheme: &str) -> bool {
        let s = scheme.to_ascii_lowercase();
        self.deny.contains(&s) || (!self.allow.is_empty() && !self.allow.contains(&s))
    }
}

/// What the engine is asked to do beyond the catalogue defaults.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Options {
    pub limits: Limits,
    pub schemes: SchemePolicy,
    /// Offer fixes even where they would break a DKIM signature, multipart/signed or
    /// S/MIME (for milters placed before the signer). Off by default.
    pub fix_signed: bool,
    /// Offer the normalisation of RFC 2231 `URL*n` continuations to RFC 2017 form.
    pub normalize_url_continuations: bool,
    /// Write rewritten external-body URLs as one quoted word, folded only where its line
    /// would pass 998 octets, and offer no fold for `extbody-url-word-too-long` (see
    /// `fold::quote_url_param`). Off (the RFC 2017 form): folded words of at most 40
    /// octets.
    pub whole_url_words: bool,
    /// URL rewrite rules for external-body URLs, in order; the first that matches a URL
    /// rewrites it (`extbody-url-rewritten`).
    pub rewrites: Vec<UrlRewrite>,
    /// Offer the conversion of ANON-FTP and TFTP references to `access-type=URL`.
    pub legacy_to_url: bool,
    /// With `legacy_to_url`, also convert access-type=FTP (which needs a login the URL
    /// cannot carry: the reader is asked for it). Off: never converted.
    pub legacy_ftp_with_login: bool,
    /// Offer to replace a body part whose reference has a denied scheme with a notice
    /// part (the repair of `extbody-url-scheme-denied` and `cturi-uri-denied`).
    pub strip_denied: bool,
    /// Octets of the message the caller did not hand over (e.g. the milter stopped
    /// buffering at its size limit). Non-zero means the message is incomplete: it is
    /// analysed as far as given, `message-too-large` is reported, and no edit is offered
    /// outside the top-level heading.
    pub octets_not_given: u64,
}

/// One finding of one rule at one place.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    pub rule: Rule,
    /// IMAP-style part path (`0` = top-level heading, `2.1.3`, `2.0` = heading of the
    /// message encapsulated in part 2).
    pub part: String,
    pub severity: Severity,
    /// Whether an edit that repairs this finding is on offer (see `edit`).
    pub fixable: bool,
    pub message: String,
    /// Index into [`Analysis::edits`] of the edit that repairs this finding.
    #[serde(skip)]
    pub edit: Option<usize>,
}

impl Finding {
    pub fn new(rule: Rule, part: impl AsRef<str>, message: impl Into<String>) -> Self {
        Finding {
            rule,
            part: part.as_ref().to_owned(),
            severity: rule.severity(),
            fixable: false,
            message: message.into(),
            edit: None,
        }
    }

    pub fn with_edit(mut self, edit: usize) -> Self {
        self.fixable = true;
        self.edit = Some(edit);
        self
    }
}

/// The result of analysing one message.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Analysis {
    pub findings: Vec<Finding>,
    /// Edits on offer, at most one per header field; findings point at them.
    pub edits: Vec<Edit>,
}

impl Analysis {
    /// The edits that repair at least one of the findings `wanted` says yes to. An edit
    /// that changes a reference (`Edit::requires`) also needs a wanted finding of that
    /// rule; an edit inside a chosen part replacement is dropped (the part is gone).
    /// Returned in message order, never overlapping.
    pub fn edits_for(&self, mut wanted: impl FnMut(&Finding) -> bool) -> Vec<&Edit> {
        let mut chosen = vec![false; self.edits.len()];
        let mut gate = vec![false; self.edits.len()];
        for f in &self.findings {
            if let Some(i) = f.edit.filter(|&i| i < self.edits.len()) {
                if wanted(f) {
                    chosen[i] = true;
                    if self.edits[i].requires == Some(f.rule) {
                        gate[i] = true;
                    }
                }
            }
        }
        let mut out: Vec<&Edit> = self
            .edits
            .iter()
            .enumerate()
            .filter(|&(i, e)| chosen[i] && (e.requires.is_none() || gate[i]))
            .map(|(_, e)| e)
            .collect();
        // Outer ranges first, so that one pass drops everything inside a part.
        out.sort_by_key(|e| (e.range.start, std::cmp::Reverse(e.range.end)));
        let mut kept: Vec<&Edit> = Vec::with_capacity(out.len());
        for e in out {
            if kept.last().is_some_and(|k| e.range.start < k.range.end) {
                continue;
            }
            kept.push(e);
        }
        kept
    }
}

/// Analyses `raw` and returns every finding with the edits that would repair them.
pub fn check(raw: &[u8], opts: &Options) -> Analysis {
    let msg = mime::Message::parse(raw, &opts.limits);
    let mut cx = Context {
        msg: &msg,
        opts,
        findings: Vec::new(),
        edits: EditSet::default(),
        per_place: HashMap::new(),
        cid_targets: HashSet::new(),
        cid_dangling: false,
    };
    cx.run();
    let Context {
        mut findings,
        edits,
        per_place,
        ..
    } = cx;
    note_unlisted(&mut findings, &per_place);
    let edits = edits.into_vec();
    if opts.octets_not_given > 0 {
        // Only the top-level heading can still be changed (change_header); the rest of
        // the message was never seen whole.
        for f in &mut findings {
            if f.edit.is_some_and(|i| !edits[i].field.top_level) {
                f.fixable = false;
                f.edit = None;
            }
        }
    }
    let signed = signed::withhold_signed_fixes(&msg, opts, &mut findings, &edits);
    findings.extend(signed);
    // Document order, whichever check found them: part 2 before part 10.
    findings.sort_by_cached_key(|f| part_order(&f.part));
    Analysis { findings, edits }
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

/// Sort key of a part path: its numbers, so that `2.10` follows `2.9`.
fn part_order(path: &str) -> Vec<u64> {
    path.split('.')
        .map(|n| n.parse().unwrap_or(u64::MAX))
        .collect()
}

/// Applies every fixable finding's edit. Returns the fixed bytes and the analysis of the
/// input. A message with nothing fixable comes back byte-identical.
///
/// An edit that cannot be applied (outside the message, or overlapping another) is an
/// error: the input is never handed back as if it had been fixed while the analysis
/// says "fixable".
pub fn fix(raw: &[u8], opts: &Options) -> Result<(Vec<u8>, Analysis), ApplyError> {
    let analysis = check(raw, opts);
    let out = apply_fixes(raw, &analysis)?;
    Ok((out, analysis))
}

/// The edits of every fixable finding of `analysis` (an analysis of `raw`), applied.
pub fn apply_fixes(raw: &[u8], analysis: &Analysis) -> Result<Vec<u8>, ApplyError> {
    apply(raw, analysis.edits_for(|f| f.fixable))
}

/// Findings of one rule listed per part before the rest are only counted: a heading of a
/// million bad Content-IDs, or an HTML body of a million dangling `cid:` links, must not
/// cost a million messages (hundreds of MB). Findings that carry an edit are always
/// kept, so every fix stays on offer.
pub const MAX_FINDINGS_PER_RULE: usize = 1000;

/// State shared by the checks of one analysis.
pub struct Context<'m, 'a> {
    pub msg: &'m mime::Message<'a>,
    pub opts: &'m Options,
    pub findings: Vec<Finding>,
    pub edits: EditSet,
    /// Findings reported so far, by rule and part.
    per_place: HashMap<(Rule, String), usize>,
    /// Entities that some `cid:` reference in text/html resolves to (by Content-ID, or
    /// by a `Content-Location: cid:`), and whether some `cid:` reference resolves to
    /// nothing: they tell whether a Content-ID's bad syntax affects a reader.
    pub cid_targets: HashSet<usize>,
    pub cid_dangling: bool,
}

/// Says on the last listed finding of a rule how many more were only counted.
fn note_unlisted(findings: &mut [Finding], per_place: &HashMap<(Rule, String), usize>) {
    if !per_place.values().any(|&n| n > MAX_FINDINGS_PER_RULE) {
        return;
    }
    let mut listed: HashMap<(Rule, String), usize> = HashMap::new();
    for f in findings.iter() {
        *listed.entry((f.rule, f.part.clone())).or_default() += 1;
    }
    for f in findings.iter_mut().rev() {
        let key = (f.rule, f.part.clone());
        let (Some(&total), Some(shown)) = (per_place.get(&key), listed.get_mut(&key)) else {
            continue;
        };
        if total > *shown {
            f.message.push_str(&format!(
                " (and {} more like it, not listed)",
                total - *shown
            ));
            *shown = total;
        }
    }
}

impl Context<'_, '_> {
    fn run(&mut self) {
        headers::check_limits(self);
        extbody::check(self);
        related::check(self);
        // Before the Content-ID rules: they ask whether references resolve.
        html::check(self);
        ids::check(self);
        cturi::check(self);
        // Last: line lengths are judged on the values as the fixes above left them.
        headers::check_line_lengths(self);
    }

    pub fn report(&mut self, f: Finding) {
        let n = self.per_place.entry((f.rule, f.part.clone())).or_default();
        *n += 1;
        if *n > MAX_FINDINGS_PER_RULE && f.edit.is_none() {
            return;
        }
        self.findings.push(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An analysis whose one fixable finding points at an edit outside the message.
    fn unappliable() -> Analysis {
        let edit = Edit {
            range: 5..50,
            replacement: b" x".to_vec(),
            field: FieldLoc {
                part: "0".into(),
                name: "Content-Type".into(),
                occurrence: 1,
                top_level: true,
            },
            kind: EditKind::Field,
            rules: vec![Rule::RelatedTypeMissing],
            requires: None,
            change: None,
        };
        Analysis {
            findings: vec![Finding::new(Rule::RelatedTypeMissing, "0", "m").with_edit(0)],
            edits: vec![edit],
        }
    }

    /// Edits that cannot be applied are an error, never the input handed back as if it
    /// had been fixed.
    #[test]
    fn a_failed_apply_is_an_error_not_the_input_unchanged() {
        let raw = b"Subject: x\n\nbody\n";
        assert!(matches!(
            apply_fixes(raw, &unappliable()),
            Err(ApplyError::OutOfBounds { .. })
        ));
        // The ordinary case: nothing fixable comes back byte-identical.
        let (out, a) = fix(raw, &Options::default()).unwrap();
        assert_eq!(out, raw);
        assert!(a.findings.is_empty());
    }
}
