//! One MTA connection: a plain state machine that accumulates the message within the
//! configured limits and, at end of message, analyses it and hands the plan to
//! `actions`. No socket in here, so it can be driven directly.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use indymilter::{ContextActions, SetErrorReply, Status};
use tracing::{debug, info, warn};

use super::actions::{self, Plan, Received};
use crate::config::Config;
use crate::engine;

/// Counts messages between MAIL and end of message, so that shutdown can wait for them.
#[derive(Debug)]
pub struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    pub fn enter(counter: &Arc<AtomicUsize>) -> InFlight {
        counter.fetch_add(1, Ordering::SeqCst);
        InFlight(counter.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The message being received.
#[derive(Debug)]
struct Message {
    /// Header fields as received (`name:value CRLF`, the value with its leading space and
    /// embedded line breaks as the MTA sent them), the empty line, then the body.
    raw: Vec<u8>,
    header_octets: usize,
    /// Every octet the MTA sent, buffered or not.
    octets: u64,
    /// Buffering stopped at a limit; later octets were only counted.
    incomplete: bool,
    started: Instant,
    _in_flight: InFlight,
}

/// Per-connection state, with the configuration snapshot taken when the MTA connected.
#[derive(Debug)]
pub struct Session {
    pub config: Arc<Config>,
    pub client_addr: Option<IpAddr>,
    in_flight: Arc<AtomicUsize>,
    message: Option<Message>,
}

/// What end of message did, for the caller's log and metrics.
#[derive(Debug)]
pub struct Outcome {
    pub queue_id: String,
    pub plan: Plan,
    pub findings: Vec<engine::Finding>,
    pub octets: u64,
    pub millis: u128,
    pub status: Status,
}

impl Session {
    pub fn new(config: Arc<Config>, in_flight: Arc<AtomicUsize>) -> Session {
        Session {
            config,
            client_addr: None,
            in_flight,
            message: None,
        }
    }

    pub fn connect(&mut self, addr: Option<IpAddr>) {
        self.client_addr = addr;
    }

    /// MAIL FROM: a new transaction begins (a previous one without end is dropped).
    pub fn mail(&mut self) {
        self.message = Some(Message {
            raw: Vec::new(),
            header_octets: 0,
            octets: 0,
            incomplete: false,
            started: Instant::now(),
            _in_flight: InFlight::enter(&self.in_flight),
        });
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
        let max_msg = self.config.limits.max_message_size;
        let max_hdr = self.config.max_header_size;
        let m = self.message();
        let len = name.len() + 1 + value.len() + 2;
        m.octets += len as u64;
        if m.incomplete {
            return;
        }
        if m.header_octets + len > max_hdr || m.raw.len() + len > max_msg {
            // A field is never cut in half: the heading stays a valid prefix, so the
            // indices of the fields before the cut are still right.
            m.incomplete = true;
            return;
        }
        m.header_octets += len;
        m.raw.extend_from_slice(name);
        m.raw.push(b':');
        m.raw.extend_from_slice(value);
        m.raw.extend_from_slice(b"\r\n");
    }

    pub fn eoh(&mut self) {
        let m = self.message();
        m.octets += 2;
        if !m.incomplete {
            m.raw.extend_from_slice(b"\r\n");
        }
    }

    pub fn body(&mut self, chunk: &[u8]) {
        let max_msg = self.config.limits.max_message_size;
        let m = self.message();
        m.octets += chunk.len() as u64;
        if m.incomplete {
            return;
        }
        let room = max_msg.saturating_sub(m.raw.len());
        if chunk.len() > room {
            m.raw.extend_from_slice(&chunk[..room]);
            m.incomplete = true;
        } else {
            m.raw.extend_from_slice(chunk);
        }
    }

    pub fn abort(&mut self) {
        self.message = None;
    }

    /// Analyses the message and sends the actions. Errors of the MTA connection come back
    /// as `Err`; the caller logs them and tempfails.
    pub async fn eom(
        &mut self,
        macros: &BTreeMap<String, String>,
        actions: &impl ContextActions,
        reply: &mut impl SetErrorReply,
    ) -> Result<Outcome, String> {
        let m = match self.message.take() {
            Some(m) => m,
            None => {
                return Err("end of message without a message".into());
            }
        };
        let cfg = self.config.clone();
        let queue_id = macros
            .get("i")
            .or_else(|| macros.get("{i}"))
            .filter(|q| !q.is_empty())
            .cloned()
            .unwrap_or_else(|| "NOQUEUE".into());
        let dir = cfg.direction(macros, self.client_addr);
        debug!(
            "{queue_id}: direction {dir} (auth={}, client={:?}, daemon={})",
            macros
                .get("{auth_authen}")
                .or_else(|| macros.get("{auth_type}"))
                .map_or("-", |s| s.as_str()),
            self.client_addr,
            macros.get("{daemon_name}").map_or("-", |s| s.as_str()),
        );
        let mut opts = cfg.engine_options(dir);
        let octets = m.octets;
        let incomplete = m.incomplete;
        if incomplete {
            opts.octets_not_given = octets.saturating_sub(m.raw.len() as u64).max(1);
        }
        let started = m.started;
        let raw = m.raw;
        let dry_run = cfg.dry_run;
        let cfg2 = cfg.clone();
        // Analysis is CPU work on up to max_message_size octets: keep it off the
        // reactor. A panic in there becomes an error, never a lost connection.
        let (plan, findings) = tokio::task::spawn_blocking(move || {
            let analysis = engine::check(&raw, &opts);
            let plan = actions::plan_received(
                &cfg2,
                dir,
                &analysis,
                &raw,
                dry_run,
                Received { incomplete },
            );
            (plan, analysis.findings)
        })
        .await
        .map_err(|e| format!("analysis failed: {e}"))?;
        for n in &plan.notes {
            warn!("{queue_id}: {n}");
        }
        // Every changed reference on a line of its own (URLs display-safe, cut short).
        let dry = if plan.dry_run {
            " (dry run: not sent)"
        } else {
            ""
        };
        for (part, c) in &plan.changes {
            info!(
                "{queue_id}: changed {}{dry}",
                actions::change_text(part, c, engine::rewrite::DISPLAY_MAX)
            );
        }
        for f in &findings {
            debug!(
                "{queue_id}: {} {} {}: {}",
                f.part, f.rule, f.severity, f.message
            );
        }
        let status = actions::execute(&plan, actions, reply)
            .await
            .map_err(|e| format!("sending actions: {e}"))?;
        let millis = started.elapsed().as_millis();
        let outcome = Outcome {
            queue_id,
            plan,
            findings,
            octets,
            millis,
            status,
        };
        log_outcome(&outcome);
        super::metrics::record(&outcome);
        Ok(outcome)
    }
}

/// The one info line per message, starting with the queue id so that it greps beside the
/// MTA's own log.
fn log_outcome(o: &Outcome) {
    let p = &o.plan;
    let rules = if p.rules.is_empty() {
        "-".to_string()
    } else {
        p.rules.iter().map(|r| r.id()).collect::<Vec<_>>().join(",")
    };
    let body = if p.body.is_some() { "yes" } else { "no" };
    let dry = if p.dry_run { " dry-run" } else { "" };
    let over = if p.oversize { " oversize" } else { "" };
    info!(
        "{}: direction={} verdict={}{dry}{over} rules={rules} edits={} body_replaced={body} size={} ms={}",
        o.queue_id,
        p.direction,
        p.verdict,
        p.edits(),
        o.octets,
        o.millis
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(limit: usize) -> Session {
        let mut cfg = Config::builtin();
        cfg.limits.max_message_size = limit;
        cfg.max_header_size = limit;
        Session::new(Arc::new(cfg), Arc::new(AtomicUsize::new(0)))
    }

    #[test]
    fn reconstructs_headers_byte_exactly() {
        let mut s = session(1 << 20);
        s.mail();
        s.header(b"Subject", b" caf\xe9\n\tfolded");
        s.header(b"X", b"");
        s.eoh();
        s.body(b"body\r\n");
        let m = s.message.as_ref().unwrap();
        assert_eq!(m.raw, b"Subject: caf\xe9\n\tfolded\r\nX:\r\n\r\nbody\r\n");
        assert!(!m.incomplete);
        assert_eq!(m.octets, m.raw.len() as u64);
    }

    #[test]
    fn stops_buffering_at_the_limit_and_keeps_counting() {
        let mut s = session(40);
        s.mail();
        s.header(b"Subject", b" short");
        s.eoh();
        s.body(&[b'a'; 30]);
        s.body(&[b'b'; 30]);
        let m = s.message.as_ref().unwrap();
        assert!(m.incomplete);
        assert_eq!(m.raw.len(), 40);
        assert_eq!(m.octets, 18 + 60);
    }

    #[test]
    fn in_flight_counts_transactions() {
        let counter = Arc::new(AtomicUsize::new(0));
        let mut s = Session::new(Arc::new(Config::builtin()), counter.clone());
        s.mail();
        assert_eq!(counter.load(Ordering::SeqCst), 1);
        s.abort();
        assert_eq!(counter.load(Ordering::SeqCst), 0);
        s.mail();
        drop(s);
        assert_eq!(counter.load(Ordering::SeqCst), 0);
    }
}
