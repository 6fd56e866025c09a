//! Scopes end to end behind a real, private Postfix (see tests/support/mta/mod.rs): the
//! spawned daemon reads the envelope Postfix hands it (MAIL and RCPT arguments) and the
//! header fields, picks each recipient's scope, and Postfix delivers, rejects or passes
//! what the combined decision says. Every delivered message is compared byte for byte
//! with what `fix --as-milter` writes offline for the same envelope.
//! Needs root and the `postfix` package: `sudo scripts/install-test-deps`.
#[path = "../support/mod.rs"]
mod support;

use support::message::drop_fields;
use support::mta::{self, Daemon, Postfix, PostfixConfig};

/// Inbound mail through the main smtpd (loopback is not trusted here; submission is
/// outbound) and the shared scopes, the archive on the domain Postfix delivers to.
fn scopes() -> String {
    support::scopes::config("outbound_daemons = [\"submission\"]\n", "receiver.example")
}

const FROM: &str = "alice@sender.example";

/// The findings of the nested fixture, both fixed by the same body replacement.
const RULES: &str = "extbody-url-unencoded,extbody-url-unquoted";

/// The nested external-body message (two fixable findings, [`RULES`], fixed by one
/// body replacement) with Message-ID `<id>`, and its fix.
fn nested(id: &str) -> (Vec<u8>, Vec<u8>) {
    mta::nested_fixture(id)
}

/// `fix --as-milter` offline for inbound mail to `rcpts`: what Postfix should deliver.
fn offline(cfg: &str, msg: &[u8], rcpts: &[&str]) -> Vec<u8> {
    let mut args = vec!["--as-milter", "--direction", "inbound", "--from", FROM];
    for r in rcpts {
        args.extend(["--rcpt", r]);
    }
    mta::offline_fix(&args, cfg, msg)
}

/// One SMTP transaction in a fresh session: the reply to the end of data (or the
/// first refusal).
fn send(pf: &Postfix, rcpts: &[&str], msg: &[u8]) -> mta::Reply {
    let mut c = pf.smtp();
    let r = c.send(FROM, rcpts, msg);
    c.quit();
    r
}

/// The daemon's verdict lines (one per message), in order.
fn verdicts(d: &Daemon) -> Vec<String> {
    d.log()
        .lines()
        .filter(|l| l.contains(": direction="))
        .map(str::to_string)
        .collect()
}

/// `got` is `want`, byte for byte; else a line diff.
fn same(what: &str, want: &[u8], got: &[u8]) {
    assert!(got == want, "{what}:\n{}", mta::show_diff(want, got));
}

/// Delivered, byte for byte what `fix --as-milter` writes for the same envelope.
fn delivered_as_offline(
    pf: &Postfix,
    d: &Daemon,
    cfg: &str,
    id: &str,
    input: &[u8],
    rcpts: &[&str],
) -> mta::Delivered {
    let got = pf.wait_delivered(id);
    let want = offline(cfg, input, rcpts);
    let body = got.without_trace();
    assert_eq!(
        body,
        want,
        "{}\ndaemon log:\n{}",
        mta::show_diff(&want, &body),
        d.log()
    );
    for r in rcpts {
        assert!(
            got.envelope
                .iter()
                .any(|l| l.starts_with(&format!("X-Rcpt-Args: <{r}>"))),
            "{r}: {:?}",
            got.envelope
        );
    }
    got
}

