//! Configuration: read in two phases, `raw` (the TOML as written, every key optional,
//! unknown keys refused) and `validate/` (defaults, value checks, cross-field checks,
//! one file per section, listed in its `mod.rs`). Every error names the file and line.
//! Beside them: `recover` (the line of a TOML error), `socket` (the socket
//! specification, and [`SocketSpecError`], why one does not parse), `socket_access`
//! (the unix socket's group and mode), `spill` (the spill directory), `dump` (the
//! configuration in force written back as TOML, for `config-dump`; its tests in
//! `dump/tests.rs`). Reloading the
//! file is the daemon's (`daemon/reload.rs`); [`Config::keep_restart_only`] is what a
//! reload keeps. Its tests are in `tests.rs`.
//!
//! [`Config`] is grouped by when a key takes effect. [`Listen`] and [`Process`] are
//! restart-only: a reload keeps their running values ([`Config::keep_restart_only`]).
//! Every other section ([`Service`], `Directions`, `Policies`, [`Limits`], [`Fixes`],
//! [`Urls`], `Report`, `Replies`) takes effect for the connections opened after a
//! reload. The sections the planner needs are the policy layer's own types.
//!
//! Its sections are private: a configuration is only ever made by validating a file,
//! so what the daemon runs with is what `config-check` passed. Callers ask it through
//! methods; those public to tests and fuzz targets hand out only types the crate
//! re-exports ([`Listen`], [`Limits`], [`Report`], [`Replies`]), the rest are for the
//! milter, the daemon and the CLI inside the crate.
//!
//! The configuration uses only the engine and the policy (the layers: `lib.rs`).

mod dump;
mod raw;
mod recover;
mod socket;
mod socket_access;
mod spill;
mod validate;

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::engine::{self, FixSigned, SchemePolicy, UrlRewrite};
use crate::policy::intake::{self, AsReceived, Intake};
use crate::policy::plan::Planner;
use crate::policy::scope::Envelope;
// `[report]` and `[reply]` are the policy layer's own types; re-exported so that what
// `Config::report` and `Config::replies` hand out can be named outside the crate.
pub use crate::policy::plan::{Replies, ReplyTemplate};
pub use crate::policy::report::Report;
use crate::policy::{Direction, Directions, Policies};
pub use dump::DumpOptions;
use raw::RawConfig;
pub use socket::{SocketSpec, SocketSpecError};
pub use socket_access::{group_id, socket_has_group};
pub use spill::spill_file;
use validate::line_of;

/// Where the daemon looks when no `--config` was given.
pub const DEFAULT_PATH: &str = "/etc/mimeref-milter/mimeref-milter.toml";
/// A port no other milter takes by default: 7357, this daemon's first default, is
/// clamav-milter's (its sample configuration and the official ClamAV image), and
/// OpenDKIM (8891), dkimpy-milter and OpenDMARC (8892, 8893), OpenARC's usual 8894,
/// rspamd (9900, 11332) and authentication_milter (12345) take others. 8897 is
/// unassigned in IANA's registry. `tests::default_port_is_no_peers` keeps it so.
pub const DEFAULT_SOCKET: &str = "inet:127.0.0.1:8897";
// The planner's own defaults: the policy layer keeps them, the file overrides them.
pub use crate::policy::plan::{
    DEFAULT_QUARANTINE_REASON, DEFAULT_REJECT_REPLY, DEFAULT_TEMPFAIL_REPLY,
};
pub use crate::policy::report::DEFAULT_REPORT_HEADER;
/// `[limits] spill_threshold` when not given (or `max_message_size` if smaller).
pub const SPILL_THRESHOLD: usize = 4 << 20;
/// `[limits] max_header_size` when not given (or `max_message_size` if smaller).
pub const DEFAULT_MAX_HEADER_SIZE: usize = 1 << 20;
/// `[limits] memory_budget` when not given: four messages of the default
/// `max_message_size` whose spill failed.
pub const DEFAULT_MEMORY_BUDGET: usize = 256 << 20;

/// What one busy connection holds beyond the message octets counted in
/// `memory_budget`: its session and task (20 KB idle, BENCHMARKS.md), the packet being
/// read (up to 64 KiB of body), the unused rest of a message's first allocation (up to
/// 16 KiB).
pub const CONNECTION_MEMORY: usize = 128 << 10;
/// The daemon without connections (6 MB, BENCHMARKS.md), its kept buffers (up to 16
/// MiB, `milter::buffer::Pool`) and what the allocator keeps of freed memory.
pub const DAEMON_MEMORY: usize = 32 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// Where log lines go (`log_target`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogTarget {
    /// Standard error: the journal under systemd.
    Stderr,
    /// Datagrams to a syslog socket, so that the lines land where the MTA's do
    /// (mail.log with the `mail` facility).
    Syslog {
        socket: PathBuf,
        /// The facility code (RFC 5424 §6.2.1): mail is 2.
        facility: u8,
    },
}

