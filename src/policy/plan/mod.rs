//! The plan: everything the daemon does to a message, decided in one place from the
//! analysis and the policy. Pure: the milter sends a plan to the MTA
//! (`milter::actions::execute`), the CLI's `check --actions` prints it and `fix
//! --as-milter` applies it with [`delivered()`], for the bytes [`intake::as_received`]
//! says the daemon would have kept.
//!
//! Here: the plan's types and how a plan and its changes are shown. [`planner`]: the
//! [`Planner`], which makes a plan from the analysis (each finding's action comes from
//! [`decide`](super::decide)); [`replies`]: `[reply]`, what a refused message is told;
//! `delivered`: the message as the MTA delivers it after a plan. The report header's
//! value is made in [`report`](super::report). The planner holds what it needs of the
//! configuration: the policies, [`Report`], [`Replies`] and the limits, settings types
//! of this layer that the configuration holds as sections.
//!
//! [`intake::as_received`]: super::intake::as_received

mod delivered;
mod planner;
mod replies;
#[cfg(test)]
mod tests;

use std::fmt;

use crate::engine::{self, Rule, UrlChange};
use crate::policy::report::change_text;
use crate::policy::{ids, Action, Direction};

pub use delivered::delivered;
pub use planner::Planner;
pub use replies::{
    check_printable, Replies, ReplyTemplate, DEFAULT_QUARANTINE_REASON, DEFAULT_REJECT_REPLY,
    DEFAULT_TEMPFAIL_REPLY,
};

/// A header field a fix changed, for the log: every repair says what it did, not only
/// the URL rewrites ([`UrlChange`]). Values are as written in the message, unfolded;
/// [`field_change_text`] makes them display-safe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldChange {
    /// Part path of the heading that holds the field (`0`: the top-level heading).
    pub part: String,
    pub name: String,
    pub rules: Vec<Rule>,
    /// The value before; None for a field inserted.
    pub old: Option<Vec<u8>>,
    /// The value after; None for a field removed.
    pub new: Option<Vec<u8>>,
}

/// One `change_header` call (a deletion when `value` is None).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderChange {
    pub name: Vec<u8>,
    /// 1-based occurrence among the top-level fields of that name: libmilter's index.
    pub index: usize,
    /// The whole new value including its leading space (we negotiate LEADING_SPACE),
    /// folded with the line break the MTA uses.
    pub value: Option<Vec<u8>>,
}

/// An SMTP error reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub code: String,
    pub status: String,
    pub text: String,
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.code, self.status, self.text)
    }
}

/// The milter's decision about one message and the exact actions it implies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub direction: Direction,
    pub verdict: Action,
    pub dry_run: bool,
    /// The message was larger than the configured limits (not read whole).
    pub oversize: bool,
    /// Rule ids found and logged (every finding whose action is not `ignore`), sorted.
    pub rules: Vec<Rule>,
    /// Rule ids named in the report header (action `report` or stronger), sorted.
    pub reported: Vec<Rule>,
    /// Rule ids whose action is the verdict: named in replies and quarantine reasons.
    pub decided_by: Vec<Rule>,
    /// Rule ids repaired by the edits sent.
    pub fixed: Vec<Rule>,
    /// `change_header` calls in the order they are sent.
    pub header_changes: Vec<HeaderChange>,
    /// The new body (everything after the header/body separator), when a field inside a
    /// MIME part is rewritten.
    pub body: Option<Vec<u8>>,
    pub reply: Option<Reply>,
    pub quarantine: Option<String>,
    /// `add_header(name, value)` of the report header.
    pub report: Option<(String, String)>,
    /// Edits that were on offer but not sent, and why.
    pub notes: Vec<String>,
    /// Field rewrites and part replacements carried by `body`.
    pub body_edits: usize,
    /// References changed by the edits sent (URL rewrites, legacy conversions, strips),
    /// with the part path, in message order. Display-safe (see `engine::UrlChange`).
    pub changes: Vec<(String, UrlChange)>,
    /// The header fields the edits sent changed, inserted or removed, in message order,
    /// except those `changes` already records.
    pub field_changes: Vec<FieldChange>,
    /// The action each finding got, in finding order (`fix` already turned into `report`
    /// where nothing was on offer).
    pub decisions: Vec<(Rule, Action)>,
    /// The `[[scope]]` that decided the verdict (`default`: the direction's policy, beside
    /// a scope); None when no scope applies to the message.
    pub scope: Option<String>,
    /// Every scope the message falls into (its recipients' scopes), file order,
    /// `default` last; empty when no scope applies.
    pub scopes: Vec<String>,
    /// What each signature that covered a repair on offer made of it, in message order.
    pub signed: Vec<SignedOutcome>,
}

