//! Prometheus metrics through the `metrics` facade: without an installed recorder (no
//! `metrics_listen`) every call here is a no-op.

use std::net::SocketAddr;

use metrics::{counter, histogram};

use super::session::Outcome;

/// Starts the HTTP endpoint. Must run inside the Tokio runtime.
pub fn install(addr: SocketAddr) -> Result<(), String> {
    metrics_exporter_prometheus::PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets_for_metric(
            metrics_exporter_prometheus::Matcher::Full("mimeref_processing_seconds".into()),
            &[
                0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
            ],
        )
        .map_err(|e| e.to_string())?
        // The latency the milter adds to the MTA's end of data: well under 1 ms for
        // ordinary mail, so finer buckets than the whole transaction's.
        .set_buckets_for_metric(
            metrics_exporter_prometheus::Matcher::Full("mimeref_eom_seconds".into()),
            &[
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1.0,
            ],
        )
        .map_err(|e| e.to_string())?
        .install()
        .map_err(|e| e.to_string())
}

pub fn record(o: &Outcome) {
    let dir = o.plan.direction.as_str();
    let verdict = o.plan.verdict.as_str();
    counter!("mimeref_messages_total", "direction" => dir, "verdict" => verdict).increment(1);
    counter!("mimeref_message_bytes_total", "direction" => dir).increment(o.octets);
    histogram!("mimeref_processing_seconds", "direction" => dir).record(o.millis as f64 / 1000.0);
    histogram!("mimeref_eom_seconds", "direction" => dir).record(o.eom_seconds);
    if o.plan.oversize {
        counter!("mimeref_oversize_total", "direction" => dir).increment(1);
    }
    for (rule, action) in &o.plan.decisions {
        counter!("mimeref_findings_total", "rule" => rule.id(), "action" => action.as_str(), "direction" => dir)
            .increment(1);
    }
}

/// Connection-level events (refused negotiations, errors).
pub fn event(name: &'static str) {
    counter!("mimeref_events_total", "event" => name).increment(1);
}
