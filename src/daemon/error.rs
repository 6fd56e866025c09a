//! What stops the daemon, as one type: each case carries the error underneath and what
//! it happened to (the socket, the file, the group), and only `Display` words it. The
//! command line decides where the message goes and the exit status (`cli`); the daemon
//! only returns it.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::config::{ConfigErrors, SocketSpec, SocketSpecError};
use crate::milter::metrics::RecorderError;

/// Why `serve` could not start, or stopped with an error.
#[derive(Debug)]
pub enum DaemonError {
    /// The configuration file could not be loaded at start.
    Config(ConfigErrors),
    /// `--socket` is not a socket specification (the configuration's own reason, which
    /// quotes what was given).
    SocketSpec(SocketSpecError),
    /// The Prometheus recorder could not be installed.
    MetricsRecorder(RecorderError),
    /// The async runtime could not start.
    Runtime(io::Error),
    /// The milter socket could not be bound or set up.
    Bind(BindError),
    /// Another process serves the milter socket, or may: left alone.
    SocketInUse { spec: SocketSpec, holder: Holder },
    /// `metrics_listen` could not be bound.
    MetricsListen { addr: SocketAddr, source: io::Error },
    /// A signal handler could not be installed.
    Signal(io::Error),
    /// The milter server stopped with an error.
    Milter(io::Error),
}

/// What binding the milter socket failed at.
#[derive(Debug)]
pub enum BindError {
    /// bind(2) or listen(2) on the socket.
    Listen { spec: SocketSpec, source: io::Error },
    /// Something other than a socket is at the unix socket's path.
    NotASocket { path: PathBuf },
    /// A socket file nobody serves could not be removed.
    RemoveStale { path: PathBuf, source: io::Error },
    /// The socket file bound could not be opened to be known as this daemon's.
    AfterBind { path: PathBuf, source: io::Error },
    /// `socket_mode` could not be applied.
    SocketMode { path: PathBuf, source: io::Error },
    /// `socket_group` names no group.
    NoSuchGroup { group: String },
    /// `socket_group` could not be applied.
    SocketGroup { path: PathBuf, source: io::Error },
}

/// Who holds the milter socket, as far as could be found.
#[derive(Debug)]
pub enum Holder {
    /// Another process listens on the TCP address (named, if it could be found).
    Listening(Option<String>),
    /// Another process serves the unix socket (named, if it could be found).
    Serving(Option<String>),
    /// Connecting to the unix socket fails otherwise, so whether a process serves it
    /// is not known.
    Unknown(io::Error),
}

/// What to do when the socket is taken, for the error line.
const IN_USE_HINT: &str = "stop that process first (systemctl stop mimeref-milter, if it \
                           is the service), or give this one another socket (--socket)";

impl fmt::Display for DaemonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The file's own errors name it, with the line.
            DaemonError::Config(e) => write!(f, "{e}"),
            DaemonError::SocketSpec(e) => write!(f, "mimeref-milter: socket {e}"),
            DaemonError::MetricsRecorder(e) => write!(f, "mimeref-milter: metrics recorder: {e}"),
            DaemonError::Runtime(e) => write!(f, "cannot start the runtime: {e}"),
            DaemonError::Bind(e) => write!(f, "{e}"),
            DaemonError::SocketInUse { spec, holder } => in_use(f, spec, holder),
            DaemonError::MetricsListen { addr, source } => {
                write!(f, "metrics endpoint {addr}: {source}")
            }
            DaemonError::Signal(e) => write!(f, "cannot install signal handler: {e}"),
            DaemonError::Milter(e) => write!(f, "milter failed: {e}"),
        }
    }
}

fn in_use(f: &mut fmt::Formatter<'_>, spec: &SocketSpec, holder: &Holder) -> fmt::Result {
    let named = |h: &Option<String>| h.as_ref().map_or_else(String::new, |h| format!(" ({h})"));
    match holder {
        Holder::Listening(h) => write!(
            f,
            "{spec}: another process listens on this address{}; {IN_USE_HINT}",
            named(h)
        ),
        Holder::Serving(h) => write!(
            f,
            "{spec}: another process serves this socket{}; not removing it; {IN_USE_HINT}",
            named(h)
        ),
        Holder::Unknown(e) => write!(
            f,
            "{spec}: a socket is there and connecting to it fails ({e}), so whether a \
             process serves it is not known; not removing it; remove it by hand if no \
             process does"
        ),
    }
}