#[test]
fn the_same_message_to_an_exempt_recipient_and_to_a_normal_one() {
    if !mta::require_postfix() {
        return;
    }
    let scopes = scopes();
    let (d, pf) = start_with(&scopes);
    let (input, _) = nested("scope-exempt@sender.example");
    let r = send(&pf, &["archive@receiver.example"], &input);
    assert_eq!(r.code, 250, "{r}\n{}", d.log());
    let got = delivered_as_offline(
        &pf,
        &d,
        &scopes,
        "scope-exempt@",
        &input,
        &["archive@receiver.example"],
    );
    same("exempt: delivered as sent", &input, &got.without_trace());

    let (input, fixed) = nested("scope-normal@sender.example");
    let r = send(&pf, &["bob@receiver.example"], &input);
    assert_eq!(r.code, 250, "{r}\n{}", d.log());
    let got = delivered_as_offline(
        &pf,
        &d,
        &scopes,
        "scope-normal@",
        &input,
        &["bob@receiver.example"],
    );
    same(
        "fixed",
        &fixed,
        &drop_fields(&got.without_trace(), "X-MIMERef"),
    );
    assert!(got.header("X-MIMERef")[0].starts_with("fix;"));

    let v = verdicts(&d);
    assert_eq!(v.len(), 2, "{v:?}");
    assert!(
        v[0].contains(&format!(
            "verdict=log scope=archive findings=2 rules={RULES} edits=0"
        )),
        "{v:?}"
    );
    assert!(
        v[1].contains("verdict=fix findings=") && !v[1].contains("scope="),
        "{v:?}"
    );
}

#[test]
fn a_reject_domain_and_a_report_domain() {
    if !mta::require_postfix() {
        return;
    }
    let scopes = scopes();
    let (d, pf) = start_with(&scopes);
    let (input, _) = nested("scope-strict@sender.example");
    let r = send(&pf, &["x@strict.example"], &input);
    assert_eq!(r.code, 550, "{r}\n{}", d.log());
    assert_eq!(
        r.text, "5.6.0 MIME reference error: extbody-url-unencoded, extbody-url-unquoted",
        "{r}"
    );

    let (input, _) = nested("scope-report@sender.example");
    let r = send(&pf, &["y@report.example"], &input);
    assert_eq!(r.code, 250, "{r}\n{}", d.log());
    let got = delivered_as_offline(
        &pf,
        &d,
        &scopes,
        "scope-report@",
        &input,
        &["y@report.example"],
    );
    same(
        "report only",
        &input,
        &drop_fields(&got.without_trace(), "X-MIMERef"),
    );
    assert_eq!(got.header("X-MIMERef"), [format!("report; rules={RULES}")]);
    // Nothing of the rejected message was delivered.
    assert!(pf
        .delivered()
        .iter()
        .all(|m| !String::from_utf8_lossy(&m.message).contains("scope-strict@")));
    let v = verdicts(&d);
    assert_eq!(v.len(), 2, "{v:?}");
    assert!(v[0].contains("verdict=reject scope=strict "), "{v:?}");
    assert!(v[1].contains("verdict=report scope=report-only "), "{v:?}");
}

/// One message for two recipients in different scopes: Postfix delivers it once (or
/// not at all), so the daemon decides once, on the safe side.
#[test]
fn two_recipients_in_different_scopes() {
    if !mta::require_postfix() {
        return;
    }
    let scopes = scopes();
    let (d, pf) = start_with(&scopes);
    let (input, _) = nested("scope-mixed@sender.example");
    let both = ["bob@receiver.example", "archive@receiver.example"];
    let r = send(&pf, &both, &input);
    assert_eq!(r.code, 250, "{r}\n{}", d.log());
    let got = delivered_as_offline(&pf, &d, &scopes, "scope-mixed@", &input, &both);
    // The archive's scope takes no fix: the fix is withheld and reported instead.
    same(
        "fix withheld",
        &input,
        &drop_fields(&got.without_trace(), "X-MIMERef"),
    );
    assert_eq!(got.header("X-MIMERef"), [format!("report; rules={RULES}")]);

    let (input, _) = nested("scope-mixed-2@sender.example");
    let r = send(
        &pf,
        &["archive@receiver.example", "x@strict.example"],
        &input,
    );
    assert_eq!(r.code, 550, "the strictest scope wins: {r}\n{}", d.log());

    let v = verdicts(&d);
    assert_eq!(v.len(), 2, "{v:?}");
    assert!(
        v[0].contains("verdict=report scope=default scopes=archive,default "),
        "{v:?}"
    );
    assert!(
        v[1].contains("verdict=reject scope=strict scopes=archive,strict "),
        "{v:?}"
    );
}

