//! Direction by each trigger, several messages per connection, abort, missing macros,
//! non-UTF-8 header bytes, oversize messages; "no reply" stages as negotiated, and the
//! message-level tests with and without them.

#[path = "../support/mod.rs"]
mod support;

use indymilter_test::{MacroStage, ProtoOpts, Status};
use support::milter::*;

/// Inbound rejects the duplicate Content-ID, outbound only reports it: the status tells
/// which direction the daemon chose.
const SPLIT: &str = r#"outbound_daemons = ["submission"]
[policy.inbound]
"related-cid-duplicate" = "reject"
[policy.outbound]
"related-cid-duplicate" = "report"
"#;

fn is_inbound(s: &Status) -> bool {
    match s {
        Status::Reject { .. } => true,
        Status::Accept => false,
        other => panic!("unexpected {other:?}"),
    }
}

async fn direction_of(
    m: &Milter,
    client: &str,
    daemon: Option<&str>,
    auth: Option<&'static str>,
) -> bool {
    let mut c = m.conn().await;
    connect(&mut c, client, daemon).await;
    let env = Envelope {
        queue_id: Some("Q1"),
        auth,
    };
    let (_, st) = send(&mut c, &env, &eml(&fixture("milter/cid-dup.eml"))).await;
    c.close().await.unwrap();
    is_inbound(&st)
}

#[tokio::test]
async fn direction_by_each_trigger() {
    let m = Milter::start("direction", SPLIT).await;
    assert!(
        direction_of(&m, "192.0.2.1", None, None).await,
        "remote, no auth: inbound"
    );
    assert!(
        !direction_of(&m, "192.0.2.1", None, Some("alice")).await,
        "authenticated: outbound"
    );
    assert!(
        !direction_of(&m, "127.0.0.1", None, None).await,
        "loopback (default trusted): outbound"
    );
    assert!(
        !direction_of(&m, "::1", None, None).await,
        "IPv6 loopback: outbound"
    );
    assert!(
        !direction_of(&m, "192.0.2.1", Some("submission"), None).await,
        "submission daemon: outbound"
    );
    assert!(
        direction_of(&m, "192.0.2.1", Some("smtpd"), None).await,
        "other daemon: inbound"
    );
    m.stop().await;

    let m = Milter::start(
        "direction-nets",
        &format!("trusted_networks = [\"198.51.100.0/24\"]\n{SPLIT}"),
    )
    .await;
    assert!(
        !direction_of(&m, "198.51.100.77", None, None).await,
        "trusted network: outbound"
    );
    assert!(
        direction_of(&m, "127.0.0.1", None, None).await,
        "loopback no longer listed: inbound"
    );
    m.stop().await;
}

#[tokio::test]
async fn missing_macros_mean_inbound_and_no_queue_id() {
    let m = Milter::start("no-macros", SPLIT).await;
    let mut c = m.conn().await;
    // A connection with no socket information at all, and no macros anywhere.
    assert_eq!(
        c.connect("unknown", indymilter_test::SocketInfo::Unknown)
            .await
            .unwrap(),
        accumulating(&c, ProtoOpts::NOREPLY_CONNECT)
    );
    let (_, st) = send(
        &mut c,
        &Envelope::default(),
        &eml(&fixture("milter/cid-dup.eml")),
    )
    .await;
    assert!(is_inbound(&st));
    c.close().await.unwrap();
    m.stop().await;
}

/// The stages negotiated "no reply" by default.
const NO_REPLY: ProtoOpts = ProtoOpts::NOREPLY_CONNECT
    .union(ProtoOpts::NOREPLY_HEADER)
    .union(ProtoOpts::NOREPLY_EOH)
    .union(ProtoOpts::NOREPLY_BODY);

