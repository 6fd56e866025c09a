//! The alerting rules read the daemon's real metrics: the real binary goes through real
//! failures (rejected and tempfailed mail, a spill directory gone, a caught panic, an
//! MTA whose negotiation is refused, an HTTP client at the milter port, connections
//! past both limits, a syslog that is not there, a failed reload, the unix socket
//! file removed, mail transactions stalled past transaction_timeout), `/metrics` is
//! scraped before and after, and promtool evaluates
//! packaging/prometheus/mimeref-milter.rules.yml over a series file built from the two
//! scrapes: counters going on at the rate between the scrapes (the failure persists),
//! gauges held, then the daemon stopped (`up` 0, a scrape that really failed). Every
//! alert must fire that the failures call for, and no other: one that reads a metric
//! or a label the daemon does not export stays silent and fails the test.

#[path = "../support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use indymilter_test::{Actions, Status, TestConnection};
use support::milter::*;
use support::mta::{self, free_port, TempDir};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PROMTOOL: &str = "/usr/bin/promtool";
const PANIC_TOKEN: &str = "MIMEREF-ALERTS-PANIC-TOKEN";

/// promtool (Debian's prometheus package, which scripts/install-test-deps installs):
/// missing, the test fails, unless a quick run without MTAs was asked for.
fn require_promtool() -> bool {
    if Path::new(PROMTOOL).exists() {
        return true;
    }
    if std::env::var("MIMEREF_SKIP_MTA").is_ok_and(|v| v == "1") {
        eprintln!("SKIPPED (promtool): {PROMTOOL} missing [MIMEREF_SKIP_MTA=1]");
        return false;
    }
    panic!("{PROMTOOL} missing\n  install with: sudo scripts/install-test-deps");
}

async fn open(port: u16, actions: Option<Actions>) -> Result<TestConnection, String> {
    let mut c = TestConnection::configure().exact_leading_space(true);
    if let Some(a) = actions {
        c = c.available_actions(a);
    }
    tokio::time::timeout(Duration::from_secs(10), c.open_tcp(("127.0.0.1", port)))
        .await
        .map_err(|_| "negotiation not answered within 10 s".to_string())?
        .map_err(|e| e.to_string())
}

async fn message(port: u16, m: &Eml) -> Status {
    let mut c = open(port, None).await.unwrap();
    connect(&mut c, REMOTE, None).await;
    let (_, st) = send(&mut c, &Envelope::default(), m).await;
    c.close().await.unwrap();
    st
}

/// `/metrics`, retried while the endpoint is busy (its connections are capped).
async fn scrape(http: u16) -> String {
    support::wait_until(
        "a scrape",
        Duration::from_secs(15),
        Duration::from_millis(100),
        || async {
            let Ok(mut s) = TcpStream::connect(("127.0.0.1", http)).await else {
                return Err("connect".to_string());
            };
            let _ = s
                .write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
                .await;
            let mut buf = Vec::new();
            let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await;
            let text = String::from_utf8_lossy(&buf).into_owned();
            match text.split_once("\r\n\r\n") {
                Some((head, body)) if head.starts_with("HTTP/1.0 200") => Ok(body.to_string()),
                _ => Err(format!("no answer: {text:?}")),
            }
        },
    )
    .await
}

/// A scrape: each series (name and labels as exported) with its value, and each
/// metric family's type.
struct Scrape {
    values: BTreeMap<String, f64>,
    types: BTreeMap<String, String>,
}

fn parse(text: &str) -> Scrape {
    let mut values = BTreeMap::new();
    let mut types = BTreeMap::new();
    for l in text.lines() {
        if let Some(t) = l.strip_prefix("# TYPE ") {
            let mut w = t.split_whitespace();
            if let (Some(n), Some(k)) = (w.next(), w.next()) {
                types.insert(n.to_string(), k.to_string());
            }
            continue;
        }
        if l.starts_with('#') || l.trim().is_empty() {
            continue;
        }
        let (series, value) = l.rsplit_once(' ').unwrap();
        values.insert(series.to_string(), value.parse().unwrap());
    }
    Scrape { values, types }
}

/// The series name without labels, and the family it belongs to (a histogram's
/// `_bucket`, `_sum` and `_count` belong to the histogram).
fn family(series: &str) -> (&str, &str) {
    let name = series.split('{').next().unwrap();
    let fam = ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(name);
    (name, fam)
}

