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
    use crate::engine::{self, Analysis, Edit, FieldLoc, Finding, Rule, Severity};
    use crate::policy::plan::{self, Received};
    use crate::policy::Direction;

    fn cfg(extra: &str) -> Config {
        Config::parse(extra, "t").unwrap()
    }

    /// The plan as the configuration `c` makes it.
    fn plan(c: &Config, dir: Direction, a: &Analysis, raw: &[u8], dry_run: bool) -> Plan {
        c.planner()
            .plan_received(dir, a, raw, dry_run, Received::default())
    }

    fn plan_received(
        c: &Config,
        dir: Direction,
        a: &Analysis,
        raw: &[u8],
        dry_run: bool,
        received: Received,
    ) -> Plan {
        c.planner().plan_received(dir, a, raw, dry_run, received)
    }

    fn delivered(p: &Plan, raw: &[u8], c: &Config) -> Option<Vec<u8>> {
        plan::delivered(p, raw, &c.limits.engine())
    }

    const RAW: &[u8] = b"X-MIMERef: forged\r\nSubject: hi\r\nx-mimeref: again\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain; x=1\r\n\r\nhi\r\n--b--\r\n";

    fn pos(s: &[u8], needle: &[u8]) -> usize {
        s.windows(needle.len()).position(|w| w == needle).unwrap()
    }

    /// One top-level edit (Content-Type, occurrence 1) and one nested edit.
    fn analysis() -> Analysis {
        let top = pos(RAW, b"Content-Type: multipart") + "Content-Type:".len();
        let top_end = pos(RAW, b"boundary=b\r\n") + "boundary=b".len();
        let nested = pos(RAW, b"Content-Type: text") + "Content-Type:".len();
        let nested_end = pos(RAW, b"x=1") + 3;
        let e1 = Edit {
            range: top..top_end,
            replacement: b" multipart/mixed;\r\n boundary=b".to_vec(),
            field: FieldLoc {
                part: "0".into(),
                name: "Content-Type".into(),
                occurrence: 1,
                top_level: true,
            },
            kind: engine::EditKind::Field,
            rules: vec![Rule::HeaderLineTooLong],
            requires: None,
            change: None,
        };
        let e2 = Edit {
            range: nested..nested_end,
            replacement: b" text/plain; x=2".to_vec(),
            field: FieldLoc {
                part: "1".into(),
                name: "Content-Type".into(),
                occurrence: 1,
                top_level: false,
            },
            kind: engine::EditKind::Field,
            rules: vec![Rule::ExtbodyUrlUnquoted],
            requires: None,
            change: None,
        };
        Analysis {
            findings: vec![
                Finding::new(Rule::HeaderLineTooLong, "0", "long").with_edit(0),
                Finding::new(Rule::ExtbodyUrlUnquoted, "1", "word").with_edit(1),
                Finding::new(Rule::RelatedCidDuplicate, "1", "dup"),
            ],
            edits: vec![e1, e2],
        }
    }

    #[test]
    fn default_policy_fixes_and_reports() {
        let p = plan(&cfg(""), Direction::Inbound, &analysis(), RAW, false);
        assert_eq!(p.verdict, Action::Fix);
        assert_eq!(status(&p), Status::Accept);
        // Forged report headers deleted highest index first, then the field rewrite.
        assert_eq!(p.header_changes.len(), 3);
        assert_eq!(
            (
                p.header_changes[0].index,
                p.header_changes[0].value.is_none()
            ),
            (2, true)
        );
        assert_eq!(
            (
                p.header_changes[1].index,
                p.header_changes[1].value.is_none()
            ),
            (1, true)
        );
        assert_eq!(p.header_changes[2].name, b"Content-Type");
        assert_eq!(
            p.header_changes[2].value.as_deref(),
            Some(&b" multipart/mixed;\n boundary=b"[..])
        );
        let body = p.body.as_ref().unwrap();
        assert!(body.starts_with(b"--b\r\nContent-Type: text/plain; x=2\r\n"));
        assert_eq!(
            p.fixed,
            vec![Rule::ExtbodyUrlUnquoted, Rule::HeaderLineTooLong]
        );
        let (name, value) = p.report.clone().unwrap();
        assert_eq!(name, "X-MIMERef");
        assert_eq!(
            value,
            " fix; rules=extbody-url-unquoted,header-line-too-long,\n related-cid-duplicate; fixed=extbody-url-unquoted,header-line-too-long"
        );
        assert_eq!(p.edits(), 2);
        let shown = p.to_string();
        assert!(
            shown.contains(
                "change_header: Content-Type index 1 value \" multipart/mixed;\\n boundary=b\""
            ),
            "{shown}"
        );
        assert!(
            shown.contains("delete_header: X-MIMERef index 2"),
            "{shown}"
        );
        assert!(shown.contains("replace_body: yes"), "{shown}");
    }

    #[test]
    fn outbound_keeps_existing_report_headers() {
        let p = plan(&cfg(""), Direction::Outbound, &analysis(), RAW, false);
        assert!(p.header_changes.iter().all(|c| c.value.is_some()));
    }

    #[test]
    fn reject_names_the_deciding_rules_and_changes_nothing() {
        let c = cfg("[policy.inbound]\n\"related-*\" = \"reject\"\n\"header-*\" = \"tempfail\"\n");
        let p = plan(&c, Direction::Inbound, &analysis(), RAW, false);
        assert_eq!(p.verdict, Action::Reject);
        assert_eq!(
            p.reply.as_ref().unwrap().to_string(),
            "550 5.6.0 MIME reference error: related-cid-duplicate"
        );
        assert!(p.header_changes.is_empty() && p.body.is_none() && p.report.is_none());
        assert_eq!(status(&p), Status::Reject);
        let p = plan(&c, Direction::Inbound, &analysis(), RAW, true);
        assert_eq!(status(&p), Status::Accept);
    }

    #[test]
    fn fix_on_unfixable_is_report_and_ignore_is_silent() {
        let c = cfg("[policy.inbound]\n\"*\" = \"ignore\"\n\"related-cid-duplicate\" = \"fix\"\n");
        let p = plan(&c, Direction::Inbound, &analysis(), RAW, false);
        assert_eq!(p.verdict, Action::Report);
        assert_eq!(p.rules, vec![Rule::RelatedCidDuplicate]);
        assert!(p.body.is_none());
        assert_eq!(
            p.header_changes
                .iter()
                .filter(|c| c.value.is_some())
                .count(),
            0
        );
    }

    /// A picture attached twice under one Content-Location, and a Content-ID that two
    /// parts share but nothing names: whichever part a reader picks, it shows the same.
    const DUPLICATES_NOBODY_SEES: &[u8] = b"From: a@example.org\r\nContent-Type: multipart/related; boundary=r; type=\"text/html\"\r\n\r\n--r\r\nContent-Type: text/html\r\nContent-Location: http://example.com/p.html\r\n\r\n<img src=\"a.png\">\r\n--r\r\nContent-Type: image/png\r\nContent-ID: <image001@example.com>\r\nContent-Location: http://example.com/a.png\r\n\r\nPNG\r\n--r\r\nContent-Type: image/png\r\nContent-ID: <image001@example.com>\r\nContent-Location: http://example.com/a.png\r\n\r\nPNG\r\n--r--\r\n";

    #[test]
    fn duplicates_no_reader_can_tell_apart_are_logged_without_a_header() {
        let opts = cfg("").engine_options(Direction::Inbound);
        let a = engine::check(DUPLICATES_NOBODY_SEES, &opts);
        let got: Vec<(Rule, Severity)> = a.findings.iter().map(|f| (f.rule, f.severity)).collect();
        assert_eq!(
            got,
            vec![
                (Rule::RelatedLocationDuplicate, Severity::Info),
                (Rule::RelatedCidDuplicate, Severity::Info)
            ]
        );
        let p = plan(
            &cfg(""),
            Direction::Inbound,
            &a,
            DUPLICATES_NOBODY_SEES,
            false,
        );
        assert_eq!(p.verdict, Action::Log);
        assert_eq!(
            p.rules,
            vec![Rule::RelatedCidDuplicate, Rule::RelatedLocationDuplicate]
        );
        assert!(p.report.is_none() && p.body.is_none(), "{p}");
        // A reference to the id, or one image changed, makes them errors again.
        for raw in [
            String::from_utf8_lossy(DUPLICATES_NOBODY_SEES)
                .replace("src=\"a.png\"", "src=\"cid:image001@example.com\""),
            String::from_utf8_lossy(DUPLICATES_NOBODY_SEES).replacen(
                "PNG\r\n--r--",
                "GIF\r\n--r--",
                1,
            ),
        ] {
            let a = engine::check(raw.as_bytes(), &opts);
            let p = plan(&cfg(""), Direction::Inbound, &a, raw.as_bytes(), false);
            assert_eq!(p.verdict, Action::Report, "{raw}");
            assert!(p.report.is_some(), "{p}");
        }
        // A policy key naming the rule reports it all the same.
        let c = cfg("[policy.inbound]\n\"related-location-duplicate\" = \"report\"\n");
        let p = plan(&c, Direction::Inbound, &a, DUPLICATES_NOBODY_SEES, false);
        assert_eq!(p.reported, vec![Rule::RelatedLocationDuplicate]);
    }

    /// Gmail-style ids (info: every reference resolves) and a long Content-Location line
    /// (logged by default): nothing a reader would notice.
    const HEALTHY: &[u8] = b"From: a@example.org\r\nContent-Type: multipart/related; boundary=r\r\n\r\n--r\r\nContent-Type: text/html\r\n\r\n<img src=\"cid:ii_m3x9\">\r\n--r\r\nContent-Type: image/png\r\nContent-ID: <ii_m3x9>\r\nContent-Location: http://example.com/a/very/long/path/that/goes/on/and/on/and/on/until/the/line/is/long.png\r\n\r\nPNG\r\n--r--\r\n";

    #[test]
    fn harmless_findings_are_logged_without_a_header_or_a_change() {
        let a = engine::check(HEALTHY, &engine::Options::default());
        let got: Vec<Rule> = a.findings.iter().map(|f| f.rule).collect();
        assert_eq!(
            got,
            vec![
                Rule::RelatedTypeMissing,
                Rule::LocationLineTooLong,
                Rule::ContentIdSyntax
            ]
        );
        let p = plan(&cfg(""), Direction::Inbound, &a, HEALTHY, false);
        assert_eq!(p.verdict, Action::Log);
        assert_eq!(p.rules.len(), 3, "logged: {:?}", p.rules);
        assert!(p.report.is_none() && p.body.is_none(), "{p}");
        assert_eq!(delivered(&p, HEALTHY, &cfg("")).unwrap(), HEALTHY);
        // A glob key brings back the fixes; min_severity = "info" the header for info.
        let c = cfg("[report]\nmin_severity = \"info\"\n[policy.inbound]\n\"*\" = \"fix\"\n");
        let p = plan(&c, Direction::Inbound, &a, HEALTHY, false);
        assert_eq!(p.verdict, Action::Fix);
        assert_eq!(
            p.report.as_ref().unwrap().1,
            " fix; rules=content-id-syntax,location-line-too-long,\n related-type-missing; fixed=location-line-too-long,related-type-missing"
        );
        // A key naming an info rule exactly puts it in the header whatever min_severity.
        let c = cfg("[policy.inbound]\n\"content-id-syntax\" = \"report\"\n");
        let p = plan(&c, Direction::Inbound, &a, HEALTHY, false);
        assert_eq!(p.report.unwrap().1, " report; rules=content-id-syntax");
    }

    #[test]
    fn delivered_is_the_message_after_the_actions() {
        let c = cfg("[policy.inbound]\n\"related-cid-duplicate\" = \"quarantine\"\n");
        let p = plan(&c, Direction::Inbound, &analysis(), RAW, false);
        let out = String::from_utf8(delivered(&p, RAW, &c).unwrap()).unwrap();
        // Both forged report headers gone, Content-Type rewritten with the message's CRLF,
        // the report header last, the body replaced.
        assert!(
            out.starts_with("Subject: hi\r\nContent-Type: multipart/mixed;\r\n boundary=b\r\nX-MIMERef: quarantine; rules="),
            "{out}"
        );
        assert!(
            out.contains("\r\n\r\n--b\r\nContent-Type: text/plain; x=2\r\n"),
            "{out}"
        );
        let c = cfg("[policy.inbound]\n\"related-cid-duplicate\" = \"reject\"\n");
        let p = plan(&c, Direction::Inbound, &analysis(), RAW, false);
        assert!(delivered(&p, RAW, &c).is_none());
    }

    #[test]
    fn quarantine_keeps_fixes_and_gives_a_reason() {
        let c = cfg("[policy.inbound]\n\"related-cid-duplicate\" = \"quarantine\"\n");
        let p = plan(&c, Direction::Inbound, &analysis(), RAW, false);
        assert_eq!(p.verdict, Action::Quarantine);
        assert_eq!(
            p.quarantine.as_deref(),
            Some("MIME reference error: related-cid-duplicate")
        );
        assert!(p.body.is_some());
    }

    #[test]
    fn incomplete_message_never_gets_a_new_body() {
        let p = plan_received(
            &cfg(""),
            Direction::Inbound,
            &analysis(),
            RAW,
            false,
            Received {
                incomplete: true,
                report_fields: None,
            },
        );
        assert!(p.body.is_none());
        assert!(p.oversize);
        assert!(p.rules.contains(&Rule::MessageTooLarge));
        assert!(p.report.as_ref().unwrap().1.ends_with("; oversize"));
        let c = cfg("[limits]\noversize_action = \"tempfail\"\n");
        let p = plan_received(
            &c,
            Direction::Inbound,
            &analysis(),
            RAW,
            false,
            Received {
                incomplete: true,
                report_fields: None,
            },
        );
        assert_eq!(
            p.reply.unwrap().to_string(),
            "451 4.6.0 MIME reference error: message-too-large"
        );
    }

    #[test]
    fn nothing_found_nothing_done() {
        let p = plan(
            &cfg("[report]\nremove_forged = false\n"),
            Direction::Inbound,
            &Analysis::default(),
            RAW,
            false,
        );
        assert_eq!(p.verdict, Action::Ignore);
        assert!(p.header_changes.is_empty() && p.body.is_none() && p.report.is_none());
        let p = plan(
            &cfg("[report]\nalways = true\n"),
            Direction::Outbound,
            &Analysis::default(),
            RAW,
            false,
        );
        assert_eq!(p.report.unwrap().1, " ok");
    }
}
