//! `config-dump`: the configuration in force written back as TOML, each value with
//! where it came from (`FILE:LINE`, or `built-in`), scopes included, secrets masked.
//!
//! It is written from the validated [`Config`], not from the file: what the daemon
//! runs with is the validated form, and defaults that depend on other keys
//! (`max_header_size` under a small `max_message_size`, the spill directory from
//! `TMPDIR`) come out as they are in force. The file's text only says where a value
//! was written. `config-check` reads the dump back to the same configuration (the
//! tests compare the validated forms), so a dump pasted into a bug report can be run.
//!
//! Two keys the validated form drops when they cannot take effect (`syslog_*` beside
//! `log_target = "stderr"`, `[report] header` beside `enabled = false`) are written
//! as the file gives them, else their default, and marked as not in effect.

use std::fmt::Write as _;
use std::ops::Range;

use toml_edit::{ImDocument, Item, TableLike, Value};

use super::{
    Config, LogFormat, LogTarget, DEFAULT_MAX_HEADER_SIZE, DEFAULT_REPORT_HEADER,
    DEFAULT_SYSLOG_SOCKET, SPILL_THRESHOLD, SYSLOG_FACILITIES,
};
use crate::engine::{FixSigned, HostMatch, Rule};
use crate::policy::decide::Effect;
use crate::policy::redact;
use crate::policy::{Action, Pattern};

/// What `config-dump` writes.
#[derive(Debug, Clone, Copy, Default)]
pub struct DumpOptions {
    /// `-n`: only the keys whose value differs from the built-in configuration's.
    pub changed_only: bool,
    /// Write URL credentials and literal query values as they are (off: masked with
    /// `***`, so that the dump can be pasted into a bug report).
    pub show_secrets: bool,
}

impl Config {
    /// The configuration as TOML; `text` is the file it was read from (None: built-in
    /// or standard input without positions).
    pub fn dump(&self, text: Option<&str>, opts: DumpOptions) -> String {
        let name = self
            .file
            .as_ref()
            .map_or_else(|| "standard input".to_string(), |f| f.display().to_string());
        let origins = Origins::new(text, name);
        let sections = sections(self, &origins, opts.show_secrets);
        let builtin = opts
            .changed_only
            .then(|| sections_of_builtin(opts.show_secrets));
        let mut out = String::new();
        let source = match (&self.file, text) {
            (Some(f), _) => format!("{}", f.display()),
            (None, Some(_)) => "standard input".into(),
            (None, None) => "no configuration file: built-in defaults".into(),
        };
        let _ = writeln!(
            out,
            "# mimeref-milter {} config-dump{}: {source}",
            env!("CARGO_PKG_VERSION"),
            if opts.changed_only { " -n" } else { "" }
        );
        if opts.changed_only {
            out.push_str("# Only the values that differ from the built-in configuration.\n");
        }
        if !opts.show_secrets {
            out.push_str(
                "# URL credentials and literal query values are masked as ***; \
                 --show-secrets writes them.\n",
            );
        }
        let mut written = 0;
        for s in &sections {
            let keys: Vec<&Entry> = s
                .entries
                .iter()
                .filter(|e| match &builtin {
                    None => true,
                    // A direction's table of [schemes] is read over [schemes], not
                    // over the built-in values.
                    Some(_) if s.over_schemes => {
                        e.value.is_some()
                            && Builtin::get_in(&sections, "[schemes]", &e.key) != Some(&e.value)
                    }
                    Some(b) => e.value.is_some() && b.get(&s.header, &e.key) != Some(&e.value),
                })
                .collect();
            let notes = !opts.changed_only && !s.notes.is_empty();
            // A table with nothing of its own stays out of `-n`; an array-of-tables
            // entry always counts (it is one rule or scope).
            if opts.changed_only && keys.is_empty() && !s.header.starts_with("[[") {
                continue;
            }
            s.write(&mut out, &keys, notes);
            written += keys.len();
        }
        if written == 0 {
            out.push_str("# Nothing differs from the built-in configuration.\n");
        }
        out
    }
}

