//! Edits over the original message bytes.
//!
//! Fixes never touch anything but the value of the header field concerned, so an edit is
//! always "replace the value of field F" (the bytes between the colon and the line ending
//! that ends the field). Several rules may want to change the same field (a Content-Type
//! that is missing `type=` and also has a 1000-octet line): they go through [`EditSet`],
//! which hands each fixer the value as the previous fixers left it, so that their repairs
//! compose into one edit per field.
//!
//! One other kind of edit exists: replacing a whole body part of a multipart (heading and
//! body, between the delimiter lines) with a short notice part, when policy strips a
//! reference ([`EditKind::Part`]). It is still one byte range of the original message; an
//! edit of a field inside a stripped part is dropped when both are chosen
//! (see `Analysis::edits_for`).

use std::ops::Range;

use crate::engine::model::rules::Rule;

/// Where an edited field lives, in the terms a milter needs: top-level header fields are
/// changed with `change_header(name, index)`, everything else by replacing the body.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FieldLoc {
    /// Part path of the heading that holds the field (`0` = top-level heading).
    pub part: String,
    /// The field name as written in the message.
    pub name: String,
    /// 1-based occurrence among the fields of this heading with the same name
    /// (case-insensitive): the index `smfi_chgheader` expects.
    pub occurrence: usize,
    /// True for a field of the top-level heading (`part == "0"`).
    pub top_level: bool,
}

/// What an edit replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EditKind {
    /// The value of one header field.
    Field,
    /// A whole body part of a multipart (heading and body, not the delimiter lines
    /// around it), replaced by a notice part. `field` names the part's Content-Type.
    Part,
    /// A new header field: the range is empty, at the end of the last field of a part's
    /// heading, and the replacement is the whole field with its line ending. `field`
    /// names the new field. Never in the top-level heading (that would be add_header).
    Insert,
    /// A header field taken out: the range runs from its name to after its line
    /// ending, the replacement is empty.
    Remove,
}

/// A reference the edit changes, for logs, the report header and `check --actions`.
/// Both URLs are display-safe: printable ASCII only (no CR, LF or NUL), %-encoded where
/// needed and truncated (see `rewrite::display_url`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UrlChange {
    /// The rule that stands for the change (`extbody-url-rewritten`,
    /// `extbody-legacy-access-type`, or the denied-scheme rule for a strip).
    pub rule: Rule,
    pub old: String,
    /// The URL written instead; None when the reference is stripped.
    pub new: Option<String>,
}

/// One replacement of a byte range of the original message.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Edit {
    /// For a field edit, the value's range in the original message (after the colon,
    /// before the line ending that ends the field); for a part edit, the part's range;
    /// for an insertion, an empty range where the field goes; for a removal, the field.
    #[serde(skip)]
    pub range: Range<usize>,
    /// The new value: what goes between the colon and the final line ending. It keeps the
    /// leading space of the original value and the original line-ending convention.
    /// For a part edit: the whole notice part, in the part's own line endings.
    #[serde(serialize_with = "lossy")]
    pub replacement: Vec<u8>,
    pub field: FieldLoc,
    pub kind: EditKind,
    /// The rules this edit repairs.
    pub rules: Vec<Rule>,
    /// When set, the edit is applied only if a finding of this rule asks for it: a URL
    /// rewrite or a strip must not ride along with an unrelated fold of the same field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requires: Option<Rule>,
    /// When set, the edit is applied only together with the edit of this index: a
    /// repair that a part needs only once another is made (the disposition of a part
    /// `ref-image-type` retypes) is neither made without it nor forced on by it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rides_on: Option<usize>,
    /// The reference this edit changes, if it changes one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change: Option<UrlChange>,
}

fn lossy<S: serde::Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&String::from_utf8_lossy(v))
}

/// Why [`apply`] refused a set of edits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyError {
    Overlap {
        first: Range<usize>,
        second: Range<usize>,
    },
    OutOfBounds {
        range: Range<usize>,
        len: usize,
    },
}

impl std::fmt::Display for ApplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApplyError::Overlap { first, second } => {
                write!(f, "edits overlap: {first:?} and {second:?}")
            }
            ApplyError::OutOfBounds { range, len } => {
                write!(f, "edit {range:?} outside a message of {len} octets")
            }
        }
    }
}

