//! `[report]`: the header that reports findings and what goes in it. A settings type
//! of this layer that the configuration holds as a section; the planner and the scopes
//! read it.

use crate::engine::Severity;

/// The report header's name when `[report] header` is not set.
pub const DEFAULT_REPORT_HEADER: &str = "X-MIMERef";

/// `[report]`: the header that reports findings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Report header name; None when reporting is off.
    pub header: Option<String>,
    /// Add the report header even when there is nothing to report.
    pub always: bool,
    /// Delete report headers already present in inbound mail (they could be forged).
    pub remove_forged: bool,
    /// A finding below this severity whose action is `report` is only logged: it adds no
    /// report header.
    pub min_severity: Severity,
    /// URLs in log lines and the report header lose their password (or user information)
    /// and query ([`redact`](super::redact)); off only to debug.
    pub redact_urls: bool,
}

/// `[report]` as it is when the file says nothing of it.
impl Default for Report {
    fn default() -> Self {
        Report {
            header: Some(DEFAULT_REPORT_HEADER.to_string()),
            always: false,
            remove_forged: true,
            min_severity: Severity::Warning,
            redact_urls: true,
        }
    }
}
