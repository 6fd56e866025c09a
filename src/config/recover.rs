//! Every error of a configuration file in one run, not just the first.
//!
//! serde stops at the first unknown key or wrong type. So: record that error, blank out
//! the key-value (or table) it lies in, and deserialize again. Blanking replaces octets
//! with spaces and keeps line breaks, so every later error still points at its own line.
//! When nothing is left to complain about, the remaining keys go on to validation.

use std::ops::Range;

use serde::de::DeserializeOwned;
use toml_edit::{ImDocument, Item, Table};

/// At most this many errors of the same file: past that an admin has another problem.
const MAX_ERRORS: usize = 50;

/// An error located by byte offset into the text.
pub struct Located {
    pub offset: Option<usize>,
    pub message: String,
}

/// Deserializes `text` into `T`, collecting every error. `Some(value)` when what is left
/// after removing the bad entries deserializes; the errors say what was removed.
pub fn deserialize_all<T: DeserializeOwned>(text: &str) -> (Option<T>, Vec<Located>) {
    let mut errors = Vec::new();
    let mut current = text.to_string();
    loop {
        match toml::from_str::<T>(&current) {
            Ok(v) => return (Some(v), errors),
            Err(e) => {
                let span = e.span();
                errors.push(Located {
                    offset: span.as_ref().map(|s| s.start),
                    message: e.message().trim().to_string(),
                });
                // A syntax error cannot be stepped over; nor can an error without a place.
                let Some(span) = span else {
                    return (None, errors);
                };
                let Ok(doc) = ImDocument::parse(current.as_str()) else {
                    return (None, errors);
                };
                let Some(range) = enclosing(doc.as_table(), &span) else {
                    return (None, errors);
                };
                if errors.len() >= MAX_ERRORS {
                    return (None, errors);
                }
                current = blank(&current, range);
            }
        }
    }
}

/// The key-value or table (header and contents) of `table` that `err` lies in.
fn enclosing(table: &Table, err: &Range<usize>) -> Option<Range<usize>> {
    for (name, _) in table.iter() {
        let (key, item) = table.get_key_value(name)?;
        let key_span = key.span();
        match item {
            Item::Table(t) => {
                // A key-value inside the table first; else the error is the table's own
                // (an unknown `[name]`), and the whole table goes.
                if let Some(r) = enclosing(t, err) {
                    return Some(r);
                }
                let start = t.span().or(key_span.clone())?.start;
                let whole = start..extent(t).max(t.span().map_or(start, |s| s.end));
                if contains(&whole, err) || key_span.as_ref().is_some_and(|k| contains(k, err)) {
                    return Some(whole);
                }
            }
            Item::ArrayOfTables(tables) => {
                // `[[rewrite]]`, `[[scope]]`: within one of the tables, as above.
                for t in tables.iter() {
                    if let Some(r) = enclosing(t, err) {
                        return Some(r);
                    }
                    let Some(span) = t.span() else { continue };
                    let whole = span.start..extent(t).max(span.end);
                    if contains(&whole, err) {
                        return Some(whole);
                    }
                }
            }
            _ => {
                let (Some(k), Some(v)) = (key_span, item.span()) else {
                    continue;
                };
                let r = k.start..v.end;
                if contains(&r, err) {
                    return Some(r);
                }
            }
        }
    }
    None
}

/// The end of the last key-value inside `t`, nested tables included.
fn extent(t: &Table) -> usize {
    t.iter()
        .filter_map(|(name, _)| t.get_key_value(name))
        .map(|(_, item)| match item {
            Item::Table(inner) => extent(inner).max(inner.span().map_or(0, |s| s.end)),
            other => other.span().map_or(0, |s| s.end),
        })
        .max()
        .unwrap_or(0)
}

fn contains(outer: &Range<usize>, inner: &Range<usize>) -> bool {
    outer.start <= inner.start && inner.start < outer.end.max(outer.start + 1)
}

/// `text` with the octets of `range` turned into spaces, line breaks kept.
fn blank(text: &str, range: Range<usize>) -> String {
    let mut bytes = text.as_bytes().to_vec();
    let end = range.end.min(bytes.len());
    for b in &mut bytes[range.start.min(end)..end] {
        if *b != b'\n' && *b != b'\r' {
            *b = b' ';
        }
    }
    // Only ASCII spaces replaced whole characters' octets, so this stays UTF-8.
    String::from_utf8(bytes).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        n: Option<i64>,
        list: Option<Vec<String>>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        a: Option<String>,
        inner: Option<Inner>,
    }

    /// The line of each error, in `text`.
    fn lines_of(text: &str, errors: &[Located]) -> Vec<usize> {
        errors
            .iter()
            .map(|e| text[..e.offset.unwrap()].matches('\n').count() + 1)
            .collect()
    }

    #[test]
    fn every_error_is_collected_with_its_place() {
        let text =
            "a = 1\nbogus = [\n 1,\n 2]\n[inner]\nn = \"x\"\nlist = [\"ok\",\n 3]\n[nope]\nz = 1\n";
        let (value, errors) = deserialize_all::<Outer>(text);
        let lines = lines_of(text, &errors);
        assert_eq!(
            lines,
            [1, 2, 6, 8, 9],
            "{:?}",
            errors.iter().map(|e| &e.message).collect::<Vec<_>>()
        );
        let v = value.expect("what is left deserializes");
        let inner = v.inner.as_ref().unwrap();
        assert!(v.a.is_none() && inner.n.is_none() && inner.list.is_none());
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Listed {
        item: Option<Vec<Inner>>,
    }

    #[test]
    fn errors_in_arrays_of_tables_are_each_collected() {
        let text =
            "[[item]]\nn = 1\nbogus = 2\n[[item]]\nlist = [\"a\"]\nalso = 3\n[[item]]\nn = \"x\"\n";
        let (value, errors) = deserialize_all::<Listed>(text);
        let lines = lines_of(text, &errors);
        assert_eq!(
            lines,
            [3, 6, 8],
            "{:?}",
            errors.iter().map(|e| &e.message).collect::<Vec<_>>()
        );
        let items = value.expect("what is left deserializes").item.unwrap();
        assert_eq!(items.len(), 3);
        assert_eq!(items[0].n, Some(1));
        assert_eq!(items[1].list.as_deref(), Some(&["a".to_string()][..]));
    }

    #[test]
    fn syntax_errors_stop_at_once() {
        let (value, errors) = deserialize_all::<Outer>("a = \"unterminated\n");
        assert!(value.is_none());
        assert_eq!(errors.len(), 1);
    }
}
