//! Configuration: read in two phases, [`raw`] (the TOML as written, every key optional,
//! unknown keys refused) and validation here (defaults, value checks, cross-field checks).
//! Every error names the file and line.

pub mod raw;
mod recover;
mod socket;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ffi::CStr;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ipnet::IpNet;
use toml::Spanned;

use crate::engine::{
    self, HostMatch, Limits, PathRegex, SchemePolicy, Severity, Template, UrlRewrite,
};
use crate::policy::{self, Action, Direction, Pattern, Policy};
use raw::RawConfig;
pub use socket::SocketSpec;

/// Where the daemon looks when no `--config` was given.
pub const DEFAULT_PATH: &str = "/etc/mimeref-milter/mimeref-milter.toml";
pub const DEFAULT_SOCKET: &str = "inet:127.0.0.1:7357";
pub const DEFAULT_REPORT_HEADER: &str = "X-MIMERef";
pub const DEFAULT_REJECT_REPLY: &str = "550 5.6.0 MIME reference error: {rules}";
pub const DEFAULT_TEMPFAIL_REPLY: &str = "451 4.6.0 MIME reference error: {rules}";
pub const DEFAULT_QUARANTINE_REASON: &str = "MIME reference error: {rules}";
/// `[limits] spill_threshold` when not given (or `max_message_size` if smaller).
pub const SPILL_THRESHOLD: usize = 4 << 20;
/// `[limits] max_header_size` when not given (or `max_message_size` if smaller).
pub const DEFAULT_MAX_HEADER_SIZE: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// An SMTP reply: code, enhanced status code and a text template where `{rules}` stands
/// for the rule ids that decided the verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyTemplate {
    pub code: String,
    pub status: String,
    pub text: String,
}

impl ReplyTemplate {
    /// Parses `"550 5.6.0 text"`; `class` is the required first digit (`'5'`/`'4'`).
    fn parse(s: &str, class: char) -> Result<ReplyTemplate, String> {
        let mut it = s.splitn(3, ' ');
        let code = it.next().unwrap_or("");
        let status = it.next().unwrap_or("");
        let text = it.next().unwrap_or("").trim();
        let code_ok =
            code.len() == 3 && code.starts_with(class) && code.bytes().all(|b| b.is_ascii_digit());
        if !code_ok {
            return Err(format!(
                "reply {s:?} must start with a {class}xx SMTP code, e.g. \"{class}50 {class}.6.0 text\""
            ));
        }
        let parts: Vec<&str> = status.split('.').collect();
        let status_ok = parts.len() == 3
            && parts[0] == class.to_string()
            && parts[1..]
                .iter()
                .all(|p| (1..=3).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()));
        if !status_ok {
            return Err(format!(
                "reply {s:?}: second word must be an enhanced status code {class}.X.Y (RFC 3463)"
            ));
        }
        if text.is_empty() {
            return Err(format!("reply {s:?} has no text"));
        }
        check_printable(text).map_err(|e| format!("reply {s:?}: {e}"))?;
        Ok(ReplyTemplate {
            code: code.into(),
            status: status.into(),
            text: text.into(),
        })
    }
}

/// Reply texts and header values go to the MTA verbatim: control characters (CR, LF, NUL
/// above all) would break the protocol or smuggle lines.
fn check_printable(s: &str) -> Result<(), String> {
    match s.chars().find(|c| c.is_control()) {
        Some(c) => Err(format!("control character {c:?} not allowed")),
        None => Ok(()),
    }
}

/// The validated configuration. Cheap to share: the daemon holds it in an `Arc` and swaps
/// it on reload.
#[derive(Debug, Clone)]
pub struct Config {
    /// What [`Config::load`] was given (None: default path or built-in), for reloads.
    pub origin: Option<PathBuf>,
    /// The file actually read (None: built-in defaults), for messages.
    pub file: Option<PathBuf>,
    pub socket: SocketSpec,
    pub socket_mode: Option<u32>,
    pub socket_group: Option<String>,
    pub dry_run: bool,
    /// Dry run forced by `--dry-run`: survives reloads whatever the file says.
    pub dry_run_forced: bool,
    pub log_level: String,
    pub log_format: LogFormat,
    pub metrics_listen: Option<SocketAddr>,
    pub max_connections: usize,
    pub connection_timeout: Duration,
    pub shutdown_timeout: Duration,
    pub trusted_networks: Vec<IpNet>,
    pub outbound_daemons: Vec<String>,
    pub fix_signed: bool,
    pub normalize_url_continuations: bool,
    /// Write external-body URLs that a fix rewrites as RFC 2017 folded words of at most
    /// 40 octets (the default); off: one quoted word, folded only where a line would
    /// pass 998 octets, for readers that keep the folding whitespace inside the URL.
    pub fold_url_words: bool,
    /// Negotiate "no reply" for connect, header, end of header and body where the MTA
    /// offers it: those stages only accumulate the message, so the MTA need not wait.
    pub no_reply_stages: bool,
    pub limits: Limits,
    /// Most octets of header fields buffered; beyond it the message counts as oversize.
    pub max_header_size: usize,
    pub oversize_action: Action,
    /// A message larger than this goes to an unlinked file in `spill_directory` while
    /// it is received; never above `limits.max_message_size`.
    pub spill_threshold: usize,
    pub spill_directory: PathBuf,
    /// The `[schemes]` lists as written (both directions before `[schemes.inbound]` /
    /// `[schemes.outbound]` replace them).
    pub schemes: SchemePolicy,
    /// What happens to URLs per direction: scheme policy, strip, rewrite rules, legacy.
    pub url_inbound: UrlPolicy,
    pub url_outbound: UrlPolicy,
    /// Report header name; None when reporting is off.
    pub report_header: Option<String>,
    /// Add the report header even when there is nothing to report.
    pub report_always: bool,
    /// Delete report headers already present in inbound mail (they could be forged).
    pub remove_forged: bool,
    /// A finding below this severity whose action is `report` is only logged: it adds no
    /// report header.
    pub report_min_severity: Severity,
    pub reject_reply: ReplyTemplate,
    pub tempfail_reply: ReplyTemplate,
    pub quarantine_reason: String,
    pub inbound: Policy,
    pub outbound: Policy,
}

