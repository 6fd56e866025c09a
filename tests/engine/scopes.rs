//! Scopes offline, through the real binary: `config-check` names every bad scope with
//! its line, and `check --actions` / `fix --as-milter` take the envelope (`--from`,
//! `--rcpt`, `--header`, `--macro`, `--client-addr`) and decide as the daemon does.

use std::path::PathBuf;
use std::process::{Command, Output};

use crate::support;
use crate::support::message::fixture_path;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mimeref-milter"))
        .args(args)
        .output()
        .expect("run mimeref-milter")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A file of its own (tests run side by side) in this test binary's directory under
/// target/, removed with its directory when dropped.
struct File(PathBuf);

impl File {
    fn to_str(&self) -> Option<&str> {
        self.0.to_str()
    }

    fn display(&self) -> std::path::Display<'_> {
        self.0.display()
    }
}

impl Drop for File {
    fn drop(&mut self) {
        if let Some(d) = self.0.parent() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn file(name: &str, text: &str) -> File {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("scopes-cli-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    File(p)
}

/// The shared scope configuration, the archive on example.net.
fn scopes() -> String {
    support::scopes::config("", "example.net")
}

/// `check --actions` with `extra` arguments on `fixture`: the printed plan.
fn plan(cfg: &str, fixture: &str, extra: &[&str]) -> String {
    let c = file("scopes.toml", cfg);
    let f = fixture_path(fixture);
    let mut args = vec!["check", "--actions", "--config", c.to_str().unwrap()];
    args.extend(extra);
    args.push(f.to_str().unwrap());
    let o = run(&args);
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout(&o)
        .lines()
        .filter(|l| !l.starts_with(f.to_str().unwrap()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The fixture: a top-level external-body whose URL needs quoting (fixable).
const TOP: &str = "milter/top-extbody.eml";

#[test]
fn check_actions_picks_the_scope_of_the_envelope() {
    let scopes = scopes();
    let p = |extra: &[&str]| plan(&scopes, TOP, extra);
    let none = p(&["--rcpt", "bob@example.net"]);
    assert!(
        none.contains("verdict: fix\n") && !none.contains("scope:"),
        "{none}"
    );

    let archive = p(&["--rcpt", "<Archive@Example.NET>"]);
    assert!(
        archive.contains("verdict: log\nscope: archive\n"),
        "{archive}"
    );
    assert!(
        archive.contains("replace_body: no\n") && !archive.contains("change_header"),
        "{archive}"
    );

    let strict = p(&["--from", "alice@example.org", "--rcpt", "x@strict.example"]);
    assert!(
        strict.contains("verdict: reject\nscope: strict\n"),
        "{strict}"
    );
    assert!(
        strict.contains("reply: reject 550 5.6.0 MIME reference error: extbody-url-unquoted"),
        "{strict}"
    );

    let mixed = p(&["--rcpt", "bob@example.net", "--rcpt", "archive@example.net"]);
    assert!(
        mixed.contains("verdict: report\nscope: default (recipients in archive, default)\n"),
        "{mixed}"
    );
    assert!(
        !mixed.contains("change_header"),
        "the fix is withheld: {mixed}"
    );
    assert!(
        mixed.contains("add_header: X-MIMERef value \" report; rules=extbody-url-unquoted\""),
        "{mixed}"
    );

    let list = p(&["--header", "List-Id: Announce <announce.example.org>"]);
    assert!(
        list.contains("verdict: ignore\nscope: announce\n"),
        "{list}"
    );

    // Every key of a scope must match: the partner's sender from elsewhere is not it.
    let partner = |addr: &str| {
        p(&[
            "--client-addr",
            addr,
            "--from",
            "news@partner.example",
            "--rcpt",
            "bob@example.net",
        ])
    };
    assert!(partner("198.51.100.25").contains("scope: partner\n"));
    assert!(!partner("203.0.113.25").contains("scope:"));
}

/// A scope's fix_signed reaches the engine: a DKIM-signed message whose signature
/// covers the field is fixed for the staff's authenticated mail only.
#[test]
fn a_scope_may_fix_signed_mail() {
    let fixture = "signed/dkim-covers-content-type.eml";
    let staff = plan(&scopes(), fixture, &["--macro", "{auth_authen}=Alice"]);
    assert!(
        staff.contains("direction: outbound\nverdict: fix\nscope: staff\n"),
        "{staff}"
    );
    // signed-content is still logged: the signature no longer verifies.
    assert!(
        staff.contains("change_header: Content-Type index 1"),
        "{staff}"
    );
    let other = plan(&scopes(), fixture, &["--macro", "{auth_authen}=bob"]);
    assert!(
        other.contains(
            "rules: related-part-disposition-missing related-type-missing signed-content\n"
        ),
        "{other}"
    );
    assert!(!other.contains("change_header: Content-Type"), "{other}");
}

#[test]
fn fix_as_milter_writes_what_the_scope_delivers() {
    let c = file("fix.toml", &scopes());
    let f = fixture_path(TOP);
    let raw = std::fs::read(&f).unwrap();
    let fix = |extra: &[&str]| {
        let mut args = vec!["fix", "--as-milter", "--config", c.to_str().unwrap()];
        args.extend(extra);
        args.push(f.to_str().unwrap());
        run(&args)
    };
    let o = fix(&["--rcpt", "archive@example.net"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(o.stdout, raw, "exempt: as it came");
    let o = fix(&["--rcpt", "bob@example.net"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_ne!(o.stdout, raw);
    assert!(stdout(&o).contains("\nX-MIMERef: fix; rules=extbody-url-unquoted"));
    let o = fix(&["--rcpt", "bob@example.net", "--rcpt", "x@strict.example"]);
    assert_eq!(o.status.code(), Some(1), "the strict scope rejects: {o:?}");
    assert!(o.stdout.is_empty());
    // Plain fix fixes everything whatever the policy: an envelope means nothing to it.
    let o = run(&["fix", "--rcpt", "a@b.example", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("need --as-milter"));
}

#[test]
fn config_check_names_each_bad_scope_with_its_line() {
    let bad = file(
        "bad-scopes.toml",
        r#"trusted_networks = ["127.0.0.0/8"]

[[scope]]
name = "lists"
recipients = ["@lists.example.org"]
exempt = "log"

[[scope]]
name = "one-list"
recipients = ["news@lists.example.org"]
exempt = "ignore"

[[scope]]
name = "partner"
client_networks = ["198.51.100.0/24", "198.51.100.300/32"]
exempt = "ignore"

[[scope]]
name = "list-id"
header = { name = "List-Id", pattern = "(announce" }
exempt = "log"
"#,
    );
    let o = run(&["config-check", "--config", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().collect();
    let at = |n: usize| format!("{}:{n}: ", bad.display());
    assert_eq!(lines.len(), 3, "{err}");
    assert_eq!(
        lines[0],
        format!(
            "{}[[scope]] \"one-list\" can never match: scope \"lists\" (line 4) comes first \
             and matches all of its mail (the first matching scope wins)",
            at(9)
        )
    );
    assert_eq!(
        lines[1],
        format!(
            "{}[[scope]] \"partner\" client_networks: \"198.51.100.300/32\" is not a CIDR \
             network (e.g. \"192.0.2.0/24\") or address",
            at(15)
        )
    );
    assert_eq!(
        lines[2],
        format!(
            "{}[[scope]] \"list-id\" header: pattern \"(announce\" is not a regular \
             expression: unclosed group",
            at(20)
        )
    );
    let good = file("good-scopes.toml", &scopes());
    let o = run(&["config-check", "--config", good.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
}

/// A user of the library can name the type of every field of `Envelope`, its recipients
/// too.
#[test]
fn envelope_recipients_can_be_named() {
    let envelope = mimeref_milter::Envelope::default();
    let recipients: mimeref_milter::Recipients = envelope.recipients;
    assert_eq!(recipients.count(), 0);
}
