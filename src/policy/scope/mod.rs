//! Scopes: the direction's policy changed, or set aside, for part of the mail.
//!
//! A [`Scope`] matches on the envelope recipient, the envelope sender, the client
//! network, the SASL login and one top-level header field (how each key matches:
//! [`matching`](super::matching)). Scopes are tried in file order and the first that
//! matches a recipient is that recipient's scope; a recipient no scope matches keeps the
//! direction's policy. A matching scope either exempts the mail (`ignore` every finding,
//! or only `log` it) or overrides per-rule actions, `fix_signed` and report settings of
//! the direction's policy ([`Effect`]).
//!
//! A milter sees one message for all its recipients, so one message may fall into
//! several scopes: [`Scopes::select`] gives that [`Selection`], and
//! [`decide`](super::decide) what its scopes together do to each finding.
//!
//! Here: the list and the selection. [`envelope`]: what a message is matched on beside
//! its header fields, the recipients kept as the set of scopes each matches.
//! [`checks`]: scopes that can never match, for `config-check`.

mod checks;
mod envelope;
#[cfg(test)]
mod tests;

pub use checks::never_matches;
pub use envelope::{Envelope, Recipients};

use crate::engine::{Finding, FixSigned};
use crate::policy::decide::{self, Decider, Effect};
use crate::policy::matching::FieldCache;
use crate::policy::matching::Matcher;
use crate::policy::{Action, Direction};

/// The name metrics and log lines give the direction's own policy, where it decided
/// beside a scope; no scope may take it.
pub const DEFAULT_NAME: &str = "default";

/// One `[[scope]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub name: String,
    /// Where it is written, for messages.
    pub line: usize,
    pub inbound: bool,
    pub outbound: bool,
    pub matcher: Matcher,
    pub effect: Effect,
}

/// Every `[[scope]]`, in file order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Scopes {
    list: Vec<Scope>,
}

impl Scopes {
    pub fn new(list: Vec<Scope>) -> Scopes {
        Scopes { list }
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Scope> {
        self.list.iter()
    }

    /// Whether some scope matches on the recipients: the milter needs the RCPT stage.
    pub fn reads_recipients(&self) -> bool {
        self.list.iter().any(|s| s.matcher.recipients.is_some())
    }

    /// Every action a finding could get in some scope, for what to negotiate.
    pub fn actions_used(&self) -> impl Iterator<Item = Action> + '_ {
        self.list.iter().flat_map(|s| {
            let (i, o) = match &s.effect {
                Effect::Exempt(_) => (None, None),
                Effect::Override(o) => (
                    s.inbound.then_some(&o.inbound),
                    s.outbound.then_some(&o.outbound),
                ),
            };
            i.into_iter().chain(o).flat_map(|p| p.actions_used())
        })
    }

    /// Recipients collected against these scopes.
    pub fn recipients(&self) -> Recipients {
        Recipients {
            words: self.list.len().div_ceil(64),
            masks: Vec::new(),
            count: 0,
        }
    }

    /// The bit set of the scopes whose recipient key `addr` satisfies (a scope without
    /// one is satisfied by any recipient).
    fn mask(&self, addr: Option<&str>) -> Box<[u64]> {
        let mut m = vec![0u64; self.list.len().div_ceil(64)];
        for (i, s) in self.list.iter().enumerate() {
            if s.matcher.takes_recipient(addr) {
                m[i / 64] |= 1 << (i % 64);
            }
        }
        m.into_boxed_slice()
    }

    /// The scopes of a message of direction `dir` with envelope `env` and message
    /// bytes `raw` (its top-level header fields are read when a scope asks for one).
    pub fn select<'s>(&'s self, dir: Direction, env: &Envelope, raw: &[u8]) -> Selection<'s> {
        if self.list.is_empty() {
            return Selection::none();
        }
        let sender = env.sender.as_deref();
        let login = env.sasl_login.as_deref().map(str::to_lowercase);
        let mut fields = FieldCache::new(raw, &env.extra_headers);
        // Whether each scope matches on everything but the recipient.
        let common: Vec<bool> = self
            .list
            .iter()
            .map(|s| {
                *dir.pick(&s.inbound, &s.outbound)
                    && s.matcher
                        .takes(sender, env.client_addr, login.as_deref(), &mut fields)
            })
            .collect();
        let virtual_mask;
        let masks: &[Box<[u64]>] = if env.recipients.count == 0 || !env.recipients.fits(self) {
            // No recipient known (or none for these scopes): only scopes that do not ask
            // for one can match.
            virtual_mask = [self.mask(None)];
            &virtual_mask
        } else {
            &env.recipients.masks
        };
        let mut chosen: Vec<Option<usize>> = masks
            .iter()
            .map(|m| {
                (0..self.list.len())
                    .find(|&i| common[i] && m.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0))
            })
            .collect();
        // File order, the direction's policy last.
        chosen.sort_by_key(|c| c.unwrap_or(usize::MAX));
        chosen.dedup();
        Selection {
            choices: chosen
                .into_iter()
                .map(|c| c.map(|i| &self.list[i]))
                .collect(),
        }
    }
}

/// The scopes one message falls into: distinct, in file order; `None` stands for the
/// direction's own policy (recipients no scope matched) and comes last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection<'s> {
    choices: Vec<Option<&'s Scope>>,
}

impl<'s> Selection<'s> {
    /// No scope: the direction's policy alone.
    pub fn none() -> Selection<'s> {
        Selection {
            choices: vec![None],
        }
    }

    /// Whether some scope applies.
    pub fn scoped(&self) -> bool {
        self.choices.iter().any(Option::is_some)
    }

    /// The names of the scopes applying, `default` for the direction's policy; empty
    /// when no scope applies.
    pub fn names(&self) -> Vec<String> {
        if !self.scoped() {
            return Vec::new();
        }
        self.choices.iter().map(|c| name(*c).to_string()).collect()
    }

    /// What each scope applying does, in the order of the selection; `None` is the
    /// direction's own policy. What [`decide`](crate::policy::decide) decides with.
    pub fn effects(&self) -> impl Iterator<Item = Option<&'s Effect>> + Clone + '_ {
        self.choices.iter().map(|c| c.map(|s| &s.effect))
    }

    /// Whether the engine may change signed content ([`decide::fix_signed`]).
    pub fn fix_signed(&self, global: FixSigned) -> FixSigned {
        decide::fix_signed(self.effects(), global)
    }

    /// The name of the scope that decided `verdict` ([`Decider::decided_by`]).
    pub fn decided_by(
        &self,
        decider: &Decider,
        findings: &[Finding],
        oversize: bool,
        verdict: Action,
    ) -> &'s str {
        let at = decider.decided_by(self.effects(), findings, oversize, verdict);
        self.choices.get(at).map_or(DEFAULT_NAME, |c| name(*c))
    }
}

fn name(c: Option<&Scope>) -> &str {
    c.map_or(DEFAULT_NAME, |s| s.name.as_str())
}
