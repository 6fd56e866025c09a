//! Everything the milter does to a message, decided and sent in one place at end of
//! message. [`plan_received`] is pure (the CLI's `check --actions` prints it, for the
//! bytes `intake::as_received` says the daemon would have kept); [`execute`] sends a
//! plan to the MTA, or nothing at all in dry-run mode.

use std::fmt;

use indymilter::{ActionError, ContextActions, SetErrorReply, Status};

use crate::config::{Config, ReplyTemplate};
use crate::engine::{self, model::mime, Analysis, Edit, Rule, UrlChange};
use crate::policy::{Action, Direction};

/// One `change_header` call (a deletion when `value` is None).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderChange {
    pub name: Vec<u8>,
    /// 1-based occurrence among the top-level fields of that name: libmilter's index.
    pub index: usize,
    /// The whole new value including its leading space (we negotiate LEADING_SPACE),
    /// folded with the line break the MTA uses.
    pub value: Option<Vec<u8>>,
}

/// An SMTP error reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub code: String,
    pub status: String,
    pub text: String,
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.code, self.status, self.text)
    }
}

/// The milter's decision about one message and the exact actions it implies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub direction: Direction,
    pub verdict: Action,
    pub dry_run: bool,
    /// The message was larger than the configured limits (not read whole).
    pub oversize: bool,
    /// Rule ids found and logged (every finding whose action is not `ignore`), sorted.
    pub rules: Vec<Rule>,
    /// Rule ids named in the report header (action `report` or stronger), sorted.
    pub reported: Vec<Rule>,
    /// Rule ids whose action is the verdict: named in replies and quarantine reasons.
    pub decided_by: Vec<Rule>,
    /// Rule ids repaired by the edits sent.
    pub fixed: Vec<Rule>,
    /// `change_header` calls in the order they are sent.
    pub header_changes: Vec<HeaderChange>,
    /// The new body (everything after the header/body separator), when a field inside a
    /// MIME part is rewritten.
    pub body: Option<Vec<u8>>,
    pub reply: Option<Reply>,
    pub quarantine: Option<String>,
    /// `add_header(name, value)` of the report header.
    pub report: Option<(String, String)>,
    /// Edits that were on offer but not sent, and why.
    pub notes: Vec<String>,
    /// Field rewrites and part replacements carried by `body`.
    pub body_edits: usize,
    /// References changed by the edits sent (URL rewrites, legacy conversions, strips),
    /// with the part path, in message order. Display-safe (see `engine::UrlChange`).
    pub changes: Vec<(String, UrlChange)>,
    /// The action each finding got, in finding order (`fix` already turned into `report`
    /// where nothing was on offer).
    pub decisions: Vec<(Rule, Action)>,
}

impl Plan {
    /// Number of field rewrites sent (header changes that are not deletions, plus the
    /// edits folded into the body replacement).
    pub fn edits(&self) -> usize {
        self.header_changes
            .iter()
            .filter(|c| c.value.is_some())
            .count()
            + self.body_edits
    }

    /// The final reply to end of message.
    pub fn status(&self) -> Status {
        if self.dry_run {
            return Status::Accept;
        }
        match self.verdict {
            Action::Reject => Status::Reject,
            Action::Tempfail => Status::Tempfail,
            _ => Status::Accept,
        }
    }
}

// Kept out of the public struct literal so that `edits()` stays the single definition.
impl Plan {
    fn new(direction: Direction, dry_run: bool, oversize: bool) -> Plan {
        Plan {
            direction,
            verdict: Action::Ignore,
            dry_run,
            oversize,
            rules: Vec::new(),
            reported: Vec::new(),
            decided_by: Vec::new(),
            fixed: Vec::new(),
            header_changes: Vec::new(),
            body: None,
            reply: None,
            quarantine: None,
            report: None,
            notes: Vec::new(),
            body_edits: 0,
            changes: Vec::new(),
            decisions: Vec::new(),
        }
    }
}

/// What the daemon knows beyond the message bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Received {
    /// The MTA sent more than was buffered: the body must never be replaced.
    pub incomplete: bool,
    /// Top-level fields named like the report header, as the MTA counted them while
    /// sending (its change_header indices count the same way). None: count them in
    /// the message bytes.
    pub report_fields: Option<usize>,
}

