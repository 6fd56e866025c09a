//! Scopes in the daemon: the real `daemon::run` on 127.0.0.1:0, driven with the
//! envelope an MTA sends (MAIL and RCPT arguments, header fields). Which scope applies,
//! how several recipients' scopes combine, that a reload brings new scopes in for new
//! connections, that RCPT is asked for only when a scope needs it, and the metric that
//! names the deciding scope.

#[path = "../support/mod.rs"]
mod support;

use indymilter_test::{EomActions, ProtoOpts, Status, TestConnection};
use support::milter::*;

/// Over-long words in the URL of a top-level external-body: one fixable finding
/// (extbody-url-unquoted), fixed by one change of Content-Type under the built-in
/// policy.
const FIXTURE: &str = "milter/top-extbody.eml";

/// The shared scope configuration, the archive on example.net.
fn scopes() -> String {
    support::scopes::config("", "example.net")
}

/// One transaction: MAIL FROM `from`, RCPT TO each of `rcpts`, then `msg`.
async fn send_to(
    c: &mut TestConnection,
    from: &str,
    rcpts: &[&str],
    msg: &Eml,
    queue_id: &'static str,
) -> (EomActions, Status) {
    assert_eq!(c.mail([from]).await.unwrap(), Status::Continue);
    for r in rcpts {
        assert_eq!(c.rcpt([*r]).await.unwrap(), Status::Continue, "RCPT {r}");
    }
    let env = Envelope {
        queue_id: Some(queue_id),
        auth: None,
    };
    send_data(c, &env, msg).await
}

fn message() -> Eml {
    eml(&fixture(FIXTURE))
}

/// The fixture with a List-Id field after its Subject.
fn from_list(list_id: &str) -> Eml {
    let raw = String::from_utf8(fixture(FIXTURE)).unwrap().replace(
        "Subject: report\n",
        &format!("Subject: report\nList-Id: {list_id}\n"),
    );
    eml(raw.as_bytes())
}

/// The built-in policy's answer: Content-Type changed, `fix` in the report header.
fn assert_fixed(what: &str, r: &(EomActions, Status)) {
    assert_eq!(r.1, Status::Accept, "{what}");
    let changes = header_changes(&r.0);
    assert_eq!(changes.len(), 1, "{what}: {changes:?}");
    assert_eq!(changes[0].0, "Content-Type", "{what}");
    let rep = report(&r.0, "X-MIMERef").unwrap_or_default();
    assert!(rep.starts_with(" fix; "), "{what}: {rep:?}");
}

/// Passed as it came: no action at all.
fn assert_untouched(what: &str, r: &(EomActions, Status)) {
    assert_eq!(r.1, Status::Accept, "{what}");
    assert!(r.0.actions.is_empty(), "{what}: {:?}", r.0.actions);
}

/// Accepted unchanged, with the report header naming the finding.
fn assert_reported(what: &str, r: &(EomActions, Status)) {
    assert_eq!(r.1, Status::Accept, "{what}");
    assert!(header_changes(&r.0).is_empty(), "{what}: {:?}", r.0.actions);
    assert!(replaced_body(&r.0).is_none(), "{what}");
    assert_eq!(
        report(&r.0, "X-MIMERef").as_deref(),
        Some(" report; rules=extbody-url-unquoted"),
        "{what}"
    );
}

fn assert_rejected(what: &str, r: &(EomActions, Status)) {
    let Status::Reject { message: Some(m) } = &r.1 else {
        panic!("{what}: reject expected, got {:?} {:?}", r.1, r.0.actions)
    };
    assert_eq!(
        m.to_str().unwrap(),
        "550 5.6.0 MIME reference error: extbody-url-unquoted",
        "{what}"
    );
    assert!(r.0.actions.is_empty(), "{what}: {:?}", r.0.actions);
}

#[tokio::test]
async fn one_recipient_one_scope() {
    let m = Milter::start("scopes-one", &scopes()).await;
    let mut c = m.conn().await;
    connect(&mut c, REMOTE, None).await;
    let msg = message();
    let from = "<alice@example.org>";
    assert_fixed(
        "no scope",
        &send_to(&mut c, from, &["<bob@example.net>"], &msg, "SC1").await,
    );
    assert_untouched(
        "exempt recipient (log)",
        &send_to(&mut c, from, &["<Archive@Example.NET>"], &msg, "SC2").await,
    );
    assert_rejected(
        "reject domain",
        &send_to(&mut c, from, &["<x@strict.example>"], &msg, "SC3").await,
    );
    assert_reported(
        "report domain",
        &send_to(&mut c, from, &["<y@report.example>"], &msg, "SC4").await,
    );
    assert_untouched(
        "exempt mailing list (header)",
        &send_to(
            &mut c,
            from,
            &["<bob@example.net>"],
            &from_list("Announcements <announce.example.org>"),
            "SC5",
        )
        .await,
    );
    assert_fixed(
        "another list",
        &send_to(
            &mut c,
            from,
            &["<bob@example.net>"],
            &from_list("<other.example.org>"),
            "SC6",
        )
        .await,
    );
    c.close().await.unwrap();
    m.stop().await;
}

