//! The daemon: sockets, signals, logging, the HTTP endpoint, reload and graceful
//! shutdown around [`run`], which serves milter connections until the shutdown future
//! completes. [`serve`] is its entry point, with its own [`ServeOptions`].
//!
//! - `listen/`: binding the listening socket (`bind`, `holder`), and the listener
//!   wrappers, a file each: TCP quick-ACK (`tcp`, `peer`), the gate that enforces
//!   `max_connections`, rides out failed accepts and closes at shutdown (`gate`,
//!   `accept`), open-connection counting and turning away peers that do not speak
//!   milter (`counted`).
//! - [`http`]: `/metrics`, `/healthz`, `/readyz`, at most `metrics_max_connections`
//!   at once; `health`: what `/readyz` reports.
//! - [`nofile`]: the file descriptor limit, raised at start and checked against the
//!   configuration.
//! - `notify`: systemd's readiness, reload, stop and watchdog notifications
//!   (`Type=notify`).
//! - `reload`: SIGHUP and [`Reload`] requests: re-reading the file the daemon started
//!   from, keeping the running configuration when that fails.
//! - `logging`: stderr, the journal or syslog; `error`: [`DaemonError`], what stops
//!   the daemon, typed (`BindError`, `Holder`) and worded only in its `Display`.
//! - `socket_file`: the unix socket file this daemon made, removed at exit only while
//!   it is still that file.
//! - `memory`: whether the worst case fits the memory cgroup, and whether spill files
//!   are memory (tmpfs).
//! - [`probe`]: `mimeref-milter probe`, whether a running daemon takes mail (the
//!   image's HEALTHCHECK).
//!
//! The daemon uses the configuration and the milter (the layers: `lib.rs`); the
//! command line converts its arguments into [`ServeOptions`].

mod error;
mod health;
pub mod http;
mod listen;
mod logging;
mod memory;
pub mod nofile;
mod notify;
pub mod probe;
mod reload;
mod socket_file;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use health::Health;
use indymilter::Listener;
use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::config::{Config, SocketSpec};
use crate::milter::{callbacks, Shared};
pub use error::DaemonError;
use listen::Gate;
pub use listen::{AnyListener, PeerName};
pub use logging::on_stderr as log_on_stderr;
pub use reload::{Reload, Reloaded};
pub use socket_file::OwnSocket;

/// What the daemon is started with (the command line's `serve` arguments).
#[derive(Debug, Default, Clone)]
pub struct ServeOptions {
    /// Configuration file; None: the default path if it exists, else built-in defaults.
    pub config: Option<PathBuf>,
    /// Listening socket overriding the configuration's.
    pub socket: Option<String>,
    /// Analyse, log and report; change nothing, reject nothing (survives reloads).
    pub dry_run: bool,
}

/// Settings that work but expose the daemon, and running as root: what `config-check`
/// and `serve` warn about, one line each. `socket`: the socket given on the command
/// line, which replaces the file's.
pub fn warnings(cfg: &Config, socket: Option<&SocketSpec>) -> Vec<String> {
    let mut out: Vec<String> = cfg
        .warnings()
        .iter()
        .filter(|(key, _)| socket.is_none() || *key != "socket")
        .map(|(_, w)| w.to_string())
        .collect();
    if let Some(w) = socket.and_then(SocketSpec::exposure) {
        out.push(format!("--socket: {w}"));
    }
    out.extend(logging::syslog_warning(cfg));
    out.extend(memory::warnings(cfg));
    if rustix::process::geteuid().is_root() {
        out.push(
            "running as root: the daemon needs no privilege (ports above 1023, its own \
             socket); run it as its own user, as the packaged unit does (User=mimeref-milter)"
                .into(),
        );
    }
    out
}

