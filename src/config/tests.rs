//! Tests of loading and validating the configuration: sections, defaults, error
//! lines that name file and line, the sample file.

use super::*;
use crate::engine::{HostMatch, Rule, Severity};
use crate::policy::decide::Effect;
use crate::policy::matching::Address;
use crate::policy::scope::Scope;
use crate::policy::Action;
use ipnet::IpNet;
use std::collections::BTreeMap;

/// The default port is none that another milter takes by default, so that this
/// one and its peers on one host can all keep their defaults (DEFAULT_SOCKET says
/// whose each is).
#[test]
fn default_port_is_no_peers() {
    const PEERS: [(u16, &str); 10] = [
        (7357, "clamav-milter"),
        (8891, "OpenDKIM"),
        (8892, "dkimpy-milter"),
        (8893, "OpenDMARC"),
        (8894, "OpenARC"),
        (9900, "rspamd (mailcow)"),
        (11332, "rspamd proxy"),
        (11333, "rspamd normal worker"),
        (11334, "rspamd controller"),
        (12345, "authentication_milter"),
    ];
    let SocketSpec::Inet { port, .. } = SocketSpec::parse(DEFAULT_SOCKET).unwrap() else {
        panic!("{DEFAULT_SOCKET} is not an inet socket")
    };
    if let Some((_, who)) = PEERS.iter().find(|(p, _)| *p == port) {
        panic!("{DEFAULT_SOCKET} is {who}'s default port");
    }
    assert_eq!(
        Config::parse("", "t.toml").unwrap().listen.socket,
        SocketSpec::parse(DEFAULT_SOCKET).unwrap()
    );
}

/// The planner's tests (`policy/plan/tests.rs`) build on the policy layer's
/// defaults: a file that says nothing gives exactly those.
#[test]
fn an_empty_file_gives_the_planners_defaults() {
    let c = Config::parse("", "t").unwrap();
    assert_eq!(c.report, crate::policy::report::Report::default());
    assert_eq!(c.replies, crate::policy::plan::Replies::default());
    assert_eq!(c.policy.oversize_action, crate::policy::Action::Report);
    assert_eq!(
        c.policy.inbound,
        crate::policy::Policy::builtin(Direction::Inbound)
    );
    assert_eq!(
        c.policy.outbound,
        crate::policy::Policy::builtin(Direction::Outbound)
    );
}

fn errs(text: &str) -> Vec<String> {
    match Config::parse(text, "t.toml") {
        Ok(_) => Vec::new(),
        Err(e) => e.errors.iter().map(|e| e.to_string()).collect(),
    }
}

#[test]
fn builtin_defaults() {
    let c = Config::builtin();
    assert_eq!(c.listen.socket.to_string(), DEFAULT_SOCKET);
    assert_eq!(c.limits.max_message_size, 64 * 1024 * 1024);
    assert_eq!(c.report.header.as_deref(), Some("X-MIMERef"));
    assert_eq!(c.policy.oversize_action, Action::Report);
    assert_eq!(
        c.policy.inbound.action(Rule::RelatedCidDuplicate),
        Action::Fix
    );
    assert!(!c.policy.may(Action::Reject));
    assert_eq!(c.replies.reject.code, "550");
    assert_eq!(c.replies.reject.status, "5.6.0");
}

#[test]
fn spill_and_no_reply_defaults() {
    let c = Config::builtin();
    assert!(c.service.no_reply_stages);
    assert_eq!(c.limits.spill_threshold, 4 << 20);
    assert_eq!(c.limits.spill_directory, std::env::temp_dir());
    // A small max_message_size lowers the default threshold and header limit instead
    // of clashing with keys the file does not have.
    let c = Config::parse("[limits]\nmax_message_size = 100000\n", "t")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.limits.spill_threshold, 100000);
    assert_eq!(c.limits.max_header_size, 100000);
    let c = Config::parse(
        "no_reply_stages = false\n[limits]\nspill_threshold = 5000\n",
        "t",
    )
    .unwrap();
    assert!(!c.service.no_reply_stages);
    assert_eq!(c.limits.spill_threshold, 5000);
}

