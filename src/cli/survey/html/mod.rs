//! `survey --format html`: the summary as one page an admin can open or forward.
//!
//! The page is one file that asks for nothing: no script, no font, no image but inline
//! SVG, and a Content-Security-Policy that forbids the rest, so that mail quoted in it
//! (names, subjects, Message-IDs: anything a sender wrote) can never run or call out.
//! Every such value goes through [`text`]: control characters shown as escapes, URLs
//! redacted as the logs redact them, then HTML-escaped. Every list is capped, so the
//! page stays small whatever the survey's size.
//!
//! The figures carry `data-` attributes (`data-figure`, `data-verdict`, `data-rule`,
//! `data-bucket`, `data-sender`) so that tests, and scripts of admins, read them back
//! without scraping the text.

use std::fmt::Write as _;
use std::io::Write;

use super::summary::{bound_text, Summary, SHOWN_FORMS};
use crate::cli::mailbox;
use crate::cli::printable;
use crate::engine::{Rule, Severity};
use crate::policy::redact::redact;
use crate::policy::Action;

mod chart;
mod readers;

/// Characters of a header field value shown before and after a fix.
const FIELD_MAX: usize = 400;
/// Rules drawn in the rules chart and detailed below it.
const SHOWN_RULES: usize = 40;

/// `s` as it may stand in the page: see the top.
pub(super) fn text(s: &str) -> String {
    escape(&redact(&printable(s)))
}

/// HTML-escaped, for text and for attribute values in double quotes.
pub(super) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// At most `max` characters of `s`, an ellipsis standing for the rest.
fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

const STYLE: &str = include_str!("page.css");

/// A colour per action, the same in every chart and in the legend.
pub(super) fn action_colour(a: Action) -> &'static str {
    match a {
        Action::Ignore => "#9aa5b1",
        Action::Log => "#6b7c8f",
        Action::Report => "#2f6fb3",
        Action::Fix => "#2e8b57",
        Action::Quarantine => "#c47f00",
        Action::Tempfail => "#b35900",
        Action::Reject => "#b22222",
    }
}

fn severity_class(s: Severity) -> &'static str {
    match s {
        Severity::Info => "sev-info",
        Severity::Warning => "sev-warning",
        Severity::Error => "sev-error",
    }
}

/// A shell word for `s`: quoted when it holds anything but safe characters.
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-:+=@,%".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

pub(super) fn page(s: &Summary, out: &mut impl Write) -> std::io::Result<()> {
    let mut h = String::with_capacity(64 << 10);
    // `fmt::Write` into a String does not fail.
    let _ = build(s, &mut h);
    out.write_all(h.as_bytes())
}

fn build(s: &Summary, h: &mut String) -> std::fmt::Result {
    let st = s.stats;
    let cfg_name = s
        .ctx
        .cfg
        .file()
        .map_or("built-in".to_string(), |f| f.display().to_string());
    writeln!(h, "<!DOCTYPE html>")?;
    writeln!(h, "<html lang=\"en\"><head><meta charset=\"utf-8\">")?;
    writeln!(
        h,
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">"
    )?;
    writeln!(
        h,
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
    )?;
    writeln!(h, "<title>mimeref-milter survey</title>")?;
    writeln!(h, "<style>{STYLE}</style></head><body>")?;
    writeln!(
        h,
        "<header><h1>What mimeref-milter would do to this mail</h1>"
    )?;
    write!(
        h,
        "<p class=\"run\">As the daemon would see them: <b id=\"direction\">{}</b> mail, configuration <code id=\"config\">{}</code>; {} messages in {:.1} s on {} worker(s); mimeref-milter {}.",
        s.ctx.direction,
        text(&cfg_name),
        st.messages,
        s.seconds,
        s.jobs,
        env!("CARGO_PKG_VERSION")
    )?;
    if let Some((since, until)) = s.ctx.window {
        write!(
            h,
            " Written from <b id=\"since\">{}</b> to <b id=\"until\">{}</b> (UTC, by the Date field, else the mbox From line): <span data-figure=\"outside\" data-value=\"{}\">{}</span> messages dated outside and <span data-figure=\"undated-left-out\" data-value=\"{}\">{}</span> undated ones left out.",
            bound_text(since),
            bound_text(until),
            st.dates.outside,
            st.dates.outside,
            st.dates.undated_left_out,
            st.dates.undated_left_out
        )?;
    }
    writeln!(h, "</p></header><main>")?;
    tiles(s, h)?;
    not_read(s, h)?;
    writeln!(
        h,
        "<section id=\"charts\"><h2>At a glance</h2><div class=\"grid\">"
    )?;
    chart::verdicts(s, h)?;
    chart::timeline(s, h)?;
    chart::rules(s, h, SHOWN_RULES)?;
    chart::senders(s, h)?;
    writeln!(h, "</div></section>")?;
    blocks(s, h)?;
    rules(s, h)?;
    writeln!(
        h,
        "</main><footer><p>Every value from mail is shown escaped, URLs without passwords and queries; lists are cut to their first entries. Reproduce an example with the command under it.</p></footer></body></html>"
    )
}

