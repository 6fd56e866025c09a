//! Received mail under a DKIM signature, repaired when a verifier at this hop says the
//! signature holds (`fix_signed = "verified"`, issue 38), behind a real, private Postfix
//! and Sendmail (see tests/support/mta/mod.rs). The recipe is read from
//! packaging/verified/ (docs/MTA.md, "Repairing received, DKIM-signed mail", shows it):
//! the verifier first, its Authentication-Results field trusted by authserv-id, fields
//! that a client forges with that id deleted before any milter sees them.
//!
//! The `harness_*` tests pin what the MTAs and verifiers do, with the probe milter
//! (tests/support/mta/probe.rs), independently of mimeref-milter; the others run the
//! daemon. The message is an Outlook-style inline image without Content-Disposition
//! from an address at the signing domain, signed with python3-dkim as the external
//! sender would. OpenDKIM reads the key from a file (TestPublicKeys), rspamd from a
//! DNS server of the test's own (tests/support/mta/dns.rs).
//! Needs root, postfix, the unpacked Sendmail, opendkim, python3-dkim and rspamd:
//! `sudo scripts/install-test-deps`.
#[path = "../support/mod.rs"]
mod support;

use support::mta;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use mta::probe::{Action, Probe, Seen};
use mta::{Daemon, DnsServer, Key, OpenDkim, Postfix, PostfixConfig, Rspamd, TempDir, DOMAIN};
use support::message::{drop_fields, fixture, split_fields};

/// The verifier's authserv-id in the recipe files.
const AUTHSERV_ID: &str = "mx.example.org";
/// A recipient at the domain the recipe's scope calls local, and one elsewhere.
const LOCAL_RCPT: &str = "bob@example.org";
const RELAY_RCPT: &str = "carol@elsewhere.example";
const FROM: &str = "alice@sender.example";
/// The fields the external sender signs.
const SIGNED_FIELDS: &str = "from:to:subject:message-id:mime-version:content-type";
/// What the sender's outgoing server wrote below its signature (outside `h=`): the
/// message arrives from the Internet with a trace of its own.
const SENDER_RECEIVED: &str = "Received: from [192.0.2.7] (laptop.sender.example [192.0.2.7])
\tby smtp.sender.example with ESMTPSA id 4Xy2Zq0abcz1
\tfor <bob@example.org>; Mon, 23 Nov 2026 10:00:01 +0000
";

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A file of the recipe, packaging/verified/NAME.
fn recipe(name: &str) -> String {
    let path = repo(&format!("packaging/verified/{name}"));
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The recipe's header_checks in a directory of the test's own, and the main.cf line
/// that uses it.
fn header_checks() -> (TempDir, String) {
    let dir = TempDir::new("header-checks");
    let path = dir.path().join("header_checks");
    fs::write(&path, recipe("header_checks")).unwrap();
    let line = format!("header_checks = regexp:{}", path.display());
    (dir, line)
}

fn postfix(milters: &[String], extra_main: &[String]) -> Postfix {
    let mut cfg = PostfixConfig::with_milter(&milters.join(", "));
    cfg.extra_main = extra_main.to_vec();
    Postfix::start(&cfg)
}

fn send(pf: &Postfix, rcpt: &str, msg: &[u8]) {
    let mut c = pf.smtp();
    let r = c.send(FROM, &[rcpt], msg);
    c.quit();
    assert_eq!(r.code, 250, "{r}\n{}", pf.log());
}

/// The Outlook fixture (an inline image in multipart/related without
/// Content-Disposition: related-part-disposition-missing) from the signing domain to
/// the local one, with Message-ID `<id>`.
fn outlook(id: &str) -> Vec<u8> {
    let m = String::from_utf8(fixture("inline/disposition-missing.eml")).unwrap();
    let m = m
        .replacen(
            "From: Alice <alice@example.org>",
            &format!("From: Alice <alice@{DOMAIN}>"),
            1,
        )
        .replacen("To: Bob <bob@example.net>", "To: Bob <bob@example.org>", 1)
        .replacen(
            "Message-ID: <DB9PR07MB1234A5B6C7D8E9F0@DB9PR07MB1234.eurprd07.prod.outlook.com>",
            &format!("Message-ID: <{id}>"),
            1,
        );
    assert!(m.contains(&format!("<{id}>")) && m.contains(DOMAIN), "{m}");
    m.into_bytes()
}

/// [`outlook`] as it comes from the Internet: signed by the sender's domain, the
/// sender's trace field below the signature.
fn external(key: &Key, id: &str) -> Vec<u8> {
    let signed = key.sign(&outlook(id), SIGNED_FIELDS);
    let (fields, rest) = split_fields(&signed);
    let mut out = fields[0].clone();
    assert!(out.starts_with(b"DKIM-Signature:"));
    out.extend_from_slice(SENDER_RECEIVED.as_bytes());
    for f in &fields[1..] {
        out.extend_from_slice(f);
    }
    out.extend_from_slice(&rest);
    assert!(key.verifies(&out), "the external message does not verify");
    out
}

/// `msg` with `fields` (whole lines) put at the very top, as a client sends them.
fn on_top(fields: &str, msg: &[u8]) -> Vec<u8> {
    let mut out = fields.as_bytes().to_vec();
    out.extend_from_slice(msg);
    out
}

/// A client's claim that the verifier at this hop passed the signature.
fn forged_pass() -> String {
    format!("Authentication-Results: {AUTHSERV_ID}; dkim=pass header.d={DOMAIN} header.s=mimeref\n")
}

/// The values of the Authentication-Results fields a milter was handed, in order.
fn ar_seen(seen: &Seen) -> Vec<String> {
    seen.headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("Authentication-Results"))
        .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
        .collect()
}

