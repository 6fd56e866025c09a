//! What stops the daemon, as one type: the command line turns it into the message and
//! the exit status (`cli`), the daemon only returns it.

use std::fmt;
use std::io;
use std::net::SocketAddr;

use crate::config::ConfigErrors;

/// Why `serve` could not start, or stopped with an error.
#[derive(Debug)]
pub enum DaemonError {
    /// The configuration file could not be loaded at start.
    Config(ConfigErrors),
    /// `--socket` is not a socket specification.
    SocketSpec(String),
    /// The Prometheus recorder could not be installed.
    MetricsRecorder(String),
    /// The async runtime could not start.
    Runtime(io::Error),
    /// The milter socket could not be bound (the text names it and says why).
    Bind(String),
    /// Another process serves the milter socket (the text names the socket and, if it
    /// could be found, the process). Left alone: exit status 69 (EX_UNAVAILABLE).
    SocketInUse(String),
    /// `metrics_listen` could not be bound.
    MetricsListen { addr: SocketAddr, source: io::Error },
    /// A signal handler could not be installed.
    Signal(io::Error),
    /// The milter server stopped with an error.
    Milter(io::Error),
}

/// sysexits(3) EX_UNAVAILABLE: what OpenDKIM exits with when its socket is taken,
/// so that a unit or a script can tell "another instance runs" from a failure.
pub const EX_UNAVAILABLE: u8 = 69;

impl DaemonError {
    /// The exit status: [`EX_UNAVAILABLE`] when the socket is another process's, 1 for
    /// every other failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            DaemonError::SocketInUse(_) => EX_UNAVAILABLE,
            _ => 1,
        }
    }

    /// Whether logging had been set up when it happened: then the message belongs in
    /// the log; before, on standard error.
    pub fn after_logging_began(&self) -> bool {
        !matches!(
            self,
            DaemonError::Config(_) | DaemonError::SocketSpec(_) | DaemonError::MetricsRecorder(_)
        )
    }
}

impl fmt::Display for DaemonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The file's own errors name it, with the line.
            DaemonError::Config(e) => write!(f, "{e}"),
            DaemonError::SocketSpec(e) => write!(f, "mimeref-milter: socket {e}"),
            DaemonError::MetricsRecorder(e) => write!(f, "mimeref-milter: metrics recorder: {e}"),
            DaemonError::Runtime(e) => write!(f, "cannot start the runtime: {e}"),
            DaemonError::Bind(e) | DaemonError::SocketInUse(e) => write!(f, "{e}"),
            DaemonError::MetricsListen { addr, source } => {
                write!(f, "metrics endpoint {addr}: {source}")
            }
            DaemonError::Signal(e) => write!(f, "cannot install signal handler: {e}"),
            DaemonError::Milter(e) => write!(f, "milter failed: {e}"),
        }
    }
}

impl std::error::Error for DaemonError {}
