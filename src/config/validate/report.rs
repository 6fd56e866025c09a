//! What the daemon writes about a message: `[report]` (the report header field) and
//! `[reply]` (the SMTP replies and the quarantine reason).

use toml::Spanned;

use super::Validator;
use crate::config::raw::{RawReply, RawReport};
use crate::config::{
    DEFAULT_QUARANTINE_REASON, DEFAULT_REJECT_REPLY, DEFAULT_REPORT_HEADER, DEFAULT_TEMPFAIL_REPLY,
};
use crate::engine::Severity;
use crate::policy::plan::{check_printable, Replies, ReplyTemplate};
use crate::policy::report::Report;

impl Validator<'_> {
    /// `[report]`.
    pub(super) fn report(&mut self, rr: RawReport) -> Report {
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
    pub(super) fn replies(&mut self, rp: RawReply) -> Replies {
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
}
