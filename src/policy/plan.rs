//! The plan: everything the daemon does to a message, decided in one place from the
//! analysis and the policy. Pure: the milter sends a plan to the MTA
//! (`milter::actions::execute`), the CLI's `check --actions` prints it and `fix
//! --as-milter` applies it with [`delivered`], for the bytes [`intake::as_received`]
//! says the daemon would have kept.
//!
//! [`Planner`] holds what it needs of the configuration: the policies, [`Report`],
//! [`Replies`] and the limits, settings types of this layer that the configuration
//! holds as sections.
//!
//! [`intake::as_received`]: super::intake::as_received

use std::fmt;

use crate::engine::{self, model::mime, Analysis, Edit, Limits, Rule, UrlChange};
pub use crate::policy::report::Report;
use crate::policy::scope::Selection;
use crate::policy::{Action, Direction, Policies};

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

/// `[reply] reject` when not set.
pub const DEFAULT_REJECT_REPLY: &str = "550 5.6.0 MIME reference error: {rules}";
/// `[reply] tempfail` when not set.
pub const DEFAULT_TEMPFAIL_REPLY: &str = "451 4.6.0 MIME reference error: {rules}";
/// `[reply] quarantine` when not set.
pub const DEFAULT_QUARANTINE_REASON: &str = "MIME reference error: {rules}";

/// `[reply]`: what a refused message is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replies {
    pub reject: ReplyTemplate,
    pub tempfail: ReplyTemplate,
    pub quarantine: String,
}

/// An SMTP reply: code, enhanced status code and a text template where `{rules}` stands
/// for the rule ids that decided the verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyTemplate {
    pub code: String,
    pub status: String,
    pub text: String,
}

/// `[reply]` as it is when the file says nothing of it.
impl Default for Replies {
    fn default() -> Self {
        let template = |text, class| match ReplyTemplate::parse(text, class) {
            Ok(t) => t,
            // The defaults above are valid replies; a test keeps them so.
            Err(e) => unreachable!("{e}"),
        };
        Replies {
            reject: template(DEFAULT_REJECT_REPLY, '5'),
            tempfail: template(DEFAULT_TEMPFAIL_REPLY, '4'),
            quarantine: DEFAULT_QUARANTINE_REASON.to_string(),
        }
    }
}

impl ReplyTemplate {
    /// Parses `"550 5.6.0 text"`; `class` is the required first digit (`'5'`/`'4'`).
    pub fn parse(s: &str, class: char) -> Result<ReplyTemplate, String> {
        let mut it = s.splitn(3, ' ');
        let code = it.next().unwrap_or("");
        let status = it.next().unwrap_or("");
        let text = it.next().unwrap_or("").trim();
        let code_ok =
            code.len() == 3 && code.starts_with(class) && code.bytes().all(|b| b.is_ascii_digit());
        if !code_ok {
            return Err(format!(
                "reply {s:?} must start with a {class}xx SMTP code, e.g. \"{class}50 {class}.6.0 text\""
            ));
        }
        let parts: Vec<&str> = status.split('.').collect();
        let status_ok = parts.len() == 3
            && parts[0] == class.to_string()
            && parts[1..]
                .iter()
                .all(|p| (1..=3).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()));
        if !status_ok {
            return Err(format!(
                "reply {s:?}: second word must be an enhanced status code {class}.X.Y (RFC 3463)"
            ));
        }
        if text.is_empty() {
            return Err(format!("reply {s:?} has no text"));
        }
        check_printable(text).map_err(|e| format!("reply {s:?}: {e}"))?;
        Ok(ReplyTemplate {
            code: code.into(),
            status: status.into(),
            text: text.into(),
        })
    }
}

/// Reply texts and header values go to the MTA verbatim: control characters (CR, LF, NUL
/// above all) would break the protocol or smuggle lines.
pub fn check_printable(s: &str) -> Result<(), String> {
    match s.chars().find(|c| c.is_control()) {
        Some(c) => Err(format!("control character {c:?} not allowed")),
        None => Ok(()),
    }
}

