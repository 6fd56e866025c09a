//! The floor of milter overhead for bench/e2e: the same indymilter as the daemon, a
//! callback on every stage (so the MTA sends all of them, body included), nothing done,
//! every message accepted.
//!
//! `null_milter [--noreply] [--nodelay] ADDR` (ADDR: `HOST:PORT` or `unix:/PATH`)
//! `--noreply`: every stage before end of message is negotiated "no reply" (as rspamd
//! does): one round trip per message. `--nodelay`: TCP_NODELAY on accepted connections.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use indymilter::{Actions, Callbacks, Config, Context, Listener, ProtoOpts, Status};

type Fut<'a> = Pin<Box<dyn Future<Output = Status> + Send + 'a>>;

/// `Some(true)` once "no reply" is negotiated for the connection.
fn pass<'a>(cx: &Context<bool>) -> Fut<'a> {
    let st = if cx.data == Some(true) {
        Status::Noreply
    } else {
        Status::Continue
    };
    Box::pin(async move { st })
}

struct NoDelay(tokio::net::TcpListener);

impl Listener for NoDelay {
    type Io = tokio::net::TcpStream;
    fn poll_accept(&mut self, cx: &mut TaskContext<'_>) -> Poll<std::io::Result<Self::Io>> {
        self.0.poll_accept(cx).map_ok(|(s, _)| {
            let _ = s.set_nodelay(true);
            s
        })
    }
}

#[tokio::main]
async fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let noreply = args.iter().any(|a| a == "--noreply");
    let nodelay = args.iter().any(|a| a == "--nodelay");
    args.retain(|a| !a.starts_with("--"));
    let addr = args
        .first()
        .cloned()
        .unwrap_or_else(|| "127.0.0.1:8897".into());
    let all_nr = ProtoOpts::NOREPLY_CONNECT
        | ProtoOpts::NOREPLY_HELO
        | ProtoOpts::NOREPLY_MAIL
        | ProtoOpts::NOREPLY_RCPT
        | ProtoOpts::NOREPLY_DATA
        | ProtoOpts::NOREPLY_HEADER
        | ProtoOpts::NOREPLY_EOH
        | ProtoOpts::NOREPLY_BODY;
    let callbacks = Callbacks::<bool>::new()
        .on_negotiate(move |cx, _, offered| {
            let nr = noreply && offered.contains(all_nr);
            if nr {
                cx.requested_opts |= all_nr;
            }
            cx.requested_actions = Actions::empty();
            cx.data = Some(nr);
            Box::pin(async { Status::Continue })
        })
        .on_connect(|cx, _, _| pass(cx))
        .on_helo(|cx, _| pass(cx))
        .on_mail(|cx, _| pass(cx))
        .on_rcpt(|cx, _| pass(cx))
        .on_data(|cx| pass(cx))
        .on_header(|cx, _, _| pass(cx))
        .on_eoh(|cx| pass(cx))
        .on_body(|cx, _| pass(cx))
        .on_eom(|_| Box::pin(async { Status::Accept }));
    let config = Config {
        max_connections: 1000,
        ..Default::default()
    };
    let stop = async {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    };
    let r = if let Some(path) = addr.strip_prefix("unix:") {
        let _ = std::fs::remove_file(path);
        let l = tokio::net::UnixListener::bind(path).expect("bind unix socket");
        indymilter::run(l, callbacks, config, stop).await
    } else {
        let l = tokio::net::TcpListener::bind(&addr)
            .await
            .expect("bind tcp socket");
        if nodelay {
            indymilter::run(NoDelay(l), callbacks, config, stop).await
        } else {
            indymilter::run(l, callbacks, config, stop).await
        }
    };
    r.expect("milter failed");
}