fn tile(h: &mut String, id: &str, label: &str, n: u64, of: u64) -> std::fmt::Result {
    let share = if of == 0 {
        0.0
    } else {
        100.0 * n as f64 / of as f64
    };
    writeln!(
        h,
        "<div class=\"tile\" data-figure=\"{id}\" data-value=\"{n}\"><span class=\"n\">{n}</span><span class=\"l\">{label}</span><span class=\"p\">{share:.1}%</span></div>"
    )
}

fn tiles(s: &Summary, h: &mut String) -> std::fmt::Result {
    let st = s.stats;
    let v = |a: Action| st.verdicts[a as usize];
    let all = st.messages;
    writeln!(h, "<section id=\"tiles\" class=\"tiles\">")?;
    tile(h, "messages", "messages", all, all)?;
    tile(h, "with-findings", "with findings", st.with_findings, all)?;
    tile(h, "fixed", "fixed", v(Action::Fix), all)?;
    tile(h, "reported", "reported", v(Action::Report), all)?;
    tile(
        h,
        "rejected-held",
        "rejected, held or deferred",
        v(Action::Reject) + v(Action::Quarantine) + v(Action::Tempfail),
        all,
    )?;
    writeln!(h, "</section>")
}

fn not_read(s: &Summary, h: &mut String) -> std::fmt::Result {
    if s.unreadable.is_empty() && s.skipped.is_empty() && s.excluded.is_empty() {
        return Ok(());
    }
    writeln!(
        h,
        "<section id=\"not-read\"><h2>Not read</h2><ul class=\"plain\">"
    )?;
    let list = |h: &mut String, what: &str, v: &[(String, String)]| -> std::fmt::Result {
        for (src, why) in v.iter().take(10) {
            writeln!(
                h,
                "<li>{what}: <code>{}</code>: {}</li>",
                text(src),
                text(why)
            )?;
        }
        if v.len() > 10 {
            writeln!(h, "<li>and {} more</li>", v.len() - 10)?;
        }
        Ok(())
    };
    list(h, "not read", s.unreadable)?;
    list(h, "skipped", s.skipped)?;
    if !s.excluded.is_empty() {
        writeln!(h, "<li>excluded (--exclude): {}</li>", s.excluded.len())?;
    }
    writeln!(h, "</ul></section>")
}

/// A table of (label, messages, share) rows under a heading, as the text's blocks.
fn block(
    s: &Summary,
    h: &mut String,
    id: &str,
    title: &str,
    rows: &[(&str, &str, u64)],
) -> std::fmt::Result {
    writeln!(
        h,
        "<div class=\"block\" id=\"{id}\"><h3>{title}</h3><table><tbody>"
    )?;
    for (key, label, n) in rows {
        writeln!(
            h,
            "<tr data-figure=\"{id}-{key}\" data-value=\"{n}\"><th scope=\"row\">{label}</th><td class=\"num\">{n}</td><td class=\"num\">{:.2}%</td></tr>",
            100.0 * s.share(*n)
        )?;
    }
    writeln!(h, "</tbody></table>")
}

/// A list of (what, messages, repaired, example source) under a block.
fn examples(
    h: &mut String,
    title: &str,
    rows: &[(&String, u64, Option<u64>, &str)],
) -> std::fmt::Result {
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(
        h,
        "<table class=\"list\"><caption>{title}</caption><thead><tr><th>messages</th><th>fixed</th><th>what</th></tr></thead><tbody>"
    )?;
    for (what, n, fixed, src) in rows {
        writeln!(
            h,
            "<tr><td class=\"num\">{n}</td><td class=\"num\">{}</td><td><span class=\"v\">{}</span><br><small>e.g. <code>{}</code></small></td></tr>",
            fixed.map_or("".to_string(), |f| f.to_string()),
            text(what),
            text(src)
        )?;
    }
    writeln!(h, "</tbody></table>")
}