#[test]
fn memory_budget_and_internal_error_action() {
    let c = Config::builtin();
    assert_eq!(c.limits.memory_budget, 256 << 20);
    assert_eq!(
        c.service.internal_error_action,
        InternalErrorAction::Tempfail
    );
    let c = Config::parse(
        "internal_error_action = \"accept\"\n[limits]\nmemory_budget = 1048576\n",
        "t",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.limits.memory_budget, 1 << 20);
    assert_eq!(c.service.internal_error_action, InternalErrorAction::Accept);
    assert_eq!(
        errs("dry_run = false\ninternal_error_action = \"continue\"\n"),
        ["t.toml:2: internal_error_action \"continue\": expected \"tempfail\" or \"accept\""]
    );
    for n in ["0", "-1", "1099511627777"] {
        assert_eq!(
            errs(&format!("[limits]\n\nmemory_budget = {n}\n")),
            [format!(
                "t.toml:3: [limits] memory_budget = {n}: must be between 1 and 1099511627776"
            )]
        );
    }
}

/// The check of spill_directory creates its file as the daemon does: a file put in
/// the way under the name it used to take (`.mimeref-milter-check-PID`) made every
/// config-check and every SIGHUP reload of that process fail.
#[test]
fn a_file_in_the_way_does_not_fail_the_spill_directory_check() {
    let dir = std::env::temp_dir().join(format!("mimeref-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let probe = dir.join(format!(".mimeref-milter-check-{}", std::process::id()));
    std::fs::write(&probe, b"").unwrap();
    let text = format!("[limits]\nspill_directory = \"{}\"\n", dir.display());
    let r = Config::parse(&text, "t");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(r.err().map(|e| e.to_string()), None);
}

/// spill_threshold and max_header_size are bounded by max_message_size, not by what
/// an integer holds: the message says so, with the value in force, at the key's line.
#[test]
fn limits_below_max_message_size_quote_it() {
    let one = |text: &str| {
        let e = errs(text);
        assert_eq!(e.len(), 1, "{text:?}: {e:?}");
        e.into_iter().next().unwrap()
    };
    for n in ["0", "-1", "-9223372036854775808"] {
        assert_eq!(
            one(&format!("[limits]\nspill_threshold = {n}\n")),
            format!(
                "t.toml:2: [limits] spill_threshold = {n}: must be between 1 and \
                     max_message_size (67108864)"
            )
        );
    }
    assert_eq!(
        one("[limits]\nmax_message_size = 2048\n\nspill_threshold = 0\n"),
        "t.toml:4: [limits] spill_threshold = 0: must be between 1 and max_message_size (2048)"
    );
    for n in ["4294967296", "9223372036854775807"] {
        let e = one(&format!("[limits]\nspill_threshold = {n}\n"));
        assert!(
            e.starts_with(&format!(
                "t.toml:2: [limits] spill_threshold = {n} is larger than max_message_size \
                     (67108864): "
            )),
            "{e}"
        );
    }
    assert_eq!(
        one("[limits]\nmax_header_size = 1023\n"),
        "t.toml:2: [limits] max_header_size = 1023: must be between 1024 and \
             max_message_size (67108864)"
    );
    // The pair disagrees: said at the line of the key that is out of bounds.
    let e = one("[limits]\nmax_message_size = 1048576\nmax_header_size = 1048577\n");
    assert!(
        e.starts_with(
            "t.toml:3: [limits] max_header_size = 1048577 is larger than \
                 max_message_size (1048576): "
        ),
        "{e}"
    );
    let c = Config::parse(
        "[limits]\nmax_message_size = 1024\nmax_header_size = 1024\nspill_threshold = 1024\n",
        "t",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (c.limits.max_header_size, c.limits.spill_threshold),
        (1024, 1024)
    );
}

/// A reload keeps the restart-only sections and a forced dry run, takes the rest,
/// and names the keys it did not take.
#[test]
fn reload_keeps_the_restart_only_sections() {
    let mut running = Config::builtin();
    running.force_dry_run();
    let mut new = Config::parse(
        "socket = \"inet:127.0.0.1:1\"\nmax_connections = 5\nlog_level = \"debug\"\n\
             shutdown_timeout = 7\nmetrics_max_connections = 8\n",
        "t",
    )
    .unwrap();
    let stuck = new.keep_restart_only(&running);
    assert_eq!(
        stuck,
        [
            "socket",
            "metrics_max_connections",
            "max_connections",
            "log_level/log_format"
        ]
    );
    assert_eq!(new.listen, running.listen);
    assert_eq!(new.process, running.process);
    assert!(new.service.dry_run && new.service.dry_run_forced);
    assert_eq!(new.service.shutdown_timeout, Duration::from_secs(7));
    let mut same = Config::builtin();
    assert!(same.keep_restart_only(&Config::builtin()).is_empty());
}

#[test]
fn transaction_and_reply_timeouts_default_and_bounds() {
    let b = Config::builtin();
    assert_eq!(b.listen.transaction_timeout, Duration::from_secs(3600));
    assert_eq!(b.listen.reply_timeout, Duration::from_secs(300));
    assert_eq!(
        errs("dry_run = false\ntransaction_timeout = 0\nreply_timeout = 86401\n"),
        [
            "t.toml:2: transaction_timeout = 0: must be between 1 and 86400",
            "t.toml:3: reply_timeout = 86401: must be between 1 and 86400",
        ]
    );
    let c = Config::parse("transaction_timeout = 900\nreply_timeout = 60\n", "t").unwrap();
    assert_eq!(c.listen.transaction_timeout, Duration::from_secs(900));
    assert_eq!(c.listen.reply_timeout, Duration::from_secs(60));
    // Restart-only, like connection_timeout: indymilter takes them at start.
    let mut new = c.clone();
    assert_eq!(
        new.keep_restart_only(&Config::builtin()),
        ["transaction_timeout", "reply_timeout"]
    );
}

#[test]
fn metrics_max_connections_default_and_bounds() {
    assert_eq!(Config::builtin().listen.metrics_max_connections, 32);
    assert_eq!(
        errs("dry_run = false\nmetrics_max_connections = 0\n"),
        ["t.toml:2: metrics_max_connections = 0: must be between 1 and 10000"]
    );
    let c = Config::parse("metrics_max_connections = 4\n", "t").unwrap();
    assert_eq!(c.listen.metrics_max_connections, 4);
}

#[test]
fn unknown_key_names_the_line() {
    let e = errs("socket = \"inet:127.0.0.1:1\"\n\n[limits]\nmax_mesage_size = 10\n");
    assert_eq!(e.len(), 1);
    assert!(e[0].starts_with("t.toml:4: "), "{e:?}");
    assert!(e[0].contains("max_mesage_size"), "{e:?}");
}

/// An unknown key inside a `[[rewrite]]` table is one error at its own line: the
/// recovery used to miss the table and report a parse error at line 1 besides.
#[test]
fn unknown_key_in_a_rewrite_table_is_one_error() {
    let e = errs("[[rewrite]]\ntemplate = \"https://{host}{path}\"\nbogus = 1\n");
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("t.toml:3: ") && e[0].contains("bogus"),
        "{e:?}"
    );
}

/// The valid actions listed in the message are every action there is, `log` included.
#[test]
fn an_unknown_action_lists_every_valid_one() {
    for text in [
        "[policy.inbound]\n\"related-*\" = \"logg\"\n",
        "[limits]\noversize_action = \"logg\"\n",
    ] {
        let e = errs(text);
        assert_eq!(e.len(), 1, "{e:?}");
        let listed: Vec<&str> = e[0]
            .rsplit_once('(')
            .map_or("", |(_, l)| l.trim_end_matches(')'))
            .split(", ")
            .collect();
        let all: Vec<&str> = Action::ALL.iter().map(|a| a.as_str()).collect();
        assert_eq!(listed, all, "{e:?}");
    }
    let c = Config::parse("[limits]\noversize_action = \"log\"\n", "t").unwrap();
    assert_eq!(c.policy.oversize_action, Action::Log);
}

/// Settings that expose the daemon are valid but named, with the line: a socket
/// and metrics off loopback, a socket every local user may open.
#[test]
fn exposed_settings_are_warnings_with_their_lines() {
    let warned = |text: &str| -> Vec<String> {
        let c = Config::parse(text, "t.toml").unwrap_or_else(|e| panic!("{e}"));
        c.warnings.iter().map(|(k, w)| format!("{k} {w}")).collect()
    };
    assert!(warned("").is_empty());
    for quiet in [
        "socket = \"inet:127.0.0.1:8897\"\nmetrics_listen = \"127.0.0.1:9357\"\n",
        "socket = \"inet6:[::1]:8897\"\nmetrics_listen = \"[::1]:9357\"\n",
        "socket = \"inet:localhost:8897\"\n",
        "socket = \"unix:/run/m.sock\"\nsocket_mode = \"0660\"\n",
    ] {
        assert!(warned(quiet).is_empty(), "{quiet}: {:?}", warned(quiet));
    }
    let w =
        warned("dry_run = false\nsocket = \"inet:8897\"\n\nmetrics_listen = \"0.0.0.0:9357\"\n");
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        w[0].starts_with("socket t.toml:2: socket inet:0.0.0.0:8897: listens on every address"),
        "{w:?}"
    );
    assert!(
        w[1].starts_with("metrics_listen t.toml:4: metrics_listen 0.0.0.0:9357: not a loopback"),
        "{w:?}"
    );
    let w = warned("socket = \"unix:/run/m.sock\"\nsocket_mode = \"0777\"\n");
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with("socket_mode t.toml:2: socket_mode \"0777\": every local user"),
        "{w:?}"
    );
    let w = warned("socket = \"inet:192.0.2.1:8897\"\n");
    assert!(w[0].contains("192.0.2.1, not a loopback address"), "{w:?}");
    let w = warned("socket = \"inet6:8897@::\"\n");
    assert!(w[0].contains("every address"), "{w:?}");
}