/// What one signature that covered a repair on offer made of it: the repair made (and
/// what it relied on) or withheld (and why). A signature whose repairs no finding's
/// action asks for is not listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedOutcome {
    pub repaired: bool,
    /// The metrics' `reason` label: a [`engine::Lift`] or [`engine::Withheld`] reason,
    /// or `relayed` where a scope keeps what the configuration would repair.
    pub reason: &'static str,
    /// For a repair, what the log line says it relied on (`verified=…`, `bh-broken=…`).
    pub relied_on: Option<String>,
}

impl Plan {
    /// Number of field rewrites sent (header changes that are not deletions, plus the
    /// edits folded into the body replacement).
    pub fn edits(&self) -> usize {
        self.header_changes
            .iter()
            .filter(|c| c.value.is_some())
            .count()
            + self.body_edits
    }

    /// Number of header fields deleted: copies of the report header that the client
    /// sent (forged), in inbound mail.
    pub fn removed(&self) -> usize {
        self.header_changes
            .iter()
            .filter(|c| c.value.is_none())
            .count()
    }
}

// Kept out of the public struct literal so that `edits()` stays the single definition.
impl Plan {
    fn new(direction: Direction, dry_run: bool, oversize: bool) -> Plan {
        Plan {
            direction,
            verdict: Action::Ignore,
            dry_run,
            oversize,
            rules: Vec::new(),
            reported: Vec::new(),
            decided_by: Vec::new(),
            fixed: Vec::new(),
            header_changes: Vec::new(),
            body: None,
            reply: None,
            quarantine: None,
            report: None,
            notes: Vec::new(),
            body_edits: 0,
            changes: Vec::new(),
            field_changes: Vec::new(),
            decisions: Vec::new(),
            scope: None,
            scopes: Vec::new(),
            signed: Vec::new(),
        }
    }
}

/// What the daemon knows beyond the message bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Received {
    /// The MTA sent more than was buffered: the body must never be replaced.
    pub incomplete: bool,
    /// Top-level fields named like the report header, as the MTA counted them while
    /// sending (its change_header indices count the same way). None: count them in
    /// the message bytes.
    pub report_fields: Option<usize>,
}

/// A field value on one line: folds unfolded, runs of white space one space, octets
/// outside printable ASCII as `\xNN`, cut at `max` characters with `...`.
fn display_value(v: &[u8], max: usize) -> String {
    let mut out = String::new();
    let mut space = false;
    for &b in v.trim_ascii() {
        if b.is_ascii_whitespace() {
            space = true;
            continue;
        }
        let piece = match b {
            _ if space => format!(" {}", printable(b)),
            _ => printable(b),
        };
        space = false;
        if out.len() + piece.len() > max {
            out.push_str("...");
            break;
        }
        out.push_str(&piece);
    }
    out
}

fn printable(b: u8) -> String {
    match b {
        b'"' | b'\\' => format!("\\{}", b as char),
        0x21..0x7f => (b as char).to_string(),
        _ => format!("\\x{b:02X}"),
    }
}

