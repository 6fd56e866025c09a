//! Reload while connections are open, a reload that fails, and shutdown with a
//! transaction in flight.

#[path = "../support/mod.rs"]
mod support;

use std::time::Duration;

use indymilter_test::{ProtoOpts, Status};
use support::milter::*;

const REPORT: &str = "[policy.inbound]\n\"related-cid-duplicate\" = \"report\"\n";
const REJECT: &str = "[policy.inbound]\n\"related-cid-duplicate\" = \"reject\"\n";

#[tokio::test]
async fn reload_applies_to_new_connections_and_keeps_open_ones_on_their_snapshot() {
    let m = Milter::start("reload", REPORT).await;
    let cid = eml(&fixture("milter/cid-dup.eml"));
    let mut old = m.conn().await;
    connect(&mut old, "192.0.2.1", None).await;

    m.reload_with(REJECT).await;

    let mut new = m.conn().await;
    connect(&mut new, "192.0.2.1", None).await;
    let (_, st) = send(&mut new, &Envelope::default(), &cid).await;
    assert!(
        matches!(st, Status::Reject { .. }),
        "new connection: {st:?}"
    );
    // The connection opened before the reload still uses the old policy.
    let (_, st) = send(&mut old, &Envelope::default(), &cid).await;
    assert_eq!(st, Status::Accept, "open connection changed policy");
    old.close().await.unwrap();
    new.close().await.unwrap();

    // A broken file keeps the running configuration.
    m.reload_with("[policy.inbound]\n\"related-cid-duplicate\" = \"sometimes\"\n")
        .await;
    let mut c = m.conn().await;
    connect(&mut c, "192.0.2.1", None).await;
    let (_, st) = send(&mut c, &Envelope::default(), &cid).await;
    assert!(
        matches!(st, Status::Reject { .. }),
        "after failed reload: {st:?}"
    );
    c.close().await.unwrap();
    m.stop().await;
}

#[tokio::test]
async fn shutdown_lets_the_transaction_in_flight_finish() {
    let m = Milter::start("shutdown", "shutdown_timeout = 10\n").await;
    let addr = m.addr;
    let msg = eml(&fixture("milter/nested-extbody.eml"));
    let mut c = m.conn().await;
    connect(&mut c, "192.0.2.1", None).await;
    assert_eq!(c.mail(["<a@example.org>"]).await.unwrap(), Status::Continue);
    send_headers(&mut c, &msg).await;

    let run = m.begin_shutdown();
    // About elapsed time: run() must stay up for a while with a message in flight;
    // nothing to wait for but time.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !run.is_finished(),
        "run() returned with a message in flight"
    );
    // No new connections once shutdown has begun.
    let refused = tokio::time::timeout(
        Duration::from_secs(2),
        indymilter_test::TestConnection::configure()
            .exact_leading_space(true)
            .open_tcp(addr),
    )
    .await;
    assert!(
        !matches!(refused, Ok(Ok(_))),
        "a new connection was accepted during shutdown"
    );

    // The message in flight completes normally, with its fix.
    let want = accumulating(&c, ProtoOpts::NOREPLY_BODY);
    for chunk in msg.body.chunks(1000) {
        assert_eq!(c.body(chunk.to_vec()).await.unwrap(), want);
    }
    let (a, st) = c.eom().await.unwrap();
    assert_eq!(st, Status::Accept);
    assert!(replaced_body(&a).is_some());

    let res = tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("run() did not stop");
    res.unwrap().unwrap();
}

#[tokio::test]
async fn shutdown_deadline_bounds_the_wait() {
    let m = Milter::start("shutdown-deadline", "shutdown_timeout = 1\n").await;
    let mut c = m.conn().await;
    connect(&mut c, "192.0.2.1", None).await;
    assert_eq!(c.mail(["<a@example.org>"]).await.unwrap(), Status::Continue);
    let started = std::time::Instant::now();
    let run = m.begin_shutdown();
    // The MTA never finishes the message: run() still returns after the deadline.
    let res = tokio::time::timeout(Duration::from_secs(6), run)
        .await
        .expect("run() ignored its deadline");
    res.unwrap().unwrap();
    assert!(started.elapsed() >= Duration::from_millis(900));
}