#[tokio::test]
async fn no_reply_stages_follow_the_config_and_what_the_mta_offers() {
    let m = Milter::start("no-reply", "").await;
    let c = m.conn().await;
    let got = c.negotiated_opts() & NO_REPLY_ALL;
    // MAIL keeps its reply (tempfail during shutdown); end of message always answers.
    assert_eq!(got, NO_REPLY, "{:?}", c.negotiated_opts());
    c.close().await.unwrap();

    // An MTA that offers only some of them gets only those.
    let c = indymilter_test::TestConnection::configure()
        .exact_leading_space(true)
        .available_opts((ProtoOpts::all() - NO_REPLY_ALL) | ProtoOpts::NOREPLY_HEADER)
        .open_tcp(m.addr)
        .await
        .unwrap();
    assert_eq!(
        c.negotiated_opts() & NO_REPLY_ALL,
        ProtoOpts::NOREPLY_HEADER
    );
    c.close().await.unwrap();
    let c = m.conn_replying().await;
    assert!((c.negotiated_opts() & NO_REPLY_ALL).is_empty());
    c.close().await.unwrap();

    // Off in the config: taken on the next connection after a reload; a connection
    // already open keeps what it negotiated.
    let mut open = m.conn().await;
    m.reload_with("no_reply_stages = false\n").await;
    let c = m.conn().await;
    assert!((c.negotiated_opts() & NO_REPLY_ALL).is_empty());
    c.close().await.unwrap();
    assert_eq!(open.negotiated_opts() & NO_REPLY_ALL, NO_REPLY);
    connect(&mut open, REMOTE, None).await;
    let (a, st) = send(
        &mut open,
        &Envelope::default(),
        &eml(&fixture("milter/nested-extbody.eml")),
    )
    .await;
    assert_eq!(st, Status::Accept);
    assert!(replaced_body(&a).is_some());
    open.close().await.unwrap();
    m.stop().await;
}

/// Each message-level test below runs with "no reply" stages (the default, as Postfix
/// and Sendmail negotiate it) and with a reply to every stage.
const MODES: [(&str, &str); 2] = [("nr", ""), ("reply", "no_reply_stages = false\n")];

#[tokio::test]
async fn several_messages_on_one_connection_with_an_abort_between() {
    for (mode, cfg) in MODES {
        several_messages(&format!("several-{mode}"), cfg).await;
    }
}

async fn several_messages(name: &str, cfg: &str) {
    let m = Milter::start(name, cfg).await;
    let mut c = m.conn().await;
    assert_eq!(
        c.negotiated_opts().contains(NO_REPLY),
        cfg.is_empty(),
        "{name}: {:?}",
        c.negotiated_opts()
    );
    connect(&mut c, "192.0.2.1", None).await;
    let nested = eml(&fixture("milter/nested-extbody.eml"));
    let clean = eml(&fixture("milter/clean.eml"));
    let cid = eml(&fixture("milter/cid-dup.eml"));

    let (a, st) = send(
        &mut c,
        &Envelope {
            queue_id: Some("A1"),
            auth: None,
        },
        &nested,
    )
    .await;
    assert_eq!(st, Status::Accept);
    assert!(replaced_body(&a).is_some());

    // Second message aborted after the headers and part of the body.
    assert_eq!(c.mail(["<x@example.org>"]).await.unwrap(), Status::Continue);
    send_headers(&mut c, &cid).await;
    assert_eq!(
        c.body(cid.body[..20].to_vec()).await.unwrap(),
        accumulating(&c, ProtoOpts::NOREPLY_BODY)
    );
    c.abort().await.unwrap();

    // Nothing of the aborted message leaks into the next one.
    let (a, st) = send(
        &mut c,
        &Envelope {
            queue_id: Some("A3"),
            auth: None,
        },
        &clean,
    )
    .await;
    assert_eq!(st, Status::Accept);
    assert!(a.actions.is_empty(), "{:?}", a.actions);

    let (a, st) = send(
        &mut c,
        &Envelope {
            queue_id: Some("A4"),
            auth: None,
        },
        &cid,
    )
    .await;
    assert_eq!(st, Status::Accept);
    assert!(report(&a, "X-MIMERef")
        .unwrap()
        .contains("related-cid-duplicate"));
    c.close().await.unwrap();
    m.stop().await;
}