/// The plan for a message read whole, within every limit.
pub fn plan(cfg: &Config, dir: Direction, analysis: &Analysis, raw: &[u8], dry_run: bool) -> Plan {
    plan_received(cfg, dir, analysis, raw, dry_run, Received::default())
}

/// The plan for a message as the daemon received it.
pub fn plan_received(
    cfg: &Config,
    dir: Direction,
    analysis: &Analysis,
    raw: &[u8],
    dry_run: bool,
    received: Received,
) -> Plan {
    let policy = cfg.policy(dir);
    let oversize = received.incomplete
        || analysis
            .findings
            .iter()
            .any(|f| f.rule == Rule::MessageTooLarge);
    let mut plan = Plan::new(dir, dry_run, oversize);

    let mut decided: Vec<(Rule, Action)> = analysis
        .findings
        .iter()
        .map(|f| {
            let a = policy.action_for(f.rule, f.fixable);
            // Below the header's threshold a report is only logged, unless a policy key
            // names the rule.
            let a = if a == Action::Report
                && f.severity < cfg.report_min_severity
                && !policy.names(f.rule)
            {
                Action::Log
            } else {
                a
            };
            (f.rule, a)
        })
        .collect();
    if oversize && !decided.iter().any(|(r, _)| *r == Rule::MessageTooLarge) {
        decided.push((Rule::MessageTooLarge, cfg.oversize_action));
    } else if oversize {
        for d in decided
            .iter_mut()
            .filter(|(r, _)| *r == Rule::MessageTooLarge)
        {
            d.1 = d.1.max(cfg.oversize_action);
        }
    }
    plan.decisions = decided.clone();
    plan.verdict = decided
        .iter()
        .map(|(_, a)| *a)
        .max()
        .unwrap_or(Action::Ignore);
    plan.rules = sorted_unique(
        decided
            .iter()
            .filter(|(_, a)| *a != Action::Ignore)
            .map(|(r, _)| *r),
    );
    plan.reported = sorted_unique(
        decided
            .iter()
            .filter(|(_, a)| *a >= Action::Report)
            .map(|(r, _)| *r),
    );
    plan.decided_by = sorted_unique(
        decided
            .iter()
            .filter(|(_, a)| *a == plan.verdict)
            .map(|(r, _)| *r),
    );

    match plan.verdict {
        Action::Reject => {
            plan.reply = Some(reply(&cfg.reject_reply, &plan.decided_by));
            return plan;
        }
        Action::Tempfail => {
            plan.reply = Some(reply(&cfg.tempfail_reply, &plan.decided_by));
            return plan;
        }
        _ => {}
    }

    // The heading is read only for what needs it: a message with nothing to fix (most
    // mail) is not parsed a second time.
    let heading = std::cell::OnceCell::new();
    let heading = || heading.get_or_init(|| Heading::read(raw, cfg));

    // Forged report headers go first: deletions shift the indices of later fields of the
    // same name, so the highest occurrence is deleted first.
    if let Some(name) = &cfg.report_header {
        if dir == Direction::Inbound && cfg.remove_forged {
            let n = received
                .report_fields
                .unwrap_or_else(|| heading().count(name.as_bytes()));
            for index in (1..=n).rev() {
                plan.header_changes.push(HeaderChange {
                    name: name.as_bytes().to_vec(),
                    index,
                    value: None,
                });
            }
        }
    }

    let edits = analysis.edits_for(|f| policy.action_for(f.rule, f.fixable) == Action::Fix);
    let mut nested: Vec<&Edit> = Vec::new();
    let mut applied: Vec<&Edit> = Vec::new();
    for e in edits {
        if e.field.top_level {
            match header_value(&e.replacement, heading().fold_eol) {
                Ok(value) if e.field.name.len() + value.len() + 6 > MAX_PACKET => {
                    // The whole message would tempfail on the write error, again at each
                    // retry: leave the field as it is and say so instead.
                    plan.notes.push(format!(
                        "{} (part 0): not sent: {} octets do not fit in one milter packet",
                        e.field.name,
                        value.len()
                    ))
                }
                Ok(value) => {
                    plan.header_changes.push(HeaderChange {
                        name: e.field.name.as_bytes().to_vec(),
                        index: e.field.occurrence,
                        value: Some(value),
                    });
                    applied.push(e);
                }
                Err(why) => plan
                    .notes
                    .push(format!("{} (part 0): not sent: {why}", e.field.name)),
            }
        } else if received.incomplete {
            plan.notes.push(format!(
                "{} (part {}): not sent: the message was not read whole",
                e.field.name, e.field.part
            ));
        } else if e.range.start < heading().body_start {
            plan.notes.push(format!(
                "{} (part {}): not sent: edit outside the body",
                e.field.name, e.field.part
            ));
        } else {
            nested.push(e);
        }
    }
    if !nested.is_empty() {
        match engine::apply(raw, nested.iter().copied()) {
            Ok(new) => {
                let body = new.get(heading().body_start..).unwrap_or_default().to_vec();
                plan.body = Some(body);
                plan.body_edits = nested.len();
                applied.extend(nested.iter().copied());
            }
            Err(e) => plan.notes.push(format!("body not replaced: {e}")),
        }
    }
    applied.sort_by_key(|e| e.range.start);
    plan.changes = applied
        .iter()
        .filter_map(|e| e.change.clone().map(|c| (e.field.part.clone(), c)))
        .collect();
    let applied_rules: Vec<Rule> = applied
        .iter()
        .flat_map(|e| e.rules.iter().copied())
        .collect();
    plan.fixed = sorted_unique(
        decided
            .iter()
            .filter(|(r, a)| *a == Action::Fix && applied_rules.contains(r))
            .map(|(r, _)| *r),
    );

    if plan.verdict == Action::Quarantine {
        plan.quarantine = Some(expand(&cfg.quarantine_reason, &plan.decided_by));
    }
    if let Some(name) = &cfg.report_header {
        if plan.verdict >= Action::Report || cfg.report_always {
            let value = fold_report(name.len(), &report_value(&plan));
            plan.report = Some((name.clone(), value));
        }
    }
    plan
}

