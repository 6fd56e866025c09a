//! Scopes: the direction's policy changed, or set aside, for part of the mail.
//!
//! A [`Scope`] matches on the envelope recipient, the envelope sender, the client
//! network, the SASL login and one top-level header field; every key it gives must
//! match, and a list matches when one of its entries does. Scopes are tried in file
//! order and the first that matches a recipient is that recipient's scope; a recipient
//! no scope matches keeps the direction's policy. A matching scope either exempts the
//! mail (`ignore` every finding, or only `log` it) or overrides per-rule actions,
//! `fix_signed` and report settings of the direction's policy.
//!
//! A milter sees one message for all its recipients, so one message may fall into
//! several scopes (a [`Selection`]). For each finding every scope in the selection
//! gives an action, and [`combine`] makes one of them: the strictest refusal wins
//! (reject > tempfail > quarantine); a fix is made only when every scope fixes, else
//! it is reported; otherwise the strongest of report, log and ignore. The same safe
//! side for the engine: signed content is changed only when every scope says
//! `fix_signed`.
//!
//! Recipients are kept as the set of scopes their address matches
//! ([`Recipients`]), not as text: a transaction with thousands of recipients costs a
//! few words per distinct combination.

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;
use regex::bytes::Regex;

use super::direction::in_networks;
use super::report::Report;
use super::{Action, Direction, Policies, Policy};
use crate::engine::{Finding, Rule, Severity};

/// The name metrics and log lines give the direction's own policy, where it decided
/// beside a scope; no scope may take it.
pub const DEFAULT_NAME: &str = "default";

/// An envelope address pattern of a scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    /// `<>`: the null sender of bounces and notifications.
    Null,
    /// `local@domain`, compared without regard to case.
    Exact(String),
    /// `@domain`: every address of that domain.
    Domain(String),
    /// `@.domain`: every address of a domain below it (not the domain itself).
    Subdomains(String),
}

impl Address {
    /// Parses a scope entry: `local@domain`, `@domain`, `@.domain` or `<>`.
    pub fn parse(text: &str) -> Result<Address, String> {
        let t = text.trim();
        if t == "<>" {
            return Ok(Address::Null);
        }
        if t.is_empty()
            || t.chars()
                .any(|c| c.is_control() || c.is_whitespace() || c == '<' || c == '>')
        {
            return Err(format!(
                "{text:?} is not an address: expected local@domain, @domain, @.domain or <>"
            ));
        }
        let Some((local, domain)) = t.rsplit_once('@') else {
            return Err(format!(
                "{text:?} has no @: expected local@domain, @domain, @.domain or <>"
            ));
        };
        let domain = domain.trim_end_matches('.').to_lowercase();
        let (sub, domain) = match domain.strip_prefix('.') {
            Some(d) => (true, d.to_string()),
            None => (false, domain),
        };
        if domain.is_empty() || domain.contains('@') || domain.starts_with('.') {
            return Err(format!("{text:?}: no domain after the @"));
        }
        match (local.is_empty(), sub) {
            (true, false) => Ok(Address::Domain(domain)),
            (true, true) => Ok(Address::Subdomains(domain)),
            (false, false) => Ok(Address::Exact(format!("{}@{domain}", local.to_lowercase()))),
            (false, true) => Err(format!(
                "{text:?}: @.domain stands for every address below a domain and takes no \
                 local part"
            )),
        }
    }

    /// Whether `addr` (as [`normalize_address`] gives it) matches.
    pub fn matches(&self, addr: &str) -> bool {
        match self {
            Address::Null => addr.is_empty(),
            Address::Exact(a) => a == addr,
            Address::Domain(d) => domain_of(addr) == Some(d.as_str()),
            Address::Subdomains(d) => domain_of(addr).is_some_and(|a| below(a, d)),
        }
    }

    /// Whether every address this one matches, `other` matches too.
    fn covered_by(&self, other: &Address) -> bool {
        match (self, other) {
            (a, b) if a == b => true,
            (Address::Exact(a), b) => b.matches(a),
            (Address::Domain(d), Address::Subdomains(p)) => below(d, p),
            (Address::Subdomains(d), Address::Subdomains(p)) => below(d, p),
            _ => false,
        }
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Null => f.write_str("<>"),
            Address::Exact(a) => f.write_str(a),
            Address::Domain(d) => write!(f, "@{d}"),
            Address::Subdomains(d) => write!(f, "@.{d}"),
        }
    }
}

