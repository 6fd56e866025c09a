//! The security properties SECURITY.md promises, each tested:
//! - limits cannot be configured into unboundedness (0, negative or huge values refused);
//! - no CR, LF or NUL reaches a header field or an SMTP reply through config strings
//!   (reply texts, report header name, rewrite templates) or through message content;
//! - the daemon never opens a connection to a URL it reads in a message;
//! - the systemd unit runs it unprivileged and confined.

use std::net::TcpListener;

use crate::support::milter::*;
use indymilter_test::{EomAction, Status};
use mimeref_milter::Config;

#[test]
fn limits_cannot_be_disabled_or_made_unbounded() {
    let refused = [
        "max_connections = 0",
        "max_connections = -1",
        "max_connections = 100001",
        "connection_timeout = 0",
        "connection_timeout = 86401",
        "transaction_timeout = 0",
        "transaction_timeout = 86401",
        "reply_timeout = 0",
        "reply_timeout = -1",
        "reply_timeout = 86401",
        "shutdown_timeout = -1",
        "shutdown_timeout = 3601",
        "[limits]\nmax_message_size = 0",
        "[limits]\nmax_message_size = 1023",
        "[limits]\nmax_message_size = 8589934592",
        "[limits]\nmax_header_size = 0",
        "[limits]\nmax_header_size = 8589934592",
        "[limits]\nmax_depth = 0",
        "[limits]\nmax_depth = 1001",
        "[limits]\nmax_parts = 0",
        "[limits]\nmax_parts = 1000001",
        "[limits]\nmax_parts = -5",
        // A header limit above the message limit would never apply.
        "[limits]\nmax_message_size = 2048\nmax_header_size = 4096",
    ];
    for text in refused {
        assert!(Config::parse(text, "t.toml").is_err(), "accepted: {text:?}");
    }
    // The ceilings themselves are accepted.
    let cfg = Config::parse(
        "max_connections = 100000\n[limits]\nmax_depth = 1000\nmax_parts = 1000000\n",
        "t.toml",
    )
    .unwrap();
    assert_eq!(cfg.limits().max_depth, 1000);
    assert_eq!(cfg.limits().max_parts, 1_000_000);
}

#[test]
fn config_strings_cannot_carry_line_breaks_or_nul() {
    let refused = [
        "[reply]\nreject = \"550 5.6.0 no\\r\\nX-Evil: 1\"",
        "[reply]\nreject = \"550 5.6.0 no\\nmore\"",
        "[reply]\ntempfail = \"451 4.6.0 wait\\u0000\"",
        "[reply]\ntempfail = \"451 4.6.0 wait\\rX\"",
        "[reply]\nquarantine = \"held\\r\\nX-Evil: 1\"",
        "[reply]\nquarantine = \"held\\u0000\"",
        "[report]\nheader = \"X-MIMERef\\r\\nX-Evil\"",
        "[report]\nheader = \"X MIMERef\"",
        "[report]\nheader = \"X-MIMERef:\"",
        "[report]\nheader = \"\"",
        "[[rewrite]]\ntemplate = \"https://gw.example/{path}\\r\\nX-Evil: 1\"",
        "[[rewrite]]\ntemplate = \"https://gw.example/\\u0000{path}\"",
        "outbound_daemons = [\"a\\nb\"]",
    ];
    for text in refused {
        assert!(Config::parse(text, "t.toml").is_err(), "accepted: {text:?}");
    }
}

/// Every value the daemon hands the MTA: header changes, added headers, replies.
fn assert_no_injection(what: &str, actions: &indymilter_test::EomActions, status: &Status) {
    let check = |kind: &str, v: &[u8]| {
        assert!(!v.contains(&0), "{what}: NUL in {kind}");
        assert!(!v.contains(&b'\r'), "{what}: CR in {kind}: {v:?}");
        for (i, &b) in v.iter().enumerate() {
            if b == b'\n' {
                assert!(
                    matches!(v.get(i + 1), Some(b' ' | b'\t')),
                    "{what}: line break without fold in {kind}: {}",
                    String::from_utf8_lossy(v)
                );
            }
        }
    };
    for a in &actions.actions {
        match a {
            EomAction::AddHeader { name, value } | EomAction::InsertHeader { name, value, .. } => {
                check("header name", name.as_bytes());
                check("header value", value.as_bytes());
            }
            EomAction::ChangeHeader { name, value, .. } => {
                check("header name", name.as_bytes());
                check("header value", value.as_bytes());
            }
            EomAction::Quarantine { reason } => check("quarantine reason", reason.as_bytes()),
            _ => {}
        }
    }
    if let Status::Reject { message: Some(m) } | Status::Tempfail { message: Some(m) } = status {
        let m = m.as_bytes();
        // One reply line: libmilter frames multi-line replies itself.
        assert!(
            !m.iter().any(|&b| b < 0x20 && b != b' '),
            "{what}: control character in reply {:?}",
            String::from_utf8_lossy(m)
        );
    }
}

