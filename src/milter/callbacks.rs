//! One function per milter stage. Each only translates indymilter's types (CString,
//! macros, socket info) into Rust types and calls one `Session` method. Internal
//! errors (a panic anywhere in a transaction, a failed read-back, actions that cannot
//! be sent) become one log line with the queue id and the cause (throttled), a count in
//! `mimeref_internal_errors_total`, and the answer `internal_error_action` gives; a
//! panic never reaches indymilter, which would end the connection.

use std::any::Any;
use std::ffi::CString;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use bytes::Bytes;
use indymilter::{
    Actions, CallbackFuture, Callbacks, Context, EomContext, MacroStage, NegotiateContext,
    ProtoOpts, SetErrorReply, SocketInfo, Status,
};
use tracing::debug;

use super::outcome::{panic_text, Cause, Ended, EomError};
use super::session::{queue_id, Session};
use super::throttle;
use super::Shared;
use crate::config::{Config, InternalErrorAction};

pub fn build(shared: Arc<Shared>) -> Callbacks<Session> {
    let s1 = shared.clone();
    let s2 = shared.clone();
    let s3 = shared;
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
        .on_eom(move |cx| Box::pin(handle_eom(s3.clone(), cx)))
        .on_abort(|cx| Box::pin(handle_abort(cx)))
        .on_close(|cx| Box::pin(handle_close(cx)))
}

/// The actions this configuration may use; nothing at all in dry-run mode.
pub fn needed_actions(cfg: &Config) -> Actions {
    use crate::policy::Action;
    let mut a = Actions::empty();
    if cfg.service().dry_run {
        return a;
    }
    if cfg.policy().may(Action::Fix) {
        a |= Actions::CHANGE_HEADER | Actions::REPLACE_BODY;
    }
    if cfg.report().header.is_some() {
        a |= Actions::ADD_HEADER;
        if cfg.report().remove_forged {
            a |= Actions::CHANGE_HEADER;
        }
    }
    if cfg.policy().may(Action::Quarantine) {
        a |= Actions::QUARANTINE;
    }
    a
}

/// The data a connection's callbacks start with (indymilter's `run_with_data`): the
/// configuration at accept time and who the MTA is, so that even a refused
/// negotiation can name it.
pub fn initial(shared: &Shared, peer: String, connection: u64) -> Session {
    Session::new(shared, peer, connection)
}

fn handle_negotiate(
    shared: Arc<Shared>,
    cx: &mut NegotiateContext<Session>,
    mta_actions: Actions,
    mta_opts: ProtoOpts,
) -> CallbackFuture<'_> {
    let snapshot = shared.snapshot();
    let cfg = snapshot.0.clone();
    let mut session = cx
        .data
        .take()
        .unwrap_or_else(|| Session::new(&shared, "unknown peer".into(), 0));
    let needed = needed_actions(&cfg);
    let missing = needed - mta_actions;
    if !missing.is_empty() {
        super::metrics::event("negotiation_refused");
        let (peer, id) = (session.peer(), session.connection());
        throttle::NEGOTIATION_REFUSED.hit(|| {
            format!(
                "among them connection {id} from the MTA at {peer}, which does not offer the milter actions {} that the configuration needs; \
                 let it offer them (e.g. set milter_protocol = 6 in Postfix main.cf; Stalwart: the \
                 milter's flagsAction, 0.15: session.milter.<id>.options.flags.actions; go-milter: ClientOptions.ActionMask) \
                 or change the policy",
                action_names(missing)
            )
        });
        return Box::pin(async { Status::Reject });
    }
    cx.requested_actions = needed;
    // Skip the stages without callbacks only where the MTA can. Keep the leading space
    // of header values where the MTA offers it; without it (protocol 2 to 5, Stalwart,
    // go-milter by default) header values are taken and given back the way that MTA
    // writes them (`ValueForm`).
    let leading_space = mta_opts.contains(ProtoOpts::LEADING_SPACE);
    cx.requested_opts = (cx.requested_opts & mta_opts) | (mta_opts & ProtoOpts::LEADING_SPACE);
    let no_reply = if cfg.service().no_reply_stages {
        NO_REPLY & mta_opts
    } else {
        ProtoOpts::empty()
    };
    cx.requested_opts |= no_reply;
    // Recipients matter only to scopes that match on them: otherwise the MTA need not
    // send RCPT at all (this connection keeps this configuration).
    if !cfg.policy().scopes.reads_recipients() {
        cx.requested_opts |= ProtoOpts::NO_RCPT & mta_opts;
    }
    debug!(
        "negotiated: {}; header values {} (connection {} from the MTA at {})",
        describe_no_reply(no_reply),
        if leading_space {
            "with their leading space"
        } else {
            "without their leading space"
        },
        session.connection(),
        session.peer(),
    );
    // Macro lists only where the MTA lets the milter choose (SMFIF_SETSYMLIST, Postfix
    // and Sendmail at protocol 6); otherwise it sends the macros set on its side.
    if mta_actions.contains(Actions::REQUEST_MACROS) {
        let mut connect = String::from("{client_addr}");
        if !cfg.directions().outbound_daemons.is_empty() {
            connect.push_str(" {daemon_name}");
        }
        let wanted = [
            (MacroStage::Connect, connect),
            (MacroStage::Mail, "{auth_authen} {auth_type}".to_string()),
            // The queue id, for the log line, read at end of message: Sendmail sends it
            // at end of header but not at end of message, Postfix at both.
            (MacroStage::Eoh, "i".to_string()),
        ];
        for (stage, names) in wanted {
            if let Ok(c) = CString::new(names) {
                cx.requested_macros.insert(stage, c);
            }
        }
    }
    session.negotiated(snapshot, shared.budget.clone(), no_reply, leading_space);
    cx.data = Some(session);
    Box::pin(async { Status::Continue })
}

