//! What to do about a message, decided without any I/O.
//!
//! Here: the [`Policy`] of a direction maps rule ids, or globs over them (`extbody-*`,
//! `*`), to an [`Action`]; the most specific key wins for a rule, and a rule no key
//! matches gets its built-in default ([`builtin`]). The modules:
//! - [`decide`]: the action for a finding and the verdict over a message's findings,
//!   under the direction's policy and the scopes the message falls into;
//! - [`scope`]: the `[[scope]]` list, which scopes a message falls into, and the scopes
//!   that can never match; [`matching`]: whether a message matches a scope's keys
//!   (addresses, client networks, SASL login, a header field);
//! - [`plan`]: everything the daemon does to a message (the planner, the replies, the
//!   message as delivered); [`report`]: the `[report]` settings and the report header's
//!   value;
//! - [`direction`]: which way a message goes; [`intake`]: what the limits let through of
//!   it; [`redact`]: how URLs may be shown in log lines and the header.
//!
//! The policy uses only the engine (the layers: `lib.rs`). Its settings ([`Policies`],
//! [`Directions`], [`report::Report`], [`plan::Replies`]) are its own types, which the
//! configuration holds as sections.

pub mod decide;
pub mod direction;
pub mod intake;
pub mod matching;
pub mod plan;
pub mod redact;
pub mod report;
pub mod scope;

use std::fmt;

use crate::engine::Rule;
pub use direction::{Direction, Directions};

/// What happens to a message with a finding. Declared weakest first: the derived order is
/// the verdict order (reject > tempfail > quarantine > fix > report > log > ignore).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    Ignore,
    /// Logged and counted in the metrics, but no report header and no change.
    Log,
    Report,
    Fix,
    Quarantine,
    Tempfail,
    Reject,
}

impl Action {
    pub const ALL: [Action; 7] = [
        Action::Ignore,
        Action::Log,
        Action::Report,
        Action::Fix,
        Action::Quarantine,
        Action::Tempfail,
        Action::Reject,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Ignore => "ignore",
            Action::Log => "log",
            Action::Report => "report",
            Action::Fix => "fix",
            Action::Quarantine => "quarantine",
            Action::Tempfail => "tempfail",
            Action::Reject => "reject",
        }
    }

    pub fn parse(s: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.as_str() == s)
    }

    /// The message is refused at end of data: nothing is changed or added.
    pub fn refuses(self) -> bool {
        matches!(self, Action::Tempfail | Action::Reject)
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A policy key: a rule id or a glob with `*` (any run) and `?` (one character).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    text: String,
}

impl Pattern {
    /// Checks the glob's syntax: only the characters of rule ids plus `*` and `?`, and it
    /// must match at least one rule id (a typo would otherwise silently do nothing).
    pub fn parse(text: &str) -> Result<Pattern, String> {
        if text.is_empty() {
            return Err("empty rule pattern".into());
        }
        if let Some(c) = text.chars().find(|c| {
            !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '*' | '?'))
        }) {
            return Err(format!(
                "rule pattern {text:?}: character {c:?} not allowed (rule ids, `*` and `?` only)"
            ));
        }
        let p = Pattern { text: text.into() };
        if !Rule::ALL.iter().any(|r| p.matches(r.id())) {
            return Err(format!("rule pattern {text:?} matches no rule id"));
        }
        Ok(p)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn matches(&self, id: &str) -> bool {
        glob_match(self.text.as_bytes(), id.as_bytes())
    }

    /// Higher is more specific: an exact id beats every glob; among globs, fewer wildcards,
    /// then more literal characters.
    fn specificity(&self) -> (bool, std::cmp::Reverse<usize>, usize) {
        let wild = self
            .text
            .bytes()
            .filter(|b| matches!(b, b'*' | b'?'))
            .count();
        (wild == 0, std::cmp::Reverse(wild), self.text.len() - wild)
    }
}