/// Messages whose references are full of control characters and encoded line breaks,
/// under a config that fixes, rewrites with every placeholder, reports and rejects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_content_never_injects_lines_into_headers_or_replies() {
    let hostile_urls: &[&[u8]] = &[
        b"http://example.org/a%0d%0aX-Evil:%201/b?q=%0A#%0D",
        b"http://exa\x01mple.org/\x7f\x1b[31m/x",
        b"http://user%0d%0a@example.org:80/\xc3\xa9\xff/x?\x0bq",
        b"http://example.org/ a\tb /c",
    ];
    let config = r#"[[rewrite]]
scheme = "http"
template = "https://gw.example.net/{scheme}/{userinfo}{host}{port}{path}{query}{fragment}?u={url_pct}"
[report]
always = true
"#;
    let reject = "[policy.inbound]\n\"extbody-url-invalid\" = \"reject\"\n\"extbody-url-unencoded\" = \"reject\"\n";
    for (name, cfg) in [("rewrite", config), ("reject", reject)] {
        let m = Milter::start(&format!("security-{name}"), cfg).await;
        let (mut changed, mut rejected) = (0, 0);
        for (i, url) in hostile_urls.iter().enumerate() {
            let mut raw =
                b"From: a@example.org\nSubject: =?utf-8?Q?x=0D=0AX-Evil:_1?=\nMIME-Version: 1.0\n\
                Content-Type: message/external-body; access-type=URL;\n URL=\""
                    .to_vec();
            raw.extend_from_slice(url);
            raw.extend_from_slice(b"\"\n\nContent-Type: text/plain\nContent-ID: <x@y>\n\n");
            for top in [true, false] {
                let msg = if top {
                    raw.clone()
                } else {
                    // The same part nested: its fix travels in a replaced body.
                    let mut n = b"From: a@example.org\nMIME-Version: 1.0\n\
                        Content-Type: multipart/mixed; boundary=z\n\n--z\n"
                        .to_vec();
                    let part = raw.splitn(4, |&b| b == b'\n').nth(3).unwrap_or_default();
                    n.extend_from_slice(part);
                    n.extend_from_slice(b"\n--z--\n");
                    n
                };
                let mut c = m.conn().await;
                connect(&mut c, "192.0.2.1", None).await;
                let (actions, status) = send(&mut c, &Envelope::default(), &eml(&msg)).await;
                c.close().await.unwrap();
                let what = format!("{name} url {i} top={top}");
                assert_no_injection(&what, &actions, &status);
                changed += usize::from(
                    !header_changes(&actions).is_empty() || replaced_body(&actions).is_some(),
                );
                rejected += usize::from(matches!(status, Status::Reject { .. }));
                if let Some(body) = replaced_body(&actions) {
                    // Nested fixes: every line of the new body is a line of the old one,
                    // or part of the rewritten field (folded, no bare CR).
                    assert!(
                        !body.windows(2).any(|w| w[0] == b'\r' && w[1] != b'\n'),
                        "{what}: bare CR in replaced body"
                    );
                }
            }
        }
        m.stop().await;
        // Not vacuous: the hostile values did reach the rewriting and the replies.
        eprintln!("{name}: {changed} changed, {rejected} rejected");
        if name == "rewrite" {
            assert!(changed >= 4, "{name}: only {changed} messages changed");
        } else {
            assert!(rejected >= 4, "{name}: only {rejected} messages rejected");
        }
    }
}