/// Action flags by the names Postfix and libmilter use (SMFIF_*).
fn action_names(a: Actions) -> String {
    let names = [
        (Actions::ADD_HEADER, "SMFIF_ADDHDRS"),
        (Actions::REPLACE_BODY, "SMFIF_CHGBODY"),
        (Actions::CHANGE_HEADER, "SMFIF_CHGHDRS"),
        (Actions::QUARANTINE, "SMFIF_QUARANTINE"),
    ];
    let on: Vec<&str> = names
        .iter()
        .filter(|(f, _)| a.contains(*f))
        .map(|(_, n)| *n)
        .collect();
    if on.is_empty() {
        format!("{a:?}")
    } else {
        on.join(", ")
    }
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
    if s.is_some_and(|s| s.no_reply().contains(stage)) {
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
    take_lent(cx);
    if shared.is_closing() {
        // Shutting down: new transactions go to another instance or come back later.
        return Box::pin(async { Status::Tempfail });
    }
    if let Some(s) = cx.data.as_mut() {
        let sender = args.first().map(|a| a.as_bytes());
        s.guarded(|s| s.mail_from(sender));
    }
    Box::pin(Answer::<false>)
}

fn handle_rcpt(cx: &mut Context<Session>, args: Vec<CString>) -> CallbackFuture<'_> {
    if let (Some(s), Some(a)) = (cx.data.as_mut(), args.first()) {
        s.guarded(|s| s.rcpt(a.as_bytes()));
    }
    Box::pin(Answer::<false>)
}

fn handle_header(cx: &mut Context<Session>, name: CString, value: CString) -> CallbackFuture<'_> {
    if let Some(s) = cx.data.as_mut() {
        // Bytes as sent: non-UTF-8 header bytes must come through unchanged.
        s.guarded(|s| s.header(name.as_bytes(), value.as_bytes()));
    }
    kept(cx, ProtoOpts::NOREPLY_HEADER)
}

fn handle_eoh(cx: &mut Context<Session>) -> CallbackFuture<'_> {
    if let Some(s) = cx.data.as_mut() {
        s.queue_id_from(&cx.macros);
        s.guarded(Session::eoh);
    }
    let answer = kept(cx, ProtoOpts::NOREPLY_EOH);
    lend_body(cx);
    answer
}

fn handle_body(cx: &mut Context<Session>, chunk: Bytes) -> CallbackFuture<'_> {
    let lent = cx.take_body_buffer();
    if let Some(s) = cx.data.as_mut() {
        match lent {
            Some((v, n)) if n > 0 => s.guarded(|s| s.body_in_buffer(v, n)),
            Some((v, _)) => s.guarded(|s| {
                s.reclaim_body(v);
                s.body(chunk);
            }),
            None => s.guarded(|s| s.body(chunk)),
        }
    }
    let answer = kept(cx, ProtoOpts::NOREPLY_BODY);
    lend_body(cx);
    answer
}

/// The message's buffer lent for the next body chunk: read into it by the connection,
/// the chunk is not copied again (`Session::body_in_buffer`). Every callback that may
/// follow a body chunk takes it back first (`take_lent`).
fn lend_body(cx: &mut Context<Session>) {
    if let Some(v) = cx.data.as_mut().and_then(Session::lend_body) {
        cx.lend_body_buffer(v);
    }
}

/// The lent buffer back into the message, before anything else touches it.
fn take_lent(cx: &mut Context<Session>) {
    if let (Some((v, _)), Some(s)) = (cx.take_body_buffer(), cx.data.as_mut()) {
        s.reclaim_body(v);
    }
}

