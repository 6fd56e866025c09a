//! The reference engine: raw message bytes in, findings and byte-range edits out.
//!
//! Pure by design: no I/O, no async, no logging, no globals. The milter, the CLI, the
//! tests and the fuzzers all drive it through [`check`] and [`fix`].
//!
//! # Layout
//!
//! Four layers, each using only the ones above it in this list; this file runs the
//! checks in order and re-exports the types a caller needs.
//!
//! - `syntax/`: octets and text of the standards, nothing about a message's structure.
//!   - `ascii`: case-insensitive comparison, hex digits, `excerpt` (values quoted in
//!     findings)
//!   - `params`: Content-Type and its parameters (RFC 2045, RFC 2231 continuations)
//!   - `rfc2231`: RFC 2231 values as text and back: sections in order, charsets
//!     converted to UTF-8, `utf-8''` %-encoding in sections of whole characters
//!   - `encoded_words`: RFC 2047 encoded-words written (B, whole characters, at most 75
//!     octets), the quoted twin of a file name folded one word a line
//!   - `decode`: transfer encodings, charsets, RFC 2047 encoded-words
//!   - `fold`: **RFC 2017 §3.1 %-encoding and folding** of the URL parameter, the fold of
//!     Content-Location (RFC 2557 §4.4.2) and of parameter lists, and `unfold`
//!   - `cid_url`: `cid:` and `mid:` URL syntax (RFC 2392)
//!   - `msgid`: Message-ID and Content-ID syntax and their addr-spec (RFC 5322 §3.6.4)
//!   - `uri`: the URI scheme (RFC 3986 §3.1) and the schemes that retrieve nothing
//!   - `content_location`: Content-Location values and RFC 3986 §5.2 resolution
//!   - `cturi_map`: the draft-eastlake-cturi mapping between Content-Types and URIs
//!   - `html_refs`: the URL references of an HTML document (attributes and CSS)
//!   - `unreachable`: URLs no recipient can load (`blob:`, `file:`, loopback hosts…)
//!     and `data:` URLs
//!   - `image_signature`: the image format a body's first octets announce
//!   - `dkim`: DKIM-Signature and ARC-Message-Signature tags, and body hashes computed
//!     without DNS (RFC 6376 §3.4, §3.5)
//!   - `auth_results`: Authentication-Results fields, which verifier recorded which
//!     result about what (RFC 8601)
//! - `model/`: the message and what an analysis builds.
//!   - `mime`: the structure scan, every entity with byte offsets
//!   - `base_uri`: the base URI of an entity and its resolved Content-Location (RFC 2557
//!     §5)
//!   - `edit`: edits, the edit set of an analysis, and `apply`
//!   - `signature`: what each signature made of the repairs under it
//!   - `rules`: the rule catalogue; `options`: limits, scheme policy, options;
//!     `url_rules`: the admin's URL rewrite rules the options carry (match, template);
//!     `analysis`: findings, the analysis and the context the checks share
//! - `rewriting/`: the external-body rewriting repairs, beyond one field, offered by the
//!   checks.
//!   - `rewrite`: a rewrite rule's result as a repair (may it be written, the change
//!     record); `strip`: the notice part that replaces a part with a denied reference
//! - `checks/`: the rules, each reading the model and reporting findings with edits.
//!   - `headers`: structural limits and line lengths
//!   - `extbody/`: message/external-body (RFC 2046 §5.2.3, RFC 2017): `mod.rs` the
//!     access-type, parameters and phantom heading, `url` the URL access-type, `legacy`
//!     FTP/ANON-FTP/TFTP and their conversion, `value` the rewrite of the Content-Type
//!     value both repairs make
//!   - `related`: multipart/related and Content-Location (RFC 2387, RFC 2557)
//!   - `html`: references inside text/html (RFC 2557 §8, RFC 2392); `cid_scope`: which
//!     Content-IDs a `cid:` reference may name (RFC 2557 §8.3), also as lenient readers
//!     read them; `location_scope`: which part a URL names by Content-Location
//!   - `refs/`: references that reach people wrong or not at all (the catalogue's
//!     "Parts shown as the sender meant"): `image_type`, `unreachable`, `data_uri`,
//!     `escaped_cid`
//!   - `inline/`: what readers show of the parts those references lead to (the
//!     catalogue's "Inline parts"): `disposition`, `content_id`, `mixed`, `hidden`,
//!     `base`
//!   - `names/`: file names as readers show them (the catalogue's "Parts shown as the
//!     sender meant"): `fields` the two naming fields as repairs leave them,
//!     `eight_bit`, `rfc2231_only`, `one_field`
//!   - `rfc822_encoded`: encapsulated messages sent base64- or quoted-printable-encoded
//!   - `ids`: Content-ID rules; `cturi`: Content-Types that stand for a URI
//!   - `signed/`: fixes withheld where a signature still protects what they change
//!     (DKIM, ARC, multipart/signed, S/MIME): `standing` whether a DKIM or ARC
//!     signature still holds (its body hash), `verdicts` the trusted
//!     Authentication-Results of this hop
//!
//! Public beyond the root: the library functions of `syntax` (`cid_url`, `cturi_map`,
//! `fold`, `content_location`) and the structure scan `model::mime`. `fuzzing` (hidden) is for the fuzz
//! targets.