/// The settings a plan is made from, borrowed from the configuration in force.
#[derive(Debug, Clone)]
pub struct Planner<'a> {
    pub policies: &'a Policies,
    pub report: &'a Report,
    pub replies: &'a Replies,
    pub limits: Limits,
}

impl Planner<'_> {
    /// A change record as log lines and the report header may show it.
    fn shown(&self, c: UrlChange) -> UrlChange {
        if !self.report.redact_urls {
            return c;
        }
        let r = |u: &str| super::redact::redact(u).into_owned();
        UrlChange {
            rule: c.rule,
            old: r(&c.old),
            new: c.new.as_deref().map(r),
        }
    }

    /// The plan for a message as the daemon received it, under the direction's policy
    /// alone. Tests only: the daemon and the CLI always pass the scopes' selection.
    #[cfg(test)]
    pub fn plan_received(
        &self,
        dir: Direction,
        analysis: &Analysis,
        raw: &[u8],
        dry_run: bool,
        received: Received,
    ) -> Plan {
        self.plan_scoped(dir, analysis, raw, dry_run, received, &Selection::none())
    }

    /// The plan for a message as the daemon received it, in the scopes `scopes` (see
    /// [`Scopes::select`](super::scope::Scopes::select)).
    pub fn plan_scoped(
        &self,
        dir: Direction,
        analysis: &Analysis,
        raw: &[u8],
        dry_run: bool,
        received: Received,
        scopes: &Selection,
    ) -> Plan {
        let (mut plan, actions) = self.decide(dir, analysis, dry_run, received, scopes);
        if let Some(reply) = self.refusal(&plan) {
            plan.reply = Some(reply);
            return plan;
        }
        let heading = LazyHeading::new(raw, &self.limits);
        self.remove_forged(&mut plan, received, &heading);
        let applied = self.send_fixes(&mut plan, analysis, &actions, raw, received, &heading);
        self.record_fixes(&mut plan, &applied, raw);
        if plan.verdict == Action::Quarantine {
            plan.quarantine = Some(expand(&self.replies.quarantine, &plan.decided_by));
        }
        if let Some(name) = &self.report.header {
            if scopes.wants_header(self.report, plan.verdict) {
                let value = fold_report(name.len(), &report_value(&plan));
                plan.report = Some((name.clone(), value));
            }
        }
        plan
    }

    /// The decisions of [`plan_scoped`](Self::plan_scoped) without the actions that
    /// carry them out: each finding's action, the verdict, the rules behind it and the
    /// scope that decided. What `survey` counts; it never builds a fixed message.
    pub fn verdict_scoped(
        &self,
        dir: Direction,
        analysis: &Analysis,
        received: Received,
        scopes: &Selection,
    ) -> Plan {
        self.decide(dir, analysis, false, received, scopes).0
    }

    /// The plan's decisions, and each finding's action in finding order.
    fn decide(
        &self,
        dir: Direction,
        analysis: &Analysis,
        dry_run: bool,
        received: Received,
        scopes: &Selection,
    ) -> (Plan, Vec<Action>) {
        let oversize = received.incomplete
            || analysis
                .findings
                .iter()
                .any(|f| f.rule == Rule::MessageTooLarge);
        let mut plan = Plan::new(dir, dry_run, oversize);
        // Each finding's action, once: below the header's threshold a report is only
        // logged unless a policy key names the rule; over several scopes the safe side
        // wins (`scope::combine`).
        let actions: Vec<Action> = analysis
            .findings
            .iter()
            .map(|f| scopes.decide(dir, self.policies, self.report, f))
            .collect();
        plan.decisions = self.decisions(analysis, &actions, oversize, scopes);
        summarise(&mut plan);
        if scopes.scoped() {
            plan.scopes = scopes.names();
            let by = scopes.decided_by(
                dir,
                self.policies,
                self.report,
                &analysis.findings,
                oversize,
                plan.verdict,
            );
            plan.scope = Some(by.to_string());
        }
        (plan, actions)
    }

    /// The action of each finding in finding order, and of the oversize limit: it is
    /// added when the engine made no finding of it, and raises the action of the one
    /// it made.
    fn decisions(
        &self,
        analysis: &Analysis,
        actions: &[Action],
        oversize: bool,
        scopes: &Selection,
    ) -> Vec<(Rule, Action)> {
        let mut decided: Vec<(Rule, Action)> = analysis
            .findings
            .iter()
            .zip(actions)
            .map(|(f, a)| (f.rule, *a))
            .collect();
        if oversize {
            let oversize_action = scopes.oversize(self.policies);
            let mut found = false;
            for d in decided
                .iter_mut()
                .filter(|(r, _)| *r == Rule::MessageTooLarge)
            {
                d.1 = d.1.max(oversize_action);
                found = true;
            }
            if !found {
                decided.push((Rule::MessageTooLarge, oversize_action));
            }
        }
        decided
    }

    /// The reply of a rejected or tempfailed message: nothing else is sent then.
    fn refusal(&self, plan: &Plan) -> Option<Reply> {
        match plan.verdict {
            Action::Reject => Some(reply(&self.replies.reject, &plan.decided_by)),
            Action::Tempfail => Some(reply(&self.replies.tempfail, &plan.decided_by)),
            _ => None,
        }
    }

    /// Deletes the copies of the report header an inbound message arrived with. They go
    /// first: deletions shift the indices of later fields of the same name, so the
    /// highest occurrence is deleted first.
    fn remove_forged(&self, plan: &mut Plan, received: Received, heading: &LazyHeading) {
        let Some(name) = &self.report.header else {
            return;
        };
        if plan.direction != Direction::Inbound || !self.report.remove_forged {
            return;
        }
        let n = received
            .report_fields
            .unwrap_or_else(|| heading.get().count(name.as_bytes()));
        for index in (1..=n).rev() {
            plan.header_changes.push(HeaderChange {
                name: name.as_bytes().to_vec(),
                index,
                value: None,
            });
        }
    }

    /// Turns the edits of the findings whose action is `fix` into header changes and a
    /// body replacement; an edit that cannot be sent becomes a note. The edits sent, in
    /// message order.
    fn send_fixes<'a>(
        &self,
        plan: &mut Plan,
        analysis: &'a Analysis,
        actions: &[Action],
        raw: &[u8],
        received: Received,
        heading: &LazyHeading,
    ) -> Vec<&'a Edit> {
        let edits = analysis.edits_where(|i| actions.get(i) == Some(&Action::Fix));
        let mut nested: Vec<&Edit> = Vec::new();
        let mut applied: Vec<&Edit> = Vec::new();
        for e in edits {
            if e.field.top_level && e.kind == engine::EditKind::Remove {
                plan.header_changes.push(HeaderChange {
                    name: e.field.name.as_bytes().to_vec(),
                    index: e.field.occurrence,
                    value: None,
                });
                applied.push(e);
            } else if e.field.top_level && e.kind == engine::EditKind::Insert {
                // The engine inserts into the headings of parts only; a new top-level
                // field would be add_header, which the planner keeps for the report.
                plan.notes.push(format!(
                    "{} (part 0): not sent: a new top-level field",
                    e.field.name
                ));
            } else if e.field.top_level {
                match header_value(&e.replacement, heading.get().fold_eol) {
                    Ok(value) if e.field.name.len() + value.len() + 6 > MAX_PACKET => {
                        // The whole message would tempfail on the write error, again at each
                        // retry: leave the field as it is and say so instead.
                        plan.notes.push(format!(
                            "{} (part 0): not sent: {} octets do not fit in one milter packet",
                            e.field.name,
                            value.len()
                        ))
                    }
                    Ok(value) => {
                        plan.header_changes.push(HeaderChange {
                            name: e.field.name.as_bytes().to_vec(),
                            index: e.field.occurrence,
                            value: Some(value),
                        });
                        applied.push(e);
                    }
                    Err(why) => plan
                        .notes
                        .push(format!("{} (part 0): not sent: {why}", e.field.name)),
                }
            } else if received.incomplete {
                plan.notes.push(format!(
                    "{} (part {}): not sent: the message was not read whole",
                    e.field.name, e.field.part
                ));
            } else if e.range.start < heading.get().body_start {
                plan.notes.push(format!(
                    "{} (part {}): not sent: edit outside the body",
                    e.field.name, e.field.part
                ));
            } else {
                nested.push(e);
            }
        }
        if !nested.is_empty() {
            match engine::apply(raw, nested.iter().copied()) {
                Ok(mut new) => {
                    // The body stays in the buffer `apply` made: a copy of it was a
                    // third message-sized buffer beside the message and that one, past
                    // SECURITY.md's two per analysis.
                    let start = heading.get().body_start.min(new.len());
                    new.drain(..start);
                    plan.body = Some(new);
                    plan.body_edits = nested.len();
                    applied.extend(nested.iter().copied());
                }
                Err(e) => plan.notes.push(format!("body not replaced: {e}")),
            }
        }
        applied.sort_by_key(|e| e.range.start);
        applied
    }

    /// The change records and the rules repaired by the edits sent.
    fn record_fixes(&self, plan: &mut Plan, applied: &[&Edit], raw: &[u8]) {
        plan.changes = applied
            .iter()
            .filter_map(|e| e.change.clone().map(|c| (e.field.part.clone(), c)))
            .map(|(part, c)| (part, self.shown(c)))
            .collect();
        plan.field_changes = applied
            .iter()
            .filter(|e| e.change.is_none())
            .filter_map(|e| field_change(e, raw))
            .collect();
        let applied_rules: Vec<Rule> = applied
            .iter()
            .flat_map(|e| e.rules.iter().copied())
            .collect();
        plan.fixed = sorted_unique(
            plan.decisions
                .iter()
                .filter(|(r, a)| *a == Action::Fix && applied_rules.contains(r))
                .map(|(r, _)| *r),
        );
    }
}