#[tokio::test]
async fn non_utf8_header_bytes_survive() {
    // A top-level field with Latin-1 bytes that the engine rewrites: the bytes must come
    // back unchanged around the repair.
    let mut msg = eml(&fixture("milter/top-extbody.eml"));
    let ct = msg
        .headers
        .iter_mut()
        .find(|(n, _)| n == b"Content-Type")
        .unwrap();
    ct.1.extend_from_slice(b"; x-note=\"caf\xe9\"");
    msg.headers
        .push((b"Subject".to_vec(), b" \xff\xfe raw".to_vec()));
    let m = Milter::start("non-utf8", "").await;
    let mut c = m.conn().await;
    connect(&mut c, "192.0.2.1", None).await;
    let (a, st) = send(&mut c, &Envelope::default(), &msg).await;
    assert_eq!(st, Status::Accept);
    let changes = header_changes(&a);
    let ct = changes
        .iter()
        .find(|c| c.0 == "Content-Type")
        .expect("Content-Type fixed");
    let v = ct.2.as_ref().unwrap();
    assert!(v.starts_with(b" message/external-body;"), "{v:?}");
    assert!(
        v.windows(4).any(|w| w == b"caf\xe9"),
        "Latin-1 byte changed: {v:?}"
    );
    // The Subject was never touched.
    assert!(changes.iter().all(|c| c.0 != "Subject"));
    c.close().await.unwrap();
    m.stop().await;
}

#[tokio::test]
async fn oversize_message_is_passed_on_whole_with_a_report() {
    for (mode, cfg) in MODES {
        oversize(mode, cfg).await;
    }
}

async fn oversize(mode: &str, cfg: &str) {
    let m = Milter::start(
        &format!("oversize-{mode}"),
        &format!("{cfg}[limits]\nmax_message_size = 2048\nmax_header_size = 1024\n"),
    )
    .await;
    let mut c = m.conn().await;
    connect(&mut c, "192.0.2.1", None).await;
    let mut msg = eml(&fixture("milter/nested-extbody.eml"));
    // Pad the first text part so the fixable part lies beyond the limit.
    let pad = "x".repeat(70) + "\r\n";
    let at = msg
        .body
        .windows(20)
        .position(|w| w == b"See the attachment.\r")
        .unwrap();
    let padding: Vec<u8> = pad.repeat(200).into_bytes();
    msg.body.splice(at..at, padding);
    let (a, st) = send(
        &mut c,
        &Envelope {
            queue_id: Some("BIG1"),
            auth: None,
        },
        &msg,
    )
    .await;
    assert_eq!(st, Status::Accept);
    assert!(
        replaced_body(&a).is_none(),
        "body of an incomplete message replaced"
    );
    let rep = report(&a, "X-MIMERef").expect("report header");
    assert!(
        rep.contains("message-too-large") && rep.ends_with("; oversize"),
        "{rep}"
    );

    // The next message on the connection is read whole again.
    let (a, _) = send(
        &mut c,
        &Envelope::default(),
        &eml(&fixture("milter/nested-extbody.eml")),
    )
    .await;
    assert!(replaced_body(&a).is_some());
    c.close().await.unwrap();
    m.stop().await;

    let m = Milter::start(
        &format!("oversize-reject-{mode}"),
        &format!("{cfg}[limits]\nmax_message_size = 2048\noversize_action = \"reject\"\nmax_header_size = 1024\n"),
    )
    .await;
    let mut c = m.conn().await;
    connect(&mut c, "192.0.2.1", None).await;
    let (_, st) = send(&mut c, &Envelope::default(), &msg).await;
    let Status::Reject { message: Some(r) } = st else {
        panic!("{st:?}")
    };
    assert_eq!(
        r.to_str().unwrap(),
        "550 5.6.0 MIME reference error: message-too-large"
    );
    c.close().await.unwrap();
    m.stop().await;
}

#[tokio::test]
async fn oversize_heading_stops_at_a_field_boundary() {
    let m = Milter::start("oversize-hdr", "[limits]\nmax_header_size = 1024\n").await;
    let mut c = m.conn().await;
    connect(&mut c, "192.0.2.1", None).await;
    let mut msg = eml(&fixture("milter/clean.eml"));
    for i in 0..40 {
        msg.headers.push((
            format!("X-Filler-{i}").into_bytes(),
            b" ".iter().chain(&[b'y'; 60]).copied().collect(),
        ));
    }
    c.macros(MacroStage::Mail, [("{auth_type}", "")])
        .await
        .unwrap();
    let (a, st) = send(&mut c, &Envelope::default(), &msg).await;
    assert_eq!(st, Status::Accept);
    assert!(report(&a, "X-MIMERef").unwrap().contains("oversize"));
    c.close().await.unwrap();
    m.stop().await;
}