pub(crate) mod checks;
pub mod model;
pub(crate) mod rewriting;
pub mod syntax;

use checks::{
    cturi, extbody, headers, html, ids, inline, names, refs, related, rfc822_encoded, signed,
};
use model::analysis::Context;
use model::mime;

pub use model::analysis::{Analysis, Finding, MAX_FINDINGS_PER_RULE};
pub use model::edit::{apply, ApplyError, Edit, EditKind, FieldLoc, UrlChange};
pub use model::options::{FixSigned, Limits, Options, SchemePolicy};
pub use model::rules::{Rule, Severity};
pub use model::signature::{Lift, Signature, SignatureKind, Standing, Verdict, Withheld};
pub use model::url_rules::{HostMatch, PathRegex, Template, UrlRewrite};

/// Analyses `raw` and returns every finding with the edits that would repair them.
pub fn check(raw: &[u8], opts: &Options) -> Analysis {
    let msg = mime::Message::parse(raw, &opts.limits);
    let mut cx = Context::new(&msg, opts);
    run(&mut cx);
    let (mut findings, edits, shown_parts) = cx.finish();
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
    let (signed, signatures) = signed::withhold_signed_fixes(&msg, opts, &mut findings, &edits);
    findings.extend(signed);
    // Document order, whichever check found them: part 2 before part 10.
    findings.sort_by_cached_key(|f| part_order(&f.part));
    Analysis {
        findings,
        edits,
        shown_parts,
        signatures,
    }
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
pub(crate) fn apply_fixes(raw: &[u8], analysis: &Analysis) -> Result<Vec<u8>, ApplyError> {
    apply(raw, analysis.edits_for(|f| f.fixable))
}

/// Runs every check, in the order their findings depend on each other.
fn run(cx: &mut Context) {
    headers::check_limits(cx);
    extbody::check(cx);
    rfc822_encoded::check(cx);
    related::check(cx);
    // Before the Content-ID rules: they ask whether references resolve, and which ids
    // some reference names.
    html::check(cx);
    // References that lead to a part typed wrong, or nowhere a recipient can reach;
    // before the inline rules, which judge an image as the type repair leaves it.
    refs::check(cx);
    // What readers show of the parts those references lead to.
    inline::check(cx);
    // File names: after the inline rules, whose disposition repairs they compose with,
    // and before the line lengths, which judge the fields as they leave them.
    names::check(cx);
    related::check_duplicate_ids(cx);
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
        pub use crate::engine::syntax::msgid::id_forms;
        pub use crate::engine::syntax::params::{
            percent_decode, skip_cfws, subtype_span, ContentType, Disposition,
        };
    }
    /// The HTML reference scanner.
    pub mod html {
        pub use crate::engine::syntax::html_refs::scan;
    }
    /// RFC 3986 resolution and Content-Location reading.
    pub mod resolve {
        pub use crate::engine::syntax::content_location::{
            as_base, encode_for_comparison, is_absolute, location_value, parse_location, resolve,
            resolve_lenient,
        };
    }
    /// The draft-eastlake-cturi mapping and URI schemes.
    pub mod cturi {
        pub use crate::engine::syntax::cturi_map::{to_content_type, to_uri};
        pub use crate::engine::syntax::uri::scheme as uri_scheme;
    }
    /// DKIM signature fields, body hashes and Authentication-Results fields.
    pub mod auth {
        pub use crate::engine::syntax::auth_results::parse as auth_results;
        pub use crate::engine::syntax::dkim::{
            body_hash, tag_list, BodyCanon, BodyCheck, BodyHasher, HashAlg, Signature,
            SignatureKind,
        };
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
            rides_on: None,
            change: None,
        };
        Analysis {
            findings: vec![Finding::new(Rule::RelatedTypeMissing, "0", "m").with_edit(0)],
            edits: vec![edit],
            shown_parts: 0,
            signatures: Vec::new(),
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
