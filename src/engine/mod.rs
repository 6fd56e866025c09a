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

pub(crate) mod checks;
pub mod model;
pub(crate) mod repair;
pub mod syntax;

use checks::{cturi, extbody, headers, html, ids, related, signed};
use model::analysis::Context;
use model::mime;

pub use model::analysis::{Analysis, Finding, MAX_FINDINGS_PER_RULE};
pub use model::edit::{apply, ApplyError, Edit, EditKind, EditSet, FieldLoc, UrlChange};
pub use model::options::{Limits, Options, SchemePolicy};
pub use model::rules::{Rule, Severity};
pub use repair::rewrite::{HostMatch, PathRegex, Template, UrlRewrite};

/// Analyses `raw` and returns every finding with the edits that would repair them.
pub fn check(raw: &[u8], opts: &Options) -> Analysis {
    let msg = mime::Message::parse(raw, &opts.limits);
    let mut cx = Context::new(&msg, opts);
    run(&mut cx);
    let (mut findings, edits) = cx.finish();
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

/// Runs every check, in the order their findings depend on each other.
fn run(cx: &mut Context) {
    headers::check_limits(cx);
    extbody::check(cx);
    related::check(cx);
    // Before the Content-ID rules: they ask whether references resolve.
    html::check(cx);
    ids::check(cx);
    cturi::check(cx);
    // Last: line lengths are judged on the values as the fixes above left them.
    headers::check_line_lengths(cx);
}

/// Internals the fuzz targets (`fuzz/fuzz_targets/`) drive directly: exactly what they
/// use, and not part of the API.
#[doc(hidden)]
pub mod fuzzing {
    /// Content-Type and RFC 2231 parameter parsing.
    pub mod params {
        pub use crate::engine::syntax::params::{percent_decode, skip_cfws, ContentType};
    }
    /// The HTML reference scanner.
    pub mod html {
        pub use crate::engine::checks::html::scan;
    }
    /// RFC 3986 resolution and Content-Location reading.
    pub mod resolve {
        pub use crate::engine::syntax::resolve::{
            as_base, encode_for_comparison, is_absolute, location_value, parse_location, resolve,
            resolve_lenient,
        };
    }
    /// The draft-eastlake-cturi mapping and URI schemes.
    pub mod cturi {
        pub use crate::engine::syntax::cturi::{to_content_type, to_uri};
        pub use crate::engine::syntax::uri::scheme as uri_scheme;
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
