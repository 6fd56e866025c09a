//! Prometheus metrics through the `metrics` facade: without an installed recorder (no
//! `metrics_listen`) every call here is a no-op.

use std::sync::{Mutex, OnceLock};

use metrics::{counter, histogram, Counter, Gauge, Histogram};
use metrics_exporter_prometheus::{BuildError, PrometheusHandle};

use super::outcome::{Cause, Outcome};
use crate::engine::{Lift, Withheld};
use crate::policy::Action;

/// Why the Prometheus recorder could not be installed.
#[derive(Debug)]
pub enum RecorderError {
    /// The exporter refused its settings or the recorder (one is installed already).
    Build(BuildError),
    /// The thread that drains histogram samples could not start.
    Upkeep(std::io::Error),
}

impl std::fmt::Display for RecorderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecorderError::Build(e) => write!(f, "{e}"),
            RecorderError::Upkeep(e) => write!(f, "metrics upkeep thread: {e}"),
        }
    }
}

impl std::error::Error for RecorderError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RecorderError::Build(e) => Some(e),
            RecorderError::Upkeep(e) => Some(e),
        }
    }
}

/// Installs the Prometheus recorder (once per process; later calls return the same
/// handle) and its upkeep thread. The handle renders what `/metrics` serves
/// (src/daemon/http.rs).
pub fn install() -> Result<PrometheusHandle, RecorderError> {
    static INSTALLED: OnceLock<PrometheusHandle> = OnceLock::new();
    static LOCK: Mutex<()> = Mutex::new(());
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(h) = INSTALLED.get() {
        return Ok(h.clone());
    }
    let handle = install_recorder()?;
    spawn_upkeep(&handle)?;
    let _ = HANDLES.set(Handles {
        messages: Default::default(),
        bytes: Default::default(),
        processing: Default::default(),
        eom: Default::default(),
        oversize: Default::default(),
        memory_held: Default::default(),
    });
    describe_all();
    initial_series();
    let _ = INSTALLED.set(handle.clone());
    Ok(handle)
}

/// The global recorder, with the histograms' buckets.
fn install_recorder() -> Result<PrometheusHandle, RecorderError> {
    metrics_exporter_prometheus::PrometheusBuilder::new()
        .set_buckets_for_metric(
            metrics_exporter_prometheus::Matcher::Full("mimeref_processing_seconds".into()),
            &[
                0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
            ],
        )
        .map_err(RecorderError::Build)?
        // The latency the milter adds to the MTA's end of data: well under 1 ms for
        // ordinary mail, so finer buckets than the whole transaction's.
        .set_buckets_for_metric(
            metrics_exporter_prometheus::Matcher::Full("mimeref_eom_seconds".into()),
            &[
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1.0,
            ],
        )
        .map_err(RecorderError::Build)?
        .install_recorder()
        .map_err(RecorderError::Build)
}

/// What the exporter's own listener did every 5 s: drain histogram samples, so that
/// memory stays bounded between scrapes. A thread rather than a task: the recorder
/// outlives any one runtime (tests run several).
fn spawn_upkeep(handle: &PrometheusHandle) -> Result<(), RecorderError> {
    let upkeep = handle.clone();
    std::thread::Builder::new()
        .name("metrics-upkeep".into())
        .spawn(move || loop {
            std::thread::sleep(std::time::Duration::from_secs(5));
            upkeep.run_upkeep();
        })
        .map_err(RecorderError::Upkeep)?;
    Ok(())
}

/// Every metric's `# HELP` line, from `HELP`.
fn describe_all() {
    for &(name, kind, help) in HELP {
        match kind {
            Kind::Counter => metrics::describe_counter!(name, help),
            Kind::Gauge => metrics::describe_gauge!(name, help),
            Kind::Histogram => metrics::describe_histogram!(name, help),
        }
    }
}

