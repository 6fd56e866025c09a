use std::path::Path;

use super::*;
use crate::policy::scope::Scopes;

const FULL: DumpOptions = DumpOptions {
    changed_only: false,
    show_secrets: false,
};
const CHANGED: DumpOptions = DumpOptions {
    changed_only: true,
    show_secrets: false,
};

/// `cfg` without what depends on where things were written: the file, the lines in
/// warnings, rewrite rule names and scopes. A dump has other line numbers than its
/// source, and these are all that may differ.
fn positionless(mut cfg: Config) -> Config {
    cfg.file = None;
    for (_, w) in &mut cfg.warnings {
        w.file.clear();
        w.line = 0;
    }
    let unname = |r: &mut crate::engine::UrlRewrite| {
        if let Some(cut) = r.name.find(" (line ") {
            r.name.truncate(cut);
        }
    };
    cfg.urls.inbound.rewrites.iter_mut().for_each(unname);
    cfg.urls.outbound.rewrites.iter_mut().for_each(unname);
    cfg.urls.rules.iter_mut().for_each(|r| unname(&mut r.rule));
    cfg.policy.scopes = Scopes::new(
        cfg.policy
            .scopes
            .iter()
            .cloned()
            .map(|mut s| {
                s.line = 0;
                s
            })
            .collect(),
    );
    cfg
}

/// Dumps `cfg` (read from `text`) both ways, reads each dump back with the real
/// parser and compares the validated configurations.
fn round_trip(cfg: &Config, text: Option<&str>, what: &str) {
    round_trip_with(cfg, text, what, false)
}

fn round_trip_with(cfg: &Config, text: Option<&str>, what: &str, show_secrets: bool) {
    for opts in [FULL, CHANGED] {
        let opts = DumpOptions {
            show_secrets,
            ..opts
        };
        let dump = cfg.dump(text, opts);
        let back = Config::parse(&dump, "dump.toml")
            .unwrap_or_else(|e| panic!("{what}: the dump does not read back:\\n{e}\\n{dump}"));
        assert_eq!(
            positionless(back),
            positionless(cfg.clone()),
            "{what} ({opts:?}) read back differs:\\n{dump}"
        );
    }
}

/// Every key, every kind of table: scopes of both kinds with every key, policy
/// patterns, rewrite rules of each host form, direction tables of [schemes], and the
/// two keys the validated form drops.
const EVERYTHING: &str = r#"
socket = "inet:127.0.0.1:9999"
log_level = "debug"
log_format = "json"
log_target = "stderr"
syslog_socket = "/run/other-log"
syslog_facility = "local3"
metrics_listen = "127.0.0.1:9357"
metrics_max_connections = 8
max_connections = 50
connection_timeout = 60
transaction_timeout = 120
reply_timeout = 30
shutdown_timeout = 5
dry_run = true
no_reply_stages = false
internal_error_action = "accept"
trusted_networks = ["192.0.2.0/24", "2001:db8::1"]
outbound_daemons = ["submission", "smtps"]
fix_signed = "verified"
trusted_authserv_ids = ["MX.example.org"]
normalize_url_continuations = true
fold_url_words = true

[limits]
max_message_size = 4096
max_depth = 8
max_parts = 100
oversize_action = "tempfail"
memory_budget = 1000000

[schemes]
allow = ["https", "HTTP", "ftp"]
deny = ["file"]
strip_denied = true

[schemes.outbound]
deny = ["file", "ftp"]
strip_denied = false

[legacy]
to_url = "inbound"
ftp_with_login = true

[report]
enabled = false
header = "X-Kept-Aside"
always = true
remove_forged = false
min_severity = "error"
redact_urls = false

[reply]
reject = "554 5.7.1 refused: {rules}"
tempfail = "450 4.7.1 later: {rules}"
quarantine = "held: {rules}"

[policy.inbound]
"related-*" = "reject"
extbody-url-unquoted = "report"

[policy.outbound]
"*" = "log"
"cid-url-syntax" = "quarantine"

[[rewrite]]
direction = "outbound"
scheme = "ftp"
host = "files.example.org"
path = '^/pub/.*\.pdf$'
template = "https://files.example.org{path}"

[[rewrite]]
host_suffix = "example.net"
template = "https://gw.example/fetch?u={url_pct}"

[[scope]]
name = "lists"
direction = "inbound"
header = { name = "List-Id", pattern = '<.*\.example\.org>' }
exempt = "log"

