//! The scope test configuration, one copy for the three binaries that test scopes:
//! offline (`engine`, scopes.rs), in the daemon (`milter_scopes`) and behind Postfix
//! (`postfix_scopes`), so that all three decide on the same scopes.

/// Inbound mail (no trusted network), the built-in policy, and one scope of each kind:
/// a mailing list exempted by its List-Id, a recipient whose mail is only logged, a
/// domain that rejects what the rest fixes, a partner known by network and sender, the
/// staff's authenticated mail (which may be fixed where signed), a domain that only
/// reports. `top` adds top-level keys; the archive recipient is `archive@DOMAIN`, on
/// the domain the test delivers to.
pub fn config(top: &str, domain: &str) -> String {
    format!(
        r#"trusted_networks = []
{top}
[[scope]]
name = "announce"
header = {{ name = "List-Id", pattern = '<announce\.example\.org>' }}
exempt = "ignore"

[[scope]]
name = "archive"
recipients = ["archive@{domain}"]
exempt = "log"

[[scope]]
name = "strict"
recipients = ["@strict.example"]
[scope.policy]
"extbody-*" = "reject"

[[scope]]
name = "partner"
client_networks = ["198.51.100.0/24"]
senders = ["@partner.example"]
exempt = "log"

[[scope]]
name = "staff"
sasl_logins = ["alice"]
fix_signed = true
[scope.policy]
"related-type-missing" = "fix"

[[scope]]
name = "report-only"
recipients = ["@report.example"]
[scope.policy]
"*" = "report"
"#
    )
}
