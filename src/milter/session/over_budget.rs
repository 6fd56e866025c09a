//! A message `[limits] memory_budget` has no room for, its spill failed or not: ended
//! with a tempfail (451 4.3.1, the MTA keeps it and tries again later), at the first
//! stage that replies or at end of message, never analysed unfinished nor accepted.
//! Where the spill fails and the budget is counted: `milter/buffer.rs`.

use indymilter::SetErrorReply;

use super::{Message, Session};
use crate::config::Config;
use crate::milter::buffer::Lost;
use crate::milter::outcome::{Cause, Ended, EomError};

impl Session {
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

    /// A message kept in memory after its spill failed, past `[limits] memory_budget`:
    /// tempfailed (the MTA keeps it and tries again later), not analysed.
    pub(super) fn over_budget(
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
    pub(super) fn tempfail_over_budget(
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
}