[[scope]]
name = "vip"
recipients = ["Boss@Example.org", "@board.example.org", "@.corp.example"]
senders = ["<>", "partner@example.com"]
client_networks = ["198.51.100.7", "2001:db8:1::/48"]
sasl_logins = ["Alice"]
fix_signed = true
[scope.policy]
"extbody-*" = "fix"
related-ref-dangling = "ignore"
[scope.report]
enabled = false
always = false
min_severity = "info"

[[scope]]
name = "headers-only"
header = { name = "X-Loop" }
[scope.report]
min_severity = "error"
"#;

#[test]
fn the_builtin_configuration_reads_back_the_same() {
    round_trip(&Config::builtin(), None, "built-in");
    let changed = Config::builtin().dump(None, CHANGED);
    assert!(
        changed.ends_with("# Nothing differs from the built-in configuration.\n"),
        "{changed}"
    );
}

#[test]
fn the_sample_configurations_read_back_the_same() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            let (cfg, text) = Config::load_with_text(Some(&p)).unwrap();
            round_trip(&cfg, text.as_deref(), &p.display().to_string());
            n += 1;
        }
    }
    assert!(n > 0, "no sample configuration in {}", dir.display());
}

#[test]
fn scopes_policies_and_rewrite_rules_read_back_the_same() {
    let cfg = Config::parse(EVERYTHING, "everything.toml").unwrap();
    // What the test is about must be in it.
    assert_eq!(cfg.policy.scopes.iter().count(), 3);
    assert_eq!(cfg.urls.rules.len(), 2);
    assert_ne!(cfg.urls.inbound.schemes, cfg.urls.outbound.schemes);
    round_trip(&cfg, Some(EVERYTHING), "EVERYTHING");
}

