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

use std::borrow::Cow;
use std::ffi::CStr;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use indymilter::{ContextActions, Macros, ProtoOpts, SetErrorReply};
use tracing::debug;

use super::actions::{self, ValueForm};
use super::buffer::{self, Budget, Buffer, Lost, Pool, SpillTo};
use super::outcome::{panic_text, Cause, Ended, EomError, Outcome};
use super::EngineOptions;
use crate::config::Config;
use crate::engine;
use crate::policy::intake::{self, Intake};
use crate::policy::plan::{Plan, Received};
use crate::policy::scope::{self, Envelope, Recipients};

/// The number of messages between MAIL and end of message, so that shutdown can wait
/// for the last one to end (awaited, not polled). A counter and a wake-up when it
/// reaches zero: a watch channel cost 900 instructions per message in notifications
/// nobody waited for.
#[derive(Debug, Default)]
pub struct InFlightCount {
    n: AtomicUsize,
    zero: tokio::sync::Notify,
}

impl InFlightCount {
    pub fn get(&self) -> usize {
        self.n.load(Ordering::SeqCst)
    }

    /// Returns once no message is in flight.
    pub async fn drained(&self) {
        loop {
            let notified = self.zero.notified();
            tokio::pin!(notified);
            // Registered before the count is read: a drop to zero in between still
            // wakes this waiter.
            notified.as_mut().enable();
            if self.get() == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// One message in flight, counted until dropped.
#[derive(Debug)]
pub struct InFlight(Arc<InFlightCount>);

impl InFlight {
    pub fn enter(counter: &Arc<InFlightCount>) -> InFlight {
        counter.n.fetch_add(1, Ordering::SeqCst);
        InFlight(counter.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.n.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.zero.notify_waiters();
        }
    }
}

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

/// Per-connection state, with the configuration snapshot taken when the MTA connected.
#[derive(Debug)]
pub struct Session {
    pub config: Arc<Config>,
    pub client_addr: Option<IpAddr>,
    in_flight: Arc<InFlightCount>,
    message: Option<Message>,
    /// Large message buffers, shared by all sessions.
    pool: Arc<Pool>,
    /// Memory held by messages whose spill failed, shared by all sessions of the daemon.
    pub budget: Arc<Budget>,
    /// A stage of this transaction failed (a panic): nothing more is kept, end of
    /// message answers as for an internal error.
    broken: Option<EomError>,
    /// The stages negotiated "no reply" (a subset of connect, header, end of header,
    /// body): their callbacks must answer `Status::Noreply`.
    pub no_reply: ProtoOpts,
    /// The engine options of `config`, when the daemon built them with it; otherwise
    /// built at end of message.
    pub options: Option<Arc<EngineOptions>>,
    /// The MTA's address as accepted ("127.0.0.1:41234", "unix socket"), for log lines.
    pub peer: String,
    /// This milter connection's number since the daemon started (0: not from the
    /// daemon's listener), for log lines.
    pub connection: u64,
    /// Header values come with their leading white space and go back with it
    /// (SMFIP_HDR_LEADSPC negotiated). Without it the MTA drops one space after the
    /// colon and writes `Name: ` before a changed or added value: see [`ValueForm`].
    pub leading_space: bool,
    /// The MTA folds header values with CRLF (it sent such a value, or the body began
    /// with a copy of the heading, as Stalwart sends it): folds go back the same way.
    crlf_folds: bool,
    /// The queue id of the message being received, from end of header on (NOQUEUE
    /// before), for the log lines written before end of message.
    pub queue_id: String,
}

impl Session {
    pub fn new(config: Arc<Config>, in_flight: Arc<InFlightCount>) -> Session {
        Session {
            config,
            client_addr: None,
            in_flight,
            message: None,
            pool: Pool::global(),
            budget: Arc::default(),
            broken: None,
            no_reply: ProtoOpts::empty(),
            options: None,
            peer: "unknown peer".into(),
            connection: 0,
            leading_space: true,
            crlf_folds: false,
            queue_id: NOQUEUE.into(),
        }
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
            m.sender = sender.map(scope::normalize_address);
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

    /// Analyses the message and sends the actions: the answer to end of message. What
    /// failed inside the daemon comes back as `Err`, for the caller to answer as
    /// `internal_error_action` says; what ended comes back for the caller to log and
    /// count (`eom_log`, `metrics`).
    pub async fn eom(
        &mut self,
        macros: &Macros,
        actions: &impl ContextActions,
        reply: &mut impl SetErrorReply,
    ) -> Result<Ended, EomError> {
        let eom_started = Instant::now();
        let mut m = self.take_message()?;
        let cfg = self.config.clone();
        let queue_id = queue_id(macros);
        if let Some(over) = Self::over_budget(&mut m, &cfg, &queue_id, reply)? {
            return Ok(over);
        }
        let lookup = |name| macros.get(name).map(CStr::to_string_lossy);
        let dir = cfg.directions().direction_with(lookup, self.client_addr);
        debug!(
            "{queue_id}: direction {dir} (auth={}, client={}, daemon={})",
            lookup(c"{auth_authen}")
                .or_else(|| lookup(c"{auth_type}"))
                .unwrap_or(Cow::Borrowed("-")),
            self.client_addr
                .map_or(Cow::Borrowed("-"), |a| Cow::Owned(a.to_string())),
            lookup(c"{daemon_name}").unwrap_or(Cow::Borrowed("-")),
        );
        let octets = m.octets;
        let started = m.started;
        let ((plan, findings, heading_copy, share), body_fits) =
            self.analyse(m, macros, dir).await?;
        if !body_fits {
            let body = plan.body.as_ref().map_or(0, |b| b.len());
            let held = self.budget.held().saturating_sub(share.octets());
            return Ok(Self::tempfail_over_budget(
                reply,
                queue_id,
                octets,
                (body, held, false),
                cfg.limits().memory_budget,
                "replaced_body",
            ));
        }
        let mut form = self.value_form();
        if heading_copy {
            // The body is written after the MTA's own heading, so the copy must not
            // come back in a replaced body; Stalwart folds with CRLF.
            self.crlf_folds = true;
            form.crlf_folds = true;
        }
        let status = actions::execute(&plan, form, actions, reply)
            .await
            .map_err(|e| EomError {
                reply_timed_out: e.cut().is_some(),
                ..EomError::new(Cause::Send, format!("sending actions: {e}"))
            })?;
        drop(share);
        Ok(Ended::Answered(Outcome {
            queue_id,
            plan,
            findings,
            heading_copy,
            octets,
            millis: started.elapsed().as_millis(),
            eom_seconds: eom_started.elapsed().as_secs_f64(),
            status,
        }))
    }

    /// The message of this transaction, or why there is none to analyse.
    fn take_message(&mut self) -> Result<Message, EomError> {
        if let Some(f) = self.broken.take() {
            self.message = None;
            return Err(f);
        }
        self.message
            .take()
            .ok_or_else(|| EomError::new(Cause::NoMessage, "end of message without a message"))
    }

    /// A message kept in memory after its spill failed, past `[limits] memory_budget`:
    /// tempfailed (the MTA keeps it and tries again later), not analysed.
    fn over_budget(
        m: &mut Message,
        cfg: &Config,
        queue_id: &str,
        reply: &mut impl SetErrorReply,
    ) -> Result<Option<Ended>, EomError> {
        match m.buf.lost.take() {
            None => Ok(None),
            Some(Lost::OverBudget {
                needed,
                held,
                failed_spill,
            }) => Ok(Some(Self::tempfail_over_budget(
                reply,
                queue_id.to_string(),
                m.octets,
                (needed, held, failed_spill),
                cfg.limits().memory_budget,
                "message",
            ))),
            Some(Lost::ReadBack(e)) => Err(EomError::new(
                Cause::ReadBack,
                format!("reading back a spill file that failed: {e}"),
            )),
        }
    }

    /// The answer to a message `[limits] memory_budget` has no room for: a tempfail (the
    /// MTA keeps the message and tries again later), logged and counted by the caller.
    /// `need`: the octets it needed, those held for other messages, and whether its
    /// spill had failed.
    fn tempfail_over_budget(
        reply: &mut impl SetErrorReply,
        queue_id: String,
        octets: u64,
        (needed, held, failed_spill): (usize, usize, bool),
        budget: usize,
        stage: &'static str,
    ) -> Ended {
        // Local and transient: the MTA keeps the message and tries again later.
        let _ = reply.set_error_reply(
            "451",
            Some("4.3.1"),
            ["Insufficient system resources, try again later"],
        );
        Ended::OverBudget {
            queue_id,
            octets,
            needed,
            held,
            budget,
            failed_spill,
            stage,
        }
    }

    /// The message being received, once `[limits] memory_budget` had no room for it:
    /// ended here, for a stage that replies to tempfail it at once (the caller logs and
    /// counts it) rather than take the rest of it for nothing.
    pub fn over_budget_now(&mut self) -> Option<Ended> {
        let m = self.message.as_mut()?;
        let Some(Lost::OverBudget {
            needed,
            held,
            failed_spill,
        }) = m.buf.lost.clone()
        else {
            return None;
        };
        let octets = m.octets;
        self.message = None;
        Some(Ended::OverBudget {
            queue_id: self.queue_id.clone(),
            octets,
            needed,
            held,
            budget: self.config.limits().memory_budget,
            failed_spill,
            stage: "message",
        })
    }

    /// What the scopes match on; nothing to look up when there are none.
    fn envelope(&self, m: &mut Message, macros: &Macros) -> Envelope {
        if self.config.policy().scopes.is_empty() {
            return Envelope::default();
        }
        let lookup = |name| macros.get(name).map(CStr::to_string_lossy);
        Envelope {
            sender: m.sender.take(),
            recipients: std::mem::take(&mut m.recipients),
            client_addr: self.client_addr.or_else(|| {
                lookup(c"{client_addr}").and_then(|a| crate::policy::direction::parse_ip(&a))
            }),
            sasl_login: lookup(c"{auth_authen}")
                .filter(|a| !a.is_empty())
                .map(Cow::into_owned),
            extra_headers: Vec::new(),
        }
    }

    /// The engine's analysis and the planner's plan of the message, with its findings
    /// and whether the body began with a copy of the heading (analysed as the heading).
    async fn analyse(
        &self,
        mut m: Message,
        macros: &Macros,
        dir: crate::policy::Direction,
    ) -> Result<(Analysed, bool), EomError> {
        let cfg = self.config.clone();
        let options = match &self.options {
            Some(o) => o.clone(),
            None => Arc::new(EngineOptions::new(&cfg)),
        };
        let incomplete = m.buf.incomplete;
        let not_given = if incomplete {
            m.octets.saturating_sub(m.buf.len as u64).max(1)
        } else {
            0
        };
        let report_fields = m.report_fields;
        let envelope = self.envelope(&mut m, macros);
        let dry_run = cfg.service().dry_run;
        let mut taken = m.buf.take();
        // Small messages (most mail) are analysed right here: the engine takes tens of
        // microseconds on them, less than a hop to the blocking pool and back costs on a
        // busy machine. Larger ones are CPU work on up to max_message_size octets: kept
        // off the reactor. Either way a panic becomes an error, never a lost connection.
        let inline = !taken.is_large() && taken.len() <= INLINE_MAX;
        // Any other message waits for a slot (one per CPU): that is what bounds the
        // memory the analyses take beyond the budget (a copy read back or joined, and
        // the replaced body being built). More at once would not go faster.
        let _permit =
            if inline {
                None
            } else {
                Some(buffer::read_back_permits().acquire().await.map_err(|e| {
                    EomError::new(Cause::ReadBackSlot, format!("read-back slot: {e}"))
                })?)
            };
        // Only an MTA without LEADING_SPACE has been seen to send one (Stalwart).
        let copy_at = m.body_at.filter(|_| !self.leading_space);
        let job = Job {
            share: taken.take_share(),
            taken,
            copy_at,
            cfg,
            envelope,
            options,
            dir,
            not_given,
            received: Received {
                incomplete,
                report_fields: Some(report_fields),
            },
            dry_run,
            pool: self.pool.clone(),
        };
        let work = move || job.run();
        let caught = |work| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))
                .map_err(|p| EomError::new(Cause::Panic, format!("analysis: {}", panic_text(&*p))))
        };
        let multi_thread = tokio::runtime::Handle::current().runtime_flavor()
            == tokio::runtime::RuntimeFlavor::MultiThread;
        let analysed = if inline {
            caught(work)?
        } else if multi_thread {
            // Larger messages run on this thread too, but with the reactor's other tasks
            // handed to another worker first: a hop to the blocking pool and back meant
            // two wake-ups, and on a saturated machine each waited for a CPU (2 MB over
            // TCP: end-of-message p99 25-100 ms for 0.1 ms of analysis).
            tokio::task::block_in_place(|| caught(work))?
        } else {
            tokio::task::spawn_blocking(work).await.map_err(|e| {
                if e.is_panic() {
                    EomError::new(
                        Cause::Panic,
                        format!("analysis: {}", panic_text(&*e.into_panic())),
                    )
                } else {
                    EomError::new(Cause::Cancelled, format!("analysis: {e}"))
                }
            })?
        };
        let mut analysed = analysed?;
        // With the slot still taken: a body waiting here for room is one of the CPUs ×
        // 2 × max_message_size that SECURITY.md's formula allows beside the budget.
        let body_fits = match analysed.0.body.as_ref() {
            Some(b) if !analysed.0.dry_run => {
                room_for_body(&mut analysed.3, b.len(), self.config.limits().memory_budget).await
            }
            _ => true,
        };
        Ok((analysed, body_fits))
    }
}

/// How long a replaced body waits for room in `memory_budget` (other messages ending,
/// other replaced bodies read by the MTA) before its message is tempfailed. Room comes
/// within milliseconds from an MTA that reads; the wait keeps a read-back slot, so
/// against MTAs that stopped reading it must be short.
const BODY_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Makes `share` the size of a replaced body, which is held until the MTA has read it
/// all (a client that reads slowly or not at all keeps it): false when the budget had
/// no room for it within [`BODY_WAIT`].
async fn room_for_body(share: &mut buffer::Held, len: usize, budget: usize) -> bool {
    let until = Instant::now() + BODY_WAIT;
    while !share.resize(len, budget) {
        if Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    true
}

/// The plan, the findings, whether the body began with a copy of the heading, and the
/// message's share of the budget.
type Analysed = (Plan, Vec<engine::Finding>, bool, buffer::Held);

/// What the analysis of one message needs, moved to where it runs (this thread, or the
/// blocking pool for a large message).
struct Job {
    /// The message's share of the budget: handed back to be resized for the replaced
    /// body.
    share: buffer::Held,
    taken: buffer::Taken,
    /// Where the body starts when it may begin with a copy of the heading.
    copy_at: Option<usize>,
    cfg: Arc<Config>,
    envelope: Envelope,
    options: Arc<EngineOptions>,
    dir: crate::policy::Direction,
    not_given: u64,
    received: Received,
    dry_run: bool,
    pool: Arc<Pool>,
}

impl Job {
    /// Reads the message back, analyses and plans it: the plan, the findings, and
    /// whether the body began with a copy of the heading (analysed as the heading).
    fn run(self) -> Result<Analysed, EomError> {
        let share = self.share;
        let mut raw = self.taken.read_back().map_err(|e| {
            EomError::new(
                Cause::ReadBack,
                format!("joining or reading back the message: {e}"),
            )
        })?;
        #[cfg(debug_assertions)]
        test_panic(&raw);
        let copy = self.copy_at.and_then(|at| {
            heading_copy_len(&raw[..at.min(raw.len())], &raw[at.min(raw.len())..]).map(|n| (at, n))
        });
        if let Some((at, _)) = copy {
            // The copy is the heading as the client sent it, with every byte that the
            // MTA trimmed or could not send: analyse that one.
            raw.drain(..at);
        }
        let (cfg, dir) = (&self.cfg, self.dir);
        let scopes = cfg.policy().scopes.select(dir, &self.envelope, &raw);
        let mut opts = intake::options_for(self.options.get(dir), self.not_given);
        let fix_signed = scopes.fix_signed(cfg.fixes().fix_signed);
        if opts.fix_signed != fix_signed {
            opts.to_mut().fix_signed = fix_signed;
        }
        let analysis = engine::check(&raw, &opts);
        let plan =
            cfg.planner()
                .plan_scoped(dir, &analysis, &raw, self.dry_run, self.received, &scopes);
        self.pool.give(raw);
        Ok((plan, analysis.findings, copy.is_some(), share))
    }
}

/// Debug builds only: with `MIMEREF_MILTER_TEST_PANIC=TOKEN` in the environment, the
/// analysis of a message that contains TOKEN panics. No input is known to make the
/// engine panic, so this is how the tests drive the real binary down its panic path
/// (tests/milter/milter_spill.rs). Release builds have no such hook.
#[cfg(debug_assertions)]
fn test_panic(raw: &[u8]) {
    static TOKEN: std::sync::OnceLock<Option<Vec<u8>>> = std::sync::OnceLock::new();
    let token = TOKEN.get_or_init(|| {
        std::env::var_os("MIMEREF_MILTER_TEST_PANIC")
            .map(|t| t.into_encoded_bytes())
            .filter(|t| !t.is_empty())
    });
    if let Some(t) = token {
        if memchr::memmem::find(raw, t).is_some() {
            panic!("MIMEREF_MILTER_TEST_PANIC found in the message");
        }
    }
}

/// The length of the copy of `heading` (the fields as received, CRLF, the empty line)
/// that `body` starts with, if it does: Stalwart sends the whole message, heading
/// included, as the body. Compared field by field, name exactly and value without the
/// white space around it (which Stalwart trims from the values it sends), so that only
/// a copy of this very heading matches; Stalwart sends a value that is not UTF-8 as
/// an empty one.
fn heading_copy_len(heading: &[u8], body: &[u8]) -> Option<usize> {
    let (mut ours, mut theirs) = (0, 0);
    let mut fields = 0;
    loop {
        match (
            next_field(heading, &mut ours)?,
            next_field(body, &mut theirs)?,
        ) {
            (Err(_), Err(end)) => return (fields > 0 && ours == heading.len()).then_some(end),
            (Ok(a), Ok(b)) if same_field(a, b) => fields += 1,
            _ => return None,
        }
    }
}

/// The field at `*at` without its line end (`Ok`), or the end of the heading: the
/// empty line, with where it ends (`Err`). None when `b` ends first.
fn next_field<'a>(b: &'a [u8], at: &mut usize) -> Option<Result<&'a [u8], usize>> {
    if b[*at..].starts_with(b"\r\n") {
        *at += 2;
        return Some(Err(*at));
    }
    let start = *at;
    loop {
        let nl = memchr::memchr(b'\n', &b[*at..])? + *at;
        *at = nl + 1;
        if !matches!(b.get(*at), Some(b' ' | b'\t')) {
            let end = if nl > start && b[nl - 1] == b'\r' {
                nl - 1
            } else {
                nl
            };
            return Some(Ok(&b[start..end]));
        }
    }
}