/// The series that exist from the start, before anything counts in them. Those that
/// alerts and dashboards rate() over start at 0: a series that appears with its first
/// increment hides that increment from rate().
fn initial_series() {
    counter!("mimeref_connections_refused_total").increment(0);
    // The share of mail refused is read over every verdict and every kind of refusal:
    // a term without a series would leave the whole sum, and the alert, empty.
    for dir in ["inbound", "outbound"] {
        for v in Action::ALL {
            counter!("mimeref_messages_total", "direction" => dir, "verdict" => v.as_str())
                .increment(0);
        }
    }
    counter!("mimeref_events_total", "event" => "negotiation_refused").increment(0);
    for listener in ["milter", "http"] {
        for error in ACCEPT_ERRORS {
            counter!("mimeref_accept_errors_total", "listener" => listener, "error" => error)
                .increment(0);
        }
    }
    counter!("mimeref_forged_headers_removed_total").increment(0);
    signed_series_at_zero();
    counter!("mimeref_syslog_errors_total").increment(0);
    counter!("mimeref_http_connections_refused_total").increment(0);
    counter!("mimeref_events_total", "event" => "non_milter_peer").increment(0);
    for stage in ["create", "write"] {
        counter!("mimeref_spill_failures_total", "stage" => stage).increment(0);
    }
    counter!("mimeref_spill_tempfails_total").increment(0);
    metrics::gauge!("mimeref_spill_held_bytes").set(0.0);
    metrics::gauge!("mimeref_memory_held_bytes").set(0.0);
    for stage in MEMORY_STAGES {
        counter!("mimeref_memory_tempfails_total", "stage" => stage).increment(0);
    }
    for cause in Cause::ALL {
        for action in ["tempfail", "accept"] {
            counter!("mimeref_internal_errors_total", "cause" => cause.as_str(), "action" => action)
                .increment(0);
        }
    }
    for result in ["ok", "failed"] {
        counter!("mimeref_reloads_total", "result" => result).increment(0);
    }
    for kind in TIMEOUT_KINDS {
        counter!("mimeref_timeouts_total", "kind" => kind).increment(0);
    }
    for cause in CUT_CAUSES {
        counter!("mimeref_transactions_cut_total", "cause" => cause).increment(0);
    }
    // Before the first connection (install runs before the daemon takes any), so that
    // the dashboard shows 0 rather than no data.
    metrics::gauge!("mimeref_connections_open").set(0.0);
    // The configuration at start-up loaded, or the daemon would not be running.
    metrics::gauge!("mimeref_config_last_reload_successful").set(1.0);
}

#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// The `# HELP` line of every metric the daemon exports: what someone reading a scrape
/// or a Prometheus console sees without the man page (mimeref-milter(8), METRICS, says
/// more). A metric missing here is exported without one; tests/milter/dashboards.rs
/// checks that none is.
const HELP: &[(&str, Kind, &str)] = &[
    ("mimeref_messages_total", Kind::Counter, "Messages that got a verdict at end of message, by direction and the policy's action (in a dry run, what would have been done)."),
    ("mimeref_findings_total", Kind::Counter, "Findings, by rule id, the action the policy gave them and direction."),
    ("mimeref_scope_messages_total", Kind::Counter, "Messages a [[scope]] applied to, by the scope that decided, direction and verdict."),
    ("mimeref_message_bytes_total", Kind::Counter, "Octets of the messages that got a verdict."),
    ("mimeref_oversize_total", Kind::Counter, "Messages over max_message_size or max_header_size."),
    ("mimeref_processing_seconds", Kind::Histogram, "MAIL to the end-of-message reply, the SMTP transfer included."),
    ("mimeref_eom_seconds", Kind::Histogram, "What end of message itself takes: the latency the milter adds to the MTA's end of data."),
    ("mimeref_forged_headers_removed_total", Kind::Counter, "Report header fields sent by a client and deleted from inbound mail."),
    ("mimeref_signed_total", Kind::Counter, "Signatures (DKIM, ARC, multipart/signed, S/MIME) that covered a repair on offer, by outcome (repaired, withheld) and reason (bh-broken, verified, fix-signed; no-verdict, not-enabled, relayed, disagree, unknown, multipart-signed, smime)."),
    ("mimeref_events_total", Kind::Counter, "Connections the milter refused or closed, by event."),
    ("mimeref_milter_socket_reachable", Kind::Gauge, "1 while the MTA can reach the daemon at its milter socket (always for TCP); 0 once the unix socket file was removed or replaced."),
    ("mimeref_timeouts_total", Kind::Counter, "Milter connections closed because a time limit passed: connection_timeout (read), transaction_timeout (transaction), reply_timeout (reply)."),
    ("mimeref_transactions_cut_total", Kind::Counter, "Mail transactions whose connection ended before end of message, by cause; the MTA applied its milter_default_action."),
    ("mimeref_memory_tempfails_total", Kind::Counter, "Messages tempfailed because memory_budget had no room for them, by stage (message while received, replaced_body for its replaced body)."),
    ("mimeref_memory_held_bytes", Kind::Gauge, "Octets of message data held in memory, which memory_budget bounds (buffers, spill files on tmpfs, failed spills, replaced bodies until sent)."),
    ("mimeref_connections_open", Kind::Gauge, "Milter connections open."),
    ("mimeref_max_connections", Kind::Gauge, "The max_connections in force."),
    ("mimeref_connections_refused_total", Kind::Counter, "Milter connections closed at once at max_connections."),
    ("mimeref_http_connections_refused_total", Kind::Counter, "HTTP connections closed at once at metrics_max_connections."),
    ("mimeref_accept_errors_total", Kind::Counter, "Failed accepts on the milter socket or the HTTP endpoint, by listener and error."),
    ("mimeref_spill_failures_total", Kind::Counter, "Spills to spill_directory that failed, by stage (create, write)."),
    ("mimeref_spill_tempfails_total", Kind::Counter, "Messages tempfailed because their spill failed and memory_budget had no room for them."),
    ("mimeref_spill_held_bytes", Kind::Gauge, "Octets held in memory by messages whose spill failed."),
    ("mimeref_internal_errors_total", Kind::Counter, "Messages the daemon itself failed on, by cause and what they got (internal_error_action)."),
    ("mimeref_reloads_total", Kind::Counter, "SIGHUP reloads, by result (ok, failed)."),
    ("mimeref_config_last_reload_successful", Kind::Gauge, "1 when the last reload (or the start) loaded the file, 0 after a failed reload."),
    ("mimeref_syslog_errors_total", Kind::Counter, "Log lines the syslog socket did not take (written to standard error instead)."),
];