fn domain_of(addr: &str) -> Option<&str> {
    addr.rsplit_once('@').map(|(_, d)| d)
}

/// Whether `name` is a domain strictly below `parent`.
fn below(name: &str, parent: &str) -> bool {
    name.len() > parent.len() + 1
        && name.ends_with(parent)
        && name.as_bytes()[name.len() - parent.len() - 1] == b'.'
}

/// An address as the MTA gives it in MAIL or RCPT (`<Bob@Example.ORG>`, with a source
/// route, or `<>`), as scopes compare it: without brackets and route, lower case, and
/// the domain without a trailing dot. The null sender is the empty string.
pub fn normalize_address(arg: &[u8]) -> String {
    let s = String::from_utf8_lossy(arg);
    let s = s.trim();
    let s = s.strip_prefix('<').unwrap_or(s);
    let s = s.strip_suffix('>').unwrap_or(s);
    // RFC 5321 §4.1.2: "@relay,@relay:user@domain"; the route is to be ignored.
    let s = match s.strip_prefix('@') {
        Some(route) => route.split_once(':').map_or("", |(_, a)| a),
        None => s,
    };
    s.trim().trim_end_matches('.').to_lowercase()
}

/// A top-level header field a scope looks for: any occurrence of the field whose
/// unfolded value the pattern finds (case-insensitive), or any occurrence at all
/// without a pattern.
#[derive(Debug, Clone)]
pub struct HeaderMatch {
    pub name: String,
    pub pattern: Option<Regex>,
}

impl HeaderMatch {
    pub fn new(name: &str, pattern: Option<&str>) -> Result<HeaderMatch, String> {
        if name.is_empty() || !name.bytes().all(|b| (33..=126).contains(&b) && b != b':') {
            return Err(format!(
                "{name:?} is not a header field name (printable ASCII, no colon, RFC 5322 §3.6.8)"
            ));
        }
        let pattern = match pattern {
            None => None,
            Some(p) => Some(
                regex::bytes::RegexBuilder::new(p)
                    .case_insensitive(true)
                    // Linear-time matching either way; this bounds the compiled size.
                    .size_limit(1 << 20)
                    .build()
                    .map_err(|e| {
                        // The error spans lines (the pattern, a caret); a config error
                        // is one line.
                        let text = e.to_string();
                        let why = text
                            .lines()
                            .rev()
                            .find_map(|l| l.strip_prefix("error: "))
                            .map_or_else(
                                || text.split_whitespace().collect::<Vec<_>>().join(" "),
                                str::to_string,
                            );
                        format!("pattern {p:?} is not a regular expression: {why}")
                    })?,
            ),
        };
        Ok(HeaderMatch {
            name: name.to_string(),
            pattern,
        })
    }

    fn matches(&self, value: &[u8]) -> bool {
        self.pattern.as_ref().is_none_or(|p| p.is_match(value))
    }

    fn pattern_text(&self) -> Option<&str> {
        self.pattern.as_ref().map(Regex::as_str)
    }
}

impl PartialEq for HeaderMatch {
    fn eq(&self, other: &Self) -> bool {
        self.name.eq_ignore_ascii_case(&other.name) && self.pattern_text() == other.pattern_text()
    }
}

impl Eq for HeaderMatch {}

/// What a scope matches on. Every key given must match; a list matches when one entry
/// does. At least one key is given (the configuration checks it).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Matcher {
    pub recipients: Option<Vec<Address>>,
    pub senders: Option<Vec<Address>>,
    pub client_networks: Option<Vec<IpNet>>,
    /// Lower case: compared without regard to case.
    pub sasl_logins: Option<Vec<String>>,
    pub header: Option<HeaderMatch>,
}

impl Matcher {
    /// Whether every message this matcher takes, `earlier` takes too: `earlier` then
    /// wins every time, being tried first.
    fn covered_by(&self, earlier: &Matcher) -> bool {
        fn list<T>(
            mine: &Option<Vec<T>>,
            theirs: &Option<Vec<T>>,
            c: impl Fn(&T, &T) -> bool,
        ) -> bool {
            match (mine, theirs) {
                (_, None) => true,
                (None, Some(_)) => false,
                (Some(m), Some(t)) => m.iter().all(|a| t.iter().any(|b| c(a, b))),
            }
        }
        list(&self.recipients, &earlier.recipients, Address::covered_by)
            && list(&self.senders, &earlier.senders, Address::covered_by)
            && list(&self.client_networks, &earlier.client_networks, |a, b| {
                b.contains(a)
            })
            && list(&self.sasl_logins, &earlier.sasl_logins, |a, b| a == b)
            && match (&self.header, &earlier.header) {
                (_, None) => true,
                (None, Some(_)) => false,
                (Some(m), Some(e)) => {
                    m.name.eq_ignore_ascii_case(&e.name)
                        && (e.pattern.is_none() || m.pattern_text() == e.pattern_text())
                }
            }
    }
}

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
    pub fix_signed: Option<bool>,
    /// `false`: no report header for this scope's mail.
    pub report: Option<bool>,
    pub always: Option<bool>,
    pub min_severity: Option<Severity>,
}

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