#[test]
fn wrong_type_names_the_line() {
    let e = errs("dry_run = false\nmax_connections = \"many\"\n");
    assert_eq!(e.len(), 1);
    assert!(e[0].starts_with("t.toml:2: "), "{e:?}");
}

#[test]
fn every_validation_error_is_listed_with_its_line() {
    let text = "trusted_networks = [\n  \"10.0.0.0/8\",\n  \"10.0.0.0/33\",\n]\n\
                    [policy.inbound]\n\"extbody-[x]\" = \"reject\"\n\"related-*\" = \"rejekt\"\n\
                    [reply]\nreject = \"450 4.6.0 no\"\n";
    let e = errs(text);
    assert_eq!(e.len(), 4, "{e:?}");
    assert!(
        e.iter()
            .any(|l| l.starts_with("t.toml:3: ") && l.contains("10.0.0.0/33")),
        "{e:?}"
    );
    assert!(
        e.iter()
            .any(|l| l.starts_with("t.toml:6: ") && l.contains("extbody-[x]")),
        "{e:?}"
    );
    assert!(
        e.iter()
            .any(|l| l.starts_with("t.toml:7: ") && l.contains("rejekt")),
        "{e:?}"
    );
    assert!(
        e.iter()
            .any(|l| l.starts_with("t.toml:9: ") && l.contains("5xx")),
        "{e:?}"
    );
}

