//! Logs where admins look, on the real binary: syslog datagrams with the mail facility
//! (a socket the test binds stands in for /dev/log), RFC 3339 time stamps on standard
//! error unless the journal stamps the lines itself, the queue id on message lines and
//! the connection number on connection lines, verdict words that say what happened,
//! forged report headers counted, and the warnings about settings that expose the
//! daemon, from `config-check` and at start.

#[path = "../support/mod.rs"]
mod support;

use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use indymilter_test::{Actions, Status, TestConnection};
use support::milter::*;
use support::mta::{self, free_port, Daemon, TempDir};

/// One message on a new connection from a remote client (inbound).
async fn message(port: u16, queue_id: &'static str, m: &Eml) -> Status {
    let mut c = open_local(port).await;
    connect(&mut c, REMOTE, None).await;
    let env = Envelope {
        queue_id: Some(queue_id),
        auth: None,
    };
    let (_, st) = send(&mut c, &env, m).await;
    c.close().await.unwrap();
    st
}

/// The clean fixture with a copy of the report header at the top, as a sender
/// forging it would add.
fn clean_with_forged_header() -> Eml {
    let mut m = eml(&fixture("milter/clean.eml"));
    m.headers
        .insert(0, (b"X-MIMERef".to_vec(), b" ok".to_vec()));
    m
}

