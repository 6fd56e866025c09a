//! Heading-wide rules: structural limits (`mime-depth-exceeded`, `mime-parts-exceeded`,
//! `message-too-large`) and the RFC 5322 §2.1.1 998-octet line limit
//! (`header-line-too-long`).

use crate::engine::model::analysis::{Context, Finding};
use crate::engine::model::mime::{Field, Kind};
use crate::engine::model::rules::Rule;
use crate::engine::syntax::fold;

/// RFC 5322 §2.1.1: lines MUST NOT be longer than 998 octets, excluding CRLF.
pub const MAX_LINE: usize = 998;

pub fn check_limits(cx: &mut Context) {
    let msg = cx.msg;
    let limits = &cx.opts.limits;
    if let Some(i) = msg.overflow.depth_at {
        let e = &msg.entities[i];
        cx.report(Finding::new(
            Rule::MimeDepthExceeded,
            msg.path(e),
            format!(
                "nesting deeper than {} levels: the parts inside {} were not analysed",
                limits.max_depth,
                msg.path(e)
            ),
        ));
    }
    if let Some(i) = msg.overflow.parts_at {
        let e = &msg.entities[i];
        cx.report(Finding::new(
            Rule::MimePartsExceeded,
            msg.path(e),
            format!(
                "more than {} MIME parts: analysis stopped inside part {}",
                limits.max_parts,
                msg.path(e)
            ),
        ));
    }
    check_boundaries(cx);
    let given = msg.len as u64;
    let not_given = cx.opts.octets_not_given;
    let total = given + not_given;
    let max = limits.max_message_size;
    let message = if not_given == 0 {
        // The caller handed over every octet: all of them were analysed.
        format!("message of {total} octets exceeds the limit of {max} octets")
    } else if total > max as u64 {
        format!("message of {total} octets exceeds the limit of {max} octets: analysed the first {given} octets only")
    } else {
        // Within max_message_size: the header section's own limit stopped the caller,
        // or keeping the rest failed.
        format!("message of {total} octets was not read whole (its header section passed the header size limit, or buffering failed): analysed the first {given} octets only")
    };
    if total > max as u64 || not_given > 0 {
        cx.report(Finding::new(Rule::MessageTooLarge, "0", message));
    }
}

/// `mime-boundary-missing`: a multipart that cannot be split into parts, because it has
/// no boundary parameter or because no delimiter line of its boundary occurs in its body
/// (RFC 2046 §5.1.1). Its body is then one opaque block to every reader, so any
/// references inside it go unchecked.
fn check_boundaries(cx: &mut Context) {
    let msg = cx.msg;
    for e in &msg.entities {
        if !e.ctype.is_multipart() {
            continue;
        }
        let problem = match &e.kind {
            Kind::Multipart {
                no_parts: true,
                closed: true,
                boundary,
            } => {
                let b = crate::engine::syntax::ascii::excerpt(boundary);
                format!("only the close delimiter --{b}-- occurs in its body, no delimiter line --{b} opens a part")
            }
            Kind::Multipart {
                no_parts: true,
                boundary,
                ..
            } => {
                format!(
                    "no delimiter line --{} occurs in its body",
                    crate::engine::syntax::ascii::excerpt(boundary)
                )
            }
            Kind::Multipart { .. } => continue,
            _ => "it has no boundary parameter".to_string(),
        };
        cx.report(Finding::new(
            Rule::MimeBoundaryMissing,
            msg.path(e),
            format!("{} cannot be split into parts: {problem}; its body was not analysed (RFC 2046 §5.1.1)", e.ctype.essence()),
        ));
    }
}

/// Runs last, so that a line that a fix already folded is judged as it will be sent.
pub fn check_line_lengths(cx: &mut Context) {
    let msg = cx.msg;
    for e in &msg.entities {
        // Every field lies within the heading: a heading no longer than a line has no
        // line too long, and without pending edits none can grow (most parts of a
        // many-part message; their fields were each looked at before).
        if e.header.end - e.header.start <= MAX_LINE && cx.edits.is_empty() {
            continue;
        }
        let buf = msg.buf(e);
        for (i, f) in msg.fields(e).iter().enumerate() {
            let name_len = f.value.start - f.start;
            // No line of a field is longer than the whole field: most fields are short,
            // and measuring each line was a visible cost on messages of many parts.
            let longest = if f.value.end - f.start <= MAX_LINE {
                0
            } else {
                longest_line(buf, f)
            };
            if longest <= MAX_LINE {
                // A fix must not lengthen a line past the limit either (a URL
                // %-encoded in place on a long line).
                let grows = !cx.edits.is_empty()
                    && cx
                        .edits
                        .pending(&f.value)
                        .is_some_and(|p| !lines_fit(name_len, p));
                if grows {
                    keep_within_limit(cx, e, i, msg.name(e, f));
                }
                continue;
            }
            let name = msg.name(e, f);
            let label = String::from_utf8_lossy(name).into_owned();
            let mut finding = Finding::new(
                Rule::HeaderLineTooLong,
                msg.path(e),
                format!("{label} field has a line of {longest} octets (RFC 5322 §2.1.1: at most {MAX_LINE})"),
            );
            if e.editable() {
                if let Some(edit) = repair(cx, e, i, name) {
                    finding = finding.with_edit(edit);
                }
            }
            cx.report(finding);
        }
    }
}

