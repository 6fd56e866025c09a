//! The daemon asks Postfix for the macros it reads when the connection is negotiated, so
//! an admin's `milter_*_macros` lists do not matter to it (README, main.cf.snippet). The
//! other Postfix tests run with Postfix's default lists, which already hold those macros
//! and would hide a daemon that stopped asking; here every list is empty.
//! Needs root and the `postfix` package, as tests/mta/postfix_e2e.rs.
#[path = "../support/mod.rs"]
mod support;

use support::mta;

use mta::{Daemon, Postfix, PostfixConfig};

#[test]
fn direction_and_queue_id_without_any_milter_macros_in_main_cf() {
    if !mta::require_postfix() {
        return;
    }
    let (_sasl, sasl_main_cf) = mta::sasl_anonymous();
    let d = Daemon::start(
        &format!(
            r#"trusted_networks = []
outbound_daemons = ["{}"]
[policy.inbound]
"*" = "reject"
[policy.outbound]
"*" = "fix"
"#,
            mta::SUBMISSION_DAEMON_NAME
        ),
        &[],
    );
    let mut pfc = PostfixConfig::with_milter(&d.postfix_spec());
    pfc.submission = true;
    pfc.extra_main = [
        "connect",
        "helo",
        "mail",
        "rcpt",
        "data",
        "end_of_header",
        "end_of_data",
    ]
    .iter()
    .map(|stage| format!("milter_{stage}_macros ="))
    .chain(sasl_main_cf)
    .collect();
    let pf = Postfix::start(&pfc);
    let (input, _) = mta::nested_fixture("nested-1@sender.example");
    let from = "alice@sender.example";
    let to = ["bob@receiver.example"];

    // Inbound: no macro says otherwise.
    let r = pf.smtp().send(from, &to, &input);
    assert_eq!(r.code, 550, "plain smtpd: {r}\n{}", d.log());
    // {daemon_name}, asked for at connect because outbound_daemons is set.
    let mut c = pf.submission();
    let r = c.send(from, &to, &input);
    c.quit();
    assert_eq!(r.code, 250, "submission smtpd: {r}\n{}", d.log());
    // {auth_type}/{auth_authen}, asked for at MAIL.
    let mut c = pf.smtp();
    let r = c.cmd("AUTH ANONYMOUS dGVzdA==");
    assert_eq!(r.code, 235, "AUTH: {r}\n{}", pf.log());
    let r = c.send(from, &to, &input);
    c.quit();
    assert_eq!(r.code, 250, "after AUTH: {r}\n{}", d.log());

    // `i`, asked for at end of header: each verdict names Postfix's queue id.
    let log = d.log();
    let verdicts: Vec<(&str, &str)> = log
        .lines()
        .filter_map(|l| {
            let (head, tail) = l.split_once(": direction=")?;
            let qid = head.rsplit(' ').next()?;
            Some((qid, tail.split(' ').next()?))
        })
        .collect();
    let directions: Vec<&str> = verdicts.iter().map(|v| v.1).collect();
    // Each with the macro that decided it.
    assert_eq!(
        directions,
        [
            "inbound(default)",
            "outbound(daemon:submission)",
            "outbound(auth)"
        ],
        "{log}"
    );
    let postfix_log = pf.log();
    for (qid, _) in &verdicts {
        assert!(
            *qid != "NOQUEUE" && postfix_log.contains(&format!(" {qid}: ")),
            "queue id {qid:?} not in the Postfix log:\n{log}\n{postfix_log}"
        );
    }
}