/// The value of an unlabelled counter in a scrape.
async fn metric(http: u16, name: &str) -> u64 {
    let (_, body) = http_get(([127, 0, 0, 1], http).into(), "/metrics").await;
    body.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in:\n{body}"))
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

/// The datagrams that come within `wait` of each other, as text.
fn datagrams(rx: &UnixDatagram, wait: Duration) -> Vec<String> {
    rx.set_read_timeout(Some(wait)).unwrap();
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65536];
    while let Ok(n) = rx.recv(&mut buf) {
        out.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    out
}

/// With `log_target = "syslog"` every line is one datagram to `syslog_socket`, with
/// the mail facility, the program name and pid, and Postfix's `warning:` word: what
/// rsyslog files in mail.log next to Postfix's own lines. Nothing goes to standard
/// error. When the socket is gone, the lines go to standard error instead, each
/// counted in `mimeref_syslog_errors_total`.
#[tokio::test]
async fn syslog_lines_carry_the_mail_facility_and_the_queue_id() {
    let dir = TempDir::new("syslog");
    let sock = dir.path().join("log.sock");
    let rx = UnixDatagram::bind(&sock).unwrap();
    let http = free_port();
    let cfg = format!(
        "log_target = \"syslog\"\nsyslog_socket = \"{}\"\nmetrics_listen = \"127.0.0.1:{http}\"\n",
        sock.display()
    );
    let mut d = Daemon::start(&cfg, &[]);
    let pid = d.pid().unwrap();
    assert_eq!(
        message(d.port, "4FvB1Q2x7Zz", &eml(&fixture("milter/clean.eml"))).await,
        Status::Accept
    );
    let got = datagrams(&rx, Duration::from_millis(500));
    let head = |pri: u8| format!("<{pri}>mimeref-milter[{pid}]: ");
    // mail (2) × 8 + info (6)
    let line = got
        .iter()
        .find(|l| l.contains("verdict="))
        .unwrap_or_else(|| panic!("{got:#?}"));
    assert!(
        line.starts_with(&format!(
            "{}4FvB1Q2x7Zz: direction=inbound(default) verdict=ignore findings=0 ",
            head(22)
        )),
        "{line}"
    );
    // The direction's reasons in plain values, not Rust's `Some(...)`.
    assert!(
        got.iter().any(|l| l.contains(&format!(
            "debug: 4FvB1Q2x7Zz: direction inbound (auth=-, client={REMOTE}, daemon="
        ))),
        "{got:#?}"
    );
    // The connection line names the connection and the MTA (debug: mail × 8 + 7).
    assert!(
        got.iter().any(|l| l.starts_with(&head(23))
            && l.contains("debug: negotiated: ")
            && l.contains("(connection 2 from the MTA at 127.0.0.1:")),
        "{got:#?}"
    );
    if is_root() {
        // mail × 8 + warning (4), with the word Postfix uses.
        assert!(
            got.iter()
                .any(|l| l.starts_with(&format!("{}warning: running as root", head(20)))),
            "{got:#?}"
        );
    }
    assert!(
        !got.iter().any(|l| l.contains('\n')),
        "one line a datagram: {got:#?}"
    );
    assert_eq!(metric(http, "mimeref_syslog_errors_total").await, 0);
    assert!(d.log().trim().is_empty(), "stderr: {}", d.log());

    // syslog goes away: the lines come to standard error, and are counted.
    drop(rx);
    std::fs::remove_file(&sock).unwrap();
    assert_eq!(
        message(d.port, "4FvB1Q2x8Aa", &eml(&fixture("milter/clean.eml"))).await,
        Status::Accept
    );
    let log = d.log();
    assert!(
        log.lines().any(|l| l
            .starts_with("4FvB1Q2x8Aa: direction=inbound(default) verdict=ignore findings=0 ")
            && l.contains(&format!("(not sent to syslog {}: ", sock.display()))),
        "{log}"
    );
    let lost = log.matches("(not sent to syslog").count() as u64;
    assert!(lost >= 2, "{log}");
    support::wait_until(
        "every line not sent to syslog counted",
        Duration::from_secs(5),
        Duration::from_millis(50),
        || async {
            let n = metric(http, "mimeref_syslog_errors_total").await;
            let lost = d.log().matches("(not sent to syslog").count() as u64;
            if n == lost {
                Ok(())
            } else {
                Err(format!("{n} counted, {lost} lines"))
            }
        },
    )
    .await;
    d.stop();
}

/// `serve` with its standard error in `log`, `env` added, until it listens on `port`.
fn spawn(cfg: &Path, port: u16, log: &Path, env: &[(&str, &str)]) -> std::process::Child {
    spawn_into(cfg, port, std::fs::File::create(log).unwrap(), log, env)
}

/// [`spawn`] with standard error into `file`, which is `log` opened as the caller
/// needs it.
fn spawn_into(
    cfg: &Path,
    port: u16,
    file: std::fs::File,
    log: &Path,
    env: &[(&str, &str)],
) -> std::process::Child {
    let mut child = Command::new(mta::daemon_bin())
        .arg("serve")
        .arg("--config")
        .arg(cfg)
        .arg("--socket")
        .arg(format!("inet:127.0.0.1:{port}"))
        .env("RUST_LOG", "info")
        .env_remove("JOURNAL_STREAM")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .unwrap();
    let read = || std::fs::read_to_string(log).unwrap_or_default();
    mta::wait_listening("daemon", &mut child, port, mta::WAIT, read);
    child
}

/// Text lines on standard error start with an RFC 3339 time stamp (UTC), as a log file
/// outside systemd needs; under systemd, where JOURNAL_STREAM names the very stream
/// standard error is, the journal stamps them and the daemon does not. A
/// JOURNAL_STREAM inherited by a process whose standard error goes elsewhere does not
/// count.
#[tokio::test]
async fn text_lines_are_time_stamped_unless_the_journal_does_it() {
    let dir = TempDir::new("stamps");
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, "").unwrap();
    let stamp = regex::Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z +INFO ").unwrap();
    let bare = regex::Regex::new(r"^ *INFO ").unwrap();
    for (case, journal) in [
        ("plain", None),
        ("journal", Some(true)),
        ("other", Some(false)),
    ] {
        let log = dir.path().join(format!("{case}.log"));
        // The file the daemon's standard error will be: its device and inode, or
        // those of another file.
        std::fs::write(&log, "").unwrap();
        let other = dir.path().join("other");
        std::fs::write(&other, "").unwrap();
        let m = std::fs::metadata(if journal == Some(true) { &log } else { &other }).unwrap();
        let stream = format!("{}:{}", m.dev(), m.ino());
        let env: Vec<(&str, &str)> = match journal {
            None => vec![],
            Some(_) => vec![("JOURNAL_STREAM", stream.as_str())],
        };
        // spawn() recreates the file: truncate rather than replace, to keep the inode.
        let port = free_port();
        let file = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
        let mut child = spawn_into(&cfg, port, file, &log, &env);
        let read = || std::fs::read_to_string(&log).unwrap_or_default();
        assert_eq!(
            message(port, "5AbC9", &eml(&fixture("milter/clean.eml"))).await,
            Status::Accept
        );
        mta::terminate_child(&mut child, Duration::from_secs(15));
        let text = read();
        let info: Vec<&str> = text.lines().filter(|l| l.contains("INFO")).collect();
        assert!(info.len() >= 3, "{case}: {text}");
        let want = if journal == Some(true) { &bare } else { &stamp };
        for l in &info {
            assert!(want.is_match(l), "{case}: {l}");
        }
        assert!(
            info.iter()
                .any(|l| l.contains("5AbC9: direction=inbound(default) verdict=ignore findings=0")),
            "{case}: {text}"
        );
    }
}

