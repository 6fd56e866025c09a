//! Log lines about events that can repeat thousands of times a second (refused
//! connections, bad negotiations, non-milter peers, accept errors, spill failures,
//! internal errors, time limits that pass, transactions cut short): the first one is written at once, the ones that follow within a
//! second are counted and written as one line with their exact count, at the next
//! event after that second or at the latest by [`flush_all`], which the daemon calls
//! every second and at shutdown. So a flood costs about one line a second per kind, and
//! the counts in the lines add up to the event's metric, which the caller increments
//! beside every [`Throttled::hit`].
//!
//! The kinds are the statics below; each is one line shape, named after what happened.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::{error, warn, Level};

/// At most one line per kind in this time.
const EVERY: Duration = Duration::from_secs(1);

/// One kind of repeated event: how its line reads and what is still to be written.
pub struct Throttled {
    level: Level,
    /// The line for `n` events, described by `detail`: the first of them, the one that
    /// opened the batch (building a detail for every event of a flood would cost more
    /// than the event).
    line: fn(n: u64, detail: &str) -> String,
    state: Mutex<Pending>,
}

struct Pending {
    count: u64,
    detail: String,
    written_at: Option<Instant>,
}

impl Throttled {
    pub const fn new(level: Level, line: fn(u64, &str) -> String) -> Throttled {
        Throttled {
            level,
            line,
            state: Mutex::new(Pending {
                count: 0,
                detail: String::new(),
                written_at: None,
            }),
        }
    }

    /// One event; `detail` (the peer, the error) describes it and is only built when a
    /// line may be written soon.
    pub fn hit(&self, detail: impl FnOnce() -> String) {
        let mut p = self.state.lock().unwrap_or_else(|e| e.into_inner());
        p.count += 1;
        let now = Instant::now();
        let due = p.written_at.is_none_or(|t| now.duration_since(t) >= EVERY);
        if due || p.count == 1 {
            p.detail = detail();
        }
        if due {
            self.write(&mut p, now);
        }
    }

    /// Writes what is pending, if anything.
    pub fn flush(&self) {
        let mut p = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if p.count > 0 {
            self.write(&mut p, Instant::now());
        }
    }

    fn write(&self, p: &mut Pending, now: Instant) {
        let text = (self.line)(std::mem::take(&mut p.count), &p.detail);
        if self.level == Level::ERROR {
            error!("{text}");
        } else {
            warn!("{text}");
        }
        p.written_at = Some(now);
    }
}

/// Connections refused at `max_connections`; detail: "N open, max_connections = M".
pub static CONNECTIONS_REFUSED: Throttled = Throttled::new(Level::WARN, |n, d| {
    format!("refused {n} milter connection(s): {d}; the MTA applies its default action")
});

/// Milter negotiations refused (the MTA lacks an action the configuration needs);
/// detail: the MTA's address and what to change there.
pub static NEGOTIATION_REFUSED: Throttled = Throttled::new(Level::ERROR, |n, d| {
    format!("refused {n} milter negotiation(s): {d}; the MTA applies its default action")
});

/// A failed accept on the milter socket or the metrics endpoint; detail: which socket,
/// the error, what it means and what to change.
pub static ACCEPT_ERRORS: Throttled = Throttled::new(Level::ERROR, |n, d| {
    format!("accept failed {n} time(s): {d}")
});

/// Connections to the milter socket closed because their first octets are no milter
/// negotiation; detail: "PEER: what it looked like (first octets HEX)".
pub static NON_MILTER_PEERS: Throttled = Throttled::new(Level::WARN, |n, d| {
    format!(
        "closed {n} connection(s) whose peer does not speak milter: {d}; \
         only the MTA should connect to the milter socket"
    )
});

/// HTTP connections closed at once at `metrics_max_connections`; detail: the peer and
/// the limit.
pub static HTTP_REFUSED: Throttled = Throttled::new(Level::WARN, |n, d| {
    format!("refused {n} HTTP connection(s) to the metrics endpoint: {d}")
});

/// Spills that failed (a full or failing `spill_directory`); detail: "STAGE in DIR:
/// ERROR".
pub static SPILL_FAILED: Throttled = Throttled::new(Level::WARN, |n, d| {
    format!(
        "could not spill {n} message(s) to disk: {d}; kept in memory within [limits] \
         memory_budget, tempfailed beyond it"
    )
});