/// `mimeref-milter serve`: the daemon's main. What stops it comes back as a
/// [`DaemonError`] for the command line to word and to turn into an exit status.
pub fn serve(args: ServeOptions) -> Result<(), DaemonError> {
    let mut cfg = Config::load(args.config.as_deref()).map_err(DaemonError::Config)?;
    if args.dry_run {
        cfg.force_dry_run();
    }
    // The command line's socket is used but not kept in the configuration: a reload
    // compares the file's values.
    let spec = match &args.socket {
        None => cfg.listen().socket.clone(),
        Some(text) => SocketSpec::parse(text).map_err(DaemonError::SocketSpec)?,
    };
    // The recorder first, so that a log line syslog refuses from the first one on is
    // counted (mimeref_syslog_errors_total).
    if cfg.listen().metrics_listen.is_some() {
        crate::milter::metrics::install().map_err(DaemonError::MetricsRecorder)?;
    }
    if let Err(e) = logging::init(&cfg) {
        eprintln!("mimeref-milter: logging: {e}");
    }
    let override_socket = args.socket.is_some().then_some(&spec);
    for w in warnings(&cfg, override_socket) {
        warn!("{w}");
    }
    nofile::at_start(cfg.listen());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(DaemonError::Runtime)?;
    // The unix socket file goes with the sockets, when run() returns (see OwnSocket).
    let result = rt.block_on(serve_async(cfg, spec));
    if result.is_ok() {
        info!("stopped");
    }
    result
}

async fn serve_async(cfg: Config, spec: SocketSpec) -> Result<(), DaemonError> {
    let sockets = bind(&spec, &cfg).await?;
    let notifier = notify::Notifier::from_env().map(Arc::new);
    let (reload_tx, reload_rx) = mpsc::channel(4);
    let hup = signal(tokio::signal::unix::SignalKind::hangup())?;
    let listening = match cfg.listen().metrics_listen {
        Some(addr) => format!("listening on {spec}, metrics on {addr}"),
        None => format!("listening on {spec}"),
    };
    tokio::spawn(reload::on_sighup(
        hup,
        reload_tx,
        notifier.clone(),
        listening.clone(),
    ));
    let mut term = signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut int = signal(tokio::signal::unix::SignalKind::interrupt())?;
    let shutdown = {
        let notifier = notifier.clone();
        async move {
            tokio::select! {
                _ = term.recv() => info!("SIGTERM: shutting down"),
                _ = int.recv() => info!("SIGINT: shutting down"),
            }
            if let Some(n) = &notifier {
                n.stopping();
            }
        }
    };
    info!(
        "listening on {spec}{} (config: {})",
        if cfg.service().dry_run {
            ", dry run"
        } else {
            ""
        },
        cfg.file()
            .map_or("built-in".to_string(), |f| f.display().to_string())
    );
    if let Some(n) = notifier {
        // Every socket is bound: the MTA may connect from now on.
        n.ready(&listening);
        if let Some(every) = n.watchdog() {
            // On this runtime: when it stops answering, the pings stop too.
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                loop {
                    tick.tick().await;
                    n.watchdog_ping();
                }
            });
        }
    }
    run(sockets, cfg, reload_rx, shutdown).await
}

fn signal(
    kind: tokio::signal::unix::SignalKind,
) -> Result<tokio::signal::unix::Signal, DaemonError> {
    tokio::signal::unix::signal(kind).map_err(DaemonError::Signal)
}

/// The sockets the daemon serves: the milter socket and, with `metrics_listen`, the
/// HTTP endpoint (`/metrics`, `/healthz`, `/readyz`).
pub struct Sockets<L> {
    pub milter: L,
    pub http: Option<tokio::net::TcpListener>,
    /// For a unix milter socket, its file: watched by `/readyz` and the
    /// `mimeref_milter_socket_reachable` gauge, removed when the sockets are dropped.
    pub unix: Option<OwnSocket>,
}

/// Binds the milter socket `spec` (see `listen::bind_milter`) and `metrics_listen`.
pub async fn bind(spec: &SocketSpec, cfg: &Config) -> Result<Sockets<AnyListener>, DaemonError> {
    let (milter, unix) = listen::bind_milter(spec, cfg).await?;
    let http = match cfg.listen().metrics_listen {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|source| DaemonError::MetricsListen { addr, source })?,
        ),
        None => None,
    };
    Ok(Sockets { milter, http, unix })
}