/// Where `syslog_socket` points when not given: where syslog(3) writes.
pub const DEFAULT_SYSLOG_SOCKET: &str = "/dev/log";

/// `syslog_facility` names and their codes (RFC 5424 §6.2.1): the ones a daemon
/// logs with; `mail` puts the lines beside the MTA's.
pub const SYSLOG_FACILITIES: [(&str, u8); 11] = [
    ("mail", 2),
    ("daemon", 3),
    ("user", 1),
    ("local0", 16),
    ("local1", 17),
    ("local2", 18),
    ("local3", 19),
    ("local4", 20),
    ("local5", 21),
    ("local6", 22),
    ("local7", 23),
];

/// The validated configuration. Cheap to share: the daemon holds it in an `Arc` and swaps
/// it on reload.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The file read, named or found at the default path (None: built-in defaults):
    /// what a reload reads again, and what messages name.
    file: Option<PathBuf>,
    /// Restart-only.
    listen: Listen,
    /// Restart-only.
    process: Process,
    service: Service,
    /// `trusted_networks`, `outbound_daemons`.
    directions: Directions,
    /// `[policy.*]` and `[limits] oversize_action`.
    policy: Policies,
    limits: Limits,
    fixes: Fixes,
    urls: Urls,
    /// `[report]`.
    report: Report,
    /// `[reply]`.
    replies: Replies,
    /// Settings that work but expose the daemon (a socket or the metrics on an address
    /// other hosts reach, a socket every local user can open): `config-check` and
    /// `serve` print them, with file and line. Each with the key it is about.
    warnings: Vec<(&'static str, ConfigError)>,
}

/// Restart-only: the sockets the daemon listens on and how it takes connections. A
/// reload keeps the running values and says which keys changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listen {
    pub socket: SocketSpec,
    pub socket_mode: Option<u32>,
    pub socket_group: Option<String>,
    pub metrics_listen: Option<SocketAddr>,
    /// Most HTTP connections to `metrics_listen` at once: probes and scrapers share the
    /// process's descriptors with the milter connections.
    pub metrics_max_connections: usize,
    pub max_connections: usize,
    pub connection_timeout: Duration,
    /// The longest one mail transaction may take, from MAIL FROM to end of message.
    pub transaction_timeout: Duration,
    /// The longest the MTA may take to read the whole answer to one command.
    pub reply_timeout: Duration,
}

/// Restart-only: settings of the process itself (the logger is installed once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    pub log_level: String,
    pub log_format: LogFormat,
    pub log_target: LogTarget,
}

/// How connections and messages are served; a reload changes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    pub dry_run: bool,
    /// Dry run forced by `--dry-run`: survives reloads whatever the file says.
    pub dry_run_forced: bool,
    /// How long messages in flight get at shutdown.
    pub shutdown_timeout: Duration,
    /// Negotiate "no reply" for connect, header, end of header and body where the MTA
    /// offers it: those stages only accumulate the message, so the MTA need not wait.
    pub no_reply_stages: bool,
    /// What a message gets when the daemon fails it (`internal_error_action`).
    pub internal_error_action: InternalErrorAction,
}

/// `internal_error_action`: the answer at end of message when the daemon itself failed
/// (a panic caught in the analysis, a spill file that cannot be read back, actions that
/// cannot be sent), as OpenDKIM's On-InternalError.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InternalErrorAction {
    /// The MTA keeps the message and retries: nothing passes unchecked.
    Tempfail,
    /// The message passes unchecked and unchanged: mail flows while the daemon fails.
    Accept,
}

impl InternalErrorAction {
    pub fn as_str(self) -> &'static str {
        match self {
            InternalErrorAction::Tempfail => "tempfail",
            InternalErrorAction::Accept => "accept",
        }
    }
}

/// `[limits]` but `oversize_action` (in `Policies`); public as `mimeref_milter::Limits`.
/// Not [`engine::Limits`], the engine's structural limits, which [`Limits::engine`]
/// gives from these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub max_message_size: usize,
    pub max_depth: usize,
    pub max_parts: usize,
    /// Most octets of header fields buffered; beyond it the message counts as oversize.
    pub max_header_size: usize,
    /// A message larger than this goes to an unlinked file in `spill_directory` while
    /// it is received; never above `max_message_size`.
    pub spill_threshold: usize,
    pub spill_directory: PathBuf,
    /// `spill_directory` is memory (tmpfs, ramfs): spilled octets count against
    /// `memory_budget`.
    pub spill_in_memory: bool,
    /// Octets of message data the daemon holds in memory at once, over all connections
    /// (buffers, spill files in memory, replaced bodies until sent); a message that
    /// does not fit is tempfailed.
    pub memory_budget: usize,
}