/// One key of a section: its TOML value (None: not set, written as a comment), where it
/// came from, and a note.
#[derive(Debug)]
struct Entry {
    key: String,
    value: Option<String>,
    origin: String,
    note: Option<String>,
}

/// A table header (empty for the top level) with its keys and closing comments.
#[derive(Debug)]
struct Section {
    header: String,
    origin: Option<String>,
    entries: Vec<Entry>,
    notes: Vec<String>,
    /// `[schemes.inbound]`, `[schemes.outbound]`.
    over_schemes: bool,
}

/// The built-in configuration's values, by table header and key.
struct Builtin(Vec<Section>);

impl Builtin {
    fn get(&self, header: &str, key: &str) -> Option<&Option<String>> {
        Builtin::get_in(&self.0, header, key)
    }

    fn get_in<'s>(sections: &'s [Section], header: &str, key: &str) -> Option<&'s Option<String>> {
        sections
            .iter()
            .filter(|s| s.header == header)
            .flat_map(|s| &s.entries)
            .find(|e| e.key == key)
            .map(|e| &e.value)
    }
}

fn sections_of_builtin(show_secrets: bool) -> Builtin {
    Builtin(sections(
        &Config::builtin(),
        &Origins::new(None, String::new()),
        show_secrets,
    ))
}

/// A step of a path into the file: a key, or the n-th table of an array of tables.
#[derive(Clone, Copy)]
enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

use Seg::{Index, Key};

/// Where keys were written in the file read.
struct Origins<'t> {
    doc: Option<ImDocument<&'t str>>,
    text: &'t str,
    name: String,
}

impl<'t> Origins<'t> {
    fn new(text: Option<&'t str>, name: String) -> Origins<'t> {
        Origins {
            doc: text.and_then(|t| ImDocument::parse(t).ok()),
            text: text.unwrap_or(""),
            name,
        }
    }

    /// The item at `path`, and the span of its key (or table header).
    fn find(&self, path: &[Seg]) -> Option<(Node<'_>, Option<Range<usize>>)> {
        let doc = self.doc.as_ref()?;
        let mut node = Node::Item(doc.as_item());
        let mut span = None;
        for seg in path {
            match *seg {
                Key(k) => {
                    let (key, item) = node.table()?.get_key_value(k)?;
                    span = key.span().or_else(|| item.span());
                    node = Node::Item(item);
                }
                Index(i) => match node {
                    Node::Item(Item::ArrayOfTables(a)) => {
                        let t = a.get(i)?;
                        span = t.span();
                        node = Node::Table(t);
                    }
                    Node::Item(Item::Value(Value::Array(a))) | Node::Value(Value::Array(a)) => {
                        let v = a.get(i)?;
                        span = v.span();
                        node = Node::Value(v);
                    }
                    _ => return None,
                },
            }
        }
        Some((node, span))
    }

    fn line(&self, path: &[Seg]) -> Option<usize> {
        let (_, span) = self.find(path)?;
        span.map(|s| super::line_of(self.text, s.start))
    }

    /// `FILE:LINE` of the first of `paths` the file gives, else `built-in`.
    fn of(&self, paths: &[&[Seg]]) -> String {
        paths
            .iter()
            .find_map(|p| self.line(p))
            .map_or_else(|| "built-in".to_string(), |l| format!("{}:{l}", self.name))
    }

    /// The string the file gives at `path`, if it does.
    fn string(&self, path: &[Seg]) -> Option<String> {
        match self.find(path)?.0 {
            Node::Item(Item::Value(v)) | Node::Value(v) => v.as_str().map(str::to_string),
            _ => None,
        }
    }
}

enum Node<'d> {
    Item(&'d Item),
    Table(&'d toml_edit::Table),
    Value(&'d Value),
}

impl<'d> Node<'d> {
    fn table(&self) -> Option<&'d dyn TableLike> {
        match *self {
            Node::Item(i) => i.as_table_like(),
            Node::Table(t) => Some(t as &dyn TableLike),
            Node::Value(v) => v.as_inline_table().map(|t| t as &dyn TableLike),
        }
    }
}

/// A TOML string.
fn s(v: &str) -> String {
    toml::Value::String(v.to_string()).to_string()
}

/// A TOML array of strings.
fn arr<I: IntoIterator<Item = String>>(items: I) -> String {
    toml::Value::Array(items.into_iter().map(toml::Value::String).collect()).to_string()
}

fn toml_key(k: &str) -> String {
    if !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        k.to_string()
    } else {
        s(k)
    }
}

/// `(inbound, outbound)` as a direction set.
fn direction_set(inbound: bool, outbound: bool) -> &'static str {
    match (inbound, outbound) {
        (true, true) => "both",
        (true, false) => "inbound",
        (false, true) => "outbound",
        (false, false) => "none",
    }
}

