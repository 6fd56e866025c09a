//! The survey's "names and types:" block: messages whose parts some reader shows other
//! than the sender meant (`Rule::misnames_part`): attachments under a made-up name, a
//! forward that opens empty, an image typed wrong, references no recipient can load,
//! the forms of those references, and who sent them.

use std::collections::BTreeMap;
use std::io::Write;

use super::example::{merge_senders, ranked, Sender, Seq};
use crate::cli::mailbox::Message;
use crate::cli::printable;
use crate::engine::{Finding, Rule};
use crate::policy::matching::TopFields;
use crate::policy::Action;

type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// Senders and reference forms kept; more are counted together.
const MAX_KEYS: usize = 10_000;

/// Counts over the messages one worker surveyed.
#[derive(Default)]
pub(super) struct NamesStats {
    /// Messages with a finding of one of the rules.
    pub(super) messages: u64,
    /// Of those: attachments some reader names wrongly (`part-name-*`).
    pub(super) misnamed: u64,
    /// Forwarded messages some reader opens empty (`rfc822-encoded`).
    pub(super) empty_forwards: u64,
    /// Images typed wrong (`ref-image-type`).
    pub(super) wrong_types: u64,
    /// References no recipient loads (`ref-unreachable`, `ref-data-uri`,
    /// `cid-ref-escaped`).
    pub(super) unreachable: u64,
    /// Messages where the configuration fixes one of these findings.
    pub(super) repaired: u64,
    /// Unreachable references by form (`blob:applewebdata`, `file:…/msohtmlclip1`,
    /// `data:`, …): messages and the first example.
    pub(super) forms: HashMap<String, Example>,
    /// By sender form (see `stats::sender`): messages, repaired, the first example.
    pub(super) senders: HashMap<String, Sender>,
}

/// Messages of one reference form and the first of them (input order).
#[derive(Clone)]
pub(super) struct Example {
    pub(super) messages: u64,
    pub(super) example: (Seq, String, Option<String>),
}

impl NamesStats {
    /// Counts one message: its findings and each rule's strongest action.
    pub(super) fn add(
        &mut self,
        seq: Seq,
        m: &Message,
        findings: &[Finding],
        strongest: &BTreeMap<Rule, Action>,
        who: impl FnOnce() -> String,
    ) {
        let ours: Vec<&Finding> = findings.iter().filter(|f| f.rule.misnames_part()).collect();
        if ours.is_empty() {
            return;
        }
        self.messages += 1;
        let has = |rs: &[Rule]| ours.iter().any(|f| rs.contains(&f.rule));
        self.misnamed += u64::from(has(&[
            Rule::PartNameRfc2231Only,
            Rule::PartName8bit,
            Rule::PartNameOneField,
        ]));
        self.empty_forwards += u64::from(has(&[Rule::Rfc822Encoded]));
        self.wrong_types += u64::from(has(&[Rule::RefImageType]));
        self.unreachable += u64::from(has(&[
            Rule::RefUnreachable,
            Rule::RefDataUri,
            Rule::CidRefEscaped,
        ]));
        let repaired = strongest
            .iter()
            .any(|(r, a)| r.misnames_part() && *a == Action::Fix);
        self.repaired += u64::from(repaired);
        let id = TopFields::read(&m.bytes).first_text("Message-ID");
        let example = (seq, m.source.clone(), id);
        let mut forms: Vec<String> = ours.iter().filter_map(|f| reference_form(f)).collect();
        forms.sort();
        forms.dedup();
        for form in forms {
            let key = capped(&self.forms, form, "(other forms)");
            let e = self.forms.entry(key).or_insert_with(|| Example {
                messages: 0,
                example: example.clone(),
            });
            e.messages += 1;
            if seq < e.example.0 {
                e.example = example.clone();
            }
        }
        let key = capped(&self.senders, who(), "(other senders)");
        let s = self.senders.entry(key).or_insert_with(|| Sender {
            messages: 0,
            repaired: 0,
            example: example.clone(),
        });
        s.messages += 1;
        s.repaired += u64::from(repaired);
        if seq < s.example.0 {
            s.example = example;
        }
    }

    pub(super) fn merge(&mut self, o: NamesStats) {
        self.messages += o.messages;
        self.misnamed += o.misnamed;
        self.empty_forwards += o.empty_forwards;
        self.wrong_types += o.wrong_types;
        self.unreachable += o.unreachable;
        self.repaired += o.repaired;
        for (k, e) in o.forms {
            match self.forms.get_mut(&k) {
                Some(m) => {
                    m.messages += e.messages;
                    if e.example.0 < m.example.0 {
                        m.example = e.example;
                    }
                }
                None => {
                    self.forms.insert(k, e);
                }
            }
        }
        merge_senders(&mut self.senders, o.senders);
    }

    /// Reference forms, most messages first (then input order, then text).
    pub(super) fn forms(&self, max: usize) -> Vec<(&String, &Example)> {
        let mut v: Vec<(&String, &Example)> = self.forms.iter().collect();
        v.sort_by_key(|(k, e)| ranked(e.messages, e.example.0, k));
        v.truncate(max);
        v
    }

    /// Senders, most messages first.
    pub(super) fn senders(&self, max: usize) -> Vec<(&String, &Sender)> {
        let mut v: Vec<(&String, &Sender)> = self.senders.iter().collect();
        v.sort_by_key(|(k, s)| ranked(s.messages, s.example.0, k));
        v.truncate(max);
        v
    }