/// A milter sees one message for all its recipients: refusals take the strictest
/// scope, a fix is made only when every recipient's scope fixes, else it is reported.
#[tokio::test]
async fn several_recipients_take_the_safe_side() {
    let m = Milter::start("scopes-several", &scopes()).await;
    let mut c = m.conn().await;
    connect(&mut c, REMOTE, None).await;
    let msg = message();
    let from = "<alice@example.org>";
    assert_reported(
        "normal + exempt: the fix is withheld, the finding reported",
        &send_to(
            &mut c,
            from,
            &["<bob@example.net>", "<archive@example.net>"],
            &msg,
            "SC7",
        )
        .await,
    );
    assert_rejected(
        "exempt + reject domain: the strictest wins",
        &send_to(
            &mut c,
            from,
            &["<archive@example.net>", "<x@strict.example>"],
            &msg,
            "SC8",
        )
        .await,
    );
    assert_reported(
        "normal + report domain",
        &send_to(
            &mut c,
            from,
            &["<bob@example.net>", "<y@report.example>"],
            &msg,
            "SC9",
        )
        .await,
    );
    assert_fixed(
        "two recipients of no scope",
        &send_to(
            &mut c,
            from,
            &["<bob@example.net>", "<carol@example.net>"],
            &msg,
            "SC10",
        )
        .await,
    );
    // A new transaction forgets the recipients of the last one.
    assert_untouched(
        "exempt alone again",
        &send_to(&mut c, from, &["<archive@example.net>"], &msg, "SC11").await,
    );
    c.close().await.unwrap();
    m.stop().await;
}

/// The MTA sends RCPT only to a milter that asks for it: the daemon does when some
/// scope matches on recipients.
#[tokio::test]
async fn rcpt_is_asked_for_only_when_a_scope_reads_recipients() {
    let plain = Milter::start("scopes-norcpt", "trusted_networks = []\n").await;
    let c = plain.conn().await;
    assert!(
        c.negotiated_opts().contains(ProtoOpts::NO_RCPT),
        "{:?}",
        c.negotiated_opts()
    );
    c.close().await.unwrap();
    plain.stop().await;
    let scoped = Milter::start("scopes-rcpt", &scopes()).await;
    let c = scoped.conn().await;
    assert!(
        !c.negotiated_opts().contains(ProtoOpts::NO_RCPT),
        "{:?}",
        c.negotiated_opts()
    );
    c.close().await.unwrap();
    scoped.stop().await;
}

/// SIGHUP (here the reload channel the signal feeds) brings new scopes in for the
/// connections opened afterwards; an open connection keeps its configuration.
#[tokio::test(flavor = "current_thread")]
async fn a_reload_brings_scopes_in() {
    let strict = "trusted_networks = []\n[policy.inbound]\n\"*\" = \"reject\"\n";
    let m = Milter::start("scopes-reload", strict).await;
    let msg = message();
    let mut before = m.conn().await;
    connect(&mut before, REMOTE, None).await;
    assert_rejected(
        "before the reload",
        &send_to(&mut before, "<alice@example.org>", &[], &msg, "SCR1").await,
    );
    m.reload_with(&format!(
        "{strict}[[scope]]\nname = \"archive\"\nrecipients = [\"archive@example.net\"]\nexempt = \"ignore\"\n"
    ))
    .await;
    let mut after = m.conn().await;
    connect(&mut after, REMOTE, None).await;
    assert_untouched(
        "after the reload",
        &send_to(
            &mut after,
            "<alice@example.org>",
            &["<archive@example.net>"],
            &msg,
            "SCR2",
        )
        .await,
    );
    assert_rejected(
        "another recipient after the reload",
        &send_to(
            &mut after,
            "<alice@example.org>",
            &["<bob@example.net>"],
            &msg,
            "SCR3",
        )
        .await,
    );
    // The connection opened before keeps what it negotiated and its policy.
    assert_rejected(
        "the connection opened before",
        &send_to(&mut before, "<alice@example.org>", &[], &msg, "SCR4").await,
    );
    before.close().await.unwrap();
    after.close().await.unwrap();
    m.stop().await;
}

/// `mimeref_scope_messages_total` counts the messages a scope applied to, by the scope
/// that decided (`default` where the direction's policy did, beside a scope).
#[tokio::test]
async fn the_metric_names_the_deciding_scope() {
    // The recorder is the whole test binary's: outbound mail (the client's network is
    // trusted here) is this test's alone.
    let outbound = scopes().replace(
        "trusted_networks = []",
        &format!("trusted_networks = [\"{REMOTE}/32\"]"),
    );
    let m = Milter::start_http("scopes-metrics", &outbound).await;
    let mut c = m.conn().await;
    connect(&mut c, REMOTE, None).await;
    let msg = message();
    let from = "<alice@example.org>";
    send_to(&mut c, from, &["<x@strict.example>"], &msg, "SCM1").await;
    send_to(
        &mut c,
        from,
        &["<bob@example.net>", "<archive@example.net>"],
        &msg,
        "SCM2",
    )
    .await;
    send_to(&mut c, from, &["<bob@example.net>"], &msg, "SCM3").await;
    c.close().await.unwrap();
    let (code, body) = http_get(m.http.unwrap(), "/metrics").await;
    assert_eq!(code, 200);
    let line = |scope: &str, verdict: &str| {
        body.lines()
            .find(|l| {
                l.starts_with("mimeref_scope_messages_total{")
                    && l.contains(&format!("scope=\"{scope}\""))
                    && l.contains(&format!("verdict=\"{verdict}\""))
                    && l.contains("direction=\"outbound\"")
            })
            .map(|l| l.rsplit(' ').next().unwrap().to_string())
    };
    assert_eq!(line("strict", "reject").as_deref(), Some("1"), "{body}");
    assert_eq!(line("default", "report").as_deref(), Some("1"), "{body}");
    // A message no scope applies to is not counted here.
    assert!(
        !body
            .lines()
            .any(|l| l.starts_with("mimeref_scope_messages_total{") && l.contains("\"fix\"")),
        "{body}"
    );
    assert!(
        body.lines()
            .any(|l| l.starts_with("mimeref_messages_total{")
                && l.contains("direction=\"outbound\"")
                && l.contains("verdict=\"fix\"")),
        "{body}"
    );
    m.stop().await;
}
