//! `mimeref-milter survey` through the real binary: Maildir, mbox and directories of
//! messages in one run, the summary's counts and examples, unreadable input named and
//! not fatal, the same verdicts as `check --actions` whatever the number of workers,
//! and a progress bar only on a terminal.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::message::{fixture, fixture_path};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mimeref-milter"))
}

/// A fresh directory of this test's own under target/.
fn tree(tag: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("survey-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(p: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
}

const CONFIG: &str = r#"trusted_networks = []
[[scope]]
name = "announce"
header = { name = "List-Id", pattern = '<announce\.example\.org>' }
exempt = "ignore"
"#;

/// Eight messages: three in a Maildir (one in a Maildir++ folder, from an exempt list),
/// two .eml files beside a README the survey is told to skip and a dangling link, and
/// three in an mbox.
fn mail_store(dir: &Path) -> Vec<PathBuf> {
    let top = fixture("milter/top-extbody.eml");
    let listed = String::from_utf8(top.clone())
        .unwrap()
        .replace(
            "Subject: report\n",
            "Subject: report\nList-Id: <announce.example.org>\n",
        )
        .replace("<top-extbody@", "<listed@");
    let md = dir.join("Maildir");
    write(&md.join("cur/1000.1:2,S"), &top);
    write(&md.join("new/1001.2"), &fixture("milter/clean.eml"));
    write(&md.join(".Lists/cur/1002.3:2,S"), listed.as_bytes());
    std::fs::create_dir_all(md.join("tmp")).unwrap();
    std::fs::create_dir_all(md.join(".Lists/new")).unwrap();
    write(&md.join("tmp/1003.4"), b"Subject: still being delivered\n");
    write(&dir.join("eml/a.eml"), &fixture("milter/cid-dup.eml"));
    write(
        &dir.join("eml/b.eml"),
        &fixture("milter/nested-extbody.eml"),
    );
    write(&dir.join("eml/README.md"), b"# not mail\n");
    std::os::unix::fs::symlink(dir.join("gone.eml"), dir.join("eml/dangling.eml")).unwrap();
    let mut mbox = b"From legacy@example.org Mon Jan  1 00:00:00 2024\n".to_vec();
    mbox.extend_from_slice(&fixture("milter/legacy-top.eml"));
    mbox.extend_from_slice(b"\nFrom top@example.org Mon Jan  1 00:00:01 2024\n");
    mbox.extend_from_slice(
        String::from_utf8(top)
            .unwrap()
            .replace("<top-extbody@", "<in-mbox@")
            .as_bytes(),
    );
    mbox.extend_from_slice(b"\nFrom clean@example.org Mon Jan  1 00:00:02 2024\n");
    mbox.extend_from_slice(&fixture("milter/clean.eml"));
    write(&dir.join("box.mbox"), &mbox);
    write(&dir.join("c.toml"), CONFIG.as_bytes());
    vec![md, dir.join("eml"), dir.join("box.mbox")]
}

fn survey(dir: &Path, paths: &[PathBuf], extra: &[&str]) -> Output {
    bin()
        .arg("survey")
        .arg("--config")
        .arg(dir.join("c.toml"))
        .args(["--exclude", "*.md"])
        .args(extra)
        .args(paths)
        .output()
        .expect("run mimeref-milter survey")
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn rule<'a>(v: &'a Value, id: &str) -> &'a Value {
    v["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rule"] == id)
        .unwrap_or_else(|| panic!("no {id} in {v:#}"))
}

