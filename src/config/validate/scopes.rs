//! `[[scope]]`: the tables that give some senders, recipients, networks, logins or
//! lists a policy of their own, each read over the direction policies; then the
//! checks across scopes (a name used twice, a scope an earlier one or
//! `trusted_networks` leaves nothing to match).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::ops::Range;

use ipnet::IpNet;
use toml::Spanned;

use super::{line_of, Validator};
use crate::config::raw::{RawScope, RawScopeHeader, RawScopeReport};
use crate::engine::Severity;
use crate::policy::decide::{Effect, Overrides};
use crate::policy::matching::{Address, HeaderMatch, Matcher};
use crate::policy::report::Report;
use crate::policy::scope::{self, Scope, Scopes};
use crate::policy::{Action, Directions, Policy};

impl Validator<'_> {
    /// The `[[scope]]` tables, in file order, each over the direction policies `base`.
    pub(super) fn scopes(
        &mut self,
        raw: Option<Vec<RawScope>>,
        base: (&Policy, &Policy),
        directions: &Directions,
        report: &Report,
    ) -> Scopes {
        let mut list: Vec<Scope> = Vec::new();
        let mut lines: BTreeMap<String, usize> = BTreeMap::new();
        for (n, r) in raw.unwrap_or_default().into_iter().enumerate() {
            let Some(s) = self.scope(n + 1, r, base, report) else {
                continue;
            };
            if let Some(first) = lines.get(&s.name) {
                self.err_at_line(
                    s.line,
                    format!(
                        "[[scope]] name {:?} is already used at line {first}: metrics and \
                         log lines could not tell them apart",
                        s.name
                    ),
                );
            } else {
                lines.insert(s.name.clone(), s.line);
            }
            if let Some(why) = scope::never_matches(&s, &list, &directions.trusted_networks) {
                self.err_at_line(
                    s.line,
                    format!("[[scope]] {:?} can never match: {why}", s.name),
                );
            }
            list.push(s);
        }
        Scopes::new(list)
    }

    /// One `[[scope]]` table; None when it has errors (each recorded).
    fn scope(
        &mut self,
        n: usize,
        r: RawScope,
        base: (&Policy, &Policy),
        report: &Report,
    ) -> Option<Scope> {
        let at = scope_position(&r);
        let line = at.as_ref().map_or(0, |s| line_of(self.text, s.start));
        let at = at.unwrap_or(0..0);
        let mark = self.mark();
        let name = self.scope_name(n, r.name.as_ref(), &at);
        let key = match &r.name {
            Some(_) => format!("[[scope]] {name:?}"),
            None => format!("[[scope]] {name}"),
        };
        let (inbound, outbound) = self.scope_direction(r.direction.as_ref(), &key);
        let RawScope {
            recipients,
            senders,
            client_networks,
            sasl_logins,
            header,
            exempt,
            fix_signed,
            policy,
            report: scope_report,
            ..
        } = r;
        let matcher = Matcher {
            recipients: self.scope_list(recipients, &key, "recipients", Address::parse),
            senders: self.scope_list(senders, &key, "senders", Address::parse),
            client_networks: self.scope_list(
                client_networks,
                &key,
                "client_networks",
                parse_network,
            ),
            sasl_logins: self.scope_list(sasl_logins, &key, "sasl_logins", parse_login),
            header: self.scope_header(header, &key),
        };
        if self.clean_since(mark) && matcher == Matcher::default() {
            self.err(
                at.clone(),
                format!(
                    "{key}: give at least one of recipients, senders, client_networks, \
                     sasl_logins or header (for all mail of a direction use [policy.*])"
                ),
            );
        }
        // What the scope matches on decides whether it is kept; errors in what it does
        // ([scope.policy], [scope.report]) leave it in for the checks across scopes.
        let matches_cleanly = self.clean_since(mark);
        // Given, even with a value in error: the scope is not one that changes nothing.
        let fix_signed_given = fix_signed.is_some();
        let fix_signed = fix_signed.and_then(|v| self.fix_signed(&v, &format!("{key} fix_signed")));
        let effect = match exempt {
            Some(e) => {
                let overrides_given =
                    policy.is_some() || fix_signed_given || scope_report.is_some();
                self.scope_exempt(e, overrides_given, &key)
            }
            None if policy.is_none() && !fix_signed_given && scope_report.is_none() => {
                self.err(
                    at,
                    format!(
                        "{key} changes nothing: give exempt, or [scope.policy], fix_signed or \
                         [scope.report]"
                    ),
                );
                None
            }
            None => {
                let entries = self.policy_entries(policy, &format!("{key} policy"));
                let (report_on, always, min_severity) =
                    self.scope_report(scope_report, &key, report);
                Some(Effect::Override(Box::new(Overrides {
                    inbound: Policy::layered(base.0, entries.clone()),
                    outbound: Policy::layered(base.1, entries),
                    fix_signed,
                    report: report_on,
                    always,
                    min_severity,
                })))
            }
        };
        let effect = effect?;
        if !matches_cleanly {
            return None;
        }
        Some(Scope {
            name,
            line,
            inbound,
            outbound,
            matcher,
            effect,
        })
    }

    /// A scope's `name`: required, short, and not the name of the direction's own policy.
    fn scope_name(
        &mut self,
        n: usize,
        name: Option<&Spanned<String>>,
        at: &Range<usize>,
    ) -> String {
        let Some(s) = name else {
            self.err(
                at.clone(),
                format!("[[scope]] #{n}: name is required (metrics and log lines show it)"),
            );
            return format!("#{n}");
        };
        let t = s.get_ref();
        let valid = !t.is_empty()
            && t.len() <= 64
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !valid {
            self.err(
                s.span(),
                format!("[[scope]] name {t:?}: 1 to 64 letters, digits, '-', '_' or '.'"),
            );
        } else if t == scope::DEFAULT_NAME {
            self.err(
                s.span(),
                format!(
                    "[[scope]] name {t:?} is reserved: metrics and log lines name the \
                     direction's own policy so"
                ),
            );
        }
        t.clone()
    }

    /// A scope's `direction`: (inbound, outbound); both when not given.
    fn scope_direction(&mut self, direction: Option<&Spanned<String>>, key: &str) -> (bool, bool) {
        match direction {
            None => (true, true),
            Some(s) if s.get_ref() == "none" => {
                self.err(
                    s.span(),
                    format!("{key} direction \"none\": the scope could never match"),
                );
                (false, false)
            }
            Some(s) => self
                .direction_set(s, &format!("{key} direction"))
                .unwrap_or((true, true)),
        }
    }

    /// A scope's `header = { name, pattern }`.
    fn scope_header(
        &mut self,
        header: Option<Spanned<RawScopeHeader>>,
        key: &str,
    ) -> Option<HeaderMatch> {
        let h = header?;
        let span = h.span();
        let h = h.into_inner();
        let pattern = h.pattern.as_ref().map(|p| p.get_ref().as_str());
        match HeaderMatch::new(h.name.get_ref(), pattern) {
            Ok(m) => Some(m),
            Err(e) => {
                let at = if e.starts_with("pattern") {
                    h.pattern.as_ref().map_or(span, |p| p.span())
                } else {
                    h.name.span()
                };
                self.err(at, format!("{key} header: {e}"));
                None
            }
        }
    }

    /// A scope's `exempt`: the cap on every finding's action. Nothing else may be
    /// given beside it; None on either error.
    fn scope_exempt(
        &mut self,
        e: Spanned<String>,
        overrides_given: bool,
        key: &str,
    ) -> Option<Effect> {
        let cap = match e.get_ref().as_str() {
            "ignore" => Some(Action::Ignore),
            "log" => Some(Action::Log),
            other => {
                self.err(
                    e.span(),
                    format!("{key} exempt {other:?}: expected \"ignore\" or \"log\""),
                );
                None
            }
        };
        if overrides_given {
            self.err(
                e.span(),
                format!(
                    "{key}: exempt sets every finding aside; it cannot be combined \
                     with policy, fix_signed or report"
                ),
            );
            return None;
        }
        cap.map(Effect::Exempt)
    }

    /// A scope's `[scope.report]`: (enabled, always, min_severity), each None when not
    /// given.
    fn scope_report(
        &mut self,
        scope_report: Option<Spanned<RawScopeReport>>,
        key: &str,
        report: &Report,
    ) -> (Option<bool>, Option<bool>, Option<Severity>) {
        let Some(rr) = scope_report else {
            return (None, None, None);
        };
        let rr = rr.into_inner();
        let on = rr.enabled.map(|e| {
            if *e.get_ref() && report.header.is_none() {
                self.err(
                    e.span(),
                    format!(
                        "{key} report enabled = true needs [report] enabled = \
                         true (the header is named there)"
                    ),
                );
            }
            *e.get_ref()
        });
        let sev = rr.min_severity.and_then(|s| {
            let v = Severity::parse(s.get_ref());
            if v.is_none() {
                self.err(
                    s.span(),
                    format!(
                        "{key} report min_severity {:?}: expected \"info\", \
                         \"warning\" or \"error\"",
                        s.get_ref()
                    ),
                );
            }
            v
        });
        (on, rr.always, sev)
    }

    /// A list key of a scope: every entry parsed by `parse`; an empty list matches
    /// nothing, so it is an error rather than a scope that silently never applies.
    fn scope_list<T>(
        &mut self,
        v: Option<Spanned<Vec<Spanned<String>>>>,
        key: &str,
        list: &str,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Option<Vec<T>> {
        let v = v?;
        if v.get_ref().is_empty() {
            self.err(
                v.span(),
                format!("{key} {list} is empty: the scope could never match"),
            );
            return None;
        }
        let mut out = Vec::new();
        for s in v.into_inner() {
            match parse(s.get_ref()) {
                Ok(t) => out.push(t),
                Err(e) => {
                    self.err(s.span(), format!("{key} {list}: {e}"));
                }
            }
        }
        Some(out)
    }
}