/// A `[[rewrite]]` template with its secrets masked: the password of a literal user
/// information (or all of it when there is no password: where tokens go) and every
/// literal query value. Placeholders stay, so that the rule still reads as written
/// and still parses.
fn redact_template(t: &str) -> String {
    let (head, fragment) = match t.find('#') {
        Some(h)
            if !t[..h].contains('{')
                || t[..h].matches('{').count() == t[..h].matches('}').count() =>
        {
            t.split_at(h)
        }
        _ => (t, ""),
    };
    let (before_query, query) = match head.find('?') {
        Some(q) => (&head[..q], Some(&head[q + 1..])),
        None => (head, None),
    };
    let mut out = String::new();
    match before_query.find("://") {
        Some(p) => {
            let after = &before_query[p + 3..];
            let end = after.find('/').unwrap_or(after.len());
            let (authority, path) = after.split_at(end);
            out.push_str(&before_query[..p + 3]);
            match authority.rfind('@') {
                Some(at) if !authority[..at].contains('{') => {
                    let userinfo = &authority[..at];
                    match userinfo.find(':') {
                        Some(c) => {
                            out.push_str(&userinfo[..=c]);
                            out.push_str(redact::MASK);
                        }
                        None => out.push_str(redact::MASK),
                    }
                    out.push_str(&authority[at..]);
                }
                _ => out.push_str(authority),
            }
            out.push_str(path);
        }
        None => out.push_str(before_query),
    }
    if let Some(q) = query {
        out.push('?');
        let params: Vec<String> = q
            .split('&')
            .map(|p| {
                if p.is_empty() || p.contains('{') {
                    p.to_string()
                } else {
                    match p.split_once('=') {
                        Some((k, "")) => format!("{k}="),
                        Some((k, _)) => format!("{k}={}", redact::MASK),
                        None => redact::MASK.to_string(),
                    }
                }
            })
            .collect();
        out.push_str(&params.join("&"));
    }
    out.push_str(fragment);
    out
}

/// Every section of the dump, in the order a TOML file must have them (top-level keys
/// before the first table).
fn sections(c: &Config, o: &Origins, show_secrets: bool) -> Vec<Section> {
    let mut top = Section::new("", None);
    listen_and_process(c, o, &mut top);
    service_and_fixes(c, o, &mut top);
    let mut out = vec![top, limits(c, o)];
    urls(c, o, &mut out);
    out.push(report(c, o));
    out.push(reply(c, o, show_secrets));
    policies(c, o, &mut out);
    rewrites(c, o, show_secrets, &mut out);
    scopes(c, o, &mut out);
    out
}

