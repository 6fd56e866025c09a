//! Which way a message travels: [`Directions`] decides it from the MTA's macros and the
//! client address, as `trusted_networks` and `outbound_daemons` say.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ffi::CStr;
use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;

/// Which way a message travels, as far as the MTA's macros and the client address tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    Inbound,
    Outbound,
}

impl Direction {
    /// The one of a pair of per-direction settings that applies.
    pub fn pick<'a, T>(self, inbound: &'a T, outbound: &'a T) -> &'a T {
        match self {
            Direction::Inbound => inbound,
            Direction::Outbound => outbound,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Inbound => "inbound",
            Direction::Outbound => "outbound",
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The settings that decide a message's direction.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Directions {
    pub trusted_networks: Vec<IpNet>,
    pub outbound_daemons: Vec<String>,
}

impl Directions {
    /// Outbound when the client authenticated, connects from a trusted network, or came
    /// in through one of `outbound_daemons`; inbound otherwise (also when macros are
    /// missing: the cautious side). `macros` holds them by name, `{auth_type}` or
    /// `auth_type`.
    pub fn direction(
        &self,
        macros: &BTreeMap<String, String>,
        client_addr: Option<IpAddr>,
    ) -> Direction {
        self.direction_with(
            |name| {
                let name = name.to_str().unwrap_or_default();
                macros
                    .get(name)
                    .or_else(|| macros.get(name.trim_start_matches('{').trim_end_matches('}')))
                    .map(|v| Cow::Borrowed(v.as_str()))
            },
            client_addr,
        )
    }

    /// [`Directions::direction`] with the macros looked up one by one, and only those the
    /// decision needs: `macro_value` is asked for `{auth_authen}`, `{auth_type}`,
    /// `{client_addr}` or `{daemon_name}`.
    pub fn direction_with<'m>(
        &self,
        macro_value: impl Fn(&'static CStr) -> Option<Cow<'m, str>>,
        client_addr: Option<IpAddr>,
    ) -> Direction {
        self.decide_with(macro_value, client_addr).0
    }

    /// [`Directions::direction_with`], and what decided it: the per-message log line
    /// says so, because "why was this mail outbound?" is the question admins ask.
    pub fn decide_with<'m>(
        &self,
        macro_value: impl Fn(&'static CStr) -> Option<Cow<'m, str>>,
        client_addr: Option<IpAddr>,
    ) -> (Direction, Reason) {
        let get = |name| macro_value(name).filter(|v| !v.is_empty());
        if get(c"{auth_authen}").is_some() || get(c"{auth_type}").is_some() {
            return (Direction::Outbound, Reason::Auth);
        }
        let addr = client_addr.or_else(|| get(c"{client_addr}").and_then(|a| parse_ip(&a)));
        if let Some(net) = addr.and_then(|a| matching_network(&self.trusted_networks, a)) {
            return (Direction::Outbound, Reason::TrustedNetworks(net));
        }
        if !self.outbound_daemons.is_empty() {
            if let Some(d) = get(c"{daemon_name}") {
                if self.outbound_daemons.iter().any(|o| *o == *d) {
                    return (Direction::Outbound, Reason::Daemon(d.into_owned()));
                }
            }
        }
        (Direction::Inbound, Reason::Default)
    }
}

/// What made a message's direction, in the words of the settings an admin would
/// change: the log line shows it as `direction=outbound(trusted_networks:192.0.2.0/24)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// `{auth_authen}` or `{auth_type}`: the client authenticated (SMTP AUTH).
    Auth,
    /// The client address lies in this network of `trusted_networks`.
    TrustedNetworks(IpNet),
    /// `{daemon_name}` (Postfix's `milter_macro_daemon_name`) is in `outbound_daemons`.
    Daemon(String),
    /// Nothing above: inbound, the cautious side.
    Default,
}

impl Reason {
    /// The reason without its detail, one of a fixed few (a JSON key's value to group by).
    pub fn word(&self) -> &'static str {
        match self {
            Reason::Auth => "auth",
            Reason::TrustedNetworks(_) => "trusted_networks",
            Reason::Daemon(_) => "daemon",
            Reason::Default => "default",
        }
    }
}