fn same_field(a: &[u8], b: &[u8]) -> bool {
    match (memchr::memchr(b':', a), memchr::memchr(b':', b)) {
        (Some(ca), Some(cb)) => {
            let (va, vb) = (a[ca + 1..].trim_ascii(), b[cb + 1..].trim_ascii());
            a[..ca] == b[..cb] && (va == vb || va.is_empty() && std::str::from_utf8(vb).is_err())
        }
        _ => false,
    }
}

/// What stands for the queue id when the MTA sent none (Postfix's word).
const NOQUEUE: &str = "NOQUEUE";

/// The MTA's queue id, or NOQUEUE when it sent none.
pub(super) fn queue_id(macros: &Macros) -> String {
    macros
        .get(c"i")
        .map(CStr::to_string_lossy)
        .filter(|q| !q.is_empty())
        .map_or_else(|| NOQUEUE.into(), Cow::into_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::milter::buffer::{FIRST_ALLOCATION, POOL_MAX};

    fn session(limit: usize) -> Session {
        spilling(limit, limit, std::env::temp_dir())
    }

    fn spilling(limit: usize, spill_at: usize, dir: std::path::PathBuf) -> Session {
        let mut cfg = Config::builtin();
        cfg.limits_mut().max_message_size = limit;
        cfg.limits_mut().max_header_size = limit;
        cfg.limits_mut().spill_threshold = spill_at;
        cfg.limits_mut().spill_directory = dir;
        let mut s = Session::new(Arc::new(cfg), Arc::default());
        // Tests run in parallel: each its own pool.
        s.pool = Arc::new(Pool::default());
        s
    }

    fn body(s: &mut Session, b: &[u8]) {
        s.body(Bytes::copy_from_slice(b));
    }

    /// What end of message hands the engine.
    fn buffered(s: &mut Session) -> Vec<u8> {
        let m = s.message.as_mut().unwrap();
        m.buf.take().read_back().unwrap()
    }

    #[test]
    fn reconstructs_headers_byte_exactly() {
        let mut s = session(1 << 20);
        s.mail();
        s.header(b"Subject", b" caf\xe9\n\tfolded");
        s.header(b"X", b"");
        s.eoh();
        body(&mut s, b"body\r\n");
        let m = s.message.as_ref().unwrap();
        assert!(!m.buf.incomplete);
        let octets = m.octets;
        let got = buffered(&mut s);
        assert_eq!(got, b"Subject: caf\xe9\n\tfolded\r\nX:\r\n\r\nbody\r\n");
        assert_eq!(octets, got.len() as u64);
    }

    #[test]
    fn stops_buffering_at_the_limit_and_keeps_counting() {
        let mut s = session(40);
        s.mail();
        s.header(b"Subject", b" short");
        s.eoh();
        body(&mut s, &[b'a'; 30]);
        body(&mut s, &[b'b'; 30]);
        let m = s.message.as_ref().unwrap();
        assert!(m.buf.incomplete);
        assert_eq!(m.buf.raw.len(), 40);
        assert_eq!(m.octets, 18 + 60);
    }

    fn feed(s: &mut Session) -> Vec<u8> {
        s.mail();
        s.header(b"Subject", b" a message that spills");
        s.eoh();
        for i in 0..50u8 {
            body(s, &[b'a' + i % 26; 1000]);
        }
        let mut want = b"Subject: a message that spills\r\n\r\n".to_vec();
        for i in 0..50u8 {
            want.extend_from_slice(&[b'a' + i % 26; 1000]);
        }
        want
    }

    #[test]
    fn large_messages_spill_to_a_file_and_read_back_byte_exactly() {
        let mut s = spilling(1 << 20, 10_000, std::env::temp_dir());
        let want = feed(&mut s);
        let m = s.message.as_mut().unwrap();
        assert!(
            m.buf.spill.is_some(),
            "over spill_at the bytes go to a file"
        );
        assert!(
            m.buf.raw.is_empty() && m.buf.raw.capacity() == 0 && m.buf.chunks.is_empty(),
            "and leave memory"
        );
        assert_eq!((m.buf.len, m.buf.incomplete), (want.len(), false));
        assert_eq!(buffered(&mut s), want);
    }

    #[test]
    fn spilled_messages_still_stop_at_the_size_limit() {
        let mut s = spilling(20_000, 10_000, std::env::temp_dir());
        let want = feed(&mut s);
        let m = s.message.as_mut().unwrap();
        assert!(m.buf.incomplete);
        assert_eq!(m.buf.len, 20_000);
        assert_eq!(m.octets, want.len() as u64);
        assert_eq!(buffered(&mut s), want[..20_000]);
    }

    #[test]
    fn a_spill_directory_that_fails_keeps_the_message_in_memory() {
        let mut s = spilling(1 << 20, 10_000, "/nonexistent/mimeref-milter-test".into());
        let want = feed(&mut s);
        let m = s.message.as_ref().unwrap();
        assert!(m.buf.spill.is_none() && m.buf.spill_failed);
        assert!(!m.buf.incomplete && m.buf.lost.is_none());
        assert_eq!(s.budget.held(), want.len(), "held within memory_budget");
        assert_eq!(buffered(&mut s), want);
        assert_eq!(s.budget.held(), 0, "and given back once analysed");
    }

    #[test]
    fn small_messages_stay_in_memory() {
        let mut s = session(1 << 20);
        let want = feed(&mut s);
        assert!(s.message.as_ref().unwrap().buf.spill.is_none());
        assert_eq!(buffered(&mut s), want);
    }

    #[test]
    fn past_the_first_allocation_a_message_continues_in_a_buffer_of_the_pools_size() {
        let mut s = session(1 << 20);
        s.mail();
        s.header(b"Subject", b" big");
        s.eoh();
        s.body(Bytes::from(vec![b'x'; 10_000]));
        s.body(Bytes::from(vec![b'y'; 10_000]));
        body(&mut s, b"tail");
        let m = s.message.as_ref().unwrap();
        assert!(m.buf.chunks.is_empty(), "no chunk held apart to be joined");
        assert!(m.buf.raw.capacity() >= POOL_MAX.min(1 << 20));
        let got = buffered(&mut s);
        let mut want = b"Subject: big\r\n\r\n".to_vec();
        want.extend_from_slice(&[b'x'; 10_000]);
        want.extend_from_slice(&[b'y'; 10_000]);
        want.extend_from_slice(b"tail");
        assert_eq!(got, want);
    }

    #[test]
    fn a_large_message_stops_at_the_size_limit() {
        let mut s = session(30_000);
        let want = feed(&mut s);
        let m = s.message.as_ref().unwrap();
        assert!(m.buf.incomplete);
        assert_eq!((m.buf.len, m.octets), (30_000, want.len() as u64));
        assert_eq!(buffered(&mut s), want[..30_000]);
    }

    #[test]
    fn a_large_message_goes_to_the_spill_file_in_order() {
        let mut s = spilling(1 << 20, 30_000, std::env::temp_dir());
        s.mail();
        s.header(b"Subject", b" a message that spills");
        s.eoh();
        for i in 0..25u8 {
            body(&mut s, &[b'a' + i; 1000]);
        }
        let m = s.message.as_ref().unwrap();
        assert!(m.buf.spill.is_none());
        let want = {
            let mut w = b"Subject: a message that spills\r\n\r\n".to_vec();
            for i in 0..50u8 {
                w.extend_from_slice(&[b'a' + i % 26; 1000]);
            }
            w
        };
        for i in 25..50u8 {
            body(&mut s, &[b'a' + i % 26; 1000]);
        }
        let m = s.message.as_ref().unwrap();
        assert!(m.buf.spill.is_some() && m.buf.chunks.is_empty() && m.buf.raw.capacity() == 0);
        assert_eq!(buffered(&mut s), want);
    }

    /// A session whose pool holds one buffer of the largest pooled size, and where
    /// that buffer is.
    fn session_with_pooled_buffer() -> (Session, *const u8) {
        let s = session(1 << 20);
        let pooled = Vec::with_capacity(POOL_MAX);
        let p = pooled.as_ptr();
        s.pool.give(pooled);
        (s, p)
    }

    #[test]
    fn a_large_message_continues_in_a_pooled_buffer() {
        let (mut s, p) = session_with_pooled_buffer();
        let want = feed(&mut s);
        let m = s.message.as_ref().unwrap();
        assert_eq!(m.buf.raw.as_ptr(), p, "past the first allocation");
        assert!(
            m.buf.chunks.is_empty(),
            "every chunk copied once, none held"
        );
        assert_eq!(m.buf.raw, want);
        s.abort();
        let back = s.pool.take(1).unwrap();
        assert_eq!((back.as_ptr(), back.len()), (p, 0), "and back when done");
    }

    /// What the connection does with a lent buffer (indymilter's `read_into`): a
    /// chunk that fits its spare capacity is appended, else it comes on its own.
    fn body_lent(s: &mut Session, b: &[u8]) {
        match s.lend_body() {
            Some(mut v) if v.capacity() - v.len() >= b.len() => {
                v.extend_from_slice(b);
                s.body_in_buffer(v, b.len());
            }
            Some(v) => {
                s.reclaim_body(v);
                body(s, b);
            }
            None => body(s, b),
        }
    }

    fn feed_lent(s: &mut Session, chunks: usize) -> Vec<u8> {
        s.mail();
        s.header(b"Subject", b" a message read into its buffer");
        s.eoh();
        let mut want = b"Subject: a message read into its buffer\r\n\r\n".to_vec();
        for i in 0..chunks {
            let c = [b'a' + (i % 26) as u8; 1000];
            body_lent(s, &c);
            want.extend_from_slice(&c);
        }
        want
    }

    #[test]
    fn chunks_read_into_the_lent_buffer_stay_where_they_are() {
        let (mut s, p) = session_with_pooled_buffer();
        let want = feed_lent(&mut s, 50);
        let m = s.message.as_ref().unwrap();
        assert!(!m.buf.is_lent() && m.buf.chunks.is_empty());
        assert_eq!(m.buf.raw.as_ptr(), p, "the pooled buffer, never moved");
        assert_eq!((m.octets, m.buf.len), (want.len() as u64, want.len()));
        assert_eq!(s.budget.held(), want.len(), "every octet counted");
        assert_eq!(buffered(&mut s), want);
    }

    #[test]
    fn a_lent_buffer_past_the_spill_threshold_spills_in_order() {
        let mut s = spilling(1 << 20, 30_000, std::env::temp_dir());
        s.pool.give(Vec::with_capacity(POOL_MAX));
        let want = feed_lent(&mut s, 50);
        let m = s.message.as_ref().unwrap();
        assert!(m.buf.spill.is_some() && m.buf.raw.capacity() == 0);
        assert_eq!(buffered(&mut s), want);
    }

    #[test]
    fn a_lent_buffer_stops_at_the_size_limit() {
        let mut s = session(30_500);
        s.pool.give(Vec::with_capacity(POOL_MAX));
        let want = feed_lent(&mut s, 50);
        let m = s.message.as_ref().unwrap();
        assert!(m.buf.incomplete);
        assert_eq!(m.octets, want.len() as u64, "every octet counted");
        let kept = m.buf.len;
        assert!(kept <= 30_500 && kept > 29_000, "{kept}");
        assert_eq!(buffered(&mut s), want[..kept]);
    }

    #[test]
    fn a_lent_buffer_over_the_budget_loses_the_message() {
        let mut s = session(1 << 20);
        let mut cfg = (*s.config).clone();
        cfg.limits_mut().memory_budget = 20_000;
        // Spilled octets count as memory too: nowhere to go but lost.
        cfg.limits_mut().spill_in_memory = true;
        s.config = Arc::new(cfg);
        s.pool.give(Vec::with_capacity(POOL_MAX));
        feed_lent(&mut s, 50);
        let m = s.message.as_ref().unwrap();
        assert!(matches!(
            m.buf.lost,
            Some(crate::milter::buffer::Lost::OverBudget { .. })
        ));
        assert_eq!(s.budget.held(), 0);
    }

    #[test]
    fn a_lent_buffer_comes_back_without_octets_not_delivered() {
        let mut s = session(1 << 20);
        s.mail();
        s.header(b"X", b" y");
        s.eoh();
        let mut v = s.lend_body().expect("room in the first allocation");
        v.extend_from_slice(b"never delivered");
        s.reclaim_body(v);
        body_lent(&mut s, b"body\r\n");
        assert_eq!(buffered(&mut s), b"X: y\r\n\r\nbody\r\n");
    }

    #[test]
    fn a_pooled_buffer_too_small_for_the_message_is_left_for_later() {
        let mut s = session(1 << 20);
        s.pool.give(Vec::with_capacity(INLINE_MAX + 1));
        s.mail();
        s.header(b"X", b" y");
        s.eoh();
        let first = FIRST_ALLOCATION - 8;
        body(&mut s, &vec![b'a'; first]);
        body(&mut s, &vec![b'b'; INLINE_MAX]);
        let m = s.message.as_ref().unwrap();
        assert!(
            m.buf.raw.capacity() >= POOL_MAX.min(1 << 20) && m.buf.chunks.is_empty(),
            "a new buffer of the pool's size instead"
        );
        assert_eq!(s.pool.take(1).map(|v| v.capacity()), Some(INLINE_MAX + 1));
        s.pool.give(Vec::with_capacity(INLINE_MAX + 1));
        let mut want = b"X: y\r\n\r\n".to_vec();
        want.extend_from_slice(&vec![b'a'; first]);
        want.extend_from_slice(&vec![b'b'; INLINE_MAX]);
        assert_eq!(buffered(&mut s), want);
    }

    /// The daemon and the offline commands (`intake::as_received` on the message file)
    /// keep the same octets and decide "incomplete" alike, whichever limit stops them.
    #[test]
    fn the_session_keeps_what_the_offline_commands_analyse() {
        let fields: &[(&[u8], &[u8])] = &[
            (b"From", b" a@example.org"),
            (b"Subject", b" one\n two"),
            (b"X-Pad", b" 0123456789012345678901234567890123456789"),
        ];
        let body = b"line one\r\nline two\r\nline three\r\n";
        // The file: folds as CRLF, which the MTA sends as LF.
        let mut file = Vec::new();
        for (n, v) in fields {
            file.extend_from_slice(n);
            file.push(b':');
            file.extend_from_slice(&v.iter().fold(Vec::new(), |mut o, &b| {
                if b == b'\n' {
                    o.push(b'\r');
                }
                o.push(b);
                o
            }));
            file.extend_from_slice(b"\r\n");
        }
        file.extend_from_slice(b"\r\n");
        file.extend_from_slice(body);
        let wire = file.len() - 1;
        for (max_msg, max_hdr) in [
            (1 << 20, 1 << 20),
            (wire, wire),
            (wire - 1, wire - 1),
            (wire - body.len() - 2, 1 << 10),
            (wire - body.len() - 1, 1 << 10),
            (wire - 5, 1 << 10),
            (1 << 20, wire - body.len() - 2),
            (1 << 20, wire - body.len() - 3),
            (1 << 20, 20),
        ] {
            let mut cfg = Config::builtin();
            cfg.limits_mut().max_message_size = max_msg;
            cfg.limits_mut().max_header_size = max_hdr;
            let mut s = Session::new(Arc::new(cfg.clone()), Arc::default());
            s.pool = Arc::new(Pool::default());
            s.mail();
            for (n, v) in fields {
                s.header(n, v);
            }
            s.eoh();
            for chunk in body.chunks(7) {
                s.body(Bytes::copy_from_slice(chunk));
            }
            let m = s.message.as_ref().unwrap();
            let (incomplete, not_given) = (m.buf.incomplete, m.octets - m.buf.len as u64);
            let kept = buffered(&mut s);
            let g = cfg.as_received(&file);
            let case = format!("max_message_size {max_msg}, max_header_size {max_hdr}");
            assert_eq!(g.incomplete, incomplete, "{case}");
            // The one fold is a CR longer in the file.
            let fold_cr = usize::from(g.bytes.len() > 40);
            assert_eq!(g.bytes.len(), kept.len() + fold_cr, "{case}");
            // Counted in the file's octets: the fold's CR, when not kept, is one more.
            assert_eq!(
                g.octets_not_given as usize,
                not_given as usize + (1 - fold_cr) * usize::from(incomplete),
                "{case}"
            );
        }
    }

    const WITHOUT: ValueForm = ValueForm {
        leading_space: false,
        crlf_folds: false,
    };

    #[test]
    fn without_leading_space_the_dropped_space_goes_back_in_and_out() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"v", b" v"),
            (b" two", b"  two"),
            (b"\ttab", b"\ttab"),
            (b"\n folded", b"\n folded"),
            (b"", b""),
        ];
        for (sent, kept) in cases {
            assert_eq!(&*WITHOUT.received(sent), *kept);
        }
        assert_eq!(&*WITHOUT.sent(b" a;\n b=1"), b"a;\n b=1");
        assert_eq!(&*WITHOUT.sent(b"\tx"), b"\tx");
        let crlf = ValueForm {
            crlf_folds: true,
            ..WITHOUT
        };
        assert_eq!(&*crlf.sent(b" a;\n b=1\r\n c"), b"a;\r\n b=1\r\n c");
        let with = ValueForm {
            leading_space: true,
            crlf_folds: false,
        };
        assert_eq!(&*with.received(b"v"), b"v");
        assert_eq!(&*with.sent(b" a\n b"), b" a\n b");
    }

    #[test]
    fn a_body_that_repeats_the_heading_is_found() {
        let heading = b"From: a@example.org\r\nSubject: one\r\n two\r\n\r\n";
        let copy = b"From:   a@example.org\r\nSubject:\tone\r\n two \r\n\r\n";
        let mut body = copy.to_vec();
        body.extend_from_slice(b"hello\r\n");
        assert_eq!(heading_copy_len(heading, &body), Some(copy.len()));
        // A value that is not UTF-8 reaches the milter empty.
        let copy = b"From: a@example.org\r\nSubject: caf\xe9\r\n\r\n";
        assert_eq!(
            heading_copy_len(b"From: a@example.org\r\nSubject:\r\n\r\n", copy),
            Some(copy.len())
        );
        // Another value, another name, one field fewer, no empty line: no copy.
        for other in [
            &b"From: b@example.org\r\nSubject: one\r\n two\r\n\r\n"[..],
            b"Frum: a@example.org\r\nSubject: one\r\n two\r\n\r\n",
            b"From: a@example.org\r\n\r\n",
            b"From: a@example.org\r\nSubject: one\r\n two\r\n",
            b"hello\r\n",
            b"From: a@example.org\r\nSubject: caf\xe9\r\n two\r\n\r\n",
        ] {
            assert_eq!(heading_copy_len(heading, other), None, "{other:?}");
        }
    }

    /// A panic in a stage ends the transaction, not the session: nothing more of that
    /// message is kept, and the next transaction starts clean.
    #[test]
    fn a_panic_in_a_stage_fails_the_transaction_only() {
        let mut s = session(1 << 20);
        s.guarded(Session::mail);
        s.guarded(|s| s.header(b"Subject", b" one"));
        s.guarded(|_| panic!("in a stage"));
        assert!(s.message.is_none(), "what was kept is dropped");
        let f = s.broken.clone().expect("the transaction is failed");
        assert_eq!(f.cause, Cause::Panic);
        assert!(f.detail.contains("in a stage"), "{f:?}");
        s.guarded(|s| s.body(Bytes::from_static(b"more")));
        s.guarded(Session::eoh);
        assert!(s.message.is_none(), "the rest is not kept");
        s.guarded(Session::mail);
        assert!(s.broken.is_none());
        s.guarded(|s| s.header(b"Subject", b" two"));
        s.guarded(Session::eoh);
        assert_eq!(buffered(&mut s), b"Subject: two\r\n\r\n");
    }

    #[test]
    fn in_flight_counts_transactions() {
        let counter = Arc::new(InFlightCount::default());
        let mut s = Session::new(Arc::new(Config::builtin()), counter.clone());
        s.mail();
        assert_eq!(counter.get(), 1);
        s.abort();
        assert_eq!(counter.get(), 0);
        s.mail();
        drop(s);
        assert_eq!(counter.get(), 0);
    }
}
