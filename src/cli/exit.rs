//! What a command comes to, and the one place that words its error and picks the exit
//! status: every command returns `Result<Done, CliError>`, and [`status`] alone prints
//! the error and turns either into the exit code (packaging/man/mimeref-milter.8, EXIT
//! STATUS).

use std::fmt;
use std::process::ExitCode;

use super::mailbox::NotRead;
use super::printable;
use crate::config::ConfigErrors;
use crate::daemon::{self, DaemonError};

/// How a command that ran to its end went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Done {
    /// Nothing to report: 0.
    Success,
    /// `check`: some message has findings: 1.
    Findings,
    /// `check`: some input could not be read (each said as it came): 2.
    NotRead,
    /// `survey`: some input could not be read or was skipped (the summary says which
    /// and why): 1.
    NotAllRead,
}

/// Why a command stopped.
#[derive(Debug)]
pub(crate) enum CliError {
    /// What the command was given cannot be used (arguments, a configuration file the
    /// offline tools cannot load, an input or output that fails): 2.
    Failed(String),
    /// `config-check`: the configuration has errors: 1.
    Config(ConfigErrors),
    /// `fix --as-milter`: the daemon would refuse the message, with this reply: 1.
    Refused(String),
    /// `probe`: the daemon is not ready or does not answer (the configuration that
    /// cannot be read included): 1, a health check's code.
    NotReady(String),
    /// `serve`: the daemon could not start or stopped with an error.
    Daemon(DaemonError),
}

/// A [`CliError::Failed`] from anything that words itself.
pub(crate) fn failed(msg: impl fmt::Display) -> CliError {
    CliError::Failed(msg.to_string())
}

/// An input (a file, a message of an mbox) that could not be read, worded: its name
/// and why, both printable.
pub(crate) fn not_read(n: &NotRead) -> String {
    format!("{}: {}", printable(&n.source), printable(&n.why))
}

/// Says, as it comes, that an input could not be read, for a command that goes on with
/// the rest and ends in [`Done::NotRead`] (`check`).
pub(crate) fn input_not_read(n: &NotRead) {
    eprintln!("mimeref-milter: {}", not_read(n));
}

/// sysexits(3) EX_UNAVAILABLE: what OpenDKIM exits with when its socket is taken,
/// so that a unit or a script can tell "another instance runs" from a failure.
const EX_UNAVAILABLE: u8 = 69;

/// sysexits(3) EX_CONFIG: `serve` on a configuration it cannot load. The unit names it
/// in RestartPreventExitStatus=, so that a bad edit ends in a failed unit with the
/// error in the journal rather than a start every RestartSec= until the start limit.
const EX_CONFIG: u8 = 78;

/// The exit status of a command, its error said where it belongs.
pub(crate) fn status(result: Result<Done, CliError>) -> ExitCode {
    let code = match result {
        Ok(Done::Success) => 0,
        Ok(Done::Findings | Done::NotAllRead) => 1,
        Ok(Done::NotRead) => 2,
        Err(CliError::Failed(msg)) => {
            eprintln!("mimeref-milter: {msg}");
            2
        }
        Err(CliError::Config(e)) => {
            eprintln!("{e}");
            1
        }
        Err(CliError::Refused(reply)) => {
            eprintln!("mimeref-milter: the daemon would refuse this message: {reply}");
            1
        }
        Err(CliError::NotReady(why)) => {
            // On standard output: a health check shows what the probe printed.
            println!("not ready: {why}");
            1
        }
        Err(CliError::Daemon(e)) => daemon_stopped(&e),
    };
    ExitCode::from(code)
}

/// What the daemon's error comes to: the message on standard error before logging
/// began; after, in the log and, when the log goes elsewhere (syslog), on standard
/// error too, so that an admin who started it by hand sees why it stopped. Exit status
/// 69 when another process serves the socket, 78 when the configuration cannot be
/// loaded, 1 otherwise.
fn daemon_stopped(e: &DaemonError) -> u8 {
    let before_logging = matches!(
        e,
        DaemonError::Config(_) | DaemonError::SocketSpec(_) | DaemonError::MetricsRecorder(_)
    );
    if before_logging {
        eprintln!("{e}");
    } else {
        tracing::error!("{e}");
        if !daemon::log_on_stderr() {
            eprintln!("mimeref-milter: {e}");
        }
    }
    match e {
        DaemonError::SocketInUse { .. } => EX_UNAVAILABLE,
        DaemonError::Config(_) => EX_CONFIG,
        _ => 1,
    }
}