impl std::error::Error for ApplyError {}

/// Applies edits to `raw`. Every byte outside the edited ranges is copied unchanged.
pub fn apply<'e>(
    raw: &[u8],
    edits: impl IntoIterator<Item = &'e Edit>,
) -> Result<Vec<u8>, ApplyError> {
    let mut sorted: Vec<&Edit> = edits.into_iter().collect();
    sorted.sort_by_key(|e| (e.range.start, e.range.end));
    let mut out =
        Vec::with_capacity(raw.len() + sorted.iter().map(|e| e.replacement.len()).sum::<usize>());
    let mut pos = 0;
    let mut prev: Option<&Range<usize>> = None;
    for e in sorted {
        if e.range.start > e.range.end || e.range.end > raw.len() {
            return Err(ApplyError::OutOfBounds {
                range: e.range.clone(),
                len: raw.len(),
            });
        }
        if let Some(p) = prev {
            if e.range.start < p.end {
                return Err(ApplyError::Overlap {
                    first: p.clone(),
                    second: e.range.clone(),
                });
            }
        }
        out.extend_from_slice(&raw[pos..e.range.start]);
        out.extend_from_slice(&e.replacement);
        pos = e.range.end;
        prev = Some(&e.range);
    }
    out.extend_from_slice(&raw[pos..]);
    Ok(out)
}

/// Field rewrites collected during one analysis, at most one per field.
#[derive(Debug, Default)]
pub struct EditSet {
    edits: Vec<Edit>,
    /// Field value range -> index into `edits`: a message with thousands of edited parts
    /// must not make every lookup a scan.
    by_range: std::collections::HashMap<(usize, usize), usize>,
}

impl EditSet {
    /// No edit at all (most messages).
    pub fn is_empty(&self) -> bool {
        self.edits.is_empty()
    }

    /// Some edit replaces a range (a field's value, a part, a field): insertions alone
    /// leave every [`pending`](Self::pending) lookup empty.
    pub fn rewrites_any(&self) -> bool {
        !self.by_range.is_empty()
    }

    /// The value of the field as previous fixers left it, if any fixer touched it.
    pub fn pending(&self, range: &Range<usize>) -> Option<&[u8]> {
        self.find(range)
            .map(|i| self.edits[i].replacement.as_slice())
    }

    /// Records that `rule` rewrites the field at `range` to `value`. A second rewrite of the
    /// same field replaces the value (the caller started from [`EditSet::pending`]) and adds
    /// its rule. Returns the edit's index.
    pub fn rewrite(
        &mut self,
        range: Range<usize>,
        field: FieldLoc,
        value: Vec<u8>,
        rule: Rule,
    ) -> usize {
        if let Some(i) = self.find(&range) {
            let e = &mut self.edits[i];
            e.replacement = value;
            if !e.rules.contains(&rule) {
                e.rules.push(rule);
            }
            return i;
        }
        self.by_range
            .insert((range.start, range.end), self.edits.len());
        self.edits.push(Edit {
            range,
            replacement: value,
            field,
            kind: EditKind::Field,
            rules: vec![rule],
            requires: None,
            rides_on: None,
            change: None,
        });
        self.edits.len() - 1
    }

    /// Records the replacement of the whole body part at `range` by `part` (a strip).
    /// The edit is applied only when a finding of `rule` asks for it.
    pub fn replace_part(
        &mut self,
        range: Range<usize>,
        field: FieldLoc,
        part: Vec<u8>,
        rule: Rule,
        change: UrlChange,
    ) -> usize {
        if let Some(i) = self.find(&range) {
            return i;
        }
        self.by_range
            .insert((range.start, range.end), self.edits.len());
        self.edits.push(Edit {
            range,
            replacement: part,
            field,
            kind: EditKind::Part,
            rules: vec![rule],
            requires: Some(rule),
            rides_on: None,
            change: Some(change),
        });
        self.edits.len() - 1
    }