/// What happens to the URLs of messages of one direction.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UrlPolicy {
    pub schemes: SchemePolicy,
    /// Offer to replace a part with a denied reference by a notice part.
    pub strip_denied: bool,
    /// `[[rewrite]]` rules for this direction, in file order.
    pub rewrites: Vec<UrlRewrite>,
    pub legacy_to_url: bool,
    pub legacy_ftp_with_login: bool,
}

/// Every problem found in a configuration file, each as `FILE:LINE: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors {
    pub errors: Vec<ConfigError>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    /// 1-based; 0 when the error concerns the file as a whole.
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        }
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

impl Config {
    /// Loads `path`, or with None the default file if it exists, else the built-in
    /// configuration. A named file that is missing is an error.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigErrors> {
        let (file, text) = match path {
            Some(p) => match std::fs::read_to_string(p) {
                Ok(t) => (p.to_path_buf(), t),
                Err(e) => return Err(whole_file(p, format!("cannot read: {e}"))),
            },
            None => {
                let p = Path::new(DEFAULT_PATH);
                match std::fs::read_to_string(p) {
                    Ok(t) => (p.to_path_buf(), t),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        return Ok(Config::builtin())
                    }
                    Err(e) => return Err(whole_file(p, format!("cannot read: {e}"))),
                }
            }
        };
        let mut cfg = Config::parse(&text, &file.display().to_string())?;
        cfg.origin = path.map(Path::to_path_buf);
        cfg.file = Some(file);
        Ok(cfg)
    }

    /// The configuration used when there is no file at all.
    pub fn builtin() -> Config {
        match Config::parse("", "built-in") {
            Ok(c) => c,
            // The empty file is valid by construction (tested); this arm is unreachable.
            Err(e) => panic!("built-in configuration invalid: {e}"),
        }
    }

    /// Parses and validates configuration text; `name` is used in error messages.
    pub fn parse(text: &str, name: &str) -> Result<Config, ConfigErrors> {
        let (raw, found) = recover::deserialize_all::<RawConfig>(text);
        let mut errors: Vec<ConfigError> = found
            .into_iter()
            .map(|e| ConfigError {
                file: name.into(),
                line: e.offset.map_or(0, |o| line_of(text, o)),
                message: e.message,
            })
            .collect();
        let Some(raw) = raw else {
            return Err(ConfigErrors { errors });
        };
        let mut v = Validator {
            text,
            name,
            errors: Vec::new(),
        };
        let cfg = v.config(raw);
        errors.append(&mut v.errors);
        errors.sort_by_key(|e| e.line);
        v.errors = errors;
        if v.errors.is_empty() {
            Ok(cfg)
        } else {
            Err(ConfigErrors { errors: v.errors })
        }
    }

    /// Outbound when the client authenticated, connects from a trusted network, or came
    /// in through one of `outbound_daemons`; inbound otherwise (also when macros are
    /// missing: the cautious side). `macros` holds them by name, `{auth_type}` or
    /// `auth_type`.
    pub fn direction(
        &self,
        macros: &BTreeMap<String, String>,
        client_addr: Option<IpAddr>,
    ) -> Direction {
        self.direction_with(
            |name| {
                let name = name.to_str().unwrap_or_default();
                macros
                    .get(name)
                    .or_else(|| macros.get(name.trim_start_matches('{').trim_end_matches('}')))
                    .map(|v| Cow::Borrowed(v.as_str()))
            },
            client_addr,
        )
    }

    /// [`Config::direction`] with the macros looked up one by one, and only those the
    /// decision needs: `macro_value` is asked for `{auth_authen}`, `{auth_type}`,
    /// `{client_addr}` or `{daemon_name}`.
    pub fn direction_with<'m>(
        &self,
        macro_value: impl Fn(&'static CStr) -> Option<Cow<'m, str>>,
        client_addr: Option<IpAddr>,
    ) -> Direction {
        let get = |name| macro_value(name).filter(|v| !v.is_empty());
        if get(c"{auth_authen}").is_some() || get(c"{auth_type}").is_some() {
            return Direction::Outbound;
        }
        let addr = client_addr.or_else(|| get(c"{client_addr}").and_then(|a| parse_ip(&a)));
        if let Some(a) = addr {
            if policy::in_networks(&self.trusted_networks, a) {
                return Direction::Outbound;
            }
        }
        if !self.outbound_daemons.is_empty() {
            if let Some(d) = get(c"{daemon_name}") {
                if self.outbound_daemons.iter().any(|o| *o == *d) {
                    return Direction::Outbound;
                }
            }
        }
        Direction::Inbound
    }

    pub fn policy(&self, dir: Direction) -> &Policy {
        match dir {
            Direction::Inbound => &self.inbound,
            Direction::Outbound => &self.outbound,
        }
    }

    pub fn url_policy(&self, dir: Direction) -> &UrlPolicy {
        match dir {
            Direction::Inbound => &self.url_inbound,
            Direction::Outbound => &self.url_outbound,
        }
    }

    /// The engine options for a message of this direction.
    pub fn engine_options(&self, dir: Direction) -> engine::Options {
        let u = self.url_policy(dir);
        engine::Options {
            limits: self.limits.clone(),
            schemes: u.schemes.clone(),
            fix_signed: self.fix_signed,
            normalize_url_continuations: self.normalize_url_continuations,
            whole_url_words: !self.fold_url_words,
            octets_not_given: 0,
            rewrites: u.rewrites.clone(),
            legacy_to_url: u.legacy_to_url,
            legacy_ftp_with_login: u.legacy_ftp_with_login,
            strip_denied: u.strip_denied,
        }
    }

    /// Whether some finding could lead to this action (decides what to negotiate).
    pub fn may(&self, action: Action) -> bool {
        self.oversize_action == action
            || self.inbound.actions_used().any(|a| a == action)
            || self.outbound.actions_used().any(|a| a == action)
    }

    /// Keys a reload cannot change; the daemon warns when they differ.
    pub fn restart_only_differences(&self, new: &Config) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.socket != new.socket {
            v.push("socket");
        }
        if self.socket_mode != new.socket_mode {
            v.push("socket_mode");
        }
        if self.socket_group != new.socket_group {
            v.push("socket_group");
        }
        if self.metrics_listen != new.metrics_listen {
            v.push("metrics_listen");
        }
        if self.max_connections != new.max_connections {
            v.push("max_connections");
        }
        if self.connection_timeout != new.connection_timeout {
            v.push("connection_timeout");
        }
        if self.log_level != new.log_level || self.log_format != new.log_format {
            v.push("log_level/log_format");
        }
        v
    }
}