/// Iterative glob match with single backtrack point: linear in practice, no recursion.
pub(crate) fn glob_match(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, si));
            pi += 1;
        } else if let Some((sp, ss)) = star {
            pi = sp + 1;
            si = ss + 1;
            star = Some((sp, ss + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

/// The rule → action table of one direction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    entries: Vec<(Pattern, Action)>,
    /// Resolved once per rule so that the per-message path is a lookup.
    table: Vec<Action>,
    /// The direction whose built-in defaults fill what no entry matches.
    direction: Direction,
}

impl Policy {
    /// `entries` in configuration order; a rule no entry matches gets its built-in
    /// default for `direction`, [`builtin`].
    pub fn new(direction: Direction, entries: Vec<(Pattern, Action)>) -> Policy {
        let table = Rule::ALL
            .iter()
            .map(|&r| resolve(&entries, r.id()).unwrap_or(builtin(r, direction)))
            .collect();
        Policy {
            entries,
            table,
            direction,
        }
    }

    /// The built-in defaults of `direction` alone: a `[policy.*]` table with no key.
    pub fn builtin(direction: Direction) -> Policy {
        Policy::new(direction, Vec::new())
    }

    pub fn action(&self, rule: Rule) -> Action {
        Rule::ALL
            .iter()
            .position(|r| *r == rule)
            .and_then(|i| self.table.get(i).copied())
            .unwrap_or_else(|| builtin(rule, self.direction))
    }

    /// `base` with `entries` over it: a rule one of `entries` matches takes its action
    /// from them (most specific key first), every other rule keeps `base`'s. A scope's
    /// policy over its direction's.
    pub fn layered(base: &Policy, entries: Vec<(Pattern, Action)>) -> Policy {
        let table = Rule::ALL
            .iter()
            .enumerate()
            .map(|(i, &r)| {
                resolve(&entries, r.id())
                    .or_else(|| base.table.get(i).copied())
                    .unwrap_or(builtin(r, base.direction))
            })
            .collect();
        let mut all = base.entries.clone();
        all.extend(entries);
        Policy {
            entries: all,
            table,
            direction: base.direction,
        }
    }

    /// Whether a key names this rule exactly (not through a glob): the admin asked for
    /// its action in so many words, which `[report] min_severity` does not lower.
    /// The patterns and actions as written, in file order; a layered policy's start
    /// with its base's. What `config-dump` writes back.
    pub fn entries(&self) -> &[(Pattern, Action)] {
        &self.entries
    }

    pub fn names(&self, rule: Rule) -> bool {
        self.entries.iter().any(|(p, _)| p.as_str() == rule.id())
    }

    /// The action a finding gets on a message where repairs reach signed content
    /// (`signed_repairs`: `fix_signed` is `"verified"` or `true`, or the message's
    /// signatures' body hashes are broken): the rules [`builtin`] logs on inbound mail
    /// only because their repair was withheld there get what they get outbound, unless
    /// a key names them.
    pub fn action_for_message(&self, rule: Rule, fixable: bool, signed_repairs: bool) -> Action {
        if signed_repairs
            && self.direction == Direction::Inbound
            && INBOUND_LOGGED_WHILE_SIGNED.contains(&rule)
            && resolve(&self.entries, rule.id()).is_none()
        {
            return if fixable { Action::Fix } else { Action::Report };
        }
        self.action_for(rule, fixable)
    }

    /// The action a finding gets: `fix` on a finding with no repair on offer is `report`.
    pub fn action_for(&self, rule: Rule, fixable: bool) -> Action {
        match self.action(rule) {
            Action::Fix if !fixable => Action::Report,
            a => a,
        }
    }

    /// Every action some rule can get: decides which milter actions to negotiate.
    pub fn actions_used(&self) -> impl Iterator<Item = Action> + '_ {
        self.table.iter().copied()
    }
}

/// `[policy.inbound]`, `[policy.outbound]`, `[limits] oversize_action` and the
/// `[[scope]]` tables: the action of every finding, and of a message over the limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policies {
    pub inbound: Policy,
    pub outbound: Policy,
    pub oversize_action: Action,
    pub scopes: scope::Scopes,
}