/// Where a `[[scope]]` table is, for messages about it as a whole: its name, else its
/// first key.
fn scope_position(r: &RawScope) -> Option<Range<usize>> {
    let spans = [
        r.name.as_ref().map(|s| s.span()),
        r.direction.as_ref().map(|s| s.span()),
        r.recipients.as_ref().map(|s| s.span()),
        r.senders.as_ref().map(|s| s.span()),
        r.client_networks.as_ref().map(|s| s.span()),
        r.sasl_logins.as_ref().map(|s| s.span()),
        r.header.as_ref().map(|s| s.span()),
        r.exempt.as_ref().map(|s| s.span()),
        r.fix_signed.as_ref().map(|s| s.span()),
        r.report.as_ref().map(|s| s.span()),
    ];
    r.name.as_ref().map(|s| s.span()).or_else(|| {
        spans
            .iter()
            .flatten()
            .min_by_key(|s| s.start)
            .cloned()
            .or_else(|| {
                r.policy
                    .as_ref()
                    .and_then(|p| p.keys().map(|k| k.span()).min_by_key(|s| s.start))
            })
    })
}

/// A `client_networks` entry: a CIDR network, or an address (its /32 or /128).
fn parse_network(t: &str) -> Result<IpNet, String> {
    let t = t.trim();
    t.parse::<IpNet>()
        .ok()
        .or_else(|| t.parse::<IpAddr>().ok().map(IpNet::from))
        .map(|n| n.trunc())
        .ok_or_else(|| format!("{t:?} is not a CIDR network (e.g. \"192.0.2.0/24\") or address"))
}

