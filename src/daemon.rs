//! The daemon: sockets, signals, logging, metrics endpoint, reload and graceful shutdown
//! around [`run`], which serves milter connections until the shutdown future completes.

use std::future::Future;
use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use indymilter::Listener;
use tokio::sync::mpsc;
use tracing::{error, info, warn};

use crate::config::{Config, LogFormat, SocketSpec};
use crate::endpoint::Status;
use crate::milter::{callbacks, Shared};

/// `serve` arguments, as the command line gives them.
pub use crate::cli::ServeArgs;

/// `mimeref-milter config-check`.
pub fn config_check(path: Option<&Path>) -> ExitCode {
    match Config::load(path) {
        Ok(cfg) => {
            match &cfg.file {
                Some(f) => println!("{}: OK", f.display()),
                None => println!("no configuration file; built-in defaults: OK"),
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
    }
}

/// `mimeref-milter serve`: the daemon's main.
pub fn serve(args: ServeArgs) -> ExitCode {
    let mut cfg = match Config::load(args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    if args.dry_run {
        cfg.force_dry_run();
    }
    // The command line's socket is used but not kept in the configuration: a reload
    // compares the file's values.
    let spec = match &args.socket {
        None => cfg.listen.socket.clone(),
        Some(text) => match SocketSpec::parse(text) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("mimeref-milter: socket {e}");
                return ExitCode::from(1);
            }
        },
    };
    init_logging(&cfg);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            error!("cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = rt.block_on(serve_async(cfg, spec.clone()));
    if let SocketSpec::Unix(path) = &spec {
        // Only ever our own socket: the file was created by bind() above.
        if let Ok(m) = std::fs::symlink_metadata(path) {
            if m.file_type().is_socket() {
                let _ = std::fs::remove_file(path);
            }
        }
    }
    match result {
        Ok(()) => {
            info!("stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            error!("{e}");
            ExitCode::from(1)
        }
    }
}

async fn serve_async(cfg: Config, spec: SocketSpec) -> Result<(), String> {
    let listener = bind(&spec, &cfg).await?;
    let status = Arc::new(Status::default());
    if let Some(addr) = cfg.listen.metrics_listen {
        let http = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("metrics endpoint {addr}: {e}"))?;
        let handle =
            crate::milter::metrics::install().map_err(|e| format!("metrics recorder: {e}"))?;
        tokio::spawn(crate::endpoint::serve(http, Some(handle), status.clone()));
        info!("metrics on http://{addr}/metrics, health on /healthz and /readyz");
    }
    let (reload_tx, reload_rx) = mpsc::channel(4);
    let mut hup = signal(tokio::signal::unix::SignalKind::hangup())?;
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            let _ = reload_tx.try_send(());
        }
    });
    let mut term = signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut int = signal(tokio::signal::unix::SignalKind::interrupt())?;
    let shutdown = async move {
        tokio::select! {
            _ = term.recv() => info!("SIGTERM: shutting down"),
            _ = int.recv() => info!("SIGINT: shutting down"),
        }
    };
    info!(
        "listening on {spec}{} (config: {})",
        if cfg.service.dry_run { ", dry run" } else { "" },
        cfg.file
            .as_ref()
            .map_or("built-in".to_string(), |f| f.display().to_string())
    );
    run_with(listener, cfg, reload_rx, shutdown, status)
        .await
        .map_err(|e| format!("milter failed: {e}"))
}

fn signal(kind: tokio::signal::unix::SignalKind) -> Result<tokio::signal::unix::Signal, String> {
    tokio::signal::unix::signal(kind).map_err(|e| format!("cannot install signal handler: {e}"))
}

/// Binds the listening socket; for unix: sockets removes a stale socket file first (only
/// if it is a socket) and applies `socket_mode` / `socket_group`.
pub async fn bind(spec: &SocketSpec, cfg: &Config) -> Result<AnyListener, String> {
    match spec {
        SocketSpec::Inet { host, port } => tokio::net::TcpListener::bind((host.as_str(), *port))
            .await
            .map(|l| AnyListener::Tcp(NoDelay(l)))
            .map_err(|e| format!("cannot listen on {spec}: {e}")),
        SocketSpec::Unix(path) => {
            if let Ok(m) = std::fs::symlink_metadata(path) {
                if m.file_type().is_socket() {
                    std::fs::remove_file(path).map_err(|e| {
                        format!("cannot remove stale socket {}: {e}", path.display())
                    })?;
                } else {
                    return Err(format!(
                        "{} exists and is not a socket; not touching it",
                        path.display()
                    ));
                }
            }
            let l = tokio::net::UnixListener::bind(path)
                .map_err(|e| format!("cannot listen on {spec}: {e}"))?;
            if let Some(mode) = cfg.listen.socket_mode {
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                    .map_err(|e| format!("socket_mode on {}: {e}", path.display()))?;
            }
            if let Some(group) = &cfg.listen.socket_group {
                let gid = group_id(group)
                    .ok_or_else(|| format!("socket_group {group:?}: no such group"))?;
                std::os::unix::fs::chown(path, None, Some(gid))
                    .map_err(|e| format!("socket_group on {}: {e}", path.display()))?;
            }
            Ok(AnyListener::Unix(l))
        }
    }
}

