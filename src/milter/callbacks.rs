//! One function per milter stage. Each only translates indymilter's types (CString,
//! macros, socket info) into Rust types and calls one `Session` method; failures become
//! one log line with the queue id and a tempfail.

use std::ffi::CString;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use bytes::Bytes;
use indymilter::{
    Actions, CallbackFuture, Callbacks, Context, EomContext, MacroStage, NegotiateContext,
    ProtoOpts, SocketInfo, Status,
};
use tracing::{debug, error};

use super::session::{queue_id, Session};
use super::Shared;
use crate::config::Config;

pub fn build(shared: Arc<Shared>) -> Callbacks<Session> {
    let s1 = shared.clone();
    let s2 = shared;
    Callbacks::new()
        .on_negotiate(move |cx, actions, opts| {
            Box::pin(handle_negotiate(s1.clone(), cx, actions, opts))
        })
        .on_connect(|cx, _, info| Box::pin(handle_connect(cx, info)))
        .on_mail(move |cx, args| Box::pin(handle_mail(s2.clone(), cx, args)))
        .on_rcpt(|cx, args| Box::pin(handle_rcpt(cx, args)))
        .on_header(|cx, name, value| Box::pin(handle_header(cx, name, value)))
        .on_eoh(|cx| Box::pin(handle_eoh(cx)))
        .on_body(|cx, chunk| Box::pin(handle_body(cx, chunk)))
        .on_eom(|cx| Box::pin(handle_eom(cx)))
        .on_abort(|cx| Box::pin(handle_abort(cx)))
        .on_close(|cx| Box::pin(handle_close(cx)))
}

/// The actions this configuration may use; nothing at all in dry-run mode.
pub fn needed_actions(cfg: &Config) -> Actions {
    use crate::policy::Action;
    let mut a = Actions::empty();
    if cfg.service.dry_run {
        return a;
    }
    if cfg.policy.may(Action::Fix) {
        a |= Actions::CHANGE_HEADER | Actions::REPLACE_BODY;
    }
    if cfg.report.header.is_some() {
        a |= Actions::ADD_HEADER;
        if cfg.report.remove_forged {
            a |= Actions::CHANGE_HEADER;
        }
    }
    if cfg.policy.may(Action::Quarantine) {
        a |= Actions::QUARANTINE;
    }
    a
}

fn handle_negotiate(
    shared: Arc<Shared>,
    cx: &mut NegotiateContext<Session>,
    mta_actions: Actions,
    mta_opts: ProtoOpts,
) -> CallbackFuture<'_> {
    let (cfg, options) = shared.snapshot();
    let needed = needed_actions(&cfg);
    let missing = needed - mta_actions;
    let refused = if !missing.is_empty() {
        error!("MTA does not offer the milter actions {missing:?} that the configuration needs; refusing the connection");
        true
    } else if !mta_opts.contains(ProtoOpts::LEADING_SPACE) {
        error!("MTA does not offer LEADING_SPACE (needed to keep header fields byte-exact); refusing the connection");
        true
    } else {
        false
    };
    if refused {
        super::metrics::event("negotiation_refused");
        return Box::pin(async { Status::Reject });
    }
    cx.requested_actions = needed;
    // Skip the stages without callbacks only where the MTA can; always keep the leading
    // space of header values.
    cx.requested_opts = (cx.requested_opts & mta_opts) | ProtoOpts::LEADING_SPACE;
    let no_reply = if cfg.service.no_reply_stages {
        NO_REPLY & mta_opts
    } else {
        ProtoOpts::empty()
    };
    cx.requested_opts |= no_reply;
    // Recipients matter only to scopes that match on them: otherwise the MTA need not
    // send RCPT at all (this connection keeps this configuration).
    if !cfg.policy.scopes.reads_recipients() {
        cx.requested_opts |= ProtoOpts::NO_RCPT & mta_opts;
    }
    debug!("negotiated: {}", describe_no_reply(no_reply));
    let mut connect = String::from("{client_addr}");
    if !cfg.directions.outbound_daemons.is_empty() {
        connect.push_str(" {daemon_name}");
    }
    let wanted = [
        (MacroStage::Connect, connect),
        (MacroStage::Mail, "{auth_authen} {auth_type}".to_string()),
        // The queue id, for the log line, read at end of message: Sendmail sends it at
        // end of header but not at end of message, Postfix at both.
        (MacroStage::Eoh, "i".to_string()),
    ];
    for (stage, names) in wanted {
        if let Ok(c) = CString::new(names) {
            cx.requested_macros.insert(stage, c);
        }
    }
    let mut session = Session::new(cfg, shared.in_flight.clone());
    session.no_reply = no_reply;
    session.options = Some(options);
    cx.data = Some(session);
    Box::pin(async { Status::Continue })
}