/// The verdict (the strongest action) and the rules behind each part of it.
fn summarise(plan: &mut Plan) {
    let decided = &plan.decisions;
    plan.verdict = decided
        .iter()
        .map(|(_, a)| *a)
        .max()
        .unwrap_or(Action::Ignore);
    let verdict = plan.verdict;
    let rules_where = |keep: &dyn Fn(Action) -> bool| {
        sorted_unique(decided.iter().filter(|(_, a)| keep(*a)).map(|(r, _)| *r))
    };
    plan.rules = rules_where(&|a| a != Action::Ignore);
    plan.reported = rules_where(&|a| a >= Action::Report);
    plan.decided_by = rules_where(&|a| a == verdict);
}

/// The top-level heading, read only for what needs it: a message with nothing to fix
/// (most mail) is not parsed a second time.
struct LazyHeading<'r> {
    raw: &'r [u8],
    limits: &'r Limits,
    read: std::cell::OnceCell<Heading>,
}

impl<'r> LazyHeading<'r> {
    fn new(raw: &'r [u8], limits: &'r Limits) -> Self {
        LazyHeading {
            raw,
            limits,
            read: std::cell::OnceCell::new(),
        }
    }

    fn get(&self) -> &Heading {
        self.read
            .get_or_init(|| Heading::read(self.raw, self.limits))
    }
}