/// Serves milter connections on `sockets.milter` with `config` until `shutdown`
/// completes, and the HTTP endpoint on `sockets.http` if there is one. The binary and
/// the tests run the daemon through this one function.
///
/// Each [`Reload`] received on `reload` re-reads the file `config` came from (see
/// `reload.rs`): on success it replaces the current one for new
/// connections (open connections keep their snapshot); on error the old one stays and
/// the errors are logged. The request's reply says which.
/// On shutdown the listener is closed, new transactions are tempfailed and messages in
/// flight get `shutdown_timeout` to finish.
pub async fn run(
    sockets: Sockets<impl Listener<Io: PeerName>>,
    config: Config,
    reload: mpsc::Receiver<Reload>,
    shutdown: impl Future,
) -> Result<(), DaemonError> {
    let health = Arc::new(Health::new(sockets.unix.as_ref().map(|u| u.file().clone())));
    // Kept until run() returns: then the file is removed, if it is still ours.
    let _unix = sockets.unix;
    if let Some(http) = sockets.http {
        let addr = http
            .local_addr()
            .map_or_else(|_| "?".into(), |a| a.to_string());
        // Process-wide and installed once: a second daemon in the same process (the
        // tests) shares it.
        let handle = crate::milter::metrics::install().map_err(DaemonError::MetricsRecorder)?;
        tokio::spawn(http::serve(
            http,
            Some(handle),
            health.clone(),
            config.listen().metrics_max_connections,
        ));
        info!("metrics on http://{addr}/metrics, health on /healthz and /readyz");
    }
    let listener = sockets.milter;
    // The limit is the Gate's, which refuses at once rather than leaving connections
    // in the backlog; indymilter's own semaphore only needs to stay out of the way.
    let milter_config = indymilter::Config {
        max_connections: tokio::sync::Semaphore::MAX_PERMITS,
        connection_timeout: config.listen().connection_timeout,
        transaction_timeout: Some(config.listen().transaction_timeout),
        reply_timeout: Some(config.listen().reply_timeout),
        ..Default::default()
    };
    let max_connections = config.listen().max_connections;
    health.set_max_connections(max_connections);
    crate::milter::metrics::max_connections(max_connections);
    // Reachable at start: bind() just created it (a TCP listener stays so).
    crate::milter::metrics::milter_socket_reachable(true);
    let shared = Arc::new(Shared::new(config));
    let callbacks = callbacks::build(shared.clone());

    let reloader = tokio::spawn(reload::serve(shared.clone(), health.clone(), reload));

    // Repeated events are logged at most once a second each; their counts are written
    // out even when no further event comes.
    // The socket file is looked at on the same tick, so that its loss is logged even
    // when nothing asks /readyz or scrapes.
    let flusher = {
        let health = health.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                crate::milter::throttle::flush_all();
                let _ = health.socket_state();
            }
        })
    };
    let (gate, gate_state) = Gate::new(listener, health.clone(), max_connections);
    let drained = {
        let shared = shared.clone();
        async move {
            shutdown.await;
            health.set_draining();
            shared.start_closing();
            gate_state.close();
            let deadline = shared.config().service().shutdown_timeout;
            let waiting = shared.in_flight();
            if waiting > 0 {
                info!(
                    "waiting up to {}s for {waiting} message(s) in flight",
                    deadline.as_secs()
                );
            }
            let _ = tokio::time::timeout(deadline, shared.in_flight.drained()).await;
            let left = shared.in_flight();
            if left > 0 {
                warn!("shutdown deadline reached with {left} message(s) in flight; the MTA applies its default action");
            }
        }
    };
    // Each connection's session knows its MTA from the start, for its log lines.
    let initial =
        move |io: &listen::Counted<_>| Some(callbacks::initial(&shared, io.peer().into(), io.id()));
    let result = indymilter::run_with_data(gate, callbacks, milter_config, drained, initial).await;
    reloader.abort();
    flusher.abort();
    crate::milter::throttle::flush_all();
    result.map_err(DaemonError::Milter)
}