/// The top-level keys of how the daemon listens and logs.
fn listen_and_process(c: &Config, o: &Origins, top: &mut Section) {
    let l = &c.listen;
    top.put(
        "socket",
        s(&l.socket.to_string()),
        o.of(&[&[Key("socket")]]),
    );
    top.maybe(
        "socket_mode",
        l.socket_mode.map(|m| s(&format!("{m:04o}"))),
        o.of(&[&[Key("socket_mode")]]),
    );
    top.maybe(
        "socket_group",
        l.socket_group.as_deref().map(s),
        o.of(&[&[Key("socket_group")]]),
    );
    let p = &c.process;
    top.put("log_level", s(&p.log_level), o.of(&[&[Key("log_level")]]));
    let format = match p.log_format {
        LogFormat::Text => "text",
        LogFormat::Json => "json",
    };
    top.put("log_format", s(format), o.of(&[&[Key("log_format")]]));
    let (target, socket, facility) = match &p.log_target {
        LogTarget::Stderr => ("stderr", None, None),
        LogTarget::Syslog { socket, facility } => (
            "syslog",
            Some(socket.display().to_string()),
            SYSLOG_FACILITIES
                .iter()
                .find(|(_, code)| code == facility)
                .map(|(n, _)| n.to_string()),
        ),
    };
    top.put("log_target", s(target), o.of(&[&[Key("log_target")]]));
    let unused =
        (target == "stderr").then(|| "not in effect with log_target = \"stderr\"".to_string());
    let socket = socket
        .or_else(|| o.string(&[Key("syslog_socket")]))
        .unwrap_or_else(|| DEFAULT_SYSLOG_SOCKET.into());
    top.put(
        "syslog_socket",
        s(&socket),
        o.of(&[&[Key("syslog_socket")]]),
    );
    top.note(unused.clone());
    let facility = facility
        .or_else(|| o.string(&[Key("syslog_facility")]))
        .unwrap_or_else(|| "mail".into());
    top.put(
        "syslog_facility",
        s(&facility),
        o.of(&[&[Key("syslog_facility")]]),
    );
    top.note(unused);
    top.put(
        "metrics_listen",
        s(&l.metrics_listen.map(|a| a.to_string()).unwrap_or_default()),
        o.of(&[&[Key("metrics_listen")]]),
    );
    top.note(l.metrics_listen.is_none().then(|| "\"\": off".to_string()));
    for (key, v) in [
        ("metrics_max_connections", l.metrics_max_connections as u64),
        ("max_connections", l.max_connections as u64),
        ("connection_timeout", l.connection_timeout.as_secs()),
        ("transaction_timeout", l.transaction_timeout.as_secs()),
        ("reply_timeout", l.reply_timeout.as_secs()),
        ("shutdown_timeout", c.service.shutdown_timeout.as_secs()),
    ] {
        top.put(key, v.to_string(), o.of(&[&[Key(key)]]));
    }
}

/// The other top-level keys: the service, the directions, the fixes.
fn service_and_fixes(c: &Config, o: &Origins, top: &mut Section) {
    top.put(
        "dry_run",
        c.service.dry_run.to_string(),
        o.of(&[&[Key("dry_run")]]),
    );
    top.note(
        c.service
            .dry_run_forced
            .then(|| "forced by --dry-run".to_string()),
    );
    top.put(
        "no_reply_stages",
        c.service.no_reply_stages.to_string(),
        o.of(&[&[Key("no_reply_stages")]]),
    );
    top.put(
        "internal_error_action",
        s(c.service.internal_error_action.as_str()),
        o.of(&[&[Key("internal_error_action")]]),
    );
    top.put(
        "trusted_networks",
        arr(c.directions.trusted_networks.iter().map(|n| n.to_string())),
        o.of(&[&[Key("trusted_networks")]]),
    );
    top.put(
        "outbound_daemons",
        arr(c.directions.outbound_daemons.iter().cloned()),
        o.of(&[&[Key("outbound_daemons")]]),
    );
    let f = &c.fixes;
    top.put(
        "fix_signed",
        f.fix_signed.as_config().to_string(),
        o.of(&[&[Key("fix_signed")]]),
    );
    top.put(
        "trusted_authserv_ids",
        arr(f.trusted_authserv_ids.iter().cloned()),
        o.of(&[&[Key("trusted_authserv_ids")]]),
    );
    top.put(
        "normalize_url_continuations",
        f.normalize_url_continuations.to_string(),
        o.of(&[&[Key("normalize_url_continuations")]]),
    );
    top.put(
        "fold_url_words",
        f.fold_url_words.to_string(),
        o.of(&[&[Key("fold_url_words")]]),
    );
}

