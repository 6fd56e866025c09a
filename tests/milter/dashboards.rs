//! The Grafana dashboard and the Prometheus alerting rules (packaging/) name only
//! metrics that the daemon exports: both are checked against a scrape of the real
//! daemon's `/metrics`, so that a renamed metric cannot leave a panel or an alert
//! silently empty.

#[path = "../support/mod.rs"]
mod support;

use std::collections::BTreeSet;
use std::path::Path;

use indymilter_test::{Actions, TestConnection};
use support::milter::*;

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap()
}

fn metric_names(text: &str) -> BTreeSet<String> {
    let re = regex::Regex::new(r"\bmimeref_[a-z0-9_]+").unwrap();
    re.find_iter(text).map(|m| m.as_str().to_string()).collect()
}

/// Every PromQL text of the dashboard: panel targets and template variable queries.
fn queries(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("expr" | "definition", serde_json::Value::String(s)) => out.push(s.clone()),
                    _ => queries(v, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| queries(v, out)),
        _ => {}
    }
}

/// The series names in a scrape (histograms as their _bucket, _sum and _count).
async fn exported() -> BTreeSet<String> {
    let m = Milter::start_http("dashboards", "").await;
    // One message with findings: messages, findings, bytes and both histograms.
    let mut c = m.conn().await;
    accept_one(&mut c, REMOTE, "milter/nested-extbody.eml").await;
    // An MTA without an action the configuration needs is refused at negotiation:
    // the events counter.
    let refused = TestConnection::configure()
        .exact_leading_space(true)
        .available_actions(Actions::ADD_HEADER)
        .open_tcp(m.addr)
        .await;
    assert!(refused.is_err());
    m.reload_with("").await;
    let (code, body) = http_get(m.http.unwrap(), "/metrics").await;
    assert_eq!(code, 200);
    c.close().await.unwrap();
    m.stop().await;
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn dashboard_and_alerts_use_only_exported_metrics() {
    let exported = exported().await;

    let dash: serde_json::Value =
        serde_json::from_str(&read("packaging/grafana/mimeref-milter.json")).unwrap();
    assert!(dash["schemaVersion"].as_u64().unwrap() >= 36);
    let vars = dash["templating"]["list"].as_array().unwrap();
    assert!(
        vars.iter()
            .any(|v| v["type"] == "datasource" && v["query"] == "prometheus"),
        "no Prometheus datasource variable"
    );
    let mut qs = Vec::new();
    queries(&dash, &mut qs);
    let used = metric_names(&qs.join("\n"));
    for want in [
        "mimeref_messages_total",
        "mimeref_findings_total",
        "mimeref_eom_seconds_bucket",
        "mimeref_reloads_total",
        "mimeref_connections_refused_total",
        "mimeref_spill_failures_total",
        "mimeref_spill_tempfails_total",
        "mimeref_spill_held_bytes",
        "mimeref_internal_errors_total",
    ] {
        assert!(used.contains(want), "the dashboard has no panel on {want}");
    }
    let missing: Vec<_> = used.difference(&exported).collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries {missing:?}, which the daemon does not export; it exports {exported:?}"
    );

    let rules: String = read("packaging/prometheus/mimeref-milter.rules.yml")
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let used = metric_names(&rules);
    assert!(used.len() >= 6, "{used:?}");
    let missing: Vec<_> = used.difference(&exported).collect();
    assert!(
        missing.is_empty(),
        "the alerting rules use {missing:?}, which the daemon does not export; it exports {exported:?}"
    );
}
