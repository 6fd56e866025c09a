//! The configuration file as written: every key optional, unknown keys rejected, values
//! that need checking kept with their position so that errors can name the line.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

type S<T> = Spanned<T>;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub socket: Option<S<String>>,
    pub socket_mode: Option<S<String>>,
    pub socket_group: Option<S<String>>,
    pub dry_run: Option<bool>,
    pub log_level: Option<S<String>>,
    pub log_format: Option<S<String>>,
    pub log_target: Option<S<String>>,
    pub syslog_socket: Option<S<String>>,
    pub syslog_facility: Option<S<String>>,
    pub metrics_listen: Option<S<String>>,
    pub metrics_max_connections: Option<S<i64>>,
    pub max_connections: Option<S<i64>>,
    pub connection_timeout: Option<S<i64>>,
    pub transaction_timeout: Option<S<i64>>,
    pub reply_timeout: Option<S<i64>>,
    pub shutdown_timeout: Option<S<i64>>,
    pub trusted_networks: Option<Vec<S<String>>>,
    pub outbound_daemons: Option<Vec<S<String>>>,
    pub fix_signed: Option<S<RawFixSigned>>,
    pub trusted_authserv_ids: Option<Vec<S<String>>>,
    pub normalize_url_continuations: Option<bool>,
    pub fold_url_words: Option<bool>,
    pub no_reply_stages: Option<bool>,
    pub internal_error_action: Option<S<String>>,
    pub limits: Option<RawLimits>,
    pub schemes: Option<RawSchemes>,
    pub report: Option<RawReport>,
    pub reply: Option<RawReply>,
    pub policy: Option<RawPolicies>,
    pub rewrite: Option<Vec<RawRewrite>>,
    pub legacy: Option<RawLegacy>,
    pub scope: Option<Vec<RawScope>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    pub max_message_size: Option<S<i64>>,
    pub max_header_size: Option<S<i64>>,
    pub max_depth: Option<S<i64>>,
    pub max_parts: Option<S<i64>>,
    pub oversize_action: Option<S<String>>,
    pub spill_threshold: Option<S<i64>>,
    pub spill_directory: Option<S<String>>,
    pub memory_budget: Option<S<i64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSchemes {
    pub allow: Option<Vec<S<String>>>,
    pub deny: Option<Vec<S<String>>>,
    pub strip_denied: Option<bool>,
    pub inbound: Option<RawSchemesDir>,
    pub outbound: Option<RawSchemesDir>,
}

/// `[schemes.inbound]` / `[schemes.outbound]`: each key given replaces the `[schemes]` one.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSchemesDir {
    pub allow: Option<Vec<S<String>>>,
    pub deny: Option<Vec<S<String>>>,
    pub strip_denied: Option<bool>,
}

/// `fix_signed`: `false`, `true` or a word (`"verified"`), checked in validation.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RawFixSigned {
    Switch(bool),
    Word(String),
}

/// One `[[rewrite]]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRewrite {
    pub direction: Option<S<String>>,
    pub scheme: Option<S<String>>,
    pub host: Option<S<String>>,
    pub host_suffix: Option<S<String>>,
    pub path: Option<S<String>>,
    pub template: Option<S<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLegacy {
    pub to_url: Option<S<String>>,
    pub ftp_with_login: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawReport {
    pub enabled: Option<bool>,
    pub header: Option<S<String>>,
    pub always: Option<bool>,
    pub remove_forged: Option<bool>,
    pub min_severity: Option<S<String>>,
    pub redact_urls: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawReply {
    pub reject: Option<S<String>>,
    pub tempfail: Option<S<String>>,
    pub quarantine: Option<S<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPolicies {
    pub inbound: Option<BTreeMap<S<String>, S<String>>>,
    pub outbound: Option<BTreeMap<S<String>, S<String>>>,
}

/// One `[[scope]]` table: what it matches on, then what it does.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScope {
    pub name: Option<S<String>>,
    pub direction: Option<S<String>>,
    pub recipients: Option<S<Vec<S<String>>>>,
    pub senders: Option<S<Vec<S<String>>>>,
    pub client_networks: Option<S<Vec<S<String>>>>,
    pub sasl_logins: Option<S<Vec<S<String>>>>,
    pub header: Option<S<RawScopeHeader>>,
    pub exempt: Option<S<String>>,
    pub fix_signed: Option<S<RawFixSigned>>,
    pub policy: Option<BTreeMap<S<String>, S<String>>>,
    pub report: Option<S<RawScopeReport>>,
}

/// `header = { name = "List-Id", pattern = "..." }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScopeHeader {
    pub name: S<String>,
    pub pattern: Option<S<String>>,
}

/// `[scope.report]`: the `[report]` keys a scope may change.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScopeReport {
    pub enabled: Option<S<bool>>,
    pub always: Option<bool>,
    pub min_severity: Option<S<String>>,
}
