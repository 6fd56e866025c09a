//! What mail readers make of a rule's repair: the rows of docs/INTEROP.md's summary for
//! the cases whose `X-MIMERef` header names the rule.
//!
//! The binary must not read docs at run time (it is installed without them), so the
//! rows are kept in `readers.tsv` beside this file, included at build time; a test
//! derives the same table from docs/INTEROP.md and fails when they differ, so the page
//! never shows results the matrix no longer holds (`MIMEREF_BLESS=1` rewrites it).
//!
//! One line per case: id, rules (comma-separated), change, applied by default, then the
//! readers rating the change better, the same, worse and otherwise (comma-separated).

use std::fmt::Write as _;

use super::escape;
use crate::engine::Rule;

const TABLE: &str = include_str!("readers.tsv");
/// Cases shown per rule.
const SHOWN: usize = 4;

struct Case<'a> {
    id: &'a str,
    title: &'a str,
    applied: &'a str,
    verdicts: [Vec<&'a str>; 4],
}

fn cases(rule: Rule) -> Vec<Case<'static>> {
    TABLE
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let [id, rules, title, applied, better, same, worse, differs] = f[..] else {
                return None;
            };
            rules.split(',').any(|r| r == rule.id()).then(|| {
                let names = |s: &'static str| s.split(',').filter(|x| !x.is_empty()).collect();
                Case {
                    id,
                    title,
                    applied,
                    verdicts: [names(better), names(same), names(worse), names(differs)],
                }
            })
        })
        .collect()
}

/// The readers' table of `rule`, when the matrix holds a case of it.
pub(super) fn table(rule: Rule, h: &mut String) -> std::fmt::Result {
    let cases = cases(rule);
    if cases.is_empty() {
        return Ok(());
    }
    writeln!(
        h,
        "<table class=\"readers\"><caption>What {} mail readers make of it (docs/INTEROP.md)</caption><thead><tr><th>change</th><th>applied by default</th><th>better</th><th>same</th><th>worse</th><th>otherwise</th></tr></thead><tbody>",
        cases[0].verdicts.iter().map(Vec::len).sum::<usize>()
    )?;
    for c in cases.iter().take(SHOWN) {
        let [better, same, worse, differs] = &c.verdicts;
        let named = |v: &Vec<&str>| {
            if v.is_empty() {
                "0".to_string()
            } else {
                format!("{}: {}", v.len(), escape(&v.join(", ")))
            }
        };
        writeln!(
            h,
            "<tr data-case=\"{}\"><td>{}</td><td data-label=\"applied by default\">{}</td><td class=\"num\" data-label=\"better\">{}</td><td class=\"num\" data-label=\"same\">{}</td><td data-label=\"worse\">{}</td><td data-label=\"otherwise\">{}</td></tr>",
            escape(c.id),
            escape(c.title),
            escape(c.applied),
            better.len(),
            same.len(),
            named(worse),
            named(differs)
        )?;
    }
    writeln!(h, "</tbody></table>")
}

/// The table as derived from docs/INTEROP.md (see the top).
#[cfg(test)]
fn derive(doc: &str) -> String {
    let mut readers: Vec<&str> = Vec::new();
    let mut rows: Vec<(&str, Vec<&str>)> = Vec::new();
    let mut rules: std::collections::BTreeMap<&str, String> = Default::default();
    let mut section = "";
    // Rows are read from the summary table only: other tables link cases too.
    let mut in_summary = false;
    for line in doc.lines() {
        if let Some(rest) = line.strip_prefix("| change | applied by default | ") {
            readers = rest.trim_end_matches(" |").split(" | ").collect();
            in_summary = true;
        } else if !line.starts_with('|') {
            in_summary = false;
        }
        if let (true, Some(rest)) = (in_summary, line.strip_prefix("| [")) {
            let cells: Vec<&str> = rest.trim_end_matches(" |").split(" | ").collect();
            rows.push((cells[0], cells[1..].to_vec()));
        } else if let Some(id) = line
            .strip_prefix("<a id=\"")
            .and_then(|r| r.strip_suffix("\"></a>"))
        {
            section = id;
        } else if let Some(r) = line
            .strip_prefix("+X-MIMERef: ")
            .and_then(|v| v.split("rules=").nth(1))
        {
            let r = r.split(';').next().unwrap_or("").trim();
            rules.entry(section).or_insert_with(|| r.to_string());
        }
    }
    let mut out = String::new();
    for (link, cells) in rows {
        let Some((title, id)) = link.split_once("](#") else {
            continue;
        };
        let id = id.trim_end_matches(')');
        let Some(r) = rules.get(id) else { continue };
        let mut by: [Vec<&str>; 4] = Default::default();
        for (reader, v) in readers.iter().zip(&cells[1..]) {
            let i = match *v {
                "better" => 0,
                "same" => 1,
                "worse" => 2,
                _ => 3,
            };
            by[i].push(reader);
        }
        let _ = writeln!(
            out,
            "{id}\t{r}\t{title}\t{}\t{}\t{}\t{}\t{}",
            cells[0],
            by[0].join(","),
            by[1].join(","),
            by[2].join(","),
            by[3].join(",")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readers_table_is_the_one_docs_interop_holds() {
        let doc = include_str!("../../../../docs/INTEROP.md");
        let want = derive(doc);
        assert!(want.lines().count() >= 20, "too few cases derived:\n{want}");
        if std::env::var_os("MIMEREF_BLESS").is_some() {
            let p = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/src/cli/survey/html/readers.tsv"
            );
            std::fs::write(p, &want).unwrap();
        }
        assert_eq!(
            TABLE, want,
            "src/cli/survey/html/readers.tsv is not what docs/INTEROP.md says: MIMEREF_BLESS=1 cargo test --lib readers rewrites it"
        );
    }

    #[test]
    fn a_rule_gets_the_rows_of_its_cases() {
        let c = cases(
            Rule::ALL
                .iter()
                .copied()
                .find(|r| r.id() == "content-id-malformed")
                .unwrap(),
        );
        assert!(c.iter().any(|c| c.id == "content-id-bare"));
        let mut h = String::new();
        table(Rule::ALL[0], &mut h).unwrap();
        assert!(c
            .iter()
            .all(|c| c.verdicts.iter().map(Vec::len).sum::<usize>() >= 20));
    }
}
