//! URL policy over the milter protocol against the real `run()`: a rewrite and a strip
//! inside a nested multipart (one body replacement), each denied-reference action
//! (fix = strip, report, reject), a rewrite left at `report`, and a legacy conversion
//! of a top-level Content-Type by change_header.

#[path = "../support/mod.rs"]
mod support;

use indymilter_test::Status;
use support::milter::*;

const REWRITE: &str = "[[rewrite]]\nscheme = \"http\"\nhost_suffix = \"example.com\"\ntemplate = \"https://{authority}{path}{query}\"\n";

async fn one(
    name: &str,
    config: &str,
    fixture_name: &str,
) -> (indymilter_test::EomActions, Status) {
    one_message(name, config, fixture_name, "5URL001").await
}

fn has(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn rewrite_and_strip_in_one_body_replacement() {
    let config = format!("[schemes]\nstrip_denied = true\n{REWRITE}");
    let (actions, status) = one("rw-strip", &config, "milter/url-policy-nested.eml").await;
    assert_eq!(status, Status::Accept);
    assert!(header_changes(&actions).is_empty());
    let body = replaced_body(&actions).expect("body replaced");
    let text = String::from_utf8(body.clone()).unwrap();
    assert!(
        has(&body, "URL=\"https://files.example.com/report.pdf\""),
        "{text}"
    );
    assert!(!has(&body, "Content-ID: <js@example.com>"), "{text}");
    assert!(
        has(
            &body,
            "Removed URL:\r\n  javascript:alert(document.cookie)\r\n--inner--"
        ),
        "{text}"
    );
    // Everything else is byte-identical: the body around the two parts.
    let orig = to_crlf(&fixture("milter/url-policy-nested.eml"));
    let orig_body = &orig[orig.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4..];
    let cut = orig_body.windows(7).position(|w| w == b"--inner").unwrap();
    assert_eq!(&body[..cut], &orig_body[..cut]);
    assert!(body.ends_with(b"\r\n--inner--\r\n--outer--\r\n"));
    let rep = report(&actions, "X-MIMERef").unwrap();
    assert!(rep.starts_with(" fix; rules="), "{rep}");
    assert!(
        rep.contains("; changed=2.1 extbody-url-rewritten <http://files.example.com/report.pdf> -> <https://files.example.com/report.pdf>"),
        "{rep}"
    );
    assert!(
        rep.contains("; changed=2.2 extbody-url-scheme-denied <javascript:alert(document.cookie)> -> stripped"),
        "{rep}"
    );
    assert!(!rep.contains('\r') && !rep.contains('\n'));
}

#[tokio::test]
async fn denied_reference_report_only() {
    let config = "[schemes]\nstrip_denied = true\n[policy.inbound]\n\"extbody-url-scheme-denied\" = \"report\"\n";
    let (actions, status) = one("deny-report", config, "milter/url-policy-nested.eml").await;
    assert_eq!(status, Status::Accept);
    assert!(replaced_body(&actions).is_none());
    let rep = report(&actions, "X-MIMERef").unwrap();
    assert!(
        rep.starts_with(" report; rules=extbody-url-scheme-denied"),
        "{rep}"
    );
    assert!(!rep.contains("changed="), "{rep}");
}

#[tokio::test]
async fn denied_reference_reject() {
    let config = "[schemes]\nstrip_denied = true\n[policy.inbound]\n\"extbody-url-scheme-denied\" = \"reject\"\n";
    let (actions, status) = one("deny-reject", config, "milter/url-policy-nested.eml").await;
    let Status::Reject { message: Some(m) } = status else {
        panic!("{status:?}")
    };
    assert_eq!(
        m.to_str().unwrap(),
        "550 5.6.0 MIME reference error: extbody-url-scheme-denied"
    );
    assert!(actions.actions.is_empty(), "{:?}", actions.actions);
}

#[tokio::test]
async fn rewrite_left_at_report_changes_nothing() {
    let config = format!("[policy.inbound]\n\"extbody-url-rewritten\" = \"report\"\n{REWRITE}");
    let (actions, status) = one("rw-report", &config, "milter/url-policy-nested.eml").await;
    assert_eq!(status, Status::Accept);
    assert!(replaced_body(&actions).is_none());
    let rep = report(&actions, "X-MIMERef").unwrap();
    assert!(
        rep.contains("extbody-url-rewritten") && !rep.contains("changed="),
        "{rep}"
    );
}

#[tokio::test]
async fn legacy_top_level_conversion_by_change_header() {
    let (actions, status) = one(
        "legacy",
        "[legacy]\nto_url = \"inbound\"\n",
        "milter/legacy-top.eml",
    )
    .await;
    assert_eq!(status, Status::Accept);
    assert!(replaced_body(&actions).is_none());
    let changes = header_changes(&actions);
    assert_eq!(changes.len(), 1, "{changes:?}");
    let (name, index, value) = &changes[0];
    assert_eq!((name.as_str(), *index), ("Content-Type", 1));
    let v = String::from_utf8(value.clone().unwrap()).unwrap();
    // One quoted word: the default since the IMAP servers joined the interop matrix
    // (they keep a fold's white space inside the URL).
    assert_eq!(
        v,
        " message/external-body; access-type=URL;\n URL=\"ftp://ftp.example.org/pub/file.tar;type=i\"; size=100"
    );
    let rep = report(&actions, "X-MIMERef").unwrap();
    assert!(rep.contains("fixed=extbody-legacy-access-type"), "{rep}");
    assert!(
        rep.contains("changed=0 extbody-legacy-access-type <access-type=ANON-FTP;site=")
            && rep.contains("> -> <ftp://ftp.example.org/pub/file.tar;type=i>"),
        "{rep}"
    );
}

/// A rewritten URL with a password and a token in its query, through the real daemon
/// at debug level: neither the password nor the query reaches the log or the report
/// header (user name and host stay, so the admin still knows which reference it was);
/// with `redact_urls = false` the header and the log show them.
#[tokio::test]
async fn secrets_in_urls_stay_out_of_the_log_and_the_report_header() {
    const SECRET: &str = "S3cretPass";
    const TOKEN: &str = "abcdef0123456789";
    let url = format!("http://alice:{SECRET}@files.example.com/hr/x.xlsx?token={TOKEN}");
    let msg = format!(
        "From: a@example.org\r\nTo: b@example.net\r\nSubject: s\r\nMIME-Version: 1.0\r\n\
         Content-Type: message/external-body; access-type=URL;\r\n URL=\"{url}\"\r\n\
         \r\nContent-Type: application/octet-stream\r\n\r\n"
    );
    for redact in [true, false] {
        let config = format!("{REWRITE}[report]\nredact_urls = {redact}\n");
        let d = support::mta::Daemon::start(&format!("trusted_networks = []\n{config}"), &[]);
        let addr: std::net::SocketAddr = ([127, 0, 0, 1], d.port).into();
        let mut c = indymilter_test::TestConnection::configure()
            .exact_leading_space(true)
            .open_tcp(addr)
            .await
            .unwrap();
        connect(&mut c, REMOTE, None).await;
        let env = Envelope {
            queue_id: Some("5SECRET1"),
            auth: None,
        };
        let (actions, status) = send(&mut c, &env, &eml(msg.as_bytes())).await;
        c.close().await.unwrap();
        assert_eq!(status, Status::Accept);
        // The rewrite itself happened: the message keeps its URL, in https.
        let changed = header_changes(&actions);
        let ct = changed
            .iter()
            .find(|(n, _, _)| n == "Content-Type")
            .and_then(|(_, _, v)| v.clone())
            .expect("Content-Type rewritten");
        let ct = String::from_utf8_lossy(&ct).replace(['\r', '\n', '\t', ' ', '"'], "");
        assert!(
            ct.contains(&format!("https://alice:{SECRET}@files.example.com")),
            "{ct}"
        );
        let header = report(&actions, "X-MIMERef").expect("report header");
        let log = support::mta::wait_for(support::mta::WAIT, || {
            let l = d.log();
            l.contains("5SECRET1: direction=").then_some(l)
        })
        .expect("outcome line logged");
        assert!(
            log.contains("5SECRET1: changed"),
            "the change is logged: {log}"
        );
        if redact {
            for (what, text) in [("log", &log), ("report header", &header)] {
                assert!(!text.contains(SECRET), "password in the {what}: {text}");
                assert!(!text.contains(TOKEN), "query in the {what}: {text}");
            }
            assert!(header.contains("<http://alice:***@files.example.com/hr/x.xlsx?***>"));
            assert!(log.contains("alice:***@files.example.com"), "{log}");
        } else {
            // The header cuts URLs at 60 characters; the log line at 100.
            assert!(
                header.contains(SECRET) && header.contains("?token="),
                "{header}"
            );
            assert!(log.contains(TOKEN), "{log}");
        }
    }
}