/// The names of the fields a milter was handed, in order.
fn names_seen(seen: &Seen) -> Vec<String> {
    seen.headers.iter().map(|(n, _)| n.clone()).collect()
}

/// The one message a probe saw.
fn only(probe: &Probe) -> Seen {
    let seen = probe.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    seen.into_iter().next().unwrap()
}

// ---------------------------------------------------------------------------
// What removes a forged field before the milters, measured with the probe.

/// Forged fields in the forms a client can write them: each claims the verifier's
/// authserv-id, in another spelling of the same field.
fn forgeries() -> String {
    format!(
        "Authentication-Results: {id}; dkim=pass header.d={DOMAIN}
Authentication-Results:{id};dkim=pass header.d={DOMAIN}
authentication-results: (checked) \"MX.Example.ORG\" 1; dkim=pass header.d={DOMAIN}
Authentication-Results:
\t{id};
\tdkim=pass header.d={DOMAIN}
Authentication-Results: {id}/4Xy2Zq0abcz1; dkim=pass header.d={DOMAIN}
",
        id = AUTHSERV_ID
    )
}

/// Fields that only look alike: another authserv-id, and one that begins with the
/// trusted id.
const LOOKALIKES: &str = "Authentication-Results: gw.example.org; dkim=pass header.d=sender.example
Authentication-Results: mx.example.org.attacker.example; dkim=pass header.d=sender.example
";

/// Postfix's header_checks run in cleanup before the message is queued, and the
/// milters are handed the queued message: a field the recipe's table deletes never
/// reaches `smtpd_milters`, while a field a milter adds is not subject to it.
#[test]
fn harness_postfix_header_checks_delete_forged_fields_before_the_milters() {
    if !mta::require_postfix() || !mta::require_opendkim() {
        return;
    }
    let key = Key::generate();
    let id = "hc-1@sender.example";
    let input = on_top(&format!("{}{LOOKALIKES}", forgeries()), &external(&key, id));
    let added = format!("{AUTHSERV_ID}; dkim=pass (added by a milter)");
    let adder = Probe::start(vec![Action::Insert(
        1,
        "Authentication-Results".into(),
        added.clone(),
    )]);
    let recorder = Probe::start(vec![]);
    let (_checks, line) = header_checks();
    let pf = postfix(&[adder.postfix_spec(), recorder.postfix_spec()], &[line]);
    send(&pf, LOCAL_RCPT, &input);
    let got = pf.wait_delivered(id);
    let text = String::from_utf8_lossy(&got.message).into_owned();

    let first = only(&adder);
    let seen = only(&recorder);
    // Neither milter saw a forged field; the other ids passed.
    let lookalikes = [
        "gw.example.org; dkim=pass header.d=sender.example",
        "mx.example.org.attacker.example; dkim=pass header.d=sender.example",
    ];
    assert_eq!(ar_seen(&first), lookalikes, "{:?}", names_seen(&first));
    // The adder's field (inserted at index 1, after Postfix's own Received field,
    // which index 0 counts) comes first for the next milter.
    assert_eq!(
        ar_seen(&seen),
        [added.as_str(), lookalikes[0], lookalikes[1]],
        "{:?}",
        names_seen(&seen)
    );
    assert!(
        names_seen(&seen)[0] == "Authentication-Results",
        "{:?}",
        names_seen(&seen)
    );
    // The only trace field a milter is handed is the sender's: Postfix's own is not.
    let received: Vec<_> = seen
        .headers
        .iter()
        .filter(|(n, _)| n == "Received")
        .collect();
    assert_eq!(received.len(), 1, "{received:?}");
    assert!(
        String::from_utf8_lossy(&received[0].1).contains("by smtp.sender.example"),
        "{received:?}"
    );
    // Delivered: Postfix's Received, the milter's field, the rest without forgeries.
    let ar = got.header("Authentication-Results");
    assert_eq!(ar, [added.as_str(), lookalikes[0], lookalikes[1]], "{text}");
    let (fields, _) = split_fields(&got.message);
    assert!(
        fields[0].starts_with(b"Received: from client.example")
            && fields[1] == format!("Authentication-Results: {added}\n").as_bytes(),
        "{text}"
    );
    // STRIP logs each deletion (the field's name as the client spelled it).
    let log = pf.log();
    assert_eq!(
        log.to_ascii_lowercase()
            .matches("strip: header authentication-results")
            .count(),
        5,
        "{log}"
    );
    key.assert_holds(&got.message, &text);
}