fn limits(c: &Config, o: &Origins) -> Section {
    let lim = &c.limits;
    let at = |k| o.of(&[&[Key("limits"), Key(k)]]);
    let mut limits = Section::new("[limits]", None);
    for (key, v) in [
        ("max_message_size", lim.max_message_size),
        ("max_header_size", lim.max_header_size),
        ("max_depth", lim.max_depth),
        ("max_parts", lim.max_parts),
        ("spill_threshold", lim.spill_threshold),
        ("memory_budget", lim.memory_budget),
    ] {
        let origin = at(key);
        // Two defaults step down to a small max_message_size: say so, or the dump
        // shows a "built-in" value that is not the one documented.
        let default = match key {
            "max_header_size" => Some(DEFAULT_MAX_HEADER_SIZE),
            "spill_threshold" => Some(SPILL_THRESHOLD),
            _ => None,
        };
        let capped = origin == "built-in" && default.is_some_and(|d| v < d);
        limits.put(key, v.to_string(), origin);
        limits.note(capped.then(|| "the default, capped at max_message_size".to_string()));
    }
    limits.put(
        "oversize_action",
        s(c.policy.oversize_action.as_str()),
        at("oversize_action"),
    );
    limits.put(
        "spill_directory",
        s(&lim.spill_directory.display().to_string()),
        at("spill_directory"),
    );
    limits
}

/// `[schemes]` and its direction tables, `[legacy]`.
fn urls(c: &Config, o: &Origins, out: &mut Vec<Section>) {
    // `[schemes]` holds the inbound values; `[schemes.outbound]` (and, in full, both
    // direction tables) what each direction has in force.
    let u = &c.urls;
    let scheme_keys = |dir: &'static str, pol: &super::UrlPolicy, sec: &mut Section| {
        let at = |k: &'static str| {
            o.of(&[
                &[Key("schemes"), Key(dir), Key(k)],
                &[Key("schemes"), Key(k)],
            ])
        };
        sec.put("allow", arr(pol.schemes.allow.iter().cloned()), at("allow"));
        sec.put("deny", arr(pol.schemes.deny.iter().cloned()), at("deny"));
        sec.put(
            "strip_denied",
            pol.strip_denied.to_string(),
            at("strip_denied"),
        );
    };
    let mut schemes = Section::new("[schemes]", None);
    scheme_keys("inbound", &u.inbound, &mut schemes);
    schemes.notes.push(
        "[schemes.inbound] and [schemes.outbound] replace these, key by key, for their direction"
            .into(),
    );
    out.push(schemes);
    let mut sin = Section::new("[schemes.inbound]", None);
    scheme_keys("inbound", &u.inbound, &mut sin);
    out.push(sin);
    let mut sout = Section::new("[schemes.outbound]", None);
    scheme_keys("outbound", &u.outbound, &mut sout);
    out.push(sout);

    let mut legacy = Section::new("[legacy]", None);
    legacy.put(
        "to_url",
        s(direction_set(
            u.inbound.legacy_to_url,
            u.outbound.legacy_to_url,
        )),
        o.of(&[&[Key("legacy"), Key("to_url")]]),
    );
    legacy.put(
        "ftp_with_login",
        u.inbound.legacy_ftp_with_login.to_string(),
        o.of(&[&[Key("legacy"), Key("ftp_with_login")]]),
    );
    out.push(legacy);
}

fn report(c: &Config, o: &Origins) -> Section {
    let r = &c.report;
    let at = |k| o.of(&[&[Key("report"), Key(k)]]);
    let mut report = Section::new("[report]", None);
    report.put("enabled", r.header.is_some().to_string(), at("enabled"));
    let header = r
        .header
        .clone()
        .or_else(|| o.string(&[Key("report"), Key("header")]))
        .unwrap_or_else(|| DEFAULT_REPORT_HEADER.into());
    report.put("header", s(&header), at("header"));
    report.note(
        r.header
            .is_none()
            .then(|| "not in effect with enabled = false".to_string()),
    );
    report.put("always", r.always.to_string(), at("always"));
    report.put(
        "remove_forged",
        r.remove_forged.to_string(),
        at("remove_forged"),
    );
    report.put(
        "min_severity",
        s(r.min_severity.as_str()),
        at("min_severity"),
    );
    report.put("redact_urls", r.redact_urls.to_string(), at("redact_urls"));
    report
}

