//! Validation of a configuration as written ([`RawConfig`]) into a [`Config`]: one file
//! per section of the file, each giving that section's type. Every error names the file
//! and line.
//!
//! The [`Validator`] keeps every error it finds, so that one run lists them all; a
//! table that holds several keys (a `[[rewrite]]`, a `[[scope]]`) asks it whether
//! reading the table found any ([`Validator::clean_since`]) instead of carrying a flag.
//!
//! - `listen`: `socket`, `socket_mode`, `socket_group`, `metrics_listen` and the
//!   connection counts and timeouts (restart-only).
//! - `process`: `log_level`, `log_format`, `log_target`, `syslog_*` (restart-only).
//! - `service`: `dry_run`, `shutdown_timeout`, `no_reply_stages`,
//!   `internal_error_action`.
//! - `limits`: `[limits]`, with the spill directory's check.
//! - `policy`: `trusted_networks`, `outbound_daemons`, `[policy.*]`.
//! - `scopes`: `[[scope]]`.
//! - `urls`: the fixes' keys, `[schemes]`, `[[rewrite]]`, `[legacy]`.
//! - `report`: `[report]`, `[reply]`.
//! - `values`: the checks several sections share (integers in bounds, actions,
//!   direction sets).

mod limits;
mod listen;
mod policy;
mod process;
mod report;
mod scopes;
mod service;
mod urls;
mod values;

use std::ops::Range;

use super::raw::RawConfig;
use super::{Config, ConfigError};
use crate::policy::{Direction, Policies};

pub(super) fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Validates `raw`, read from `text` (named `name` in messages): the configuration
/// with its warnings, or every error found, in the order found.
pub(super) fn validate(raw: RawConfig, text: &str, name: &str) -> Result<Config, Vec<ConfigError>> {
    let mut v = Validator {
        text,
        name,
        errors: Vec::new(),
        warnings: Vec::new(),
        verified_at: Vec::new(),
    };
    let mut cfg = v.config(raw);
    if v.errors.is_empty() {
        cfg.warnings = v.warnings;
        Ok(cfg)
    } else {
        Err(v.errors)
    }
}

struct Validator<'t> {
    text: &'t str,
    name: &'t str,
    errors: Vec<ConfigError>,
    warnings: Vec<(&'static str, ConfigError)>,
    /// Every `fix_signed = "verified"` seen, with its key: checked against
    /// `trusted_authserv_ids` once both are read.
    verified_at: Vec<(String, Range<usize>)>,
}

impl Validator<'_> {
    fn err(&mut self, span: Range<usize>, message: impl Into<String>) {
        let line = line_of(self.text, span.start);
        self.err_at_line(line, message);
    }

    /// An error about a table as a whole, at the line that stands for it.
    fn err_at_line(&mut self, line: usize, message: impl Into<String>) {
        self.errors.push(ConfigError {
            file: self.name.into(),
            line,
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

    /// Where the errors stand now: give it to [`Validator::clean_since`].
    fn mark(&self) -> usize {
        self.errors.len()
    }

    /// Whether no error was found since `mark`: a table whose keys had errors is left
    /// out, so that the checks across tables do not add errors about what it would
    /// have been.
    fn clean_since(&self, mark: usize) -> bool {
        self.errors.len() == mark
    }

    /// The whole configuration, section by section.
    fn config(&mut self, mut raw: RawConfig) -> Config {
        let listen = self.listen(&mut raw);
        let process = self.process(&mut raw);
        let service = self.service(&mut raw);
        let directions = self.directions(&mut raw);
        let (limits, oversize_action) = self.limits(raw.limits.take().unwrap_or_default());
        let fixes = self.fixes(&mut raw);
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
        self.verified_without_ids(&fixes);
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
}
