//! `[reply]`: what a refused message is told, and the reply and quarantine reason a
//! plan carries, with the rule ids that decided it filled in.

use super::Reply;
use crate::engine::Rule;
use crate::policy::ids;

/// `[reply] reject` when not set.
pub const DEFAULT_REJECT_REPLY: &str = "550 5.6.0 MIME reference error: {rules}";
/// `[reply] tempfail` when not set.
pub const DEFAULT_TEMPFAIL_REPLY: &str = "451 4.6.0 MIME reference error: {rules}";
/// `[reply] quarantine` when not set.
pub const DEFAULT_QUARANTINE_REASON: &str = "MIME reference error: {rules}";

/// `[reply]`: what a refused message is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replies {
    pub reject: ReplyTemplate,
    pub tempfail: ReplyTemplate,
    pub quarantine: String,
}

/// An SMTP reply: code, enhanced status code and a text template where `{rules}` stands
/// for the rule ids that decided the verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyTemplate {
    pub code: String,
    pub status: String,
    pub text: String,
}

/// `[reply]` as it is when the file says nothing of it.
impl Default for Replies {
    fn default() -> Self {
        let template = |text, class| match ReplyTemplate::parse(text, class) {
            Ok(t) => t,
            // The defaults above are valid replies; a test keeps them so.
            Err(e) => unreachable!("{e}"),
        };
        Replies {
            reject: template(DEFAULT_REJECT_REPLY, '5'),
            tempfail: template(DEFAULT_TEMPFAIL_REPLY, '4'),
            quarantine: DEFAULT_QUARANTINE_REASON.to_string(),
        }
    }
}

impl ReplyTemplate {
    /// Parses `"550 5.6.0 text"`; `class` is the required first digit (`'5'`/`'4'`).
    pub fn parse(s: &str, class: char) -> Result<ReplyTemplate, String> {
        let mut it = s.splitn(3, ' ');
        let code = it.next().unwrap_or("");
        let status = it.next().unwrap_or("");
        let text = it.next().unwrap_or("").trim();
        let code_ok =
            code.len() == 3 && code.starts_with(class) && code.bytes().all(|b| b.is_ascii_digit());
        if !code_ok {
            return Err(format!(
                "reply {s:?} must start with a {class}xx SMTP code, e.g. \"{class}50 {class}.6.0 text\""
            ));
        }
        let parts: Vec<&str> = status.split('.').collect();
        let status_ok = parts.len() == 3
            && parts[0] == class.to_string()
            && parts[1..]
                .iter()
                .all(|p| (1..=3).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()));
        if !status_ok {
            return Err(format!(
                "reply {s:?}: second word must be an enhanced status code {class}.X.Y (RFC 3463)"
            ));
        }
        if text.is_empty() {
            return Err(format!("reply {s:?} has no text"));
        }
        check_printable(text).map_err(|e| format!("reply {s:?}: {e}"))?;
        Ok(ReplyTemplate {
            code: code.into(),
            status: status.into(),
            text: text.into(),
        })
    }
}

/// Reply texts and header values go to the MTA verbatim: control characters (CR, LF, NUL
/// above all) would break the protocol or smuggle lines.
pub fn check_printable(s: &str) -> Result<(), String> {
    match s.chars().find(|c| c.is_control()) {
        Some(c) => Err(format!("control character {c:?} not allowed")),
        None => Ok(()),
    }
}

/// Fills `{rules}` in; whatever the template, no control character reaches the MTA.
pub(super) fn expand(template: &str, rules: &[Rule]) -> String {
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

pub(super) fn reply(t: &ReplyTemplate, rules: &[Rule]) -> Reply {
    Reply {
        code: t.code.clone(),
        status: t.status.clone(),
        text: expand(&t.text, rules),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_cannot_inject_lines() {
        assert_eq!(
            expand("x {rules}\r\ny", &[Rule::RelatedCidDuplicate]),
            "x related-cid-duplicate  y"
        );
    }
}