/// Messages tempfailed because their spill failed and `memory_budget` had no room;
/// detail: the queue id and the octets.
pub static SPILL_TEMPFAILED: Throttled = Throttled::new(Level::WARN, |n, d| {
    format!("tempfailed {n} message(s) whose spill failed: {d}")
});

/// Messages tempfailed because `memory_budget` had no room for them (their spill did
/// not fail: the budget was full, or spilled octets count as memory), or for their
/// replaced body; detail: the queue id and the octets.
pub static MEMORY_TEMPFAILED: Throttled = Throttled::new(Level::WARN, |n, d| {
    format!(
        "tempfailed {n} message(s) for want of memory: {d}; lower max_connections or \
         put spill_directory on disk, or raise memory_budget if the host has the memory"
    )
});

/// Internal errors at end of message; detail: the queue id, the cause, the error and
/// what the message got.
pub static INTERNAL_ERROR: Throttled = Throttled::new(Level::ERROR, |n, d| {
    format!("internal error at end of {n} message(s): {d}")
});

/// Notifications to systemd that could not be sent (src/daemon/notify.rs); detail:
/// what failed, the socket and the error.
pub static NOTIFY_FAILED: Throttled = Throttled::new(Level::WARN, |n, d| {
    format!(
        "could not notify systemd {n} time(s): {d}; a Type=notify unit may time out \
         starting or be restarted by its watchdog"
    )
});

/// Connections closed because no complete command came within `connection_timeout`;
/// detail: the connection, the MTA, whether a transaction was open, the limit.
pub static READ_TIMEOUT: Throttled = Throttled::new(Level::WARN, |n, d| {
    format!(
        "closed {n} milter connection(s) that sent no complete command within \
         connection_timeout: {d}; the MTA applies its milter_default_action"
    )
});

/// Transactions cut at `transaction_timeout`; detail: the connection, the MTA, the
/// queue id, the limit.
pub static TRANSACTION_TIMEOUT: Throttled = Throttled::new(Level::WARN, |n, d| {
    format!(
        "cut {n} mail transaction(s) not over within transaction_timeout: {d}; \
         the MTA applies its milter_default_action"
    )
});

/// Connections closed because the MTA did not read an answer within `reply_timeout`;
/// detail: the connection, the MTA, the queue id, the limit.
pub static REPLY_TIMEOUT: Throttled = Throttled::new(Level::WARN, |n, d| {
    format!(
        "closed {n} milter connection(s) whose MTA did not read the answer within \
         reply_timeout: {d}; the MTA applies its milter_default_action"
    )
});

/// Transactions cut short by the end of their connection for another reason (the MTA
/// closed it, an I/O or protocol error, shutdown); detail: the connection, the MTA, the
/// queue id, the reason.
pub static TRANSACTION_CUT: Throttled = Throttled::new(Level::WARN, |n, d| {
    format!("{n} mail transaction(s) ended before end of message: {d}")
});

/// Every kind, for [`flush_all`].
static ALL: &[&Throttled] = &[
    &CONNECTIONS_REFUSED,
    &ACCEPT_ERRORS,
    &NON_MILTER_PEERS,
    &HTTP_REFUSED,
    &NEGOTIATION_REFUSED,
    &SPILL_FAILED,
    &SPILL_TEMPFAILED,
    &INTERNAL_ERROR,
    &NOTIFY_FAILED,
    &READ_TIMEOUT,
    &TRANSACTION_TIMEOUT,
    &REPLY_TIMEOUT,
    &TRANSACTION_CUT,
];

/// Writes every pending count: every second and at shutdown.
pub fn flush_all() {
    for t in ALL {
        t.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

    #[test]
    fn a_flood_gives_one_line_now_and_the_exact_rest_on_flush() {
        let t = Throttled::new(Level::WARN, |n, d| {
            LINES.lock().unwrap().push(format!("{n} {d}"));
            String::new()
        });
        for i in 0..160 {
            t.hit(|| format!("peer{i}"));
        }
        assert_eq!(*LINES.lock().unwrap(), ["1 peer0"]);
        t.flush();
        t.flush();
        assert_eq!(*LINES.lock().unwrap(), ["1 peer0", "159 peer1"]);
        let total: u64 = LINES
            .lock()
            .unwrap()
            .iter()
            .map(|l| l.split(' ').next().unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(total, 160, "the lines add up to every event");
    }
}