fn handle_eom(shared: Arc<Shared>, cx: &mut EomContext<Session>) -> CallbackFuture<'_> {
    if let (Some(v), Some(s)) = (cx.take_body_buffer(), cx.data.as_mut()) {
        s.reclaim_body(v);
    }
    Box::pin(async move {
        let Some(session) = cx.data.as_mut() else {
            let f = EomError::new(Cause::NoMessage, "no session at end of message");
            return internal_error(&shared.config(), &queue_id(&cx.macros), &f);
        };
        let result = {
            let eom = std::pin::pin!(session.eom(&cx.macros, &cx.actions, &mut cx.reply));
            CatchPanic(eom).await
        };
        let failure = match result {
            Ok(Ok(ended)) => {
                // Logged and counted here, not in the session: the metrics know the
                // session's outcome, the session knows nothing of them.
                super::eom_log::ended(session.config(), &ended);
                count(&ended);
                return ended.status();
            }
            // Nothing more reaches the MTA: the cut is logged when the connection closes.
            Ok(Err(f)) if f.reply_timed_out => return Status::Tempfail,
            Ok(Err(f)) => f,
            Err(p) => {
                session.abort();
                EomError::new(Cause::Panic, format!("end of message: {}", panic_text(&*p)))
            }
        };
        internal_error(session.config(), &queue_id(&cx.macros), &failure)
    })
}

fn count(ended: &Ended) {
    match ended {
        Ended::Answered(o) => super::metrics::record(o),
        Ended::OverBudget {
            failed_spill,
            stage,
            ..
        } => {
            if *failed_spill {
                super::metrics::spill_tempfail();
            }
            super::metrics::memory_tempfail(stage);
        }
    }
}

/// The answer of a stage that keeps octets: a message `memory_budget` had no room for
/// is tempfailed there and then when the stage replies (logged and counted here, as
/// no end of message follows), otherwise at end of message.
fn kept(cx: &mut Context<Session>, stage: ProtoOpts) -> CallbackFuture<'static> {
    let Some(s) = cx.data.as_mut() else {
        return next(None, stage);
    };
    if !s.no_reply().contains(stage) {
        if let Some(ended) = s.over_budget_now() {
            super::eom_log::ended(s.config(), &ended);
            count(&ended);
            // The words end of message gives it (`Session::tempfail_over_budget`).
            let _ = cx.reply.set_error_reply(
                "451",
                Some("4.3.1"),
                ["Insufficient system resources, try again later"],
            );
            return Box::pin(async { Status::Tempfail });
        }
    }
    next(Some(s), stage)
}

/// The answer to a message the daemon failed, as `internal_error_action` says: logged
/// (at most a line a second, with the count) and counted with its cause.
fn internal_error(cfg: &Config, queue_id: &str, f: &EomError) -> Status {
    let action = cfg.service().internal_error_action;
    super::throttle::INTERNAL_ERROR.hit(|| {
        let answer = match action {
            InternalErrorAction::Tempfail => "tempfailed",
            InternalErrorAction::Accept => {
                "accepted unchecked and unchanged (internal_error_action = \"accept\")"
            }
        };
        format!("{queue_id}: {f}; {answer}")
    });
    super::metrics::internal_error(f.cause, action.as_str());
    match action {
        InternalErrorAction::Tempfail => Status::Tempfail,
        InternalErrorAction::Accept => Status::Accept,
    }
}

/// A future whose panic comes back as `Err` rather than unwinding into indymilter's
/// connection task, which would close the MTA's connection.
struct CatchPanic<F>(F);

impl<F: Future + Unpin> Future for CatchPanic<F> {
    type Output = Result<F::Output, Box<dyn Any + Send>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let inner = &mut self.0;
        match std::panic::catch_unwind(AssertUnwindSafe(|| Pin::new(inner).poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Err(p) => Poll::Ready(Err(p)),
        }
    }
}

fn handle_abort(cx: &mut Context<Session>) -> CallbackFuture<'_> {
    take_lent(cx);
    let cut = cx.cut();
    if let Some(s) = cx.data.as_mut() {
        if let Some(cut) = cut {
            super::cuts::in_transaction(s, cut);
        }
        s.abort();
    }
    Box::pin(async { Status::Continue })
}

fn handle_close(cx: &mut Context<Session>) -> CallbackFuture<'_> {
    take_lent(cx);
    let cut = cx.cut();
    if let Some(s) = cx.data.as_mut() {
        if let Some(cut) = cut {
            super::cuts::between_transactions(s, cut);
        }
        s.end_smtp_session();
    }
    Box::pin(async { Status::Continue })
}