/// `name{a="b"}` with the job and instance labels Prometheus adds.
fn with_target(series: &str, instance: &str) -> String {
    let target = format!("job=\"mimeref-milter\",instance=\"{instance}\"");
    match series.split_once('{') {
        Some((n, rest)) => format!("{n}{{{target},{rest}"),
        None => format!("{series}{{{target}}}"),
    }
}

/// Minutes of the series file: before the failure, during it, then the daemon down.
const BEFORE: usize = 5;
const DURING: usize = 30;
const DOWN: usize = 10;

/// promtool's input series from two scrapes of one instance, one sample a minute.
fn series_file(a: &Scrape, b: &Scrape, instance: &str) -> String {
    let mut out = String::new();
    for (series, &v2) in &b.values {
        let (_, fam) = family(series);
        let counter = matches!(
            b.types.get(fam).map(String::as_str),
            Some("counter" | "histogram")
        );
        let v1 = a.values.get(series).copied();
        let mut vals: Vec<String> = Vec::new();
        for _ in 0..BEFORE {
            // A series the first scrape did not have: not there yet.
            vals.push(v1.map_or("_".to_string(), |v| v.to_string()));
        }
        let base = v1.unwrap_or(0.0);
        for k in 1..=DURING {
            let v = if counter {
                base + (v2 - base) * k as f64
            } else {
                v2
            };
            vals.push(v.to_string());
        }
        let _ = writeln!(
            out,
            "      - series: '{}'\n        values: '{}'",
            with_target(series, instance),
            vals.join(" ")
        );
    }
    let up: Vec<&str> = std::iter::repeat_n("1", BEFORE + DURING)
        .chain(std::iter::repeat_n("0", DOWN))
        .collect();
    let _ = writeln!(
        out,
        "      - series: 'up{{job=\"mimeref-milter\",instance=\"{instance}\"}}'\n        values: '{}'",
        up.join(" ")
    );
    out
}

fn rules_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/prometheus")
}

/// The names of the alerts in the rules file.
fn all_alerts() -> BTreeSet<String> {
    let text = std::fs::read_to_string(rules_dir().join("mimeref-milter.rules.yml")).unwrap();
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .map(|s| s.trim().to_string())
        .collect()
}