    /// Records that `rule` inserts the field `line` (name, colon, value and line ending)
    /// at `at`, the end of a heading's last field. One insertion per part and field
    /// name: a second rule asking for the same field shares the first one's edit.
    pub fn insert_field(&mut self, at: usize, field: FieldLoc, line: Vec<u8>, rule: Rule) -> usize {
        if let Some(i) = self.edits.iter().position(|e| {
            e.kind == EditKind::Insert
                && e.field.part == field.part
                && e.field.name.eq_ignore_ascii_case(&field.name)
        }) {
            self.also_fixes(i, rule);
            return i;
        }
        self.edits.push(Edit {
            range: at..at,
            replacement: line,
            field,
            kind: EditKind::Insert,
            rules: vec![rule],
            requires: None,
            rides_on: None,
            change: None,
        });
        self.edits.len() - 1
    }

    /// Records that `rule` takes out the field that spans `range` (name to line ending).
    pub fn remove_field(&mut self, range: Range<usize>, field: FieldLoc, rule: Rule) -> usize {
        if let Some(i) = self.find(&range) {
            self.also_fixes(i, rule);
            return i;
        }
        self.by_range
            .insert((range.start, range.end), self.edits.len());
        self.edits.push(Edit {
            range,
            replacement: Vec::new(),
            field,
            kind: EditKind::Remove,
            rules: vec![rule],
            requires: None,
            rides_on: None,
            change: None,
        });
        self.edits.len() - 1
    }

    /// Marks the edit as changing a reference: it is then applied only when a finding of
    /// `change.rule` asks for it.
    pub fn set_change(&mut self, index: usize, change: UrlChange) {
        if let Some(e) = self.edits.get_mut(index) {
            if !e.rules.contains(&change.rule) {
                e.rules.push(change.rule);
            }
            e.requires = Some(change.rule);
            e.change = Some(change);
        }
    }

    /// Makes the edit one that is applied only when the edit `on` is applied.
    pub fn ride_on(&mut self, index: usize, on: usize) {
        if let Some(e) = self.edits.get_mut(index) {
            e.rides_on = Some(on);
        }
    }

    /// Adds `rule` to an edit that already repairs it as a side effect (e.g. a fold that
    /// also cures an over-long line).
    pub fn also_fixes(&mut self, index: usize, rule: Rule) {
        if let Some(e) = self.edits.get_mut(index) {
            if !e.rules.contains(&rule) {
                e.rules.push(rule);
            }
        }
    }

    pub fn find(&self, range: &Range<usize>) -> Option<usize> {
        self.by_range.get(&(range.start, range.end)).copied()
    }

    pub fn into_vec(self) -> Vec<Edit> {
        self.edits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc() -> FieldLoc {
        FieldLoc {
            part: "0".into(),
            name: "X".into(),
            occurrence: 1,
            top_level: true,
        }
    }

    fn edit(range: Range<usize>, rep: &str) -> Edit {
        Edit {
            range,
            replacement: rep.into(),
            field: loc(),
            kind: EditKind::Field,
            rules: vec![Rule::HeaderLineTooLong],
            requires: None,
            rides_on: None,
            change: None,
        }
    }

    #[test]
    fn apply_keeps_everything_outside_the_edits() {
        let raw = b"0123456789";
        let out = apply(raw, &[edit(7..9, "xyz"), edit(2..3, "")]).unwrap();
        assert_eq!(out, b"013456xyz9");
        assert_eq!(apply(raw, &[]).unwrap(), raw);
    }

    #[test]
    fn apply_refuses_overlaps_and_out_of_range() {
        let raw = b"0123456789";
        assert!(matches!(
            apply(raw, &[edit(1..5, ""), edit(4..6, "")]),
            Err(ApplyError::Overlap { .. })
        ));
        assert!(matches!(
            apply(raw, &[edit(8..11, "")]),
            Err(ApplyError::OutOfBounds { .. })
        ));
    }

    #[test]
    fn rewrites_of_one_field_compose() {
        let mut set = EditSet::default();
        let a = set.rewrite(3..8, loc(), b" one".to_vec(), Rule::RelatedTypeMissing);
        assert_eq!(set.pending(&(3..8)), Some(&b" one"[..]));
        let b = set.rewrite(3..8, loc(), b" two".to_vec(), Rule::HeaderLineTooLong);
        assert_eq!(a, b);
        let v = set.into_vec();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].replacement, b" two");
        assert_eq!(
            v[0].rules,
            vec![Rule::RelatedTypeMissing, Rule::HeaderLineTooLong]
        );
    }
}