impl Scope {
    /// Whether every message this scope takes, `earlier` takes first.
    pub fn shadowed_by(&self, earlier: &Scope) -> bool {
        (earlier.inbound || !self.inbound)
            && (earlier.outbound || !self.outbound)
            && self.matcher.covered_by(&earlier.matcher)
    }
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
            let hit = match (&s.matcher.recipients, addr) {
                (None, _) => true,
                (Some(_), None) => false,
                (Some(l), Some(a)) => l.iter().any(|p| p.matches(a)),
            };
            if hit {
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
                let m = &s.matcher;
                *dir.pick(&s.inbound, &s.outbound)
                    && m.senders
                        .as_ref()
                        .is_none_or(|l| sender.is_some_and(|a| l.iter().any(|p| p.matches(a))))
                    && m.client_networks
                        .as_ref()
                        .is_none_or(|nets| env.client_addr.is_some_and(|a| in_networks(nets, a)))
                    && m.sasl_logins
                        .as_ref()
                        .is_none_or(|l| login.as_ref().is_some_and(|a| l.iter().any(|x| x == a)))
                    && m.header.as_ref().is_none_or(|h| fields.any(h))
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

/// The envelope recipients of one transaction, as the scopes they satisfy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recipients {
    words: usize,
    /// Distinct bit sets, sorted.
    masks: Vec<Box<[u64]>>,
    count: usize,
}

impl Recipients {
    /// One RCPT argument (`<bob@example.org>`), against `scopes` (those the recipients
    /// were made for).
    pub fn add(&mut self, scopes: &Scopes, arg: &[u8]) {
        self.words = scopes.list.len().div_ceil(64);
        self.count += 1;
        let m = scopes.mask(Some(&normalize_address(arg)));
        if let Err(at) = self.masks.binary_search(&m) {
            self.masks.insert(at, m);
        }
    }

    /// Recipients added so far.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Whether these were collected against scopes of the same length.
    fn fits(&self, scopes: &Scopes) -> bool {
        self.words == scopes.list.len().div_ceil(64)
    }
}

/// What the scopes match on, besides the message's own header fields.
#[derive(Debug, Clone, Default)]
pub struct Envelope {
    /// MAIL FROM as `normalize_address` gives it (`""`: the null sender); None when
    /// not known.
    pub sender: Option<String>,
    pub recipients: Recipients,
    pub client_addr: Option<IpAddr>,
    /// `{auth_authen}`.
    pub sasl_login: Option<String>,
    /// Header fields that count as the message's own for matching (the offline
    /// commands' `--header`); the daemon has none.
    pub extra_headers: Vec<(String, Vec<u8>)>,
}

/// The top-level header fields of a message, read once and only when a scope asks.
struct FieldCache<'a> {
    raw: &'a [u8],
    extra: &'a [(String, Vec<u8>)],
    fields: Option<Vec<(&'a [u8], Vec<u8>)>>,
}

impl<'a> FieldCache<'a> {
    fn new(raw: &'a [u8], extra: &'a [(String, Vec<u8>)]) -> FieldCache<'a> {
        FieldCache {
            raw,
            extra,
            fields: None,
        }
    }

    fn any(&mut self, h: &HeaderMatch) -> bool {
        if self
            .extra
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case(&h.name) && h.matches(v))
        {
            return true;
        }
        let raw = self.raw;
        self.fields
            .get_or_insert_with(|| top_level_fields(raw))
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case(h.name.as_bytes()) && h.matches(v))
    }
}

