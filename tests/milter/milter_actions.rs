//! Every action path of the daemon, driven over the milter protocol against the real
//! `run()`: fix a top-level header, fix a nested part by body replacement, report only,
//! reject and tempfail with the reply text, quarantine, dry run, forged report headers.

#[path = "../support/mod.rs"]
mod support;

use indymilter_test::{Actions, ProtoOpts, Status};
use mimeref_milter::engine;
use mimeref_milter::Config;
use mimeref_milter::Direction;
use support::milter::*;

async fn one(
    name: &str,
    config: &str,
    fixture_name: &str,
) -> (indymilter_test::EomActions, Status) {
    one_message(name, config, fixture_name, "4ABC123").await
}

#[tokio::test]
async fn negotiates_leading_space_and_only_needed_actions() {
    let m = Milter::start("negotiate", "").await;
    let c = m.conn().await;
    assert!(c.negotiated_opts().contains(ProtoOpts::LEADING_SPACE));
    let a = c.negotiated_actions();
    // REQUEST_MACROS (SMFIF_SETSYMLIST): the macro lists below, which the MTA offered.
    assert_eq!(
        a,
        Actions::ADD_HEADER
            | Actions::CHANGE_HEADER
            | Actions::REPLACE_BODY
            | Actions::REQUEST_MACROS
    );
    let macros = c.requested_macros();
    let all: Vec<String> = macros
        .values()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    let all = all.join(" ");
    for want in ["i", "{auth_authen}", "{client_addr}"] {
        assert!(
            all.split(' ').any(|w| w == want),
            "{want} not requested: {all}"
        );
    }
    // No outbound_daemons configured: {daemon_name} is not needed.
    assert!(!all.contains("{daemon_name}"), "{all}");
    c.close().await.unwrap();
    m.stop().await;

    let m = Milter::start("negotiate-q", "outbound_daemons = [\"submission\"]\n[report]\nenabled = false\n[policy.inbound]\n\"related-*\" = \"quarantine\"\n").await;
    let c = m.conn().await;
    assert_eq!(
        c.negotiated_actions(),
        Actions::CHANGE_HEADER
            | Actions::REPLACE_BODY
            | Actions::QUARANTINE
            | Actions::REQUEST_MACROS
    );
    let all: Vec<String> = c
        .requested_macros()
        .values()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    assert!(all.join(" ").contains("{daemon_name}"));
    c.close().await.unwrap();
    m.stop().await;
}

#[tokio::test]
async fn refuses_an_mta_without_the_needed_actions() {
    let m = Milter::start("refuse", "").await;
    let r = indymilter_test::TestConnection::configure()
        .exact_leading_space(true)
        .available_actions(Actions::ADD_HEADER)
        .open_tcp(m.addr)
        .await;
    assert!(r.is_err(), "negotiation should fail");
    m.stop().await;
}

#[tokio::test]
async fn fixes_a_top_level_field_with_change_header() {
    let raw = fixture("milter/top-extbody.eml");
    // The engine must see a finding here, or this test proves nothing.
    let a = engine::check(
        &to_crlf(&raw),
        &Config::builtin().engine_options(Direction::Inbound),
    );
    assert!(
        a.findings.iter().any(|f| f.fixable && f.part == "0"),
        "{:?}",
        a.findings
    );

    let (actions, status) = one("top", "", "milter/top-extbody.eml").await;
    assert_eq!(status, Status::Accept);
    let changes = header_changes(&actions);
    assert_eq!(changes.len(), 1, "{changes:?}");
    let (name, index, value) = &changes[0];
    assert_eq!((name.as_str(), *index), ("Content-Type", 1));
    let value = value.as_ref().unwrap();
    // Leading space kept (LEADING_SPACE), folds in the MTA's "\n" convention, no CR.
    assert!(
        value.starts_with(b" message/external-body;"),
        "{}",
        String::from_utf8_lossy(value)
    );
    assert!(
        value.windows(2).any(|w| w == b"\n "),
        "not folded: {}",
        String::from_utf8_lossy(value)
    );
    assert!(!value.contains(&b'\r'));
    assert!(
        replaced_body(&actions).is_none(),
        "body replaced for a top-level fix"
    );
    let rep = report(&actions, "X-MIMERef").expect("report header");
    assert!(rep.starts_with(" fix; rules="), "{rep}");
    assert!(rep.contains("fixed=extbody-url-unquoted"), "{rep}");
}

