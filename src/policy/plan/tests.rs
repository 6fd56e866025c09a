//! The planner's decisions and actions under policies as the configuration builds them
//! (the defaults, and the keys each test names).

use super::{delivered, Plan, Planner, Received, Replies};
use crate::engine::{self, Analysis, Edit, FieldLoc, Finding, Limits, Rule, Severity};
use crate::policy::report::Report;
use crate::policy::scope::Scopes;
use crate::policy::{Action, Direction, Pattern, Policies, Policy};

/// What a configuration gives the planner: the built-in defaults, with the
/// `[policy.inbound]` keys a test names over them.
struct Setup {
    policies: Policies,
    report: Report,
    replies: Replies,
    limits: Limits,
}

impl Setup {
    fn new() -> Setup {
        Setup::with(&[])
    }

    fn with(inbound: &[(&str, &str)]) -> Setup {
        let entries = inbound
            .iter()
            .map(|(k, a)| (Pattern::parse(k).unwrap(), Action::parse(a).unwrap()))
            .collect();
        Setup {
            policies: Policies {
                inbound: Policy::new(Direction::Inbound, entries),
                outbound: Policy::builtin(Direction::Outbound),
                oversize_action: Action::Report,
                scopes: Scopes::new(Vec::new()),
            },
            report: Report::default(),
            replies: Replies::default(),
            limits: Limits::default(),
        }
    }

    /// `[report]` changed as `f` says.
    fn report(mut self, f: impl FnOnce(&mut Report)) -> Setup {
        f(&mut self.report);
        self
    }

    /// `[limits] oversize_action`.
    fn oversize(mut self, a: Action) -> Setup {
        self.policies.oversize_action = a;
        self
    }

    fn planner(&self) -> Planner<'_> {
        Planner {
            fix_signed: crate::engine::FixSigned::Never,
            policies: &self.policies,
            report: &self.report,
            replies: &self.replies,
            limits: self.limits.clone(),
        }
    }

    fn plan(&self, dir: Direction, a: &Analysis, raw: &[u8], dry_run: bool) -> Plan {
        self.planner()
            .plan_received(dir, a, raw, dry_run, Received::default())
    }

    fn plan_received(
        &self,
        dir: Direction,
        a: &Analysis,
        raw: &[u8],
        dry_run: bool,
        received: Received,
    ) -> Plan {
        self.planner().plan_received(dir, a, raw, dry_run, received)
    }
}

#[test]
fn the_default_replies_are_valid() {
    let r = Replies::default();
    assert_eq!(r.reject.code, "550");
    assert_eq!(r.tempfail.code, "451");
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
        rides_on: None,
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
        rides_on: None,
        change: None,
    };
    Analysis {
        signatures: Vec::new(),
        findings: vec![
            Finding::new(Rule::HeaderLineTooLong, "0", "long").with_edit(0),
            Finding::new(Rule::ExtbodyUrlUnquoted, "1", "word").with_edit(1),
            Finding::new(Rule::RelatedCidDuplicate, "1", "dup"),
        ],
        edits: vec![e1, e2],
        shown_parts: 0,
    }
}

#[test]
fn default_policy_fixes_and_reports() {
    let p = Setup::new().plan(Direction::Inbound, &analysis(), RAW, false);
    assert_eq!(p.verdict, Action::Fix);
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
    let p = Setup::new().plan(Direction::Outbound, &analysis(), RAW, false);
    assert!(p.header_changes.iter().all(|c| c.value.is_some()));
}

#[test]
fn reject_names_the_deciding_rules_and_changes_nothing() {
    let c = Setup::with(&[("related-*", "reject"), ("header-*", "tempfail")]);
    let p = c.plan(Direction::Inbound, &analysis(), RAW, false);
    assert_eq!(p.verdict, Action::Reject);
    assert_eq!(
        p.reply.as_ref().unwrap().to_string(),
        "550 5.6.0 MIME reference error: related-cid-duplicate"
    );
    assert!(p.header_changes.is_empty() && p.body.is_none() && p.report.is_none());
    // In a dry run the verdict stands; the milter sends nothing of it.
    let p = c.plan(Direction::Inbound, &analysis(), RAW, true);
    assert!(p.dry_run && p.verdict == Action::Reject);
}