/// promtool over the series of two scrapes of the endpoint on port `http`, in `dir`:
/// Ok when exactly the alerts `want` fire 20 minutes into the failure and
/// MimerefMilterDown 9 minutes after the daemon stopped; else promtool's report.
fn promtool(
    dir: &Path,
    before: &Scrape,
    during: &Scrape,
    http: u16,
    want: &BTreeSet<String>,
) -> Result<(), String> {
    let instance = format!("127.0.0.1:{http}");
    let mut yml = String::from(
        "rule_files:\n  - mimeref-milter.rules.yml\nevaluation_interval: 1m\ntests:\n  \
         - interval: 1m\n    input_series:\n",
    );
    yml.push_str(&series_file(before, during, &instance));
    yml.push_str("    promql_expr_test:\n");
    let _ = write!(
        yml,
        "      - expr: count by (alertname) (ALERTS{{alertstate=\"firing\"}})\n        \
         eval_time: {}m\n        exp_samples:\n",
        BEFORE + 20
    );
    for a in want {
        let _ = writeln!(
            yml,
            "          - labels: '{{alertname=\"{a}\"}}'\n            value: 1"
        );
    }
    let _ = write!(
        yml,
        "      - expr: ALERTS{{alertname=\"MimerefMilterDown\",alertstate=\"firing\"}}\n        \
         eval_time: {}m\n        exp_samples:\n          - labels: \
         'ALERTS{{alertname=\"MimerefMilterDown\",alertstate=\"firing\",job=\"mimeref-milter\",instance=\"{instance}\",severity=\"critical\"}}'\n            value: 1\n",
        BEFORE + DURING + DOWN - 1
    );
    std::fs::write(dir.join("real.test.yml"), &yml).unwrap();
    // The rules file is read from where promtool runs.
    std::fs::copy(
        rules_dir().join("mimeref-milter.rules.yml"),
        dir.join("mimeref-milter.rules.yml"),
    )
    .unwrap();
    let out = Command::new(PROMTOOL)
        .args(["test", "rules", "real.test.yml"])
        .current_dir(dir)
        .output()
        .unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The daemon spawned on `port` with `config` written to `cfg`, its standard error in
/// DIR/daemon.log, MIMEREF_MILTER_TEST_PANIC set; stopped on drop whatever happens to
/// the test.
struct Started {
    child: Option<std::process::Child>,
    log: PathBuf,
}

impl Started {
    fn new(dir: &Path, cfg: &Path, config: &str, port: u16) -> Started {
        let (mut child, log) = Started::spawn(dir, cfg, config, &format!("inet:127.0.0.1:{port}"));
        let read = || std::fs::read_to_string(&log).unwrap_or_default();
        mta::wait_listening("daemon", &mut child, port, mta::WAIT, read);
        Started {
            child: Some(child),
            log,
        }
    }

    /// On the unix socket `sock` instead.
    fn new_unix(dir: &Path, cfg: &Path, config: &str, sock: &Path) -> Started {
        let (child, log) = Started::spawn(dir, cfg, config, &format!("unix:{}", sock.display()));
        let started = Started {
            child: Some(child),
            log,
        };
        mta::wait_for(mta::WAIT, || {
            std::os::unix::net::UnixStream::connect(sock).ok().map(drop)
        })
        .unwrap_or_else(|| panic!("not listening on {}:\n{}", sock.display(), started.log()));
        started
    }

    fn spawn(dir: &Path, cfg: &Path, config: &str, socket: &str) -> (std::process::Child, PathBuf) {
        std::fs::write(cfg, config).unwrap();
        let log = dir.join("daemon.log");
        let child = Command::new(mta::daemon_bin())
            .arg("serve")
            .arg("--config")
            .arg(cfg)
            .arg("--socket")
            .arg(socket)
            .env("RUST_LOG", "info")
            .env("MIMEREF_MILTER_TEST_PANIC", PANIC_TOKEN)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        (child, log)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            mta::terminate_child(&mut c, Duration::from_secs(15));
        }
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A daemon on a TCP milter port with its metrics endpoint, `extra` added to its
/// configuration: the folder, the milter port, the metrics port and the process.
fn started_with_metrics(name: &str, extra: &str) -> (TempDir, u16, u16, Started) {
    let dir = TempDir::new(name);
    let (port, http) = (free_port(), free_port());
    let cfg = dir.path().join("c.toml");
    let config = format!("metrics_listen = \"127.0.0.1:{http}\"\n{extra}");
    let child = Started::new(dir.path(), &cfg, &config, port);
    (dir, port, http, child)
}

/// The headline case: an MTA whose every negotiation is refused (one that does not
/// offer the actions the configuration needs) sends no message at all, so every
/// message it has gets milter_default_action. The daemon exports every term of the
/// share of refused mail from the start, at 0, so that the share is 1 here rather
/// than empty.
#[tokio::test]
async fn every_negotiation_refused_is_most_mail_refused() {
    if !require_promtool() {
        return;
    }
    let (dir, port, http, mut child) = started_with_metrics("alerts-refused", "");
    let before = parse(&scrape(http).await);
    for _ in 0..6 {
        assert!(open(port, Some(Actions::ADD_HEADER)).await.is_err());
    }
    let during_text = scrape(http).await;
    let during = parse(&during_text);
    child.stop();
    let want: BTreeSet<String> = [
        "MimerefMilterMailRefused",
        "MimerefMilterNegotiationRefused",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    if let Err(report) = promtool(dir.path(), &before, &during, http, &want) {
        panic!(
            "promtool on the real scrapes:\n{report}\nscrape:\n{during_text}\nlog:\n{}",
            child.log()
        );
    }
}

/// A unix socket file taken away under the running daemon (a second instance, a
/// cleanup job): the process still answers scrapes, so MimerefMilterDown cannot tell;
/// MimerefMilterSocketLost does, and nothing else fires.
#[tokio::test]
async fn a_socket_taken_away_is_socket_lost() {
    if !require_promtool() {
        return;
    }
    let dir = TempDir::new("alerts-socket");
    let http = free_port();
    let cfg = dir.path().join("c.toml");
    let sock = dir.path().join("m.sock");
    let mut child = Started::new_unix(
        dir.path(),
        &cfg,
        &format!("metrics_listen = \"127.0.0.1:{http}\"\n"),
        &sock,
    );
    let before = parse(&scrape(http).await);
    std::fs::remove_file(&sock).unwrap();
    let during_text = scrape(http).await;
    let during = parse(&during_text);
    child.stop();
    let want: BTreeSet<String> = ["MimerefMilterSocketLost".to_string()].into();
    if let Err(report) = promtool(dir.path(), &before, &during, http, &want) {
        panic!(
            "promtool on the real scrapes:\n{report}\nscrape:\n{during_text}\nlog:\n{}",
            child.log()
        );
    }
}

#[tokio::test]
async fn the_alerts_fire_on_the_daemons_real_metrics() {
    if !require_promtool() {
        return;
    }
    let dir = TempDir::new("alerts");
    let spill = dir.path().join("spill");
    std::fs::create_dir(&spill).unwrap();
    let (port, http) = (free_port(), free_port());
    let config = format!(
        r#"metrics_listen = "127.0.0.1:{http}"
metrics_max_connections = 2
max_connections = 3
log_target = "syslog"
syslog_socket = "{}"
[limits]
spill_threshold = 4096
spill_directory = "{}"
memory_budget = 1024
[policy.inbound]
"related-cid-duplicate" = "reject"
"extbody-url-unquoted" = "tempfail"
"#,
        dir.path().join("no-syslog.sock").display(),
        spill.display()
    );
    let cfg = dir.path().join("c.toml");
    let mut child = Started::new(dir.path(), &cfg, &config, port);
    let before = parse(&scrape(http).await);

    // Mail: 2 accepted, 10 rejected and 3 tempfailed by policy.
    let clean = eml(&fixture("milter/clean.eml"));
    for _ in 0..2 {
        assert_eq!(message(port, &clean).await, Status::Accept);
    }
    let reject = eml(&fixture("milter/cid-dup.eml"));
    for _ in 0..10 {
        assert!(matches!(
            message(port, &reject).await,
            Status::Reject { .. }
        ));
    }
    let tempfail = eml(&fixture("milter/top-extbody.eml"));
    for _ in 0..3 {
        assert!(matches!(
            message(port, &tempfail).await,
            Status::Tempfail { .. }
        ));
    }
    // The spill directory goes: a large message cannot spill, nor fit memory_budget.
    std::fs::remove_dir(&spill).unwrap();
    let mut large = clean.clone();
    large.body = b"0123456789abcdef\r\n".repeat(1000);
    assert!(matches!(
        message(port, &large).await,
        Status::Tempfail { .. }
    ));
    // A caught panic in the analysis (debug builds).
    let mut panicking = clean.clone();
    panicking.body = format!("{PANIC_TOKEN}\r\n").into_bytes();
    assert!(matches!(
        message(port, &panicking).await,
        Status::Tempfail { .. }
    ));
    // An MTA offering too few actions, three times.
    for _ in 0..3 {
        assert!(open(port, Some(Actions::ADD_HEADER)).await.is_err());
    }
    // curl at the milter port.
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut sink = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut sink)).await;
    // max_connections: 3 held, the fourth refused (once the connections above are
    // all closed, so that the three are the only ones).
    support::wait_until(
        "every connection so far closed",
        Duration::from_secs(10),
        Duration::from_millis(50),
        || async {
            let s = scrape(http).await;
            if s.lines().any(|l| l == "mimeref_connections_open 0") {
                Ok(())
            } else {
                Err(s)
            }
        },
    )
    .await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(open(port, None).await.unwrap());
    }
    let mut fourth = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(5), fourth.read_to_end(&mut sink)).await;
    // metrics_max_connections: 2 idle HTTP connections, the third refused.
    let idle: Vec<TcpStream> = vec![
        TcpStream::connect(("127.0.0.1", http)).await.unwrap(),
        TcpStream::connect(("127.0.0.1", http)).await.unwrap(),
    ];
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut third = TcpStream::connect(("127.0.0.1", http)).await.unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(5), third.read_to_end(&mut sink)).await;
    drop(idle);
    // A reload of a broken file.
    std::fs::write(&cfg, "max_connections = \"many\"\n").unwrap();
    Command::new("kill")
        .args(["-HUP", &child.pid().to_string()])
        .status()
        .unwrap();
    mta::wait_for(mta::WAIT, || {
        child.log().contains("reload failed").then_some(())
    })
    .unwrap_or_else(|| panic!("no failed reload:\n{}", child.log()));

    let during_text = scrape(http).await;
    let during = parse(&during_text);
    for c in held {
        c.close().await.unwrap();
    }
    child.stop();
    // Down: the scrape Prometheus would make now fails.
    assert!(TcpStream::connect(("127.0.0.1", http)).await.is_err());

    // End of message slower than 0.1 s (a slow CI machine) may reach the p99 alert.
    let over = |le: &str| -> f64 {
        during
            .values
            .iter()
            .filter(|(k, _)| {
                k.starts_with("mimeref_eom_seconds_bucket{") && k.contains(&format!("le=\"{le}\""))
            })
            .map(|(_, v)| v)
            .sum()
    };
    let slow_seen = over("+Inf") > over("0.1");
    let mut want: BTreeSet<String> = [
        "MimerefMilterMailRefused",
        "MimerefMilterTempfails",
        "MimerefMilterRejectSpike",
        "MimerefMilterSpillFailing",
        "MimerefMilterInternalErrors",
        "MimerefMilterNegotiationRefused",
        "MimerefMilterNonMilterPeers",
        "MimerefMilterConnectionsRefused",
        "MimerefMilterConnectionsNearLimit",
        "MimerefMilterHttpRefused",
        "MimerefMilterSyslogFailing",
        "MimerefMilterReloadFailed",
    ]
    .into_iter()
    .map(String::from)
    .collect();

    let mut expected_at = want.clone();
    if slow_seen {
        expected_at.insert("MimerefMilterSlowEndOfMessage".into());
    }
    if let Err(report) = promtool(dir.path(), &before, &during, http, &expected_at) {
        panic!(
            "promtool on the real scrapes:\n{report}\nscrape:\n{during_text}\nlog:\n{}",
            child.log()
        );
    }
    want.insert("MimerefMilterDown".into());
    let silent: Vec<_> = all_alerts().difference(&want).cloned().collect();
    eprintln!(
        "firing from the real metrics: {}; down after stop: MimerefMilterDown; not \
         called for: {}",
        expected_at.into_iter().collect::<Vec<_>>().join(", "),
        silent.join(", ")
    );
}

