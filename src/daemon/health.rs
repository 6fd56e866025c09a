//! The daemon's health as `/readyz` reports it: draining, the unix socket file still
//! there, the last reload's outcome and the milter connections open against
//! `max_connections`. The listener counts the connections, the reload and the shutdown
//! set the rest, the HTTP endpoint reads it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use hyper::StatusCode;
use tracing::{error, info};

use super::socket_file::SocketFile;

/// What `/readyz` reports, kept up to date by [`run`](super::run).
#[derive(Debug, Default)]
pub struct Health {
    draining: AtomicBool,
    reload_failed: AtomicBool,
    open: AtomicUsize,
    max_connections: AtomicUsize,
    /// The unix socket file the milter listens on (None for TCP).
    socket: Option<SocketFile>,
    /// Whether the last look found it removed or replaced, so that the loss is logged
    /// once, when it happens.
    socket_lost: AtomicBool,
}

impl Health {
    /// With `socket`, the unix socket file the milter listens on.
    pub fn new(socket: Option<SocketFile>) -> Health {
        Health {
            socket,
            ..Health::default()
        }
    }

    /// Whether the MTA can still reach the daemon at its socket: a unix socket file
    /// removed, or replaced by another (a second instance started by hand, a cleanup
    /// job), leaves the daemon running with nobody able to connect. Looked at on each
    /// `/readyz`, each scrape and once a second; sets the
    /// `mimeref_milter_socket_reachable` gauge and logs the change.
    pub fn socket_state(&self) -> Result<(), String> {
        let Some(file) = &self.socket else {
            return Ok(());
        };
        let now = file
            .check()
            .map_err(|what| format!("milter socket {} {what}", file.path().display()));
        let was_lost = self.socket_lost.swap(now.is_err(), Ordering::SeqCst);
        match (&now, was_lost) {
            (Err(why), false) => {
                crate::milter::metrics::milter_socket_reachable(false);
                error!(
                    "{why}: the MTA cannot reach this daemon and applies its \
                     milter_default_action; restart the daemon to create the socket again"
                );
            }
            (Ok(()), true) => {
                crate::milter::metrics::milter_socket_reachable(true);
                info!(
                    "milter socket {} is this daemon's again",
                    file.path().display()
                );
            }
            _ => {}
        }
        now
    }

    /// Shutdown has begun: the listener is closed and no new connection is taken.
    pub fn set_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// The outcome of the last reload. A failed one keeps the running configuration,
    /// which still serves, so it is reported but does not make the instance unready.
    pub fn set_reload_failed(&self, failed: bool) {
        self.reload_failed.store(failed, Ordering::SeqCst);
    }

    pub fn reload_failed(&self) -> bool {
        self.reload_failed.load(Ordering::SeqCst)
    }

    pub fn set_max_connections(&self, n: usize) {
        self.max_connections.store(n, Ordering::SeqCst);
    }

    pub fn open_connections(&self) -> &AtomicUsize {
        &self.open
    }

    /// 200 or 503, and one line saying why.
    pub fn readiness(&self) -> (StatusCode, String) {
        if self.is_draining() {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                "not ready: shutting down\n".into(),
            );
        }
        if let Err(why) = self.socket_state() {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: {why}\n"),
            );
        }
        let open = self.open.load(Ordering::SeqCst);
        let max = self.max_connections.load(Ordering::SeqCst);
        if max > 0 && open >= max {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: {open} connections open, max_connections = {max}\n"),
            );
        }
        let note = if self.reload_failed() {
            " (last reload failed; the previous configuration is running)"
        } else {
            ""
        };
        (StatusCode::OK, format!("ready{note}\n"))
    }
}
