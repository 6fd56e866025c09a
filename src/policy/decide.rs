//! The action for a finding, and the verdict over a message's findings: the one place
//! that says what a finding gets.
//!
//! A finding's action starts from its rule's action in a policy ([`Policy::action_for`]:
//! the most specific key, else the built-in default, `fix` on a finding with no repair
//! on offer turned into `report`). Below `[report] min_severity` a report is only
//! logged, unless a key names the rule. A matching `[[scope]]` ([`Effect`]) either caps
//! that action (an exemption) or decides with policies of its own.
//!
//! A milter sees one message for all its recipients, so one message may fall into
//! several scopes; their effects come here in the order the scopes are selected
//! (`scope::Selection::effects`), `None` standing for the direction's own policy. For
//! each finding every effect gives an action, and [`combine`] makes one of them: the
//! strictest refusal wins (reject > tempfail > quarantine); a fix is made only when
//! every scope fixes, else it is reported; otherwise the strongest of report, log and
//! ignore. The same safe side for the engine ([`fix_signed`]): signed content is
//! changed only when every scope says `fix_signed`. The verdict is the strongest
//! action over the findings ([`verdict`]).
//!
//! Nothing here knows the scope list or how a scope matches: that is `scope` and
//! `matching`.

use super::report::Report;
use super::{Action, Direction, Policies, Policy};
use crate::engine::{Finding, FixSigned, Rule, Severity};

/// What a matching scope does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Every finding gets at most this action: `ignore` (nothing at all) or `log`.
    Exempt(Action),
    Override(Box<Overrides>),
}

/// The direction's policy with some settings changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overrides {
    /// The direction's policy with the scope's keys over it: a rule a scope key
    /// matches takes the scope's action, every other rule keeps the direction's.
    pub inbound: Policy,
    pub outbound: Policy,
    pub fix_signed: Option<FixSigned>,
    /// `false`: no report header for this scope's mail.
    pub report: Option<bool>,
    pub always: Option<bool>,
    pub min_severity: Option<Severity>,
}

/// The settings a message's findings are decided under: its direction, the policies
/// and the report's threshold.
#[derive(Debug, Clone, Copy)]
pub struct Decider<'a> {
    pub dir: Direction,
    pub policies: &'a Policies,
    pub report: &'a Report,
    /// The configuration's `fix_signed`, which a scope may override.
    pub fix_signed: FixSigned,
    /// The message's signatures that cover a repair all have broken body hashes: its
    /// repairs reach signed content whatever `fix_signed` says.
    pub broken_signatures: bool,
}

impl Decider<'_> {
    /// The action of a finding, combined over the effects ([`combine`]).
    pub fn finding<'e>(
        &self,
        effects: impl IntoIterator<Item = Option<&'e Effect>>,
        f: &Finding,
    ) -> Action {
        combine(effects.into_iter().map(|e| self.one(e, f)))
    }

    /// The action of a message over the limits, combined over the effects.
    pub fn oversize<'e>(&self, effects: impl IntoIterator<Item = Option<&'e Effect>>) -> Action {
        combine(effects.into_iter().map(|e| self.oversize_one(e)))
    }

    /// The position among `effects` of the one that decided `verdict`: the first whose
    /// own action for some finding (or the oversize action) is the verdict, a fix
    /// counting as a report where the verdict is not `fix`; else the first.
    pub fn decided_by<'e>(
        &self,
        effects: impl IntoIterator<Item = Option<&'e Effect>>,
        findings: &[Finding],
        oversize: bool,
        verdict: Action,
    ) -> usize {
        let seen = |a: Action| {
            let a = if a == Action::Fix && verdict != Action::Fix {
                Action::Report
            } else {
                a
            };
            a == verdict
        };
        effects
            .into_iter()
            .position(|e| {
                findings.iter().any(|f| seen(self.one(e, f)))
                    || (oversize && seen(self.oversize_one(e)))
            })
            .unwrap_or(0)
    }

    /// The action one effect (None: the direction's policy) gives a finding.
    fn one(&self, effect: Option<&Effect>, f: &Finding) -> Action {
        let base = self.policies.get(self.dir);
        let min = self.report.min_severity;
        let reach = |mode: Option<FixSigned>| {
            self.broken_signatures || mode.unwrap_or(self.fix_signed) >= FixSigned::Verified
        };
        match effect {
            None => with_threshold(base, min, f, reach(None)),
            Some(Effect::Exempt(cap)) => with_threshold(base, min, f, reach(None)).min(*cap),
            Some(Effect::Override(o)) => with_threshold(
                self.dir.pick(&o.inbound, &o.outbound),
                o.min_severity.unwrap_or(min),
                f,
                reach(o.fix_signed),
            ),
        }
    }

    fn oversize_one(&self, effect: Option<&Effect>) -> Action {
        match effect {
            Some(Effect::Exempt(cap)) => self.policies.oversize_action.min(*cap),
            _ => self.policies.oversize_action,
        }
    }
}

