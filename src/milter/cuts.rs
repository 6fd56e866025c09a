//! Connections that end before the MTA says QUIT. Each time limit that passes
//! (`connection_timeout` for one command, `transaction_timeout` for a whole mail
//! transaction, `reply_timeout` for the MTA to read an answer) and each mail transaction
//! cut short by the end of its connection is logged (at most a line a second per kind,
//! with the count: `throttle`) and counted, so that an admin sees why the MTA applied
//! its milter_default_action. The connection is already closed: indymilter closes it
//! when a limit passes, which frees its slot and what the message held.

use indymilter::Cut;

use super::metrics;
use super::session::Session;
use super::throttle;

/// A mail transaction was open when the connection ended for `cut`.
pub fn in_transaction(s: &Session, cut: Cut) {
    let detail = || {
        format!(
            "connection {} from the MTA at {}, in a mail transaction (queue id {}){}",
            s.connection(),
            s.peer(),
            s.queue_id(),
            limit(s, cut)
        )
    };
    metrics::transaction_cut(cause(cut));
    match timeout_kind(cut) {
        Some(kind) => timed_out(kind, detail),
        None => throttle::TRANSACTION_CUT.hit(|| format!("{}: {}", detail(), what(cut))),
    }
}

/// No mail transaction was open when the connection ended for `cut`: only a time limit
/// is worth a line; the MTA closing between transactions is ordinary.
pub fn between_transactions(s: &Session, cut: Cut) {
    if let Some(kind) = timeout_kind(cut) {
        timed_out(kind, || {
            // An answer is long only at end of message: name the message it was for.
            let when = if cut == Cut::ReplyTimeout {
                format!("answering end of message (queue id {})", s.queue_id())
            } else {
                "between mail transactions".into()
            };
            format!(
                "connection {} from the MTA at {}, {when}{}",
                s.connection(),
                s.peer(),
                limit(s, cut)
            )
        });
    }
}

fn timed_out(kind: &'static str, detail: impl FnOnce() -> String) {
    metrics::timeout(kind);
    match kind {
        "transaction" => throttle::TRANSACTION_TIMEOUT.hit(detail),
        "reply" => throttle::REPLY_TIMEOUT.hit(detail),
        _ => throttle::READ_TIMEOUT.hit(detail),
    }
}

/// The `kind` label of `mimeref_timeouts_total`, for a time limit.
fn timeout_kind(cut: Cut) -> Option<&'static str> {
    match cut {
        Cut::ReadTimeout => Some("read"),
        Cut::TransactionTimeout => Some("transaction"),
        Cut::ReplyTimeout => Some("reply"),
        _ => None,
    }
}

/// The `cause` label of `mimeref_transactions_cut_total`.
fn cause(cut: Cut) -> &'static str {
    match cut {
        Cut::ReadTimeout => "read_timeout",
        Cut::TransactionTimeout => "transaction_timeout",
        Cut::ReplyTimeout => "reply_timeout",
        Cut::Closed => "closed",
        Cut::Protocol => "protocol_error",
        Cut::Shutdown => "shutdown",
        _ => "io_error",
    }
}

/// The limit that passed, as configured, for the log line.
fn limit(s: &Session, cut: Cut) -> String {
    let l = s.config().listen();
    match cut {
        Cut::ReadTimeout => format!(", {} s", l.connection_timeout.as_secs()),
        Cut::TransactionTimeout => format!(", {} s", l.transaction_timeout.as_secs()),
        Cut::ReplyTimeout => format!(", {} s", l.reply_timeout.as_secs()),
        _ => String::new(),
    }
}

fn what(cut: Cut) -> &'static str {
    match cut {
        Cut::Closed => "the MTA closed the connection",
        Cut::Protocol => "the MTA broke the milter protocol",
        Cut::Shutdown => "the daemon shut down",
        _ => "an I/O error on the connection",
    }
}