fn reply(c: &Config, o: &Origins, show_secrets: bool) -> Section {
    let text = |v: &str| {
        if show_secrets {
            v.to_string()
        } else {
            redact::redact(v).into_owned()
        }
    };
    let rp = &c.replies;
    let at = |k| o.of(&[&[Key("reply"), Key(k)]]);
    let mut reply = Section::new("[reply]", None);
    for (key, t) in [("reject", &rp.reject), ("tempfail", &rp.tempfail)] {
        let line = format!("{} {} {}", t.code, t.status, t.text);
        reply.put(key, s(&text(&line)), at(key));
    }
    reply.put("quarantine", s(&text(&rp.quarantine)), at("quarantine"));
    reply
}

/// `[policy.inbound]`, `[policy.outbound]`, with the action in force per rule.
fn policies(c: &Config, o: &Origins, out: &mut Vec<Section>) {
    for (dir, pol) in [
        ("inbound", &c.policy.inbound),
        ("outbound", &c.policy.outbound),
    ] {
        let mut sec = Section::new(&format!("[policy.{dir}]"), None);
        policy_entries(&mut sec, pol.entries(), o, &[Key("policy"), Key(dir)]);
        sec.notes.push("in force per rule:".into());
        for rule in Rule::ALL {
            let a = pol.action(*rule);
            let how = if pol.entries().iter().any(|(p, _)| p.matches(rule.id())) {
                ""
            } else {
                " (built-in)"
            };
            sec.notes
                .push(format!("  {} = {}{how}", rule.id(), s(a.as_str())));
        }
        out.push(sec);
    }
}

/// Each `[[rewrite]]` in file order.
fn rewrites(c: &Config, o: &Origins, show_secrets: bool, out: &mut Vec<Section>) {
    let u = &c.urls;
    for (n, rr) in u.rules.iter().enumerate() {
        let base = [Key("rewrite"), Index(n)];
        let at = |k: &'static str| o.of(&[&[base[0], base[1], Key(k)]]);
        let mut sec = Section::new("[[rewrite]]", Some(o.of(&[&base])));
        let rule = &rr.rule;
        sec.put(
            "direction",
            s(direction_set(rr.inbound, rr.outbound)),
            at("direction"),
        );
        sec.maybe("scheme", rule.scheme.as_deref().map(s), at("scheme"));
        let (host, suffix) = match &rule.host {
            Some(HostMatch::Exact(h)) => (Some(s(h)), None),
            Some(HostMatch::Suffix(h)) => (None, Some(s(h))),
            None => (None, None),
        };
        sec.maybe("host", host, at("host"));
        sec.maybe("host_suffix", suffix, at("host_suffix"));
        sec.maybe(
            "path",
            rule.path.as_ref().map(|p| s(p.0.as_str())),
            at("path"),
        );
        let template = rule.template.to_string();
        let template = if show_secrets {
            template
        } else {
            redact_template(&template)
        };
        sec.put("template", s(&template), at("template"));
        out.push(sec);
    }
}

