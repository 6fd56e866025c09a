//! Sends a plan (`policy::plan`) to the MTA at end of message, or nothing at all in
//! dry-run mode. The deciding happens in the policy layer; this is only the milter
//! protocol's side of it.

use std::borrow::Cow;

use indymilter::{ActionError, ContextActions, SetErrorReply, Status};

use crate::policy::plan::Plan;
use crate::policy::Action;

/// The final reply to end of message.
pub fn status(plan: &Plan) -> Status {
    if plan.dry_run {
        return Status::Accept;
    }
    match plan.verdict {
        Action::Reject => Status::Reject,
        Action::Tempfail => Status::Tempfail,
        _ => Status::Accept,
    }
}

/// Sends the plan. In dry-run mode nothing is sent and the message is accepted.
pub async fn execute(
    plan: &Plan,
    form: ValueForm,
    actions: &impl ContextActions,
    reply: &mut impl SetErrorReply,
) -> Result<Status, ActionError> {
    if plan.dry_run {
        return Ok(Status::Accept);
    }
    if let Some(r) = &plan.reply {
        // The texts were checked at config load and sanitised in `expand`; a refusal by
        // indymilter here would mean a bug, and the bare status still does the job.
        let _ = reply.set_error_reply(&r.code, Some(&r.status), [r.text.as_str()]);
        return Ok(status(plan));
    }
    for c in &plan.header_changes {
        let name = cstring(&c.name)?;
        let index = i32::try_from(c.index).map_err(|_| ActionError::InvalidParam)?;
        match &c.value {
            Some(v) => {
                actions
                    .change_header(name, index, Some(cstring(&form.sent(v))?))
                    .await?
            }
            None => {
                actions
                    .change_header(name, index, None::<std::ffi::CString>)
                    .await?
            }
        }
    }
    if let Some(body) = &plan.body {
        actions.replace_body(body).await?;
    }
    if let Some(reason) = &plan.quarantine {
        actions.quarantine(reason.as_str()).await?;
    }
    if let Some((name, value)) = &plan.report {
        let value = cstring(&form.sent(value.as_bytes()))?;
        actions.add_header(name.as_str(), value).await?;
    }
    Ok(status(plan))
}

fn cstring(b: &[u8]) -> Result<std::ffi::CString, ActionError> {
    std::ffi::CString::new(b.to_vec()).map_err(|_| ActionError::InvalidParam)
}

/// How header values travel to and from this MTA; see `Session::leading_space`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueForm {
    pub leading_space: bool,
    pub crlf_folds: bool,
}

impl ValueForm {
    /// The value as the message holds it, from the value as the MTA sent it. Without
    /// LEADING_SPACE Postfix and Sendmail drop exactly one space after the colon and
    /// Stalwart trims all white space: one space goes back, unless the value is empty
    /// or starts with a tab or a fold (no space was dropped before those). Exact for
    /// `Name: value`, `Name:   value` and `Name:<TAB>value`; `Name:value` becomes
    /// `Name: value` for the analysis only, as the MTA keeps its own copy.
    pub fn received<'a>(&self, value: &'a [u8]) -> Cow<'a, [u8]> {
        if self.leading_space || value.is_empty() || matches!(value[0], b'\t' | b'\r' | b'\n') {
            return Cow::Borrowed(value);
        }
        let mut v = Vec::with_capacity(value.len() + 1);
        v.push(b' ');
        v.extend_from_slice(value);
        Cow::Owned(v)
    }

    /// The value to send, from the value the field is to have after the colon. Without
    /// LEADING_SPACE the MTA writes `Name: ` and then the value (Postfix, Sendmail, and
    /// Stalwart for a value that does not start with white space), so the one space
    /// the value starts with is left to the MTA; folds use the MTA's line end.
    pub fn sent<'a>(&self, value: &'a [u8]) -> Cow<'a, [u8]> {
        if self.leading_space {
            return Cow::Borrowed(value);
        }
        let value = value.strip_prefix(b" ").unwrap_or(value);
        if !self.crlf_folds || !value.contains(&b'\n') {
            return Cow::Borrowed(value);
        }
        let mut v = Vec::with_capacity(value.len() + 8);
        for (i, &b) in value.iter().enumerate() {
            if b == b'\n' && (i == 0 || value[i - 1] != b'\r') {
                v.push(b'\r');
            }
            v.push(b);
        }
        Cow::Owned(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::engine::{Analysis, Finding, Rule};
    use crate::policy::plan::Received;
    use crate::policy::Direction;

    /// The planner's own tests are beside it (`policy/plan/tests.rs`); here, only what
    /// the milter answers for a plan.
    #[test]
    fn the_answer_follows_the_verdict_and_dry_run() {
        let a = Analysis {
            signatures: Vec::new(),
            findings: vec![Finding::new(Rule::RelatedCidDuplicate, "1", "dup")],
            edits: Vec::new(),
            shown_parts: 0,
        };
        let raw = b"Subject: hi\r\n\r\nbody\r\n";
        let plan = |toml: &str, dry_run: bool| {
            Config::parse(toml, "t").unwrap().planner().plan_received(
                Direction::Inbound,
                &a,
                raw,
                dry_run,
                Received::default(),
            )
        };
        let reject = "[policy.inbound]\n\"related-cid-duplicate\" = \"reject\"\n";
        let tempfail = "[policy.inbound]\n\"related-cid-duplicate\" = \"tempfail\"\n";
        assert_eq!(status(&plan(reject, false)), Status::Reject);
        assert_eq!(status(&plan(tempfail, false)), Status::Tempfail);
        assert_eq!(status(&plan(reject, true)), Status::Accept);
        assert_eq!(status(&plan("", false)), Status::Accept);
    }
}
