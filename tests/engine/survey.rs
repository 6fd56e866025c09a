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

/// The fixtures of the name and type rules (`tests/fixtures/{names,refs,rfc822}`, one
/// message per shape) as one folder: the "names and types:" block counts each kind,
/// names the forms of the references no recipient loads, with an example each, and the
/// senders; outbound the defaults repair the wrong types and the names in one field,
/// inbound only the types (a copied name waits for repairs to reach signed content).
#[test]
fn the_survey_sums_up_names_and_types_and_their_senders() {
    let dir = tree("names");
    let mut n = 0;
    for shape in ["names", "refs", "rfc822"] {
        let fixtures = fixture_path(shape);
        for e in std::fs::read_dir(&fixtures).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if name.ends_with(".eml") && !name.ends_with(".fixed.eml") {
                write(
                    &dir.join(format!("{shape}-{name}")),
                    &std::fs::read(&p).unwrap(),
                );
                n += 1;
            }
        }
    }
    assert_eq!(n, 30);
    let names = |direction: &str| {
        let o = bin()
            .args(["survey", "--jobs", "2", "--direction", direction])
            .args(["--format", "json"])
            .arg(&dir)
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        v["names"].clone()
    };
    let out = names("outbound");
    assert_eq!(out["messages"], 23, "{out:#}");
    assert_eq!(out["misnamed"], 12, "{out:#}");
    assert_eq!(out["empty_forwards"], 3, "{out:#}");
    assert_eq!(out["wrong_types"], 5, "{out:#}");
    assert_eq!(out["unreachable"], 3, "{out:#}");
    assert_eq!(out["repaired"], 6, "{out:#}");
    assert_eq!(names("inbound")["repaired"], 3);
    let forms: Vec<&str> = out["forms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["form"].as_str().unwrap())
        .collect();
    for form in [
        "blob:applewebdata",
        "file:…/msohtmlclip1",
        "imap:",
        "data:",
        "webkit-fake-url:",
        "http://localhost",
    ] {
        assert!(forms.contains(&form), "{form} not in {forms:?}");
    }
    let blob = out["forms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["form"] == "blob:applewebdata")
        .unwrap();
    assert!(
        blob["source"]
            .as_str()
            .unwrap()
            .ends_with("refs-unreachable.eml"),
        "{blob:#}"
    );
    let senders: Vec<&str> = out["senders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sender"].as_str().unwrap())
        .collect();
    for who in [
        "X-Mailer: Apple Mail (2.3774.500.171.1.1)",
        "X-Mailer: Python email 3.12 (add_attachment)",
        "Message-ID @mail.gmail.com",
    ] {
        assert!(senders.contains(&who), "{who} not in {senders:?}");
    }
    // The text block says the same.
    let o = bin()
        .args(["survey", "--jobs", "1", "--direction", "outbound"])
        .arg(&dir)
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("\nnames and types:\n"), "{t}");
    assert!(
        t.contains("\n  images typed wrong                                  5   16.67%\n"),
        "{t}"
    );
    assert!(t.contains("\n           1  blob:applewebdata\n"), "{t}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The `e.g.` lines of a text summary: (the rule above them, path, Message-ID).
fn examples(text: &str) -> Vec<(String, String, String)> {
    let mut rule = String::new();
    let mut out = Vec::new();
    for l in text.lines() {
        if l.starts_with("  ") && !l.starts_with("   ") || l.starts_with("* ") {
            rule = l[2..].split(' ').next().unwrap().to_string();
        }
        if let Some(e) = l.trim_start().strip_prefix("e.g. ") {
            let mut w = e.split(' ');
            let path = w.next().unwrap().to_string();
            let id = w.next().unwrap().to_string();
            out.push((rule.clone(), path, id));
        }
    }
    out
}

/// Every example a survey prints opens in `check`, `check --actions` and `fix` pasted as
/// it is: the message of an mbox by its `FILE:OFFSET`, a Maildir entry by its path
/// (colons and all); and it is that very message (its finding, its Message-ID).
#[test]
fn a_survey_example_pastes_into_check_as_printed() {
    let dir = tree("paste");
    let top = String::from_utf8(fixture("milter/top-extbody.eml")).unwrap();
    let mut mbox = b"From clean@example.org Mon Jan  1 00:00:00 2024\n".to_vec();
    mbox.extend_from_slice(&fixture("milter/clean.eml"));
    mbox.extend_from_slice(b"\nFrom dup@example.org Mon Jan  1 00:00:01 2024\n");
    mbox.extend_from_slice(&fixture("milter/cid-dup.eml"));
    mbox.extend_from_slice(b"\nFrom top@example.org Mon Jan  1 00:00:02 2024\n");
    mbox.extend_from_slice(top.replace("<top-extbody@", "<in-mbox@").as_bytes());
    write(&dir.join("box.mbox"), &mbox);
    let md = dir.join("Maildir");
    // A name ending in a colon and digits, as no file could be FILE:OFFSET.
    write(
        &md.join("cur/1700000000.1:2"),
        fixture("milter/legacy-top.eml").as_slice(),
    );
    std::fs::create_dir_all(md.join("new")).unwrap();
    write(&dir.join("c.toml"), CONFIG.as_bytes());
    let o = survey(&dir, &[dir.join("box.mbox"), md.clone()], &["--jobs", "1"]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{text}");
    let ex = examples(&text);
    let find = |rule: &str| {
        ex.iter()
            .find(|e| e.0 == rule)
            .unwrap_or_else(|| panic!("no example of {rule}: {text}"))
            .clone()
    };
    let dup = find("related-cid-duplicate");
    let in_mbox = find("extbody-url-unquoted");
    let legacy = find("extbody-legacy-access-type");
    assert!(
        dup.1
            .starts_with(&format!("{}:", dir.join("box.mbox").display())),
        "{dup:?}"
    );
    assert_ne!(dup.1.rsplit(':').next(), Some("0"), "{dup:?}");
    assert_eq!(dup.2, "<cid-dup@example.org>");
    assert_eq!(in_mbox.2, "<in-mbox@example.org>");
    assert!(legacy.1.ends_with("cur/1700000000.1:2"), "{legacy:?}");
    for (rule, path, id) in [dup, in_mbox, legacy] {
        let o = bin()
            .args(["check", "--config"])
            .arg(dir.join("c.toml"))
            .arg(&path)
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(1), "{path}: {o:?}");
        assert!(out.contains(&format!(": {rule}: ")), "{path}: {out}");
        assert!(
            out.lines().all(|l| l.starts_with(&format!("{path}: "))),
            "named as the survey names it: {out}"
        );
        let o = bin()
            .args(["check", "--actions", "--config"])
            .arg(dir.join("c.toml"))
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("\nverdict: "),
            "{o:?}"
        );
        for fix in [&["fix"][..], &["fix", "--as-milter"]] {
            let o = bin().args(fix).arg(&path).output().unwrap();
            let written = String::from_utf8_lossy(&o.stdout);
            assert_eq!(o.status.code(), Some(0), "{fix:?} {path}: {o:?}");
            assert!(written.contains(&format!("Message-ID: {id}")), "{written}");
            assert!(!written.starts_with("From "), "{written}");
        }
    }
    // An offset where no message starts is refused, naming the form.
    let o = bin()
        .arg("check")
        .arg(format!("{}:5", dir.join("box.mbox").display()))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no message of "),
        "{o:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `check` given an mbox checks each of its messages under the name survey gives it,
/// a message file with one From line included (the line is not the message's);
/// `fix` refuses an mbox of several messages given whole, and says how to name one of
/// them; of one message, it writes that message.
#[test]
fn check_splits_an_mbox_and_fix_refuses_several() {
    let dir = tree("whole-mbox");
    let cid = fixture("milter/cid-dup.eml");
    let mut one = b"From dup@example.org Mon Jan  1 00:00:01 2024\n".to_vec();
    one.extend_from_slice(&cid);
    write(&dir.join("one.mbox"), &one);
    let mut two = one.clone();
    two.extend_from_slice(b"\nFrom legacy@example.org Mon Jan  1 00:00:01 2024\n");
    two.extend_from_slice(&fixture("milter/legacy-top.eml"));
    write(&dir.join("two.mbox"), &two);
    let plain = bin()
        .arg("check")
        .arg(fixture_path("milter/cid-dup.eml"))
        .output()
        .unwrap();
    let findings = |o: &Output| -> Vec<String> {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(|l| l.split_once(": ").unwrap().1.to_string())
            .collect()
    };
    let o = bin()
        .arg("check")
        .arg(dir.join("one.mbox"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert_eq!(
        findings(&o),
        findings(&plain),
        "the From line is not the message's"
    );
    let name = dir.join("one.mbox").display().to_string();
    assert!(
        String::from_utf8_lossy(&o.stdout).starts_with(&format!("{name}:0: ")),
        "{o:?}"
    );
    let o = bin()
        .args(["check", "--format", "json"])
        .arg(dir.join("two.mbox"))
        .output()
        .unwrap();
    let lines: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let second = two.windows(12).position(|w| w == b"From legacy@").unwrap();
    let name2 = dir.join("two.mbox").display().to_string();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["file"], format!("{name2}:0"));
    assert_eq!(lines[1]["file"], format!("{name2}:{second}"));
    assert!(lines[1]["findings"]
        .to_string()
        .contains("extbody-legacy-access-type"));
    let o = bin().arg("fix").arg(dir.join("two.mbox")).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(o.stdout.is_empty(), "{o:?}");
    assert!(err.contains("is an mbox"), "{err}");
    assert!(err.contains(&format!("{name2}:0 is the first")), "{err}");
    assert!(err.contains("survey"), "{err}");
    let o = bin().arg("fix").arg(format!("{name}:0")).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(o.stdout.starts_with(b"From: alice@example.org\n"), "{o:?}");
    let whole = bin().arg("fix").arg(dir.join("one.mbox")).output().unwrap();
    assert_eq!(whole.status.code(), Some(0), "{whole:?}");
    assert_eq!(whole.stdout, o.stdout, "one message: nothing to choose");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs a survey that must end within 20 s (a FIFO read would wait for ever).
fn survey_in_time(args: &[&std::ffi::OsStr]) -> Output {
    let child = bin()
        .arg("survey")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let id = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(20)) {
        Ok(o) => o.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").arg("-9").arg(id.to_string()).status();
            panic!("survey {args:?} still running after 20 s");
        }
    }
}

fn mkfifo(p: &Path) {
    let ok = Command::new("mkfifo").arg(p).status().unwrap().success();
    assert!(ok, "mkfifo {}", p.display());
}

/// What survey is not given, it does not read: links out of the named tree (to a file,
/// a Maildir's cur/), FIFOs and devices named on the command line or found in a walk,
/// a folder where a Maildir keeps messages. Each is named with the reason, and the
/// exit status says that something was not read.
#[test]
fn survey_reads_only_what_it_is_given() {
    let dir = tree("hostile");
    let outside = dir.join("outside");
    let secret = fixture("milter/top-extbody.eml");
    let secret = String::from_utf8(secret)
        .unwrap()
        .replace("<top-extbody@", "<secret@");
    write(&outside.join("secret.eml"), secret.as_bytes());
    write(&outside.join("cur/1.2:2,S"), secret.as_bytes());
    let store = dir.join("store");
    write(&store.join("mail/a.eml"), &fixture("milter/clean.eml"));
    std::os::unix::fs::symlink(outside.join("secret.eml"), store.join("mail/link.eml")).unwrap();
    // A link inside the tree is read, as the file it leads to.
    std::os::unix::fs::symlink(store.join("mail/a.eml"), store.join("mail/same.eml")).unwrap();
    let md = store.join("Maildir");
    std::fs::create_dir_all(md.join("new")).unwrap();
    std::os::unix::fs::symlink(outside.join("cur"), md.join("cur")).unwrap();
    write(&md.join("new/1.eml"), &fixture("milter/clean.eml"));
    std::fs::create_dir_all(md.join("new/2.folder")).unwrap();
    mkfifo(&md.join("new/3.fifo"));
    mkfifo(&store.join("mail/pipe.eml"));
    let named_fifo = dir.join("named.fifo");
    mkfifo(&named_fifo);
    let o = survey_in_time(&[
        "--format".as_ref(),
        "json".as_ref(),
        store.as_os_str(),
        named_fifo.as_os_str(),
        "/dev/zero".as_ref(),
    ]);
    let v = json(&o);
    assert_eq!(o.status.code(), Some(1), "{v:#}");
    assert_eq!(v["messages"], 3, "a.eml, same.eml, new/1.eml: {v:#}");
    assert!(!o.stdout.windows(8).any(|w| w == b"<secret@"), "{v:#}");
    let skipped: Vec<(String, String)> = v["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["source"].as_str().unwrap().to_string(),
                s["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let reason = |suffix: &str| {
        skipped
            .iter()
            .find(|s| s.0.ends_with(suffix))
            .unwrap_or_else(|| panic!("{suffix} not skipped: {skipped:#?}"))
            .1
            .clone()
    };
    assert!(reason("mail/link.eml").contains("outside"), "{skipped:?}");
    assert!(reason("Maildir/cur").contains("outside"), "{skipped:?}");
    assert!(reason("new/2.folder").contains("folder"), "{skipped:?}");
    assert!(reason("new/3.fifo").contains("FIFO"), "{skipped:?}");
    assert!(reason("mail/pipe.eml").contains("FIFO"), "{skipped:?}");
    assert!(reason("named.fifo").contains("FIFO"), "{skipped:?}");
    assert!(
        reason("/dev/zero").contains("character device"),
        "{skipped:?}"
    );
    assert_eq!(skipped.len(), 7, "{skipped:#?}");
    // The text summary names them too.
    let o = survey_in_time(&[store.as_os_str(), named_fifo.as_os_str()]);
    let t = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("\nskipped: 6\n"), "{t}");
    assert!(
        t.contains("named.fifo: a FIFO, not a message file\n"),
        "{t}"
    );
    // Asked to, it follows them: the outside message (twice: the link to it, and the
    // Maildir's cur/) is surveyed, and only the FIFOs and the folder are skipped.
    let o = survey_in_time(&[
        "--format".as_ref(),
        "json".as_ref(),
        "--follow-symlinks".as_ref(),
        store.as_os_str(),
    ]);
    let v = json(&o);
    assert_eq!(v["messages"], 5, "{v:#}");
    assert_eq!(v["skipped"].as_array().unwrap().len(), 3, "{v:#}");
    assert!(o.stdout.windows(8).any(|w| w == b"<secret@"), "{v:#}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A file name with line breaks or terminal controls cannot forge a line of the text
/// summary: every name printed has its control characters escaped.
#[test]
fn names_cannot_forge_summary_lines() {
    let dir = tree("names");
    let forged = "x\nmessages: 999 (0 with findings) in 0.00 s\n\x1b[2J.eml";
    write(
        &dir.join("mail").join(forged),
        &fixture("milter/cid-dup.eml"),
    );
    mkfifo(&dir.join("mail").join("y\nnot read: 0"));
    let o = survey_in_time(&[dir.join("mail").as_os_str()]);
    let t = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(!t.lines().any(|l| l.starts_with("messages: 999")), "{t}");
    assert!(!t.lines().any(|l| l.starts_with("not read: 0")), "{t}");
    assert!(!t.contains('\x1b'), "{t}");
    assert!(
        t.contains("x\\nmessages: 999 (0 with findings) in 0.00 s\\n\\u{1b}[2J.eml <cid-dup@"),
        "{t}"
    );
    assert!(t.contains("y\\nnot read: 0: a FIFO"), "{t}");
    // check escapes the names it prints as well.
    let o = bin()
        .arg("check")
        .arg(dir.join("mail").join(forged))
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.lines().all(|l| l.contains("x\\nmessages: 999")), "{t}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A message past `max_message_size`, in an mbox or alone, large enough to be
/// streamed: the survey decides it as `check --actions` does (the daemon's oversize
/// decision), and names the limit in the finding.
#[test]
fn messages_past_the_limit_are_decided_as_check_decides() {
    let dir = tree("large");
    let config = "[limits]\nmax_message_size = 65536\n";
    write(&dir.join("c.toml"), config.as_bytes());
    let mut big = fixture("milter/top-extbody.eml");
    for _ in 0..20_000 {
        big.extend_from_slice(b"filler line of the body, long enough to make it big\n");
    }
    write(&dir.join("mail/big.eml"), &big);
    let mut mbox = b"From a@example.org Mon Jan  1 00:00:00 2024\n".to_vec();
    mbox.extend_from_slice(&big);
    mbox.extend_from_slice(b"\nFrom b@example.org Mon Jan  1 00:00:00 2024\n");
    mbox.extend_from_slice(&fixture("milter/clean.eml"));
    write(&dir.join("mail/big.mbox"), &mbox);
    let o = bin()
        .args(["survey", "--format", "json", "--config"])
        .arg(dir.join("c.toml"))
        .arg(dir.join("mail"))
        .output()
        .unwrap();
    let v = json(&o);
    assert_eq!(v["messages"], 3, "{v:#}");
    let too_large = rule(&v, "message-too-large");
    assert_eq!(too_large["messages"], 2, "{v:#}");
    let o = bin()
        .args(["check", "--actions", "--config"])
        .arg(dir.join("c.toml"))
        .arg(dir.join("mail/big.eml"))
        .arg(dir.join("mail/big.mbox"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let mut verdicts = std::collections::BTreeMap::new();
    for l in out.lines() {
        if let Some(v) = l.strip_prefix("verdict: ") {
            *verdicts
                .entry(v.split(' ').next().unwrap().to_string())
                .or_insert(0u64) += 1;
        }
    }
    for (verdict, n) in v["verdicts"].as_object().unwrap() {
        assert_eq!(
            n.as_u64().unwrap(),
            verdicts.get(verdict).copied().unwrap_or(0),
            "{verdict}: {out}"
        );
    }
    assert!(
        out.contains(&format!("message of {} octets", big.len())),
        "the whole size is counted, not read: {out}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What turning `"verified"` on would do, before doing it: the survey of received
/// signed mail names the repairs made and withheld per reason, under the configuration
/// in force, and the same mail under `"verified"` moves `not-enabled` to `verified`.
#[test]
fn the_survey_says_what_signatures_made_of_the_repairs() {
    let dir = tree("signed");
    let files: Vec<PathBuf> = [
        "dkim-verified",
        "dkim-bh-broken",
        "dkim-intact",
        "dkim-verified-from-outside",
        "multipart-signed",
    ]
    .iter()
    .map(|n| fixture_path(&format!("signed/{n}.eml")))
    .collect();
    let run = |config: &str| {
        write(&dir.join("c.toml"), config.as_bytes());
        let o = survey(
            &dir,
            &files,
            &["--direction", "inbound", "--format", "json"],
        );
        assert!(o.status.success() || o.status.code() == Some(1), "{o:?}");
        json(&o)["signed"].clone()
    };
    let off = run("trusted_authserv_ids = [\"mx.test.example\"]\n");
    assert_eq!(off["messages"], 5, "{off:#}");
    assert_eq!(off["repaired"], 1, "{off:#}");
    assert_eq!(off["repaired_by_reason"]["bh-broken"], 1, "{off:#}");
    assert_eq!(off["withheld_by_reason"]["not-enabled"], 1, "{off:#}");
    assert_eq!(off["withheld_by_reason"]["no-verdict"], 2, "{off:#}");
    assert_eq!(off["withheld_by_reason"]["multipart-signed"], 1, "{off:#}");
    let on = run("fix_signed = \"verified\"\ntrusted_authserv_ids = [\"mx.test.example\"]\n");
    assert_eq!(on["repaired"], 2, "{on:#}");
    assert_eq!(on["repaired_by_reason"]["verified"], 1, "{on:#}");
    assert!(
        on["withheld_by_reason"].get("not-enabled").is_none(),
        "{on:#}"
    );
    // The text says the same, in words.
    let o = survey(&dir, &files, &["--direction", "inbound"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("signed content (messages where a signature covers a repair on offer):")
            && text.contains("    verified: a trusted verdict recorded at this hop")
            && text.contains("    no-verdict: no trusted verdict at this hop"),
        "{text}"
    );
}