#[tokio::test]
async fn fixes_a_nested_part_with_one_body_replacement() {
    let raw = fixture("milter/nested-extbody.eml");
    let (actions, status) = one("nested", "", "milter/nested-extbody.eml").await;
    assert_eq!(status, Status::Accept);
    // Nothing to change in the top-level heading.
    assert!(
        header_changes(&actions).is_empty(),
        "{:?}",
        header_changes(&actions)
    );
    let body = replaced_body(&actions).expect("body replaced");
    // The new body is exactly the body of the offline fix of the same message as the
    // milter sees it: only the nested Content-Type changed, every other byte (including
    // the Latin-1 byte in a part header) is identical.
    let m = eml(&raw);
    let (wire, header_len) = as_received(&m);
    let (fixed, _) =
        engine::fix(&wire, &Config::builtin().engine_options(Direction::Inbound)).unwrap();
    assert_eq!(body, fixed[header_len..].to_vec());
    assert_ne!(body, m.body);
    assert!(
        body.windows(4).any(|w| w == b"caf\xe9"),
        "non-UTF-8 byte lost"
    );
    let rep = report(&actions, "X-MIMERef").unwrap();
    assert!(rep.contains("fixed=extbody-url-unquoted"), "{rep}");
}

#[tokio::test]
async fn report_only_changes_nothing_but_adds_the_report() {
    let (actions, status) = one(
        "report",
        "[policy.inbound]\n\"*\" = \"report\"\n",
        "milter/nested-extbody.eml",
    )
    .await;
    assert_eq!(status, Status::Accept);
    assert!(header_changes(&actions).is_empty());
    assert!(replaced_body(&actions).is_none());
    let rep = report(&actions, "X-MIMERef").unwrap();
    assert!(rep.starts_with(" report; rules="), "{rep}");
    assert!(
        rep.contains("extbody-url-unquoted") && !rep.contains("fixed="),
        "{rep}"
    );
}

#[tokio::test]
async fn unfixable_finding_under_fix_is_reported() {
    let (actions, status) = one("unfixable", "", "milter/cid-dup.eml").await;
    assert_eq!(status, Status::Accept);
    assert!(replaced_body(&actions).is_none());
    let rep = report(&actions, "X-MIMERef").unwrap();
    assert!(rep.starts_with(" report; "), "{rep}");
    assert!(rep.contains("related-cid-duplicate"), "{rep}");
}

#[tokio::test]
async fn reject_with_the_configured_reply_naming_the_rule() {
    let (actions, status) = one(
        "reject",
        "[policy.inbound]\n\"related-cid-duplicate\" = \"reject\"\n",
        "milter/cid-dup.eml",
    )
    .await;
    let Status::Reject { message: Some(m) } = status else {
        panic!("{status:?}")
    };
    assert_eq!(
        m.to_str().unwrap(),
        "550 5.6.0 MIME reference error: related-cid-duplicate"
    );
    assert!(actions.actions.is_empty(), "{:?}", actions.actions);

    let (_, status) = one(
        "reject-text",
        "[reply]\nreject = \"554 5.7.1 Refused ({rules})\"\n[policy.inbound]\n\"related-*\" = \"reject\"\n",
        "milter/cid-dup.eml",
    )
    .await;
    let Status::Reject { message: Some(m) } = status else {
        panic!("{status:?}")
    };
    // The glob takes in every related-* rule: the fixture's image has no
    // Content-Disposition either (related-part-disposition-missing).
    assert_eq!(
        m.to_str().unwrap(),
        "554 5.7.1 Refused (related-cid-duplicate, related-part-disposition-missing)"
    );
}

#[tokio::test]
async fn tempfail_with_reply() {
    let (actions, status) = one(
        "tempfail",
        "[policy.inbound]\n\"related-cid-*\" = \"tempfail\"\n",
        "milter/cid-dup.eml",
    )
    .await;
    let Status::Tempfail { message: Some(m) } = status else {
        panic!("{status:?}")
    };
    assert_eq!(
        m.to_str().unwrap(),
        "451 4.6.0 MIME reference error: related-cid-duplicate"
    );
    assert!(actions.actions.is_empty());
}

#[tokio::test]
async fn quarantine_with_reason_and_report() {
    let (actions, status) = one(
        "quarantine",
        "[policy.inbound]\n\"related-cid-duplicate\" = \"quarantine\"\n",
        "milter/cid-dup.eml",
    )
    .await;
    assert_eq!(status, Status::Accept);
    assert!(
        actions.has_quarantine("MIME reference error: related-cid-duplicate"),
        "{:?}",
        actions.actions
    );
    let rep = report(&actions, "X-MIMERef").unwrap();
    assert!(rep.starts_with(" quarantine; "), "{rep}");
}

