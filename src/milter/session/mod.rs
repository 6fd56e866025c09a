//! One MTA connection: a plain state machine that accumulates the message within the
//! configured limits and, at end of message, analyses it and hands the plan to
//! `actions`. No socket in here, so it can be driven directly.
//!
//! Memory: the octets go to a [`Buffer`](super::buffer::Buffer), which spills large
//! messages to a file and reads them back at end of message; at most one message above
//! `INLINE_MAX` per CPU is analysed at a time, so the daemon's peak is `[limits]
//! memory_budget` (every octet of message data held: buffers, spill files on tmpfs,
//! replaced bodies until sent) plus a few times the largest message (SECURITY.md). A
//! message the budget has no room for is tempfailed at the first stage that replies.
//!
//! What fails inside the daemon comes back from [`Session::eom`] as a [`EomError`] with
//! its [`Cause`]; the callbacks answer it as `internal_error_action` says.
//!
//! Here: the session, built once per connection, and the stages that receive the
//! message; `eom`: end of message; `heading_copy`: the copy of the heading Stalwart
//! sends in the body; `over_budget`: the tempfail of a message the memory budget has
//! no room for (its spill failed, or spilled octets count as memory).

use std::borrow::Cow;
use std::ffi::CStr;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use indymilter::{Macros, ProtoOpts};

use super::actions::ValueForm;
use super::buffer::{self, Budget, Buffer, Pool, SpillTo};
use super::in_flight::{InFlight, InFlightCount};
use super::outcome::{panic_text, Cause, EomError};
use super::{EngineOptions, Shared};
use crate::config::Config;
use crate::policy::intake::Intake;
use crate::policy::matching;
use crate::policy::scope::Recipients;

mod eom;
mod heading_copy;
mod over_budget;
#[cfg(test)]
mod tests;

/// Messages up to this size are analysed on the connection's own task.
const INLINE_MAX: usize = buffer::SMALL;

/// The message being received.
#[derive(Debug)]
struct Message {
    /// The octets kept (and whether keeping stopped).
    buf: Buffer,
    /// What the limits let through (shared with the offline commands).
    intake: Intake,
    /// Every octet the MTA sent, buffered or not.
    octets: u64,
    /// Where the body starts in `buf`, once the end of the header has come.
    body_at: Option<usize>,
    /// Header fields named like the report header, all that the MTA sent (also past
    /// a limit): how many forged copies there are to delete, in the MTA's own count.
    report_fields: usize,
    /// MAIL FROM, for the scopes (None: no MAIL stage, e.g. a milter added late).
    sender: Option<String>,
    /// RCPT TO, as the scopes of the configuration snapshot they were matched against.
    recipients: Recipients,
    started: Instant,
    _in_flight: InFlight,
}

/// Per-connection state, with the configuration snapshot taken when the MTA connected
/// (renewed at negotiation). Built once per connection by [`Session::new`]; the
/// callbacks reach it only through its methods, one per stage.
#[derive(Debug)]
pub struct Session {
    config: Arc<Config>,
    /// The engine options built with `config`, by the daemon once per load.
    options: Arc<EngineOptions>,
    client_addr: Option<IpAddr>,
    in_flight: Arc<InFlightCount>,
    message: Option<Message>,
    /// Large message buffers, shared by all sessions.
    pool: Arc<Pool>,
    /// Memory held by messages whose spill failed, shared by all sessions of the daemon
    /// from negotiation on.
    budget: Arc<Budget>,
    /// A stage of this transaction failed (a panic): nothing more is kept, end of
    /// message answers as for an internal error.
    broken: Option<EomError>,
    /// The stages negotiated "no reply" (a subset of connect, header, end of header,
    /// body): their callbacks must answer `Status::Noreply`.
    no_reply: ProtoOpts,
    /// The MTA's address as accepted ("127.0.0.1:41234", "unix socket"), for log lines.
    peer: String,
    /// This milter connection's number since the daemon started (0: not from the
    /// daemon's listener), for log lines.
    connection: u64,
    /// Header values come with their leading white space and go back with it
    /// (SMFIP_HDR_LEADSPC negotiated). Without it the MTA drops one space after the
    /// colon and writes `Name: ` before a changed or added value: see [`ValueForm`].
    leading_space: bool,
    /// The MTA folds header values with CRLF (it sent such a value, or the body began
    /// with a copy of the heading, as Stalwart sends it): folds go back the same way.
    crlf_folds: bool,
    /// The queue id of the message being received, from end of header on (NOQUEUE
    /// before), for the log lines written before end of message.
    queue_id: String,
}

