//! End of message: the message read back, analysed and planned (on the connection's
//! task, or with the reactor handed on for a large one), and the plan sent, or the
//! tempfail of a message the memory budget has no room for.

use std::borrow::Cow;
use std::ffi::CStr;
use std::sync::Arc;
use std::time::Instant;

use indymilter::{ContextActions, Macros, SetErrorReply};
use tracing::debug;

use super::heading_copy::heading_copy_len;
use super::{queue_id, Message, Session, INLINE_MAX};
use crate::config::Config;
use crate::engine;
use crate::milter::actions;
use crate::milter::buffer::{self, Pool};
use crate::milter::outcome::{panic_text, Cause, Ended, EomError, Outcome};
use crate::milter::EngineOptions;
use crate::policy::intake;
use crate::policy::plan::{Plan, Received};
use crate::policy::scope::Envelope;

impl Session {
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
        let client = self.client(macros);
        let (dir, direction_reason) = cfg.directions().decide_with(lookup, client);
        debug!(
            "{queue_id}: direction {dir} (auth={}, client={}, daemon={})",
            lookup(c"{auth_authen}")
                .or_else(|| lookup(c"{auth_type}"))
                .unwrap_or(Cow::Borrowed("-")),
            client.map_or(Cow::Borrowed("-"), |a| Cow::Owned(a.to_string())),
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
            client,
            direction_reason,
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

    /// The client's address: from connect, else from `{client_addr}` (an MTA that
    /// connects with an unknown family may still send the macro).
    fn client(&self, macros: &Macros) -> Option<std::net::IpAddr> {
        self.client_addr.or_else(|| {
            macros
                .get(c"{client_addr}")
                .and_then(|a| crate::policy::direction::parse_ip(&a.to_string_lossy()))
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
            client_addr: self.client(macros),
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
        let options = self.options.clone();
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
