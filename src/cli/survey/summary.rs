//! The summary of a survey and its output, as text or JSON.

use std::io::Write;
use std::path::PathBuf;

use super::example::{ranked, Sender};
use super::stats::{Form, RuleStats, Stats};
use super::Context;
use crate::cli::date::ymd;
use crate::cli::printable;
use crate::engine::Rule;
use crate::policy::Action;

/// Forms shown per rule.
pub(super) const SHOWN_FORMS: usize = 5;
/// Senders listed in the summary.
pub(super) const SHOWN_SENDERS: usize = 10;

pub(super) struct Summary<'a> {
    pub(super) ctx: &'a Context,
    pub(super) stats: &'a Stats,
    pub(super) unreadable: &'a [(String, String)],
    pub(super) skipped: &'a [(String, String)],
    pub(super) excluded: &'a [PathBuf],
    pub(super) seconds: f64,
    pub(super) jobs: usize,
}

/// A rule's line of the summary.
pub(super) struct RuleLine<'a> {
    pub(super) rule: Rule,
    pub(super) stats: &'a RuleStats,
    pub(super) forms: Vec<(&'a String, &'a Form)>,
}

impl<'a> Summary<'a> {
    pub(super) fn share(&self, n: u64) -> f64 {
        if self.stats.messages == 0 {
            0.0
        } else {
            n as f64 / self.stats.messages as f64
        }
    }

