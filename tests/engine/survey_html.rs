//! `survey --format html` and `--since`/`--until` through the real binary: the page's
//! figures are the JSON output's, hostile mail stays text (escaped, redacted, capped,
//! well-formed by tests/survey/html_check.py), dates out of reason go to "undated",
//! and the bounds keep the messages of a month by the Date field or the From line.
//!
//! The page in a browser (console, requests, overflow, screenshots) is
//! tests/survey/page.js, run by scripts/check-survey-page.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::message::fixture;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mimeref-milter"))
}

fn tree(tag: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("survey-html-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn survey(paths: &[&Path], extra: &[&str]) -> Output {
    bin()
        .arg("survey")
        .args(["--jobs", "2"])
        .args(extra)
        .args(paths)
        .output()
        .expect("run mimeref-milter survey")
}

fn json(o: &Output) -> Value {
    assert!(o.status.code().unwrap_or(9) <= 1, "{o:?}");
    serde_json::from_slice(&o.stdout).unwrap()
}

fn page(o: &Output) -> String {
    assert!(o.status.code().unwrap_or(9) <= 1, "{o:?}");
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// The value of attribute `value` on every element with attribute `key`, by `key`'s
/// value, in page order.
fn figures(html: &str, key: &str, value: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let open = format!("{key}=\"");
    let mut rest = html;
    while let Some(i) = rest.find(&open) {
        let tag_end = rest[i..].find('>').map_or(rest.len(), |e| i + e);
        let tag = &rest[i..tag_end];
        let k = &tag[open.len()..];
        let k = &k[..k.find('"').unwrap()];
        if let Some(v) = tag.find(&format!(" {value}=\"")) {
            let v = &tag[v + value.len() + 3..];
            out.push((unescape(k), v[..v.find('"').unwrap()].to_string()));
        }
        rest = &rest[tag_end..];
    }
    out
}

/// An attribute value as written by the page's escaping.
fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

fn figure(html: &str, name: &str) -> u64 {
    let all: BTreeMap<String, String> = figures(html, "data-figure", "data-value")
        .into_iter()
        .collect();
    all.get(name)
        .unwrap_or_else(|| panic!("no data-figure {name}"))
        .parse()
        .unwrap()
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// tests/survey/html_check.py (standard library only) on `html`.
fn well_formed(dir: &Path, html: &str) {
    let p = dir.join("page.html");
    std::fs::write(&p, html).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/survey/html_check.py");
    let o = Command::new("python3")
        .arg(script)
        .arg(&p)
        .output()
        .expect("python3 (tests/survey/html_check.py)");
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The checker itself rejects what it is there to reject: a test that cannot fail
/// proves nothing.
#[test]
fn the_html_checker_rejects_bad_pages() {
    let dir = tree("checker");
    let p = dir.join("bad.html");
    let good_head = "<!DOCTYPE html><html><head><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\"></head><body>";
    for bad in [
        "<p>a<b>c</p></b>",
        "<p>x</p><img src=x onerror=alert(1)>",
        "<div>unclosed",
        "<p>a</p></div>",
        "<p>1 < 2</p>",
        "<p>bell \u{7}</p>",
        "<p id=\"a\"></p><p id=\"a\"></p>",
        "<script>alert(1)</script>",
    ] {
        std::fs::write(&p, format!("{good_head}{bad}</body></html>")).unwrap();
        let o = Command::new("python3")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/survey/html_check.py"
            ))
            .arg(&p)
            .output()
            .unwrap();
        assert!(!o.status.success(), "accepted: {bad}");
    }
    std::fs::write(&p, format!("{good_head}<p>fine &lt;</p></body></html>")).unwrap();
    let o = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/survey/html_check.py"
        ))
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
}

