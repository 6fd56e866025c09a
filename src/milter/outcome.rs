//! What end of message comes to: an answered message ([`Outcome`]), one tempfailed over
//! the memory budget, or a [`EomError`] inside the daemon with its [`Cause`] (the
//! `cause` label of `mimeref_internal_errors_total`). The session makes them; the
//! connection's callback logs (`eom_log`) and counts (`metrics`) them.

use indymilter::Status;

use crate::engine;
use crate::policy::plan::Plan;

/// What failed inside the daemon when a message could not be handled: the `cause`
/// label of `mimeref_internal_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// A panic, caught (in the analysis, or in any stage of the transaction).
    Panic,
    /// The message could not be put back together: the spill file read short or
    /// failed, or memory for the joined copy was refused.
    ReadBack,
    /// No read-back slot: the semaphore that bounds read-backs was closed.
    ReadBackSlot,
    /// The analysis was cancelled (the runtime shutting down under it).
    Cancelled,
    /// The actions could not be sent to the MTA.
    Send,
    /// End of message came without a transaction to end.
    NoMessage,
}

impl Cause {
    pub const ALL: [Cause; 6] = [
        Cause::Panic,
        Cause::ReadBack,
        Cause::ReadBackSlot,
        Cause::Cancelled,
        Cause::Send,
        Cause::NoMessage,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Panic => "panic",
            Cause::ReadBack => "read_back",
            Cause::ReadBackSlot => "read_back_slot",
            Cause::Cancelled => "cancelled",
            Cause::Send => "send",
            Cause::NoMessage => "no_message",
        }
    }
}

/// Why end of message could not be handled inside the daemon: its cause, which also
/// labels `mimeref_internal_errors_total`, and what the log says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EomError {
    pub cause: Cause,
    pub detail: String,
    /// The actions could not be sent because the MTA did not read them within
    /// `reply_timeout`: the connection is closed, no answer can reach the MTA, and the
    /// timeout is logged and counted as such (`cuts`), not as an internal error.
    pub reply_timed_out: bool,
}

impl EomError {
    pub fn new(cause: Cause, detail: impl Into<String>) -> EomError {
        EomError {
            cause,
            detail: detail.into(),
            reply_timed_out: false,
        }
    }
}

impl std::fmt::Display for EomError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.cause.as_str(), self.detail)
    }
}

impl std::error::Error for EomError {}

/// The message of a caught panic, for the log.
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        format!("panic: {s}")
    } else if let Some(s) = payload.downcast_ref::<String>() {
        format!("panic: {s}")
    } else {
        "panic".into()
    }
}

/// How end of message ended when nothing inside the daemon failed. Returned once per
/// message and matched at once: not boxed, which would cost an allocation per message.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Ended {
    /// Analysed, and the plan's actions sent.
    Answered(Outcome),
    /// Past `[limits] memory_budget`: tempfailed without analysis (`stage` "message")
    /// or without its replaced body sent (`stage` "replaced_body").
    OverBudget {
        queue_id: String,
        octets: u64,
        /// Octets this message would have held, and those held for other messages.
        needed: usize,
        held: usize,
        budget: usize,
        /// It was in memory because its spill failed.
        failed_spill: bool,
        stage: &'static str,
    },
}

impl Ended {
    /// The answer given to the MTA.
    pub fn status(&self) -> Status {
        match self {
            Ended::Answered(o) => o.status,
            Ended::OverBudget { .. } => Status::Tempfail,
        }
    }
}

/// What end of message did, for the caller's log and metrics.
#[derive(Debug)]
pub struct Outcome {
    pub queue_id: String,
    /// The SMTP client's address, from connect or `{client_addr}`, when the MTA gave it.
    pub client: Option<std::net::IpAddr>,
    /// What made the plan's direction.
    pub direction_reason: crate::policy::direction::Reason,
    pub plan: Plan,
    /// Every finding, whatever its action (logged at debug).
    pub findings: Vec<engine::Finding>,
    /// The body began with a copy of the heading, which was analysed as the heading.
    pub heading_copy: bool,
    pub octets: u64,
    /// From MAIL to the end-of-message reply (includes the SMTP transfer).
    pub millis: u128,
    /// What end of message itself took: read-back, analysis, plan, actions sent.
    pub eom_seconds: f64,
    pub status: Status,
}