fn blocks(s: &Summary, h: &mut String) -> std::fmt::Result {
    let st = s.stats;
    writeln!(
        h,
        "<section id=\"blocks\"><h2>Inline images, names and types</h2><div class=\"grid\">"
    )?;
    let i = &st.inline;
    block(
        s,
        h,
        "inline",
        "inline images:",
        &[
            (
                "with-images",
                "messages whose HTML shows parts of them",
                i.with_images,
            ),
            ("misshown", "some reader shows wrongly", i.misshown),
            ("repaired", "the configuration repairs", i.repaired),
        ],
    )?;
    let senders: Vec<_> = s
        .senders()
        .into_iter()
        .map(|(w, x)| (w, x.messages, Some(x.repaired), x.example.1.as_str()))
        .collect();
    examples(h, "shown wrongly, by sender", &senders)?;
    writeln!(h, "</div>")?;
    let n = &st.names;
    block(
        s,
        h,
        "names",
        "names and types:",
        &[
            ("messages", "some reader shows a part otherwise", n.messages),
            ("misnamed", "attachments named wrongly", n.misnamed),
            (
                "empty-forwards",
                "forwards that open empty",
                n.empty_forwards,
            ),
            ("wrong-types", "images typed wrong", n.wrong_types),
            (
                "unreachable",
                "references no recipient loads",
                n.unreachable,
            ),
            ("repaired", "the configuration repairs", n.repaired),
        ],
    )?;
    let forms: Vec<_> = n
        .forms(super::summary::SHOWN_SENDERS)
        .into_iter()
        .map(|(w, x)| (w, x.messages, None, x.example.1.as_str()))
        .collect();
    examples(h, "references no recipient loads, by form", &forms)?;
    let senders: Vec<_> = n
        .senders(super::summary::SHOWN_SENDERS)
        .into_iter()
        .map(|(w, x)| (w, x.messages, Some(x.repaired), x.example.1.as_str()))
        .collect();
    examples(h, "by sender", &senders)?;
    writeln!(h, "</div>")?;
    let sg = &st.signed;
    if sg.messages > 0 {
        block(
            s,
            h,
            "signed",
            "signed content under a repair:",
            &[
                ("messages", "signed content under a repair", sg.messages),
                ("repaired", "repaired", sg.repaired_messages),
                ("withheld", "withheld", sg.withheld_messages),
            ],
        )?;
        writeln!(h, "</div>")?;
    }
    if !st.scopes.is_empty() {
        writeln!(h, "<div class=\"block\" id=\"scopes\"><h3>scopes (messages decided, by verdict):</h3><table><tbody>")?;
        for (name, counts) in st.scopes.iter().take(20) {
            let total: u64 = counts.iter().sum();
            let by: Vec<String> = Summary::actions(counts)
                .iter()
                .map(|(a, n)| format!("{a} {n}"))
                .collect();
            writeln!(
                h,
                "<tr data-scope=\"{}\" data-value=\"{total}\"><th scope=\"row\">{}</th><td class=\"num\">{total}</td><td>{}</td></tr>",
                text(name),
                text(name),
                by.join(", ")
            )?;
        }
        writeln!(h, "</tbody></table></div>")?;
    }
    writeln!(h, "</div></section>")
}

/// What the configuration does for `rule` to the message at `source`, as
/// `check --actions` plans it: the rule's strongest action there, and the header fields
/// and URLs it changes, before and after: (what, before, after).
fn fixes(s: &Summary, source: &str, rule: Rule) -> (Option<Action>, Vec<(String, String, String)>) {
    let cfg = &s.ctx.cfg;
    let mut action = None;
    let mut found = Vec::new();
    let _ = mailbox::given(
        std::path::Path::new(source),
        cfg.limits().max_message_size,
        &mut |m| {
            let given = crate::cli::received(cfg, &m);
            let (analysis, scopes) =
                crate::cli::analyse(cfg, s.ctx.direction, &s.ctx.envelope, &s.ctx.opts, &given);
            let plan = crate::cli::daemon_plan(cfg, s.ctx.direction, &analysis, &given, &scopes);
            action = plan
                .decisions
                .iter()
                .filter(|(r, _)| *r == rule)
                .map(|(_, a)| *a)
                .max();
            let show = |v: Option<&[u8]>| {
                v.map_or("(none)".to_string(), |b| {
                    cut(&String::from_utf8_lossy(b), FIELD_MAX)
                })
            };
            for c in plan
                .field_changes
                .iter()
                .filter(|c| c.rules.contains(&rule))
                .take(2)
            {
                found.push((
                    format!("{} (part {})", c.name, c.part),
                    show(c.old.as_deref()),
                    show(c.new.as_deref()),
                ));
            }
            for (part, c) in plan.changes.iter().filter(|(_, c)| c.rule == rule).take(2) {
                found.push((
                    format!("URL (part {part})"),
                    cut(&c.old, FIELD_MAX),
                    c.new
                        .as_deref()
                        .map_or("(stripped)".to_string(), |n| cut(n, FIELD_MAX)),
                ));
            }
            false
        },
    );
    (action, found)
}

