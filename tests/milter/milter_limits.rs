//! `max_connections`: a connection over the limit is closed at once (the MTA then
//! applies its default action straight away instead of waiting out its connect
//! timeout), counted and reported by `/readyz`, while the open ones go on working.

#[path = "../support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use indymilter_test::Status;
use support::milter::*;
use tokio::io::AsyncReadExt;

/// Connects and waits for the daemon to close the connection: how long that took, or
/// None if it stayed open for 5 s.
async fn closed_within(addr: std::net::SocketAddr) -> Option<Duration> {
    let start = Instant::now();
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut buf = [0u8; 16];
    match tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await {
        // End of file or a reset: either way the MTA sees the milter gone.
        Ok(Ok(0)) | Ok(Err(_)) => Some(start.elapsed()),
        Ok(Ok(n)) => panic!("the daemon sent {n} octets unasked"),
        Err(_) => None,
    }
}

fn counter(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn connection_over_the_limit_is_closed_at_once() {
    let m = Milter::start_http("limits", "max_connections = 2\n").await;
    let http = m.http.unwrap();
    let mut a = m.conn().await;
    connect(&mut a, REMOTE, None).await;
    let mut b = m.conn().await;
    connect(&mut b, REMOTE, None).await;

    let (code, body) = http_get(http, "/readyz").await;
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("2 connections open"), "{body}");

    for _ in 0..3 {
        let took = closed_within(m.addr)
            .await
            .expect("connection over the limit left open");
        assert!(took < Duration::from_secs(1), "closed after {took:?}");
    }
    let (_, body) = http_get(http, "/metrics").await;
    assert_eq!(
        counter(&body, "mimeref_connections_refused_total"),
        3,
        "{body}"
    );
    assert!(body.contains("mimeref_connections_open 2"), "{body}");

    // The two open connections are unaffected.
    let msg = eml(&fixture("milter/clean.eml"));
    for c in [&mut a, &mut b] {
        let (_, st) = send(c, &Envelope::default(), &msg).await;
        assert_eq!(st, Status::Accept);
    }

    // Once one closes, a new connection is taken again.
    a.close().await.unwrap();
    let ready = readyz_turns(http, 200).await.0;
    assert_eq!(ready, 200);
    let mut c = m.conn().await;
    connect(&mut c, REMOTE, None).await;
    let (_, st) = send(&mut c, &Envelope::default(), &msg).await;
    assert_eq!(st, Status::Accept);
    c.close().await.unwrap();
    b.close().await.unwrap();
    m.stop().await;
}