/// A `sasl_logins` entry, compared without case.
fn parse_login(t: &str) -> Result<String, String> {
    if t.is_empty() || t.chars().any(|c| c.is_control() || c.is_whitespace()) {
        Err(format!("{t:?} is not a SASL login name"))
    } else {
        Ok(t.to_lowercase())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn errs(text: &str) -> Vec<String> {
        match Config::parse(text, "t.toml") {
            Ok(_) => Vec::new(),
            Err(e) => e.errors.iter().map(|e| e.to_string()).collect(),
        }
    }

    /// A scope whose match has an error is left out of the checks across scopes (they
    /// would speak of a scope that is not there); one whose `[scope.policy]` or
    /// `[scope.report]` has an error still takes part, so that its name and its reach
    /// are checked in the same run.
    #[test]
    fn only_errors_in_what_a_scope_matches_leave_it_out() {
        let dropped = "[[scope]]\nname = \"dup\"\nrecipients = [\"bob\"]\nexempt = \"log\"\n\
                       [[scope]]\nname = \"dup\"\nrecipients = [\"@b.example\"]\nexempt = \"log\"\n";
        let e = errs(dropped);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with("t.toml:3: ") && e[0].contains("\"bob\""),
            "{e:?}"
        );
        let kept = "[[scope]]\nname = \"dup\"\nrecipients = [\"@a.example\"]\n\
                    [scope.policy]\n\"related-*\" = \"rejekt\"\n[scope.report]\nmin_severity = \"loud\"\n\
                    [[scope]]\nname = \"dup\"\nrecipients = [\"@b.example\"]\nexempt = \"log\"\n";
        let e = errs(kept);
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(
            e[0].starts_with("t.toml:5: ") && e[0].contains("rejekt"),
            "{e:?}"
        );
        assert!(
            e[1].starts_with("t.toml:7: ") && e[1].contains("loud"),
            "{e:?}"
        );
        assert_eq!(
            e[2],
            "t.toml:9: [[scope]] name \"dup\" is already used at line 2: metrics and log \
             lines could not tell them apart"
        );
    }
}