/// The per-message line gives the verdict in `check`'s and the metrics' words, says
/// whether there were findings (`findings=0` on clean mail) and counts the forged report headers it deleted (`removed=`), which
/// `mimeref_forged_headers_removed_total` counts too; refused negotiations name the
/// connection.
#[tokio::test]
async fn message_lines_say_what_happened() {
    let http = free_port();
    let mut d = Daemon::start(&format!("metrics_listen = \"127.0.0.1:{http}\"\n"), &[]);
    assert_eq!(
        metric(http, "mimeref_forged_headers_removed_total").await,
        0
    );
    let clean = eml(&fixture("milter/clean.eml"));
    assert_eq!(message(d.port, "6C1EA1", &clean).await, Status::Accept);
    assert_eq!(
        message(d.port, "6C1EA2", &clean_with_forged_header()).await,
        Status::Accept
    );
    assert_eq!(
        message(d.port, "6C1EA3", &eml(&fixture("milter/top-extbody.eml"))).await,
        Status::Accept
    );
    // An MTA without the actions the configuration needs.
    let refused = TestConnection::configure()
        .exact_leading_space(true)
        .available_actions(Actions::ADD_HEADER)
        .open_tcp(("127.0.0.1", d.port))
        .await;
    assert!(refused.is_err());
    let log = support::wait_until(
        "the refused negotiation logged",
        Duration::from_secs(5),
        Duration::from_millis(50),
        || async {
            let log = d.log();
            if log.contains("milter negotiation(s)") {
                Ok(log)
            } else {
                Err(log)
            }
        },
    )
    .await;
    let line = |qid: &str| {
        log.lines()
            .find(|l| l.contains(&format!("{qid}: direction=")))
            .unwrap_or_else(|| panic!("no line for {qid}:\n{log}"))
            .to_string()
    };
    let l = line("6C1EA1");
    assert!(
        l.contains(" verdict=ignore findings=0 ") && l.contains(" edits=0 removed=0 "),
        "{l}"
    );
    let l = line("6C1EA2");
    assert!(
        l.contains(" verdict=ignore findings=0 ") && l.contains(" edits=0 removed=1 "),
        "{l}"
    );
    let l = line("6C1EA3");
    assert!(
        l.contains(" verdict=fix ") && l.contains(" edits=1 removed=0 "),
        "{l}"
    );
    // What the fix changed, before and after, not only that there was one.
    assert!(
        log.lines().any(|l| l.contains("6C1EA3: changed 0 extbody-url-unquoted Content-Type: \"message/external-body; access-type=URL; URL=http://"))
            && log.lines().any(|l| l.contains("6C1EA3: changed ") && l.contains("-> \"message/external-body; access-type=URL; URL=\\\"http://")),
        "{log}"
    );
    assert_eq!(
        metric(http, "mimeref_forged_headers_removed_total").await,
        1
    );
    // Connection 1 was the test harness's probe, 2 to 4 the messages.
    let refusal = log
        .lines()
        .find(|l| l.contains("milter negotiation(s)"))
        .unwrap();
    assert!(
        refusal.contains("among them connection 5 from the MTA at 127.0.0.1:"),
        "{refusal}"
    );
    d.stop();
}