/// The policy's action for a finding (`signed_repairs`: see
/// [`Policy::action_for_message`]), where below the header's threshold a report is only
/// logged, unless a policy key names the rule.
fn with_threshold(
    policy: &Policy,
    min_severity: Severity,
    f: &Finding,
    signed_repairs: bool,
) -> Action {
    match policy.action_for_message(f.rule, f.fixable, signed_repairs) {
        Action::Report if f.severity < min_severity && !policy.names(f.rule) => Action::Log,
        a => a,
    }
}

/// One action from the actions several scopes give the same finding of one message:
/// the strictest of reject, tempfail and quarantine when any scope gives one; `fix`
/// only when every scope fixes (a fix is a change every recipient gets); otherwise the
/// strongest of report (a fix some scope does not want), log and ignore.
pub fn combine(actions: impl IntoIterator<Item = Action>) -> Action {
    let mut all_fix = true;
    let mut any = false;
    let mut strongest = Action::Ignore;
    for a in actions {
        any = true;
        all_fix &= a == Action::Fix;
        strongest = strongest.max(if a == Action::Fix { Action::Report } else { a });
    }
    if any && all_fix {
        Action::Fix
    } else {
        strongest
    }
}

/// Which signed content the engine may change: the least any effect that could fix
/// allows (a change every recipient gets), `global` when none could.
pub fn fix_signed<'e>(
    effects: impl IntoIterator<Item = Option<&'e Effect>>,
    global: FixSigned,
) -> FixSigned {
    effects
        .into_iter()
        .filter_map(|e| match e {
            None => Some(global),
            Some(Effect::Exempt(_)) => None,
            Some(Effect::Override(o)) => Some(o.fix_signed.unwrap_or(global)),
        })
        .min()
        .unwrap_or(global)
}

/// Whether the report header goes on the message: some effect wants it, given the
/// verdict (`always`, or a verdict of report or stronger).
pub fn wants_header<'e>(
    effects: impl IntoIterator<Item = Option<&'e Effect>>,
    report: &Report,
    verdict: Action,
) -> bool {
    report.header.is_some()
        && effects.into_iter().any(|e| {
            let (enabled, always) = match e {
                None => (true, report.always),
                Some(Effect::Exempt(_)) => (false, false),
                Some(Effect::Override(o)) => {
                    (o.report.unwrap_or(true), o.always.unwrap_or(report.always))
                }
            };
            enabled && (always || verdict >= Action::Report)
        })
}

/// The action of each finding in finding order (`actions`, from [`Decider::finding`]),
/// and of the oversize limit when the message is over it (`oversize`: its action): it is
/// added when the engine made no finding of it, and raises the action of the one it
/// made.
pub fn decisions(
    findings: &[Finding],
    actions: &[Action],
    oversize: Option<Action>,
) -> Vec<(Rule, Action)> {
    let mut decided: Vec<(Rule, Action)> = findings
        .iter()
        .zip(actions)
        .map(|(f, a)| (f.rule, *a))
        .collect();
    if let Some(oversize_action) = oversize {
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

/// The verdict over a message's decisions and the rules behind each part of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The strongest action; `ignore` without findings.
    pub action: Action,
    /// Rule ids found and logged (every finding whose action is not `ignore`), sorted.
    pub rules: Vec<Rule>,
    /// Rule ids named in the report header (action `report` or stronger), sorted.
    pub reported: Vec<Rule>,
    /// Rule ids whose action is the verdict, sorted.
    pub decided_by: Vec<Rule>,
}

/// The verdict (the strongest action) over `decided`, from [`decisions`].
pub fn verdict(decided: &[(Rule, Action)]) -> Verdict {
    let action = decided
        .iter()
        .map(|(_, a)| *a)
        .max()
        .unwrap_or(Action::Ignore);
    let rules_where = |keep: &dyn Fn(Action) -> bool| {
        sorted_unique(decided.iter().filter(|(_, a)| keep(*a)).map(|(r, _)| *r))
    };
    Verdict {
        action,
        rules: rules_where(&|a| a != Action::Ignore),
        reported: rules_where(&|a| a >= Action::Report),
        decided_by: rules_where(&|a| a == action),
    }
}

/// Rule ids sorted by id, each once: the order of every list of rules a plan shows.
pub fn sorted_unique(it: impl Iterator<Item = Rule>) -> Vec<Rule> {
    let mut v: Vec<Rule> = it.collect();
    v.sort_by_key(|r| r.id());
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combining_scopes_takes_the_safe_side() {
        use Action::*;
        assert_eq!(combine([Fix, Fix]), Fix);
        assert_eq!(combine([Fix, Report]), Report);
        assert_eq!(combine([Fix, Ignore]), Report);
        assert_eq!(combine([Fix, Log]), Report);
        assert_eq!(combine([Log, Ignore]), Log);
        assert_eq!(combine([Report, Ignore]), Report);
        assert_eq!(combine([Ignore, Reject]), Reject);
        assert_eq!(combine([Fix, Quarantine]), Quarantine);
        assert_eq!(combine([Tempfail, Quarantine, Fix]), Tempfail);
        assert_eq!(combine([Ignore]), Ignore);
        assert_eq!(combine([]), Ignore);
    }
}
