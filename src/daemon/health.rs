//! The daemon's health as `/readyz` reports it: draining, the last reload's outcome and
//! the milter connections open against `max_connections`. The listener counts the
//! connections, the reload and the shutdown set the rest, the HTTP endpoint reads it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use hyper::StatusCode;

/// What `/readyz` reports, kept up to date by [`run`](super::run).
#[derive(Debug, Default)]
pub struct Health {
    draining: AtomicBool,
    reload_failed: AtomicBool,
    open: AtomicUsize,
    max_connections: AtomicUsize,
}

impl Health {
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