/// `auth`, `trusted_networks:192.0.2.0/24`, `daemon:submission`, `default`: no white
/// space, so the log line stays one token per `key=value` for grep, awk and logfmt.
impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::TrustedNetworks(n) => write!(f, "trusted_networks:{n}"),
            Reason::Daemon(d) => write!(f, "daemon:{d}"),
            r => f.write_str(r.word()),
        }
    }
}

/// The client address as a `{client_addr}` macro gives it.
pub fn parse_ip(s: &str) -> Option<IpAddr> {
    // Sendmail writes IPv6 client addresses as `IPv6:2001:db8::1`, sometimes in brackets.
    let s = s.trim().trim_start_matches('[').trim_end_matches(']');
    let s = s
        .strip_prefix("IPv6:")
        .or_else(|| s.strip_prefix("ipv6:"))
        .unwrap_or(s);
    s.parse().ok()
}

/// Whether `addr` lies in one of `nets` (IPv4-mapped IPv6 addresses count as IPv4).
pub fn in_networks(nets: &[IpNet], addr: IpAddr) -> bool {
    matching_network(nets, addr).is_some()
}

/// The first of `nets` that holds `addr` (IPv4-mapped IPv6 addresses count as IPv4).
fn matching_network(nets: &[IpNet], addr: IpAddr) -> Option<IpNet> {
    let addr = match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        a => a,
    };
    nets.iter().find(|n| n.contains(&addr)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks() {
        let nets: Vec<IpNet> = vec!["127.0.0.0/8".parse().unwrap(), "::1/128".parse().unwrap()];
        assert!(in_networks(&nets, "127.0.0.2".parse().unwrap()));
        assert!(in_networks(&nets, "::ffff:127.0.0.1".parse().unwrap()));
        assert!(in_networks(&nets, "::1".parse().unwrap()));
        assert!(!in_networks(&nets, "192.0.2.1".parse().unwrap()));
    }

    /// Each way to a direction names itself, the network or daemon that matched
    /// included, and authentication wins over the rest as it decides first.
    #[test]
    fn reasons() {
        let d = Directions {
            trusted_networks: vec![
                "10.0.0.0/8".parse().unwrap(),
                "192.0.2.0/24".parse().unwrap(),
            ],
            outbound_daemons: vec!["submission".into()],
        };
        let decide = |m: &[(&str, &str)], addr: Option<&str>| {
            let macros: BTreeMap<String, String> = m
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let (dir, why) = d.decide_with(
                |name| {
                    macros
                        .get(name.to_str().unwrap())
                        .map(|v| Cow::Owned(v.clone()))
                },
                addr.map(|a| a.parse().unwrap()),
            );
            format!("{dir}({why})")
        };
        assert_eq!(
            decide(&[("{auth_type}", "PLAIN")], Some("192.0.2.7")),
            "outbound(auth)"
        );
        assert_eq!(
            decide(&[], Some("::ffff:192.0.2.7")),
            "outbound(trusted_networks:192.0.2.0/24)"
        );
        assert_eq!(
            decide(&[("{client_addr}", "10.1.2.3")], None),
            "outbound(trusted_networks:10.0.0.0/8)"
        );
        assert_eq!(
            decide(&[("{daemon_name}", "submission")], Some("198.51.100.1")),
            "outbound(daemon:submission)"
        );
        assert_eq!(
            decide(&[("{daemon_name}", "smtpd")], Some("198.51.100.1")),
            "inbound(default)"
        );
        assert_eq!(decide(&[], None), "inbound(default)");
        assert_eq!(
            Reason::TrustedNetworks("::1/128".parse().unwrap()).word(),
            "trusted_networks"
        );
    }
}