/// Mail transactions that stall past transaction_timeout (a stuck MTA, a dripping
/// client): each connection is closed and its message gets milter_default_action.
/// Both the timeouts and the cut transactions alert, and nothing else: the policy
/// refused no mail.
#[tokio::test]
async fn stalled_transactions_are_timeouts_and_cuts() {
    if !require_promtool() {
        return;
    }
    let (dir, port, http, mut child) =
        started_with_metrics("alerts-stalled", "transaction_timeout = 1\n");
    let before = parse(&scrape(http).await);
    let clean = eml(&fixture("milter/clean.eml"));
    assert_eq!(message(port, &clean).await, Status::Accept);
    // Two transactions opened with MAIL FROM and never finished.
    let mut stalled = Vec::new();
    for _ in 0..2 {
        let mut c = open(port, None).await.unwrap();
        connect(&mut c, REMOTE, None).await;
        assert_eq!(
            c.mail(["<alice@example.org>"]).await.unwrap(),
            Status::Continue
        );
        stalled.push(c);
    }
    let during_text = support::wait_until(
        "two transactions cut at transaction_timeout",
        Duration::from_secs(15),
        Duration::from_millis(200),
        || async {
            let s = scrape(http).await;
            let cut = "mimeref_transactions_cut_total{cause=\"transaction_timeout\"} 2";
            if s.lines().any(|l| l == cut) {
                Ok(s)
            } else {
                Err(s)
            }
        },
    )
    .await;
    let during = parse(&during_text);
    drop(stalled);
    child.stop();
    let want: BTreeSet<String> = ["MimerefMilterTimeouts", "MimerefMilterTransactionsCut"]
        .into_iter()
        .map(String::from)
        .collect();
    if let Err(report) = promtool(dir.path(), &before, &during, http, &want) {
        panic!(
            "promtool on the real scrapes:\n{report}\nscrape:\n{during_text}\nlog:\n{}",
            child.log()
        );
    }
}