fn rules(s: &Summary, h: &mut String) -> std::fmt::Result {
    let rules = s.rules();
    writeln!(
        h,
        "<section id=\"rules\"><h2>Rules, their forms and an example of each</h2>"
    )?;
    if rules.is_empty() {
        writeln!(h, "<p>No findings.</p></section>")?;
        return Ok(());
    }
    for r in rules.iter().take(SHOWN_RULES) {
        let by: Vec<String> = Summary::actions(&r.stats.actions)
            .iter()
            .map(|(a, n)| format!("{a} {n}"))
            .collect();
        writeln!(
            h,
            "<article class=\"rule\" data-rule=\"{id}\" data-messages=\"{n}\"><h3 id=\"rule-{id}\"><code>{id}</code> <span class=\"badge {sev}\">{sevname}</span></h3><p>{n} messages ({share:.2}%); actions taken: {by}{star}.</p>",
            id = r.rule.id(),
            n = r.stats.messages,
            sev = severity_class(r.rule.severity()),
            sevname = r.rule.severity(),
            share = 100.0 * s.share(r.stats.messages),
            by = by.join(", "),
            star = if r.rule.misshows_inline() {
                "; a reader shows inline images of such messages wrongly"
            } else {
                ""
            }
        )?;
        readers::table(r.rule, h)?;
        for (form, f) in r.forms.iter().take(SHOWN_FORMS) {
            writeln!(
                h,
                "<div class=\"form\"><p class=\"v\"><b>{}</b> messages: {}</p>",
                f.messages,
                text(form)
            )?;
            writeln!(
                h,
                "<p class=\"eg\">e.g. <code>{}</code> {} ({})</p>",
                text(&f.example.1),
                text(f.example.2.as_deref().unwrap_or("(no Message-ID)")),
                text(&f.sender)
            )?;
            let (action, changes) = fixes(s, &f.example.1, r.rule);
            if changes.is_empty() {
                // Say why nothing is shown: a reader of the page would look for a fix.
                let why = match action {
                    Some(a) => format!("the configuration changes nothing for it here ({a})"),
                    None => "the message could not be read again".to_string(),
                };
                writeln!(h, "<p class=\"eg\">{why}.</p>")?;
            } else {
                writeln!(h, "<table class=\"fix\"><thead><tr><th>field</th><th>before</th><th>after the fix</th></tr></thead><tbody>")?;
                for (name, old, new) in changes {
                    writeln!(
                        h,
                        "<tr><td><code>{}</code></td><td data-label=\"before\"><code class=\"v\">{}</code></td><td data-label=\"after the fix\"><code class=\"v\">{}</code></td></tr>",
                        text(&name),
                        text(&old),
                        text(&new)
                    )?;
                }
                writeln!(h, "</tbody></table>")?;
            }
            let mut cmd = "mimeref-milter check --actions".to_string();
            for a in s.ctx.check_args.iter().chain([&f.example.1]) {
                let _ = write!(cmd, " {}", shell_word(a));
            }
            writeln!(h, "<pre class=\"cmd\">{}</pre></div>", text(&cmd))?;
        }
        writeln!(h, "</article>")?;
    }
    if rules.len() > SHOWN_RULES {
        writeln!(
            h,
            "<p>and {} rules more (see the JSON output).</p>",
            rules.len() - SHOWN_RULES
        )?;
    }
    writeln!(h, "</section>")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_text_are_quoted_for_their_place() {
        assert_eq!(shell_word("box.mbox:48213"), "box.mbox:48213");
        assert_eq!(shell_word("Mail/a b"), "'Mail/a b'");
        assert_eq!(shell_word("o'brien"), r"'o'\''brien'");
        assert_eq!(shell_word("$(rm -rf ~)"), "'$(rm -rf ~)'");
        assert_eq!(shell_word(""), "''");
        assert_eq!(
            text("<b onclick=\"x\">'\u{1b}' http://u:pw@h/p?t=1"),
            "&lt;b onclick=&quot;x&quot;&gt;&#39;\\u{1b}&#39; http://u:***@h/p?***"
        );
        assert_eq!(cut("abcdef", 3), "abc…");
        assert_eq!(cut("abc", 3), "abc");
    }
}