    /// The block as text; `share` gives a count's share of all messages.
    pub(super) fn text(
        &self,
        out: &mut impl Write,
        share: impl Fn(u64) -> f64,
        shown: usize,
    ) -> std::io::Result<()> {
        writeln!(out, "\nnames and types:")?;
        let line = |out: &mut dyn Write, what: &str, n: u64| {
            writeln!(out, "  {what:<44} {n:>8} {:>7.2}%", 100.0 * share(n))
        };
        line(out, "some reader shows a part otherwise", self.messages)?;
        line(out, "attachments named wrongly", self.misnamed)?;
        line(out, "forwards that open empty", self.empty_forwards)?;
        line(out, "images typed wrong", self.wrong_types)?;
        line(out, "references no recipient loads", self.unreachable)?;
        line(out, "the configuration repairs", self.repaired)?;
        if self.messages == 0 {
            return Ok(());
        }
        if !self.forms.is_empty() {
            writeln!(out, "  references no recipient loads, by form (messages):")?;
            for (form, e) in self.forms(shown) {
                writeln!(out, "      {:>6}  {}", e.messages, printable(form))?;
                writeln!(out, "              e.g. {}", example_text(&e.example))?;
            }
        }
        writeln!(out, "  by sender (messages, repaired):")?;
        for (who, s) in self.senders(shown) {
            writeln!(
                out,
                "      {:>6} {:>6}  {}",
                s.messages,
                s.repaired,
                printable(who)
            )?;
            writeln!(out, "              e.g. {}", example_text(&s.example))?;
        }
        Ok(())
    }

    /// The block as JSON.
    pub(super) fn json(&self, shown: usize) -> serde_json::Value {
        use serde_json::json;
        json!({
            "messages": self.messages,
            "misnamed": self.misnamed,
            "empty_forwards": self.empty_forwards,
            "wrong_types": self.wrong_types,
            "unreachable": self.unreachable,
            "repaired": self.repaired,
            "forms": self.forms(shown).iter().map(|(f, e)| json!({
                "form": f,
                "messages": e.messages,
                "source": e.example.1,
                "message_id": e.example.2,
            })).collect::<Vec<_>>(),
            "senders": self.senders(shown).iter().map(|(who, s)| json!({
                "sender": who,
                "messages": s.messages,
                "repaired": s.repaired,
                "source": s.example.1,
                "message_id": s.example.2,
            })).collect::<Vec<_>>(),
        })
    }
}

fn example_text(e: &(Seq, String, Option<String>)) -> String {
    format!(
        "{} {}",
        printable(&e.1),
        printable(e.2.as_deref().unwrap_or("(no Message-ID)"))
    )
}

/// `key`, or `other` once `map` holds `MAX_KEYS` keys and not this one.
fn capped<V>(map: &HashMap<String, V>, key: String, other: &str) -> String {
    if map.len() >= MAX_KEYS && !map.contains_key(&key) {
        other.to_string()
    } else {
        key
    }
}

/// The form of a reference no recipient loads, as an admin recognises who wrote it: the
/// scheme, with the mark of the composer where the URL has one (`blob:applewebdata`:
/// Apple Mail and iOS; `file:…/msohtmlclip1`: Word or Outlook paste). The URL is the
/// first quoted value of the finding that has a colon. None for other rules.
pub(super) fn reference_form(f: &Finding) -> Option<String> {
    match f.rule {
        Rule::RefDataUri => return Some("data:".into()),
        Rule::CidRefEscaped => return Some("cid: (%-encoded or with white space)".into()),
        Rule::RefUnreachable => {}
        _ => return None,
    }
    let url = f
        .message
        .split('"')
        .skip(1)
        .step_by(2)
        .find(|q| q.contains(':'))
        .unwrap_or("");
    let lower = url.to_ascii_lowercase();
    let scheme = lower.split(':').next().unwrap_or("").trim();
    let form = match scheme {
        "blob" if lower.contains("applewebdata") => "blob:applewebdata".to_string(),
        "file" if lower.contains("msohtmlclip") => "file:…/msohtmlclip1".to_string(),
        "" => "(no URL in the finding)".to_string(),
        "http" | "https" => {
            let host = lower
                .split("//")
                .nth(1)
                .and_then(|r| r.split(['/', ':', '?', '#']).next())
                .unwrap_or("");
            if host.ends_with(".local") {
                format!("{scheme}://….local")
            } else {
                format!("{scheme}://{host}")
            }
        }
        s => format!("{s}:"),
    };
    Some(form)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_forms_name_the_composer() {
        let f = |rule, msg: &str| reference_form(&Finding::new(rule, "1", msg));
        assert_eq!(
            f(
                Rule::RefUnreachable,
                "img@src \"blob:applewebdata://A1B2/x.png\" in part 1"
            )
            .as_deref(),
            Some("blob:applewebdata")
        );
        assert_eq!(
            f(Rule::RefUnreachable, "img@src \"file:///C:/Users/x/AppData/Local/Temp/msohtmlclip1/01/clip_image001.png\"").as_deref(),
            Some("file:…/msohtmlclip1")
        );
        assert_eq!(
            f(
                Rule::RefUnreachable,
                "img@src \"imap://bob@mail.example.org:993/fetch%3EUID%3E/INBOX%3E12?part=1.2\""
            )
            .as_deref(),
            Some("imap:")
        );
        assert_eq!(
            f(
                Rule::RefUnreachable,
                "img@src \"http://printer.local/logo.png\""
            )
            .as_deref(),
            Some("http://….local")
        );
        assert_eq!(
            f(
                Rule::RefUnreachable,
                "img@src \"http://127.0.0.1:8080/a.png\""
            )
            .as_deref(),
            Some("http://127.0.0.1")
        );
        assert_eq!(f(Rule::RefDataUri, "x").as_deref(), Some("data:"));
        assert_eq!(f(Rule::RelatedRefDangling, "\"cid:x\""), None);
    }
}