impl Policies {
    pub fn get(&self, dir: Direction) -> &Policy {
        dir.pick(&self.inbound, &self.outbound)
    }

    /// Whether some finding could lead to this action (decides what to negotiate).
    pub fn may(&self, action: Action) -> bool {
        self.oversize_action == action
            || self.inbound.actions_used().any(|a| a == action)
            || self.outbound.actions_used().any(|a| a == action)
            || self.scopes.actions_used().any(|a| a == action)
    }
}

/// Rule ids joined by `sep`, as replies, the report header and the log name them.
pub(crate) fn ids(rules: &[Rule], sep: &str) -> String {
    rules.iter().map(|r| r.id()).collect::<Vec<_>>().join(sep)
}

/// The action of a rule that no policy key matches: `fix` (a finding with no repair on
/// offer is reported), except for the rules below, which are only logged. Each of them
/// is harmless to every reader tried (docs/INTEROP.md), and its repair would change
/// healthy mail or read worse in some of them:
/// - `extbody-url-word-too-long`, `location-line-too-long`: a long word or line below
///   998 octets is read fine; the folded forms are read with whitespace inside the URI
///   by the six mail libraries tried and by Dovecot and Cyrus, whose BODYSTRUCTURE every
///   IMAP client reads (and, for URLs, by NeoMutt, Roundcube and Camel).
/// - `related-type-missing`, `related-type-mismatch`: no renderer tried (Chromium,
///   Thunderbird, NeoMutt) uses `type`; inserting it changes the message (nested: the
///   whole body) for no reader who looks at the mail.
/// - `extbody-inner-content-id-missing`: no reader tried looks at the phantom heading's
///   Content-ID.
/// - `html-base-remote`: its repair takes out a header field; the admin asks for it.
///
/// And, on inbound mail only, the inline-part rules under which every reader still shows
/// the image, but listed as an attachment or twice ([`INBOUND_LOGGED_WHILE_SIGNED`]):
/// mail from outside is DKIM-signed, so the repair is withheld on nearly all of it;
/// outbound, before the signer, is where they are repaired. Where repairs do reach
/// signed content (`fix_signed = "verified"` or `true`, or a message whose signatures'
/// body hashes are already broken), they are fixed inbound too
/// ([`Policy::action_for_message`]). `part-name-one-field`'s copy of a name is among
/// them: no reader of the matrix reads it worse, none better (the readers it helps,
/// Gmail and Outlook by their public reports, do not run here). Where a reader shows no
/// image at all (`content-id-malformed`, `related-ref-mismatch`, `ref-image-type`) they
/// are fixed, or reported, both ways, as `related-ref-dangling` is.
pub fn builtin(rule: Rule, direction: Direction) -> Action {
    match rule {
        Rule::ExtbodyUrlWordTooLong
        | Rule::LocationLineTooLong
        | Rule::RelatedTypeMissing
        | Rule::RelatedTypeMismatch
        | Rule::ExtbodyInnerContentIdMissing
        | Rule::HtmlBaseRemote => Action::Log,
        // Repairs that some reader reads worse (docs/INTEROP.md, "What readers show:
        // names and types"): the twin of an RFC 2231 name (Horde, Alpine, Python), the
        // 8-bit name rewritten (Horde, Python), the forward retyped (eight readers lose
        // the forwarded message). Reported, repaired only when the admin asks.
        Rule::PartNameRfc2231Only | Rule::PartName8bit | Rule::Rfc822Encoded => Action::Report,
        r if direction == Direction::Inbound && INBOUND_LOGGED_WHILE_SIGNED.contains(&r) => {
            Action::Log
        }
        _ => Action::Fix,
    }
}

