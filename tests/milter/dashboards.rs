//! The Grafana dashboard and the Prometheus alerting rules (packaging/) name only
//! metrics that the daemon exports: both are checked against a scrape of the real
//! daemon's `/metrics`, so that a renamed metric cannot leave a panel or an alert
//! silently empty.

#[path = "../support/mod.rs"]
mod support;

use std::collections::BTreeSet;
use std::path::Path;

use indymilter_test::{Actions, Status, TestConnection};
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
    scrape()
        .await
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect()
}

/// After the reload: a scope, and a max_message_size that the second message passes.
const RELOADED: &str = r#"[limits]
max_message_size = 1024
[[scope]]
name = "archive"
recipients = ["archive@example.net"]
exempt = "log"
"#;

/// A scrape of the in-process daemon after a message, a refused negotiation, a
/// reload, and a message to a scope over max_message_size (the series that only a
/// scope and an oversize message make).
async fn scrape() -> String {
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
    m.reload_with(RELOADED).await;
    let mut big = m.conn().await;
    connect(&mut big, REMOTE, None).await;
    assert_eq!(
        big.mail(["<alice@example.org>"]).await.unwrap(),
        Status::Continue
    );
    assert_eq!(
        big.rcpt(["<archive@example.net>"]).await.unwrap(),
        Status::Continue
    );
    let mut over = eml(&fixture("milter/clean.eml"));
    over.body = b"0123456789abcdef\r\n".repeat(100);
    let (_, st) = send_data(&mut big, &Envelope::default(), &over).await;
    assert_eq!(st, Status::Accept);
    big.close().await.unwrap();
    let (code, body) = http_get(m.http.unwrap(), "/metrics").await;
    assert_eq!(code, 200);
    c.close().await.unwrap();
    m.stop().await;
    body
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
    // A range of one scrape interval holds one sample at most: increase() and rate()
    // over it are empty (the reload panel was).
    let one_scrape: Vec<&String> = qs.iter().filter(|q| q.contains("[$__interval]")).collect();
    assert!(
        one_scrape.is_empty(),
        "ranges of $__interval, empty below two scrapes; use $__rate_interval: {one_scrape:?}"
    );
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
        "mimeref_memory_tempfails_total",
        "mimeref_memory_held_bytes",
        "mimeref_internal_errors_total",
        "mimeref_signed_total",
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

/// Every metric the daemon exports is documented in mimeref-milter(8) under METRICS,
/// with the very labels it has (a histogram's `le` aside), and each `event` value of
/// `mimeref_events_total`.
#[tokio::test]
async fn every_exported_metric_is_documented_with_its_labels() {
    let body = scrape().await;
    let mut families: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    let mut events = BTreeSet::new();
    let label = regex::Regex::new(r#"([a-z_]+)="([^"]*)""#).unwrap();
    for l in body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let name = l.split(['{', ' ']).next().unwrap();
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .filter(|f| body.contains(&format!("# TYPE {f} histogram")))
            .unwrap_or(name);
        let keys = families.entry(family.to_string()).or_default();
        let labels = l
            .split_once('{')
            .map_or("", |(_, r)| r.split('}').next().unwrap());
        for c in label.captures_iter(labels) {
            if &c[1] != "le" {
                keys.insert(c[1].to_string());
            }
            if family == "mimeref_events_total" && &c[1] == "event" {
                events.insert(c[2].to_string());
            }
        }
    }
    assert!(families.len() >= 15, "{families:?}");
    let undescribed: Vec<&String> = families
        .keys()
        .filter(|f| !body.contains(&format!("# HELP {f} ")))
        .collect();
    assert!(
        undescribed.is_empty(),
        "exported without a # HELP line: {undescribed:?}"
    );
    let man = read("packaging/man/mimeref-milter.8");
    let section = metrics_section(&man);
    let mut undocumented = Vec::new();
    for (family, keys) in &families {
        let head = if keys.is_empty() {
            format!(".B {family}\n")
        } else {
            format!(
                ".B {family}{{{}}}\n",
                keys.iter().cloned().collect::<Vec<_>>().join(",")
            )
        };
        // The label keys in the page's order are the exported ones in any order.
        let documented = section.lines().any(|l| {
            let l = format!("{l}\n");
            let Some(rest) = l.strip_prefix(&format!(".B {family}")) else {
                return false;
            };
            let listed: BTreeSet<String> = rest
                .trim()
                .trim_start_matches('{')
                .trim_end_matches('}')
                .split(',')
                .filter(|k| !k.is_empty())
                .map(String::from)
                .collect();
            &listed == keys
        });
        if !documented {
            undocumented.push(head.trim().to_string());
        }
    }
    assert!(
        undocumented.is_empty(),
        "mimeref-milter(8) METRICS lacks (or labels otherwise): {undocumented:?}"
    );
    assert!(events.len() >= 2, "{events:?}");
    for e in &events {
        assert!(
            section.contains(&format!(".B {e}\n")),
            "event {e} undocumented"
        );
    }
}

fn metrics_section(man: &str) -> &str {
    man.split(".SH METRICS\n")
        .nth(1)
        .expect("mimeref-milter(8) has no METRICS section")
        .split("\n.SH ")
        .next()
        .unwrap()
}

/// The scrape above shows only the series that exist in that run: a metric made only
/// under some configuration (`mimeref_scope_messages_total` needs a scope) would slip
/// through it. So every metric name the source hands to the `metrics` macros is
/// documented in mimeref-milter(8) and has its `# HELP` text.
#[test]
fn every_metric_in_the_source_is_documented_and_described() {
    let macro_call =
        regex::Regex::new(r#"(?:counter|gauge|histogram)!\(\s*"(mimeref_[a-z0-9_]+)""#).unwrap();
    let mut names = BTreeSet::new();
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                names.extend(macro_call.captures_iter(&text).map(|c| c[1].to_string()));
            }
        }
    }
    assert!(names.len() >= 20, "{names:?}");
    let man = read("packaging/man/mimeref-milter.8");
    let section = metrics_section(&man);
    let help = read("src/milter/metrics.rs");
    for name in &names {
        assert!(
            section.contains(&format!(".B {name}\n")) || section.contains(&format!(".B {name}{{")),
            "mimeref-milter(8) METRICS lacks {name}"
        );
        assert!(
            help.contains(&format!("(\"{name}\", Kind::")),
            "src/milter/metrics.rs HELP lacks {name}"
        );
    }
}