impl fmt::Display for BindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BindError::Listen { spec, source } => write!(f, "cannot listen on {spec}: {source}"),
            BindError::NotASocket { path } => write!(
                f,
                "{} exists and is not a socket; not touching it",
                path.display()
            ),
            BindError::RemoveStale { path, source } => {
                write!(f, "cannot remove stale socket {}: {source}", path.display())
            }
            BindError::AfterBind { path, source } => {
                write!(f, "{}: after bind: {source}", path.display())
            }
            BindError::SocketMode { path, source } => {
                write!(f, "socket_mode on {}: {source}", path.display())
            }
            BindError::NoSuchGroup { group } => write!(f, "socket_group {group:?}: no such group"),
            BindError::SocketGroup { path, source } => {
                write!(f, "socket_group on {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for DaemonError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DaemonError::Config(e) => Some(e),
            DaemonError::MetricsRecorder(e) => Some(e),
            DaemonError::Bind(e) => Some(e),
            DaemonError::SocketInUse {
                holder: Holder::Unknown(e),
                ..
            }
            | DaemonError::Runtime(e)
            | DaemonError::Signal(e)
            | DaemonError::Milter(e)
            | DaemonError::MetricsListen { source: e, .. } => Some(e),
            DaemonError::SocketSpec(_) | DaemonError::SocketInUse { .. } => None,
        }
    }
}

impl std::error::Error for BindError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BindError::Listen { source, .. }
            | BindError::RemoveStale { source, .. }
            | BindError::AfterBind { source, .. }
            | BindError::SocketMode { source, .. }
            | BindError::SocketGroup { source, .. } => Some(source),
            BindError::NotASocket { .. } | BindError::NoSuchGroup { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words of every bind failure, as they were when each was written out where
    /// it happened.
    #[test]
    fn bind_failures_read_as_before() {
        let spec = SocketSpec::Unix("/run/m/sock".into());
        let path = PathBuf::from("/run/m/sock");
        let io = || io::Error::from(io::ErrorKind::PermissionDenied);
        let e = io().to_string();
        let bind = |b| DaemonError::Bind(b).to_string();
        let cases = [
            (
                bind(BindError::Listen {
                    spec: spec.clone(),
                    source: io(),
                }),
                format!("cannot listen on unix:/run/m/sock: {e}"),
            ),
            (
                bind(BindError::NotASocket { path: path.clone() }),
                "/run/m/sock exists and is not a socket; not touching it".into(),
            ),
            (
                bind(BindError::RemoveStale {
                    path: path.clone(),
                    source: io(),
                }),
                format!("cannot remove stale socket /run/m/sock: {e}"),
            ),
            (
                bind(BindError::AfterBind {
                    path: path.clone(),
                    source: io(),
                }),
                format!("/run/m/sock: after bind: {e}"),
            ),
            (
                bind(BindError::SocketMode {
                    path: path.clone(),
                    source: io(),
                }),
                format!("socket_mode on /run/m/sock: {e}"),
            ),
            (
                bind(BindError::NoSuchGroup {
                    group: "postfix".into(),
                }),
                "socket_group \"postfix\": no such group".into(),
            ),
            (
                bind(BindError::SocketGroup {
                    path: path.clone(),
                    source: io(),
                }),
                format!("socket_group on /run/m/sock: {e}"),
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }

    #[test]
    fn a_taken_socket_reads_as_before() {
        let in_use = |holder| {
            DaemonError::SocketInUse {
                spec: SocketSpec::Unix("/run/m/sock".into()),
                holder,
            }
            .to_string()
        };
        let hint = "stop that process first (systemctl stop mimeref-milter, if it is the \
                    service), or give this one another socket (--socket)";
        assert_eq!(
            in_use(Holder::Serving(Some("pid 7: x".into()))),
            format!(
                "unix:/run/m/sock: another process serves this socket (pid 7: x); not \
                 removing it; {hint}"
            )
        );
        assert_eq!(
            in_use(Holder::Listening(None)),
            format!("unix:/run/m/sock: another process listens on this address; {hint}")
        );
        let e = io::Error::from(io::ErrorKind::PermissionDenied);
        assert_eq!(
            in_use(Holder::Unknown(io::Error::from(
                io::ErrorKind::PermissionDenied
            ))),
            format!(
                "unix:/run/m/sock: a socket is there and connecting to it fails ({e}), so \
                 whether a process serves it is not known; not removing it; remove it by \
                 hand if no process does"
            )
        );
    }

    /// `serve --socket` with a specification that does not parse stops the start with
    /// the specification's own words.
    #[test]
    fn a_bad_socket_option_reads_as_before() {
        let e = crate::daemon::serve(crate::daemon::ServeOptions {
            config: Some("/dev/null".into()),
            socket: Some("tcp:1.2.3.4:5".into()),
            dry_run: false,
        })
        .unwrap_err();
        assert!(matches!(e, DaemonError::SocketSpec(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            r#"mimeref-milter: socket "tcp:1.2.3.4:5": unknown socket type "tcp" (inet, inet6, unix)"#
        );
    }
}