/// The rules [`builtin`] only logs on inbound mail while repairs cannot reach signed
/// content there.
pub const INBOUND_LOGGED_WHILE_SIGNED: [Rule; 4] = [
    Rule::RelatedPartDisposition,
    Rule::RelatedPartDispositionMissing,
    Rule::CidOutsideRelated,
    Rule::PartNameOneField,
];

/// Most specific matching key; on a tie the stronger action, so that an ambiguity never
/// weakens the policy.
fn resolve(entries: &[(Pattern, Action)], id: &str) -> Option<Action> {
    entries
        .iter()
        .filter(|(p, _)| p.matches(id))
        .max_by(|(p1, a1), (p2, a2)| p1.specificity().cmp(&p2.specificity()).then(a1.cmp(a2)))
        .map(|(_, a)| *a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pol(entries: &[(&str, Action)]) -> Policy {
        Policy::new(
            Direction::Inbound,
            entries
                .iter()
                .map(|(p, a)| (Pattern::parse(p).unwrap(), *a))
                .collect(),
        )
    }

    #[test]
    fn globs() {
        assert!(glob_match(b"extbody-*", b"extbody-url-invalid"));
        assert!(!glob_match(b"extbody-*", b"related-type-missing"));
        assert!(glob_match(b"*-missing", b"related-type-missing"));
        assert!(glob_match(b"*", b""));
        assert!(glob_match(
            b"related-?id-duplicate",
            b"related-cid-duplicate"
        ));
        assert!(!glob_match(
            b"related-?id-duplicate",
            b"related-location-duplicate"
        ));
        assert!(glob_match(b"*url*", b"extbody-url-invalid"));
        assert!(!glob_match(b"*url", b"extbody-url-invalid"));
    }

    #[test]
    fn most_specific_key_wins_whatever_the_order() {
        let p = pol(&[
            ("related-cid-duplicate", Action::Report),
            ("related-*", Action::Reject),
            ("*", Action::Ignore),
        ]);
        assert_eq!(p.action(Rule::RelatedCidDuplicate), Action::Report);
        assert_eq!(p.action(Rule::RelatedTypeMissing), Action::Reject);
        assert_eq!(p.action(Rule::ExtbodyUrlInvalid), Action::Ignore);
        let p = pol(&[("*", Action::Ignore), ("related-*", Action::Reject)]);
        assert_eq!(p.action(Rule::RelatedTypeMissing), Action::Reject);
        // Fewer wildcards beat more literal characters.
        let p = pol(&[
            ("extbody-url-*", Action::Reject),
            ("extbody-url-invali?", Action::Report),
        ]);
        assert_eq!(p.action(Rule::ExtbodyUrlInvalid), Action::Report);
        assert_eq!(p.action(Rule::ExtbodyUrlConflict), Action::Reject);
    }

    #[test]
    fn defaults_fix_what_is_fixable_and_report_the_rest() {
        let p = Policy::builtin(Direction::Inbound);
        assert_eq!(p.action_for(Rule::ExtbodyUrlUnquoted, true), Action::Fix);
        assert_eq!(
            p.action_for(Rule::RelatedCidDuplicate, false),
            Action::Report
        );
        // Nothing is refused or held by default; the name repairs some reader reads
        // worse are reported.
        assert!(p
            .actions_used()
            .all(|a| matches!(a, Action::Fix | Action::Log | Action::Report)));
        for r in [
            Rule::PartNameRfc2231Only,
            Rule::PartName8bit,
            Rule::Rfc822Encoded,
        ] {
            assert_eq!(p.action_for(r, true), Action::Report, "{}", r.id());
        }
        assert_eq!(p.action_for(Rule::RefImageType, true), Action::Fix);
    }

    #[test]
    fn harmless_rules_are_only_logged_unless_a_key_matches() {
        let p = Policy::builtin(Direction::Inbound);
        for r in [
            Rule::ExtbodyUrlWordTooLong,
            Rule::LocationLineTooLong,
            Rule::RelatedTypeMissing,
        ] {
            assert_eq!(p.action_for(r, true), Action::Log, "{}", r.id());
        }
        let p = pol(&[("*", Action::Fix)]);
        assert_eq!(p.action_for(Rule::LocationLineTooLong, true), Action::Fix);
        let p = pol(&[("related-cid-duplicate", Action::Reject)]);
        assert_eq!(p.action_for(Rule::RelatedTypeMissing, true), Action::Log);
    }

    #[test]
    fn inline_parts_readers_still_show_are_fixed_outbound_and_logged_inbound() {
        let (inb, outb) = (
            Policy::builtin(Direction::Inbound),
            Policy::builtin(Direction::Outbound),
        );
        for r in [
            Rule::RelatedPartDisposition,
            Rule::RelatedPartDispositionMissing,
            Rule::CidOutsideRelated,
            Rule::PartNameOneField,
        ] {
            assert_eq!(inb.action_for(r, true), Action::Log, "{}", r.id());
            assert_eq!(outb.action_for(r, true), Action::Fix, "{}", r.id());
            assert_eq!(outb.action_for(r, false), Action::Report, "{}", r.id());
        }
        // No reader shows these images at all: fixed, else reported, both ways.
        for r in [
            Rule::ContentIdMalformed,
            Rule::RelatedRefMismatch,
            Rule::RefImageType,
        ] {
            assert_eq!(inb.action_for(r, false), Action::Report, "{}", r.id());
            assert_eq!(outb.action_for(r, true), Action::Fix, "{}", r.id());
        }
        // The removal of a Content-Base is the admin's to ask for.
        assert_eq!(outb.action_for(Rule::HtmlBaseRemote, true), Action::Log);
        // A scope over the inbound policy keeps its defaults.
        let scoped = Policy::layered(&inb, Vec::new());
        assert_eq!(scoped.action(Rule::CidOutsideRelated), Action::Log);
    }

    #[test]
    fn a_layered_policy_changes_only_the_rules_its_keys_match() {
        let base = pol(&[
            ("related-cid-duplicate", Action::Report),
            ("extbody-*", Action::Reject),
        ]);
        let over = |e: &[(&str, Action)]| {
            Policy::layered(
                &base,
                e.iter()
                    .map(|(p, a)| (Pattern::parse(p).unwrap(), *a))
                    .collect(),
            )
        };
        let p = over(&[("related-*", Action::Ignore)]);
        // A glob of the scope beats the direction's exact key: the scope decides.
        assert_eq!(p.action(Rule::RelatedCidDuplicate), Action::Ignore);
        assert_eq!(p.action(Rule::ExtbodyUrlInvalid), Action::Reject);
        assert_eq!(p.action(Rule::ContentIdSyntax), Action::Fix);
        assert_eq!(p.action(Rule::LocationLineTooLong), Action::Log);
        assert!(p.names(Rule::RelatedCidDuplicate));
        assert_eq!(
            over(&[]),
            Policy {
                entries: base.entries.clone(),
                table: base.table.clone(),
                direction: Direction::Inbound,
            }
        );
    }

    #[test]
    fn verdict_order() {
        use Action::*;
        let mut v = vec![Fix, Reject, Ignore, Quarantine, Log, Report, Tempfail];
        v.sort();
        assert_eq!(
            v,
            vec![Ignore, Log, Report, Fix, Quarantine, Tempfail, Reject]
        );
    }

    #[test]
    fn bad_patterns() {
        assert!(Pattern::parse("extbody-[a]").is_err());
        assert!(Pattern::parse("Extbody-*").is_err());
        assert!(Pattern::parse("nosuch-*").is_err());
        assert!(Pattern::parse("").is_err());
        assert!(Pattern::parse("*").is_ok());
    }
}