/// The message as the MTA delivers it after `plan`: header changes applied in the order
/// they are sent, the body replaced, the report header added as the last field of the
/// heading (where Postfix and Sendmail put `add_header`, tests/mta/QUIRKS.md). None when
/// the plan refuses the message. For `fix --as-milter` and the reader tests.
pub fn delivered(plan: &Plan, raw: &[u8], cfg: &Config) -> Option<Vec<u8>> {
    if plan.dry_run {
        return Some(raw.to_vec());
    }
    if plan.verdict.refuses() {
        return None;
    }
    let msg = mime::Message::parse(raw, &cfg.limits);
    let Some(e) = msg.entities.first() else {
        return Some(raw.to_vec());
    };
    let eol = e.eol();
    let line_ends = |v: &[u8]| -> Vec<u8> {
        let mut out = Vec::with_capacity(v.len() + 8);
        for (i, &b) in v.iter().enumerate() {
            if b == b'\n' && (i == 0 || v[i - 1] != b'\r') {
                out.extend_from_slice(eol);
            } else {
                out.push(b);
            }
        }
        out
    };
    let fields = msg.fields(e);
    // (name, the whole field as it will be written)
    let mut heading: Vec<(Vec<u8>, Vec<u8>)> = fields
        .iter()
        .map(|f| (raw[f.name.clone()].to_vec(), raw[f.start..f.end].to_vec()))
        .collect();
    for c in &plan.header_changes {
        let Some(at) = heading
            .iter()
            .enumerate()
            .filter(|(_, (n, _))| n.eq_ignore_ascii_case(&c.name))
            .nth(c.index.saturating_sub(1))
            .map(|(i, _)| i)
        else {
            continue;
        };
        match &c.value {
            None => {
                heading.remove(at);
            }
            Some(v) => {
                let mut field = heading[at].0.clone();
                field.push(b':');
                field.extend_from_slice(&line_ends(v));
                field.extend_from_slice(eol);
                heading[at].1 = field;
            }
        }
    }
    if let Some((name, value)) = &plan.report {
        let mut field = name.as_bytes().to_vec();
        field.push(b':');
        field.extend_from_slice(&line_ends(value.as_bytes()));
        field.extend_from_slice(eol);
        heading.push((name.as_bytes().to_vec(), field));
    }
    let fields_end = fields.last().map_or(e.header.start, |f| f.end);
    let body_start = e.body.start.max(fields_end);
    let mut out = Vec::with_capacity(raw.len() + 512);
    out.extend_from_slice(&raw[..e.header.start.min(fields.first().map_or(0, |f| f.start))]);
    for (_, f) in &heading {
        out.extend_from_slice(f);
    }
    out.extend_from_slice(&raw[fields_end..body_start]);
    match &plan.body {
        Some(b) => out.extend_from_slice(b),
        None => out.extend_from_slice(&raw[body_start..]),
    }
    Some(out)
}