#[tokio::test]
async fn dry_run_sends_nothing_and_rejects_nothing() {
    let cfg = "dry_run = true\n[policy.inbound]\n\"*\" = \"reject\"\n";
    let (actions, status) = one("dry", cfg, "milter/cid-dup.eml").await;
    assert_eq!(status, Status::Accept);
    assert!(actions.actions.is_empty(), "{:?}", actions.actions);
    let (actions, status) = one("dry-fix", "dry_run = true\n", "milter/nested-extbody.eml").await;
    assert_eq!(status, Status::Accept);
    assert!(actions.actions.is_empty(), "{:?}", actions.actions);
}

#[tokio::test]
async fn clean_message_is_accepted_untouched() {
    let (actions, status) = one("clean", "", "milter/clean.eml").await;
    assert_eq!(status, Status::Accept);
    assert!(actions.actions.is_empty(), "{:?}", actions.actions);
}

#[tokio::test]
async fn forged_report_headers_removed_inbound_only() {
    let mut msg = eml(&fixture("milter/top-extbody.eml"));
    msg.headers
        .insert(0, (b"X-MIMERef".to_vec(), b" ok".to_vec()));
    msg.headers
        .push((b"x-mimeref".to_vec(), b" fix; rules=forged".to_vec()));
    let m = Milter::start("forged", "").await;

    let mut c = m.conn().await;
    connect(&mut c, REMOTE, None).await;
    let (actions, _) = send(&mut c, &Envelope::default(), &msg).await;
    let ch = header_changes(&actions);
    let deletions: Vec<_> = ch
        .iter()
        .filter(|c| c.2.is_none())
        .map(|c| (c.0.as_str(), c.1))
        .collect();
    assert_eq!(deletions, [("X-MIMERef", 2), ("X-MIMERef", 1)]);
    // Deletions go before the new report header is added.
    let add = actions
        .actions
        .iter()
        .position(|a| matches!(a, indymilter_test::EomAction::AddHeader { .. }))
        .unwrap();
    let del = actions
        .actions
        .iter()
        .position(|a| matches!(a, indymilter_test::EomAction::DeleteHeader { .. }))
        .unwrap();
    assert!(del < add);
    c.close().await.unwrap();

    let mut c = m.conn().await;
    connect(&mut c, REMOTE, None).await;
    let env = Envelope {
        queue_id: None,
        auth: Some("alice"),
    };
    let (actions, _) = send(&mut c, &env, &msg).await;
    assert!(
        header_changes(&actions).iter().all(|c| c.2.is_some()),
        "outbound deletions: {:?}",
        header_changes(&actions)
    );
    c.close().await.unwrap();
    m.stop().await;
}

#[tokio::test]
async fn forged_report_headers_past_the_header_limit_are_removed_too() {
    // The MTA holds every field, also those past max_header_size that the daemon did not
    // buffer: a forged report there must go as well, by the MTA's own index.
    let mut msg = eml(&fixture("milter/clean.eml"));
    msg.headers
        .insert(0, (b"X-MIMERef".to_vec(), b" ok".to_vec()));
    for i in 0..40 {
        msg.headers.push((
            format!("X-Filler-{i}").into_bytes(),
            b" ".iter().chain(&[b'y'; 60]).copied().collect(),
        ));
    }
    msg.headers
        .push((b"X-MIMERef".to_vec(), b" ok; past the limit".to_vec()));
    let m = Milter::start("forged-past-limit", "[limits]\nmax_header_size = 1024\n").await;
    let mut c = m.conn().await;
    connect(&mut c, REMOTE, None).await;
    let (actions, st) = send(&mut c, &Envelope::default(), &msg).await;
    assert_eq!(st, Status::Accept);
    let deletions: Vec<_> = header_changes(&actions)
        .into_iter()
        .filter(|c| c.2.is_none())
        .map(|c| (c.0, c.1))
        .collect();
    assert_eq!(
        deletions,
        [("X-MIMERef".to_string(), 2), ("X-MIMERef".to_string(), 1)]
    );
    assert!(report(&actions, "X-MIMERef").unwrap().contains("oversize"));
    c.close().await.unwrap();
    m.stop().await;
}

#[tokio::test]
async fn report_header_can_be_renamed_or_turned_off() {
    let (actions, _) = one(
        "rename",
        "[report]\nheader = \"X-Ref-Check\"\n",
        "milter/cid-dup.eml",
    )
    .await;
    assert!(report(&actions, "X-Ref-Check").is_some());
    assert!(report(&actions, "X-MIMERef").is_none());
    let (actions, status) = one("off", "[report]\nenabled = false\n", "milter/cid-dup.eml").await;
    assert_eq!(status, Status::Accept);
    assert!(actions.actions.is_empty(), "{:?}", actions.actions);
}
