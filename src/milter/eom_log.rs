//! The log lines of end of message: the changes, notes and findings of a plan, and the
//! one info line per message. The session returns what ended; the connection's
//! callback logs it here and counts it in `metrics`.

use tracing::{debug, info, warn};

use super::outcome::{Ended, Outcome};
use crate::config::Config;
use crate::engine;
use crate::policy::plan::{self, Plan};

/// Logs what end of message did.
pub fn ended(cfg: &Config, e: &Ended) {
    match e {
        Ended::Answered(o) => answered(cfg, o),
        Ended::OverBudget {
            queue_id,
            octets,
            needed,
            held,
            budget,
            failed_spill,
            stage,
        } => {
            let what = if *stage == "replaced_body" {
                "its replaced body"
            } else {
                "it"
            };
            let throttled = if *failed_spill {
                &super::throttle::SPILL_TEMPFAILED
            } else {
                &super::throttle::MEMORY_TEMPFAILED
            };
            throttled.hit(|| {
                format!(
                    "{queue_id}: size={octets}: {needed} octets in memory for {what} would \
                     pass [limits] memory_budget = {budget} ({held} held for other messages)"
                )
            })
        }
    }
}

/// The notes, changes and findings of an analysed message, then its info line.
fn answered(cfg: &Config, o: &Outcome) {
    let queue_id = &o.queue_id;
    let plan = &o.plan;
    if o.heading_copy {
        debug!("{queue_id}: the body began with a copy of the heading; analysed as the heading");
    }
    // Change records are redacted by the planner; notes and findings quote the
    // message's own text, URLs included.
    let shown = |t: &str| -> String {
        if cfg.report.redact_urls {
            crate::policy::redact::redact(t).into_owned()
        } else {
            t.to_string()
        }
    };
    for n in &plan.notes {
        warn!("{queue_id}: {}", shown(n));
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
            plan::change_text(part, c, engine::rewriting::rewrite::DISPLAY_MAX)
        );
    }
    for f in &o.findings {
        debug!(
            "{queue_id}: {} {} {}: {}",
            f.part,
            f.rule,
            f.severity,
            shown(&f.message)
        );
    }
    log_outcome(o);
}

/// The one info line per message, starting with the queue id so that it greps beside the
/// MTA's own log.
fn log_outcome(o: &Outcome) {
    if !tracing::enabled!(tracing::Level::INFO) {
        return;
    }
    let p = &o.plan;
    let rules = if p.rules.is_empty() {
        "-".to_string()
    } else {
        p.rules.iter().map(|r| r.id()).collect::<Vec<_>>().join(",")
    };
    let body = if p.body.is_some() { "yes" } else { "no" };
    let dry = if p.dry_run { " dry-run" } else { "" };
    let over = if p.oversize { " oversize" } else { "" };
    // The scope that decided, and every scope of a message whose recipients fall into
    // several.
    let scope = match (&p.scope, p.scopes.len()) {
        (None, _) => String::new(),
        (Some(s), 0 | 1) => format!(" scope={s}"),
        (Some(s), _) => format!(" scope={s} scopes={}", p.scopes.join(",")),
    };
    info!(
        "{}: direction={} verdict={}{dry}{over}{scope} rules={rules} edits={} removed={} body_replaced={body} size={} ms={}",
        o.queue_id,
        p.direction,
        verdict_word(p),
        p.edits(),
        p.removed(),
        o.octets,
        o.millis
    );
}

/// What happened to the message, in the log line. The policy's action names stay the
/// `verdict` label of the metrics, but `verdict=ignore` on clean mail read as if the
/// milter had not looked at it.
fn verdict_word(p: &Plan) -> &'static str {
    use crate::policy::Action;
    match p.verdict {
        Action::Ignore if p.decisions.is_empty() => "clean",
        // Findings, every one of them ignored by the policy.
        Action::Ignore => "pass",
        Action::Log => "logged",
        Action::Report => "reported",
        Action::Fix if p.edits() > 0 => "fixed",
        // A fix was due but none could be sent; a WARN line before says why.
        Action::Fix => "not-fixed",
        Action::Quarantine => "quarantined",
        Action::Tempfail => "tempfailed",
        Action::Reject => "rejected",
    }
}