/// The handles of the per-message series, made on first use of each label set:
/// looking a series up by name and labels costs more than the rest of recording.
/// Only set once `install` has put a recorder in place; without one nothing is
/// recorded at all.
struct Handles {
    /// By direction, then verdict.
    messages: [[OnceLock<Counter>; Action::ALL.len()]; 2],
    bytes: [OnceLock<Counter>; 2],
    processing: [OnceLock<Histogram>; 2],
    eom: [OnceLock<Histogram>; 2],
    oversize: [OnceLock<Counter>; 2],
    /// Moved at every header field and body chunk kept.
    memory_held: OnceLock<Gauge>,
}

static HANDLES: OnceLock<Handles> = OnceLock::new();

pub fn record(o: &Outcome) {
    let Some(h) = HANDLES.get() else {
        return;
    };
    let d = o.plan.direction as usize;
    let dir = o.plan.direction.as_str();
    let v = o.plan.verdict;
    h.messages[d][v as usize]
        .get_or_init(
            || counter!("mimeref_messages_total", "direction" => dir, "verdict" => v.as_str()),
        )
        .increment(1);
    h.bytes[d]
        .get_or_init(|| counter!("mimeref_message_bytes_total", "direction" => dir))
        .increment(o.octets);
    h.processing[d]
        .get_or_init(|| histogram!("mimeref_processing_seconds", "direction" => dir))
        .record(o.millis as f64 / 1000.0);
    h.eom[d]
        .get_or_init(|| histogram!("mimeref_eom_seconds", "direction" => dir))
        .record(o.eom_seconds);
    // Only what was sent: in a dry run the forged copies stay.
    let removed = o.plan.removed();
    if removed > 0 && !o.plan.dry_run {
        counter!("mimeref_forged_headers_removed_total").increment(removed as u64);
    }
    if o.plan.oversize {
        h.oversize[d]
            .get_or_init(|| counter!("mimeref_oversize_total", "direction" => dir))
            .increment(1);
    }
    // Which scope decided (only for mail some scope applies to; `default`: the
    // direction's policy, beside a scope).
    if let Some(scope) = &o.plan.scope {
        counter!("mimeref_scope_messages_total", "scope" => scope.clone(), "direction" => dir, "verdict" => v.as_str())
            .increment(1);
    }
    for s in &o.plan.signed {
        let outcome = if s.repaired { "repaired" } else { "withheld" };
        counter!("mimeref_signed_total", "outcome" => outcome, "reason" => s.reason).increment(1);
    }
    for (rule, action) in &o.plan.decisions {
        counter!("mimeref_findings_total", "rule" => rule.id(), "action" => action.as_str(), "direction" => dir)
            .increment(1);
    }
}

/// The `reason` label values of `mimeref_signed_total` with outcome `repaired`.
pub const SIGNED_REPAIRED: [Lift; 3] = [Lift::BodyHashBroken, Lift::Verified, Lift::FixSigned];

/// Every series of `mimeref_signed_total` at 0, so that the share of repairs withheld
/// can be read from the first message on.
fn signed_series_at_zero() {
    for l in SIGNED_REPAIRED {
        counter!("mimeref_signed_total", "outcome" => "repaired", "reason" => l.reason())
            .increment(0);
    }
    let withheld = Withheld::ALL.iter().map(|w| w.reason()).chain(["relayed"]);
    for reason in withheld {
        counter!("mimeref_signed_total", "outcome" => "withheld", "reason" => reason).increment(0);
    }
}

/// Connection-level events (refused negotiations, errors).
pub fn event(name: &'static str) {
    counter!("mimeref_events_total", "event" => name).increment(1);
}