/// IGNORE, the recipe's alternative to STRIP, deletes the same fields before the
/// milters, without a log line.
#[test]
fn harness_postfix_header_checks_ignore_deletes_silently() {
    if !mta::require_postfix() || !mta::require_opendkim() {
        return;
    }
    let key = Key::generate();
    let id = "hc-3@sender.example";
    let input = on_top(&format!("{}{LOOKALIKES}", forgeries()), &external(&key, id));
    let (dir, line) = header_checks();
    let table = recipe("header_checks");
    let strip = " STRIP forged Authentication-Results\n";
    assert!(table.ends_with(strip), "{table}");
    let ignore = format!("{} IGNORE\n", &table[..table.len() - strip.len()]);
    fs::write(dir.path().join("header_checks"), ignore).unwrap();
    let recorder = Probe::start(vec![]);
    let pf = postfix(&[recorder.postfix_spec()], &[line]);
    send(&pf, LOCAL_RCPT, &input);
    pf.wait_delivered(id);
    assert_eq!(ar_seen(&only(&recorder)), LOOKALIKES_SEEN);
    let log = pf.log();
    assert!(
        !log.contains("strip:") && log.contains("message-id=<hc-3@"),
        "{log}"
    );
}

/// The control: without the table, the forged fields reach every milter.
#[test]
fn harness_postfix_without_header_checks_hands_forged_fields_to_the_milters() {
    if !mta::require_postfix() || !mta::require_opendkim() {
        return;
    }
    let key = Key::generate();
    let id = "hc-2@sender.example";
    let input = on_top(&forgeries(), &external(&key, id));
    let recorder = Probe::start(vec![]);
    let pf = postfix(&[recorder.postfix_spec()], &[]);
    send(&pf, LOCAL_RCPT, &input);
    pf.wait_delivered(id);
    let seen = only(&recorder);
    let ar = ar_seen(&seen);
    assert_eq!(ar.len(), 5, "{ar:?}");
    assert_eq!(
        ar[0],
        format!("{AUTHSERV_ID}; dkim=pass header.d={DOMAIN}"),
        "{ar:?}"
    );
    // Above the sender's Received field, where a verifier at this hop puts its own.
    assert_eq!(names_seen(&seen)[0], "Authentication-Results");
}

/// OpenDKIM verifying first, with the recipe's snippet: its own field comes first for
/// the next milter, every field claiming its authserv-id is gone (RemoveARAll: a
/// forged spf result too), other ids stay, and the signature still holds.
#[test]
fn harness_opendkim_first_deletes_forged_fields_and_records_pass() {
    if !mta::require_postfix() || !mta::require_opendkim() {
        return;
    }
    let key = Key::generate();
    let id = "od-1@sender.example";
    let forged = format!(
        "{}Authentication-Results: {AUTHSERV_ID}; spf=pass smtp.mailfrom={DOMAIN}\n",
        forged_pass()
    );
    let input = on_top(&format!("{forged}{LOOKALIKES}"), &external(&key, id));
    let od = OpenDkim::verifier(&key, &recipe("opendkim.conf"));
    let recorder = Probe::start(vec![]);
    let pf = postfix(&[od.postfix_spec(), recorder.postfix_spec()], &[]);
    send(&pf, LOCAL_RCPT, &input);
    let got = pf.wait_delivered(id);
    let text = String::from_utf8_lossy(&got.message).into_owned();

    let seen = only(&recorder);
    let ar = ar_seen(&seen);
    assert_eq!(names_seen(&seen)[0], "Authentication-Results", "{ar:?}");
    assert_eq!(ar.len(), 3, "{ar:?}");
    assert!(
        ar[0].starts_with(&format!("{AUTHSERV_ID};"))
            && ar[0].contains("dkim=pass")
            && ar[0].contains(&format!("header.d={DOMAIN}"))
            && ar[0].contains("header.b="),
        "{ar:?}"
    );
    assert_eq!(ar[1..], LOOKALIKES_SEEN, "{ar:?}");
    assert_eq!(got.header("Authentication-Results")[1..], LOOKALIKES_SEEN);
    // Debian's OpenDKIM inserts at index 0 (its insheader.patch; upstream 2.11 uses 1),
    // which Postfix puts above its own Received field.
    let (fields, _) = split_fields(&got.message);
    assert!(
        fields[0].starts_with(b"Authentication-Results: mx.example.org;")
            && fields[1].starts_with(b"Received: from client.example"),
        "{text}"
    );
    key.assert_holds(&got.message, &text);
}

/// The lookalike fields as a milter is handed them (one space after the colon dropped).
const LOOKALIKES_SEEN: [&str; 2] = [
    "gw.example.org; dkim=pass header.d=sender.example",
    "mx.example.org.attacker.example; dkim=pass header.d=sender.example",
];

