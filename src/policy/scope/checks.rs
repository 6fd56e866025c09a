//! Scopes that can never match, for `config-check`: one that applies to no direction,
//! one whose keys only match mail of the direction it leaves out, and one an earlier
//! scope takes all the mail of (the first matching scope wins).

use ipnet::IpNet;

use super::Scope;

impl Scope {
    /// Whether every message this scope takes, `earlier` takes first.
    pub fn shadowed_by(&self, earlier: &Scope) -> bool {
        (earlier.inbound || !self.inbound)
            && (earlier.outbound || !self.outbound)
            && self.matcher.covered_by(&earlier.matcher)
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
