//! Validation of a configuration as written ([`RawConfig`]) into a [`Config`]: one step
//! per section, each giving that section's type. Every error names the file and line.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ipnet::IpNet;
use toml::Spanned;

use super::raw::{self, RawConfig};
use super::*;
use crate::engine::{HostMatch, PathRegex, SchemePolicy, Severity, Template, UrlRewrite};
use crate::policy::plan::{check_printable, ReplyTemplate};
use crate::policy::scope::{self, Address, Effect, HeaderMatch, Matcher, Overrides, Scope, Scopes};
use crate::policy::{Pattern, Policy};

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
    super::spill_file(p)
        .map(drop)
        .map_err(|e| format!("cannot create a file in it: {e}"))
}

pub(super) fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

pub(super) struct Validator<'t> {
    pub(super) text: &'t str,
    pub(super) name: &'t str,
    pub(super) errors: Vec<ConfigError>,
    pub(super) warnings: Vec<(&'static str, ConfigError)>,
}

impl Validator<'_> {
    fn err(&mut self, span: Range<usize>, message: impl Into<String>) {
        self.errors.push(ConfigError {
            file: self.name.into(),
            line: line_of(self.text, span.start),
            message: message.into(),
        });
    }

    fn warn(&mut self, key: &'static str, span: Range<usize>, message: impl Into<String>) {
        let at = ConfigError {
            file: self.name.into(),
            line: line_of(self.text, span.start),
            message: message.into(),
        };
        self.warnings.push((key, at));
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
            // From the list itself, so that no action can be left out of the message.
            let valid: Vec<&str> = Action::ALL.iter().map(|a| a.as_str()).collect();
            self.err(
                v.span(),
                format!(
                    "{what}: unknown action {:?} ({})",
                    v.get_ref(),
                    valid.join(", ")
                ),
            );
        }
        a
    }

    fn policy(
        &mut self,
        raw: Option<BTreeMap<Spanned<String>, Spanned<String>>>,
        direction: Direction,
    ) -> Policy {
        let table = format!("[policy.{}]", direction.as_str());
        Policy::new(direction, self.policy_entries(raw, &table))
    }

    /// A table of rule patterns and actions; `table` names it in messages.
    fn policy_entries(
        &mut self,
        raw: Option<BTreeMap<Spanned<String>, Spanned<String>>>,
        table: &str,
    ) -> Vec<(Pattern, Action)> {
        let mut entries = Vec::new();
        let mut raw: Vec<_> = raw.unwrap_or_default().into_iter().collect();
        // Keep the file's order so that messages come out top to bottom.
        raw.sort_by_key(|(k, _)| k.span().start);
        for (k, v) in raw {
            let pattern = match Pattern::parse(k.get_ref()) {
                Ok(p) => Some(p),
                Err(e) => {
                    self.err(k.span(), format!("{table}: {e}"));
                    None
                }
            };
            let action = self.action(&v, &format!("{table} {:?}", k.get_ref()));
            if let (Some(p), Some(a)) = (pattern, action) {
                entries.push((p, a));
            }
        }
        entries
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
    fn direction_set(&mut self, s: &Spanned<String>, key: &str) -> Option<(bool, bool)> {
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
                .direction_set(s, &format!("{key} direction"))
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

    /// The whole configuration, section by section.
    pub(super) fn config(&mut self, mut raw: RawConfig) -> Config {
        let listen = self.listen(&mut raw);
        let process = self.process(&mut raw);
        let service = self.service(&mut raw);
        let directions = self.directions(&mut raw);
        let (limits, oversize_action) = self.limits(raw.limits.take().unwrap_or_default());
        let fixes = Fixes {
            fix_signed: raw.fix_signed.unwrap_or(false),
            normalize_url_continuations: raw.normalize_url_continuations.unwrap_or(false),
            fold_url_words: raw.fold_url_words.unwrap_or(false),
        };
        let urls = self.urls(&mut raw);
        let report = self.report(raw.report.take().unwrap_or_default());
        let replies = self.replies(raw.reply.take().unwrap_or_default());
        let rpol = raw.policy.take().unwrap_or_default();
        let inbound = self.policy(rpol.inbound, Direction::Inbound);
        let outbound = self.policy(rpol.outbound, Direction::Outbound);
        let scopes = self.scopes(
            raw.scope.take(),
            (&inbound, &outbound),
            &directions,
            &report,
        );
        let policy = Policies {
            inbound,
            outbound,
            oversize_action,
            scopes,
        };
        Config {
            file: None,
            listen,
            process,
            service,
            directions,
            policy,
            limits,
            fixes,
            urls,
            report,
            replies,
            warnings: Vec::new(),
        }
    }

    /// Restart-only: `socket`, `socket_mode`, `socket_group`, `metrics_listen`,
    /// `metrics_max_connections`, `max_connections`, `connection_timeout`.
    fn listen(&mut self, raw: &mut RawConfig) -> Listen {
        let default_socket = || {
            SocketSpec::parse(DEFAULT_SOCKET).unwrap_or(SocketSpec::Inet {
                host: "127.0.0.1".into(),
                port: 8897,
            })
        };
        // As written, for the cross-field check below (also when it does not parse).
        let socket_unix = raw
            .socket
            .as_ref()
            .is_some_and(|s| s.get_ref().starts_with("unix:") || s.get_ref().starts_with("local:"));
        let socket = self
            .socket(raw.socket.as_ref())
            .unwrap_or_else(default_socket);
        let socket_span = raw.socket.as_ref().map(|s| s.span());
        let group_span = raw.socket_group.as_ref().map(|s| s.span());
        let mode_span = raw
            .socket_mode
            .as_ref()
            .map(|s| s.span())
            .or(group_span.clone());
        let socket_mode = raw.socket_mode.take().and_then(|s| self.socket_mode(s));
        let socket_group = raw.socket_group.take().and_then(|s| {
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
                mode_span.clone().unwrap_or(0..0),
                "socket_mode/socket_group only apply to a unix: socket",
            );
        }
        if let (SocketSpec::Unix(path), Some(group)) = (&socket, &socket_group) {
            use super::socket_access::{check, Key};
            for (key, problem) in check(path, group, socket_mode) {
                let span = match key {
                    Key::Socket => socket_span.clone(),
                    Key::SocketMode => mode_span.clone(),
                    Key::SocketGroup => group_span.clone(),
                };
                self.err(span.unwrap_or(0..0), problem);
            }
        }
        let metrics_listen = raw
            .metrics_listen
            .take()
            .and_then(|s| self.metrics_listen(s));
        let metrics_max_connections = self.int(
            raw.metrics_max_connections.take(),
            "metrics_max_connections",
            1,
            10_000,
            32,
        ) as usize;
        let max_connections = self.int(
            raw.max_connections.take(),
            "max_connections",
            1,
            100_000,
            2000,
        ) as usize;
        let connection_timeout = self.int(
            raw.connection_timeout.take(),
            "connection_timeout",
            1,
            86_400,
            7210,
        ) as u64;
        // From MAIL FROM to end of message. Postfix and Sendmail pass the message on
        // only once the SMTP client has sent all of it, so this takes in the whole
        // DATA phase over the client's link: an hour, Sendmail's Timeout.datablock,
        // lets 60 MB through at 133 kbit/s.
        let transaction_timeout = self.int(
            raw.transaction_timeout.take(),
            "transaction_timeout",
            1,
            86_400,
            3600,
        ) as u64;
        // Postfix waits milter_content_timeout (300 s) for the answer to end of
        // message: past that, nobody reads what is still to be written.
        let reply_timeout =
            self.int(raw.reply_timeout.take(), "reply_timeout", 1, 86_400, 300) as u64;
        Listen {
            socket,
            socket_mode,
            socket_group,
            metrics_listen,
            metrics_max_connections,
            max_connections,
            connection_timeout: Duration::from_secs(connection_timeout),
            transaction_timeout: Duration::from_secs(transaction_timeout),
            reply_timeout: Duration::from_secs(reply_timeout),
        }
    }

    /// `socket`: the specification, None when it does not parse (the error recorded).
    fn socket(&mut self, s: Option<&Spanned<String>>) -> Option<SocketSpec> {
        let s = s?;
        match SocketSpec::parse(s.get_ref()) {
            Ok(spec) => {
                if let Some(w) = spec.exposure() {
                    self.warn("socket", s.span(), w);
                }
                Some(spec)
            }
            Err(e) => {
                self.err(s.span(), format!("socket: {e}"));
                None
            }
        }
    }

    /// `socket_mode`: octal permissions; a mode that lets every local user in is
    /// allowed with a warning.
    fn socket_mode(&mut self, s: Spanned<String>) -> Option<u32> {
        let t = s.get_ref();
        match u32::from_str_radix(t, 8) {
            Ok(m) if m <= 0o777 && !t.is_empty() => {
                if m & 0o002 != 0 {
                    self.warn(
                        "socket_mode",
                        s.span(),
                        format!(
                            "socket_mode {t:?}: every local user can connect to the milter \
                             socket and hold its connections; use \"0660\" with \
                             socket_group = \"postfix\""
                        ),
                    );
                }
                Some(m)
            }
            _ => {
                self.err(
                    s.span(),
                    format!("socket_mode {t:?}: expected octal permissions such as \"0660\""),
                );
                None
            }
        }
    }

    /// `metrics_listen`: ADDRESS:PORT; empty means off.
    fn metrics_listen(&mut self, s: Spanned<String>) -> Option<SocketAddr> {
        if s.get_ref().is_empty() {
            return None;
        }
        match s.get_ref().parse::<SocketAddr>() {
            Ok(a) => {
                if let Some(w) = metrics_exposure(&a) {
                    self.warn("metrics_listen", s.span(), w);
                }
                Some(a)
            }
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
    }

    /// Restart-only: `log_level`, `log_format`, `log_target`, `syslog_socket`,
    /// `syslog_facility`.
    fn process(&mut self, raw: &mut RawConfig) -> Process {
        let log_level = match raw.log_level.take() {
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
        let log_format = match raw.log_format.take() {
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
        let target = raw.log_target.take();
        let socket = raw.syslog_socket.take();
        let facility = raw.syslog_facility.take();
        let facility = match &facility {
            None => 2,
            Some(f) => match SYSLOG_FACILITIES.iter().find(|(n, _)| *n == f.get_ref()) {
                Some((_, code)) => *code,
                None => {
                    let names: Vec<&str> = SYSLOG_FACILITIES.iter().map(|(n, _)| *n).collect();
                    self.err(
                        f.span(),
                        format!(
                            "syslog_facility {:?}: expected one of {}",
                            f.get_ref(),
                            names.join(", ")
                        ),
                    );
                    2
                }
            },
        };
        let socket = match socket {
            None => PathBuf::from(DEFAULT_SYSLOG_SOCKET),
            Some(s) => {
                if !Path::new(s.get_ref()).is_absolute() {
                    self.err(
                        s.span(),
                        format!("syslog_socket {:?}: not an absolute path", s.get_ref()),
                    );
                }
                PathBuf::from(s.into_inner())
            }
        };
        let log_target = match target.as_ref().map(|t| t.get_ref().as_str()) {
            None | Some("stderr") => LogTarget::Stderr,
            Some("syslog") => LogTarget::Syslog { socket, facility },
            Some(other) => {
                self.err(
                    target.as_ref().map_or(0..0, |t| t.span()),
                    format!("log_target {other:?}: expected \"stderr\" or \"syslog\""),
                );
                LogTarget::Stderr
            }
        };
        Process {
            log_level,
            log_format,
            log_target,
        }
    }

    /// `dry_run`, `shutdown_timeout`, `no_reply_stages`, `internal_error_action`.
    fn service(&mut self, raw: &mut RawConfig) -> Service {
        let shutdown_timeout =
            self.int(raw.shutdown_timeout.take(), "shutdown_timeout", 0, 3600, 30) as u64;
        let internal_error_action = match raw.internal_error_action.take() {
            None => InternalErrorAction::Tempfail,
            Some(s) => match s.get_ref().as_str() {
                "tempfail" => InternalErrorAction::Tempfail,
                "accept" => InternalErrorAction::Accept,
                other => {
                    self.err(
                        s.span(),
                        format!(
                            "internal_error_action {other:?}: expected \"tempfail\" or \"accept\""
                        ),
                    );
                    InternalErrorAction::Tempfail
                }
            },
        };
        Service {
            dry_run: raw.dry_run.unwrap_or(false),
            dry_run_forced: false,
            shutdown_timeout: Duration::from_secs(shutdown_timeout),
            no_reply_stages: raw.no_reply_stages.unwrap_or(true),
            internal_error_action,
        }
    }

    /// `trusted_networks`, `outbound_daemons`.
    fn directions(&mut self, raw: &mut RawConfig) -> Directions {
        let trusted_networks = match raw.trusted_networks.take() {
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
            .take()
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
        Directions {
            trusted_networks,
            outbound_daemons,
        }
    }

    /// `[limits]`, with `oversize_action` apart (it goes to the policies).
    fn limits(&mut self, rl: raw::RawLimits) -> (Limits, Action) {
        let d = crate::engine::Limits::default();
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
        let memory_budget = self.int(
            rl.memory_budget,
            "[limits] memory_budget",
            1,
            // 1 TiB: beyond any host this runs on, and far from overflowing a count.
            1 << 40,
            DEFAULT_MEMORY_BUDGET as i64,
        ) as usize;
        let limits = Limits {
            max_message_size,
            max_depth,
            max_parts,
            max_header_size,
            spill_threshold,
            spill_in_memory: super::spill::in_memory(&spill_directory),
            spill_directory,
            memory_budget,
        };
        (limits, oversize_action)
    }

    /// `[schemes]`, `[schemes.inbound]`, `[schemes.outbound]`, `[[rewrite]]`, `[legacy]`.
    fn urls(&mut self, raw: &mut RawConfig) -> Urls {
        let rs = raw.schemes.take().unwrap_or_default();
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
        for (n, r) in raw
            .rewrite
            .take()
            .unwrap_or_default()
            .into_iter()
            .enumerate()
        {
            if let Some((rule, inbound, outbound)) = self.rewrite_rule(n + 1, r) {
                if inbound {
                    url_inbound.rewrites.push(rule.clone());
                }
                if outbound {
                    url_outbound.rewrites.push(rule);
                }
            }
        }
        let rl = raw.legacy.take().unwrap_or_default();
        if let Some(s) = rl.to_url {
            if let Some((i, o)) = self.direction_set(&s, "[legacy] to_url") {
                url_inbound.legacy_to_url = i;
                url_outbound.legacy_to_url = o;
            }
        }
        let ftp_login = rl.ftp_with_login.unwrap_or(false);
        url_inbound.legacy_ftp_with_login = ftp_login;
        url_outbound.legacy_ftp_with_login = ftp_login;
        Urls {
            inbound: url_inbound,
            outbound: url_outbound,
        }
    }

    /// The `[[scope]]` tables, in file order, each over the direction policies `base`.
    fn scopes(
        &mut self,
        raw: Option<Vec<raw::RawScope>>,
        base: (&Policy, &Policy),
        directions: &Directions,
        report: &Report,
    ) -> Scopes {
        let mut list: Vec<Scope> = Vec::new();
        let mut lines: BTreeMap<String, usize> = BTreeMap::new();
        for (n, r) in raw.unwrap_or_default().into_iter().enumerate() {
            let Some(s) = self.scope(n + 1, r, base, report) else {
                continue;
            };
            if let Some(first) = lines.get(&s.name) {
                self.errors.push(ConfigError {
                    file: self.name.into(),
                    line: s.line,
                    message: format!(
                        "[[scope]] name {:?} is already used at line {first}: metrics and \
                         log lines could not tell them apart",
                        s.name
                    ),
                });
            } else {
                lines.insert(s.name.clone(), s.line);
            }
            if let Some(why) = scope::never_matches(&s, &list, &directions.trusted_networks) {
                self.errors.push(ConfigError {
                    file: self.name.into(),
                    line: s.line,
                    message: format!("[[scope]] {:?} can never match: {why}", s.name),
                });
            }
            list.push(s);
        }
        Scopes::new(list)
    }

    /// One `[[scope]]` table; None when it has errors (each recorded).
    fn scope(
        &mut self,
        n: usize,
        r: raw::RawScope,
        base: (&Policy, &Policy),
        report: &Report,
    ) -> Option<Scope> {
        let at = scope_position(&r);
        let line = at.as_ref().map_or(0, |s| line_of(self.text, s.start));
        let at = at.unwrap_or(0..0);
        let mut ok = true;
        let name = self.scope_name(n, r.name.as_ref(), &at, &mut ok);
        let key = match &r.name {
            Some(_) => format!("[[scope]] {name:?}"),
            None => format!("[[scope]] {name}"),
        };
        let (inbound, outbound) = self.scope_direction(r.direction.as_ref(), &key, &mut ok);
        let raw::RawScope {
            recipients,
            senders,
            client_networks,
            sasl_logins,
            header,
            exempt,
            fix_signed,
            policy,
            report: scope_report,
            ..
        } = r;
        let matcher = Matcher {
            recipients: self.scope_list(recipients, &key, "recipients", &mut ok, Address::parse),
            senders: self.scope_list(senders, &key, "senders", &mut ok, Address::parse),
            client_networks: self.scope_list(
                client_networks,
                &key,
                "client_networks",
                &mut ok,
                parse_network,
            ),
            sasl_logins: self.scope_list(sasl_logins, &key, "sasl_logins", &mut ok, parse_login),
            header: self.scope_header(header, &key, &mut ok),
        };
        if ok && matcher == Matcher::default() {
            self.err(
                at.clone(),
                format!(
                    "{key}: give at least one of recipients, senders, client_networks, \
                     sasl_logins or header (for all mail of a direction use [policy.*])"
                ),
            );
            ok = false;
        }
        let effect = match exempt {
            Some(e) => {
                let overrides_given =
                    policy.is_some() || fix_signed.is_some() || scope_report.is_some();
                self.scope_exempt(e, overrides_given, &key, &mut ok)
            }
            None if policy.is_none() && fix_signed.is_none() && scope_report.is_none() => {
                self.err(
                    at,
                    format!(
                        "{key} changes nothing: give exempt, or [scope.policy], fix_signed or \
                         [scope.report]"
                    ),
                );
                None
            }
            None => {
                let entries = self.policy_entries(policy, &format!("{key} policy"));
                let (report_on, always, min_severity) =
                    self.scope_report(scope_report, &key, report);
                Some(Effect::Override(Box::new(Overrides {
                    inbound: Policy::layered(base.0, entries.clone()),
                    outbound: Policy::layered(base.1, entries),
                    fix_signed: fix_signed.map(|f| *f.get_ref()),
                    report: report_on,
                    always,
                    min_severity,
                })))
            }
        };
        let effect = effect?;
        if !ok {
            return None;
        }
        Some(Scope {
            name,
            line,
            inbound,
            outbound,
            matcher,
            effect,
        })
    }

    /// A scope's `name`: required, short, and not the name of the direction's own policy.
    fn scope_name(
        &mut self,
        n: usize,
        name: Option<&Spanned<String>>,
        at: &Range<usize>,
        ok: &mut bool,
    ) -> String {
        let Some(s) = name else {
            self.err(
                at.clone(),
                format!("[[scope]] #{n}: name is required (metrics and log lines show it)"),
            );
            *ok = false;
            return format!("#{n}");
        };
        let t = s.get_ref();
        let valid = !t.is_empty()
            && t.len() <= 64
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !valid {
            self.err(
                s.span(),
                format!("[[scope]] name {t:?}: 1 to 64 letters, digits, '-', '_' or '.'"),
            );
            *ok = false;
        } else if t == scope::DEFAULT_NAME {
            self.err(
                s.span(),
                format!(
                    "[[scope]] name {t:?} is reserved: metrics and log lines name the \
                     direction's own policy so"
                ),
            );
            *ok = false;
        }
        t.clone()
    }

    /// A scope's `direction`: (inbound, outbound); both when not given.
    fn scope_direction(
        &mut self,
        direction: Option<&Spanned<String>>,
        key: &str,
        ok: &mut bool,
    ) -> (bool, bool) {
        match direction {
            None => (true, true),
            Some(s) if s.get_ref() == "none" => {
                self.err(
                    s.span(),
                    format!("{key} direction \"none\": the scope could never match"),
                );
                *ok = false;
                (false, false)
            }
            Some(s) => self
                .direction_set(s, &format!("{key} direction"))
                .unwrap_or_else(|| {
                    *ok = false;
                    (true, true)
                }),
        }
    }

    /// A scope's `header = { name, pattern }`.
    fn scope_header(
        &mut self,
        header: Option<Spanned<raw::RawScopeHeader>>,
        key: &str,
        ok: &mut bool,
    ) -> Option<HeaderMatch> {
        let h = header?;
        let span = h.span();
        let h = h.into_inner();
        let pattern = h.pattern.as_ref().map(|p| p.get_ref().as_str());
        match HeaderMatch::new(h.name.get_ref(), pattern) {
            Ok(m) => Some(m),
            Err(e) => {
                let at = if e.starts_with("pattern") {
                    h.pattern.as_ref().map_or(span, |p| p.span())
                } else {
                    h.name.span()
                };
                self.err(at, format!("{key} header: {e}"));
                *ok = false;
                None
            }
        }
    }

    /// A scope's `exempt`: the cap on every finding's action. Nothing else may be
    /// given beside it.
    fn scope_exempt(
        &mut self,
        e: Spanned<String>,
        overrides_given: bool,
        key: &str,
        ok: &mut bool,
    ) -> Option<Effect> {
        let cap = match e.get_ref().as_str() {
            "ignore" => Some(Action::Ignore),
            "log" => Some(Action::Log),
            other => {
                self.err(
                    e.span(),
                    format!("{key} exempt {other:?}: expected \"ignore\" or \"log\""),
                );
                None
            }
        };
        if overrides_given {
            self.err(
                e.span(),
                format!(
                    "{key}: exempt sets every finding aside; it cannot be combined \
                     with policy, fix_signed or report"
                ),
            );
            *ok = false;
        }
        cap.map(Effect::Exempt)
    }

    /// A scope's `[scope.report]`: (enabled, always, min_severity), each None when not
    /// given.
    fn scope_report(
        &mut self,
        scope_report: Option<Spanned<raw::RawScopeReport>>,
        key: &str,
        report: &Report,
    ) -> (Option<bool>, Option<bool>, Option<Severity>) {
        let Some(rr) = scope_report else {
            return (None, None, None);
        };
        let rr = rr.into_inner();
        let on = rr.enabled.map(|e| {
            if *e.get_ref() && report.header.is_none() {
                self.err(
                    e.span(),
                    format!(
                        "{key} report enabled = true needs [report] enabled = \
                         true (the header is named there)"
                    ),
                );
            }
            *e.get_ref()
        });
        let sev = rr.min_severity.and_then(|s| {
            let v = Severity::parse(s.get_ref());
            if v.is_none() {
                self.err(
                    s.span(),
                    format!(
                        "{key} report min_severity {:?}: expected \"info\", \
                         \"warning\" or \"error\"",
                        s.get_ref()
                    ),
                );
            }
            v
        });
        (on, rr.always, sev)
    }

    /// A list key of a scope: every entry parsed by `parse`; an empty list matches
    /// nothing, so it is an error rather than a scope that silently never applies.
    fn scope_list<T>(
        &mut self,
        v: Option<Spanned<Vec<Spanned<String>>>>,
        key: &str,
        list: &str,
        ok: &mut bool,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Option<Vec<T>> {
        let v = v?;
        if v.get_ref().is_empty() {
            self.err(
                v.span(),
                format!("{key} {list} is empty: the scope could never match"),
            );
            *ok = false;
            return None;
        }
        let mut out = Vec::new();
        for s in v.into_inner() {
            match parse(s.get_ref()) {
                Ok(t) => out.push(t),
                Err(e) => {
                    self.err(s.span(), format!("{key} {list}: {e}"));
                    *ok = false;
                }
            }
        }
        Some(out)
    }

    /// `[report]`.
    fn report(&mut self, rr: raw::RawReport) -> Report {
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
        Report {
            header: report_header,
            always: rr.always.unwrap_or(false),
            remove_forged: rr.remove_forged.unwrap_or(true),
            min_severity: report_min_severity,
            redact_urls: rr.redact_urls.unwrap_or(true),
        }
    }

    /// `[reply]`.
    fn replies(&mut self, rp: raw::RawReply) -> Replies {
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
        Replies {
            reject: reject_reply,
            tempfail: tempfail_reply,
            quarantine: quarantine_reason,
        }
    }
}

/// Where a `[[scope]]` table is, for messages about it as a whole: its name, else its
/// first key.
fn scope_position(r: &raw::RawScope) -> Option<Range<usize>> {
    let spans = [
        r.name.as_ref().map(|s| s.span()),
        r.direction.as_ref().map(|s| s.span()),
        r.recipients.as_ref().map(|s| s.span()),
        r.senders.as_ref().map(|s| s.span()),
        r.client_networks.as_ref().map(|s| s.span()),
        r.sasl_logins.as_ref().map(|s| s.span()),
        r.header.as_ref().map(|s| s.span()),
        r.exempt.as_ref().map(|s| s.span()),
        r.fix_signed.as_ref().map(|s| s.span()),
        r.report.as_ref().map(|s| s.span()),
    ];
    r.name.as_ref().map(|s| s.span()).or_else(|| {
        spans
            .iter()
            .flatten()
            .min_by_key(|s| s.start)
            .cloned()
            .or_else(|| {
                r.policy
                    .as_ref()
                    .and_then(|p| p.keys().map(|k| k.span()).min_by_key(|s| s.start))
            })
    })
}

/// A `client_networks` entry: a CIDR network, or an address (its /32 or /128).
fn parse_network(t: &str) -> Result<IpNet, String> {
    let t = t.trim();
    t.parse::<IpNet>()
        .ok()
        .or_else(|| t.parse::<IpAddr>().ok().map(IpNet::from))
        .map(|n| n.trunc())
        .ok_or_else(|| format!("{t:?} is not a CIDR network (e.g. \"192.0.2.0/24\") or address"))
}

/// A `sasl_logins` entry, compared without case.
fn parse_login(t: &str) -> Result<String, String> {
    if t.is_empty() || t.chars().any(|c| c.is_control() || c.is_whitespace()) {
        Err(format!("{t:?} is not a SASL login name"))
    } else {
        Ok(t.to_lowercase())
    }
}
