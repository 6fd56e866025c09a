//! The invariants every fix must keep (engine tests and fuzz targets).
#![allow(dead_code)]

use std::ops::Range;

use mimeref_milter::engine::{self, Analysis, Options};

/// The invariants every fix must keep, checked on any input:
/// - bytes outside the edited ranges are identical, in order;
/// - nothing fixable means byte-identical output;
/// - the output re-checks without fixable findings, and fixing again changes nothing.
///
/// Returns the fixed bytes and the analysis.
pub fn fix_and_verify(name: &str, raw: &[u8], opts: &Options) -> (Vec<u8>, Analysis) {
    let (fixed, analysis) = engine::fix(raw, opts).unwrap();
    let applied: Vec<Range<usize>> = analysis
        .edits_for(|f| f.fixable)
        .iter()
        .map(|e| e.range.clone())
        .collect();
    if applied.is_empty() {
        assert!(
            fixed == raw,
            "{name}: nothing fixable, yet the output differs"
        );
    } else {
        assert_outside_identical(name, raw, &fixed, &analysis);
        let (again, second) = engine::fix(&fixed, opts).unwrap();
        let left: Vec<String> = second
            .findings
            .iter()
            .filter(|f| f.fixable)
            .map(|f| format!("{} {} {}", f.part, f.rule, f.message))
            .collect();
        assert!(
            left.is_empty(),
            "{name}: fixable findings remain after fix: {left:?}"
        );
        assert!(again == fixed, "{name}: fix is not idempotent");
    }
    (fixed, analysis)
}

/// Walks input and output together: every unedited stretch of the input must appear
/// unchanged in the output, each edit replaced by exactly its replacement.
fn assert_outside_identical(name: &str, raw: &[u8], fixed: &[u8], analysis: &Analysis) {
    let mut edits = analysis.edits_for(|f| f.fixable);
    edits.sort_by_key(|e| e.range.start);
    let (mut i, mut o) = (0usize, 0usize);
    for e in edits {
        let keep = &raw[i..e.range.start];
        assert!(
            fixed.get(o..o + keep.len()) == Some(keep),
            "{name}: bytes before offset {} changed",
            e.range.start
        );
        o += keep.len();
        let rep = &e.replacement;
        assert!(
            fixed.get(o..o + rep.len()) == Some(&rep[..]),
            "{name}: edit at {} not applied as offered",
            e.range.start
        );
        // A field edit touches one field value and never the line ending that closes
        // it; a part edit (a strip) never the line break before the next delimiter; an
        // insertion adds whole lines of one field, named as the edit says, and a
        // removal takes one whole field.
        let old = &raw[e.range.clone()];
        // The obsolete syntax allows white space before the colon (RFC 5322 §4.5.8,
        // `Content-Base :http://…`), and a removal takes it with the field.
        let whole_field = |f: &[u8]| {
            let n = e.field.name.len();
            f.ends_with(b"\n")
                && f.len() > n
                && f[..n].eq_ignore_ascii_case(e.field.name.as_bytes())
                && f[n..].iter().find(|b| !matches!(b, b' ' | b'\t')) == Some(&b':')
        };
        let ok = match e.kind {
            engine::EditKind::Field => !old.ends_with(b"\n") && !rep.ends_with(b"\n"),
            engine::EditKind::Part => !rep.ends_with(b"\n"),
            engine::EditKind::Insert => old.is_empty() && whole_field(rep),
            engine::EditKind::Remove => rep.is_empty() && whole_field(old),
        };
        assert!(
            ok,
            "{name}: {:?} edit of {} does not keep to its field",
            e.kind, e.field.name
        );
        o += rep.len();
        i = e.range.end;
    }
    assert!(
        fixed.get(o..) == Some(&raw[i..]),
        "{name}: bytes after the last edit changed"
    );
}