/// The corpus gives findings of many rules, fixes and reports, dated and undated
/// messages: every figure of the page equals the JSON output's.
#[test]
fn the_page_shows_the_figures_of_the_json_output() {
    let corpus = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/corpus"));
    let v = json(&survey(&[corpus], &["--format", "json"]));
    let html = page(&survey(&[corpus], &["--format", "html"]));
    well_formed(&tree("golden"), &html);
    assert!(n(&v["messages"]) > 300, "{v:#}");
    assert_eq!(figure(&html, "messages"), n(&v["messages"]));
    assert_eq!(figure(&html, "with-findings"), n(&v["with_findings"]));
    let verdict = |a: &str| n(&v["verdicts"][a]);
    assert_eq!(figure(&html, "fixed"), verdict("fix"));
    assert_eq!(figure(&html, "reported"), verdict("report"));
    assert_eq!(
        figure(&html, "rejected-held"),
        verdict("reject") + verdict("quarantine") + verdict("tempfail")
    );
    let verdicts = figures(&html, "data-verdict", "data-value");
    assert_eq!(verdicts.len(), 7);
    for (a, shown) in &verdicts {
        assert_eq!(shown.parse::<u64>().unwrap(), verdict(a), "{a}");
    }
    // The rules, in the JSON's order, in the chart and in the sections.
    let want: Vec<(String, String)> = v["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["rule"].as_str().unwrap().to_string(),
                r["messages"].to_string(),
            )
        })
        .collect();
    assert!(want.len() > 10, "{v:#}");
    assert_eq!(figures(&html, "data-rule", "data-value"), want);
    assert_eq!(figures(&html, "data-rule", "data-messages"), want);
    for (block, key, field) in [
        ("inline", "with-images", "with_images"),
        ("inline", "misshown", "misshown"),
        ("inline", "repaired", "repaired"),
        ("names", "messages", "messages"),
        ("names", "misnamed", "misnamed"),
        ("names", "empty-forwards", "empty_forwards"),
        ("names", "wrong-types", "wrong_types"),
        ("names", "unreachable", "unreachable"),
        ("names", "repaired", "repaired"),
    ] {
        assert_eq!(
            figure(&html, &format!("{block}-{key}")),
            n(&v[block][field]),
            "{block} {key}"
        );
    }
    // The timeline: every message in one bucket, the undated as the JSON counts them.
    let buckets = figures(&html, "data-bucket", "data-messages");
    let total: u64 = buckets.iter().map(|(_, m)| m.parse::<u64>().unwrap()).sum();
    assert_eq!(total, n(&v["messages"]));
    let undated = buckets.iter().find(|(k, _)| k == "undated").unwrap();
    assert_eq!(undated.1.parse::<u64>().unwrap(), n(&v["dates"]["undated"]));
    assert!(n(&v["dates"]["undated"]) > 0 && n(&v["dates"]["undated"]) < n(&v["messages"]));
    let senders: Vec<(String, String)> = v["senders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["sender"].as_str().unwrap().to_string(),
                s["messages"].to_string(),
            )
        })
        .collect();
    assert_eq!(figures(&html, "data-sender", "data-value"), senders);
    // An example's command, and the fix of a field before and after.
    assert!(html.contains("<pre class=\"cmd\">mimeref-milter check --actions --direction inbound "));
    assert!(
        html.contains("<table class=\"fix\">"),
        "no field shown before and after a fix"
    );
    assert!(
        html.contains("<table class=\"readers\">"),
        "no readers' table"
    );
    // A rule only reported: the page says so rather than leave the fix out silently.
    assert!(html.contains("the configuration changes nothing for it here (report)."));
}

/// A message of hostile header fields: `i` makes its X-Mailer (its sender) distinct.
fn hostile(i: usize, date: &str) -> String {
    let top = String::from_utf8(fixture("milter/top-extbody.eml")).unwrap();
    top.replace(
        "Subject: report\n",
        &format!(
            "Subject: </script><script>alert({i})</script> \u{1b}[31mred\u{7}\nX-Mailer: <img src=x onerror=alert({i})> \"m{i}\" </style></svg>\u{1b}]0;t\u{7}\nDate: {date}\n"
        ),
    )
    .replace(
        "<top-extbody@example.org>",
        &format!("<{i}.</script><b>@x.example>"),
    )
}

/// 10,000 senders whose names, subjects and ids are markup and terminal escapes, the
/// first one's carrying a URL with a password and a token; dates in the future and
/// unparseable: the page stays well-formed text, every list capped, under 200 KB.
#[test]
fn hostile_mail_stays_text_and_every_list_is_capped() {
    let dir = tree("hostile");
    let mut mbox = String::new();
    let count = 10_000;
    let mut undated = 0;
    for i in 0..count {
        let date = match i % 4 {
            0 => "Mon, 3 Mar 2025 10:00:00 +0000",
            1 => {
                undated += 1;
                "Fri, 1 Jan 2100 00:00:00 +0000"
            }
            2 => {
                undated += 1;
                "<script>not a date</script>"
            }
            _ => "Tue, 4 Mar 2025 10:00:00 +0000",
        };
        let mut m = hostile(i, date);
        if i == 0 {
            m = m.replace(
                "X-Mailer: ",
                "X-Mailer: http://carol:Hunter2@x.example/p?key=T0KEN ",
            );
        }
        // No date on the From line: it must not stand in for the Date field here.
        mbox.push_str("From hostile@example.org\n");
        mbox.push_str(&m);
        mbox.push('\n');
    }
    let path = dir.join("hostile.mbox");
    std::fs::write(&path, &mbox).unwrap();
    let v = json(&survey(&[&path], &["--format", "json"]));
    assert_eq!(n(&v["messages"]), count as u64);
    assert_eq!(n(&v["dates"]["undated"]), undated);
    let html = page(&survey(&[&path], &["--format", "html"]));
    well_formed(&dir, &html);
    assert!(html.len() < 200 * 1024, "{} octets", html.len());
    for raw in [
        "<script",
        "<img",
        "<b>@x",
        "</style></svg>",
        "\u{1b}",
        "\u{7}",
        "Hunter2",
        "T0KEN",
    ] {
        assert!(!html.contains(raw), "{raw:?} in the page");
    }
    // Escaped, the markup is still there to read, and the password's place is marked.
    assert!(
        html.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "sender not shown escaped"
    );
    assert!(
        html.contains("carol:***@x.example/p?***"),
        "URL not redacted as the logs do"
    );
    assert!(
        html.contains("\\u{1b}"),
        "control characters not shown as escapes"
    );
    assert_eq!(figures(&html, "data-sender", "data-value").len(), 10);
    let buckets: BTreeMap<String, String> = figures(&html, "data-bucket", "data-messages")
        .into_iter()
        .collect();
    assert_eq!(buckets["undated"], undated.to_string());
    assert_eq!(buckets["2025-03-03"], (count / 4).to_string());
    assert_eq!(buckets.len(), 3, "{buckets:?}");
}