/// The fields of each table of the raw form, from serde's own answer to an unknown
/// key: a key added to `raw.rs` is in this list without anyone writing it down.
fn raw_keys(prefix: &str) -> Vec<String> {
    let text = format!("{prefix}\nzz_not_a_key = 1\n");
    let Err(e) = toml::from_str::<super::super::raw::RawConfig>(&text) else {
        panic!("{text:?} was accepted");
    };
    let msg = e.message().to_string();
    let expected = msg
        .split_once("expected")
        .unwrap_or_else(|| panic!("{msg}"))
        .1;
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The keys the dump writes, set or not, by table header.
fn dumped_keys(dump: &str) -> Vec<(String, String)> {
    let mut table = String::new();
    let mut keys = Vec::new();
    for line in dump.lines() {
        if line.starts_with('[') {
            table = line
                .split("  #")
                .next()
                .unwrap()
                .trim_matches(|c| c == '[' || c == ']')
                .to_string();
            keys.push((String::new(), table.clone()));
            continue;
        }
        let body = line.strip_prefix("# ").unwrap_or(line);
        if let Some((k, _)) = body.split_once(" = ") {
            if !k.starts_with(' ') {
                keys.push((table.clone(), k.trim_matches('"').to_string()));
            }
        }
        // An inline table's keys count as the table's.
        if let Some((k, inline)) = body.split_once(" = { ") {
            for part in inline.split(", ") {
                if let Some((ik, _)) = part.split_once(" = ") {
                    keys.push((format!("{table}.{k}"), ik.to_string()));
                }
            }
        }
    }
    keys
}

#[test]
fn every_key_of_the_raw_form_is_in_the_full_dump() {
    let cfg = Config::parse(EVERYTHING, "everything.toml").unwrap();
    let dump = cfg.dump(Some(EVERYTHING), FULL);
    let have = dumped_keys(&dump);
    let tables = [
        ("", ""),
        ("[limits]", "limits"),
        ("[schemes]", "schemes"),
        ("[schemes.inbound]", "schemes.inbound"),
        ("[schemes.outbound]", "schemes.outbound"),
        ("[legacy]", "legacy"),
        ("[report]", "report"),
        ("[reply]", "reply"),
        ("[policy]", "policy"),
        ("[[rewrite]]", "rewrite"),
        ("[[scope]]", "scope"),
        ("[[scope]]\nname = \"x\"\n[scope.report]", "scope.report"),
        (
            "[[scope]]\nheader = { name = \"X\", zz_not_a_key = 1 }",
            "scope.header",
        ),
    ];
    let mut missing = Vec::new();
    for (prefix, table) in tables {
        let keys = if table == "scope.header" {
            // An inline table's unknown key comes back the same way.
            let text = prefix.to_string();
            let e = toml::from_str::<super::super::raw::RawConfig>(&text).unwrap_err();
            let msg = e.message().to_string();
            msg.split_once("expected")
                .unwrap()
                .1
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect()
        } else {
            raw_keys(prefix)
        };
        assert!(!keys.is_empty(), "{table}");
        for k in keys {
            // A table of the raw form is a table header of the dump.
            let as_table = if table.is_empty() {
                k.clone()
            } else {
                format!("{table}.{k}")
            };
            let found = have.iter().any(|(t, key)| *t == table && *key == k)
                || have.iter().any(|(t, h)| {
                    t.is_empty() && (*h == as_table || h.starts_with(&format!("{as_table}.")))
                });
            if !found {
                missing.push(as_table);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "not in the full dump: {missing:?}\n{dump}"
    );
}

#[test]
fn each_value_names_the_line_it_was_written_on() {
    let text = "# a comment\nmax_connections = 10\n\n[limits]\nmax_depth = 9\n\n[[scope]]\nname = \"v\"\nsenders = [\"@a.example\"]\nexempt = \"ignore\"\n";
    let cfg = Config::parse(text, "site.toml").unwrap();
    let dump = cfg.dump(Some(text), FULL);
    let line = |prefix: &str| {
        dump.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} in\n{dump}"))
            .to_string()
    };
    // The file is named by the name given to the parser: here the dump knows none.
    assert_eq!(
        line("max_connections = "),
        "max_connections = 10  # standard input:2"
    );
    assert_eq!(line("max_depth = "), "max_depth = 9  # standard input:5");
    assert_eq!(line("[[scope]]"), "[[scope]]  # standard input:7");
    assert_eq!(
        line("senders = "),
        "senders = [\"@a.example\"]  # standard input:9"
    );
    assert_eq!(line("reply_timeout = "), "reply_timeout = 300  # built-in");
    let small = Config::parse("[limits]\nmax_message_size = 4096\n", "s.toml").unwrap();
    let dump = small.dump(None, FULL);
    assert!(
        dump.contains(
            "max_header_size = 4096  # built-in; the default, capped at max_message_size\n"
        ),
        "{dump}"
    );
    let changed = cfg.dump(Some(text), CHANGED);
    assert!(!changed.contains("reply_timeout"), "{changed}");
    assert!(changed.contains("max_depth = 9"), "{changed}");
}

#[test]
fn a_file_is_named_with_its_path() {
    let dir = std::env::temp_dir().join(format!("mimeref-dump-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("m.toml");
    std::fs::write(&p, "\nmax_connections = 10\n").unwrap();
    let (cfg, text) = Config::load_with_text(Some(&p)).unwrap();
    let dump = cfg.dump(text.as_deref(), FULL);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        dump.contains(&format!("max_connections = 10  # {}:2", p.display())),
        "{dump}"
    );
}

#[test]
fn secrets_are_masked_and_the_dump_still_reads() {
    let text = r#"
[reply]
reject = "550 5.7.1 see https://ops:hunter2@help.example/x?ticket=123 ({rules})"
[[rewrite]]
template = "https://svc:hunter2@gw.example/f?u={url_pct}&key=T0KEN"
"#;
    let cfg = Config::parse(text, "s.toml").unwrap();
    let dump = cfg.dump(Some(text), FULL);
    assert!(
        !dump.contains("hunter2") && !dump.contains("T0KEN") && !dump.contains("ticket=123"),
        "{dump}"
    );
    assert!(
        dump.contains(r#"template = "https://svc:***@gw.example/f?u={url_pct}&key=***""#),
        "{dump}"
    );
    Config::parse(&dump, "dump.toml").unwrap_or_else(|e| panic!("{e}\n{dump}"));
    let shown = cfg.dump(
        Some(text),
        DumpOptions {
            show_secrets: true,
            ..FULL
        },
    );
    assert!(
        shown.contains("hunter2") && shown.contains("T0KEN"),
        "{shown}"
    );
    round_trip_with(&cfg, Some(text), "secrets shown", true)
}

#[test]
fn templates_lose_credentials_and_literal_query_values() {
    let cases = [
        (
            "https://gw.example/fetch?u={url_pct}&key=S3cret",
            "https://gw.example/fetch?u={url_pct}&key=***",
        ),
        (
            "https://alice:pw@mirror.example{path}",
            "https://alice:***@mirror.example{path}",
        ),
        (
            "https://T0KEN@mirror.example{path}",
            "https://***@mirror.example{path}",
        ),
        (
            "https://{authority}{path}{query}",
            "https://{authority}{path}{query}",
        ),
        ("https://h.example/x?APIKEY", "https://h.example/x?***"),
    ];
    for (t, want) in cases {
        assert_eq!(redact_template(t), want, "{t}");
    }
}
