//! A client that authenticated with SMTP AUTH (SASL) submits outbound mail. Postfix tells
//! the milter with `{auth_type}` and `{auth_authen}` before MAIL FROM, and only when the
//! session is authenticated; the daemon must then apply the outbound policy, and the
//! inbound one to the same message from the same client without them.

#[path = "../support/mod.rs"]
mod support;

use indymilter_test::{MacroStage, Status, TestConnection};
use support::milter::*;

/// Inbound rejects, outbound fixes: the reply and the edits tell which policy applied.
/// No trusted network and no outbound daemon, so authentication is the only way out.
const CONFIG: &str = r#"trusted_networks = []
[policy.inbound]
"*" = "reject"
[policy.outbound]
"*" = "fix"
"#;

/// Over-long words in the URL of a top-level external-body: fixable, one rule.
const FIXTURE: &str = "milter/top-extbody.eml";

/// What Postfix's smtpd defines at MAIL FROM after `AUTH PLAIN` as alice
/// (`{auth_author}` only comes with a MAIL FROM `AUTH=` parameter).
const AUTHENTICATED: &[(&str, &str)] = &[
    ("{auth_type}", "PLAIN"),
    ("{auth_authen}", "alice"),
    ("{mail_addr}", "alice@example.org"),
];

/// The same session without AUTH: the auth macros are undefined, not empty.
const ANONYMOUS: &[(&str, &str)] = &[("{mail_addr}", "alice@example.org")];

/// MAIL FROM as Postfix sends it to a milter that asked for its MAIL macros: the macro
/// packet first, holding those asked for that have a value, then the command. When
/// none has one no packet is sent (indymilter-test refuses an empty one).
async fn mail_from(c: &mut TestConnection, defined: &[(&str, &str)]) {
    let asked = c
        .requested_macros()
        .get(&MacroStage::Mail)
        .map(|l| l.to_string_lossy().into_owned())
        .unwrap_or_default();
    let sent: Vec<(&str, &str)> = defined
        .iter()
        .filter(|(name, _)| asked.split(' ').any(|a| a == *name))
        .copied()
        .collect();
    if !sent.is_empty() {
        c.macros(MacroStage::Mail, sent).await.unwrap();
    }
    assert_eq!(
        c.mail(["<alice@example.org>"]).await.unwrap(),
        Status::Continue
    );
}

/// One message of `FIXTURE` on `c`, MAIL FROM with `defined` macros.
async fn submit(
    c: &mut TestConnection,
    defined: &[(&str, &str)],
    queue_id: &'static str,
) -> (indymilter_test::EomActions, Status) {
    mail_from(c, defined).await;
    let env = Envelope {
        queue_id: Some(queue_id),
        auth: None,
    };
    send_data(c, &env, &eml(&fixture(FIXTURE))).await
}

fn assert_inbound(what: &str, r: &(indymilter_test::EomActions, Status)) {
    let (actions, status) = r;
    let Status::Reject { message: Some(m) } = status else {
        panic!("{what}: inbound policy (reject) expected, got {status:?} {actions:?}")
    };
    assert_eq!(
        m.to_str().unwrap(),
        "550 5.6.0 MIME reference error: extbody-url-unquoted",
        "{what}"
    );
    assert!(actions.actions.is_empty(), "{what}: {:?}", actions.actions);
}

fn assert_outbound(what: &str, r: &(indymilter_test::EomActions, Status)) {
    let (actions, status) = r;
    assert_eq!(
        *status,
        Status::Accept,
        "{what}: outbound policy (fix) expected"
    );
    let changes = header_changes(actions);
    assert_eq!(changes.len(), 1, "{what}: {changes:?}");
    assert_eq!(
        (changes[0].0.as_str(), changes[0].1),
        ("Content-Type", 1),
        "{what}"
    );
    let rep = report(actions, "X-MIMERef").expect("report header");
    assert!(
        rep.starts_with(" fix; ") && rep.contains("fixed=extbody-url-unquoted"),
        "{what}: {rep}"
    );
}

#[tokio::test]
async fn authenticated_client_gets_the_outbound_policy() {
    let m = Milter::start("sasl-direction", CONFIG).await;

    let mut c = m.conn().await;
    connect(&mut c, REMOTE, None).await;
    assert_outbound(
        "AUTH PLAIN, then MAIL",
        &submit(&mut c, AUTHENTICATED, "4SASL1").await,
    );
    c.close().await.unwrap();

    let mut c = m.conn().await;
    connect(&mut c, REMOTE, None).await;
    assert_inbound(
        "same client, no AUTH",
        &submit(&mut c, ANONYMOUS, "4SASL2").await,
    );
    c.close().await.unwrap();

    m.stop().await;
}

/// AUTH is allowed after a finished transaction (RFC 4954 §4 only forbids it inside
/// one), so one SMTP session, and so one milter connection, can carry both directions.
#[tokio::test]
async fn direction_follows_auth_within_one_session() {
    let m = Milter::start("sasl-mid-session", CONFIG).await;
    let mut c = m.conn().await;
    connect(&mut c, REMOTE, None).await;
    assert_inbound("before AUTH", &submit(&mut c, ANONYMOUS, "4SASL3").await);
    assert_outbound("after AUTH", &submit(&mut c, AUTHENTICATED, "4SASL4").await);
    assert_outbound(
        "still authenticated",
        &submit(&mut c, AUTHENTICATED, "4SASL5").await,
    );
    c.close().await.unwrap();
    m.stop().await;
}