#[test]
fn a_survey_of_maildir_mbox_and_files() {
    let dir = tree("store");
    let paths = mail_store(&dir);
    let o = survey(&dir, &paths, &["--format", "json"]);
    // The dangling link is named and counted, and the rest is surveyed all the same.
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let v = json(&o);
    assert_eq!(v["messages"], 8, "{v:#}");
    assert_eq!(v["with_findings"], 6, "{v:#}");
    assert_eq!(v["direction"], "inbound");
    let unreadable = v["unreadable"].as_array().unwrap();
    assert_eq!(unreadable.len(), 1, "{v:#}");
    assert!(unreadable[0]["source"]
        .as_str()
        .unwrap()
        .ends_with("eml/dangling.eml"));
    assert_eq!(v["excluded"].as_array().unwrap().len(), 1);
    let verdicts = &v["verdicts"];
    for (verdict, n) in [
        ("fix", 3),
        ("report", 1),
        ("log", 1),
        ("ignore", 3),
        ("reject", 0),
        ("tempfail", 0),
        ("quarantine", 0),
    ] {
        assert_eq!(verdicts[verdict], n, "{verdict}: {v:#}");
    }
    assert_eq!(v["scopes"]["announce"]["ignore"], 1, "{v:#}");

    // The listed message has the finding too; its scope ignores it.
    let unquoted = rule(&v, "extbody-url-unquoted");
    assert_eq!(unquoted["messages"], 4);
    assert_eq!(unquoted["share"], 0.5);
    assert_eq!(unquoted["severity"], "warning");
    assert_eq!(unquoted["actions"]["fix"], 3);
    assert_eq!(unquoted["actions"]["ignore"], 1);
    let ex = &unquoted["examples"][0];
    assert!(
        ex["source"]
            .as_str()
            .unwrap()
            .ends_with("Maildir/cur/1000.1:2,S"),
        "the first in input order: {ex}"
    );
    assert_eq!(ex["message_id"], "<top-extbody@example.org>");
    let total: u64 = unquoted["examples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["messages"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 4, "every message is in one form: {unquoted:#}");
    // A message of an mbox is named by the offset of its From line.
    let legacy = rule(&v, "extbody-legacy-access-type");
    assert_eq!(
        legacy["examples"][0]["source"],
        format!("{}:0", dir.join("box.mbox").display())
    );
    assert_eq!(
        legacy["examples"][0]["message_id"],
        "<legacy-top@example.org>"
    );
    assert_eq!(legacy["actions"]["log"], 1);
    assert_eq!(rule(&v, "related-cid-duplicate")["actions"]["report"], 1);

    let text = survey(&dir, &paths, &[]);
    assert_eq!(text.status.code(), Some(1));
    let t = String::from_utf8_lossy(&text.stdout);
    assert!(t.starts_with("messages: 8 (6 with findings) in "), "{t}");
    assert!(t.contains("not read: 1\n"), "{t}");
    assert!(t.contains("dangling.eml: No such file or directory"), "{t}");
    assert!(t.contains("\n  fix               3   37.50%\n"), "{t}");
    assert!(
        t.contains(
            "\n  extbody-url-unquoted                      4   50.00%  warning  fix 3, ignore 1\n"
        ),
        "{t}"
    );
    assert!(
        t.contains("\n  announce                    1  ignore 1\n"),
        "{t}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The survey's verdicts are `check --actions`'s, message by message; and the summary
/// does not depend on how many workers made it.
#[test]
fn a_survey_counts_what_check_actions_decides() {
    let dir = tree("agree");
    write(&dir.join("c.toml"), CONFIG.as_bytes());
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/mail");
    let mut files = Vec::new();
    let mut dirs = vec![corpus.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                files.push(p);
            }
        }
    }
    assert!(files.len() > 30, "{}", files.len());
    let o = bin()
        .args(["check", "--actions", "--config"])
        .arg(dir.join("c.toml"))
        .args(&files)
        .output()
        .unwrap();
    let mut want = std::collections::BTreeMap::new();
    for l in String::from_utf8_lossy(&o.stdout).lines() {
        if let Some(v) = l.strip_prefix("verdict: ") {
            let v = v.split(' ').next().unwrap().to_string();
            *want.entry(v).or_insert(0u64) += 1;
        }
    }
    assert_eq!(want.values().sum::<u64>(), files.len() as u64);
    let one = survey(
        &dir,
        std::slice::from_ref(&corpus),
        &["--format", "json", "--jobs", "1"],
    );
    let three = survey(
        &dir,
        std::slice::from_ref(&corpus),
        &["--format", "json", "--jobs", "3"],
    );
    assert_eq!(one.status.code(), Some(0), "{one:?}");
    let (mut a, mut b) = (json(&one), json(&three));
    for (verdict, n) in a["verdicts"].as_object().unwrap() {
        assert_eq!(
            n.as_u64().unwrap(),
            want.get(verdict).copied().unwrap_or(0),
            "{verdict}: check --actions {want:?}, survey {:#}",
            a["verdicts"]
        );
    }
    assert_eq!(a["workers"], 1);
    assert_eq!(b["workers"], 3);
    for v in [&mut a, &mut b] {
        let o = v.as_object_mut().unwrap();
        o.remove("workers");
        o.remove("seconds");
    }
    assert_eq!(a, b);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The bar goes to standard error, and only when that is a terminal: under `script`
/// (util-linux, a pseudo-terminal) it shows, through pipes nothing is written there.
#[test]
fn a_progress_bar_only_on_a_terminal() {
    let f = fixture_path("milter/top-extbody.eml");
    let o = bin().arg("survey").arg(&f).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(
        o.stderr.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&o.stderr)
    );
    let cmd = format!(
        "{} survey {} >/dev/null",
        env!("CARGO_BIN_EXE_mimeref-milter"),
        f.display()
    );
    let o = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .output()
        .expect("script(1) from util-linux");
    let tty = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{o:?}");
    assert!(
        tty.contains("\r[##############################] 100% 1 messages"),
        "{tty:?}"
    );
    assert!(
        tty.ends_with("\r\x1b[K"),
        "the bar is cleared at the end: {tty:?}"
    );
}

/// A Sent folder of the shapes readers show wrongly (`tests/fixtures/inline`, one
/// message per shape): the summary counts the messages with inline images, those some
/// reader shows wrongly and those the configuration repairs, and names the senders.
#[test]
fn the_survey_sums_up_inline_images_and_their_senders() {
    let dir = tree("inline");
    let sent = dir.join("Sent");
    let inline = fixture_path("inline/disposition-attachment.eml");
    let fixtures = inline.parent().unwrap();
    let mut n = 0;
    for e in std::fs::read_dir(fixtures).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name.ends_with(".eml") && !name.ends_with(".fixed.eml") {
            write(
                &sent.join("cur").join(format!("{n}.{name}:2,S")),
                &std::fs::read(&p).unwrap(),
            );
            n += 1;
        }
    }
    std::fs::create_dir_all(sent.join("new")).unwrap();
    std::fs::create_dir_all(sent.join("tmp")).unwrap();
    assert_eq!(n, 8);
    let o = bin()
        .args([
            "survey",
            "--jobs",
            "2",
            "--direction",
            "outbound",
            "--format",
            "json",
        ])
        .arg(&sent)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let inline = &v["inline"];
    // Every shape but the remote base shows an image; outbound, all of those but the
    // hidden attachment (no header-only repair) are repaired by the built-in defaults.
    assert_eq!(inline["with_images"], 7, "{v:#}");
    assert_eq!(inline["misshown"], 7, "{v:#}");
    assert_eq!(inline["repaired"], 6, "{v:#}");
    let senders: Vec<&str> = inline["senders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sender"].as_str().unwrap())
        .collect();
    assert!(
        senders.contains(&"X-Mailer: Microsoft Outlook 16.0"),
        "{senders:?}"
    );
    assert!(
        senders
            .iter()
            .any(|s| s.starts_with("X-Mailer: nodemailer (6.9.8;")),
        "{senders:?}"
    );
    assert!(
        senders.contains(&"Message-ID @monitor.example.org"),
        "{senders:?}"
    );
    let rule = |id: &str| {
        v["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["rule"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no {id} in {v:#}"))
    };
    assert_eq!(rule("cid-outside-related")["misshows_inline"], true);
    assert_eq!(rule("html-base-remote")["misshows_inline"], false);
    assert_eq!(
        rule("related-part-disposition")["examples"][0]["sender"]
            .as_str()
            .unwrap()
            .split(';')
            .next(),
        Some("X-Mailer: nodemailer (6.9.8")
    );
    // The text summary says the same, and marks the rules it counts.
    let o = bin()
        .args(["survey", "--jobs", "1", "--direction", "outbound"])
        .arg(&sent)
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.contains("\n  some reader shows wrongly                           7   87.50%\n"),
        "{t}"
    );
    assert!(
        t.contains("\n  the configuration repairs                           6   75.00%\n"),
        "{t}"
    );
    assert!(t.contains("\n* cid-outside-related "), "{t}");
    // Inbound, only the images no reader shows are repaired by default.
    let o = bin()
        .args([
            "survey",
            "--jobs",
            "1",
            "--direction",
            "inbound",
            "--format",
            "json",
        ])
        .arg(&sent)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["inline"]["repaired"], 3, "{v:#}");
    assert!(t.contains("\n  html-base-remote "), "{t}");
    std::fs::remove_dir_all(&dir).unwrap();
}