/// A list exempted by its List-Id passes as sent where the direction's policy rejects.
#[test]
fn mail_from_an_exempt_mailing_list() {
    if !mta::require_postfix() {
        return;
    }
    let cfg = scopes().replace(
        "outbound_daemons = [\"submission\"]\n",
        "outbound_daemons = [\"submission\"]\n[policy.inbound]\n\"*\" = \"reject\"\n",
    );
    let (d, pf) = start_with(&cfg);
    let list = |id: &str, list_id: &str| {
        let (m, _) = nested(id);
        let text = String::from_utf8(m).unwrap();
        let at = text.find("\nSubject:").expect("a Subject field") + 1;
        let mut t = text.clone();
        t.insert_str(at, &format!("List-Id: Announcements\n <{list_id}>\n"));
        t.into_bytes()
    };
    let input = list("scope-list@sender.example", "announce.example.org");
    let r = send(&pf, &["bob@receiver.example"], &input);
    assert_eq!(r.code, 250, "{r}\n{}", d.log());
    let got = delivered_as_offline(
        &pf,
        &d,
        &cfg,
        "scope-list@",
        &input,
        &["bob@receiver.example"],
    );
    same(
        "exempt list: delivered as sent",
        &input,
        &got.without_trace(),
    );

    let other = list("scope-list-2@sender.example", "other.lists.example.org");
    let r = send(&pf, &["bob@receiver.example"], &other);
    assert_eq!(r.code, 550, "another list: {r}\n{}", d.log());
    let (plain, _) = nested("scope-list-3@sender.example");
    let r = send(&pf, &["bob@receiver.example"], &plain);
    assert_eq!(r.code, 550, "no list: {r}\n{}", d.log());

    let v = verdicts(&d);
    assert_eq!(v.len(), 3, "{v:?}");
    assert!(
        v[0].contains("verdict=ignore scope=announce findings=")
            && v[0].contains(" rules=- ")
            && !v[0].contains("findings=0 "),
        "{v:?}"
    );
    assert!(v[1].contains("verdict=reject findings="), "{v:?}");
}

/// SIGHUP re-reads the scopes with the rest of the policy; SMTP sessions opened
/// afterwards (each its own milter connection) use them.
#[test]
fn sighup_brings_a_scope_in() {
    if !mta::require_postfix() {
        return;
    }
    let strict = "trusted_networks = []\n[policy.inbound]\n\"*\" = \"reject\"\n";
    let (d, pf) = start_with(strict);
    let (input, _) = nested("scope-hup-1@sender.example");
    let r = send(&pf, &["archive@receiver.example"], &input);
    assert_eq!(r.code, 550, "before the reload: {r}\n{}", d.log());

    let with_scope = format!(
        r#"{strict}[[scope]]
name = "archive"
recipients = ["archive@receiver.example"]
exempt = "ignore"
"#
    );
    d.reload_with(&with_scope);
    let (input, _) = nested("scope-hup-2@sender.example");
    let r = send(&pf, &["archive@receiver.example"], &input);
    assert_eq!(r.code, 250, "after the reload: {r}\n{}", d.log());
    let got = pf.wait_delivered("scope-hup-2@");
    same("exempt after the reload", &input, &got.without_trace());
    let r = send(&pf, &["bob@receiver.example"], &input);
    assert_eq!(r.code, 550, "other recipients still rejected: {r}");
}

fn start_with(cfg: &str) -> (Daemon, Postfix) {
    let d = Daemon::start(cfg, &[]);
    let mut pfc = PostfixConfig::with_milter("");
    pfc.milters = d.postfix_spec();
    let pf = Postfix::start(&pfc);
    (d, pf)
}