impl Session {
    /// A connection's session from its start (indymilter's `run_with_data`): the
    /// configuration of the moment with its engine options, and who the MTA is, so that
    /// even a refused negotiation can name it.
    pub fn new(shared: &Shared, peer: String, connection: u64) -> Session {
        let (config, options) = shared.snapshot();
        Session {
            config,
            options,
            client_addr: None,
            in_flight: shared.in_flight.clone(),
            message: None,
            pool: Pool::global(),
            budget: Arc::default(),
            broken: None,
            no_reply: ProtoOpts::empty(),
            peer,
            connection,
            leading_space: true,
            crlf_folds: false,
            queue_id: NOQUEUE.into(),
        }
    }

    /// What negotiation settled: the configuration its answer was worked out from (a
    /// reload since connect applies to this connection), the daemon's shared memory
    /// budget, the stages that go without a reply, and whether header values keep
    /// their leading space.
    pub fn negotiated(
        &mut self,
        (config, options): (Arc<Config>, Arc<EngineOptions>),
        budget: Arc<Budget>,
        no_reply: ProtoOpts,
        leading_space: bool,
    ) {
        self.config = config;
        self.options = options;
        self.budget = budget;
        self.no_reply = no_reply;
        self.leading_space = leading_space;
    }

    /// The configuration this connection works with.
    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// The stages negotiated "no reply".
    pub fn no_reply(&self) -> ProtoOpts {
        self.no_reply
    }

    /// The MTA's address as accepted, for log lines.
    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// This milter connection's number since the daemon started, for log lines.
    pub fn connection(&self) -> u64 {
        self.connection
    }

    /// The queue id of the message being received (NOQUEUE before end of header).
    pub fn queue_id(&self) -> &str {
        &self.queue_id
    }

    /// The queue id, asked for at end of header: from here on the lines about this
    /// message (a failed spill) can name it.
    pub fn queue_id_from(&mut self, macros: &Macros) {
        self.queue_id = queue_id(macros);
    }

    pub fn value_form(&self) -> ValueForm {
        ValueForm {
            leading_space: self.leading_space,
            crlf_folds: self.crlf_folds,
        }
    }

    pub fn connect(&mut self, addr: Option<IpAddr>) {
        self.client_addr = addr;
    }

    /// The SMTP session ends (QUIT, QUIT_NC, or the connection closes): nothing of it
    /// may reach the next SMTP session on this connection (QUIT_NC), which begins
    /// with its own CONNECT. What was negotiated stays.
    pub fn end_smtp_session(&mut self) {
        self.message = None;
        self.client_addr = None;
    }

    /// MAIL FROM: a new transaction begins (a previous one without end is dropped).
    pub fn mail(&mut self) {
        self.broken = None;
        self.queue_id = NOQUEUE.into();
        self.message = Some(Message {
            buf: Buffer::new(self.pool.clone(), self.budget.clone()),
            intake: self.config.intake(),
            octets: 0,
            body_at: None,
            report_fields: 0,
            sender: None,
            recipients: self.config.policy().scopes.recipients(),
            started: Instant::now(),
            _in_flight: InFlight::enter(&self.in_flight),
        });
    }

    /// MAIL FROM with its first argument (the address, `<>` for the null sender).
    pub fn mail_from(&mut self, sender: Option<&[u8]>) {
        self.mail();
        // Only scopes read the sender: without any, most mail pays nothing for it.
        if self.config.policy().scopes.is_empty() {
            return;
        }
        if let Some(m) = self.message.as_mut() {
            m.sender = sender.map(matching::normalize_address);
        }
    }

    /// RCPT TO with its first argument, the recipient address.
    pub fn rcpt(&mut self, recipient: &[u8]) {
        let scopes = self.config.clone();
        self.message()
            .recipients
            .add(&scopes.policy().scopes, recipient);
    }

    fn message(&mut self) -> &mut Message {
        // A header or body without MAIL (e.g. a milter added after MAIL by the MTA):
        // start the message here rather than lose it.
        if self.message.is_none() {
            self.mail();
        }
        match self.message.as_mut() {
            Some(m) => m,
            None => unreachable!("message started above"),
        }
    }