fn dated(from_line: &str, date: Option<&str>, id: &str) -> String {
    let top = String::from_utf8(fixture("milter/top-extbody.eml")).unwrap();
    let m = match date {
        Some(d) => top.replace(
            "Subject: report\n",
            &format!("Subject: report\nDate: {d}\n"),
        ),
        None => top,
    };
    format!(
        "From {from_line}\n{}\n",
        m.replace("<top-extbody@example.org>", &format!("<{id}@example.org>"))
    )
}

/// An mbox of known dates: by the Date field where it can be read, else by the From
/// line; undated messages are left out once a bound is given, and counted.
#[test]
fn since_and_until_keep_the_messages_of_a_month() {
    let dir = tree("since");
    let mut mbox = String::new();
    // January by the From line, February by the Date field (the From line says March).
    mbox.push_str(&dated("a@x Fri Jan 31 23:59:59 2025", None, "jan"));
    mbox.push_str(&dated(
        "a@x Sat Mar  1 00:00:00 2025",
        Some("Sat, 1 Feb 2025 00:00:00 +0000"),
        "feb1",
    ));
    mbox.push_str(&dated("a@x Sat Feb 15 12:00:00 2025", None, "feb15"));
    // 28 Feb 23:30 -0100 is 1 March 00:30 UTC.
    mbox.push_str(&dated(
        "a@x Fri Feb 28 00:00:00 2025",
        Some("Fri, 28 Feb 2025 23:30:00 -0100"),
        "mar-utc",
    ));
    mbox.push_str(&dated(
        "a@x Fri Feb 28 23:59:59 2025",
        Some("yesterday"),
        "feb28",
    ));
    mbox.push_str(&dated("a@x", None, "undated"));
    let path = dir.join("dated.mbox");
    std::fs::write(&path, &mbox).unwrap();

    let all = json(&survey(&[&path], &["--format", "json"]));
    assert_eq!(n(&all["messages"]), 6);
    assert_eq!(n(&all["dates"]["undated"]), 1);
    assert_eq!(all["dates"]["first"], "2025-01-31");
    assert_eq!(all["dates"]["last"], "2025-03-01");

    let feb = json(&survey(
        &[&path],
        &[
            "--format", "json", "--since", "2025-02", "--until", "2025-02",
        ],
    ));
    assert_eq!(n(&feb["messages"]), 3, "{feb:#}");
    assert_eq!(n(&feb["dates"]["left_out"]["outside"]), 2);
    assert_eq!(n(&feb["dates"]["left_out"]["undated"]), 1);
    assert_eq!(feb["dates"]["since"], "2025-02-01");
    assert_eq!(feb["dates"]["until"], "2025-02-28");
    let ids: Vec<&str> = feb["rules"][0]["examples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["message_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["<feb1@example.org>"], "{feb:#}");

    let days = json(&survey(
        &[&path],
        &[
            "--format",
            "json",
            "--since",
            "2025-02-15",
            "--until",
            "2025-03-01",
        ],
    ));
    assert_eq!(n(&days["messages"]), 3, "{days:#}");
    let open = json(&survey(
        &[&path],
        &["--format", "json", "--since", "2025-02-16"],
    ));
    assert_eq!(n(&open["messages"]), 2, "{open:#}");
    assert_eq!(open["dates"]["until"], "any");

    let text = survey(&[&path], &["--since", "2025-02", "--until", "2025-02"]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains(
            "left out (--since 2025-02-01 --until 2025-02-28): 2 dated outside, 1 undated"
        ),
        "{text}"
    );
    let html = page(&survey(
        &[&path],
        &[
            "--format",
            "html",
            "--since",
            "2025-02",
            "--until",
            "2025-02",
            "--rcpt",
            "bob@example.net",
        ],
    ));
    // The example's command sees the message as the survey did, envelope included.
    let cmd = format!(
        "<pre class=\"cmd\">mimeref-milter check --actions --direction inbound --rcpt bob@example.net {}:",
        path.display()
    );
    assert!(html.contains(&cmd), "{cmd}");
    assert_eq!(figure(&html, "messages"), 3);
    assert_eq!(figure(&html, "outside"), 2);
    assert_eq!(figure(&html, "undated-left-out"), 1);

    for (args, says) in [
        (&["--since", "2025-02-30"][..], "is not a date"),
        (&["--until", "02/2025"][..], "is not a date"),
        (
            &["--since", "2025-03", "--until", "2025-02"][..],
            "--since is later than --until",
        ),
    ] {
        let o = survey(&[&path], args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
