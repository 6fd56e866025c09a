//! The planner: the plan for a message from its analysis, under the policies, the
//! report settings and the replies in force. Which action each finding gets is
//! [`decide`](crate::policy::decide)'s; here those actions become header changes, a new
//! body, a reply, a quarantine reason and the report header.

use super::replies::{expand, reply};
use super::{FieldChange, HeaderChange, Plan, Received, Replies, Reply, SignedOutcome};
use crate::engine::{self, model::mime, Analysis, Edit, FixSigned, Limits, Rule, UrlChange};
use crate::policy::decide::{self, Decider};
use crate::policy::report::{self, Report};
use crate::policy::scope::Selection;
use crate::policy::{Action, Direction, Policies};

/// The settings a plan is made from, borrowed from the configuration in force.
#[derive(Debug, Clone)]
pub struct Planner<'a> {
    pub policies: &'a Policies,
    pub report: &'a Report,
    pub replies: &'a Replies,
    pub limits: Limits,
    /// The configuration's `fix_signed`, which scopes may lower.
    pub fix_signed: FixSigned,
}

impl Planner<'_> {
    /// A change record as log lines and the report header may show it.
    fn shown(&self, c: UrlChange) -> UrlChange {
        if !self.report.redact_urls {
            return c;
        }
        let r = |u: &str| crate::policy::redact::redact(u).into_owned();
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
            if decide::wants_header(scopes.effects(), self.report, plan.verdict) {
                let value = report::header_value(
                    name,
                    plan.verdict,
                    &plan.reported,
                    &plan.fixed,
                    plan.oversize,
                    &plan.changes,
                );
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
        let decider = Decider {
            dir,
            policies: self.policies,
            report: self.report,
            fix_signed: self.fix_signed,
            broken_signatures: analysis.broken_signatures(),
        };
        // Each finding's action, once, over every scope the message falls into.
        let actions: Vec<Action> = analysis
            .findings
            .iter()
            .map(|f| decider.finding(scopes.effects(), f))
            .collect();
        let oversize_action = oversize.then(|| decider.oversize(scopes.effects()));
        plan.decisions = decide::decisions(&analysis.findings, &actions, oversize_action);
        let verdict = decide::verdict(&plan.decisions);
        plan.verdict = verdict.action;
        plan.rules = verdict.rules;
        plan.reported = verdict.reported;
        plan.decided_by = verdict.decided_by;
        plan.signed = self.signed_outcomes(analysis, &actions, scopes);
        if scopes.scoped() {
            plan.scopes = scopes.names();
            let by = scopes.decided_by(&decider, &analysis.findings, oversize, plan.verdict);
            plan.scope = Some(by.to_string());
        }
        (plan, actions)
    }

    /// What each signature that covered a repair on offer made of it, under the actions
    /// decided: made where one of its edits is a fix's, withheld where the engine
    /// withheld them (`relayed` when only a scope's `fix_signed` kept them).
    fn signed_outcomes(
        &self,
        analysis: &Analysis,
        actions: &[Action],
        scopes: &Selection,
    ) -> Vec<SignedOutcome> {
        if analysis.signatures.is_empty() {
            return Vec::new();
        }
        let chosen = analysis.edits_where(|i| actions.get(i) == Some(&Action::Fix));
        let lowered = scopes.fix_signed(self.fix_signed) < self.fix_signed;
        let mut out = Vec::new();
        for s in &analysis.signatures {
            match s.decision {
                Ok(lift) => {
                    let made = s
                        .edits
                        .iter()
                        .any(|&i| chosen.iter().any(|e| std::ptr::eq(*e, &analysis.edits[i])));
                    if made {
                        out.push(SignedOutcome {
                            repaired: true,
                            reason: lift.reason(),
                            relied_on: s.relied_on(),
                        });
                    }
                }
                Err(why) => {
                    let relayed = lowered && s.standing.decision(s.kind, self.fix_signed).is_ok();
                    out.push(SignedOutcome {
                        repaired: false,
                        reason: if relayed { "relayed" } else { why.reason() },
                        relied_on: None,
                    });
                }
            }
        }
        out
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
        plan.fixed = decide::sorted_unique(
            plan.decisions
                .iter()
                .filter(|(r, a)| *a == Action::Fix && applied_rules.contains(r))
                .map(|(r, _)| *r),
        );
    }
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

/// Largest milter packet payload (libmilter and indymilter: 1 MiB - 1). A
/// change_header carries a 4-octet index, the name, the value and two NULs.
const MAX_PACKET: usize = 1024 * 1024 - 1;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_cannot_inject_lines() {
        assert_eq!(header_value(b" a\r\n b", b"\n").unwrap(), b" a\n b");
        assert!(header_value(b" a\r\nX-Evil: 1", b"\n").is_err());
        assert!(header_value(b" a\nX", b"\n").is_err());
        assert!(header_value(b" a\rb", b"\n").is_err());
        assert!(header_value(b" a\0", b"\n").is_err());
    }
}