impl Limits {
    /// SECURITY.md's worst case of the daemon's memory, in octets, for `max_connections`
    /// and `cpus` analyses at once: `memory_budget` (every octet of message data held),
    /// plus `cpus` × 2 × `max_message_size` (a message read back or joined for its
    /// analysis, and the replaced body being built), plus `max_connections` ×
    /// `CONNECTION_MEMORY`, plus `DAEMON_MEMORY`. tests/milter/milter_memory.rs
    /// holds the daemon to it under a real cgroup limit.
    pub fn worst_case_memory(&self, max_connections: usize, cpus: usize) -> u64 {
        let n = |v: usize| v as u64;
        n(self.memory_budget)
            + n(cpus) * 2 * n(self.max_message_size)
            + n(max_connections) * n(CONNECTION_MEMORY)
            + n(DAEMON_MEMORY)
    }

    /// The engine's share of the limits.
    pub fn engine(&self) -> engine::Limits {
        engine::Limits {
            max_depth: self.max_depth,
            max_parts: self.max_parts,
            max_message_size: self.max_message_size,
        }
    }
}

/// How fixes are written, whatever the direction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fixes {
    pub fix_signed: FixSigned,
    /// Lower-cased; see [`engine::Options::trusted_authserv_ids`].
    pub trusted_authserv_ids: Vec<String>,
    pub normalize_url_continuations: bool,
    /// Write external-body URLs that a fix rewrites as RFC 2017 folded words of at most
    /// 40 octets (the default); off: one quoted word, folded only where a line would
    /// pass 998 octets, for readers that keep the folding whitespace inside the URL.
    pub fold_url_words: bool,
}

/// `[schemes]`, `[[rewrite]]` and `[legacy]`, resolved per direction.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Urls {
    pub inbound: UrlPolicy,
    pub outbound: UrlPolicy,
    /// Every `[[rewrite]]` in file order with the directions it applies to: the two
    /// lists above lose which rule was one table, and `config-dump` writes the tables.
    pub rules: Vec<RewriteRule>,
}

/// One `[[rewrite]]` table as validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewriteRule {
    pub rule: UrlRewrite,
    pub inbound: bool,
    pub outbound: bool,
}