#[test]
fn policy_and_direction() {
    let c = Config::parse(
            "trusted_networks = [\"192.0.2.0/24\"]\noutbound_daemons = [\"submission\"]\n\
             [policy.outbound]\n\"*\" = \"report\"\n[policy.inbound]\n\"related-cid-duplicate\" = \"reject\"\n",
            "t",
        )
        .unwrap();
    let m = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>()
    };
    assert_eq!(c.directions.direction(&m(&[]), None), Direction::Inbound);
    assert_eq!(
        c.directions
            .direction(&m(&[("{auth_authen}", "alice")]), None),
        Direction::Outbound
    );
    assert_eq!(
        c.directions
            .direction(&m(&[("{auth_type}", "PLAIN")]), None),
        Direction::Outbound
    );
    assert_eq!(
        c.directions.direction(&m(&[("{auth_authen}", "")]), None),
        Direction::Inbound
    );
    assert_eq!(
        c.directions
            .direction(&m(&[]), Some("192.0.2.7".parse().unwrap())),
        Direction::Outbound
    );
    // Loopback is no longer trusted once the list is given.
    assert_eq!(
        c.directions
            .direction(&m(&[]), Some("127.0.0.1".parse().unwrap())),
        Direction::Inbound
    );
    assert_eq!(
        c.directions
            .direction(&m(&[("{client_addr}", "192.0.2.9")]), None),
        Direction::Outbound
    );
    assert_eq!(
        c.directions
            .direction(&m(&[("{daemon_name}", "submission")]), None),
        Direction::Outbound
    );
    assert_eq!(
        c.directions
            .direction(&m(&[("{daemon_name}", "smtpd")]), None),
        Direction::Inbound
    );
    assert_eq!(
        c.policy.inbound.action(Rule::RelatedCidDuplicate),
        Action::Reject
    );
    assert_eq!(
        c.policy.outbound.action(Rule::RelatedCidDuplicate),
        Action::Report
    );
    assert!(c.policy.may(Action::Reject));
}