/// `config-check` names each setting that exposes the daemon, with file and line, and
/// still says OK; `serve` logs the same at start, for the socket it actually listens on
/// (a `--socket` replaces the file's), and says when it runs as root.
#[tokio::test]
async fn exposed_settings_are_warned_about() {
    let dir = TempDir::new("exposed");
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        "socket = \"inet:0.0.0.0:8897\"\nmetrics_listen = \"0.0.0.0:9357\"\n",
    )
    .unwrap();
    let out = Command::new(mta::daemon_bin())
        .args(["config-check", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    let file = cfg.display();
    assert!(
        err.contains(&format!(
            "warning: {file}:1: socket inet:0.0.0.0:8897: listens on every address of this host"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "warning: {file}:2: metrics_listen 0.0.0.0:9357: not a loopback address"
        )),
        "{err}"
    );
    assert_eq!(is_root(), err.contains("warning: running as root"), "{err}");

    // A unix socket every local user may open, and a socket in the file that the
    // command line replaces by one on loopback.
    let sock = dir.path().join("m.sock");
    std::fs::write(&cfg, "socket = \"inet:0.0.0.0:8897\"\n\n").unwrap();
    let unix_cfg = dir.path().join("unix.toml");
    std::fs::write(
        &unix_cfg,
        format!(
            "socket = \"unix:{}\"\nsocket_mode = \"0666\"\n",
            sock.display()
        ),
    )
    .unwrap();
    let log = dir.path().join("serve.log");
    let port = free_port();
    let mut child = spawn(&cfg, port, &log, &[]);
    mta::terminate_child(&mut child, Duration::from_secs(15));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("listens on every address"), "{text}");
    assert_eq!(is_root(), text.contains("WARN running as root"), "{text}");

    let log = dir.path().join("unix.log");
    let file = std::fs::File::create(&log).unwrap();
    let mut child = Command::new(mta::daemon_bin())
        .arg("serve")
        .arg("--config")
        .arg(&unix_cfg)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .unwrap();
    let up = mta::wait_for(mta::WAIT, || sock.exists().then_some(()));
    mta::terminate_child(&mut child, Duration::from_secs(15));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(up.is_some(), "{text}");
    assert!(
        text.contains(&format!(
            "WARN {}:2: socket_mode \"0666\": every local user can connect",
            unix_cfg.display()
        )),
        "{text}"
    );
}