impl Urls {
    pub fn get(&self, dir: Direction) -> &UrlPolicy {
        dir.pick(&self.inbound, &self.outbound)
    }
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
        Config::load_with_text(path).map(|(cfg, _)| cfg)
    }

    /// [`Config::load`], and the text read (None: the built-in configuration), for
    /// `config-dump` to say on which line each value was written.
    pub fn load_with_text(path: Option<&Path>) -> Result<(Config, Option<String>), ConfigErrors> {
        let (file, text) = match path {
            Some(p) => match std::fs::read_to_string(p) {
                Ok(t) => (p.to_path_buf(), t),
                Err(e) => return Err(cannot_read(p, e)),
            },
            None => {
                let p = Path::new(DEFAULT_PATH);
                match std::fs::read_to_string(p) {
                    Ok(t) => (p.to_path_buf(), t),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        return Ok((Config::builtin(), None))
                    }
                    Err(e) => return Err(cannot_read(p, e)),
                }
            }
        };
        let mut cfg = Config::parse(&text, &file.display().to_string())?;
        cfg.file = Some(file);
        Ok((cfg, Some(text)))
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
        match validate::validate(raw, text, name) {
            Ok(cfg) if errors.is_empty() => Ok(cfg),
            Ok(_) => Err(sorted(errors)),
            Err(mut found) => {
                errors.append(&mut found);
                Err(sorted(errors))
            }
        }
    }

    /// The file read (None: the built-in configuration): what a reload reads again,
    /// and what messages name.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Settings that work but expose the daemon, each with the key it is about.
    pub fn warnings(&self) -> &[(&'static str, ConfigError)] {
        &self.warnings
    }

    /// How the daemon listens (restart-only): the daemon binds, counts descriptors and
    /// sets indymilter's timeouts from it whole.
    pub fn listen(&self) -> &Listen {
        &self.listen
    }

    /// `[limits]` but `oversize_action`.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// `[report]`.
    pub fn report(&self) -> &Report {
        &self.report
    }

    /// `[reply]`.
    pub fn replies(&self) -> &Replies {
        &self.replies
    }

    /// The names of the `[[scope]]` tables, in file order.
    pub fn scope_names(&self) -> Vec<&str> {
        self.policy.scopes.iter().map(|s| s.name.as_str()).collect()
    }

    /// The scopes a message of direction `dir` with envelope `env` and bytes `raw` falls
    /// into, by name, `default` for the direction's own policy; empty when no scope
    /// applies.
    pub fn scopes_for(&self, dir: Direction, env: &Envelope, raw: &[u8]) -> Vec<String> {
        self.policy.scopes.select(dir, env, raw).names()
    }

    /// Adds one RCPT argument (`<bob@example.org>`) to `env`, as the scopes of this
    /// configuration see it.
    pub fn add_recipient(&self, env: &mut Envelope, arg: &[u8]) {
        env.recipients.add(&self.policy.scopes, arg);
    }

    /// Restart-only: the logger.
    pub(crate) fn process(&self) -> &Process {
        &self.process
    }

    pub(crate) fn service(&self) -> &Service {
        &self.service
    }

    /// `trusted_networks`, `outbound_daemons`.
    pub(crate) fn directions(&self) -> &Directions {
        &self.directions
    }

    /// `[policy.*]`, `[[scope]]` and `[limits] oversize_action`.
    pub(crate) fn policy(&self) -> &Policies {
        &self.policy
    }

    pub(crate) fn fixes(&self) -> &Fixes {
        &self.fixes
    }

    /// For tests of the milter: limits a file cannot give (below the smallest
    /// `max_message_size`, a spill directory taken for memory).
    #[cfg(test)]
    pub(crate) fn limits_mut(&mut self) -> &mut Limits {
        &mut self.limits
    }

    /// The engine options for a message of this direction.
    pub fn engine_options(&self, dir: Direction) -> engine::Options {
        let u = self.urls.get(dir);
        engine::Options {
            limits: self.limits.engine(),
            schemes: u.schemes.clone(),
            fix_signed: self.fixes.fix_signed,
            trusted_authserv_ids: self.fixes.trusted_authserv_ids.clone(),
            normalize_url_continuations: self.fixes.normalize_url_continuations,
            whole_url_words: !self.fixes.fold_url_words,
            octets_not_given: 0,
            rewrites: u.rewrites.clone(),
            legacy_to_url: u.legacy_to_url,
            legacy_ftp_with_login: u.legacy_ftp_with_login,
            strip_denied: u.strip_denied,
            // No configuration key yet: the reader matrix rates the insertion first.
            name_insert_disposition: false,
        }
    }

    /// The planner with this configuration's policy sections.
    pub(crate) fn planner(&self) -> Planner<'_> {
        Planner {
            policies: &self.policy,
            report: &self.report,
            replies: &self.replies,
            limits: self.limits.engine(),
            fix_signed: self.fixes.fix_signed,
        }
    }

    /// What the limits let through of a message as the MTA sends it.
    pub(crate) fn intake(&self) -> Intake {
        Intake::new(self.limits.max_header_size, self.limits.max_message_size)
    }

    /// `raw` (a message file) as the daemon would have received and kept it.
    pub(crate) fn as_received<'a>(&self, raw: &'a [u8]) -> AsReceived<'a> {
        intake::as_received(
            raw,
            &self.limits.engine(),
            self.limits.max_header_size,
            self.report.header.as_deref(),
        )
    }

    /// Applies `--dry-run`: on now, and after every reload.
    pub fn force_dry_run(&mut self) {
        self.service.dry_run = true;
        self.service.dry_run_forced = true;
    }

    /// For a reload: keeps the restart-only sections of the `running` configuration
    /// (and a forced dry run), so that what is logged and negotiated matches what is
    /// actually in force. Returns the keys whose new value is not taken.
    pub fn keep_restart_only(&mut self, running: &Config) -> Vec<&'static str> {
        if running.service.dry_run_forced {
            self.force_dry_run();
        }
        let mut changed = running.listen.changed(&self.listen);
        changed.extend(running.process.changed(&self.process));
        self.listen = running.listen.clone();
        self.process = running.process.clone();
        changed
    }
}