/// Without RemoveARAll, OpenDKIM deletes only the fields with its authserv-id that
/// carry a dkim result: a forged spf claim passes on.
#[test]
fn harness_opendkim_without_removearall_keeps_other_forged_methods() {
    if !mta::require_postfix() || !mta::require_opendkim() {
        return;
    }
    let key = Key::generate();
    let id = "od-2@sender.example";
    let spf = format!("{AUTHSERV_ID}; spf=pass smtp.mailfrom={DOMAIN}");
    let input = on_top(
        &format!("{}Authentication-Results: {spf}\n", forged_pass()),
        &external(&key, id),
    );
    let conf = recipe("opendkim.conf");
    assert!(conf.contains("\nRemoveARAll             yes\n"), "{conf}");
    let od = OpenDkim::verifier(&key, &conf.replace("RemoveARAll             yes", ""));
    let recorder = Probe::start(vec![]);
    let pf = postfix(&[od.postfix_spec(), recorder.postfix_spec()], &[]);
    send(&pf, LOCAL_RCPT, &input);
    pf.wait_delivered(id);
    let ar = ar_seen(&only(&recorder));
    assert_eq!(ar.len(), 2, "{ar:?}");
    assert!(
        ar[0].contains("dkim=pass") && ar[0].contains("header.b="),
        "{ar:?}"
    );
    assert_eq!(ar[1], spf, "{ar:?}");
}

/// OpenDKIM deletes only what its Authentication-Results parser reads: fields it fails
/// to parse pass on to the next milter, still claiming its authserv-id and a pass.
/// Behind Postfix the recipe's header_checks delete them before OpenDKIM sees them.
#[test]
fn harness_opendkim_keeps_forged_fields_it_cannot_parse() {
    if !mta::require_postfix() || !mta::require_opendkim() {
        return;
    }
    let key = Key::generate();
    let unparsed = [
        format!("{AUTHSERV_ID}; dkim=pass header.d={DOMAIN}; ;"),
        format!("{AUTHSERV_ID}; dkim=pass header.d={DOMAIN} x=\"unterminated"),
        format!("{AUTHSERV_ID}; dkim=pass header.d={DOMAIN}, spf=pass"),
    ];
    // Odd, but parsed, and so deleted.
    let parsed = [
        format!("{AUTHSERV_ID}; dkim=pass header.d={DOMAIN} (unclosed"),
        format!("{AUTHSERV_ID} ; dkim = pass header.d = {DOMAIN}"),
        format!("{AUTHSERV_ID}; auth=pass; dkim=pass header.d={DOMAIN}"),
    ];
    let forged: String = unparsed
        .iter()
        .chain(&parsed)
        .map(|v| format!("Authentication-Results: {v}\n"))
        .collect();
    let od = OpenDkim::verifier(&key, &recipe("opendkim.conf"));
    let recorder = Probe::start(vec![]);
    let pf = postfix(&[od.postfix_spec(), recorder.postfix_spec()], &[]);
    let id = "odp-1@sender.example";
    send(&pf, LOCAL_RCPT, &on_top(&forged, &external(&key, id)));
    pf.wait_delivered(id);
    let ar = ar_seen(&only(&recorder));
    assert!(ar[0].contains("dkim=pass (2048-bit key)"), "{ar:?}");
    assert_eq!(ar[1..], unparsed, "{ar:?}");
    for v in &unparsed {
        let field = format!("Authentication-Results: {v}");
        assert_eq!(
            header_checks_action(&field).as_deref(),
            Some("STRIP forged Authentication-Results"),
            "{field}"
        );
    }
}

/// What the recipe's header_checks do with one logical header field, as Postfix's
/// own table lookup (`postmap -q`) says: the action, or None.
fn header_checks_action(field: &str) -> Option<String> {
    let (dir, line) = header_checks();
    fs::write(dir.path().join("main.cf"), "").unwrap();
    mta::settled(&dir.path().join("main.cf"));
    let table = line.trim_start_matches("header_checks = ");
    let (ok, out, err) = mta::run_bounded(
        Command::new(Path::new(mta::SBIN).join("postmap"))
            .arg("-c")
            .arg(dir.path())
            .arg("-q")
            .arg(field)
            .arg(table),
        mta::WAIT,
    );
    assert!(ok || err.is_empty(), "postmap: {err}");
    ok.then(|| out.trim_end().to_string())
}

/// rspamd verifying DKIM (its C module), keys from the test's DNS server, its verdict
/// written by milter_headers' authentication-results routine.
fn rspamd_verifier(dns: &DnsServer) -> Rspamd {
    Rspamd::start(
        "dkim",
        Some(dns.port),
        r#"modules { path = "/usr/share/rspamd/plugins/milter_headers.lua"; }
# Every client here is on loopback, which rspamd skips by default.
dkim { check_local = true; check_authed = true; }
milter_headers {
    skip_local = false;
    skip_authenticated = false;
    use = ["authentication-results"];
}
"#,
    )
}

