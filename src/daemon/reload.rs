//! Reloading the configuration. SIGHUP (and a test, or any caller of `run`) sends a
//! [`Reload`] request; one task takes them in turn and re-reads the file the daemon was
//! started from, so that reloads never overlap. A request may carry a reply: the
//! SIGHUP handler awaits it to tell systemd the outcome (READY=1 after RELOADING=1),
//! tests await it instead of polling.

use std::sync::Arc;

use tokio::signal::unix::Signal;
use tokio::sync::{mpsc, oneshot};
use tracing::{error, info, warn};

use super::health::Health;
use super::notify::Notifier;
use crate::config::Config;
use crate::milter::Shared;

/// A request to re-read the configuration file.
#[derive(Debug, Default)]
pub struct Reload {
    reply: Option<oneshot::Sender<Reloaded>>,
}

/// How a reload ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reloaded {
    /// The file was read; new connections use it.
    Loaded,
    /// The file is gone or broken; the running configuration stays.
    Failed,
}

impl Reload {
    /// A request nobody waits on.
    pub fn new() -> Reload {
        Reload::default()
    }

    /// A request and where its outcome arrives once the reload is over.
    pub fn with_reply() -> (Reload, oneshot::Receiver<Reloaded>) {
        let (tx, rx) = oneshot::channel();
        (Reload { reply: Some(tx) }, rx)
    }
}

/// Takes reload requests until every sender is gone: each re-reads the file, then
/// `/readyz`, the metric and the request's reply learn the outcome.
pub(super) async fn serve(
    shared: Arc<Shared>,
    health: Arc<Health>,
    mut requests: mpsc::Receiver<Reload>,
) {
    while let Some(req) = requests.recv().await {
        let ok = reload_config(&shared);
        crate::milter::metrics::reload(ok);
        health.set_reload_failed(!ok);
        if let Some(reply) = req.reply {
            // The requester may have stopped waiting; the reload stands all the same.
            let _ = reply.send(if ok {
                Reloaded::Loaded
            } else {
                Reloaded::Failed
            });
        }
    }
}

/// SIGHUP: a reload, announced to systemd when it runs us (`Type=notify`), whose
/// outcome is told once it is over. Signals that arrive meanwhile are merged into the
/// next reload, which reads the file as it is then.
pub(super) async fn on_sighup(
    mut hup: Signal,
    requests: mpsc::Sender<Reload>,
    notifier: Option<Arc<Notifier>>,
    listening: String,
) {
    while hup.recv().await.is_some() {
        if let Some(n) = &notifier {
            n.reloading();
        }
        let (req, done) = Reload::with_reply();
        if requests.send(req).await.is_err() {
            return;
        }
        let outcome = match done.await {
            Ok(Reloaded::Loaded) => "configuration reloaded",
            _ => "last reload failed, the previous configuration runs",
        };
        if let Some(n) = &notifier {
            n.ready(&format!("{listening}; {outcome}"));
        }
    }
}

/// Whether the new configuration was loaded.
///
/// A daemon started from a file, named or found at the default path, reloads that file
/// and nothing else: when it is gone or broken the reload fails and the running policy
/// stays. Falling back to the built-in defaults would silently drop the admin's
/// rejects. Only a daemon started without any file looks for the default one.
fn reload_config(shared: &Shared) -> bool {
    let old = shared.config();
    match Config::load(old.file()) {
        Ok(mut new) => {
            let stuck = new.keep_restart_only(&old);
            if !stuck.is_empty() {
                warn!(
                    "reload: {} changed; that needs a restart, the running value stays",
                    stuck.join(", ")
                );
            }
            info!(
                "reload: configuration {} loaded; new connections use it",
                new.file()
                    .map_or("built-in".to_string(), |f| f.display().to_string())
            );
            shared.replace_config(new);
            true
        }
        Err(e) => {
            for line in e.to_string().lines() {
                error!("reload failed, keeping the running configuration: {line}");
            }
            false
        }
    }
}