/// ` fix; rules=a,b; fixed=a` or ` ok`. The leading space is the field's (LEADING_SPACE).
fn report_value(plan: &Plan) -> String {
    if plan.reported.is_empty() {
        return " ok".into();
    }
    let mut v = format!(" {}; rules={}", plan.verdict, ids(&plan.reported, ","));
    if !plan.fixed.is_empty() {
        v.push_str(&format!("; fixed={}", ids(&plan.fixed, ",")));
    }
    if plan.oversize {
        v.push_str("; oversize");
    }
    // Each changed reference, URLs cut short: the header must stay one sane line.
    for (part, c) in plan.changes.iter().take(REPORT_CHANGES) {
        v.push_str(&format!("; changed={}", change_text(part, c, REPORT_URL)));
    }
    if plan.changes.len() > REPORT_CHANGES {
        v.push_str(&format!(
            "; changed+={}",
            plan.changes.len() - REPORT_CHANGES
        ));
    }
    v
}

/// Folds a report header value so that no line passes 78 octets (RFC 5322 §2.1.1):
/// a line break goes before a space or after a comma. Folds are `\n` + SP, as both
/// MTAs expect in milter header values (tests/mta/QUIRKS.md).
fn fold_report(name_len: usize, value: &str) -> String {
    const LINE: usize = 78;
    let mut pieces: Vec<&str> = Vec::new();
    let mut start = 0;
    for (i, c) in value.char_indices() {
        if c == ' ' && i > start {
            pieces.push(&value[start..i]);
            start = i;
        } else if c == ',' {
            pieces.push(&value[start..=i]);
            start = i + 1;
        }
    }
    pieces.push(&value[start..]);
    let mut out = String::with_capacity(value.len() + value.len() / 32);
    let mut line = name_len + 1;
    for piece in pieces.into_iter().filter(|p| !p.is_empty()) {
        if line + piece.len() > LINE && !out.trim().is_empty() {
            out.push('\n');
            line = 0;
            if !piece.starts_with(' ') {
                out.push(' ');
                line = 1;
            }
        }
        out.push_str(piece);
        line += piece.len();
    }
    out
}

/// Largest milter packet payload (libmilter and indymilter: 1 MiB - 1). A
/// change_header carries a 4-octet index, the name, the value and two NULs.
const MAX_PACKET: usize = 1024 * 1024 - 1;

/// Changed references listed in the report header, and characters of each URL there.
const REPORT_CHANGES: usize = 3;
const REPORT_URL: usize = 60;

/// `2.1 extbody-url-rewritten <old> -> <new>` (or `-> stripped`), URLs cut at `max`.
/// The URLs are already display-safe; cutting them again keeps them so.
pub fn change_text(part: &str, c: &UrlChange, max: usize) -> String {
    let cut = |u: &str| engine::repair::rewrite::display_url(u.as_bytes(), max);
    match &c.new {
        Some(n) => format!("{part} {} <{}> -> <{}>", c.rule, cut(&c.old), cut(n)),
        None => format!("{part} {} <{}> -> stripped", c.rule, cut(&c.old)),
    }
}