#[test]
fn fix_on_unfixable_is_report_and_ignore_is_silent() {
    let c = Setup::with(&[("*", "ignore"), ("related-cid-duplicate", "fix")]);
    let p = c.plan(Direction::Inbound, &analysis(), RAW, false);
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
const DUPLICATES_NOBODY_SEES: &[u8] = b"From: a@example.org\r\nContent-Type: multipart/related; boundary=r; type=\"text/html\"\r\n\r\n--r\r\nContent-Type: text/html\r\nContent-Location: http://example.com/p.html\r\n\r\n<img src=\"a.png\">\r\n--r\r\nContent-Type: image/png\r\nContent-Disposition: inline\r\nContent-ID: <image001@example.com>\r\nContent-Location: http://example.com/a.png\r\n\r\nPNG\r\n--r\r\nContent-Type: image/png\r\nContent-Disposition: inline\r\nContent-ID: <image001@example.com>\r\nContent-Location: http://example.com/a.png\r\n\r\nPNG\r\n--r--\r\n";

#[test]
fn duplicates_no_reader_can_tell_apart_are_logged_without_a_header() {
    let opts = engine::Options::default();
    let a = engine::check(DUPLICATES_NOBODY_SEES, &opts);
    let got: Vec<(Rule, Severity)> = a.findings.iter().map(|f| (f.rule, f.severity)).collect();
    assert_eq!(
        got,
        vec![
            (Rule::RelatedLocationDuplicate, Severity::Info),
            (Rule::RelatedCidDuplicate, Severity::Info)
        ]
    );
    let p = Setup::new().plan(Direction::Inbound, &a, DUPLICATES_NOBODY_SEES, false);
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
        String::from_utf8_lossy(DUPLICATES_NOBODY_SEES).replacen("PNG\r\n--r--", "GIF\r\n--r--", 1),
    ] {
        let a = engine::check(raw.as_bytes(), &opts);
        let p = Setup::new().plan(Direction::Inbound, &a, raw.as_bytes(), false);
        assert_eq!(p.verdict, Action::Report, "{raw}");
        assert!(p.report.is_some(), "{p}");
    }
    // A policy key naming the rule reports it all the same.
    let c = Setup::with(&[("related-location-duplicate", "report")]);
    let p = c.plan(Direction::Inbound, &a, DUPLICATES_NOBODY_SEES, false);
    assert_eq!(p.reported, vec![Rule::RelatedLocationDuplicate]);
}

/// Gmail-style ids (info: every reference resolves) and a long Content-Location line
/// (logged by default): nothing a reader would notice.
const HEALTHY: &[u8] = b"From: a@example.org\r\nContent-Type: multipart/related; boundary=r\r\n\r\n--r\r\nContent-Type: text/html\r\n\r\n<img src=\"cid:ii_m3x9\">\r\n--r\r\nContent-Type: image/png\r\nContent-Disposition: inline\r\nContent-ID: <ii_m3x9>\r\nContent-Location: http://example.com/a/very/long/path/that/goes/on/and/on/and/on/until/the/line/is/long.png\r\n\r\nPNG\r\n--r--\r\n";

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
    let p = Setup::new().plan(Direction::Inbound, &a, HEALTHY, false);
    assert_eq!(p.verdict, Action::Log);
    assert_eq!(p.rules.len(), 3, "logged: {:?}", p.rules);
    assert!(p.report.is_none() && p.body.is_none(), "{p}");
    assert_eq!(
        delivered(&p, HEALTHY, &Setup::new().limits).unwrap(),
        HEALTHY
    );
    // A glob key brings back the fixes; min_severity = "info" the header for info.
    let c = Setup::with(&[("*", "fix")]).report(|r| r.min_severity = Severity::Info);
    let p = c.plan(Direction::Inbound, &a, HEALTHY, false);
    assert_eq!(p.verdict, Action::Fix);
    assert_eq!(
        p.report.as_ref().unwrap().1,
        " fix; rules=content-id-syntax,location-line-too-long,\n related-type-missing; fixed=location-line-too-long,related-type-missing"
    );
    // A key naming an info rule exactly puts it in the header whatever min_severity.
    let c = Setup::with(&[("content-id-syntax", "report")]);
    let p = c.plan(Direction::Inbound, &a, HEALTHY, false);
    assert_eq!(p.report.unwrap().1, " report; rules=content-id-syntax");
}

