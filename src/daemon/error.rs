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
    /// `metrics_listen` could not be bound.
    MetricsListen { addr: SocketAddr, source: io::Error },
    /// A signal handler could not be installed.
    Signal(io::Error),
    /// The milter server stopped with an error.
    Milter(io::Error),
}

impl DaemonError {
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
            DaemonError::Bind(e) => write!(f, "{e}"),
            DaemonError::MetricsListen { addr, source } => {
                write!(f, "metrics endpoint {addr}: {source}")
            }
            DaemonError::Signal(e) => write!(f, "cannot install signal handler: {e}"),
            DaemonError::Milter(e) => write!(f, "milter failed: {e}"),
        }
    }
}

impl std::error::Error for DaemonError {}