/// The top-level header fields: name and unfolded value without surrounding white
/// space. Lines that are no field (no colon) are passed over; the empty line ends the
/// heading.
pub fn top_level_fields(raw: &[u8]) -> Vec<(&[u8], Vec<u8>)> {
    let mut out: Vec<(&[u8], Vec<u8>)> = Vec::new();
    let mut continuing = false;
    for line in raw.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            break;
        }
        if matches!(line[0], b' ' | b'\t') {
            if continuing {
                if let Some((_, v)) = out.last_mut() {
                    v.extend_from_slice(line);
                }
            }
            continue;
        }
        continuing = false;
        if let Some(colon) = line.iter().position(|&b| b == b':') {
            let name = line[..colon].trim_ascii_end();
            if !name.is_empty() && !name.contains(&b' ') {
                out.push((name, line[colon + 1..].to_vec()));
                continuing = true;
            }
        }
    }
    for (_, v) in &mut out {
        let t = v.trim_ascii();
        if t.len() != v.len() {
            *v = t.to_vec();
        }
    }
    out
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

    /// Whether the engine may change signed content: only when every scope that could
    /// fix allows it.
    pub fn fix_signed(&self, global: bool) -> bool {
        let mut fixing = self.choices.iter().filter_map(|c| match c {
            None => Some(global),
            Some(s) => match &s.effect {
                Effect::Exempt(_) => None,
                Effect::Override(o) => Some(o.fix_signed.unwrap_or(global)),
            },
        });
        let first = fixing.next();
        first.map_or(global, |f| f && fixing.all(|x| x))
    }

    /// The action of a finding, combined over the scopes ([`combine`]).
    pub fn decide(
        &self,
        dir: Direction,
        policies: &Policies,
        report: &Report,
        f: &Finding,
    ) -> Action {
        combine(
            self.choices
                .iter()
                .map(|c| one(*c, dir, policies, report, f.rule, f.fixable, f.severity)),
        )
    }

    /// The action of a message over the limits, combined over the scopes.
    pub fn oversize(&self, policies: &Policies) -> Action {
        combine(self.choices.iter().map(|c| oversize_one(*c, policies)))
    }

    /// Whether the report header goes on the message: some scope wants it, given the
    /// verdict (`always`, or a verdict of report or stronger).
    pub fn wants_header(&self, report: &Report, verdict: Action) -> bool {
        report.header.is_some()
            && self.choices.iter().any(|c| {
                let (enabled, always) = match c {
                    None => (true, report.always),
                    Some(s) => match &s.effect {
                        Effect::Exempt(_) => (false, false),
                        Effect::Override(o) => {
                            (o.report.unwrap_or(true), o.always.unwrap_or(report.always))
                        }
                    },
                };
                enabled && (always || verdict >= Action::Report)
            })
    }

    /// The scope that decided `verdict`: the first whose own action for some finding
    /// (or the oversize action) is the verdict, a fix counting as a report where the
    /// verdict is not `fix`; else the first scope.
    pub fn decided_by(
        &self,
        dir: Direction,
        policies: &Policies,
        report: &Report,
        findings: &[Finding],
        oversize: bool,
        verdict: Action,
    ) -> &'s str {
        let seen = |a: Action| {
            let a = if a == Action::Fix && verdict != Action::Fix {
                Action::Report
            } else {
                a
            };
            a == verdict
        };
        self.choices
            .iter()
            .find(|c| {
                findings.iter().any(|f| {
                    seen(one(
                        **c, dir, policies, report, f.rule, f.fixable, f.severity,
                    ))
                }) || (oversize && seen(oversize_one(**c, policies)))
            })
            .or(self.choices.first())
            .map_or(DEFAULT_NAME, |c| name(*c))
    }
}

fn name(c: Option<&Scope>) -> &str {
    c.map_or(DEFAULT_NAME, |s| s.name.as_str())
}

/// The action one scope (None: the direction's policy) gives a finding.
fn one(
    c: Option<&Scope>,
    dir: Direction,
    policies: &Policies,
    report: &Report,
    rule: Rule,
    fixable: bool,
    severity: Severity,
) -> Action {
    let base = policies.get(dir);
    match c.map(|s| &s.effect) {
        None => with_threshold(base, report.min_severity, rule, fixable, severity),
        Some(Effect::Exempt(cap)) => {
            with_threshold(base, report.min_severity, rule, fixable, severity).min(*cap)
        }
        Some(Effect::Override(o)) => with_threshold(
            dir.pick(&o.inbound, &o.outbound),
            o.min_severity.unwrap_or(report.min_severity),
            rule,
            fixable,
            severity,
        ),
    }
}

