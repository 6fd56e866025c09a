//! The real binary on fixture files: output formats, exit codes, stdin, `-o`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::support::message::fixture_path;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mimeref-milter"))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run mimeref-milter")
}

fn run_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = bin()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn check_clean_message_exits_0_silently() {
    let o = run(&["check", fixture_path("cli/clean.eml").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(stdout(&o), "");
}

#[test]
fn check_text_format_names_file_part_severity_rule() {
    let path = fixture_path("cli/long-url.eml");
    let o = run(&["check", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let out = stdout(&o);
    let prefix = format!(
        "{}: 2: warning: extbody-url-word-too-long: ",
        path.display()
    );
    assert!(out.lines().any(|l| l.starts_with(&prefix)), "{out}");
}

#[test]
fn check_json_is_one_object_per_file() {
    let clean = fixture_path("cli/clean.eml");
    let long = fixture_path("cli/long-url.eml");
    let o = run(&[
        "check",
        "--format",
        "json",
        clean.to_str().unwrap(),
        long.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["file"], clean.to_str().unwrap());
    assert_eq!(lines[0]["findings"].as_array().unwrap().len(), 0);
    assert_eq!(lines[0]["changed"], false);
    let f = lines[1]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "extbody-url-word-too-long")
        .expect("finding");
    assert_eq!(f["part"], "2");
    assert_eq!(f["severity"], "warning");
    // The built-in URL form is one quoted word: a long one has nothing to fix.
    assert_eq!(f["fixable"], false);
    assert!(f["message"].as_str().unwrap().len() > 10);
    assert_eq!(lines[1]["changed"], false);
    // With the RFC 2017 form chosen, the fold is on offer and changes the message.
    let folding = TempConfig::new("json-fold", "fold_url_words = true\n");
    let o = run(&[
        "check",
        "--format",
        "json",
        "--config",
        folding.path(),
        long.to_str().unwrap(),
    ]);
    let line: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    let f = line["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "extbody-url-word-too-long")
        .expect("finding");
    assert_eq!(f["fixable"], true);
    assert_eq!(line["changed"], true);
}

#[test]
fn check_unreadable_file_exits_2() {
    let o = run(&["check", "/nonexistent/message.eml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/message.eml"));
}

#[test]
fn check_reads_stdin() {
    let raw = std::fs::read(fixture_path("cli/long-url.eml")).unwrap();
    let o = run_stdin(&["check", "-"], &raw);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).starts_with("-: 2: "), "{}", stdout(&o));
}

/// An mbox of one message (as the sample files of Ruby's mail and of mime4j are):
/// there is nothing to choose, so `fix FILE` writes what `fix FILE:0` writes, from a
/// file or standard input, and `check` takes it too; of several messages `fix`
/// refuses and names the `FILE:OFFSET` form.
#[test]
fn fix_takes_an_mbox_of_one_message_and_refuses_several() {
    let dir = std::env::temp_dir().join(format!("mimeref-cli-one-mbox-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut one = b"From dup@example.org Mon Jan  1 00:00:01 2024\n".to_vec();
    one.extend_from_slice(&std::fs::read(fixture_path("milter/cid-dup.eml")).unwrap());
    let mut two = one.clone();
    two.extend_from_slice(b"\nFrom legacy@example.org Mon Jan  1 00:00:01 2024\n");
    two.extend_from_slice(&std::fs::read(fixture_path("milter/legacy-top.eml")).unwrap());
    let (one_path, two_path) = (dir.join("one.mbox"), dir.join("two.mbox"));
    std::fs::write(&one_path, &one).unwrap();
    std::fs::write(&two_path, &two).unwrap();
    let one_name = one_path.to_str().unwrap();
    let named = run(&["fix", &format!("{one_name}:0")]);
    assert_eq!(named.status.code(), Some(0), "{named:?}");
    assert!(
        named.stdout.starts_with(b"From: alice@example.org\n"),
        "{named:?}"
    );
    let whole = run(&["fix", one_name]);
    assert_eq!(whole.status.code(), Some(0), "{whole:?}");
    assert_eq!(whole.stdout, named.stdout, "fix FILE is fix FILE:0");
    let piped = run_stdin(&["fix", "-"], &one);
    assert_eq!(piped.status.code(), Some(0), "{piped:?}");
    assert_eq!(piped.stdout, named.stdout);
    let checked = run(&["check", one_name]);
    assert_eq!(checked.status.code(), Some(1), "{checked:?}");
    assert!(
        stdout(&checked).starts_with(&format!("{one_name}:0: ")),
        "{checked:?}"
    );
    let two_name = two_path.to_str().unwrap();
    let o = run(&["fix", two_name]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(o.stdout.is_empty(), "{o:?}");
    assert!(err.contains("is an mbox of several messages"), "{err}");
    assert!(err.contains(&format!("{two_name}:0 is the first")), "{err}");
    let o = run_stdin(&["fix", "-"], &two);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(o.stdout.is_empty(), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("FILE:OFFSET"),
        "{o:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A configuration file in a fresh temporary directory, removed when dropped.
struct TempConfig(PathBuf);

impl TempConfig {
    fn new(tag: &str, text: &str) -> TempConfig {
        let dir = std::env::temp_dir().join(format!("mimeref-cli-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.toml");
        std::fs::write(&path, text).unwrap();
        TempConfig(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempConfig {
    fn drop(&mut self) {
        if let Some(d) = self.0.parent() {
            std::fs::remove_dir_all(d).ok();
        }
    }
}

#[test]
fn fix_folds_and_leaves_the_rest_identical() {
    let raw = std::fs::read(fixture_path("cli/long-url.eml")).unwrap();
    // The RFC 2017 fold is an option (IMAP servers and the libraries keep the folding
    // whitespace inside the URL, docs/INTEROP.md).
    let folding = TempConfig::new("fold-on", "fold_url_words = true\n");
    let o = run_stdin(&["fix", "--config", folding.path(), "-"], &raw);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let fixed = stdout(&o);
    assert!(fixed.contains("URL=\"ftp://ftp.deepdirs.org/1/2/3/4/5/6/7/8/9\n /10/11/12/13/14/15/16/17/18/20/21/file.h\n tml\""), "{fixed}");
    let original = String::from_utf8(raw.clone()).unwrap();
    let head = original
        .find("Content-Type: message/external-body")
        .unwrap();
    assert_eq!(&fixed[..head], &original[..head]);
    let tail = original.find("\n\nContent-Type: text/html").unwrap();
    assert!(fixed.ends_with(&original[tail..]));
    // The fixed message checks clean of the URL rules.
    let o = run_stdin(
        &["check", "--config", folding.path(), "-"],
        fixed.as_bytes(),
    );
    assert!(!stdout(&o).contains("extbody-url"), "{}", stdout(&o));
    // By default (fold_url_words = false) the URL stays one word: nothing to fix.
    let o = run_stdin(&["fix", "-"], &raw);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(o.stdout, raw);
    // The daemon's built-in policy only logs the long word: it sends nothing.
    let empty = TempConfig::new("fold-default", "");
    let o = run_stdin(&["fix", "--as-milter", "--config", empty.path(), "-"], &raw);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(o.stdout, raw);
}

#[test]
fn fix_as_milter_writes_what_the_mta_delivers() {
    let raw = b"From: a@example.org\nSubject: s\nContent-Type: multipart/related; boundary=r; type=\"text/html\"\n\n--r\nContent-Type: text/html\n\n<img src=\"cid:a@b.test\"><img src=\"cid:gone@b.test\">\n--r\nContent-Type: image/gif\nContent-Location: cid:a@b.test\n\nGIF\n--r--\n";
    let empty = TempConfig::new("as-milter", "");
    let o = run_stdin(&["fix", "--as-milter", "--config", empty.path(), "-"], raw);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let expected = String::from_utf8_lossy(raw)
        .replace(
            "type=\"text/html\"\n\n",
            "type=\"text/html\"\nX-MIMERef: fix; rules=related-cid-location-only,related-ref-dangling;\n fixed=related-cid-location-only\n\n",
        )
        .replace(
            "Content-Location: cid:a@b.test\n",
            "Content-Location: cid:a@b.test\nContent-ID: <a@b.test>\n",
        );
    assert_eq!(stdout(&o), expected);
    // A refused message is not written.
    let reject = TempConfig::new(
        "as-milter-reject",
        "[policy.outbound]\n\"related-ref-dangling\" = \"reject\"\n",
    );
    let o = run_stdin(
        &[
            "fix",
            "--as-milter",
            "--direction",
            "outbound",
            "--config",
            reject.path(),
            "-",
        ],
        raw,
    );
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(o.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("550 5.6.0"),
        "{o:?}"
    );
}

#[test]
fn fix_without_findings_is_byte_identical_and_writes_to_o() {
    let dir = std::env::temp_dir().join(format!("mimeref-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("out.eml");
    let o = run(&[
        "fix",
        fixture_path("cli/clean.eml").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(
        std::fs::read(&out).unwrap(),
        std::fs::read(fixture_path("cli/clean.eml")).unwrap()
    );
    let o = run(&["fix", "/nonexistent.eml"]);
    assert_eq!(o.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn cturi_both_directions() {
    let o = run(&["cturi", "to-uri", "text/plain; charset=us-ascii"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let uri = stdout(&o).trim().to_string();
    assert!(
        uri.to_ascii_lowercase().starts_with("contenttype:"),
        "{uri}"
    );
    let o = run(&["cturi", "to-content-type", &uri]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(
        stdout(&o).to_ascii_lowercase().starts_with("text/plain"),
        "{}",
        stdout(&o)
    );
    let o = run(&["cturi", "to-content-type", "not a uri"]);
    assert_eq!(o.status.code(), Some(2));
}

/// A non-ASCII parameter goes round the mapping exactly, in RFC 2231 form, never as
/// raw 8-bit inside a quoted-string.
#[test]
fn cturi_round_trip_of_a_non_ascii_parameter() {
    let ct = "application/pdf; name*=utf-8''caf%C3%A9.pdf";
    let o = run(&["cturi", "to-uri", ct]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let uri = stdout(&o).trim().to_string();
    let o = run(&["cturi", "to-content-type", &uri]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(stdout(&o), format!("{ct}\n"));
}

#[test]
fn version_and_help() {
    let o = run(&["--version"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).starts_with("mimeref-milter "));
    let o = run(&["check", "--help"]);
    assert!(stdout(&o).contains("--format"));
}

#[test]
fn check_actions_lists_every_rewrite_and_strip() {
    let dir = std::env::temp_dir().join(format!("mimeref-cli-url-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("c.toml");
    std::fs::write(
        &cfg,
        "[schemes]\nstrip_denied = true\n[[rewrite]]\nscheme = \"http\"\ntemplate = \"https://{authority}{path}{query}\"\n",
    )
    .unwrap();
    let msg =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/milter/url-policy-nested.eml");
    let o = run(&[
        "check",
        "--actions",
        "--config",
        cfg.to_str().unwrap(),
        msg.to_str().unwrap(),
    ]);
    let out = stdout(&o);
    assert!(
        out.contains("\nrewrite: 2.1 extbody-url-rewritten <http://files.example.com/report.pdf> -> <https://files.example.com/report.pdf>\n"),
        "{out}"
    );
    assert!(
        out.contains("\nstrip: 2.2 extbody-url-scheme-denied <javascript:alert(document.cookie)> -> stripped\n"),
        "{out}"
    );
    assert!(out.contains("replace_body: yes"), "{out}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A multipart whose nested external-body URL is unquoted (fixable only by replacing the
/// body), after `fields` extra header lines and with `pad` octets of body text.
fn nested_fixable(fields: usize, pad: usize) -> Vec<u8> {
    let mut m = String::from("From: a@example.org\r\nTo: b@example.org\r\n");
    for i in 0..fields {
        m.push_str(&format!(
            "Received: from relay{i:03}.example.org by mx.example.org; Mon, 1 Jan 2024\r\n"
        ));
    }
    m.push_str("Subject: limits\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: message/external-body; access-type=URL; URL=http://a.example/x\r\n\r\nContent-Type: text/plain\r\nContent-ID: <x@a.example>\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\n");
    for _ in 0..pad / 50 {
        m.push_str(&"x".repeat(48));
        m.push_str("\r\n");
    }
    m.push_str("--b--\r\n");
    m.into_bytes()
}

/// Runs `check --actions` and `fix` with `config` on `msg`: (check output, fixed bytes).
fn offline(name: &str, config: &str, msg: &[u8]) -> (String, Vec<u8>) {
    let dir = std::env::temp_dir().join(format!("mimeref-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("c.toml");
    std::fs::write(&cfg, config).unwrap();
    let eml = dir.join("m.eml");
    std::fs::write(&eml, msg).unwrap();
    let (c, m) = (cfg.to_str().unwrap(), eml.to_str().unwrap());
    let o = run(&["check", "--actions", "--config", c, m]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let checked = stdout(&o);
    let o = run(&["fix", "--config", c, m]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    std::fs::remove_dir_all(&dir).ok();
    (checked, o.stdout)
}

/// The number N of "analysed the first N octets" in `out`.
fn analysed(out: &str) -> usize {
    let at = out.find("analysed the first ").expect(out) + "analysed the first ".len();
    out[at..].split(' ').next().unwrap().parse().unwrap()
}

/// `[limits] max_header_size` applies offline as in the daemon: a larger header section
/// is message-too-large, the body is never replaced, `fix` changes nothing below it.
#[test]
fn offline_commands_honour_max_header_size() {
    let msg = nested_fixable(30, 200);
    let (out, fixed) = offline("hdr-ok", "", &msg);
    assert!(!out.contains("message-too-large"), "{out}");
    assert!(out.contains("replace_body: yes"), "{out}");
    assert_ne!(fixed, msg, "the control: without the limit it is fixed");

    let (out, fixed) = offline("hdr", "[limits]\nmax_header_size = 1024\n", &msg);
    assert!(out.contains(": 0: error: message-too-large: "), "{out}");
    assert!(analysed(&out) <= 1024, "{out}");
    assert!(
        out.contains("verdict: fix (oversize)\n") || out.contains("(oversize)"),
        "{out}"
    );
    assert!(out.contains("replace_body: no\n"), "{out}");
    assert!(!out.contains("replace_body: yes"), "{out}");
    assert_eq!(fixed, msg, "fix follows the same limit");
}

/// Over `max_message_size`, `check --actions` prints what the daemon does (nothing
/// replaced) and `fix` follows the same limit; the finding never claims to have
/// analysed more than the limit.
#[test]
fn offline_commands_pass_oversize_messages_on_like_the_daemon() {
    let msg = nested_fixable(2, 5000);
    let (out, fixed) = offline("size", "[limits]\nmax_message_size = 2048\n", &msg);
    assert!(out.contains(": 0: error: message-too-large: "), "{out}");
    let n = analysed(&out);
    assert!(n <= 2048, "{out}");
    assert!(
        out.contains(&format!("message of {} octets", msg.len())),
        "{out}"
    );
    assert!(out.contains("replace_body: no\n"), "{out}");
    assert!(!out.contains("replace_body: yes"), "{out}");
    assert_eq!(fixed, msg, "fix follows the same limit");
}

/// A configuration in dry-run mode: `--actions` says the daemon sends nothing.
#[test]
fn check_actions_follows_dry_run_like_the_daemon() {
    let msg = nested_fixable(2, 200);
    let (out, _) = offline("dry", "", &msg);
    assert!(!out.contains("dry run"), "{out}");
    let (out, _) = offline("dry-on", "dry_run = true\n", &msg);
    assert!(out.contains("\ndry run: nothing is sent"), "{out}");
    assert!(out.contains("\nreply: accept\n"), "{out}");
}

/// Over the limit, a fix in the top-level heading is still made, as the daemon makes it
/// with change_header; every octet after the heading is passed on as it is.
#[test]
fn offline_fix_of_an_oversize_message_changes_only_the_heading() {
    let mut msg = b"Subject: big\r\nContent-Type: message/external-body; access-type=URL; URL=http://a.example/x\r\n\r\nContent-Type: text/plain\r\nContent-ID: <x@a.example>\r\n\r\n".to_vec();
    for _ in 0..100 {
        msg.extend_from_slice(&[b'y'; 48]);
        msg.extend_from_slice(b"\r\n");
    }
    let (out, fixed) = offline("top", "[limits]\nmax_message_size = 2048\n", &msg);
    assert!(out.contains("message-too-large"), "{out}");
    assert!(
        out.contains("\nchange_header: Content-Type index 1 value "),
        "{out}"
    );
    assert!(out.contains("replace_body: no\n"), "{out}");
    let sep = |m: &[u8]| m.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let fixed_text = String::from_utf8_lossy(&fixed[..sep(&fixed)]).into_owned();
    assert!(
        fixed_text.contains("URL=\"http://a.example/x\""),
        "{fixed_text}"
    );
    assert_eq!(fixed[sep(&fixed)..], msg[sep(&msg)..]);
}

/// A user who may not read the configuration is told which group may, and how to use a
/// copy instead: for a file its group may read, and for a file in a folder only its
/// group may enter (the package's /etc/mimeref-milter, root:mimeref-milter 0750, with
/// the file 0644 inside).
#[test]
fn an_unreadable_config_names_the_group_to_join() {
    if !Path::new("/usr/bin/setpriv").exists() && !Path::new("/bin/setpriv").exists() {
        eprintln!("skipped: setpriv(1) is missing, no way to run as another user");
        return;
    }
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: not root, cannot give the file to another owner");
        return;
    }
    let groups = std::fs::read_to_string("/etc/group").unwrap();
    let (group, gid) = groups
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            Some((f.first()?.to_string(), f.get(2)?.parse::<u32>().ok()?))
        })
        .find(|(_, gid)| *gid != 0 && *gid != 65534)
        .expect("a group other than root and nogroup");
    let dir = std::env::temp_dir().join(format!("mimeref-cli-perm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let config = dir.join("mimeref-milter.toml");
    std::fs::write(&config, "").unwrap();
    std::os::unix::fs::chown(&config, Some(0), Some(gid)).unwrap();
    std::fs::set_permissions(&config, std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
    let closed = dir.join("etc");
    std::fs::create_dir_all(&closed).unwrap();
    std::os::unix::fs::chown(&closed, Some(0), Some(gid)).unwrap();
    std::fs::set_permissions(&closed, std::os::unix::fs::PermissionsExt::from_mode(0o750)).unwrap();
    let packaged = closed.join("mimeref-milter.toml");
    std::fs::write(&packaged, "").unwrap();
    let msg = fixture_path("cli/clean.eml");
    for (cmd, config) in [
        ("check", &config),
        ("survey", &config),
        ("check", &packaged),
    ] {
        let o = Command::new("setpriv")
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_mimeref-milter"))
            .args([cmd, "--config"])
            .arg(config)
            .arg(&msg)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {err}");
        assert!(err.contains("Permission denied"), "{cmd}: {err}");
        assert!(
            err.contains(&format!("group {group} may read it")),
            "{cmd}: {err}"
        );
        assert!(
            err.contains(&format!("usermod -aG {group} ")),
            "{cmd}: {err}"
        );
        assert!(err.contains("--config"), "{cmd}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Under the packaged unit's UMask=0077 a socket without socket_mode is born 0700:
/// socket_group would then let its members do nothing, so config-check says so at
/// socket_group's line; under UMask=0007 (the group may write) it says nothing.
#[test]
fn config_check_reports_socket_group_without_socket_mode_under_a_tight_umask() {
    // The test's own group: one it may give the socket, so nothing else is reported.
    // The socket goes in TempConfig's directory.
    let gid = rustix::process::getegid().as_raw();
    let dir = std::env::temp_dir().join(format!("mimeref-cli-umask-{}", std::process::id()));
    let cfg = TempConfig::new(
        "umask",
        &format!(
            "socket = \"unix:{}/m.sock\"\nsocket_group = \"{gid}\"\n",
            dir.display()
        ),
    );
    let under = |umask: &str| {
        Command::new("sh")
            .args([
                "-c",
                &format!("umask {umask}; exec \"$0\" config-check --config \"$1\""),
            ])
            .arg(env!("CARGO_BIN_EXE_mimeref-milter"))
            .arg(cfg.path())
            .output()
            .unwrap()
    };
    let want = format!(
        "{}:2: socket_group \"{gid}\" without socket_mode: under umask 0077 the socket gets \
         mode 0700",
        cfg.path()
    );
    let tight = under("0077");
    let err = String::from_utf8_lossy(&tight.stderr);
    assert!(!tight.status.success(), "{err}");
    assert!(err.contains(&want), "{err}");
    let loose = under("0007");
    let err = String::from_utf8_lossy(&loose.stderr);
    assert!(loose.status.success(), "{err}");
    assert!(!err.contains("without socket_mode"), "{err}");
}

/// `config-dump | config-check -`, through the real binary: the dump of a file with
/// scopes, policies and a rewrite rule is a configuration config-check passes, and
/// each value written names the file and line it came from.
#[test]
fn config_dump_reads_back_through_config_check_stdin() {
    let dir = std::env::temp_dir().join(format!("mimeref-cli-dump-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("site.toml");
    std::fs::write(
        &cfg,
        "max_connections = 40\n\n[policy.inbound]\n\"related-*\" = \"reject\"\n\n\
         [[rewrite]]\ntemplate = \"https://u:hunter2@gw.example/f?u={url_pct}\"\n\n\
         [[scope]]\nname = \"lists\"\nheader = { name = \"List-Id\" }\nexempt = \"log\"\n",
    )
    .unwrap();
    let path = cfg.to_str().unwrap();
    for flags in [&[][..], &["-n"][..]] {
        let mut args = vec!["config-dump", "--config", path];
        args.extend_from_slice(flags);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{o:?}");
        let dump = stdout(&o);
        assert!(
            dump.contains(&format!("max_connections = 40  # {path}:1\n")),
            "{dump}"
        );
        assert!(
            dump.contains(&format!("\"related-*\" = \"reject\"  # {path}:4\n")),
            "{dump}"
        );
        assert!(
            dump.contains("[[scope]]") && dump.contains("name = \"lists\""),
            "{dump}"
        );
        assert!(!dump.contains("hunter2"), "{dump}");
        let back = run_stdin(&["config-check", "-"], dump.as_bytes());
        assert_eq!(back.status.code(), Some(0), "{back:?}\n{dump}");
        assert_eq!(stdout(&back), "standard input: OK\n");
    }
    // A mistake read from standard input is named so, with its line.
    let bad = run_stdin(&["config-check", "-"], b"\nmax_connections = 0\n");
    assert_eq!(bad.status.code(), Some(1), "{bad:?}");
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("standard input:2: max_connections = 0"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The completions are scripts each shell takes: bash's registers the command (as
/// the packages' checks do with the installed file), and every shell's names the
/// subcommands.
#[test]
fn completions_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let o = run(&["completions", shell]);
        assert_eq!(o.status.code(), Some(0), "{o:?}");
        let script = stdout(&o);
        for sub in ["config-dump", "config-check", "survey", "completions"] {
            assert!(script.contains(sub), "{shell}: no {sub}");
        }
    }
    let dir = std::env::temp_dir().join(format!("mimeref-cli-compl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("mimeref-milter");
    std::fs::write(&file, run(&["completions", "bash"]).stdout).unwrap();
    let o = Command::new("bash")
        .arg("-c")
        .arg("source \"$1\" && complete -p mimeref-milter")
        .arg("bash")
        .arg(&file)
        .output()
        .expect("bash");
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(
        stdout(&o).contains("-F _mimeref__milter mimeref-milter"),
        "{o:?}"
    );
    let bad = run(&["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
}
