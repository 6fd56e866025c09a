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
    pub fn parse(s: &str) -> Result<SocketSpec, String> {
        let (kind, rest) = s.split_once(':').ok_or_else(|| {
            format!("{s:?}: expected inet:HOST:PORT, inet:PORT@HOST, inet6:… or unix:/PATH")
        })?;
        match kind {
            "unix" | "local" => {
                if rest.is_empty() {
                    return Err(format!("{s:?}: empty socket path"));
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
                let port: u16 = port
                    .parse()
                    .map_err(|_| format!("{s:?}: {port:?} is not a port number"))?;
                if host.chars().any(|c| c.is_whitespace() || c.is_control()) {
                    return Err(format!("{s:?}: bad host {host:?}"));
                }
                Ok(SocketSpec::Inet {
                    host: host.to_string(),
                    port,
                })
            }
            _ => Err(format!(
                "{s:?}: unknown socket type {kind:?} (inet, inet6, unix)"
            )),
        }
    }
}

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
}