/// A spill that failed at `stage`: "create" (no file) or "write" (the file took the
/// octets only in part).
pub fn spill_failure(stage: &'static str) {
    counter!("mimeref_spill_failures_total", "stage" => stage).increment(1);
}

/// A message tempfailed because its spill failed and `memory_budget` had no room for it.
pub fn spill_tempfail() {
    counter!("mimeref_spill_tempfails_total").increment(1);
}

/// Where a message was tempfailed for want of room in `memory_budget`: while it was
/// received, or at end of message for its replaced body.
pub const MEMORY_STAGES: [&str; 2] = ["message", "replaced_body"];

/// A message tempfailed because `memory_budget` had no room for it at `stage` (one of
/// [`MEMORY_STAGES`]).
pub fn memory_tempfail(stage: &'static str) {
    counter!("mimeref_memory_tempfails_total", "stage" => stage).increment(1);
}

/// Octets of message data held in memory (what `memory_budget` bounds): up or down.
pub fn memory_held(delta: f64) {
    let Some(h) = HANDLES.get() else {
        return;
    };
    h.memory_held
        .get_or_init(|| metrics::gauge!("mimeref_memory_held_bytes"))
        .increment(delta);
}

/// Octets held in memory by messages whose spill failed: up (positive) or down.
pub fn spill_held(delta: f64) {
    metrics::gauge!("mimeref_spill_held_bytes").increment(delta);
}

/// An internal error at end of message: its cause, and what the message got
/// (`internal_error_action`).
pub fn internal_error(cause: Cause, action: &'static str) {
    counter!("mimeref_internal_errors_total", "cause" => cause.as_str(), "action" => action)
        .increment(1);
}

/// The `kind` label values of `mimeref_timeouts_total`: `connection_timeout` (no
/// complete command), `transaction_timeout`, `reply_timeout`.
pub const TIMEOUT_KINDS: [&str; 3] = ["read", "transaction", "reply"];

/// A time limit that passed and closed a milter connection.
pub fn timeout(kind: &'static str) {
    counter!("mimeref_timeouts_total", "kind" => kind).increment(1);
}

/// The `cause` label values of `mimeref_transactions_cut_total`.
pub const CUT_CAUSES: [&str; 7] = [
    "read_timeout",
    "transaction_timeout",
    "reply_timeout",
    "closed",
    "io_error",
    "protocol_error",
    "shutdown",
];

/// A mail transaction that its connection's end cut short, before end of message.
pub fn transaction_cut(cause: &'static str) {
    counter!("mimeref_transactions_cut_total", "cause" => cause).increment(1);
}

/// A log line the syslog socket did not take (written to standard error instead).
pub fn syslog_error() {
    counter!("mimeref_syslog_errors_total").increment(1);
}

/// One SIGHUP reload: `ok` when the new configuration was loaded.
pub fn reload(ok: bool) {
    let result = if ok { "ok" } else { "failed" };
    counter!("mimeref_reloads_total", "result" => result).increment(1);
    // What an alert can hold on to until a later reload succeeds: the counter alone
    // cannot tell whether a failure was since put right.
    metrics::gauge!("mimeref_config_last_reload_successful").set(if ok { 1.0 } else { 0.0 });
}

/// Whether the MTA can reach the daemon at its milter socket: 0 once the unix socket
/// file is removed or replaced by another process's (always 1 for TCP). The process
/// still answers scrapes then, so `up` cannot show it.
pub fn milter_socket_reachable(yes: bool) {
    metrics::gauge!("mimeref_milter_socket_reachable").set(if yes { 1.0 } else { 0.0 });
}

/// The `max_connections` in force, to alert before it is reached.
pub fn max_connections(n: usize) {
    metrics::gauge!("mimeref_max_connections").set(n as f64);
}

/// A milter connection closed at once because `max_connections` were open.
pub fn connection_refused() {
    counter!("mimeref_connections_refused_total").increment(1);
}

/// An HTTP connection to the metrics endpoint closed at once because
/// `metrics_max_connections` were open.
pub fn http_connection_refused() {
    counter!("mimeref_http_connections_refused_total").increment(1);
}

/// The `error` label values of `mimeref_accept_errors_total`.
pub const ACCEPT_ERRORS: [&str; 6] = [
    "emfile",
    "enfile",
    "enobufs",
    "enomem",
    "econnaborted",
    "other",
];

/// A failed accept. `listener`: "milter" or "http"; `error`: one of [`ACCEPT_ERRORS`].
pub fn accept_error(listener: &'static str, error: &'static str) {
    counter!("mimeref_accept_errors_total", "listener" => listener, "error" => error).increment(1);
}

/// Milter connections opened (+1) or closed (-1).
pub fn connections_open(delta: f64) {
    metrics::gauge!("mimeref_connections_open").increment(delta);
}