    pub fn header(&mut self, name: &[u8], value: &[u8]) {
        if self.broken.is_some() {
            return;
        }
        let form = self.value_form();
        if !form.leading_space && value.windows(2).any(|w| w == b"\r\n") {
            self.crlf_folds = true;
        }
        let value = &*form.received(value);
        let report = self
            .config
            .report()
            .header
            .as_ref()
            .is_some_and(|r| r.as_bytes().eq_ignore_ascii_case(name));
        let (m, to) = self.receiving();
        let len = name.len() + 1 + value.len() + 2;
        m.octets += len as u64;
        m.report_fields += usize::from(report);
        if m.buf.incomplete {
            return;
        }
        if !m.intake.field(len) {
            m.buf.incomplete = true;
            return;
        }
        m.buf.append_field(name, value, to);
    }

    pub fn eoh(&mut self) {
        if self.broken.is_some() {
            return;
        }
        let (m, to) = self.receiving();
        m.octets += 2;
        if m.buf.incomplete {
            return;
        }
        if m.intake.end_of_header() {
            m.buf.append(b"\r\n", to);
            m.body_at = Some(m.buf.len);
        } else {
            m.buf.incomplete = true;
        }
    }

    /// A body chunk, kept without copying where it can be (see `Message::chunks`).
    pub fn body(&mut self, chunk: Bytes) {
        if self.broken.is_some() {
            return;
        }
        let (m, to) = self.receiving();
        m.octets += chunk.len() as u64;
        if m.buf.incomplete {
            return;
        }
        let keep = m.intake.body(chunk.len());
        if keep < chunk.len() {
            m.buf.append_chunk(chunk.slice(..keep), to);
            m.buf.incomplete = true;
        } else {
            m.buf.append_chunk(chunk, to);
        }
    }

    /// A body chunk that the connection read into the lent buffer (`lend_body`): `n`
    /// octets after what the buffer held.
    pub fn body_in_buffer(&mut self, v: Vec<u8>, n: usize) {
        if !self.message.as_ref().is_some_and(|m| m.buf.is_lent()) {
            self.pool.give(v);
            return;
        }
        let broken = self.broken.is_some();
        let (m, to) = self.receiving();
        if broken || m.buf.incomplete {
            m.buf.reclaim(v);
            if !broken {
                m.octets += n as u64;
            }
            return;
        }
        m.octets += n as u64;
        let keep = m.intake.body(n);
        m.buf.append_lent(v, keep, to);
        if keep < n {
            m.buf.incomplete = true;
        }
    }

    /// The message's buffer, lent to the connection so that the next body chunk is
    /// read straight into it (indymilter's `Context::lend_body_buffer`); taken back by
    /// `body_in_buffer` or `reclaim_body`.
    pub fn lend_body(&mut self) -> Option<Vec<u8>> {
        if self.broken.is_some() {
            return None;
        }
        self.message.as_mut()?.buf.lend()
    }

    /// The lent buffer back, without a chunk (another stage came, or the chunk did not
    /// fit and came on its own).
    pub fn reclaim_body(&mut self, v: Vec<u8>) {
        match self.message.as_mut() {
            Some(m) if m.buf.is_lent() => m.buf.reclaim(v),
            _ => self.pool.give(v),
        }
    }

    /// The message being received with where it may spill.
    fn receiving(&mut self) -> (&mut Message, SpillTo<'_>) {
        self.message();
        let limits = self.config.limits();
        let to = SpillTo {
            threshold: limits.spill_threshold,
            dir: &limits.spill_directory,
            dir_in_memory: limits.spill_in_memory,
            budget: limits.memory_budget,
            queue_id: &self.queue_id,
        };
        match self.message.as_mut() {
            Some(m) => (m, to),
            None => unreachable!("message started above"),
        }
    }

    pub fn abort(&mut self) {
        self.message = None;
        self.broken = None;
    }

    /// Runs one stage of the transaction (`f`: a `Session` method). A panic in it fails
    /// the transaction, not the connection: what was kept is dropped, the rest of the
    /// message is ignored, and end of message answers as for an internal error.
    pub fn guarded(&mut self, f: impl FnOnce(&mut Session)) {
        if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(self))) {
            self.message = None;
            self.broken = Some(EomError::new(
                Cause::Panic,
                format!("receiving the message: {}", panic_text(&*p)),
            ));
        }
    }
}

/// What stands for the queue id when the MTA sent none (Postfix's word).
const NOQUEUE: &str = "NOQUEUE";

/// The MTA's queue id, or NOQUEUE when it sent none.
pub(in crate::milter) fn queue_id(macros: &Macros) -> String {
    macros
        .get(c"i")
        .map(CStr::to_string_lossy)
        .filter(|q| !q.is_empty())
        .map_or_else(|| NOQUEUE.into(), Cow::into_owned)
}