/// The stages that never change the outcome: with "no reply" negotiated the MTA streams
/// them without waiting, one round trip per message instead of one per header field and
/// body chunk. Each is taken where the MTA offers it. MAIL keeps its reply: it tempfails
/// new transactions during shutdown; end of message carries the verdict.
const NO_REPLY: ProtoOpts = ProtoOpts::NOREPLY_CONNECT
    .union(ProtoOpts::NOREPLY_HEADER)
    .union(ProtoOpts::NOREPLY_EOH)
    .union(ProtoOpts::NOREPLY_BODY);

/// For the debug log: which stages go without a reply.
fn describe_no_reply(no_reply: ProtoOpts) -> String {
    let names = [
        (ProtoOpts::NOREPLY_CONNECT, "connect"),
        (ProtoOpts::NOREPLY_HEADER, "header"),
        (ProtoOpts::NOREPLY_EOH, "end of header"),
        (ProtoOpts::NOREPLY_BODY, "body"),
    ];
    let on: Vec<&str> = names
        .iter()
        .filter(|(o, _)| no_reply.contains(*o))
        .map(|(_, n)| *n)
        .collect();
    if on.is_empty() {
        "a reply at every stage".into()
    } else {
        format!("no reply at {}", on.join(", "))
    }
}

/// The answer of a stage that only accumulates.
fn next(s: Option<&Session>, stage: ProtoOpts) -> CallbackFuture<'static> {
    if s.is_some_and(|s| s.no_reply.contains(stage)) {
        Box::pin(Answer::<true>)
    } else {
        Box::pin(Answer::<false>)
    }
}

/// `Status::Noreply` (true) or `Status::Continue` as a future of size zero, which
/// indymilter's box holds without allocating: this is the answer to every header field
/// and body chunk.
struct Answer<const NO_REPLY: bool>;

impl<const NO_REPLY: bool> Future for Answer<NO_REPLY> {
    type Output = Status;

    fn poll(self: Pin<&mut Self>, _: &mut TaskContext<'_>) -> Poll<Status> {
        Poll::Ready(if NO_REPLY {
            Status::Noreply
        } else {
            Status::Continue
        })
    }
}

fn handle_connect(cx: &mut Context<Session>, info: SocketInfo) -> CallbackFuture<'_> {
    let addr = match info {
        SocketInfo::Inet(a) => Some(a.ip()),
        _ => None,
    };
    if let Some(s) = cx.data.as_mut() {
        s.connect(addr);
    }
    next(cx.data.as_ref(), ProtoOpts::NOREPLY_CONNECT)
}

fn handle_mail(
    shared: Arc<Shared>,
    cx: &mut Context<Session>,
    args: Vec<CString>,
) -> CallbackFuture<'_> {
    if shared.is_closing() {
        // Shutting down: new transactions go to another instance or come back later.
        return Box::pin(async { Status::Tempfail });
    }
    if let Some(s) = cx.data.as_mut() {
        s.mail_from(args.first().map(|a| a.as_bytes()));
    }
    Box::pin(Answer::<false>)
}

fn handle_rcpt(cx: &mut Context<Session>, args: Vec<CString>) -> CallbackFuture<'_> {
    if let (Some(s), Some(a)) = (cx.data.as_mut(), args.first()) {
        s.rcpt(a.as_bytes());
    }
    Box::pin(Answer::<false>)
}

fn handle_header(cx: &mut Context<Session>, name: CString, value: CString) -> CallbackFuture<'_> {
    if let Some(s) = cx.data.as_mut() {
        // Bytes as sent: non-UTF-8 header bytes must come through unchanged.
        s.header(name.as_bytes(), value.as_bytes());
    }
    next(cx.data.as_ref(), ProtoOpts::NOREPLY_HEADER)
}

fn handle_eoh(cx: &mut Context<Session>) -> CallbackFuture<'_> {
    if let Some(s) = cx.data.as_mut() {
        s.eoh();
    }
    next(cx.data.as_ref(), ProtoOpts::NOREPLY_EOH)
}

fn handle_body(cx: &mut Context<Session>, chunk: Bytes) -> CallbackFuture<'_> {
    if let Some(s) = cx.data.as_mut() {
        s.body(chunk);
    }
    next(cx.data.as_ref(), ProtoOpts::NOREPLY_BODY)
}

fn handle_eom(cx: &mut EomContext<Session>) -> CallbackFuture<'_> {
    Box::pin(async move {
        let Some(session) = cx.data.as_mut() else {
            error!("{}: no session at end of message", queue_id(&cx.macros));
            return Status::Tempfail;
        };
        match session.eom(&cx.macros, &cx.actions, &mut cx.reply).await {
            Ok(outcome) => outcome.status,
            Err(e) => {
                error!("{}: {e}; message tempfailed", queue_id(&cx.macros));
                super::metrics::event("eom_error");
                Status::Tempfail
            }
        }
    })
}

fn handle_abort(cx: &mut Context<Session>) -> CallbackFuture<'_> {
    if let Some(s) = cx.data.as_mut() {
        s.abort();
    }
    Box::pin(async { Status::Continue })
}

fn handle_close(cx: &mut Context<Session>) -> CallbackFuture<'_> {
    if let Some(s) = cx.data.as_mut() {
        s.abort();
    }
    Box::pin(async { Status::Continue })
}