#[test]
fn url_policy_per_direction() {
    let c = Config::parse(
            "[schemes]\ndeny = [\"file\"]\nstrip_denied = true\n\
             [schemes.outbound]\nallow = [\"https\", \"ftp\"]\nstrip_denied = false\n\
             [[rewrite]]\ndirection = \"inbound\"\nscheme = \"HTTP\"\nhost_suffix = \".Example.com\"\npath = \"^/pub/\"\ntemplate = \"https://{authority}{path}{query}\"\n\
             [[rewrite]]\ntemplate = \"https://gw.example.net/f?u={url_pct}\"\n\
             [legacy]\nto_url = \"outbound\"\n",
            "t",
        )
        .unwrap();
    let i = c.engine_options(Direction::Inbound);
    let o = c.engine_options(Direction::Outbound);
    assert_eq!(i.schemes.deny, ["file"]);
    assert!(i.schemes.allow.is_empty() && i.strip_denied && !i.legacy_to_url);
    assert_eq!(o.schemes.allow, ["https", "ftp"]);
    assert!(!o.strip_denied && o.legacy_to_url && !o.legacy_ftp_with_login);
    assert_eq!(i.rewrites.len(), 2);
    assert_eq!(o.rewrites.len(), 1);
    assert_eq!(i.rewrites[0].name, "rewrite #1 (line 8)");
    assert_eq!(i.rewrites[0].scheme.as_deref(), Some("http"));
    assert_eq!(
        i.rewrites[0].host,
        Some(HostMatch::Suffix("example.com".into()))
    );
    let b = Config::builtin().engine_options(Direction::Inbound);
    assert!(b.rewrites.is_empty() && !b.strip_denied && !b.legacy_to_url);
}

#[test]
fn url_policy_errors_name_their_lines() {
    let text = "[[rewrite]]\nscheme = \"ht tp\"\ntemplate = \"https://{hots}\"\n\
                    [[rewrite]]\nhost = \"a.example\"\nhost_suffix = \"b.example\"\npath = \"(\"\ntemplate = \"{host}{path}\"\n\
                    [[rewrite]]\ndirection = \"sideways\"\n\
                    [legacy]\nto_url = \"yes\"\n[schemes.inbound]\ndeny = [\"a b\"]\n";
    let e = errs(text);
    let has = |line: &str, what: &str| e.iter().any(|l| l.starts_with(line) && l.contains(what));
    assert!(has("t.toml:2: ", "not a URL scheme"), "{e:?}");
    assert!(has("t.toml:3: ", "{hots}"), "{e:?}");
    assert!(has("t.toml:5: ", "not both"), "{e:?}");
    assert!(has("t.toml:7: ", "regular expression"), "{e:?}");
    assert!(has("t.toml:8: ", "absolute URI"), "{e:?}");
    assert!(has("t.toml:10: ", "sideways"), "{e:?}");
    assert!(has("t.toml:10: ", "template is required"), "{e:?}");
    assert!(has("t.toml:12: ", "\"yes\""), "{e:?}");
    assert!(has("t.toml:14: ", "[schemes.inbound] deny"), "{e:?}");
    assert_eq!(e.len(), 9, "{e:?}");
}