/// rspamd verifying first: it asks the DNS server for the key, its milter_headers
/// routine deletes every Authentication-Results field it was handed (its default
/// `remove = 0`: forged, other ids and all) and inserts its own at index 1, after
/// Postfix's Received field, with Postfix's `{daemon_name}` as the authserv-id.
#[test]
fn harness_rspamd_first_deletes_every_earlier_field_and_records_pass() {
    if !mta::require_postfix() || !mta::require_opendkim() || !mta::require_rspamd() {
        return;
    }
    let key = Key::generate();
    let id = "rs-1@sender.example";
    let input = on_top(
        &format!("{}{LOOKALIKES}", forged_pass()),
        &external(&key, id),
    );
    let dns = DnsServer::start(&[key.dns_record()]);
    let rs = rspamd_verifier(&dns);
    let recorder = Probe::start(vec![]);
    let pf = postfix(
        &[rs.postfix_spec(), recorder.postfix_spec()],
        &[format!("milter_macro_daemon_name = {AUTHSERV_ID}")],
    );
    send(&pf, LOCAL_RCPT, &input);
    let got = pf.wait_delivered(id);
    let text = String::from_utf8_lossy(&got.message).into_owned();
    let log = rs.log();

    let seen = only(&recorder);
    let ar = ar_seen(&seen);
    assert_eq!(ar.len(), 1, "{ar:?}\n{log}");
    assert!(
        ar[0].starts_with(&format!("{AUTHSERV_ID};"))
            && ar[0].contains(&format!(
                "dkim=pass header.d={DOMAIN} header.s=mimeref header.b="
            )),
        "{ar:?}"
    );
    assert_eq!(names_seen(&seen)[0], "Authentication-Results");
    // Only the key's TXT record, asked again if a reply came late.
    let asked = dns.asked();
    assert!(
        !asked.is_empty()
            && asked
                .iter()
                .all(|q| *q == format!("mimeref._domainkey.{DOMAIN}/16")),
        "{asked:?}\n{log}"
    );
    let (fields, _) = split_fields(&got.message);
    assert!(
        fields[0].starts_with(b"Received: from client.example")
            && fields[1].starts_with(b"Authentication-Results: mx.example.org;"),
        "{text}"
    );
    assert_eq!(got.header("Authentication-Results").len(), 1, "{text}");
    key.assert_holds(&got.message, &text);
}

/// Sendmail has no header_checks that delete: OpenDKIM as the first filter deletes the
/// forged field, the next filter is handed OpenDKIM's field first, and the queue file
/// has it after the conditional Return-Path and above Sendmail's Received field.
#[test]
fn harness_sendmail_opendkim_first_deletes_forged_fields() {
    if !mta::require_sendmail() || !mta::require_opendkim() {
        return;
    }
    let key = Key::generate();
    let id = "sm-1@sender.example";
    let input = on_top(
        &format!("{}{LOOKALIKES}", forged_pass()),
        &external(&key, id),
    );
    let od = OpenDkim::verifier(&key, &recipe("opendkim.conf"));
    let recorder = Probe::start(vec![]);
    let sm = mta::Sendmail::with_milters(&[
        ("opendkim", &od.sendmail_spec()),
        ("probe", &recorder.sendmail_spec()),
    ]);
    let r = sm.send(&input);
    assert_eq!(r.code, 250, "{r}");
    let q = sm.queued();
    assert_eq!(q.len(), 1, "{q:?}");

    let seen = only(&recorder);
    let ar = ar_seen(&seen);
    assert_eq!(names_seen(&seen)[0], "Authentication-Results", "{ar:?}");
    assert_eq!(ar.len(), 3, "{ar:?}");
    assert!(
        ar[0].starts_with(&format!("{AUTHSERV_ID};")) && ar[0].contains("dkim=pass"),
        "{ar:?}"
    );
    assert_eq!(ar[1..], LOOKALIKES_SEEN, "{ar:?}");
    // Sendmail's own Received field is not handed to a filter; the sender's is.
    let received: Vec<_> = seen
        .headers
        .iter()
        .filter(|(n, _)| n == "Received")
        .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
        .collect();
    assert_eq!(received.len(), 1, "{received:?}");
    assert!(
        received[0].contains("by smtp.sender.example"),
        "{received:?}"
    );

    let f = &q[0].fields;
    let at = |i: usize| String::from_utf8_lossy(&f[i].1).into_owned();
    assert!(
        f[0].0 == "P"
            && at(0).starts_with("Return-Path:")
            && at(1).starts_with("Authentication-Results: mx.example.org;")
            && at(2).starts_with("Received: from client.example")
            && at(2).contains("by mimeref-test.localdomain"),
        "{}",
        q[0].qf
    );
    let msg = q[0].without_trace();
    key.assert_holds(&msg, &String::from_utf8_lossy(&msg));
}

// ---------------------------------------------------------------------------
// mimeref-milter with fix_signed = "verified" (issue 38).

