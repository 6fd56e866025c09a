//! Which direction a message goes and what each finding gets there:
//! `trusted_networks`, `outbound_daemons`, `[policy.inbound]`, `[policy.outbound]`.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;
use toml::Spanned;

use super::Validator;
use crate::config::raw::RawConfig;
use crate::policy::{Action, Direction, Directions, Pattern, Policy};

impl Validator<'_> {
    /// `trusted_networks`, `outbound_daemons`.
    pub(super) fn directions(&mut self, raw: &mut RawConfig) -> Directions {
        let trusted_networks = match raw.trusted_networks.take() {
            None => vec!["127.0.0.0/8".parse().ok(), "::1/128".parse().ok()].into_iter().flatten().collect(),
            Some(list) => list
                .into_iter()
                .filter_map(|s| {
                    let t = s.get_ref().trim();
                    let net = t.parse::<IpNet>().ok().or_else(|| t.parse::<IpAddr>().ok().map(IpNet::from));
                    if net.is_none() {
                        self.err(s.span(), format!("trusted_networks: {t:?} is not a CIDR network (e.g. \"192.0.2.0/24\") or address"));
                    }
                    net
                })
                .collect(),
        };
        let outbound_daemons = raw
            .outbound_daemons
            .take()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|s| {
                if s.get_ref().is_empty()
                    || s.get_ref()
                        .chars()
                        .any(|c| c.is_control() || c.is_whitespace())
                {
                    self.err(
                        s.span(),
                        format!("outbound_daemons: {:?} is not a daemon name", s.get_ref()),
                    );
                    None
                } else {
                    Some(s.into_inner())
                }
            })
            .collect();
        Directions {
            trusted_networks,
            outbound_daemons,
        }
    }

    pub(super) fn policy(
        &mut self,
        raw: Option<BTreeMap<Spanned<String>, Spanned<String>>>,
        direction: Direction,
    ) -> Policy {
        let table = format!("[policy.{}]", direction.as_str());
        Policy::new(direction, self.policy_entries(raw, &table))
    }

    /// A table of rule patterns and actions; `table` names it in messages.
    pub(super) fn policy_entries(
        &mut self,
        raw: Option<BTreeMap<Spanned<String>, Spanned<String>>>,
        table: &str,
    ) -> Vec<(Pattern, Action)> {
        let mut entries = Vec::new();
        let mut raw: Vec<_> = raw.unwrap_or_default().into_iter().collect();
        // Keep the file's order so that messages come out top to bottom.
        raw.sort_by_key(|(k, _)| k.span().start);
        for (k, v) in raw {
            let pattern = match Pattern::parse(k.get_ref()) {
                Ok(p) => Some(p),
                Err(e) => {
                    self.err(k.span(), format!("{table}: {e}"));
                    None
                }
            };
            let action = self.action(&v, &format!("{table} {:?}", k.get_ref()));
            if let (Some(p), Some(a)) = (pattern, action) {
                entries.push((p, a));
            }
        }
        entries
    }
}
