//! The listening socket of the milter, as written in the config (`socket`) or on the
//! command line (`--socket`): parsed once, when the configuration is read.

use std::fmt;
use std::path::PathBuf;

/// A listening socket as written in the config or on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SocketSpec {
    Inet { host: String, port: u16 },
    Unix(PathBuf),
}

impl SocketSpec {
    /// `inet:HOST:PORT`, libmilter's `inet:PORT@HOST`, `inet:PORT` (all addresses),
    /// the same with `inet6:` (IPv6 hosts may be bracketed), `unix:/PATH` or `local:/PATH`.
    pub fn parse(s: &str) -> Result<SocketSpec, SocketSpecError> {
        let given = || s.to_string();
        let (kind, rest) = s
            .split_once(':')
            .ok_or_else(|| SocketSpecError::NoType { given: given() })?;
        match kind {
            "unix" | "local" => {
                if rest.is_empty() {
                    return Err(SocketSpecError::EmptyPath { given: given() });
                }
                Ok(SocketSpec::Unix(PathBuf::from(rest)))
            }
            "inet" | "inet6" => {
                let any = if kind == "inet" { "0.0.0.0" } else { "::" };
                let (host, port) = if let Some((port, host)) = rest.split_once('@') {
                    (host, port)
                } else if let Some((host, port)) = rest.rsplit_once(':') {
                    (host, port)
                } else {
                    (any, rest)
                };
                let host = host.trim_start_matches('[').trim_end_matches(']');
                let host = if host.is_empty() { any } else { host };
                let port: u16 = port.parse().map_err(|_| SocketSpecError::BadPort {
                    given: given(),
                    port: port.to_string(),
                })?;
                if host.chars().any(|c| c.is_whitespace() || c.is_control()) {
                    return Err(SocketSpecError::BadHost {
                        given: given(),
                        host: host.to_string(),
                    });
                }
                Ok(SocketSpec::Inet {
                    host: host.to_string(),
                    port,
                })
            }
            _ => Err(SocketSpecError::UnknownType {
                given: given(),
                kind: kind.to_string(),
            }),
        }
    }
}

/// Why a socket specification does not parse; each names the text given, which
/// `config-check` prefixes with the file, line and `socket:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SocketSpecError {
    /// No `TYPE:` before the address.
    NoType { given: String },
    /// `unix:` or `local:` with nothing after it.
    EmptyPath { given: String },
    /// The port is not a number from 0 to 65535.
    BadPort { given: String, port: String },
    /// The host has white space or control characters in it.
    BadHost { given: String, host: String },
    /// A type other than inet, inet6, unix (or local).
    UnknownType { given: String, kind: String },
}

impl fmt::Display for SocketSpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SocketSpecError::NoType { given } => write!(
                f,
                "{given:?}: expected inet:HOST:PORT, inet:PORT@HOST, inet6:… or unix:/PATH"
            ),
            SocketSpecError::EmptyPath { given } => write!(f, "{given:?}: empty socket path"),
            SocketSpecError::BadPort { given, port } => {
                write!(f, "{given:?}: {port:?} is not a port number")
            }
            SocketSpecError::BadHost { given, host } => write!(f, "{given:?}: bad host {host:?}"),
            SocketSpecError::UnknownType { given, kind } => write!(
                f,
                "{given:?}: unknown socket type {kind:?} (inet, inet6, unix)"
            ),
        }
    }
}

impl std::error::Error for SocketSpecError {}

impl fmt::Display for SocketSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SocketSpec::Inet { host, port } if host.contains(':') => {
                write!(f, "inet6:[{host}]:{port}")
            }
            SocketSpec::Inet { host, port } => write!(f, "inet:{host}:{port}"),
            SocketSpec::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_specs() {
        let inet = |h: &str, p| SocketSpec::Inet {
            host: h.into(),
            port: p,
        };
        assert_eq!(
            SocketSpec::parse("inet:127.0.0.1:8897").unwrap(),
            inet("127.0.0.1", 8897)
        );
        assert_eq!(
            SocketSpec::parse("inet:8897@127.0.0.1").unwrap(),
            inet("127.0.0.1", 8897)
        );
        assert_eq!(
            SocketSpec::parse("inet:8897").unwrap(),
            inet("0.0.0.0", 8897)
        );
        assert_eq!(
            SocketSpec::parse("inet6:[::1]:8897").unwrap(),
            inet("::1", 8897)
        );
        assert_eq!(
            SocketSpec::parse("inet6:8897@::1").unwrap(),
            inet("::1", 8897)
        );
        assert_eq!(
            SocketSpec::parse("inet:localhost:0").unwrap(),
            inet("localhost", 0)
        );
        assert_eq!(
            SocketSpec::parse("unix:/run/m.sock").unwrap(),
            SocketSpec::Unix("/run/m.sock".into())
        );
        assert!(SocketSpec::parse("tcp:1.2.3.4:5").is_err());
        assert!(SocketSpec::parse("inet:1.2.3.4:99999").is_err());
        assert!(SocketSpec::parse("unix:").is_err());
        assert!(SocketSpec::parse("8897").is_err());
        assert_eq!(inet("::1", 5).to_string(), "inet6:[::1]:5");
    }

    /// The words of every way a specification fails, as `config-check`, `serve
    /// --socket` and `probe --socket` have printed them.
    #[test]
    fn socket_spec_errors_read_as_before() {
        let cases = [
            (
                "8897",
                r#""8897": expected inet:HOST:PORT, inet:PORT@HOST, inet6:… or unix:/PATH"#,
            ),
            ("unix:", r#""unix:": empty socket path"#),
            ("local:", r#""local:": empty socket path"#),
            (
                "inet:1.2.3.4:99999",
                r#""inet:1.2.3.4:99999": "99999" is not a port number"#,
            ),
            ("inet6:[::1]:", r#""inet6:[::1]:": "" is not a port number"#),
            ("inet:a b:25", r#""inet:a b:25": bad host "a b""#),
            (
                "tcp:1.2.3.4:5",
                r#""tcp:1.2.3.4:5": unknown socket type "tcp" (inet, inet6, unix)"#,
            ),
        ];
        for (spec, words) in cases {
            assert_eq!(
                SocketSpec::parse(spec).unwrap_err().to_string(),
                words,
                "{spec}"
            );
        }
    }

    /// Callers can tell the reasons apart without reading the words.
    #[test]
    fn socket_spec_errors_are_typed() {
        assert_eq!(
            SocketSpec::parse("inet:h:99999"),
            Err(SocketSpecError::BadPort {
                given: "inet:h:99999".into(),
                port: "99999".into()
            })
        );
        assert!(matches!(
            SocketSpec::parse("tcp:h:1"),
            Err(SocketSpecError::UnknownType { kind, .. }) if kind == "tcp"
        ));
        let e: Box<dyn std::error::Error> = Box::new(SocketSpec::parse("unix:").unwrap_err());
        assert_eq!(e.to_string(), r#""unix:": empty socket path"#);
    }
}