/// The daemon on `config`, which it must take: until `fix_signed = "verified"` and
/// `trusted_authserv_ids` exist, the tests that need them stop here and say so.
fn daemon(config: &str) -> Daemon {
    let dir = TempDir::new("config-check");
    let path = dir.path().join("mimeref-milter.toml");
    fs::write(&path, config).unwrap();
    let out = Command::new(mta::daemon_bin())
        .arg("config-check")
        .arg("--config")
        .arg(&path)
        .output()
        .expect("run mimeref-milter config-check");
    assert!(
        out.status.success(),
        "the daemon does not take this configuration (fix_signed = \"verified\", issue 38):\n\
         {config}\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Daemon::start(config, &[])
}

/// Trusts the verifier's id for all mail. Loopback clients are the Internet here.
fn verified_config() -> String {
    format!(
        "trusted_networks = []\nfix_signed = \"verified\"\ntrusted_authserv_ids = [\"{AUTHSERV_ID}\"]\n"
    )
}

/// The recipe's configuration: "verified" for mail delivered here only.
fn recipe_config() -> String {
    format!("trusted_networks = []\n{}", recipe("mimeref-milter.toml"))
}

/// `fix --as-milter` offline for inbound mail from FROM to `rcpt`: what the daemon
/// should make Postfix deliver.
fn offline(cfg: &str, msg: &[u8], rcpt: &str) -> Vec<u8> {
    offline_to(cfg, msg, &[rcpt])
}

/// [`offline`] for several recipients.
fn offline_to(cfg: &str, msg: &[u8], rcpts: &[&str]) -> Vec<u8> {
    let mut args = vec!["--as-milter", "--direction", "inbound", "--from", FROM];
    for r in rcpts {
        args.extend(["--rcpt", r]);
    }
    mta::offline_fix(&args, cfg, msg)
}

/// The message as the daemon was handed it: the fields the milters before it put on
/// top (those of `delivered` above the first field the client sent), then what the
/// client sent.
fn as_handed(delivered: &[u8], input: &[u8]) -> Vec<u8> {
    let (fields, _) = split_fields(delivered);
    let (sent, _) = split_fields(input);
    let n = fields
        .iter()
        .position(|f| *f == sent[0])
        .unwrap_or_else(|| {
            panic!(
                "the client's first field is not delivered:\n{}",
                String::from_utf8_lossy(delivered)
            )
        });
    let mut out = fields[..n].concat();
    out.extend_from_slice(input);
    out
}

/// A delivered message without Postfix's own Received field, wherever it is: Debian's
/// OpenDKIM inserts its field above it.
fn untraced(got: &mta::Delivered) -> Vec<u8> {
    let (fields, rest) = split_fields(&got.message);
    let ours = format!("by {} (Postfix) with ESMTP id ", mta::HOSTNAME);
    let mut out = Vec::new();
    let mut dropped = 0;
    for f in fields {
        if f.starts_with(b"Received: ") && String::from_utf8_lossy(&f).contains(&ours) {
            dropped += 1;
            continue;
        }
        out.extend_from_slice(&f);
    }
    assert_eq!(dropped, 1, "{}", String::from_utf8_lossy(&got.message));
    out.extend_from_slice(&rest);
    out
}

fn same(what: &str, want: &[u8], got: &[u8]) {
    assert!(got == want, "{what}:\n{}", mta::show_diff(want, got));
}

/// The recipe in full: OpenDKIM, then rspamd, verify; Postfix's header_checks delete
/// forgeries; the daemon repairs the externally signed message, and the verdict it
/// trusted is delivered as the verifier wrote it.
#[test]
fn verified_signature_is_repaired_behind_opendkim_and_rspamd() {
    if !mta::require_postfix() || !mta::require_opendkim() || !mta::require_rspamd() {
        return;
    }
    let key = Key::generate();
    let dns = DnsServer::start(&[key.dns_record()]);
    let od = OpenDkim::verifier(&key, &recipe("opendkim.conf"));
    let rs = rspamd_verifier(&dns);
    let cfg = verified_config();
    let d = daemon(&cfg);
    let (_checks, line) = header_checks();
    let pf = postfix(
        &[od.postfix_spec(), rs.postfix_spec(), d.postfix_spec()],
        &[line, format!("milter_macro_daemon_name = {AUTHSERV_ID}")],
    );
    let id = "verified-1@sender.example";
    let input = external(&key, id);
    send(&pf, LOCAL_RCPT, &input);
    let got = pf.wait_delivered(id);
    let text = String::from_utf8_lossy(&got.message).into_owned();
    let log = d.log();

    let handed = as_handed(&untraced(&got), &input);
    let want = offline(&cfg, &handed, LOCAL_RCPT);
    assert!(
        drop_fields(&want, "X-MIMERef") != handed,
        "the fixture needs a repair"
    );
    same("delivered", &want, &untraced(&got));
    assert!(
        got.header("X-MIMERef")[0].starts_with("fix;"),
        "{text}\n{log}"
    );
    assert!(
        log.contains(&format!("verified={AUTHSERV_ID}:dkim=pass")),
        "{log}"
    );
    // rspamd, after OpenDKIM, deleted OpenDKIM's field and wrote its own (QUIRKS.md);
    // the daemon was handed it and it is delivered as written (compared above).
    let ar = got.header("Authentication-Results");
    assert_eq!(ar.len(), 1, "{text}");
    assert!(
        ar[0].starts_with(&format!("{AUTHSERV_ID};"))
            && ar[0].contains(&format!("dkim=pass header.d={DOMAIN} header.s=mimeref"))
            && !ar[0].contains("-bit key"),
        "{text}"
    );
}

/// No verifier, a client's forged verdict on top: the recipe's header_checks delete it,
/// so the daemon sees an intact signature no verifier vouched for and repairs nothing.
#[test]
fn forged_verdict_is_deleted_and_nothing_is_repaired() {
    if !mta::require_postfix() || !mta::require_opendkim() {
        return;
    }
    let key = Key::generate();
    let id = "forged-1@sender.example";
    let external = external(&key, id);
    let input = on_top(&forged_pass(), &external);
    let d = daemon(&verified_config());
    let (_checks, line) = header_checks();
    let pf = postfix(&[d.postfix_spec()], &[line]);
    send(&pf, LOCAL_RCPT, &input);
    let got = pf.wait_delivered(id);
    let text = String::from_utf8_lossy(&got.message).into_owned();
    let log = d.log();
    assert!(got.header("Authentication-Results").is_empty(), "{text}");
    same(
        "delivered as signed, the report aside",
        &external,
        &drop_fields(&untraced(&got), "X-MIMERef"),
    );
    assert!(
        log.contains("signed-content") && !log.contains("verified="),
        "{log}"
    );
    key.assert_holds(&got.message, &text);
}

/// The control: without the header_checks the forged verdict reaches the daemon,
/// which takes it for its verifier's and repairs, breaking the signature.
#[test]
fn without_the_recipe_a_forged_verdict_reaches_the_daemon() {
    if !mta::require_postfix() || !mta::require_opendkim() {
        return;
    }
    let key = Key::generate();
    let id = "forged-2@sender.example";
    let input = on_top(&forged_pass(), &external(&key, id));
    let cfg = verified_config();
    let d = daemon(&cfg);
    let pf = postfix(&[d.postfix_spec()], &[]);
    send(&pf, LOCAL_RCPT, &input);
    let got = pf.wait_delivered(id);
    let text = String::from_utf8_lossy(&got.message).into_owned();
    let log = d.log();
    assert_eq!(
        got.header("Authentication-Results"),
        [forged_pass()["Authentication-Results: ".len()..].trim_end()],
        "{text}"
    );
    assert!(
        log.contains(&format!("verified={AUTHSERV_ID}:dkim=pass")),
        "{log}"
    );
    same(
        "delivered",
        &offline(&cfg, &input, LOCAL_RCPT),
        &untraced(&got),
    );
    assert!(!key.verifies(&got.message), "{text}");
}

/// Why nothing may verify DKIM after the repair: a second OpenDKIM placed after the
/// daemon records a failed body hash where the first recorded pass.
#[test]
fn a_verifier_after_the_repair_records_fail() {
    if !mta::require_postfix() || !mta::require_opendkim() {
        return;
    }
    let key = Key::generate();
    let before = OpenDkim::verifier(&key, &recipe("opendkim.conf"));
    let after = OpenDkim::verifier(&key, "Mode v\nAuthservID after.example.org\n");
    let d = daemon(&verified_config());
    let (_checks, line) = header_checks();
    let pf = postfix(
        &[
            before.postfix_spec(),
            d.postfix_spec(),
            after.postfix_spec(),
        ],
        &[line],
    );
    let id = "after-1@sender.example";
    send(&pf, LOCAL_RCPT, &external(&key, id));
    let got = pf.wait_delivered(id);
    let text = String::from_utf8_lossy(&got.message).into_owned();
    assert!(got.header("X-MIMERef")[0].starts_with("fix;"), "{text}");
    let ar = got.header("Authentication-Results");
    assert_eq!(ar.len(), 2, "{text}");
    // Each inserts after Postfix's Received field: the later one comes first.
    assert!(
        ar[0].starts_with("after.example.org;") && ar[0].contains("dkim=fail"),
        "{text}"
    );
    assert!(
        ar[1].starts_with(&format!("{AUTHSERV_ID};")) && ar[1].contains("dkim=pass"),
        "{text}"
    );
}

/// A signature whose body hash no longer matches protects nothing: repaired with the
/// built-in defaults, the log line naming why.
#[test]
fn broken_body_hash_is_repaired_with_the_default_configuration() {
    if !mta::require_postfix() || !mta::require_opendkim() {
        return;
    }
    let key = Key::generate();
    let id = "bh-1@sender.example";
    let signed = String::from_utf8(external(&key, id)).unwrap();
    // Changed on the way, as a list footer or a relay's re-encoding would.
    let input = signed
        .replacen("See the plan below.", "See the plan above.", 1)
        .into_bytes();
    assert!(!key.verifies(&input), "the changed body still verifies");
    let cfg = "trusted_networks = []\n";
    let want = offline(cfg, &input, LOCAL_RCPT);
    assert!(
        drop_fields(&want, "X-MIMERef") != input,
        "under a broken body hash the fixture gets a repair"
    );
    let d = Daemon::start(cfg, &[]);
    let pf = postfix(&[d.postfix_spec()], &[]);
    send(&pf, LOCAL_RCPT, &input);
    let got = pf.wait_delivered(id);
    let log = d.log();
    same("delivered", &want, &untraced(&got));
    assert!(log.contains(&format!("bh-broken=d={DOMAIN}")), "{log}");
}

/// The recipe's scope: "verified" for mail delivered here; mail relayed on, alone or
/// beside a recipient here, keeps its signature intact, since the next hop verifies
/// again.
#[test]
fn the_recipe_repairs_mail_delivered_here_and_relayed_mail_keeps_its_signature() {
    if !mta::require_postfix() || !mta::require_opendkim() {
        return;
    }
    let key = Key::generate();
    let od = OpenDkim::verifier(&key, &recipe("opendkim.conf"));
    let cfg = recipe_config();
    let d = daemon(&cfg);
    let (_checks, line) = header_checks();
    let pf = postfix(&[od.postfix_spec(), d.postfix_spec()], &[line]);
    let cases: [(&str, &[&str], bool); 3] = [
        ("scope-1@sender.example", &[LOCAL_RCPT], true),
        ("scope-2@sender.example", &[RELAY_RCPT], false),
        ("scope-3@sender.example", &[LOCAL_RCPT, RELAY_RCPT], false),
    ];
    let inputs: Vec<Vec<u8>> = cases.iter().map(|(id, _, _)| external(&key, id)).collect();
    for ((_, rcpts, _), input) in cases.iter().zip(&inputs) {
        let mut c = pf.smtp();
        let r = c.send(FROM, rcpts, input);
        c.quit();
        assert_eq!(r.code, 250, "{r}\n{}", pf.log());
    }
    for ((id, rcpts, repaired), input) in cases.iter().zip(&inputs) {
        let got = pf.wait_delivered(id);
        let text = String::from_utf8_lossy(&got.message).into_owned();
        let handed = as_handed(&untraced(&got), input);
        let want = offline_to(&cfg, &handed, rcpts);
        same(id, &want, &untraced(&got));
        if *repaired {
            assert!(drop_fields(&want, "X-MIMERef") != handed, "{id}: no repair");
            continue;
        }
        same(
            &format!("{id} as signed, the verdict and the report aside"),
            input,
            &drop_fields(
                &drop_fields(&untraced(&got), "X-MIMERef"),
                "Authentication-Results",
            ),
        );
        key.assert_holds(&got.message, &text);
    }
}

/// Sendmail: the verifier as the first INPUT_MAIL_FILTER, the daemon second.
#[test]
fn sendmail_verifier_first_then_the_daemon_repairs() {
    if !mta::require_sendmail() || !mta::require_opendkim() {
        return;
    }
    let key = Key::generate();
    let od = OpenDkim::verifier(&key, &recipe("opendkim.conf"));
    let cfg = verified_config();
    let d = daemon(&cfg);
    let sm = mta::Sendmail::with_milters(&[
        ("opendkim", &od.sendmail_spec()),
        ("mimeref", &d.sendmail_spec()),
    ]);
    let input = external(&key, "sm-verified-1@sender.example");
    let r = sm.send(&input);
    assert_eq!(r.code, 250, "{r}\n{}", d.log());
    let q = sm.queued();
    assert_eq!(q.len(), 1, "{q:?}");
    let got = q[0].without_trace();
    let log = d.log();
    let handed = as_handed(&got, &input);
    // Sendmail's session names this recipient (tests/support/mta/sendmail.rs).
    let want = offline(&cfg, &handed, "bob@receiver.example");
    assert!(drop_fields(&want, "X-MIMERef") != handed, "no repair");
    same("queued", &want, &got);
    assert!(
        log.contains(&format!("verified={AUTHSERV_ID}:dkim=pass")),
        "{log}"
    );
}

/// docs/MTA.md shows each recipe file as it is, so the two cannot drift apart.
#[test]
fn mta_doc_shows_the_recipe_files_verbatim() {
    let doc = fs::read_to_string(repo("docs/MTA.md")).unwrap();
    let mut n = 0;
    for e in fs::read_dir(repo("packaging/verified")).unwrap() {
        let path = e.unwrap().path();
        let text = fs::read_to_string(&path).unwrap();
        assert!(
            doc.contains(&format!("```\n{text}```\n"))
                || doc.contains(&format!("```toml\n{text}```\n")),
            "docs/MTA.md does not show {} as it is",
            path.display()
        );
        n += 1;
    }
    assert_eq!(n, 3, "a recipe file without a test in this file");
}