fn parse_ip(s: &str) -> Option<IpAddr> {
    // Sendmail writes IPv6 client addresses as `IPv6:2001:db8::1`, sometimes in brackets.
    let s = s.trim().trim_start_matches('[').trim_end_matches(']');
    let s = s
        .strip_prefix("IPv6:")
        .or_else(|| s.strip_prefix("ipv6:"))
        .unwrap_or(s);
    s.parse().ok()
}

/// Where a spilled message goes must be a directory in which the daemon can create
/// files: tried by creating (and at once dropping) a spill file there, as the daemon
/// would. `config-check` runs as the service's user, so it sees what the daemon sees.
fn check_spill_directory(p: &Path) -> Result<(), String> {
    if !p.is_absolute() {
        return Err("not an absolute path".into());
    }
    match std::fs::metadata(p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err("no such directory".into())
        }
        Err(e) => return Err(format!("cannot be read: {e}")),
        Ok(m) if !m.is_dir() => return Err("not a directory".into()),
        Ok(_) => {}
    }
    // Named like no spill file, and unlinked at once as they are.
    let probe = p.join(format!(".mimeref-milter-check-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .and_then(|_| std::fs::remove_file(&probe))
        .map_err(|e| format!("cannot create a file in it: {e}"))
}

fn whole_file(p: &Path, message: String) -> ConfigErrors {
    ConfigErrors {
        errors: vec![ConfigError {
            file: p.display().to_string(),
            line: 0,
            message,
        }],
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

struct Validator<'t> {
    text: &'t str,
    name: &'t str,
    errors: Vec<ConfigError>,
}

impl Validator<'_> {
    fn err(&mut self, span: Range<usize>, message: impl Into<String>) {
        self.errors.push(ConfigError {
            file: self.name.into(),
            line: line_of(self.text, span.start),
            message: message.into(),
        });
    }

    fn int(&mut self, v: Option<Spanned<i64>>, key: &str, min: i64, max: i64, default: i64) -> i64 {
        match v {
            None => default,
            Some(s) => {
                let n = *s.get_ref();
                if n < min || n > max {
                    self.err(
                        s.span(),
                        format!("{key} = {n}: must be between {min} and {max}"),
                    );
                    default
                } else {
                    n
                }
            }
        }
    }

    /// A `[limits]` size bounded by `max_message_size` (already validated): errors name
    /// that key and its value, the bound that applies, rather than the widest value the
    /// file format could hold. `above` says what goes wrong with a larger value.
    fn int_up_to_message_size(
        &mut self,
        v: Option<Spanned<i64>>,
        key: &str,
        min: usize,
        max_message_size: usize,
        default: usize,
        above: &str,
    ) -> usize {
        let Some(s) = v else {
            return default;
        };
        let n = *s.get_ref();
        match usize::try_from(n) {
            Ok(u) if u > max_message_size => {
                self.err(
                    s.span(),
                    format!(
                        "{key} = {n} is larger than max_message_size ({max_message_size}): {above}"
                    ),
                );
                max_message_size
            }
            Ok(u) if u >= min => u,
            _ => {
                self.err(
                    s.span(),
                    format!(
                        "{key} = {n}: must be between {min} and max_message_size ({max_message_size})"
                    ),
                );
                default
            }
        }
    }

    fn action(&mut self, v: &Spanned<String>, what: &str) -> Option<Action> {
        let a = Action::parse(v.get_ref());
        if a.is_none() {
            self.err(
                v.span(),
                format!(
                    "{what}: unknown action {:?} (ignore, report, fix, quarantine, tempfail, reject)",
                    v.get_ref()
                ),
            );
        }
        a
    }

    fn policy(
        &mut self,
        raw: Option<BTreeMap<Spanned<String>, Spanned<String>>>,
        dir: &str,
    ) -> Policy {
        let mut entries = Vec::new();
        let mut raw: Vec<_> = raw.unwrap_or_default().into_iter().collect();
        // Keep the file's order so that messages come out top to bottom.
        raw.sort_by_key(|(k, _)| k.span().start);
        for (k, v) in raw {
            let pattern = match Pattern::parse(k.get_ref()) {
                Ok(p) => Some(p),
                Err(e) => {
                    self.err(k.span(), format!("[policy.{dir}]: {e}"));
                    None
                }
            };
            let action = self.action(&v, &format!("[policy.{dir}] {:?}", k.get_ref()));
            if let (Some(p), Some(a)) = (pattern, action) {
                entries.push((p, a));
            }
        }
        Policy::new(entries)
    }

    /// A list of URL schemes, lower-cased; None when not given.
    fn scheme_list(&mut self, v: Option<Vec<Spanned<String>>>, key: &str) -> Option<Vec<String>> {
        let list = v?;
        let mut out = Vec::new();
        for s in list {
            let t = s.get_ref().to_ascii_lowercase();
            let ok = t.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
            if ok {
                out.push(t);
            } else {
                self.err(
                    s.span(),
                    format!(
                        "{key}: {:?} is not a URL scheme (RFC 3986 §3.1)",
                        s.get_ref()
                    ),
                );
            }
        }
        Some(out)
    }

    /// `[schemes.DIR]` over the `[schemes]` defaults: a key given replaces the default.
    fn url_policy(
        &mut self,
        raw: Option<raw::RawSchemesDir>,
        base: &SchemePolicy,
        strip: bool,
        dir: &str,
    ) -> UrlPolicy {
        let raw = raw.unwrap_or_default();
        let mut schemes = base.clone();
        if let Some(l) = self.scheme_list(raw.allow, &format!("[schemes.{dir}] allow")) {
            schemes.allow = l;
        }
        if let Some(l) = self.scheme_list(raw.deny, &format!("[schemes.{dir}] deny")) {
            schemes.deny = l;
        }
        UrlPolicy {
            schemes,
            strip_denied: raw.strip_denied.unwrap_or(strip),
            ..UrlPolicy::default()
        }
    }

    /// `"inbound"`, `"outbound"`, `"both"` or `"none"`, as (inbound, outbound).
    fn directions(&mut self, s: &Spanned<String>, key: &str) -> Option<(bool, bool)> {
        match s.get_ref().as_str() {
            "both" => Some((true, true)),
            "inbound" => Some((true, false)),
            "outbound" => Some((false, true)),
            "none" => Some((false, false)),
            other => {
                self.err(
                    s.span(),
                    format!(
                        "{key} {other:?}: expected \"inbound\", \"outbound\", \"both\" or \"none\""
                    ),
                );
                None
            }
        }
    }

    /// One `[[rewrite]]` table: the rule and the directions it applies to.
    fn rewrite_rule(&mut self, n: usize, r: raw::RawRewrite) -> Option<(UrlRewrite, bool, bool)> {
        // The line of the table, for messages: its first key.
        let spans = [
            r.direction.as_ref().map(|s| s.span()),
            r.scheme.as_ref().map(|s| s.span()),
            r.host.as_ref().map(|s| s.span()),
            r.host_suffix.as_ref().map(|s| s.span()),
            r.path.as_ref().map(|s| s.span()),
            r.template.as_ref().map(|s| s.span()),
        ];
        let first = spans.into_iter().flatten().min_by_key(|s| s.start);
        let line = first.as_ref().map_or(0, |s| line_of(self.text, s.start));
        let key = format!("[[rewrite]] #{n}");
        let mut ok = true;
        let (inbound, outbound) = match &r.direction {
            None => (true, true),
            Some(s) => self
                .directions(s, &format!("{key} direction"))
                .unwrap_or_else(|| {
                    ok = false;
                    (false, false)
                }),
        };
        let scheme = r.scheme.and_then(|s| {
            let l = self.scheme_list(Some(vec![s]), &format!("{key} scheme"));
            if l.as_ref().is_none_or(|l| l.is_empty()) {
                ok = false;
            }
            l.and_then(|l| l.into_iter().next())
        });
        let host = match (r.host, r.host_suffix) {
            (Some(h), Some(_)) => {
                self.err(
                    h.span(),
                    format!("{key}: give host or host_suffix, not both"),
                );
                ok = false;
                None
            }
            (Some(h), None) => self.host(h, &key, &mut ok).map(HostMatch::Exact),
            (None, Some(h)) => self.host(h, &key, &mut ok).map(HostMatch::Suffix),
            (None, None) => None,
        };
        let path = r.path.and_then(|p| match PathRegex::new(p.get_ref()) {
            Ok(re) => Some(re),
            Err(e) => {
                self.err(
                    p.span(),
                    format!("{key} path: not a regular expression: {e}"),
                );
                ok = false;
                None
            }
        });
        let template = match r.template {
            None => {
                self.errors.push(ConfigError {
                    file: self.name.into(),
                    line,
                    message: format!("{key}: template is required"),
                });
                None
            }
            Some(t) => match Template::parse(t.get_ref()) {
                Ok(t) => Some(t),
                Err(e) => {
                    self.err(t.span(), format!("{key} template {:?}: {e}", t.get_ref()));
                    None
                }
            },
        };
        let template = template?;
        if !ok {
            return None;
        }
        let rule = UrlRewrite {
            name: if line > 0 {
                format!("rewrite #{n} (line {line})")
            } else {
                format!("rewrite #{n}")
            },
            scheme,
            host,
            path,
            template,
        };
        Some((rule, inbound, outbound))
    }

    fn host(&mut self, h: Spanned<String>, key: &str, ok: &mut bool) -> Option<String> {
        let t = h.get_ref().trim_start_matches('.').to_ascii_lowercase();
        let valid = !t.is_empty()
            && t.bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'[' | b']' | b':')
            });
        if valid {
            Some(t)
        } else {
            self.err(
                h.span(),
                format!(
                    "{key}: {:?} is not a host name or [IPv6] address",
                    h.get_ref()
                ),
            );
            *ok = false;
            None
        }
    }

    fn reply(
        &mut self,
        v: Option<Spanned<String>>,
        default: &str,
        class: char,
        key: &str,
    ) -> ReplyTemplate {
        let fallback = || {
            ReplyTemplate::parse(default, class).unwrap_or(ReplyTemplate {
                code: format!("{class}50"),
                status: format!("{class}.0.0"),
                text: "MIME reference error".into(),
            })
        };
        match v {
            None => fallback(),
            Some(s) => match ReplyTemplate::parse(s.get_ref(), class) {
                Ok(r) => r,
                Err(e) => {
                    self.err(s.span(), format!("[reply] {key}: {e}"));
                    fallback()
                }
            },
        }
    }

    fn config(&mut self, raw: RawConfig) -> Config {
        let default_socket = || {
            SocketSpec::parse(DEFAULT_SOCKET).unwrap_or(SocketSpec::Inet {
                host: "127.0.0.1".into(),
                port: 7357,
            })
        };
        // As written, for the cross-field check below (also when it does not parse).
        let socket_unix = raw
            .socket
            .as_ref()
            .is_some_and(|s| s.get_ref().starts_with("unix:") || s.get_ref().starts_with("local:"));
        let socket = match raw.socket {
            None => default_socket(),
            Some(s) => SocketSpec::parse(s.get_ref()).unwrap_or_else(|e| {
                self.err(s.span(), format!("socket: {e}"));
                default_socket()
            }),
        };
        let mode_span = raw
            .socket_mode
            .as_ref()
            .map(|s| s.span())
            .or_else(|| raw.socket_group.as_ref().map(|s| s.span()));
        let socket_mode = raw.socket_mode.and_then(|s| {
            let t = s.get_ref();
            match u32::from_str_radix(t, 8) {
                Ok(m) if m <= 0o777 && !t.is_empty() => Some(m),
                _ => {
                    self.err(
                        s.span(),
                        format!("socket_mode {t:?}: expected octal permissions such as \"0660\""),
                    );
                    None
                }
            }
        });
        let socket_group = raw.socket_group.and_then(|s| {
            if s.get_ref().is_empty() {
                self.err(s.span(), "socket_group: empty group name");
                None
            } else {
                Some(s.into_inner())
            }
        });
        if (socket_mode.is_some() || socket_group.is_some()) && !socket_unix {
            // Cross-field: harmless but a sign of a misunderstanding, so say it.
            self.err(
                mode_span.unwrap_or(0..0),
                "socket_mode/socket_group only apply to a unix: socket",
            );
        }
        let log_level = match raw.log_level {
            None => "info".to_string(),
            Some(s) => {
                let l = s.get_ref().to_ascii_lowercase();
                if !["error", "warn", "info", "debug", "trace"].contains(&l.as_str()) {
                    self.err(
                        s.span(),
                        format!(
                            "log_level {:?}: expected error, warn, info, debug or trace",
                            s.get_ref()
                        ),
                    );
                }
                l
            }
        };
        let log_format = match raw.log_format {
            None => LogFormat::Text,
            Some(s) => match s.get_ref().as_str() {
                "text" => LogFormat::Text,
                "json" => LogFormat::Json,
                other => {
                    self.err(
                        s.span(),
                        format!("log_format {other:?}: expected \"text\" or \"json\""),
                    );
                    LogFormat::Text
                }
            },
        };
        let metrics_listen = raw.metrics_listen.and_then(|s| {
            if s.get_ref().is_empty() {
                return None;
            }
            match s.get_ref().parse::<SocketAddr>() {
                Ok(a) => Some(a),
                Err(_) => {
                    self.err(
                        s.span(),
                        format!(
                            "metrics_listen {:?}: expected ADDRESS:PORT, e.g. \"127.0.0.1:9357\"",
                            s.get_ref()
                        ),
                    );
                    None
                }
            }
        });
        let max_connections =
            self.int(raw.max_connections, "max_connections", 1, 100_000, 2000) as usize;
        let connection_timeout = self.int(
            raw.connection_timeout,
            "connection_timeout",
            1,
            86_400,
            7210,
        ) as u64;
        let shutdown_timeout =
            self.int(raw.shutdown_timeout, "shutdown_timeout", 0, 3600, 30) as u64;

        let trusted_networks = match raw.trusted_networks {
            None => vec!["127.0.0.0/8".parse().ok(), "::1/128".parse().ok()].into_iter().flatten().collect(),
            Some(list) => list
                .into_iter()
                .filter_map(|s| {
                    let t = s.get_ref().trim();
                    let net = t.parse::<IpNet>().ok().or_else(|| t.parse::<IpAddr>().ok().map(IpNet::from));
                    if net.is_none() {
                        self.err(s.span(), format!("trusted_networks: {t:?} is not a CIDR network (e.g. \"192.0.2.0/24\") or address"));
                    }
                    net
                })
                .collect(),
        };
        let outbound_daemons = raw
            .outbound_daemons
            .unwrap_or_default()
            .into_iter()
            .filter_map(|s| {
                if s.get_ref().is_empty()
                    || s.get_ref()
                        .chars()
                        .any(|c| c.is_control() || c.is_whitespace())
                {
                    self.err(
                        s.span(),
                        format!("outbound_daemons: {:?} is not a daemon name", s.get_ref()),
                    );
                    None
                } else {
                    Some(s.into_inner())
                }
            })
            .collect();

        let rl = raw.limits.unwrap_or_default();
        let d = Limits::default();
        let max_message_size = self.int(
            rl.max_message_size,
            "[limits] max_message_size",
            1024,
            i64::from(u32::MAX),
            d.max_message_size as i64,
        ) as usize;
        // Header fields count towards max_message_size too, so a larger value could never
        // take effect; the default steps down with a small max_message_size instead of
        // clashing with a key the admin did not write.
        let max_header_size = self.int_up_to_message_size(
            rl.max_header_size,
            "[limits] max_header_size",
            1024,
            max_message_size,
            DEFAULT_MAX_HEADER_SIZE.min(max_message_size),
            "header fields count towards max_message_size, so it would never apply; set \
             it to max_message_size to limit only the whole message",
        );
        let max_depth = self.int(
            rl.max_depth,
            "[limits] max_depth",
            1,
            // Part paths grow with depth, so their total grows with its square.
            1_000,
            d.max_depth as i64,
        ) as usize;
        let max_parts = self.int(
            rl.max_parts,
            "[limits] max_parts",
            1,
            // About 700 octets of bookkeeping per part at most: under 1 GB.
            1_000_000,
            d.max_parts as i64,
        ) as usize;
        let oversize_action = match rl.oversize_action {
            None => Action::Report,
            Some(s) => match self.action(&s, "[limits] oversize_action") {
                Some(Action::Fix) => {
                    self.err(s.span(), "[limits] oversize_action: `fix` makes no sense for a message that was not read whole");
                    Action::Report
                }
                Some(a) => a,
                None => Action::Report,
            },
        };
        // The default never exceeds a small max_message_size; a value given above it
        // could never be reached, which is a sign of a mix-up of units or keys.
        let spill_threshold = self.int_up_to_message_size(
            rl.spill_threshold,
            "[limits] spill_threshold",
            1,
            max_message_size,
            SPILL_THRESHOLD.min(max_message_size),
            "no message could reach it; set it to max_message_size to keep every message in \
             memory",
        );
        let spill_directory = match rl.spill_directory {
            None => std::env::temp_dir(),
            Some(s) => {
                let p = PathBuf::from(s.get_ref());
                if let Err(e) = check_spill_directory(&p) {
                    self.err(
                        s.span(),
                        format!("[limits] spill_directory {:?}: {e}", s.get_ref()),
                    );
                }
                p
            }
        };

        let rs = raw.schemes.unwrap_or_default();
        let mut schemes = SchemePolicy::default();
        if let Some(l) = self.scheme_list(rs.allow, "[schemes] allow") {
            schemes.allow = l;
        }
        if let Some(l) = self.scheme_list(rs.deny, "[schemes] deny") {
            schemes.deny = l;
        }
        let strip_denied = rs.strip_denied.unwrap_or(false);
        let mut url_inbound = self.url_policy(rs.inbound, &schemes, strip_denied, "inbound");
        let mut url_outbound = self.url_policy(rs.outbound, &schemes, strip_denied, "outbound");
        for (n, r) in raw.rewrite.unwrap_or_default().into_iter().enumerate() {
            if let Some((rule, inbound, outbound)) = self.rewrite_rule(n + 1, r) {
                if inbound {
                    url_inbound.rewrites.push(rule.clone());
                }
                if outbound {
                    url_outbound.rewrites.push(rule);
                }
            }
        }
        let rl = raw.legacy.unwrap_or_default();
        if let Some(s) = rl.to_url {
            if let Some((i, o)) = self.directions(&s, "[legacy] to_url") {
                url_inbound.legacy_to_url = i;
                url_outbound.legacy_to_url = o;
            }
        }
        let ftp_login = rl.ftp_with_login.unwrap_or(false);
        url_inbound.legacy_ftp_with_login = ftp_login;
        url_outbound.legacy_ftp_with_login = ftp_login;

        let rr = raw.report.unwrap_or_default();
        let header = match rr.header {
            None => DEFAULT_REPORT_HEADER.to_string(),
            Some(s) => {
                let t = s.get_ref();
                if t.is_empty() || !t.bytes().all(|b| (33..=126).contains(&b) && b != b':') {
                    self.err(s.span(), format!("[report] header {t:?}: not a header field name (printable ASCII, no colon, RFC 5322 §3.6.8)"));
                }
                s.into_inner()
            }
        };
        let report_header = rr.enabled.unwrap_or(true).then_some(header);
        let report_min_severity = match rr.min_severity {
            None => Severity::Warning,
            Some(s) => match Severity::parse(s.get_ref()) {
                Some(v) => v,
                None => {
                    self.err(
                        s.span(),
                        format!(
                            "[report] min_severity {:?}: expected \"info\", \"warning\" or \"error\"",
                            s.get_ref()
                        ),
                    );
                    Severity::Warning
                }
            },
        };

        let rp = raw.reply.unwrap_or_default();
        let reject_reply = self.reply(rp.reject, DEFAULT_REJECT_REPLY, '5', "reject");
        let tempfail_reply = self.reply(rp.tempfail, DEFAULT_TEMPFAIL_REPLY, '4', "tempfail");
        let quarantine_reason = match rp.quarantine {
            None => DEFAULT_QUARANTINE_REASON.to_string(),
            Some(s) => {
                if s.get_ref().trim().is_empty() {
                    self.err(s.span(), "[reply] quarantine: empty reason");
                } else if let Err(e) = check_printable(s.get_ref()) {
                    self.err(s.span(), format!("[reply] quarantine: {e}"));
                }
                s.into_inner()
            }
        };

        let rpol = raw.policy.unwrap_or_default();
        let inbound = self.policy(rpol.inbound, "inbound");
        let outbound = self.policy(rpol.outbound, "outbound");

        Config {
            origin: None,
            file: None,
            socket,
            socket_mode,
            socket_group,
            dry_run: raw.dry_run.unwrap_or(false),
            dry_run_forced: false,
            log_level,
            log_format,
            metrics_listen,
            max_connections,
            connection_timeout: Duration::from_secs(connection_timeout),
            shutdown_timeout: Duration::from_secs(shutdown_timeout),
            trusted_networks,
            outbound_daemons,
            fix_signed: raw.fix_signed.unwrap_or(false),
            normalize_url_continuations: raw.normalize_url_continuations.unwrap_or(false),
            fold_url_words: raw.fold_url_words.unwrap_or(true),
            no_reply_stages: raw.no_reply_stages.unwrap_or(true),
            limits: Limits {
                max_depth,
                max_parts,
                max_message_size,
            },
            max_header_size,
            oversize_action,
            spill_threshold,
            spill_directory,
            schemes,
            url_inbound,
            url_outbound,
            report_header,
            report_always: rr.always.unwrap_or(false),
            remove_forged: rr.remove_forged.unwrap_or(true),
            report_min_severity,
            reject_reply,
            tempfail_reply,
            quarantine_reason,
            inbound,
            outbound,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Rule;

    fn errs(text: &str) -> Vec<String> {
        match Config::parse(text, "t.toml") {
            Ok(_) => Vec::new(),
            Err(e) => e.errors.iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn builtin_defaults() {
        let c = Config::builtin();
        assert_eq!(c.socket.to_string(), DEFAULT_SOCKET);
        assert_eq!(c.limits.max_message_size, 64 * 1024 * 1024);
        assert_eq!(c.report_header.as_deref(), Some("X-MIMERef"));
        assert_eq!(c.oversize_action, Action::Report);
        assert_eq!(c.inbound.action(Rule::RelatedCidDuplicate), Action::Fix);
        assert!(!c.may(Action::Reject));
        assert_eq!(c.reject_reply.code, "550");
        assert_eq!(c.reject_reply.status, "5.6.0");
    }

    #[test]
    fn spill_and_no_reply_defaults() {
        let c = Config::builtin();
        assert!(c.no_reply_stages);
        assert_eq!(c.spill_threshold, 4 << 20);
        assert_eq!(c.spill_directory, std::env::temp_dir());
        // A small max_message_size lowers the default threshold and header limit instead
        // of clashing with keys the file does not have.
        let c = Config::parse("[limits]\nmax_message_size = 100000\n", "t")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.spill_threshold, 100000);
        assert_eq!(c.max_header_size, 100000);
        let c = Config::parse(
            "no_reply_stages = false\n[limits]\nspill_threshold = 5000\n",
            "t",
        )
        .unwrap();
        assert!(!c.no_reply_stages);
        assert_eq!(c.spill_threshold, 5000);
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
        assert_eq!((c.max_header_size, c.spill_threshold), (1024, 1024));
    }

    #[test]
    fn unknown_key_names_the_line() {
        let e = errs("socket = \"inet:127.0.0.1:1\"\n\n[limits]\nmax_mesage_size = 10\n");
        assert_eq!(e.len(), 1);
        assert!(e[0].starts_with("t.toml:4: "), "{e:?}");
        assert!(e[0].contains("max_mesage_size"), "{e:?}");
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
        assert_eq!(c.direction(&m(&[]), None), Direction::Inbound);
        assert_eq!(
            c.direction(&m(&[("{auth_authen}", "alice")]), None),
            Direction::Outbound
        );
        assert_eq!(
            c.direction(&m(&[("{auth_type}", "PLAIN")]), None),
            Direction::Outbound
        );
        assert_eq!(
            c.direction(&m(&[("{auth_authen}", "")]), None),
            Direction::Inbound
        );
        assert_eq!(
            c.direction(&m(&[]), Some("192.0.2.7".parse().unwrap())),
            Direction::Outbound
        );
        // Loopback is no longer trusted once the list is given.
        assert_eq!(
            c.direction(&m(&[]), Some("127.0.0.1".parse().unwrap())),
            Direction::Inbound
        );
        assert_eq!(
            c.direction(&m(&[("{client_addr}", "192.0.2.9")]), None),
            Direction::Outbound
        );
        assert_eq!(
            c.direction(&m(&[("{daemon_name}", "submission")]), None),
            Direction::Outbound
        );
        assert_eq!(
            c.direction(&m(&[("{daemon_name}", "smtpd")]), None),
            Direction::Inbound
        );
        assert_eq!(c.inbound.action(Rule::RelatedCidDuplicate), Action::Reject);
        assert_eq!(c.outbound.action(Rule::RelatedCidDuplicate), Action::Report);
        assert!(c.may(Action::Reject));
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
        let has =
            |line: &str, what: &str| e.iter().any(|l| l.starts_with(line) && l.contains(what));
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
                assert_eq!(sample.policy(d).action(r), builtin.policy(d).action(r));
            }
        }
        assert_eq!(sample.report_min_severity, builtin.report_min_severity);
        assert_eq!(sample.fold_url_words, builtin.fold_url_words);
    }

    #[test]
    fn report_threshold_and_url_form() {
        let c = Config::builtin();
        assert_eq!(c.report_min_severity, Severity::Warning);
        assert!(c.fold_url_words);
        assert!(!c.engine_options(Direction::Inbound).whole_url_words);
        let c = Config::parse(
            "fold_url_words = false\n[report]\nmin_severity = \"info\"\n",
            "t",
        )
        .unwrap();
        assert_eq!(c.report_min_severity, Severity::Info);
        assert!(c.engine_options(Direction::Outbound).whole_url_words);
        assert_eq!(
            errs("[report]\nmin_severity = \"notice\"\n"),
            vec![
                "t.toml:2: [report] min_severity \"notice\": expected \"info\", \"warning\" or \"error\""
            ]
        );
        assert_eq!(
            Config::parse("[policy.inbound]\n\"*\" = \"log\"\n", "t")
                .unwrap()
                .inbound
                .action(Rule::RelatedRefDangling),
            Action::Log
        );
    }
}