/// The log's text of a field change: part, rules, field, and what it became.
pub fn field_change_text(c: &FieldChange, max: usize) -> String {
    let rules = ids(&c.rules, ",");
    let shown = |v: &[u8]| format!("\"{}\"", display_value(v, max));
    match (&c.old, &c.new) {
        (Some(o), Some(n)) => format!(
            "{} {rules} {}: {} -> {}",
            c.part,
            c.name,
            shown(o),
            shown(n)
        ),
        (None, Some(n)) => format!("{} {rules} {}: inserted {}", c.part, c.name, shown(n)),
        (Some(o), None) => format!("{} {rules} {}: removed {}", c.part, c.name, shown(o)),
        (None, None) => format!("{} {rules} {}", c.part, c.name),
    }
}

/// Printable form of header bytes: non-UTF-8 and control bytes escaped.
fn show(b: &[u8]) -> String {
    let mut s = String::new();
    for chunk in b.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\r' => s.push_str("\\r"),
                '\n' => s.push_str("\\n"),
                '\t' => s.push_str("\\t"),
                '"' => s.push_str("\\\""),
                '\\' => s.push_str("\\\\"),
                c if c.is_control() => s.push_str(&format!("\\x{:02x}", c as u32)),
                c => s.push(c),
            }
        }
        for b in chunk.invalid() {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = match self.verdict {
            Action::Reject => "reject",
            Action::Tempfail => "tempfail",
            _ => "accept",
        };
        writeln!(f, "direction: {}", self.direction)?;
        writeln!(
            f,
            "verdict: {}{}",
            self.verdict,
            if self.oversize { " (oversize)" } else { "" }
        )?;
        if let Some(s) = &self.scope {
            if self.scopes.len() > 1 {
                writeln!(f, "scope: {s} (recipients in {})", self.scopes.join(", "))?;
            } else {
                writeln!(f, "scope: {s}")?;
            }
        }
        if !self.rules.is_empty() {
            writeln!(f, "rules: {}", ids(&self.rules, " "))?;
            // Each rule's action in force, the built-in defaults of this direction and
            // configuration included: what the report header does not say.
            let mut shown: Vec<(Rule, Action)> = Vec::new();
            for &(r, a) in &self.decisions {
                match shown.iter_mut().find(|(x, _)| *x == r) {
                    Some(s) => s.1 = s.1.max(a),
                    None => shown.push((r, a)),
                }
            }
            let words: Vec<String> = shown
                .iter()
                .filter(|(_, a)| *a != Action::Ignore)
                .map(|(r, a)| format!("{}={a}", r.id()))
                .collect();
            writeln!(f, "actions: {}", words.join(" "))?;
        }
        for s in &self.signed {
            match &s.relied_on {
                Some(r) if s.repaired => writeln!(f, "signed: repaired ({r})")?,
                _ => writeln!(f, "signed: withheld ({})", s.reason)?,
            }
        }
        if self.dry_run {
            writeln!(
                f,
                "dry run: nothing is sent; the message is accepted; it would be:"
            )?;
        }
        for c in &self.header_changes {
            match &c.value {
                Some(v) => writeln!(
                    f,
                    "change_header: {} index {} value \"{}\"",
                    show(&c.name),
                    c.index,
                    show(v)
                )?,
                None => writeln!(f, "delete_header: {} index {}", show(&c.name), c.index)?,
            }
        }
        match &self.body {
            Some(b) => writeln!(f, "replace_body: yes, {} octets", b.len())?,
            None => writeln!(f, "replace_body: no")?,
        }
        for (part, c) in &self.changes {
            let what = if c.new.is_some() { "rewrite" } else { "strip" };
            writeln!(
                f,
                "{what}: {}",
                change_text(part, c, engine::rewriting::rewrite::DISPLAY_MAX)
            )?;
        }
        if let Some(q) = &self.quarantine {
            writeln!(f, "quarantine: \"{}\"", show(q.as_bytes()))?;
        }
        if let Some((n, v)) = &self.report {
            writeln!(f, "add_header: {} value \"{}\"", n, show(v.as_bytes()))?;
        }
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        match &self.reply {
            Some(r) => writeln!(f, "reply: {status} {r}"),
            None => writeln!(f, "reply: {status}"),
        }
    }
}