impl SocketSpec {
    /// Why this socket is open to more than the MTA on this host, if it is: an inet
    /// socket on an address other than loopback. Any peer that reaches it can hold
    /// milter connections (up to `max_connections`) and feed the daemon messages.
    pub fn exposure(&self) -> Option<String> {
        let SocketSpec::Inet { host, .. } = self else {
            return None;
        };
        let what = match host.parse::<std::net::IpAddr>() {
            Ok(ip) if ip.is_loopback() => return None,
            Ok(ip) if ip.is_unspecified() => "every address of this host".to_string(),
            Ok(ip) => format!("{ip}, not a loopback address"),
            Err(_) if host.eq_ignore_ascii_case("localhost") => return None,
            Err(_) => format!("{host:?}, a name that may not be a loopback address"),
        };
        Some(format!(
            "socket {self}: listens on {what}: every host that reaches it can open \
             milter connections; use 127.0.0.1, ::1 or a unix socket, or firewall the port"
        ))
    }
}

/// Why `metrics_listen` is open to other hosts, if it is.
pub fn metrics_exposure(addr: &SocketAddr) -> Option<String> {
    if addr.ip().is_loopback() {
        return None;
    }
    Some(format!(
        "metrics_listen {addr}: not a loopback address: every host that reaches it reads \
         the metrics and can take up metrics_max_connections connections; keep it on \
         127.0.0.1 (a load balancer's health check excepted), or firewall the port"
    ))
}

impl Listen {
    /// The keys that differ in `new`.
    fn changed(&self, new: &Listen) -> Vec<&'static str> {
        let keys = [
            ("socket", self.socket != new.socket),
            ("socket_mode", self.socket_mode != new.socket_mode),
            ("socket_group", self.socket_group != new.socket_group),
            ("metrics_listen", self.metrics_listen != new.metrics_listen),
            (
                "metrics_max_connections",
                self.metrics_max_connections != new.metrics_max_connections,
            ),
            (
                "max_connections",
                self.max_connections != new.max_connections,
            ),
            (
                "connection_timeout",
                self.connection_timeout != new.connection_timeout,
            ),
            (
                "transaction_timeout",
                self.transaction_timeout != new.transaction_timeout,
            ),
            ("reply_timeout", self.reply_timeout != new.reply_timeout),
        ];
        keys.into_iter().filter(|k| k.1).map(|k| k.0).collect()
    }
}

impl Process {
    /// The keys that differ in `new`.
    fn changed(&self, new: &Process) -> Vec<&'static str> {
        let keys = [
            (
                "log_level/log_format",
                self.log_level != new.log_level || self.log_format != new.log_format,
            ),
            (
                "log_target/syslog_socket/syslog_facility",
                self.log_target != new.log_target,
            ),
        ];
        keys.into_iter().filter(|k| k.1).map(|k| k.0).collect()
    }
}

/// A file that cannot be read; when permission is what is missing, how to get it. The
/// package keeps the file in /etc/mimeref-milter, root:mimeref-milter 0750 (it may
/// hold the addresses of the site's networks): an admin who is not root runs `check`
/// or `survey` on it as a member of that group, or on a copy. Which group: the one of
/// the first folder on the way that this user cannot enter, if its group may, else
/// the file's own, if its group may read it.
fn cannot_read(p: &Path, e: std::io::Error) -> ConfigErrors {
    use std::os::unix::fs::MetadataExt;
    let mut message = format!("cannot read: {e}");
    if e.kind() == std::io::ErrorKind::PermissionDenied {
        let name = |gid: u32| socket_access::group_name(gid).unwrap_or_else(|| gid.to_string());
        let absolute = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        let mut folders: Vec<&Path> = absolute.ancestors().skip(1).collect();
        folders.reverse();
        let closed = folders.into_iter().find(|d| {
            rustix::fs::access(*d, rustix::fs::Access::EXEC_OK)
                .is_err_and(|e| e == rustix::io::Errno::ACCESS)
        });
        let group = match closed {
            Some(d) => std::fs::metadata(d)
                .ok()
                .filter(|m| m.mode() & 0o010 != 0)
                .map(|m| name(m.gid())),
            None => std::fs::metadata(p)
                .ok()
                .filter(|m| m.mode() & 0o040 != 0)
                .map(|m| name(m.gid())),
        };
        let copy = format!(
            "copy it to a file you can read and give that with --config (e.g. `sudo install \
             -m 0600 -o \"$USER\" {} ~/mimeref-milter.toml`)",
            p.display()
        );
        match group {
            Some(g) => message.push_str(&format!(
                "; group {g} may read it: join that group (`sudo usermod -aG {g} \
                 \"$USER\"`, then log in again), or {copy}"
            )),
            None => message.push_str(&format!("; run this as root, or {copy}")),
        }
    }
    whole_file(p, message)
}

/// Top to bottom, as the admin reads the file; one line's errors in the order found.
fn sorted(mut errors: Vec<ConfigError>) -> ConfigErrors {
    errors.sort_by_key(|e| e.line);
    ConfigErrors { errors }
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

#[cfg(test)]
mod tests;