#[test]
fn sample_config_is_valid_and_keeps_the_builtin_defaults() {
    let text = include_str!("../../config/mimeref-milter.toml");
    let sample = match Config::parse(text, "config/mimeref-milter.toml") {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let builtin = Config::builtin();
    for &r in Rule::ALL {
        for d in [Direction::Inbound, Direction::Outbound] {
            assert_eq!(
                sample.policy.get(d).action(r),
                builtin.policy.get(d).action(r)
            );
        }
    }
    assert_eq!(sample.report.min_severity, builtin.report.min_severity);
    assert_eq!(sample.fixes.fold_url_words, builtin.fixes.fold_url_words);
    assert_eq!(sample.limits.memory_budget, builtin.limits.memory_budget);
    assert_eq!(
        sample.service.internal_error_action,
        builtin.service.internal_error_action
    );
}

#[test]
fn scopes_are_read_in_file_order_over_the_direction_policies() {
    let c = Config::parse(
            "[policy.inbound]\n\"related-*\" = \"report\"\n\
             [[scope]]\nname = \"announce\"\nheader = { name = \"List-Id\", pattern = \"announce\\\\.example\" }\nexempt = \"log\"\n\
             [[scope]]\nname = \"strict\"\ndirection = \"inbound\"\nrecipients = [\"@Strict.Example\", \"boss@example.org\"]\n\
             senders = [\"<>\"]\nclient_networks = [\"192.0.2.7\", \"2001:db8::/32\"]\nfix_signed = true\n\
             [scope.policy]\n\"related-cid-duplicate\" = \"reject\"\n\
             [scope.report]\nmin_severity = \"error\"\nalways = true\n\
             [[scope]]\nname = \"staff\"\nsasl_logins = [\"Alice\"]\nreport = { enabled = false }\n",
            "t",
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let s: Vec<&Scope> = c.policy.scopes.iter().collect();
    assert_eq!(
        s.iter()
            .map(|s| (s.name.as_str(), s.line))
            .collect::<Vec<_>>(),
        [("announce", 4), ("strict", 8), ("staff", 20)]
    );
    assert_eq!(s[0].effect, Effect::Exempt(Action::Log));
    assert!(s[0].inbound && s[0].outbound);
    assert!(s[1].inbound && !s[1].outbound);
    let m = &s[1].matcher;
    assert_eq!(
        m.recipients.as_ref().unwrap(),
        &[
            Address::Domain("strict.example".into()),
            Address::Exact("boss@example.org".into())
        ]
    );
    assert_eq!(m.senders.as_ref().unwrap(), &[Address::Null]);
    assert_eq!(
        m.client_networks.as_ref().unwrap(),
        &[
            "192.0.2.7/32".parse::<IpNet>().unwrap(),
            "2001:db8::/32".parse().unwrap()
        ]
    );
    let Effect::Override(o) = &s[1].effect else {
        panic!("strict overrides")
    };
    assert_eq!(o.inbound.action(Rule::RelatedCidDuplicate), Action::Reject);
    // The keys the scope does not name keep the direction's policy.
    assert_eq!(o.inbound.action(Rule::RelatedRefDangling), Action::Report);
    assert_eq!(o.outbound.action(Rule::RelatedRefDangling), Action::Fix);
    assert_eq!(
        (o.fix_signed, o.min_severity, o.always, o.report),
        (
            Some(crate::engine::FixSigned::Always),
            Some(Severity::Error),
            Some(true),
            None
        )
    );
    assert_eq!(s[2].matcher.sasl_logins.as_ref().unwrap(), &["alice"]);
    let Effect::Override(o) = &s[2].effect else {
        panic!("staff overrides")
    };
    assert_eq!(o.report, Some(false));
    // A scope that rejects is a reason to negotiate nothing more than before: reject
    // needs no milter action; a quarantine does.
    assert!(c.policy.may(Action::Reject) && !c.policy.may(Action::Quarantine));
    let q = Config::parse(
            "[[scope]]\nname = \"q\"\nrecipients = [\"@q.example\"]\npolicy = { \"*\" = \"quarantine\" }\n",
            "t",
        )
        .unwrap();
    assert!(q.policy.may(Action::Quarantine));
}

#[test]
fn scope_errors_name_their_lines() {
    let text = "trusted_networks = [\"127.0.0.0/8\"]\n\
                    [[scope]]\nname = \"wide\"\nrecipients = [\"@example.org\"]\nexempt = \"log\"\n\
                    [[scope]]\nname = \"narrow\"\nrecipients = [\"bob@example.org\"]\nexempt = \"ignore\"\n\
                    [[scope]]\nname = \"nets\"\nclient_networks = [\"10.0.0.0/33\"]\nexempt = \"log\"\n\
                    [[scope]]\nname = \"re\"\nheader = { name = \"List-Id\", pattern = \"[\" }\nexempt = \"log\"\n\
                    [[scope]]\nname = \"local\"\ndirection = \"inbound\"\nclient_networks = [\"127.0.0.1\"]\nexempt = \"log\"\n\
                    [[scope]]\nname = \"wide\"\nsenders = [\"bob\"]\nexempt = \"log\"\n\
                    [[scope]]\nname = \"default\"\nrecipients = []\n\
                    [[scope]]\nrecipients = [\"@x.example\"]\nexempt = \"log\"\npolicy = { \"*\" = \"fix\" }\n\
                    [[scope]]\nname = \"noop\"\nsenders = [\"@y.example\"]\n\
                    [[scope]]\nname = \"nokey\"\nexempt = \"log\"\n\
                    [[scope]]\nname = \"twice\"\nrecipients = [\"@z.example\"]\nexempt = \"log\"\n\
                    [[scope]]\nname = \"twice\"\nrecipients = [\"@w.example\"]\nexempt = \"log\"\n";
    let e = errs(text);
    let has = |line: &str, what: &str| e.iter().any(|l| l.starts_with(line) && l.contains(what));
    assert!(
        has(
            "t.toml:7: ",
            "\"narrow\" can never match: scope \"wide\" (line 3)"
        ),
        "{e:?}"
    );
    assert!(
        has("t.toml:12: ", "\"10.0.0.0/33\" is not a CIDR network"),
        "{e:?}"
    );
    assert!(
        has(
            "t.toml:16: ",
            "pattern \"[\" is not a regular expression: unclosed"
        ),
        "{e:?}"
    );
    assert!(
        has(
            "t.toml:19: ",
            "\"local\" can never match: every client network in it is in trusted_networks"
        ),
        "{e:?}"
    );
    assert!(has("t.toml:25: ", "\"bob\" has no @"), "{e:?}");
    assert!(has("t.toml:28: ", "name \"default\" is reserved"), "{e:?}");
    assert!(
        has(
            "t.toml:29: ",
            "recipients is empty: the scope could never match"
        ),
        "{e:?}"
    );
    assert!(
        has("t.toml:31: ", "[[scope]] #8: name is required"),
        "{e:?}"
    );
    assert!(
        has(
            "t.toml:32: ",
            "[[scope]] #8: exempt sets every finding aside"
        ),
        "{e:?}"
    );
    assert!(has("t.toml:35: ", "\"noop\" changes nothing"), "{e:?}");
    assert!(
        has("t.toml:38: ", "\"nokey\": give at least one of recipients"),
        "{e:?}"
    );
    assert!(
        has("t.toml:45: ", "name \"twice\" is already used at line 41"),
        "{e:?}"
    );
    // "default" is also a scope that changes nothing: 13 in all.
    assert_eq!(e.len(), 13, "{e:#?}");
}

#[test]
fn report_threshold_and_url_form() {
    let c = Config::builtin();
    assert_eq!(c.report.min_severity, Severity::Warning);
    // One quoted word: IMAP servers and the libraries keep an RFC 2017 fold's
    // whitespace inside the URL (docs/INTEROP.md).
    assert!(!c.fixes.fold_url_words);
    assert!(c.engine_options(Direction::Inbound).whole_url_words);
    let c = Config::parse(
        "fold_url_words = true\n[report]\nmin_severity = \"info\"\n",
        "t",
    )
    .unwrap();
    assert_eq!(c.report.min_severity, Severity::Info);
    assert!(!c.engine_options(Direction::Outbound).whole_url_words);
    assert_eq!(
            errs("[report]\nmin_severity = \"notice\"\n"),
            vec![
                "t.toml:2: [report] min_severity \"notice\": expected \"info\", \"warning\" or \"error\""
            ]
        );
    assert_eq!(
        Config::parse("[policy.inbound]\n\"*\" = \"log\"\n", "t")
            .unwrap()
            .policy
            .inbound
            .action(Rule::RelatedRefDangling),
        Action::Log
    );
}

/// A socket that does not parse is one error with its line, worded by the
/// specification's own error.
#[test]
fn a_bad_socket_names_its_line() {
    assert_eq!(
        errs("log_level = \"info\"\nsocket = \"inet:1.2.3.4:99999\"\n"),
        [r#"t.toml:2: socket: "inet:1.2.3.4:99999": "99999" is not a port number"#]
    );
}

/// `fix_signed` takes false, true or "verified", top-level and in a scope; anything else
/// is an error at its line; "verified" with no trusted authserv-id is a warning at each
/// place it is set, since it could then repair nothing.
#[test]
fn fix_signed_takes_verified_and_warns_without_trusted_ids() {
    use crate::engine::FixSigned;
    let c = Config::parse(
        "fix_signed = \"verified\"\ntrusted_authserv_ids = [\"MX.Example.ORG\", \"mx.example.org\", \"rspamd.example.org\"]\n",
        "t.toml",
    )
    .unwrap();
    assert_eq!(c.fixes.fix_signed, FixSigned::Verified);
    assert_eq!(
        c.fixes.trusted_authserv_ids,
        ["mx.example.org", "rspamd.example.org"]
    );
    assert!(c.warnings().is_empty(), "{:?}", c.warnings());
    let o = c.engine_options(Direction::Inbound);
    assert_eq!(
        (o.fix_signed, o.trusted_authserv_ids.len()),
        (FixSigned::Verified, 2)
    );
    assert_eq!(
        Config::parse("", "t").unwrap().fixes.fix_signed,
        FixSigned::Never
    );
    assert_eq!(
        Config::parse("fix_signed = true", "t")
            .unwrap()
            .fixes
            .fix_signed,
        FixSigned::Always
    );

    let text = "fix_signed = \"verified\"\n\n[[scope]]\nname = \"local\"\nrecipients = [\"@example.org\"]\nfix_signed = \"verified\"\n";
    let c = Config::parse(text, "t.toml").unwrap();
    let w: Vec<String> = c.warnings().iter().map(|(_, e)| e.to_string()).collect();
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        w[0].starts_with("t.toml:1: fix_signed = \"verified\" without trusted_authserv_ids"),
        "{w:?}"
    );
    assert!(
        w[1].starts_with("t.toml:6: [[scope]] \"local\" fix_signed"),
        "{w:?}"
    );

    for (bad, line, says) in [
        (
            "fix_signed = \"yes\"\n",
            1,
            "fix_signed \"yes\": expected true, false or \"verified\"",
        ),
        (
            "\n[[scope]]\nname = \"x\"\nrecipients = [\"@a.example\"]\nfix_signed = \"always\"\n",
            5,
            "fix_signed \"always\"",
        ),
        (
            "trusted_authserv_ids = [\"mx.example.org; dkim=pass\"]\n",
            1,
            "an authserv-id is one token",
        ),
        (
            "trusted_authserv_ids = [\"\"]\n",
            1,
            "an authserv-id is one token",
        ),
    ] {
        let e = Config::parse(bad, "t.toml").unwrap_err();
        let e = &e.errors[0];
        assert_eq!(e.line, line, "{bad}: {e}");
        assert!(e.message.contains(says), "{bad}: {e}");
    }
}