/// A numeric gid, or a name looked up in /etc/group.
fn group_id(group: &str) -> Option<u32> {
    if let Ok(n) = group.parse() {
        return Some(n);
    }
    let text = std::fs::read_to_string("/etc/group").ok()?;
    text.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        let _pw = f.next()?;
        let gid = f.next()?;
        (name == group).then(|| gid.parse().ok()).flatten()
    })
}

/// Either kind of listening socket.
pub type AnyListener = indymilter::EitherListener<NoDelay, tokio::net::UnixListener>;

/// A TCP listener whose connections acknowledge at once and send at once.
///
/// The MTA writes some packets back to back without waiting for a reply (a macro
/// packet, then its command; every stage negotiated "no reply"); with Nagle on its side
/// the second one waits until the first is acknowledged, and a milter that has nothing
/// to send yet delays that ACK by about 40 ms on Linux. So every read re-arms
/// TCP_QUICKACK (the kernel drops out of quick-ACK mode on its own), and TCP_NODELAY
/// covers our own back-to-back writes at end of message (change header, replace body,
/// add header, accept). Measured in BENCHMARKS.md.
pub struct NoDelay(pub tokio::net::TcpListener);

impl Listener for NoDelay {
    type Io = QuickAck;

    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Self::Io>> {
        self.0.poll_accept(cx).map_ok(|(s, _)| {
            // Best effort: a socket without them still works, only slower.
            let _ = s.set_nodelay(true);
            let _ = socket2::SockRef::from(&s).set_tcp_quickack(true);
            QuickAck(s)
        })
    }
}

/// A milter connection over TCP that re-arms TCP_QUICKACK after each read.
pub struct QuickAck(tokio::net::TcpStream);

impl tokio::io::AsyncRead for QuickAck {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let r = std::pin::Pin::new(&mut self.0).poll_read(cx, buf);
        if r.is_ready() {
            let _ = socket2::SockRef::from(&self.0).set_tcp_quickack(true);
        }
        r
    }
}