/// The value of a counter with these labels in a scrape (0 when the series is absent).
async fn labelled(http: u16, name: &str, labels: &str) -> u64 {
    let (_, body) = http_get(([127, 0, 0, 1], http).into(), "/metrics").await;
    let head = format!("{name}{{{labels}}} ");
    body.lines()
        .find(|l| l.starts_with(&head))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

/// A repair under a DKIM signature names on the message's line what it relied on (a
/// trusted verdict of this hop, a broken body hash), a withheld one why, and both are
/// counted by reason.
#[tokio::test]
async fn repairs_under_signatures_say_what_they_relied_on() {
    let http = free_port();
    let mut d = Daemon::start(
        &format!(
            "metrics_listen = \"127.0.0.1:{http}\"\nfix_signed = \"verified\"\n\
             trusted_authserv_ids = [\"mx.test.example\"]\n"
        ),
        &[],
    );
    let signed_total = |outcome: &str, reason: &str| {
        let labels = format!("outcome=\"{outcome}\",reason=\"{reason}\"");
        async move { labelled(http, "mimeref_signed_total", &labels).await }
    };
    assert_eq!(signed_total("repaired", "verified").await, 0);
    for (qid, f) in [
        ("7D2A01", "signed/dkim-verified.eml"),
        ("7D2A02", "signed/dkim-bh-broken.eml"),
        ("7D2A03", "signed/dkim-intact.eml"),
        ("7D2A04", "signed/dkim-verified-from-outside.eml"),
    ] {
        assert_eq!(
            message(d.port, qid, &eml(&fixture(f))).await,
            Status::Accept
        );
    }
    let log = support::wait_until(
        "four message lines",
        Duration::from_secs(5),
        Duration::from_millis(50),
        || async {
            let log = d.log();
            if log.contains("7D2A04: direction=") {
                Ok(log)
            } else {
                Err(log)
            }
        },
    )
    .await;
    let line = |qid: &str| {
        log.lines()
            .find(|l| l.contains(&format!("{qid}: direction=inbound")))
            .unwrap_or_else(|| panic!("no line for {qid}:\n{log}"))
            .to_string()
    };
    let l = line("7D2A01");
    assert!(
        l.contains(" verdict=fix ") && l.contains(" verified=mx.test.example:dkim=pass "),
        "{l}"
    );
    let l = line("7D2A02");
    assert!(
        l.contains(" verdict=fix ") && l.contains(" bh-broken=d=sender.example "),
        "{l}"
    );
    for qid in ["7D2A03", "7D2A04"] {
        let l = line(qid);
        assert!(
            !l.contains(" verdict=fix ") && l.contains(" withheld=no-verdict "),
            "{l}"
        );
    }
    assert_eq!(signed_total("repaired", "verified").await, 1);
    assert_eq!(signed_total("repaired", "bh-broken").await, 1);
    assert_eq!(signed_total("withheld", "no-verdict").await, 2);
    assert_eq!(signed_total("withheld", "not-enabled").await, 0);
    d.stop();
}

/// One message from `client` on a new connection, with `{daemon_name}` and an
/// authenticated login when given.
async fn message_from(
    port: u16,
    queue_id: &'static str,
    client: &str,
    daemon: Option<&str>,
    auth: Option<&'static str>,
    m: &Eml,
) -> Status {
    let mut c = open_local(port).await;
    connect(&mut c, client, daemon).await;
    let env = Envelope {
        queue_id: Some(queue_id),
        auth,
    };
    let (_, st) = send(&mut c, &env, m).await;
    c.close().await.unwrap();
    st
}

/// The line says why the direction was chosen, in the words of the setting that chose
/// it, and with `log_format = "json"` each value is a key of its own (numbers as
/// numbers), the text line kept in `message`; the jq example of docs/OPERATIONS.md runs on those
/// lines as they are.
#[tokio::test]
async fn lines_say_why_the_direction_and_json_lines_carry_every_value() {
    let cfg = r#"log_format = "json"
trusted_networks = ["198.51.100.0/24"]
outbound_daemons = ["submission"]
[[scope]]
name = "partner-relay"
client_networks = ["203.0.113.0/24"]
exempt = "ignore"
"#;
    let mut d = Daemon::start(cfg, &[]);
    let clean = eml(&fixture("milter/clean.eml"));
    let fix = eml(&fixture("milter/top-extbody.eml"));
    for (qid, client, daemon, auth, m) in [
        ("8J5A01", REMOTE, None, None, &fix),
        ("8J5A02", "198.51.100.7", None, None, &clean),
        ("8J5A03", REMOTE, Some("submission"), None, &clean),
        ("8J5A04", REMOTE, None, Some("alice"), &fix),
        ("8J5A05", "203.0.113.9", None, None, &fix),
    ] {
        assert_eq!(
            message_from(d.port, qid, client, daemon, auth, m).await,
            Status::Accept
        );
    }
    let log = support::wait_until(
        "five message lines",
        Duration::from_secs(5),
        Duration::from_millis(50),
        || async {
            let log = d.log();
            if log.contains("8J5A05: direction=") {
                Ok(log)
            } else {
                Err(log)
            }
        },
    )
    .await;
    d.stop();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let fields = |qid: &str| {
        lines
            .iter()
            .map(|l| &l["fields"])
            .find(|f| f["queue_id"] == qid && f.get("verdict").is_some())
            .unwrap_or_else(|| panic!("no line for {qid}:\n{log}"))
    };

    let f = fields("8J5A01");
    assert_eq!(f["client"], REMOTE);
    assert_eq!(f["direction"], "inbound");
    assert_eq!(f["direction_reason"], "default");
    assert_eq!(f["verdict"], "fix");
    assert_eq!(f["rules"], "extbody-url-unquoted");
    assert_eq!(f["findings"], 1);
    assert_eq!(f["edits"], 1);
    assert_eq!(f["removed"], 0);
    assert_eq!(f["body_replaced"], false);
    assert!(f["size"].as_u64().is_some_and(|n| n > 100), "{f}");
    assert!(f["ms"].is_u64(), "{f}");
    assert!(
        f.get("scope").is_none() && f.get("trusted_network").is_none(),
        "{f}"
    );
    // The text line, as `log_format = "text"` writes it.
    let m = f["message"].as_str().unwrap();
    assert!(
        m.starts_with(
            "8J5A01: direction=inbound(default) verdict=fix findings=1 rules=extbody-url-unquoted edits=1 removed=0 body_replaced=no size="
        ),
        "{m}"
    );

    let f = fields("8J5A02");
    assert_eq!(
        (
            &f["direction"],
            &f["direction_reason"],
            &f["trusted_network"]
        ),
        (
            &"outbound".into(),
            &"trusted_networks".into(),
            &"198.51.100.0/24".into()
        ),
        "{f}"
    );
    assert_eq!(f["rules"], "");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .starts_with("8J5A02: direction=outbound(trusted_networks:198.51.100.0/24) verdict=ignore findings=0 rules=- "),
        "{f}"
    );

    let f = fields("8J5A03");
    assert_eq!(
        (&f["direction_reason"], &f["daemon_name"]),
        (&"daemon".into(), &"submission".into()),
        "{f}"
    );
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .starts_with("8J5A03: direction=outbound(daemon:submission) verdict="),
        "{f}"
    );

    let f = fields("8J5A04");
    assert_eq!(
        (&f["direction"], &f["direction_reason"]),
        (&"outbound".into(), &"auth".into())
    );
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .starts_with("8J5A04: direction=outbound(auth) verdict="),
        "{f}"
    );

    // The scope that decided: its exemption, not the direction's policy.
    let f = fields("8J5A05");
    assert_eq!(
        (&f["direction_reason"], &f["scope"], &f["verdict"]),
        (&"default".into(), &"partner-relay".into(), &"ignore".into()),
        "{f}"
    );
    assert!(
        f["message"].as_str().unwrap().starts_with(
            "8J5A05: direction=inbound(default) verdict=ignore scope=partner-relay findings=1 "
        ),
        "{f}"
    );

    // The jq example of docs/OPERATIONS.md, run on these lines.
    if !Path::new("/usr/bin/jq").exists() {
        panic!("jq is not installed: sudo scripts/install-test-deps");
    }
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/OPERATIONS.md"))
        .unwrap();
    let (_, rest) = doc
        .split_once("| jq -R -r '")
        .expect("a jq example in docs/OPERATIONS.md");
    let (program, _) = rest.split_once('\'').unwrap();
    let dir = TempDir::new("jq");
    let file = dir.path().join("log.json");
    std::fs::write(&file, &log).unwrap();
    let out = Command::new("/usr/bin/jq")
        .args(["-R", "-r", program])
        .stdin(std::fs::File::open(&file).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success(), "{program}: {out:?}");
    let got = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        got,
        "8J5A01\tinbound\tdefault\tfix\textbody-url-unquoted\n\
         8J5A04\toutbound\tauth\tfix\textbody-url-unquoted\n",
        "{program}"
    );
}