#[test]
fn delivered_is_the_message_after_the_actions() {
    let c = Setup::with(&[("related-cid-duplicate", "quarantine")]);
    let p = c.plan(Direction::Inbound, &analysis(), RAW, false);
    let out = String::from_utf8(delivered(&p, RAW, &c.limits).unwrap()).unwrap();
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
    let c = Setup::with(&[("related-cid-duplicate", "reject")]);
    let p = c.plan(Direction::Inbound, &analysis(), RAW, false);
    assert!(delivered(&p, RAW, &c.limits).is_none());
}

#[test]
fn quarantine_keeps_fixes_and_gives_a_reason() {
    let c = Setup::with(&[("related-cid-duplicate", "quarantine")]);
    let p = c.plan(Direction::Inbound, &analysis(), RAW, false);
    assert_eq!(p.verdict, Action::Quarantine);
    assert_eq!(
        p.quarantine.as_deref(),
        Some("MIME reference error: related-cid-duplicate")
    );
    assert!(p.body.is_some());
}

#[test]
fn incomplete_message_never_gets_a_new_body() {
    let cut = |c: &Setup| {
        let received = Received {
            incomplete: true,
            report_fields: None,
        };
        c.plan_received(Direction::Inbound, &analysis(), RAW, false, received)
    };
    let p = cut(&Setup::new());
    assert!(p.body.is_none());
    assert!(p.oversize);
    assert!(p.rules.contains(&Rule::MessageTooLarge));
    assert!(p.report.as_ref().unwrap().1.ends_with("; oversize"));
    let p = cut(&Setup::new().oversize(Action::Tempfail));
    assert_eq!(
        p.reply.unwrap().to_string(),
        "451 4.6.0 MIME reference error: message-too-large"
    );
}

#[test]
fn nothing_found_nothing_done() {
    let p = Setup::new().report(|r| r.remove_forged = false).plan(
        Direction::Inbound,
        &Analysis::default(),
        RAW,
        false,
    );
    assert_eq!(p.verdict, Action::Ignore);
    assert!(p.header_changes.is_empty() && p.body.is_none() && p.report.is_none());
    let p = Setup::new().report(|r| r.always = true).plan(
        Direction::Outbound,
        &Analysis::default(),
        RAW,
        false,
    );
    assert_eq!(p.report.unwrap().1, " ok");
}

/// The log line of a changed field is one line whatever the field held: folds
/// unfolded, quotes and octets outside printable ASCII escaped, long values cut, and
/// insertions and removals said as such.
#[test]
fn field_changes_are_shown_on_one_safe_line() {
    use super::{field_change_text, FieldChange};
    let c = FieldChange {
        part: "1.2".into(),
        name: "Content-Disposition".into(),
        rules: vec![Rule::RelatedPartDisposition],
        old: Some(b" attachment;\r\n\tfilename=\"caf\xc3\xa9.png\"".to_vec()),
        new: Some(b" inline;\r\n\tfilename=\"caf\xc3\xa9.png\"".to_vec()),
    };
    assert_eq!(
        field_change_text(&c, 120),
        r#"1.2 related-part-disposition Content-Disposition: "attachment; filename=\"caf\xC3\xA9.png\"" -> "inline; filename=\"caf\xC3\xA9.png\"""#
    );
    let inserted = FieldChange {
        old: None,
        new: Some(b" inline\r\n".to_vec()),
        rules: vec![Rule::RelatedPartDispositionMissing],
        ..c.clone()
    };
    assert_eq!(
        field_change_text(&inserted, 120),
        r#"1.2 related-part-disposition-missing Content-Disposition: inserted "inline""#
    );
    let removed = FieldChange {
        part: "0".into(),
        name: "Content-Base".into(),
        rules: vec![Rule::HtmlBaseRemote],
        old: Some(b" http://evil.example/\r\n".to_vec()),
        new: None,
    };
    assert_eq!(
        field_change_text(&removed, 120),
        r#"0 html-base-remote Content-Base: removed "http://evil.example/""#
    );
    let long = FieldChange {
        old: Some(vec![b'a'; 500]),
        ..c
    };
    let text = field_change_text(&long, 20);
    assert!(
        text.contains(&format!("\"{}...\" -> ", "a".repeat(20))),
        "{text}"
    );
    assert!(!text.contains(['\r', '\n', '\t']));
}