fn sorted_unique(it: impl Iterator<Item = Rule>) -> Vec<Rule> {
    let mut v: Vec<Rule> = it.collect();
    v.sort_by_key(|r| r.id());
    v.dedup();
    v
}

fn ids(rules: &[Rule], sep: &str) -> String {
    rules.iter().map(|r| r.id()).collect::<Vec<_>>().join(sep)
}

/// Fills `{rules}` in; whatever the template, no control character reaches the MTA.
fn expand(template: &str, rules: &[Rule]) -> String {
    let s = template.replace("{rules}", &ids(rules, ", "));
    let mut s: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    // SMTP reply lines are capped at 512 octets; libmilter at 980 per line of text.
    if s.len() > 400 {
        let mut cut = 397;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

fn reply(t: &ReplyTemplate, rules: &[Rule]) -> Reply {
    Reply {
        code: t.code.clone(),
        status: t.status.clone(),
        text: expand(&t.text, rules),
    }
}

/// The value for `change_header`: line breaks in the MTA's convention, every one of them
/// followed by white space (a fold), no NUL. Anything else could inject a header line.
fn header_value(replacement: &[u8], eol: &[u8]) -> Result<Vec<u8>, &'static str> {
    if replacement.contains(&0) {
        return Err("value contains NUL");
    }
    let mut out = Vec::with_capacity(replacement.len() + 8);
    let mut i = 0;
    while i < replacement.len() {
        let b = replacement[i];
        let brk = match b {
            b'\r' if replacement.get(i + 1) == Some(&b'\n') => 2,
            b'\n' => 1,
            b'\r' => return Err("value contains a bare CR"),
            _ => 0,
        };
        if brk == 0 {
            out.push(b);
            i += 1;
            continue;
        }
        if !matches!(replacement.get(i + brk), Some(b' ' | b'\t')) {
            return Err("line break not followed by white space");
        }
        out.extend_from_slice(eol);
        i += brk;
    }
    Ok(out)
}

/// The top-level heading as far as the actions need it.
struct Heading {
    /// (name, ) of each top-level field, in order.
    names: Vec<Vec<u8>>,
    body_start: usize,
    /// Line break inside folded values as the MTA sent them (LF, libmilter's
    /// convention, unless the MTA sent CRLF).
    fold_eol: &'static [u8],
}

impl Heading {
    fn read(raw: &[u8], cfg: &Config) -> Heading {
        let msg = mime::Message::parse(raw, &cfg.limits);
        let mut h = Heading {
            names: Vec::new(),
            body_start: raw.len(),
            fold_eol: b"\n",
        };
        if let Some(e) = msg.entities.first() {
            h.body_start = e.body.start;
            for f in msg.fields(e) {
                h.names.push(msg.name(e, f).to_vec());
                let v = msg.value(e, f);
                if v.windows(2).any(|w| w == b"\r\n") {
                    h.fold_eol = b"\r\n";
                }
            }
        }
        h
    }

    fn count(&self, name: &[u8]) -> usize {
        self.names
            .iter()
            .filter(|n| n.eq_ignore_ascii_case(name))
            .count()
    }
}

/// Sends the plan. In dry-run mode nothing is sent and the message is accepted.
pub async fn execute(
    plan: &Plan,
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
        return Ok(plan.status());
    }
    for c in &plan.header_changes {
        let name = cstring(&c.name)?;
        let index = i32::try_from(c.index).map_err(|_| ActionError::InvalidParam)?;
        match &c.value {
            Some(v) => {
                actions
                    .change_header(name, index, Some(cstring(v)?))
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
        actions.add_header(name.as_str(), value.as_str()).await?;
    }
    Ok(plan.status())
}

fn cstring(b: &[u8]) -> Result<std::ffi::CString, ActionError> {
    std::ffi::CString::new(b.to_vec()).map_err(|_| ActionError::InvalidParam)
}

/// Printable form of header bytes: non-UTF-8 and control bytes escaped.
fn show(b: &[u8]) -> String {
    let mut s = String::new();
    for chunk in b.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\r' => s.push_str("\\r"),
                '\n' => s.push_str("\\n"),
                '\t' => s.push_str("\\t"),
                '"' => s.push_str("\\\""),
                '\\' => s.push_str("\\\\"),
                c if c.is_control() => s.push_str(&format!("\\x{:02x}", c as u32)),
                c => s.push(c),
            }
        }
        for b in chunk.invalid() {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = match self.verdict {
            Action::Reject => "reject",
            Action::Tempfail => "tempfail",
            _ => "accept",
        };
        writeln!(f, "direction: {}", self.direction)?;
        writeln!(
            f,
            "verdict: {}{}",
            self.verdict,
            if self.oversize { " (oversize)" } else { "" }
        )?;
        if !self.rules.is_empty() {
            writeln!(f, "rules: {}", ids(&self.rules, " "))?;
        }
        if self.dry_run {
            writeln!(
                f,
                "dry run: nothing is sent; the message is accepted; it would be:"
            )?;
        }
        for c in &self.header_changes {
            match &c.value {
                Some(v) => writeln!(
                    f,
                    "change_header: {} index {} value \"{}\"",
                    show(&c.name),
                    c.index,
                    show(v)
                )?,
                None => writeln!(f, "delete_header: {} index {}", show(&c.name), c.index)?,
            }
        }
        match &self.body {
            Some(b) => writeln!(f, "replace_body: yes, {} octets", b.len())?,
            None => writeln!(f, "replace_body: no")?,
        }
        for (part, c) in &self.changes {
            let what = if c.new.is_some() { "rewrite" } else { "strip" };
            writeln!(
                f,
                "{what}: {}",
                change_text(part, c, engine::repair::rewrite::DISPLAY_MAX)
            )?;
        }
        if let Some(q) = &self.quarantine {
            writeln!(f, "quarantine: \"{}\"", show(q.as_bytes()))?;
        }
        if let Some((n, v)) = &self.report {
            writeln!(f, "add_header: {} value \"{}\"", n, show(v.as_bytes()))?;
        }
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        match &self.reply {
            Some(r) => writeln!(f, "reply: {status} {r}"),
            None => writeln!(f, "reply: {status}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{FieldLoc, Finding};

    fn cfg(extra: &str) -> Config {
        Config::parse(extra, "t").unwrap()
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
    fn report_header_lines_stay_within_78_octets() {
        let rules: Vec<&str> = Rule::ALL.iter().map(|r| r.id()).collect();
        let value = format!(" fix; rules={}; fixed={}; changed=2.1 extbody-url-rewritten <http://a.example/{}> -> <https://a.example/x>", rules.join(","), rules.join(","), "p".repeat(50));
        let folded = fold_report("X-MIMERef".len(), &value);
        assert!(value.len() > 998);
        let mut lines = folded.split('\n');
        assert!("X-MIMERef:".len() + lines.next().unwrap().len() <= 78);
        for l in lines {
            assert!(l.len() <= 78 && l.starts_with(' '), "{l:?}");
        }
        // A fold before a space is just a line break; one after a comma adds a SP.
        assert_eq!(folded.replace(",\n ", ",").replace('\n', ""), value);
        assert_eq!(fold_report(9, " ok"), " ok");
    }

    #[test]
    fn default_policy_fixes_and_reports() {
        let p = plan(&cfg(""), Direction::Inbound, &analysis(), RAW, false);
        assert_eq!(p.verdict, Action::Fix);
        assert_eq!(p.status(), Status::Accept);
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
        assert_eq!(p.status(), Status::Reject);
        let p = plan(&c, Direction::Inbound, &analysis(), RAW, true);
        assert_eq!(p.status(), Status::Accept);
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
    fn header_values_cannot_inject_lines() {
        assert_eq!(header_value(b" a\r\n b", b"\n").unwrap(), b" a\n b");
        assert!(header_value(b" a\r\nX-Evil: 1", b"\n").is_err());
        assert!(header_value(b" a\nX", b"\n").is_err());
        assert!(header_value(b" a\rb", b"\n").is_err());
        assert!(header_value(b" a\0", b"\n").is_err());
        assert_eq!(
            expand("x {rules}\r\ny", &[Rule::RelatedCidDuplicate]),
            "x related-cid-duplicate  y"
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