/// The message as the MTA delivers it after `plan`: header changes applied in the order
/// they are sent, the body replaced, the report header added as the last field of the
/// heading (where Postfix and Sendmail put `add_header`, tests/mta/QUIRKS.md). None when
/// the plan refuses the message. For `fix --as-milter` and the reader tests.
pub fn delivered(plan: &Plan, raw: &[u8], limits: &Limits) -> Option<Vec<u8>> {
    if plan.dry_run {
        return Some(raw.to_vec());
    }
    if plan.verdict.refuses() {
        return None;
    }
    let msg = mime::Message::parse(raw, limits);
    let Some(e) = msg.entities.first() else {
        return Some(raw.to_vec());
    };
    let eol = e.eol();
    let line_ends = |v: &[u8]| -> Vec<u8> {
        let mut out = Vec::with_capacity(v.len() + 8);
        for (i, &b) in v.iter().enumerate() {
            if b == b'\n' && (i == 0 || v[i - 1] != b'\r') {
                out.extend_from_slice(eol);
            } else {
                out.push(b);
            }
        }
        out
    };
    let fields = msg.fields(e);
    // (name, the whole field as it will be written)
    let mut heading: Vec<(Vec<u8>, Vec<u8>)> = fields
        .iter()
        .map(|f| (raw[f.name.clone()].to_vec(), raw[f.start..f.end].to_vec()))
        .collect();
    for c in &plan.header_changes {
        let Some(at) = heading
            .iter()
            .enumerate()
            .filter(|(_, (n, _))| n.eq_ignore_ascii_case(&c.name))
            .nth(c.index.saturating_sub(1))
            .map(|(i, _)| i)
        else {
            continue;
        };
        match &c.value {
            None => {
                heading.remove(at);
            }
            Some(v) => {
                let mut field = heading[at].0.clone();
                field.push(b':');
                field.extend_from_slice(&line_ends(v));
                field.extend_from_slice(eol);
                heading[at].1 = field;
            }
        }
    }
    if let Some((name, value)) = &plan.report {
        let mut field = name.as_bytes().to_vec();
        field.push(b':');
        field.extend_from_slice(&line_ends(value.as_bytes()));
        field.extend_from_slice(eol);
        heading.push((name.as_bytes().to_vec(), field));
    }
    let fields_end = fields.last().map_or(e.header.start, |f| f.end);
    let body_start = e.body.start.max(fields_end);
    let mut out = Vec::with_capacity(raw.len() + 512);
    out.extend_from_slice(&raw[..e.header.start.min(fields.first().map_or(0, |f| f.start))]);
    for (_, f) in &heading {
        out.extend_from_slice(f);
    }
    out.extend_from_slice(&raw[fields_end..body_start]);
    match &plan.body {
        Some(b) => out.extend_from_slice(b),
        None => out.extend_from_slice(&raw[body_start..]),
    }
    Some(out)
}