/// Metrics that need neither an alert nor a panel, each with the reason. Every other
/// metric the daemon exports has one or the other, so that no failure it counts goes
/// unseen (issue 41). Empty now: each metric has a panel, an alert or both.
const UNWATCHED: &[(&str, &str)] = &[];

/// The PromQL of the dashboard's panels: their targets' `expr`, rows' panels included
/// (not the template variables, which show nothing).
fn panel_exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    for p in v["panels"].as_array().into_iter().flatten() {
        for t in p["targets"].as_array().into_iter().flatten() {
            if let Some(e) = t["expr"].as_str() {
                out.push(e.to_string());
            }
        }
        panel_exprs(p, out);
    }
}

/// The `expr` of each alerting rule, a block scalar (`expr: |`) whole: not the
/// comments nor the annotations, which may name a metric the alert does not read.
fn alert_exprs(rules: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = rules.lines().peekable();
    while let Some(l) = lines.next() {
        let Some(rest) = l.trim_start().strip_prefix("expr:") else {
            continue;
        };
        let indent = l.len() - l.trim_start().len();
        let rest = rest.trim();
        if !matches!(rest, "|" | ">" | "|-" | ">-") {
            out.push(rest.to_string());
            continue;
        }
        let mut block = String::new();
        while let Some(next) = lines.peek() {
            if !next.trim().is_empty() && next.len() - next.trim_start().len() <= indent {
                break;
            }
            block.push_str(next.trim());
            block.push('\n');
            lines.next();
        }
        out.push(block);
    }
    out
}

/// Every metric the daemon exports (in a scrape, or described in the HELP table of
/// src/milter/metrics.rs, which holds those a scrape shows only under some
/// configuration or traffic) is read by an alert in the rules file or a panel of the
/// dashboard, or is in UNWATCHED with its reason.
#[tokio::test]
async fn every_exported_metric_has_an_alert_or_a_panel() {
    let body = scrape().await;
    let mut families: BTreeSet<String> = body
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|t| t.split_whitespace().next())
        .map(String::from)
        .collect();
    let help = regex::Regex::new(r#"\("(mimeref_[a-z0-9_]+)", Kind::"#).unwrap();
    let described: BTreeSet<String> = help
        .captures_iter(&read("src/milter/metrics.rs"))
        .map(|c| c[1].to_string())
        .collect();
    assert!(described.len() >= 25, "{described:?}");
    families.extend(described);

    let dash: serde_json::Value =
        serde_json::from_str(&read("packaging/grafana/mimeref-milter.json")).unwrap();
    let mut panels = Vec::new();
    panel_exprs(&dash, &mut panels);
    let panels = metric_names(&panels.join("\n"));
    let alerts = alert_exprs(&read("packaging/prometheus/mimeref-milter.rules.yml"));
    assert!(alerts.len() >= 15, "{alerts:?}");
    let alerts = metric_names(&alerts.join("\n"));
    // A histogram is read as its _bucket (or _sum, _count) series.
    let reads = |used: &BTreeSet<String>, family: &str| {
        ["", "_bucket", "_sum", "_count"]
            .iter()
            .any(|s| used.contains(&format!("{family}{s}")))
    };

    let mut unwatched = Vec::new();
    for f in &families {
        let (panel, alert) = (reads(&panels, f), reads(&alerts, f));
        let exempt = UNWATCHED.iter().find(|(n, _)| n == f);
        match (panel || alert, exempt) {
            (false, None) => unwatched.push(f.clone()),
            (true, Some(_)) => panic!(
                "{f} is in UNWATCHED but has {}: take it out of the list",
                if alert { "an alert" } else { "a panel" }
            ),
            _ => {}
        }
    }
    assert!(
        unwatched.is_empty(),
        "exported, but read by no alert (packaging/prometheus/mimeref-milter.rules.yml) \
         and no panel (packaging/grafana/mimeref-milter.json): {unwatched:?}; add one, \
         or an entry with its reason to UNWATCHED"
    );
    for (name, reason) in UNWATCHED {
        assert!(
            families.contains(*name),
            "UNWATCHED names {name}, not exported"
        );
        assert!(
            !reason.trim().is_empty(),
            "UNWATCHED gives {name} no reason"
        );
    }
}