    /// Rules with findings, most messages first.
    pub(super) fn rules(&self) -> Vec<RuleLine<'a>> {
        let mut v: Vec<RuleLine> = Rule::ALL
            .iter()
            .zip(&self.stats.rules)
            .filter(|(_, s)| s.messages > 0)
            .map(|(r, s)| {
                let mut forms: Vec<(&String, &Form)> = s.forms.iter().collect();
                forms.sort_by_key(|(text, f)| ranked(f.messages, f.example.0, text));
                forms.truncate(SHOWN_FORMS);
                RuleLine {
                    rule: *r,
                    stats: s,
                    forms,
                }
            })
            .collect();
        v.sort_by(|a, b| {
            b.stats
                .messages
                .cmp(&a.stats.messages)
                .then(a.rule.id().cmp(b.rule.id()))
        });
        v
    }

    pub(super) fn actions(counts: &[u64]) -> Vec<(Action, u64)> {
        Action::ALL
            .iter()
            .rev()
            .zip(counts.iter().rev())
            .filter(|(_, n)| **n > 0)
            .map(|(a, n)| (*a, *n))
            .collect()
    }

    pub(super) fn text(&self, out: &mut impl Write) -> std::io::Result<()> {
        let st = self.stats;
        let rate = if self.seconds > 0.0 {
            st.messages as f64 / self.seconds
        } else {
            0.0
        };
        writeln!(
            out,
            "messages: {} ({} with findings) in {:.2} s, {:.0} messages/s on {} worker(s)",
            st.messages, st.with_findings, self.seconds, rate, self.jobs
        )?;
        writeln!(
            out,
            "as the daemon would see them: {} mail, configuration {}",
            self.ctx.direction,
            self.ctx
                .cfg
                .file()
                .map_or("built-in".to_string(), |f| printable(
                    &f.display().to_string()
                )
                .into_owned())
        )?;
        if !self.unreadable.is_empty() {
            writeln!(out, "not read: {}", self.unreadable.len())?;
            for (src, e) in self.unreadable {
                writeln!(out, "  {}: {}", printable(src), printable(e))?;
            }
        }
        if !self.skipped.is_empty() {
            writeln!(out, "skipped: {}", self.skipped.len())?;
            for (src, why) in self.skipped {
                writeln!(out, "  {}: {}", printable(src), printable(why))?;
            }
        }
        if !self.excluded.is_empty() {
            writeln!(out, "excluded (--exclude): {}", self.excluded.len())?;
        }
        self.dates_text(out)?;
        writeln!(out, "\nverdicts:")?;
        for a in Action::ALL.iter().rev() {
            let n = st.verdicts[*a as usize];
            writeln!(
                out,
                "  {:<10} {:>8} {:>7.2}%",
                a.as_str(),
                n,
                100.0 * self.share(n)
            )?;
        }
        if !st.scopes.is_empty() {
            writeln!(out, "\nscopes (messages decided, by verdict):")?;
            for (name, counts) in &st.scopes {
                let n: u64 = counts.iter().sum();
                let by: Vec<String> = Self::actions(counts)
                    .iter()
                    .map(|(a, n)| format!("{a} {n}"))
                    .collect();
                writeln!(out, "  {:<20} {n:>8}  {}", printable(name), by.join(", "))?;
            }
        }
        self.inline_text(out)?;
        self.stats
            .names
            .text(out, |n| self.share(n), SHOWN_SENDERS)?;
        self.signed_text(out)?;
        let rules = self.rules();
        if rules.is_empty() {
            writeln!(out, "\nrules: no findings")?;
            return Ok(());
        }
        writeln!(
            out,
            "\nrules (messages, share of all messages, severity, actions taken):"
        )?;
        for r in &rules {
            let by: Vec<String> = Self::actions(&r.stats.actions)
                .iter()
                .map(|(a, n)| format!("{a} {n}"))
                .collect();
            writeln!(
                out,
                "{}{:<34} {:>8} {:>7.2}%  {:<7}  {}",
                if r.rule.misshows_inline() { "* " } else { "  " },
                r.rule.id(),
                r.stats.messages,
                100.0 * self.share(r.stats.messages),
                r.rule.severity().to_string(),
                by.join(", ")
            )?;
            for (text, f) in &r.forms {
                writeln!(out, "      {:>6}  {text}", f.messages)?;
                writeln!(
                    out,
                    "              e.g. {} {} ({})",
                    printable(&f.example.1),
                    printable(f.example.2.as_deref().unwrap_or("(no Message-ID)")),
                    printable(&f.sender)
                )?;
            }
        }
        Ok(())
    }

    /// The senders of inline images some reader shows wrongly, most messages first.
    pub(super) fn senders(&self) -> Vec<(&String, &Sender)> {
        let mut v: Vec<(&String, &Sender)> = self.stats.inline.senders.iter().collect();
        v.sort_by_key(|(name, s)| ranked(s.messages, s.example.0, name));
        v.truncate(SHOWN_SENDERS);
        v
    }

    fn inline_text(&self, out: &mut impl Write) -> std::io::Result<()> {
        let st = &self.stats.inline;
        writeln!(out, "\ninline images:")?;
        let line = |out: &mut dyn Write, what: &str, n: u64| {
            writeln!(out, "  {what:<44} {n:>8} {:>7.2}%", 100.0 * self.share(n))
        };
        line(
            out,
            "messages whose HTML shows parts of them",
            st.with_images,
        )?;
        line(out, "some reader shows wrongly", st.misshown)?;
        line(out, "the configuration repairs", st.repaired)?;
        if st.misshown == 0 {
            return Ok(());
        }
        writeln!(
            out,
            "  shown wrongly, by sender (messages, repaired; rules: those marked * below):"
        )?;
        for (who, s) in self.senders() {
            writeln!(
                out,
                "      {:>6} {:>6}  {}",
                s.messages,
                s.repaired,
                printable(who)
            )?;
            writeln!(
                out,
                "              e.g. {} {}",
                printable(&s.example.1),
                printable(s.example.2.as_deref().unwrap_or("(no Message-ID)"))
            )?;
        }
        Ok(())
    }

    /// Senders of messages with findings, most first.
    pub(super) fn top_senders(&self) -> Vec<(&String, &Sender)> {
        let mut v: Vec<(&String, &Sender)> = self.stats.senders.iter().collect();
        v.sort_by_key(|(name, s)| ranked(s.messages, s.example.0, name));
        v.truncate(SHOWN_SENDERS);
        v
    }

    /// The first and last day with messages, and the bounds given.
    fn dates_text(&self, out: &mut impl Write) -> std::io::Result<()> {
        let d = &self.stats.dates;
        let span = match (d.days.keys().next(), d.days.keys().next_back()) {
            (Some(a), Some(b)) => format!("{} to {}", ymd(*a), ymd(*b)),
            _ => "none dated".to_string(),
        };
        writeln!(out, "dates: {span}, undated {}", d.undated[0])?;
        if let Some((since, until)) = self.ctx.window {
            writeln!(
                out,
                "left out (--since {} --until {}): {} dated outside, {} undated",
                bound_text(since),
                bound_text(until),
                d.outside,
                d.undated_left_out
            )?;
        }
        Ok(())
    }

    fn signed_text(&self, out: &mut impl Write) -> std::io::Result<()> {
        let st = &self.stats.signed;
        if st.messages == 0 {
            return Ok(());
        }
        writeln!(
            out,
            "\nsigned content (messages where a signature covers a repair on offer):"
        )?;
        let line = |out: &mut dyn Write, what: &str, n: u64| {
            writeln!(out, "  {what:<44} {n:>8} {:>7.2}%", 100.0 * self.share(n))
        };
        line(out, "signed content under a repair", st.messages)?;
        line(out, "repaired", st.repaired_messages)?;
        for (reason, n) in &st.repaired {
            line(out, &format!("  {}", signed_reason(reason)), *n)?;
        }
        line(out, "withheld", st.withheld_messages)?;
        for (reason, n) in &st.withheld {
            line(out, &format!("  {}", signed_reason(reason)), *n)?;
        }
        Ok(())
    }

    pub(super) fn json(&self, out: &mut impl Write) -> std::io::Result<()> {
        use serde_json::{json, Map, Value};
        let st = self.stats;
        let by = |counts: &[u64]| -> Value {
            let mut m = Map::new();
            for (a, n) in Self::actions(counts) {
                m.insert(a.as_str().into(), json!(n));
            }
            Value::Object(m)
        };
        let mut verdicts = Map::new();
        for a in Action::ALL.iter().rev() {
            verdicts.insert(a.as_str().into(), json!(st.verdicts[*a as usize]));
        }
        let scopes: Map<String, Value> =
            st.scopes.iter().map(|(n, c)| (n.clone(), by(c))).collect();
        let rules: Vec<Value> = self
            .rules()
            .iter()
            .map(|r| {
                json!({
                    "rule": r.rule.id(),
                    "severity": r.rule.severity().to_string(),
                    "messages": r.stats.messages,
                    "share": self.share(r.stats.messages),
                    "actions": by(&r.stats.actions),
                    "misshows_inline": r.rule.misshows_inline(),
                    "examples": r.forms.iter().map(|(text, f)| json!({
                        "form": text,
                        "messages": f.messages,
                        "source": f.example.1,
                        "message_id": f.example.2,
                        "sender": f.sender,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        let v = json!({
            "messages": st.messages,
            "with_findings": st.with_findings,
            "direction": self.ctx.direction.as_str(),
            "config": self.ctx.cfg.file().map(|f| f.display().to_string()),
            "workers": self.jobs,
            "seconds": self.seconds,
            "unreadable": self.unreadable.iter().map(|(s, e)| json!({"source": s, "error": e})).collect::<Vec<_>>(),
            "skipped": self.skipped.iter().map(|(s, why)| json!({"source": s, "reason": why})).collect::<Vec<_>>(),
            "excluded": self.excluded.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "verdicts": verdicts,
            "scopes": scopes,
            "rules": rules,
            "names": st.names.json(SHOWN_SENDERS),
            "dates": {
                "first": st.dates.days.keys().next().map(|d| ymd(*d)),
                "last": st.dates.days.keys().next_back().map(|d| ymd(*d)),
                "undated": st.dates.undated[0],
                "since": self.ctx.window.map(|w| bound_text(w.0)),
                "until": self.ctx.window.map(|w| bound_text(w.1)),
                "left_out": {"outside": st.dates.outside, "undated": st.dates.undated_left_out},
            },
            "senders": self.top_senders().iter().map(|(who, s)| json!({
                "sender": who,
                "messages": s.messages,
                "fixed": s.repaired,
                "source": s.example.1,
            })).collect::<Vec<_>>(),
            "signed": {
                "messages": st.signed.messages,
                "repaired": st.signed.repaired_messages,
                "withheld": st.signed.withheld_messages,
                "repaired_by_reason": st.signed.repaired,
                "withheld_by_reason": st.signed.withheld,
            },
            "inline": {
                "with_images": st.inline.with_images,
                "misshown": st.inline.misshown,
                "repaired": st.inline.repaired,
                "senders": self.senders().iter().map(|(who, s)| json!({
                    "sender": who,
                    "messages": s.messages,
                    "repaired": s.repaired,
                    "source": s.example.1,
                    "message_id": s.example.2,
                })).collect::<Vec<_>>(),
            },
        });
        serde_json::to_writer_pretty(&mut *out, &v).map_err(std::io::Error::other)?;
        writeln!(out)
    }
}

/// A bound of `--since`/`--until` as given (a day), or "any" where one is missing.
pub(super) fn bound_text(t: i64) -> String {
    if t == i64::MIN || t == i64::MAX {
        "any".to_string()
    } else {
        ymd(t.div_euclid(86_400))
    }
}

/// A `mimeref_signed_total` reason as the survey's text says it.
fn signed_reason(reason: &str) -> String {
    let what = match reason {
        "bh-broken" => "its body hash no longer matches",
        "verified" => "a trusted verdict recorded at this hop",
        "fix-signed" => "fix_signed = true",
        "no-verdict" => "no trusted verdict at this hop",
        "not-enabled" => "a trusted verdict, but fix_signed is off",
        "relayed" => "a scope keeps fix_signed off",
        "disagree" => "trusted verdicts disagree",
        "unknown" => "cannot tell whether it holds",
        "multipart-signed" => "multipart/signed",
        "smime" => "S/MIME",
        other => other,
    };
    format!("{reason}: {what}")
}
