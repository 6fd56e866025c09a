//! The HTTP endpoint of `metrics_listen`: `/healthz`, `/readyz` through a failed reload
//! and the beginning of shutdown, and `/metrics` beside them.

#[path = "../support/mod.rs"]
mod support;

use std::time::Duration;

use indymilter_test::Status;
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
    let mut c = m.conn().await;
    connect(&mut c, REMOTE, None).await;
    let msg = eml(&fixture("milter/clean.eml"));
    assert_eq!(
        c.mail(["<alice@example.org>"]).await.unwrap(),
        Status::Continue
    );
    send_headers(&mut c, &msg).await;
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