/// ` fix; rules=a,b; fixed=a` or ` ok`. The leading space is the field's (LEADING_SPACE).
fn report_value(plan: &Plan) -> String {
    if plan.reported.is_empty() {
        return " ok".into();
    }
    let mut v = format!(" {}; rules={}", plan.verdict, ids(&plan.reported, ","));
    if !plan.fixed.is_empty() {
        v.push_str(&format!("; fixed={}", ids(&plan.fixed, ",")));
    }
    if plan.oversize {
        v.push_str("; oversize");
    }
    // Each changed reference, URLs cut short: the header must stay one sane line.
    for (part, c) in plan.changes.iter().take(REPORT_CHANGES) {
        v.push_str(&format!("; changed={}", change_text(part, c, REPORT_URL)));
    }
    if plan.changes.len() > REPORT_CHANGES {
        v.push_str(&format!(
            "; changed+={}",
            plan.changes.len() - REPORT_CHANGES
        ));
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

/// Largest milter packet payload (libmilter and indymilter: 1 MiB - 1). A
/// change_header carries a 4-octet index, the name, the value and two NULs.
const MAX_PACKET: usize = 1024 * 1024 - 1;

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

/// What an edit did to its field; None for a part replaced (a strip, which has its
/// [`UrlChange`]).
fn field_change(e: &Edit, raw: &[u8]) -> Option<FieldChange> {
    // The value of a whole field (`Name: value` and its line ending).
    let value_of = |field: &[u8]| -> Vec<u8> {
        let colon = memchr::memchr(b':', field).map_or(0, |i| i + 1);
        field.get(colon..).unwrap_or_default().to_vec()
    };
    let (old, new) = match e.kind {
        engine::EditKind::Field => (
            Some(raw.get(e.range.clone())?.to_vec()),
            Some(e.replacement.clone()),
        ),
        engine::EditKind::Insert => (None, Some(value_of(&e.replacement))),
        engine::EditKind::Remove => (Some(value_of(raw.get(e.range.clone())?)), None),
        engine::EditKind::Part => return None,
    };
    Some(FieldChange {
        part: e.field.part.clone(),
        name: e.field.name.clone(),
        rules: e.rules.clone(),
        old,
        new,
    })
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

fn sorted_unique(it: impl Iterator<Item = Rule>) -> Vec<Rule> {
    let mut v: Vec<Rule> = it.collect();
    v.sort_by_key(|r| r.id());
    v.dedup();
    v
}

fn ids(rules: &[Rule], sep: &str) -> String {
    rules.iter().map(|r| r.id()).collect::<Vec<_>>().join(sep)
}

/// Fills `{rules}` in; whatever the template, no control character reaches the MTA.
fn expand(template: &str, rules: &[Rule]) -> String {
    let s = template.replace("{rules}", &ids(rules, ", "));
    let mut s: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    // SMTP reply lines are capped at 512 octets; libmilter at 980 per line of text.
    if s.len() > 400 {
        let mut cut = 397;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

fn reply(t: &ReplyTemplate, rules: &[Rule]) -> Reply {
    Reply {
        code: t.code.clone(),
        status: t.status.clone(),
        text: expand(&t.text, rules),
    }
}

/// The value for `change_header`: line breaks in the MTA's convention, every one of them
/// followed by white space (a fold), no NUL. Anything else could inject a header line.
fn header_value(replacement: &[u8], eol: &[u8]) -> Result<Vec<u8>, &'static str> {
    if replacement.contains(&0) {
        return Err("value contains NUL");
    }
    let mut out = Vec::with_capacity(replacement.len() + 8);
    let mut i = 0;
    while i < replacement.len() {
        let b = replacement[i];
        let brk = match b {
            b'\r' if replacement.get(i + 1) == Some(&b'\n') => 2,
            b'\n' => 1,
            b'\r' => return Err("value contains a bare CR"),
            _ => 0,
        };
        if brk == 0 {
            out.push(b);
            i += 1;
            continue;
        }
        if !matches!(replacement.get(i + brk), Some(b' ' | b'\t')) {
            return Err("line break not followed by white space");
        }
        out.extend_from_slice(eol);
        i += brk;
    }
    Ok(out)
}

/// The top-level heading as far as the actions need it.
struct Heading {
    /// (name, ) of each top-level field, in order.
    names: Vec<Vec<u8>>,
    body_start: usize,
    /// Line break inside folded values as the MTA sent them (LF, libmilter's
    /// convention, unless the MTA sent CRLF).
    fold_eol: &'static [u8],
}

impl Heading {
    fn read(raw: &[u8], limits: &Limits) -> Heading {
        let msg = mime::Message::parse(raw, &limits.heading_only());
        let mut h = Heading {
            names: Vec::new(),
            body_start: raw.len(),
            fold_eol: b"\n",
        };
        if let Some(e) = msg.entities.first() {
            h.body_start = e.body.start;
            for f in msg.fields(e) {
                h.names.push(msg.name(e, f).to_vec());
                let v = msg.value(e, f);
                if v.windows(2).any(|w| w == b"\r\n") {
                    h.fold_eol = b"\r\n";
                }
            }
        }
        h
    }

    fn count(&self, name: &[u8]) -> usize {
        self.names
            .iter()
            .filter(|n| n.eq_ignore_ascii_case(name))
            .count()
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

    #[test]
    fn header_values_cannot_inject_lines() {
        assert_eq!(header_value(b" a\r\n b", b"\n").unwrap(), b" a\n b");
        assert!(header_value(b" a\r\nX-Evil: 1", b"\n").is_err());
        assert!(header_value(b" a\nX", b"\n").is_err());
        assert!(header_value(b" a\rb", b"\n").is_err());
        assert!(header_value(b" a\0", b"\n").is_err());
        assert_eq!(
            expand("x {rules}\r\ny", &[Rule::RelatedCidDuplicate]),
            "x related-cid-duplicate  y"
        );
    }
}