/// A pending rewrite of a field that fits as written, which would make a line too long:
/// folded between Content-Type parameters when that fits, else withdrawn, and the
/// findings it was to repair are no longer on offer as fixable.
fn keep_within_limit(
    cx: &mut Context,
    e: &crate::engine::model::mime::Entity,
    i: usize,
    name: &[u8],
) {
    let f = &cx.msg.fields(e)[i];
    let name_len = f.value.start - f.start;
    let Some(idx) = cx.edits.find(&f.value) else {
        return;
    };
    let pending = cx.edits.pending(&f.value).unwrap_or_default().to_vec();
    if name.eq_ignore_ascii_case(b"content-type") {
        if let Some(folded) = fold::fold_params_after(name_len, &pending, e.eol()) {
            if lines_fit(name_len, &folded) {
                let loc = cx.msg.field_loc(e, i);
                cx.edits
                    .rewrite(f.value.clone(), loc, folded, Rule::HeaderLineTooLong);
                return;
            }
        }
    }
    for finding in cx.findings.iter_mut().filter(|x| x.edit == Some(idx)) {
        finding.edit = None;
        finding.fixable = false;
    }
}

fn longest_line(buf: &[u8], f: &Field) -> usize {
    crate::engine::model::mime::line_lengths(buf, f)
        .max()
        .unwrap_or(0)
}

/// An edit that leaves every line of the field within the limit, if the field has a
/// known folding: an edit by an earlier fixer that already cures it, or a fold between
/// Content-Type parameters.
fn repair(
    cx: &mut Context,
    e: &crate::engine::model::mime::Entity,
    i: usize,
    name: &[u8],
) -> Option<usize> {
    let f = &cx.msg.fields(e)[i];
    let name_len = f.value.start - f.start;
    if let Some(pending) = cx.edits.pending(&f.value) {
        let idx = cx.edits.find(&f.value)?;
        if lines_fit(name_len, pending) {
            cx.edits.also_fixes(idx, Rule::HeaderLineTooLong);
            return Some(idx);
        }
        if name.eq_ignore_ascii_case(b"content-type") {
            let folded = fold::fold_params_after(name_len, pending, e.eol())?;
            if lines_fit(name_len, &folded) {
                let loc = cx.msg.field_loc(e, i);
                return Some(cx.edits.rewrite(
                    f.value.clone(),
                    loc,
                    folded,
                    Rule::HeaderLineTooLong,
                ));
            }
        }
        return None;
    }
    if !name.eq_ignore_ascii_case(b"content-type") {
        return None;
    }
    let folded = fold::fold_params_after(name_len, cx.msg.value(e, f), e.eol())?;
    if !lines_fit(name_len, &folded) {
        return None;
    }
    let loc = cx.msg.field_loc(e, i);
    Some(
        cx.edits
            .rewrite(f.value.clone(), loc, folded, Rule::HeaderLineTooLong),
    )
}