/// The policy's action for a finding, where below the header's threshold a report is
/// only logged, unless a policy key names the rule.
fn with_threshold(
    policy: &Policy,
    min_severity: Severity,
    rule: Rule,
    fixable: bool,
    severity: Severity,
) -> Action {
    match policy.action_for(rule, fixable) {
        Action::Report if severity < min_severity && !policy.names(rule) => Action::Log,
        a => a,
    }
}

fn oversize_one(c: Option<&Scope>, policies: &Policies) -> Action {
    match c.map(|s| &s.effect) {
        Some(Effect::Exempt(cap)) => policies.oversize_action.min(*cap),
        _ => policies.oversize_action,
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

/// A scope that can never match, with the reason, for `config-check`: checked against
/// the scopes before it and the direction settings.
pub fn never_matches(
    scope: &Scope,
    earlier: &[Scope],
    trusted_networks: &[IpNet],
) -> Option<String> {
    if !scope.inbound && !scope.outbound {
        return Some("it applies to no direction".into());
    }
    let m = &scope.matcher;
    if m.sasl_logins.is_some() && !scope.outbound {
        return Some(
            "sasl_logins only match authenticated mail, which is always outbound, and the \
             scope is inbound only"
                .into(),
        );
    }
    if let Some(nets) = &m.client_networks {
        if !scope.outbound
            && nets
                .iter()
                .all(|n| trusted_networks.iter().any(|t| t.contains(n)))
        {
            return Some(
                "every client network in it is in trusted_networks, whose mail is outbound, \
                 and the scope is inbound only"
                    .into(),
            );
        }
    }
    earlier.iter().find(|e| scope.shadowed_by(e)).map(|e| {
        format!(
            "scope {:?} (line {}) comes first and matches all of its mail (the first \
             matching scope wins)",
            e.name, e.line
        )
    })
}

/// The heading's value of a field for display (the Message-ID of an example): the
/// first occurrence, unfolded, white space runs as one space.
pub fn first_value(raw: &[u8], name: &str) -> Option<String> {
    let mut value: Option<Vec<u8>> = None;
    for line in raw.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            break;
        }
        if matches!(line[0], b' ' | b'\t') {
            if let Some(v) = value.as_mut() {
                v.extend_from_slice(line);
            }
            continue;
        }
        if value.is_some() {
            break;
        }
        if let Some(colon) = line.iter().position(|&b| b == b':') {
            if line[..colon]
                .trim_ascii_end()
                .eq_ignore_ascii_case(name.as_bytes())
            {
                value = Some(line[colon + 1..].to_vec());
            }
        }
    }
    value.map(|v| {
        String::from_utf8_lossy(&v)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Pattern;

    fn addr(s: &str) -> Address {
        Address::parse(s).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn address_patterns() {
        assert_eq!(addr("<>"), Address::Null);
        assert_eq!(
            addr("Bob@Example.ORG."),
            Address::Exact("bob@example.org".into())
        );
        assert_eq!(addr("@Example.org"), Address::Domain("example.org".into()));
        assert_eq!(
            addr("@.example.org"),
            Address::Subdomains("example.org".into())
        );
        for bad in [
            "",
            "bob",
            "bob@",
            "@",
            "a b@c",
            "<bob@c>",
            "x@.example.org",
            "@..x",
        ] {
            assert!(Address::parse(bad).is_err(), "{bad:?}");
        }
        let n = |s: &str| normalize_address(s.as_bytes());
        assert_eq!(n("<Bob@Example.ORG>"), "bob@example.org");
        assert_eq!(
            n("<@relay.example,@b.example:bob@example.org>"),
            "bob@example.org"
        );
        assert_eq!(n("<>"), "");
        assert_eq!(n(" bob@example.org. "), "bob@example.org");
        assert!(addr("@example.org").matches("bob@example.org"));
        assert!(!addr("@example.org").matches("bob@a.example.org"));
        assert!(addr("@.example.org").matches("bob@a.example.org"));
        assert!(!addr("@.example.org").matches("bob@example.org"));
        assert!(!addr("@.example.org").matches("bob@badexample.org"));
        assert!(addr("bob@example.org").matches("bob@example.org"));
        assert!(!addr("bob@example.org").matches("bobby@example.org"));
        assert!(addr("<>").matches("") && !addr("@example.org").matches(""));
        // A quoted local part may hold an @: the domain is after the last one.
        assert!(addr("@example.org").matches(&n("<\"a@b\"@example.org>")));
    }

    #[test]
    fn header_fields_are_unfolded_and_end_at_the_empty_line() {
        let raw = b"From: a@example.org\r\nList-Id: Announcements\r\n <announce.example.org>\r\n\
                    Subject :x\r\nno colon here\r\n\r\nList-Id: <body.example.org>\r\n";
        let f = top_level_fields(raw);
        let names: Vec<&[u8]> = f.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, [&b"From"[..], b"List-Id", b"Subject"]);
        assert_eq!(f[1].1, b"Announcements <announce.example.org>");
        assert_eq!(f[2].1, b"x");
        assert_eq!(
            first_value(raw, "list-id").as_deref(),
            Some("Announcements <announce.example.org>")
        );
    }

    fn scope(name: &str, m: Matcher, effect: Effect) -> Scope {
        Scope {
            name: name.into(),
            line: 1,
            inbound: true,
            outbound: true,
            matcher: m,
            effect,
        }
    }

    fn rcpt(list: &[&str]) -> Matcher {
        Matcher {
            recipients: Some(list.iter().map(|s| addr(s)).collect()),
            ..Matcher::default()
        }
    }

    fn overriding(entries: &[(&str, Action)]) -> Effect {
        let e: Vec<(Pattern, Action)> = entries
            .iter()
            .map(|(p, a)| (Pattern::parse(p).unwrap(), *a))
            .collect();
        let base = Policy::builtin(Direction::Inbound);
        Effect::Override(Box::new(Overrides {
            inbound: Policy::layered(&base, e.clone()),
            outbound: Policy::layered(&base, e),
            fix_signed: None,
            report: None,
            always: None,
            min_severity: None,
        }))
    }

    fn env(scopes: &Scopes, rcpts: &[&str]) -> Envelope {
        let mut r = scopes.recipients();
        for a in rcpts {
            r.add(scopes, format!("<{a}>").as_bytes());
        }
        Envelope {
            recipients: r,
            ..Envelope::default()
        }
    }

    fn names(s: &Selection) -> Vec<String> {
        s.names()
    }

    #[test]
    fn first_matching_scope_wins_per_recipient() {
        let scopes = Scopes::new(vec![
            scope(
                "vip",
                rcpt(&["boss@example.org"]),
                Effect::Exempt(Action::Ignore),
            ),
            scope(
                "strict",
                rcpt(&["@example.org"]),
                overriding(&[("*", Action::Reject)]),
            ),
        ]);
        let dir = Direction::Inbound;
        let sel = |r: &[&str]| names(&scopes.select(dir, &env(&scopes, r), b""));
        assert_eq!(sel(&["boss@example.org"]), ["vip"]);
        assert_eq!(sel(&["ann@example.org"]), ["strict"]);
        assert!(sel(&["ann@example.net"]).is_empty());
        assert_eq!(
            sel(&[
                "ann@example.net",
                "ann@example.org",
                "Boss@Example.org",
                "x@example.org"
            ]),
            ["vip", "strict", "default"]
        );
        // Without recipients, a scope that asks for one cannot match.
        assert!(sel(&[]).is_empty());
        // Many recipients of the same scopes cost one entry each combination.
        let mut e = env(&scopes, &[]);
        for i in 0..5000 {
            e.recipients
                .add(&scopes, format!("<u{i}@example.org>").as_bytes());
        }
        assert_eq!(e.recipients.masks.len(), 1);
        assert_eq!(e.recipients.count(), 5000);
        assert!(e.recipients.fits(&scopes));
    }

    #[test]
    fn every_key_must_match() {
        let m = Matcher {
            senders: Some(vec![addr("@partner.example")]),
            client_networks: Some(vec!["198.51.100.0/24".parse().unwrap()]),
            header: Some(HeaderMatch::new("List-Id", Some(r"<announce\.example\.org>")).unwrap()),
            ..Matcher::default()
        };
        let scopes = Scopes::new(vec![scope("s", m, Effect::Exempt(Action::Log))]);
        let raw = b"List-Id: Announce <ANNOUNCE.example.org>\r\n\r\nbody\r\n";
        let mut e = Envelope {
            sender: Some("news@partner.example".into()),
            client_addr: Some("198.51.100.7".parse().unwrap()),
            ..Envelope::default()
        };
        let sel = |e: &Envelope, raw: &[u8]| scopes.select(Direction::Inbound, e, raw).scoped();
        assert!(sel(&e, raw));
        assert!(!sel(
            &e,
            b"Subject: x\r\n\r\nList-Id: <announce.example.org>\r\n"
        ));
        e.client_addr = Some("::ffff:198.51.100.9".parse().unwrap());
        assert!(sel(&e, raw), "IPv4-mapped addresses count as IPv4");
        e.client_addr = Some("203.0.113.1".parse().unwrap());
        assert!(!sel(&e, raw));
        e.client_addr = Some("198.51.100.7".parse().unwrap());
        e.sender = Some(String::new());
        assert!(!sel(&e, raw));
        e.sender = None;
        assert!(!sel(&e, raw));
        // --header stands in for a field of the message.
        e.sender = Some("news@partner.example".into());
        e.extra_headers = vec![("list-id".into(), b"<announce.example.org>".to_vec())];
        assert!(sel(&e, b"Subject: x\r\n\r\n"));
    }

    #[test]
    fn sasl_logins_ignore_case_and_directions_restrict() {
        let m = Matcher {
            sasl_logins: Some(vec!["alice".into()]),
            ..Matcher::default()
        };
        let mut s = scope("s", m, Effect::Exempt(Action::Ignore));
        s.inbound = false;
        let scopes = Scopes::new(vec![s]);
        let e = Envelope {
            sasl_login: Some("Alice".into()),
            ..Envelope::default()
        };
        assert!(scopes.select(Direction::Outbound, &e, b"").scoped());
        assert!(!scopes.select(Direction::Inbound, &e, b"").scoped());
    }

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

    fn finding(rule: Rule, fixable: bool) -> Finding {
        let mut f = Finding::new(rule, "1", "x");
        f.fixable = fixable;
        f
    }

    fn policies() -> Policies {
        Policies {
            inbound: Policy::builtin(Direction::Inbound),
            outbound: Policy::builtin(Direction::Outbound),
            oversize_action: Action::Report,
            scopes: Scopes::default(),
        }
    }

    fn report() -> Report {
        Report {
            header: Some("X-MIMERef".into()),
            always: false,
            remove_forged: true,
            min_severity: Severity::Warning,
            redact_urls: true,
        }
    }

    #[test]
    fn decisions_over_several_scopes() {
        let scopes = Scopes::new(vec![
            scope(
                "list",
                rcpt(&["@lists.example.org"]),
                Effect::Exempt(Action::Ignore),
            ),
            scope(
                "strict",
                rcpt(&["@strict.example"]),
                overriding(&[("related-*", Action::Reject)]),
            ),
        ]);
        let (p, r, dir) = (policies(), report(), Direction::Inbound);
        let fixable = finding(Rule::ExtbodyUrlUnquoted, true);
        let dup = finding(Rule::RelatedCidDuplicate, false);
        let decide = |rc: &[&str], f: &Finding| {
            scopes
                .select(dir, &env(&scopes, rc), b"")
                .decide(dir, &p, &r, f)
        };
        assert_eq!(decide(&["a@x.example"], &fixable), Action::Fix);
        assert_eq!(decide(&["l@lists.example.org"], &fixable), Action::Ignore);
        assert_eq!(
            decide(&["a@x.example", "l@lists.example.org"], &fixable),
            Action::Report,
            "a fix an exempt recipient does not want is reported instead"
        );
        assert_eq!(
            decide(&["a@x.example", "s@strict.example"], &fixable),
            Action::Fix
        );
        assert_eq!(
            decide(&["l@lists.example.org", "s@strict.example"], &dup),
            Action::Reject,
            "the strictest refusal wins"
        );
        let sel = scopes.select(
            dir,
            &env(&scopes, &["l@lists.example.org", "s@strict.example"]),
            b"",
        );
        let findings = [fixable.clone(), dup.clone()];
        assert_eq!(
            sel.decided_by(dir, &p, &r, &findings, false, Action::Reject),
            "strict"
        );
        let sel = scopes.select(
            dir,
            &env(&scopes, &["a@x.example", "l@lists.example.org"]),
            b"",
        );
        assert_eq!(
            sel.decided_by(
                dir,
                &p,
                &r,
                std::slice::from_ref(&fixable),
                false,
                Action::Report
            ),
            "default"
        );
        assert!(sel.wants_header(&r, Action::Report));
        let sel = scopes.select(dir, &env(&scopes, &["l@lists.example.org"]), b"");
        assert!(
            !sel.wants_header(&r, Action::Report),
            "exempt mail gets no header"
        );
        assert_eq!(sel.oversize(&p), Action::Ignore);
    }

    #[test]
    fn fix_signed_needs_every_fixing_scope() {
        let with = |v: Option<bool>| {
            let Effect::Override(mut o) = overriding(&[]) else {
                unreachable!()
            };
            o.fix_signed = v;
            Effect::Override(o)
        };
        let scopes = Scopes::new(vec![
            scope("signer", rcpt(&["@a.example"]), with(Some(true))),
            scope("plain", rcpt(&["@b.example"]), with(None)),
            scope("list", rcpt(&["@c.example"]), Effect::Exempt(Action::Log)),
        ]);
        let dir = Direction::Outbound;
        let fs = |r: &[&str], global| scopes.select(dir, &env(&scopes, r), b"").fix_signed(global);
        assert!(fs(&["x@a.example"], false));
        assert!(!fs(&["x@a.example", "y@b.example"], false));
        assert!(fs(&["x@a.example", "y@b.example"], true));
        assert!(!fs(&["x@a.example", "y@elsewhere.example"], false));
        assert!(
            fs(&["x@a.example", "y@c.example"], false),
            "exempt scopes make no fix"
        );
    }

    #[test]
    fn shadowed_scopes_are_found() {
        let earlier = scope(
            "all-of-example",
            rcpt(&["@example.org", "@.example.org"]),
            Effect::Exempt(Action::Ignore),
        );
        let later = |m| scope("later", m, Effect::Exempt(Action::Log));
        assert!(later(rcpt(&["bob@example.org"])).shadowed_by(&earlier));
        assert!(later(rcpt(&["@a.example.org", "x@b.example.org"])).shadowed_by(&earlier));
        assert!(!later(rcpt(&["bob@example.org", "bob@example.net"])).shadowed_by(&earlier));
        // A key the earlier scope does not have narrows nothing it matches.
        let mut m = rcpt(&["bob@example.org"]);
        m.senders = Some(vec![addr("<>")]);
        assert!(later(m).shadowed_by(&earlier));
        // A key the earlier scope has and the later one lacks: the later one is wider.
        let nets = Matcher {
            client_networks: Some(vec!["192.0.2.0/24".parse().unwrap()]),
            ..Matcher::default()
        };
        let narrow = Matcher {
            client_networks: Some(vec!["192.0.2.128/25".parse().unwrap()]),
            ..Matcher::default()
        };
        assert!(later(narrow.clone()).shadowed_by(&scope(
            "n",
            nets.clone(),
            Effect::Exempt(Action::Log)
        )));
        assert!(!later(nets).shadowed_by(&scope("n", narrow, Effect::Exempt(Action::Log))));
        let mut outbound_only = earlier.clone();
        outbound_only.inbound = false;
        assert!(!later(rcpt(&["bob@example.org"])).shadowed_by(&outbound_only));
        let h = |p: Option<&str>| Matcher {
            header: Some(HeaderMatch::new("List-Id", p).unwrap()),
            ..Matcher::default()
        };
        let any_list = scope("lists", h(None), Effect::Exempt(Action::Log));
        assert!(later(h(Some("announce"))).shadowed_by(&any_list));
        assert!(!later(h(None)).shadowed_by(&scope(
            "a",
            h(Some("announce")),
            Effect::Exempt(Action::Log)
        )));
    }

    #[test]
    fn scopes_that_can_never_match() {
        let trusted: Vec<IpNet> = vec!["127.0.0.0/8".parse().unwrap()];
        let mut s = scope(
            "auth",
            Matcher {
                sasl_logins: Some(vec!["alice".into()]),
                ..Matcher::default()
            },
            Effect::Exempt(Action::Log),
        );
        assert!(never_matches(&s, &[], &trusted).is_none());
        s.outbound = false;
        assert!(never_matches(&s, &[], &trusted)
            .unwrap()
            .contains("outbound"));
        let mut local = scope(
            "local",
            Matcher {
                client_networks: Some(vec!["127.0.0.1/32".parse().unwrap()]),
                ..Matcher::default()
            },
            Effect::Exempt(Action::Log),
        );
        local.outbound = false;
        assert!(never_matches(&local, &[], &trusted)
            .unwrap()
            .contains("trusted_networks"));
        let first = scope(
            "first",
            rcpt(&["@example.org"]),
            Effect::Exempt(Action::Log),
        );
        let second = scope(
            "second",
            rcpt(&["bob@example.org"]),
            Effect::Exempt(Action::Log),
        );
        let why = never_matches(&second, std::slice::from_ref(&first), &trusted).unwrap();
        assert!(why.contains("\"first\" (line 1)"), "{why}");
        assert!(never_matches(&first, std::slice::from_ref(&second), &trusted).is_none());
    }
}
