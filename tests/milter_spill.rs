//! Messages past the daemon's spill threshold go to a temporary file while they are
//! received and are read back at end of message: the actions must be exactly those of a
//! message kept in memory (body replacement byte for byte, the report header).

mod milter_util;

use indymilter_test::Status;
use milter_util::*;
use mimeref_milter::config::Config;
use mimeref_milter::engine;
use mimeref_milter::milter::session::SPILL_AT;
use mimeref_milter::policy::Direction;

/// nested-extbody.eml with a base64 attachment that takes it past the spill threshold.
fn large_nested() -> Vec<u8> {
    let raw = crlf(&fixture("nested-extbody.eml"));
    let close = b"--outer--";
    let at = raw
        .windows(close.len())
        .rposition(|w| w == close)
        .expect("close delimiter");
    let mut out = raw[..at].to_vec();
    out.extend_from_slice(
        b"--outer\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n",
    );
    let line = b"QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAx\r\n";
    while out.len() < SPILL_AT + (1 << 20) {
        out.extend_from_slice(line);
    }
    out.extend_from_slice(&raw[at..]);
    out
}

#[tokio::test]
async fn a_spilled_message_gets_the_same_body_replacement_as_one_in_memory() {
    let raw = large_nested();
    let m = Milter::start("spill", "").await;
    let mut c = m.conn().await;
    connect(&mut c, "192.0.2.10", None).await;
    let msg = eml(&raw);
    let env = Envelope {
        queue_id: Some("4SPILL1"),
        auth: None,
    };
    let (actions, status) = send(&mut c, &env, &msg).await;
    c.close().await.unwrap();
    m.stop().await;
    assert_eq!(status, Status::Accept);
    let body = replaced_body(&actions).expect("body replaced");
    let (wire, header_len) = as_received(&msg);
    assert!(wire.len() > SPILL_AT, "the test message must spill");
    let (fixed, _) = engine::fix(&wire, &Config::builtin().engine_options(Direction::Inbound));
    assert_eq!(body.len(), fixed.len() - header_len);
    assert!(
        body == fixed[header_len..],
        "replacement differs from the offline fix"
    );
    assert_ne!(body, msg.body);
    let rep = report(&actions, "X-MIMERef").expect("report header");
    assert!(rep.contains("fixed=extbody-url-word-too-long"), "{rep}");
    assert!(!rep.contains("oversize"), "{rep}");
}