/// Every line of `name_len` octets of field name and colon followed by `value` fits.
fn lines_fit(name_len: usize, value: &[u8]) -> bool {
    let mut first = true;
    value.split(|&b| b == b'\n').all(|l| {
        let l = l.strip_suffix(b"\r").unwrap_or(l).len() + if first { name_len } else { 0 };
        first = false;
        l <= MAX_LINE
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{check, Options};

    fn rules(raw: &[u8], opts: &Options) -> Vec<(String, Rule, bool)> {
        check(raw, opts)
            .findings
            .into_iter()
            .map(|f| (f.part, f.rule, f.fixable))
            .collect()
    }

    #[test]
    fn long_unstructured_line_is_reported_not_fixed() {
        let raw = format!("Subject: {}\n\nbody\n", "x".repeat(1000));
        assert_eq!(
            rules(raw.as_bytes(), &Options::default()),
            [("0".to_string(), Rule::HeaderLineTooLong, false)]
        );
        // 998 octets exactly is within the limit.
        let raw = format!("Subject: {}\n\nbody\n", "x".repeat(998 - 9));
        assert!(rules(raw.as_bytes(), &Options::default()).is_empty());
    }

    #[test]
    fn long_content_type_is_folded_between_parameters() {
        let raw = format!(
            "Content-Type: text/plain; a=\"{}\"; b=\"{}\"\n\nbody\n",
            "x".repeat(500),
            "y".repeat(500)
        );
        let found = rules(raw.as_bytes(), &Options::default());
        assert_eq!(found, [("0".to_string(), Rule::HeaderLineTooLong, true)]);
        let (fixed, _) = crate::engine::fix(raw.as_bytes(), &Options::default()).unwrap();
        let text = String::from_utf8(fixed).unwrap();
        assert!(text.lines().all(|l| l.len() <= MAX_LINE), "{text}");
        assert!(text.ends_with("\n\nbody\n"));
        assert!(check(text.as_bytes(), &Options::default())
            .findings
            .is_empty());
        // A single parameter longer than a line has no known folding here: report only.
        let raw = format!(
            "Content-Type: text/plain; a=\"{}\"\n\nbody\n",
            "x".repeat(1000)
        );
        assert_eq!(
            rules(raw.as_bytes(), &Options::default()),
            [("0".to_string(), Rule::HeaderLineTooLong, false)]
        );
    }

    #[test]
    fn multipart_without_usable_boundary() {
        let none = b"Content-Type: multipart/mixed\n\n--x\n\nbody\n--x--\n";
        assert_eq!(
            rules(none, &Options::default()),
            [("0".to_string(), Rule::MimeBoundaryMissing, false)]
        );
        let unused = b"Content-Type: multipart/mixed; boundary=abc\n\n--abcd\n\nbody\n";
        assert_eq!(
            rules(unused, &Options::default()),
            [("0".to_string(), Rule::MimeBoundaryMissing, false)]
        );
        // Only the close delimiter: the message says so instead of "no delimiter".
        let close_only = b"Content-Type: multipart/mixed; boundary=abc\n\nbody\n--abc--\n";
        let a = check(close_only, &Options::default());
        let f: Vec<_> = a
            .findings
            .iter()
            .filter(|f| f.rule == Rule::MimeBoundaryMissing)
            .collect();
        assert_eq!(f.len(), 1);
        assert!(
            f[0].message
                .contains("only the close delimiter --abc-- occurs"),
            "{}",
            f[0].message
        );
        // A look-alike: boundary present and used, even without a close delimiter.
        let fine = b"Content-Type: multipart/mixed; boundary=abc\n\n--abc\n\nbody\n";
        assert!(rules(fine, &Options::default()).is_empty());
    }

    #[test]
    fn limits_are_findings() {
        let mut opts = Options::default();
        opts.limits.max_message_size = 10;
        let raw = b"Subject: x\n\n0123456789";
        assert!(rules(raw, &opts)
            .iter()
            .any(|r| r.1 == Rule::MessageTooLarge));
        let opts = Options {
            octets_not_given: 5,
            ..Options::default()
        };
        assert!(rules(b"Subject: x\n\nbody", &opts)
            .iter()
            .any(|r| r.1 == Rule::MessageTooLarge));
        assert!(rules(b"Subject: x\n\nbody", &Options::default()).is_empty());
    }

    #[test]
    fn message_too_large_says_what_was_analysed() {
        let text = |raw: &[u8], opts: &Options| -> String {
            let a = check(raw, opts);
            let f = a.findings.iter().find(|f| f.rule == Rule::MessageTooLarge);
            f.unwrap().message.clone()
        };
        let mut opts = Options::default();
        opts.limits.max_message_size = 10;
        // Given whole: no claim of a cut.
        let m = text(b"Subject: x\n\n0123456789", &opts);
        assert_eq!(m, "message of 22 octets exceeds the limit of 10 octets");
        // Cut within max_message_size: the header limit stopped reading.
        let opts = Options {
            octets_not_given: 5,
            ..Options::default()
        };
        let m = text(b"Subject: x\n", &opts);
        assert!(m.contains("header size limit"), "{m}");
        assert!(m.ends_with("analysed the first 11 octets only"), "{m}");
    }

    #[test]
    fn lines_fit_counts_the_name_on_the_first_line() {
        assert!(lines_fit(10, &vec![b'a'; 988]));
        assert!(!lines_fit(11, &vec![b'a'; 988]));
        assert!(lines_fit(
            500,
            format!("{}\r\n {}", "a".repeat(400), "b".repeat(990)).as_bytes()
        ));
    }
}
