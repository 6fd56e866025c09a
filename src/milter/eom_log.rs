//! The log lines of end of message: the changes, notes and findings of a plan, and the
//! one info line per message. The session returns what ended; the connection's
//! callback logs it here and counts it in `metrics`.

use tracing::{debug, info, warn};

use super::outcome::{Ended, Outcome};
use crate::config::{Config, LogFormat};
use crate::engine;
use crate::policy::direction::Reason;
use crate::policy::{plan, report};

/// How much of a changed field's value a log line shows, before and after: enough for
/// a disposition, a Content-ID or a Content-Type with its parameters.
const FIELD_DISPLAY_MAX: usize = 120;

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
        if cfg.report().redact_urls {
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
            report::change_text(part, c, engine::rewriting::rewrite::DISPLAY_MAX)
        );
    }
    for c in &plan.field_changes {
        info!(
            "{queue_id}: changed {}{dry}",
            shown(&plan::field_change_text(c, FIELD_DISPLAY_MAX))
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
    log_outcome(cfg, o);
}

/// The one info line per message, starting with the queue id so that it greps beside the
/// MTA's own log. With `log_format = "json"` each of its values is a key of its own as
/// well (the line stays in `message`), so that Loki and Elasticsearch can query them.
fn log_outcome(cfg: &Config, o: &Outcome) {
    if !tracing::enabled!(tracing::Level::INFO) {
        return;
    }
    let p = &o.plan;
    let rules = p.rules.iter().map(|r| r.id()).collect::<Vec<_>>().join(",");
    let body = if p.body.is_some() { "yes" } else { "no" };
    let dry = if p.dry_run { " dry-run" } else { "" };
    let over = if p.oversize { " oversize" } else { "" };
    // The scope that decided, and every scope of a message whose recipients fall into
    // several.
    let scopes = (p.scopes.len() > 1).then(|| p.scopes.join(","));
    let scope = match (&p.scope, &scopes) {
        (None, _) => String::new(),
        (Some(s), None) => format!(" scope={s}"),
        (Some(s), Some(all)) => format!(" scope={s} scopes={all}"),
    };
    let signed = signed_words(p);
    // The verdict in the words of `check`, `survey`, the metrics' `verdict` label and
    // the report header; `findings=0` tells clean mail from findings all ignored, and
    // `verdict=fix edits=0` a fix that could not be sent (a WARN line before says why).
    let line = format!(
        "{}: direction={}({}) verdict={}{dry}{over}{scope} findings={} rules={} edits={} removed={} body_replaced={body}{signed} size={} ms={}",
        o.queue_id,
        p.direction,
        o.direction_reason,
        p.verdict.as_str(),
        o.findings.len(),
        if rules.is_empty() { "-" } else { &rules },
        p.edits(),
        p.removed(),
        o.octets,
        o.millis
    );
    if cfg.process().log_format != LogFormat::Json {
        info!("{line}");
        return;
    }
    let reason = &o.direction_reason;
    info!(
        queue_id = o.queue_id.as_str(),
        client = o.client.map(tracing::field::display),
        direction = p.direction.as_str(),
        direction_reason = reason.word(),
        trusted_network = match reason {
            Reason::TrustedNetworks(n) => Some(tracing::field::display(n)),
            _ => None,
        },
        daemon_name = match reason {
            Reason::Daemon(d) => Some(d.as_str()),
            _ => None,
        },
        scope = p.scope.as_deref(),
        scopes = scopes.as_deref(),
        verdict = p.verdict.as_str(),
        dry_run = p.dry_run,
        oversize = p.oversize,
        findings = o.findings.len() as u64,
        rules = rules.as_str(),
        edits = p.edits() as u64,
        removed = p.removed() as u64,
        body_replaced = p.body.is_some(),
        signed = (!signed.is_empty()).then(|| signed.trim_start()),
        size = o.octets,
        ms = u64::try_from(o.millis).unwrap_or(u64::MAX),
        "{line}"
    );
}

/// What a repair under a signature relied on (`verified=mx.example.org:dkim=pass`,
/// `bh-broken=d=example.com`, `fix-signed`), and why others were withheld
/// (`withheld=no-verdict`): each different word once, in message order.
fn signed_words(p: &plan::Plan) -> String {
    let mut words: Vec<String> = Vec::new();
    for s in &p.signed {
        let w = match &s.relied_on {
            Some(r) if s.repaired => r.clone(),
            _ => format!("withheld={}", s.reason),
        };
        if !words.contains(&w) {
            words.push(w);
        }
    }
    words.iter().map(|w| format!(" {w}")).collect()
}
