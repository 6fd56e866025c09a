//! `[report]`: the header that reports findings and what goes in it. [`Report`] is a
//! settings type of this layer that the configuration holds as a section; the planner
//! and the decisions read it. [`header_value`] makes the header's value for a plan,
//! [`change_text`] the line a changed reference is shown as, there and in the log.

use super::{ids, Action};
use crate::engine::{self, Rule, Severity, UrlChange};

/// The report header's name when `[report] header` is not set.
pub const DEFAULT_REPORT_HEADER: &str = "X-MIMERef";

/// `[report]`: the header that reports findings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Report header name; None when reporting is off.
    pub header: Option<String>,
    /// Add the report header even when there is nothing to report.
    pub always: bool,
    /// Delete report headers already present in inbound mail (they could be forged).
    pub remove_forged: bool,
    /// A finding below this severity whose action is `report` is only logged: it adds no
    /// report header.
    pub min_severity: Severity,
    /// URLs in log lines and the report header lose their password (or user information)
    /// and query (`policy::redact`); off only to debug.
    pub redact_urls: bool,
}

/// `[report]` as it is when the file says nothing of it.
impl Default for Report {
    fn default() -> Self {
        Report {
            header: Some(DEFAULT_REPORT_HEADER.to_string()),
            always: false,
            remove_forged: true,
            min_severity: Severity::Warning,
            redact_urls: true,
        }
    }
}

/// The report header's value for a plan (`name` is the header's): the verdict, the
/// rules reported and fixed, and the first changed references, folded.
pub fn header_value(
    name: &str,
    verdict: Action,
    reported: &[Rule],
    fixed: &[Rule],
    oversize: bool,
    changes: &[(String, UrlChange)],
) -> String {
    let value = report_value(verdict, reported, fixed, oversize, changes);
    fold_report(name.len(), &value)
}

/// ` fix; rules=a,b; fixed=a` or ` ok`. The leading space is the field's (LEADING_SPACE).
fn report_value(
    verdict: Action,
    reported: &[Rule],
    fixed: &[Rule],
    oversize: bool,
    changes: &[(String, UrlChange)],
) -> String {
    if reported.is_empty() {
        return " ok".into();
    }
    let mut v = format!(" {}; rules={}", verdict, ids(reported, ","));
    if !fixed.is_empty() {
        v.push_str(&format!("; fixed={}", ids(fixed, ",")));
    }
    if oversize {
        v.push_str("; oversize");
    }
    // Each changed reference, URLs cut short: the header must stay one sane line.
    for (part, c) in changes.iter().take(REPORT_CHANGES) {
        v.push_str(&format!("; changed={}", change_text(part, c, REPORT_URL)));
    }
    if changes.len() > REPORT_CHANGES {
        v.push_str(&format!("; changed+={}", changes.len() - REPORT_CHANGES));
    }
    v
}

/// Folds a report header value so that no line passes 78 octets (RFC 5322 §2.1.1):
/// a line break goes before a space or after a comma. Folds are `\n` + SP, as both
/// MTAs expect in milter header values (tests/mta/QUIRKS.md).
fn fold_report(name_len: usize, value: &str) -> String {
    const LINE: usize = 78;
    let mut pieces: Vec<&str> = Vec::new();
    let mut start = 0;
    for (i, c) in value.char_indices() {
        if c == ' ' && i > start {
            pieces.push(&value[start..i]);
            start = i;
        } else if c == ',' {
            pieces.push(&value[start..=i]);
            start = i + 1;
        }
    }
    pieces.push(&value[start..]);
    let mut out = String::with_capacity(value.len() + value.len() / 32);
    let mut line = name_len + 1;
    for piece in pieces.into_iter().filter(|p| !p.is_empty()) {
        if line + piece.len() > LINE && !out.trim().is_empty() {
            out.push('\n');
            line = 0;
            if !piece.starts_with(' ') {
                out.push(' ');
                line = 1;
            }
        }
        out.push_str(piece);
        line += piece.len();
    }
    out
}

/// Changed references listed in the report header, and characters of each URL there.
const REPORT_CHANGES: usize = 3;
const REPORT_URL: usize = 60;

/// `2.1 extbody-url-rewritten <old> -> <new>` (or `-> stripped`), URLs cut at `max`.
/// The URLs are already display-safe; cutting them again keeps them so.
pub fn change_text(part: &str, c: &UrlChange, max: usize) -> String {
    let cut = |u: &str| engine::rewriting::rewrite::display_url(u.as_bytes(), max);
    match &c.new {
        Some(n) => format!("{part} {} <{}> -> <{}>", c.rule, cut(&c.old), cut(n)),
        None => format!("{part} {} <{}> -> stripped", c.rule, cut(&c.old)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_header_lines_stay_within_78_octets() {
        let rules: Vec<&str> = Rule::ALL.iter().map(|r| r.id()).collect();
        let value = format!(" fix; rules={}; fixed={}; changed=2.1 extbody-url-rewritten <http://a.example/{}> -> <https://a.example/x>", rules.join(","), rules.join(","), "p".repeat(50));
        let folded = fold_report("X-MIMERef".len(), &value);
        assert!(value.len() > 998);
        let mut lines = folded.split('\n');
        assert!("X-MIMERef:".len() + lines.next().unwrap().len() <= 78);
        for l in lines {
            assert!(l.len() <= 78 && l.starts_with(' '), "{l:?}");
        }
        // A fold before a space is just a line break; one after a comma adds a SP.
        assert_eq!(folded.replace(",\n ", ",").replace('\n', ""), value);
        assert_eq!(fold_report(9, " ok"), " ok");
    }
}