/// Each `[[scope]]` in file order, with its `[scope.policy]` and `[scope.report]`.
fn scopes(c: &Config, o: &Origins, out: &mut Vec<Section>) {
    let base_entries = c.policy.inbound.entries().len();
    for (n, sc) in c.policy.scopes.iter().enumerate() {
        let base = [Key("scope"), Index(n)];
        let at = |k: &'static str| o.of(&[&[base[0], base[1], Key(k)]]);
        let mut sec = Section::new("[[scope]]", Some(o.of(&[&base])));
        sec.put("name", s(&sc.name), at("name"));
        sec.put(
            "direction",
            s(direction_set(sc.inbound, sc.outbound)),
            at("direction"),
        );
        let m = &sc.matcher;
        let list = |v: &Option<Vec<String>>| v.as_ref().map(|v| arr(v.iter().cloned()));
        let strings = |v: &Option<Vec<crate::policy::matching::Address>>| {
            list(
                &v.as_ref()
                    .map(|v| v.iter().map(|a| a.to_string()).collect()),
            )
        };
        sec.maybe("recipients", strings(&m.recipients), at("recipients"));
        sec.maybe("senders", strings(&m.senders), at("senders"));
        sec.maybe(
            "client_networks",
            list(
                &m.client_networks
                    .as_ref()
                    .map(|v| v.iter().map(|n| n.to_string()).collect()),
            ),
            at("client_networks"),
        );
        sec.maybe("sasl_logins", list(&m.sasl_logins), at("sasl_logins"));
        sec.maybe(
            "header",
            m.header.as_ref().map(|h| match &h.pattern {
                Some(p) => format!("{{ name = {}, pattern = {} }}", s(&h.name), s(p.as_str())),
                None => format!("{{ name = {} }}", s(&h.name)),
            }),
            at("header"),
        );
        match &sc.effect {
            Effect::Exempt(a) => {
                sec.put("exempt", s(a.as_str()), at("exempt"));
                out.push(sec);
            }
            Effect::Override(ov) => {
                sec.maybe("exempt", None, at("exempt"));
                sec.maybe(
                    "fix_signed",
                    ov.fix_signed.map(|f: FixSigned| f.as_config().to_string()),
                    at("fix_signed"),
                );
                out.push(sec);
                let own = ov.inbound.entries().get(base_entries..).unwrap_or_default();
                let mut pol = Section::new("[scope.policy]", None);
                policy_entries(&mut pol, own, o, &[base[0], base[1], Key("policy")]);
                if !pol.entries.is_empty() {
                    out.push(pol);
                }
                let at = |k: &'static str| o.of(&[&[base[0], base[1], Key("report"), Key(k)]]);
                let mut rep = Section::new("[scope.report]", None);
                rep.maybe("enabled", ov.report.map(|b| b.to_string()), at("enabled"));
                rep.maybe("always", ov.always.map(|b| b.to_string()), at("always"));
                rep.maybe(
                    "min_severity",
                    ov.min_severity.map(|v| s(v.as_str())),
                    at("min_severity"),
                );
                if rep.entries.iter().any(|e| e.value.is_some()) {
                    out.push(rep);
                }
            }
        }
    }
}

/// The entries of a policy table as written, each with its line.
fn policy_entries(sec: &mut Section, entries: &[(Pattern, Action)], o: &Origins, table: &[Seg]) {
    for (p, a) in entries {
        let mut path = table.to_vec();
        path.push(Key(p.as_str()));
        sec.put(p.as_str(), s(a.as_str()), o.of(&[&path]));
    }
}

impl Section {
    fn new(header: &str, origin: Option<String>) -> Section {
        Section {
            header: header.into(),
            origin,
            entries: Vec::new(),
            notes: Vec::new(),
            over_schemes: header.starts_with("[schemes."),
        }
    }

    fn put(&mut self, key: &str, value: String, origin: String) {
        self.maybe(key, Some(value), origin);
    }

    fn maybe(&mut self, key: &str, value: Option<String>, origin: String) {
        self.entries.push(Entry {
            key: key.into(),
            value,
            origin,
            note: None,
        });
    }

    /// The section as TOML: its header, `keys` (those it keeps), and its notes as
    /// comments when `notes`.
    fn write(&self, out: &mut String, keys: &[&Entry], notes: bool) {
        if !self.header.is_empty() {
            out.push('\n');
            match &self.origin {
                Some(o) => {
                    let _ = writeln!(out, "{}  # {o}", self.header);
                }
                None => {
                    let _ = writeln!(out, "{}", self.header);
                }
            }
        }
        for e in keys {
            match &e.value {
                Some(v) => {
                    let _ = write!(out, "{} = {v}  # {}", toml_key(&e.key), e.origin);
                }
                None => {
                    let _ = write!(out, "# {} = (not set)", toml_key(&e.key));
                }
            }
            if let Some(n) = &e.note {
                let _ = write!(out, "; {n}");
            }
            out.push('\n');
        }
        if notes {
            for n in &self.notes {
                let _ = writeln!(out, "#{}{n}", if n.is_empty() { "" } else { " " });
            }
        }
    }

    /// A note on the key put last.
    fn note(&mut self, note: Option<String>) {
        if let Some(e) = self.entries.last_mut() {
            e.note = note;
        }
    }
}

#[cfg(test)]
mod tests;
