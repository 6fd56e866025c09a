//! The HTTP endpoint of `metrics_listen`: `/healthz`, `/readyz` through a failed reload
//! and the beginning of shutdown, and `/metrics` beside them.

#[path = "../support/mod.rs"]
mod support;

use std::time::Duration;

use indymilter_test::{Status, TestConnection};
use support::milter::*;

#[tokio::test]
async fn healthz_and_readyz_follow_the_daemon() {
    let m = Milter::start_http("health", "").await;
    let http = m.http.unwrap();
    assert_eq!(http_get(http, "/healthz").await, (200, "ok\n".into()));
    assert_eq!(http_get(http, "/readyz").await, (200, "ready\n".into()));

    // A reload whose file is invalid keeps the running configuration, which still
    // serves: still ready, and the body says what happened.
    m.reload_with("max_connections = \"many\"\n").await;
    let (code, body) = http_get(http, "/readyz").await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("last reload failed"), "{body}");
    m.reload_with("").await;
    assert_eq!(http_get(http, "/readyz").await, (200, "ready\n".into()));

    // A message in flight holds shutdown open: meanwhile the instance is alive but
    // takes no new connection.
    let mut c = a_message_in_flight(&m).await;
    let addr = m.addr;
    let run = m.begin_shutdown();
    let ready = readyz_turns(http, 503).await;
    assert_eq!(ready, (503, "not ready: shutting down\n".into()));
    assert_eq!(http_get(http, "/healthz").await.0, 200);
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());

    // The message in flight still finishes, and is counted.
    let (_, st) = c.eom().await.unwrap();
    assert_eq!(st, Status::Accept);
    c.close().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let (code, body) = http_get(http, "/metrics").await;
    assert_eq!(code, 200);
    assert!(
        body.contains("mimeref_messages_total{direction=\"inbound\""),
        "{body}"
    );
    // Only this test reloads in this binary: one failed, then one that loaded, which
    // puts the alerting gauge right again.
    assert!(
        body.contains("mimeref_reloads_total{result=\"failed\"} 1\n"),
        "{body}"
    );
    assert!(
        body.contains("mimeref_reloads_total{result=\"ok\"} 1\n"),
        "{body}"
    );
    assert!(
        body.contains("mimeref_config_last_reload_successful 1\n"),
        "{body}"
    );
    assert_eq!(http_get(http, "/nothing").await.0, 404);
}

#[tokio::test]
async fn metrics_keeps_the_exporter_response() {
    let m = Milter::start_http("health-metrics", "").await;
    let http = m.http.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(http).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf).to_lowercase();
    assert!(text.starts_with("http/1.1 200 ok\r\n"), "{text}");
    assert!(text.contains("\r\ncontent-type: text/plain\r\n"), "{text}");
    m.stop().await;
}

/// `mimeref-milter probe` as the image's HEALTHCHECK runs it: the binary, its exit
/// status and its one line.
/// A connection with a message begun (MAIL and the header sent, no end of message):
/// what holds a shutdown open.
async fn a_message_in_flight(m: &Milter) -> TestConnection {
    let mut c = m.conn().await;
    connect(&mut c, REMOTE, None).await;
    let msg = eml(&fixture("milter/clean.eml"));
    assert_eq!(
        c.mail(["<alice@example.org>"]).await.unwrap(),
        Status::Continue
    );
    send_headers(&mut c, &msg).await;
    c
}

async fn probe(args: &[String]) -> (Option<i32>, String) {
    let args = args.to_vec();
    tokio::task::spawn_blocking(move || {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_mimeref-milter"))
            .arg("probe")
            .args(&args)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn probe_exits_0_when_ready_and_1_with_the_reason_when_not() {
    let m = Milter::start_http("health-probe", "").await;
    let http = m.http.unwrap();
    let addr = m.addr;
    // The daemon's configuration as the probe reads it: /readyz of metrics_listen.
    let dir = std::env::temp_dir().join(format!("mimeref-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("probe.toml");
    std::fs::write(&cfg, format!("metrics_listen = \"{http}\"\n")).unwrap();
    let by_http = vec!["-c".to_string(), cfg.display().to_string()];
    let by_milter = vec![
        "--socket".to_string(),
        format!("inet:127.0.0.1:{}", addr.port()),
        "--timeout".to_string(),
        "3".to_string(),
    ];

    assert_eq!(
        probe(&by_http).await,
        (Some(0), format!("ready: http://{http}/readyz: ready\n"))
    );
    assert_eq!(
        probe(&by_milter).await,
        (
            Some(0),
            format!(
                "ready: inet:127.0.0.1:{}: milter protocol version 6 negotiated\n",
                addr.port()
            )
        )
    );

    // Draining: a message in flight holds shutdown open, the listener is closed.
    let mut c = a_message_in_flight(&m).await;
    let run = m.begin_shutdown();
    readyz_turns(http, 503).await;
    assert_eq!(
        probe(&by_http).await,
        (
            Some(1),
            format!("not ready: http://{http}/readyz: HTTP 503: not ready: shutting down\n")
        )
    );
    let (code, line) = probe(&by_milter).await;
    assert_eq!(code, Some(1), "{line}");
    assert!(
        line.starts_with(&format!(
            "not ready: inet:127.0.0.1:{0}: cannot connect to 127.0.0.1:{0}:",
            addr.port()
        )),
        "{line}"
    );

    // The message in flight still finishes and run() returns.
    let (_, st) = c.eom().await.unwrap();
    assert_eq!(st, Status::Accept);
    c.close().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();

    // Absent: nothing listens at metrics_listen (a daemon that never started).
    let gone = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    std::fs::write(&cfg, format!("metrics_listen = \"{gone}\"\n")).unwrap();
    let (code, line) = probe(&by_http).await;
    assert_eq!(code, Some(1), "{line}");
    assert!(
        line.starts_with(&format!(
            "not ready: http://{gone}/readyz: cannot connect to {gone}:"
        )),
        "{line}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