/// The daemon reads URLs; it never fetches them. A listener stands where every URL of
/// the messages points; after the verdicts nobody has knocked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_never_connects_to_urls_in_messages() {
    let trap = TcpListener::bind("127.0.0.1:0").unwrap();
    trap.set_nonblocking(true).unwrap();
    let port = trap.local_addr().unwrap().port();
    let base = format!("http://127.0.0.1:{port}");
    let msg = format!(
        "From: a@example.org\nMIME-Version: 1.0\n\
         Content-Type: multipart/related; boundary=t; type=\"text/html\"\n\
         Content-Location: {base}/base/\n\n\
         --t\nContent-Type: text/html\nContent-Location: {base}/index.html\n\n\
         <base href=\"{base}/\"><img src=\"{base}/a.gif\"><img src=\"b.gif\">\
         <a href=\"ftp://127.0.0.1:{port}/x\">x</a><link href=\"//127.0.0.1:{port}/s.css\">\n\
         --t\nContent-Type: message/external-body; access-type=URL; URL=\"{base}/ext\"\n\n\
         Content-Type: image/gif\nContent-ID: <g@x>\n\n\
         --t\nContent-Type: image/gif\nContent-Location: ContentType:text/plain\n\nGIF\n\
         --t\nContent-Type: message/external-body; access-type=anon-ftp; site=127.0.0.1; name=x\n\n\
         Content-Type: text/plain\n\n--t--\n"
    );
    let m = Milter::start(
        "security-no-fetch",
        "[legacy]\nto_url = \"both\"\n[report]\nalways = true\n",
    )
    .await;
    let mut c = m.conn().await;
    connect(&mut c, "192.0.2.1", None).await;
    let (_, st) = send(&mut c, &Envelope::default(), &eml(msg.as_bytes())).await;
    assert!(matches!(st, Status::Accept | Status::Continue), "{st:?}");
    c.close().await.unwrap();
    m.stop().await;
    match trap.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Ok((_, peer)) => panic!("the daemon connected to a URL in the message (from {peer})"),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn the_systemd_unit_runs_unprivileged_and_confined() {
    let unit = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/mimeref-milter.service"),
    )
    .unwrap();
    let has = |line: &str| unit.lines().any(|l| l.trim() == line);
    for line in [
        "User=mimeref-milter",
        "NoNewPrivileges=yes",
        "CapabilityBoundingSet=",
        "AmbientCapabilities=",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6",
        "MemoryDenyWriteExecute=yes",
        "UMask=0077",
        "PrivateUsers=yes",
        "PrivateMounts=yes",
        "Type=notify",
    ] {
        assert!(has(line), "unit lacks {line}");
    }
    assert!(!has("User=root"));
}

/// The packaged setup gives the socket group postfix through the set-group-ID
/// directory /var/spool/postfix/mimeref-milter, so chown(2) stays outside the system
/// call filter (`systemd-analyze syscall-filter @privileged` lists @chown). The filter
/// starts as an allow list and each later line adds (plain) or takes away (`~`): the
/// last line that names @chown or @privileged must take it away. A call outside it
/// fails with EPERM, which the daemon reports, rather than killing it with SIGSYS.
#[test]
fn the_systemd_unit_does_not_let_the_daemon_chown() {
    let unit = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/mimeref-milter.service"),
    )
    .unwrap();
    let filters: Vec<&str> = unit
        .lines()
        .filter_map(|l| l.trim().strip_prefix("SystemCallFilter="))
        .collect();
    assert!(
        filters.first().is_some_and(|f| !f.starts_with('~')),
        "an allow list first: {filters:?}"
    );
    let last = filters
        .iter()
        .rev()
        .find(|f| {
            f.split_whitespace()
                .any(|g| matches!(g.trim_start_matches('~'), "@chown" | "@privileged"))
        })
        .unwrap_or_else(|| panic!("nothing about @chown: {filters:?}"));
    assert!(
        last.starts_with('~')
            && last
                .split_whitespace()
                .any(|g| g.trim_start_matches('~') == "@privileged"),
        "chown(2) is allowed: {filters:?}"
    );
    assert!(
        unit.lines()
            .any(|l| l.trim() == "SystemCallErrorNumber=EPERM"),
        "a filtered call kills the daemon"
    );
}