impl tokio::io::AsyncWrite for QuickAck {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// Stops accepting as soon as shutdown begins (the listening socket is closed, so the
/// MTA gets "connection refused" and uses another milter or its default action), while
/// open connections finish their messages.
///
/// Also enforces `max_connections`: a connection over the limit is accepted and closed
/// at once, so that the MTA applies its default action straight away. Left unaccepted
/// (what indymilter's own limit does) it would wait in the kernel's backlog until the
/// MTA's connect timeout, 30 s with Postfix, holding up the SMTP session meanwhile.
struct Gate<L> {
    inner: Option<L>,
    state: Arc<GateState>,
    status: Arc<Status>,
    max_connections: usize,
    /// Refusals not logged yet, and when the last log line about them was written: at
    /// most one line a second, however many connections arrive.
    refused_unlogged: u64,
    refused_logged_at: Option<std::time::Instant>,
}

#[derive(Default)]
struct GateState {
    closed: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl GateState {
    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let w = match self.waker.lock() {
            Ok(mut g) => g.take(),
            Err(p) => p.into_inner().take(),
        };
        if let Some(w) = w {
            w.wake();
        }
    }
}

impl<L> Gate<L> {
    fn refuse(&mut self, open: usize) {
        crate::milter::metrics::connection_refused();
        self.refused_unlogged += 1;
        let now = std::time::Instant::now();
        if self
            .refused_logged_at
            .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
        {
            return;
        }
        let n = std::mem::take(&mut self.refused_unlogged);
        warn!(
            "refused {n} milter connection(s): {open} open, max_connections = {}; the MTA applies its default action",
            self.max_connections
        );
        self.refused_logged_at = Some(now);
    }
}

impl<L: Listener> Listener for Gate<L> {
    type Io = Counted<L::Io>;

    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Self::Io>> {
        if let Ok(mut g) = self.state.waker.lock() {
            *g = Some(cx.waker().clone());
        }
        if self.state.closed.load(Ordering::SeqCst) {
            self.inner = None;
        }
        // A flood of connections over the limit must not keep this task from others.
        for _ in 0..64 {
            let Some(l) = self.inner.as_mut() else {
                return Poll::Pending;
            };
            let io = match l.poll_accept(cx) {
                Poll::Ready(Ok(io)) => io,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            let open = self.status.open_connections().load(Ordering::SeqCst);
            if open >= self.max_connections {
                // Dropping it closes it: the MTA reads end of file (or a reset).
                drop(io);
                self.refuse(open);
                continue;
            }
            return Poll::Ready(Ok(Counted::new(io, self.status.clone())));
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// A milter connection, counted as open in [`Status`] until dropped.
pub struct Counted<T> {
    io: T,
    status: Arc<Status>,
}

impl<T> Counted<T> {
    fn new(io: T, status: Arc<Status>) -> Counted<T> {
        status.open_connections().fetch_add(1, Ordering::SeqCst);
        crate::milter::metrics::connections_open(1.0);
        Counted { io, status }
    }
}

impl<T> Drop for Counted<T> {
    fn drop(&mut self) {
        self.status
            .open_connections()
            .fetch_sub(1, Ordering::SeqCst);
        crate::milter::metrics::connections_open(-1.0);
    }
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Counted<T> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Counted<T> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Serves milter connections on `listener` with `config` until `shutdown` completes.
///
/// Each `()` received on `reload` re-reads the configuration from where `config` came
/// from: on success it replaces the current one for new connections (open connections
/// keep their snapshot); on error the old one stays and the errors are logged.
/// On shutdown the listener is closed, new transactions are tempfailed and messages in
/// flight get `shutdown_timeout` to finish.
pub async fn run(
    listener: impl Listener,
    config: Config,
    reload: mpsc::Receiver<()>,
    shutdown: impl Future,
) -> io::Result<()> {
    run_with(listener, config, reload, shutdown, Arc::default()).await
}

/// [`run`], keeping `status` (what the HTTP endpoint reports) up to date.
pub async fn run_with(
    listener: impl Listener,
    config: Config,
    mut reload: mpsc::Receiver<()>,
    shutdown: impl Future,
    status: Arc<Status>,
) -> io::Result<()> {
    // The limit is the Gate's, which refuses at once rather than leaving connections
    // in the backlog; indymilter's own semaphore only needs to stay out of the way.
    let milter_config = indymilter::Config {
        max_connections: tokio::sync::Semaphore::MAX_PERMITS,
        connection_timeout: config.listen.connection_timeout,
        ..Default::default()
    };
    let max_connections = config.listen.max_connections;
    status.set_max_connections(max_connections);
    crate::milter::metrics::max_connections(max_connections);
    let shared = Arc::new(Shared::new(config));
    let callbacks = callbacks::build(shared.clone());

    let reloader = {
        let shared = shared.clone();
        let status = status.clone();
        tokio::spawn(async move {
            while reload.recv().await.is_some() {
                let ok = reload_config(&shared);
                crate::milter::metrics::reload(ok);
                status.set_reload_failed(!ok);
            }
        })
    };

    let gate_state = Arc::new(GateState::default());
    let gate = Gate {
        inner: Some(listener),
        state: gate_state.clone(),
        status: status.clone(),
        max_connections,
        refused_unlogged: 0,
        refused_logged_at: None,
    };
    let drained = {
        let shared = shared.clone();
        async move {
            shutdown.await;
            status.set_draining();
            shared.start_closing();
            gate_state.close();
            let deadline = shared.config().service.shutdown_timeout;
            let waiting = shared.in_flight();
            if waiting > 0 {
                info!(
                    "waiting up to {}s for {waiting} message(s) in flight",
                    deadline.as_secs()
                );
            }
            let until = tokio::time::Instant::now() + deadline;
            while shared.in_flight() > 0 && tokio::time::Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let left = shared.in_flight();
            if left > 0 {
                warn!("shutdown deadline reached with {left} message(s) in flight; the MTA applies its default action");
            }
        }
    };
    let result = indymilter::run(gate, callbacks, milter_config, drained).await;
    reloader.abort();
    result
}

/// Whether the new configuration was loaded.
fn reload_config(shared: &Shared) -> bool {
    let old = shared.config();
    match Config::load(old.origin.as_deref()) {
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
                new.file
                    .as_ref()
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

/// Plain text (journald adds time stamps) or JSON; RUST_LOG overrides the config level.
fn init_logging(cfg: &Config) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        EnvFilter::new(format!("warn,mimeref_milter={}", cfg.process.log_level))
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr)
        .with_target(false);
    let res = match cfg.process.log_format {
        LogFormat::Text => builder.without_time().with_ansi(false).try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    if let Err(e) = res {
        eprintln!("mimeref-milter: logging: {e}");
    }
}
