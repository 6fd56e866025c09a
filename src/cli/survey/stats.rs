//! What a survey counts per message: verdicts, scopes, rules and the forms of their
//! findings, inline images and who sent them.

use std::collections::BTreeMap;

use super::example::{merge_senders, Sender, Seq};
use super::Context;
use crate::cli::mailbox::Message;
use crate::engine::Rule;
use crate::policy::matching::TopFields;
use crate::policy::Action;

type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// Forms of findings kept per rule; more are counted together.
const MAX_FORMS: usize = 10_000;

/// Counts over the messages one worker surveyed.
#[derive(Default)]
pub(super) struct Stats {
    pub(super) messages: u64,
    pub(super) with_findings: u64,
    pub(super) verdicts: [u64; Action::ALL.len()],
    /// Messages per deciding scope and verdict.
    pub(super) scopes: BTreeMap<String, [u64; Action::ALL.len()]>,
    /// Indexed like `Rule::ALL`.
    pub(super) rules: Vec<RuleStats>,
    /// Messages whose analysis failed: (input order, source, why).
    pub(super) failed: Vec<(Seq, String, String)>,
    known_forms: KnownForms,
    pub(super) inline: InlineStats,
    pub(super) signed: SignedStats,
    pub(super) names: super::names::NamesStats,
    pub(super) dates: DateStats,
    /// Messages with findings by sender ([`sender`]): (messages, first example).
    pub(super) senders: HashMap<String, Sender>,
}

/// When the messages were written ([`super::date`]), and those `--since`/`--until` left
/// out.
#[derive(Default)]
pub(super) struct DateStats {
    /// By day since 1970 (UTC): messages, messages with findings.
    pub(super) days: BTreeMap<i64, [u64; 2]>,
    /// Messages without a date that can be read and believed: messages, with findings.
    pub(super) undated: [u64; 2],
    /// Left out by `--since`/`--until`: dated outside the bounds, and undated.
    pub(super) outside: u64,
    pub(super) undated_left_out: u64,
}

/// Messages where a signature covered a repair on offer: per reason, the messages where
/// such a repair is made and where it is withheld (a message with two signatures may
/// count under two reasons).
#[derive(Default)]
pub(super) struct SignedStats {
    pub(super) messages: u64,
    pub(super) repaired_messages: u64,
    pub(super) withheld_messages: u64,
    pub(super) repaired: BTreeMap<&'static str, u64>,
    pub(super) withheld: BTreeMap<&'static str, u64>,
}

impl SignedStats {
    fn add(&mut self, outcomes: &[crate::policy::plan::SignedOutcome]) {
        if outcomes.is_empty() {
            return;
        }
        self.messages += 1;
        let mut seen: Vec<(bool, &'static str)> = Vec::new();
        for o in outcomes {
            if !seen.contains(&(o.repaired, o.reason)) {
                seen.push((o.repaired, o.reason));
                let by = if o.repaired {
                    &mut self.repaired
                } else {
                    &mut self.withheld
                };
                *by.entry(o.reason).or_default() += 1;
            }
        }
        self.repaired_messages += u64::from(seen.iter().any(|s| s.0));
        self.withheld_messages += u64::from(seen.iter().any(|s| !s.0));
    }

    fn merge(&mut self, o: SignedStats) {
        self.messages += o.messages;
        self.repaired_messages += o.repaired_messages;
        self.withheld_messages += o.withheld_messages;
        for (k, n) in o.repaired {
            *self.repaired.entry(k).or_default() += n;
        }
        for (k, n) in o.withheld {
            *self.withheld.entry(k).or_default() += n;
        }
    }
}

/// Inline images: how many messages show some, how many of them some reader shows
/// wrongly (`Rule::misshows_inline`), what the configuration repairs, and who sent them.
#[derive(Default)]
pub(super) struct InlineStats {
    /// Messages whose HTML shows parts of the message.
    pub(super) with_images: u64,
    /// Messages with a finding of a rule under which a reader shows an inline part
    /// wrongly.
    pub(super) misshown: u64,
    /// Of those, messages where the configuration fixes such a finding.
    pub(super) repaired: u64,
    /// By sender form (see [`sender`]): messages, repaired, the first example.
    pub(super) senders: HashMap<String, Sender>,
}

/// Sender forms kept; more are counted together.
const MAX_SENDERS: usize = 10_000;

/// Who produced a message, as an admin recognises it: its `X-Mailer`, else its
/// `User-Agent`, else the domain of its Message-ID (its last three labels: Gmail and
/// Exchange Online set no X-Mailer, but their ids say `mail.gmail.com` and
/// `prod.outlook.com`). Digits are kept: a version is part of the answer.
fn sender(raw: &[u8]) -> String {
    let fields = TopFields::read(raw);
    for name in ["X-Mailer", "User-Agent"] {
        if let Some(v) = fields.first_text(name).filter(|v| !v.is_empty()) {
            let v: String = v.chars().take(60).collect();
            return format!("{name}: {v}");
        }
    }
    let domain = fields.first_text("Message-ID").and_then(|id| {
        let right = id
            .trim()
            .trim_matches(['<', '>'])
            .rsplit_once('@')?
            .1
            .to_string();
        let labels: Vec<&str> = right.split('.').collect();
        let keep = labels.len().saturating_sub(3);
        Some(labels[keep..].join(".").to_ascii_lowercase())
    });
    match domain {
        Some(d) if !d.is_empty() => {
            format!("Message-ID @{}", d.chars().take(60).collect::<String>())
        }
        _ => "(no X-Mailer, User-Agent or Message-ID)".to_string(),
    }
}

/// The forms of finding messages already seen: mail from the same sender or software
/// repeats its defects word for word, and a look-up costs a tenth of [`form`].
#[derive(Default)]
struct KnownForms(HashMap<String, String>);

impl KnownForms {
    /// Finding messages remembered; past them each is masked anew.
    const MAX: usize = 4096;

    fn form(&mut self, message: &str) -> String {
        if let Some(f) = self.0.get(message) {
            return f.clone();
        }
        let f = form(message);
        if self.0.len() < Self::MAX {
            self.0.insert(message.to_string(), f.clone());
        }
        f
    }
}

#[derive(Default, Clone)]
pub(super) struct RuleStats {
    pub(super) messages: u64,
    /// Messages per action this rule got in them.
    pub(super) actions: [u64; Action::ALL.len()],
    /// foldhash: one lookup per finding, on strings SipHash is slow for.
    pub(super) forms: HashMap<String, Form>,
}

#[derive(Clone)]
pub(super) struct Form {
    pub(super) messages: u64,
    /// The first message (in input order) with this form: (order, source, Message-ID).
    pub(super) example: (Seq, String, Option<String>),
    /// What sent that example ([`sender`]).
    pub(super) sender: String,
}

fn rule_index(r: Rule) -> usize {
    Rule::ALL.iter().position(|x| *x == r).unwrap_or(0)
}

impl Stats {
    pub(super) fn add(&mut self, ctx: &Context, seq: Seq, m: &Message) {
        let date = crate::cli::date::of_message(&m.bytes, m.envelope_date, ctx.now);
        if let Some((since, until)) = ctx.window {
            match date {
                None => {
                    self.dates.undated_left_out += 1;
                    return;
                }
                Some(t) if t < since || t > until => {
                    self.dates.outside += 1;
                    return;
                }
                Some(_) => {}
            }
        }
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ctx.one(m)));
        let Ok((findings, plan, shown_parts)) = run else {
            self.failed
                .push((seq, m.source.clone(), "the analysis failed (panic)".into()));
            return;
        };
        if self.rules.is_empty() {
            self.rules = vec![RuleStats::default(); Rule::ALL.len()];
        }
        self.messages += 1;
        self.with_findings += u64::from(!findings.is_empty());
        let slot = match date {
            Some(t) => self.dates.days.entry(t.div_euclid(86_400)).or_default(),
            None => &mut self.dates.undated,
        };
        slot[0] += 1;
        slot[1] += u64::from(!findings.is_empty());
        self.verdicts[plan.verdict as usize] += 1;
        self.signed.add(&plan.signed);
        if let Some(s) = &plan.scope {
            self.scopes.entry(s.clone()).or_default()[plan.verdict as usize] += 1;
        }
        // Per rule: the strongest action it got in this message.
        let mut strongest: BTreeMap<Rule, Action> = BTreeMap::new();
        for (r, a) in &plan.decisions {
            let e = strongest.entry(*r).or_insert(*a);
            *e = (*e).max(*a);
        }
        let mut message_id = None;
        let mut from = None;
        self.count_inline(seq, m, &strongest, shown_parts, &mut message_id, &mut from);
        self.names.add(seq, m, &findings, &strongest, || {
            from.get_or_insert_with(|| sender(&m.bytes)).clone()
        });
        if !findings.is_empty() {
            let who = from.get_or_insert_with(|| sender(&m.bytes)).clone();
            let key = if self.senders.len() >= MAX_SENDERS && !self.senders.contains_key(&who) {
                "(other senders)".to_string()
            } else {
                who
            };
            let fixed = u64::from(plan.decisions.iter().any(|(_, a)| *a == Action::Fix));
            match self.senders.get_mut(&key) {
                Some(s) => {
                    s.messages += 1;
                    s.repaired += fixed;
                    if seq < s.example.0 {
                        s.example = (seq, m.source.clone(), None);
                    }
                }
                None => {
                    self.senders.insert(
                        key,
                        Sender {
                            messages: 1,
                            repaired: fixed,
                            example: (seq, m.source.clone(), None),
                        },
                    );
                }
            }
        }
        for (r, a) in strongest {
            let rs = &mut self.rules[rule_index(r)];
            rs.messages += 1;
            rs.actions[a as usize] += 1;
            let mut forms: Vec<String> = findings
                .iter()
                .filter(|f| f.rule == r)
                .map(|f| self.known_forms.form(&f.message))
                .collect();
            if forms.is_empty() {
                // The oversize decision has no finding of its own when the engine saw
                // the whole message cut at the limit.
                forms.push("the message is larger than the limits".into());
            }
            forms.sort();
            forms.dedup();
            for text in forms {
                let key = if rs.forms.len() >= MAX_FORMS && !rs.forms.contains_key(&text) {
                    "(other forms)".to_string()
                } else {
                    text
                };
                // The earliest message of a form is its example: a worker may see an
                // mbox's batches out of order, and `merge` compares over the workers.
                match rs.forms.get_mut(&key) {
                    Some(f) if f.example.0 < seq => f.messages += 1,
                    Some(f) => {
                        let id = message_id
                            .get_or_insert_with(|| {
                                TopFields::read(&m.bytes).first_text("Message-ID")
                            })
                            .clone();
                        f.messages += 1;
                        f.example = (seq, m.source.clone(), id);
                        f.sender = from.get_or_insert_with(|| sender(&m.bytes)).clone();
                    }
                    None => {
                        let id = message_id
                            .get_or_insert_with(|| {
                                TopFields::read(&m.bytes).first_text("Message-ID")
                            })
                            .clone();
                        rs.forms.insert(
                            key,
                            Form {
                                messages: 1,
                                example: (seq, m.source.clone(), id),
                                sender: from.get_or_insert_with(|| sender(&m.bytes)).clone(),
                            },
                        );
                    }
                }
            }
        }
    }

    /// The inline-image counts of one message: `strongest` is each rule's strongest
    /// action in it. The Message-ID and sender are read once per message, if at all.
    fn count_inline(
        &mut self,
        seq: Seq,
        m: &Message,
        strongest: &BTreeMap<Rule, Action>,
        shown_parts: usize,
        message_id: &mut Option<Option<String>>,
        from: &mut Option<String>,
    ) {
        let st = &mut self.inline;
        st.with_images += u64::from(shown_parts > 0);
        if !strongest.keys().any(|r| r.misshows_inline()) {
            return;
        }
        st.misshown += 1;
        let repaired = strongest
            .iter()
            .any(|(r, a)| r.misshows_inline() && *a == Action::Fix);
        st.repaired += u64::from(repaired);
        let who = from.get_or_insert_with(|| sender(&m.bytes)).clone();
        let key = if st.senders.len() >= MAX_SENDERS && !st.senders.contains_key(&who) {
            "(other senders)".to_string()
        } else {
            who
        };
        let mut id = || {
            message_id
                .get_or_insert_with(|| TopFields::read(&m.bytes).first_text("Message-ID"))
                .clone()
        };
        match st.senders.get_mut(&key) {
            Some(s) => {
                s.messages += 1;
                s.repaired += u64::from(repaired);
                if seq < s.example.0 {
                    s.example = (seq, m.source.clone(), id());
                }
            }
            None => {
                st.senders.insert(
                    key,
                    Sender {
                        messages: 1,
                        repaired: u64::from(repaired),
                        example: (seq, m.source.clone(), id()),
                    },
                );
            }
        }
    }

    pub(super) fn merge(&mut self, o: Stats) {
        self.messages += o.messages;
        self.with_findings += o.with_findings;
        for (a, b) in self.verdicts.iter_mut().zip(o.verdicts) {
            *a += b;
        }
        for (name, v) in o.scopes {
            let e = self.scopes.entry(name).or_default();
            for (a, b) in e.iter_mut().zip(v) {
                *a += b;
            }
        }
        if self.rules.is_empty() {
            self.rules = vec![RuleStats::default(); Rule::ALL.len()];
        }
        for (mine, theirs) in self.rules.iter_mut().zip(o.rules) {
            mine.messages += theirs.messages;
            for (a, b) in mine.actions.iter_mut().zip(theirs.actions) {
                *a += b;
            }
            for (text, f) in theirs.forms {
                match mine.forms.get_mut(&text) {
                    Some(m) => {
                        m.messages += f.messages;
                        if f.example.0 < m.example.0 {
                            m.example = f.example;
                            m.sender = f.sender;
                        }
                    }
                    None => {
                        mine.forms.insert(text, f);
                    }
                }
            }
        }
        self.signed.merge(o.signed);
        self.names.merge(o.names);
        for (day, [n, f]) in o.dates.days {
            let e = self.dates.days.entry(day).or_default();
            e[0] += n;
            e[1] += f;
        }
        self.dates.undated[0] += o.dates.undated[0];
        self.dates.undated[1] += o.dates.undated[1];
        self.dates.outside += o.dates.outside;
        self.dates.undated_left_out += o.dates.undated_left_out;
        merge_senders(&mut self.senders, o.senders);
        self.failed.extend(o.failed);
        self.failed.sort();
        let (mine, theirs) = (&mut self.inline, o.inline);
        mine.with_images += theirs.with_images;
        mine.misshown += theirs.misshown;
        mine.repaired += theirs.repaired;
        merge_senders(&mut mine.senders, theirs.senders);
    }
}

/// A finding's message with what differs from message to message masked (quoted
/// values, `<...>`, numbers, boundaries, URLs): findings of the same kind then share it.
/// Byte searches only (no substring searcher per word): this runs for every finding of
/// every message surveyed, and used to cost more than the survey's counting.
pub(super) fn form(message: &str) -> String {
    let mut masked = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.bytes().position(|b| b == b'"' || b == b'<') {
        let close = if rest.as_bytes()[at] == b'"' {
            '"'
        } else {
            '>'
        };
        masked.push_str(&rest[..=at]);
        masked.push('…');
        let after = &rest[at + 1..];
        match after.bytes().position(|b| b == close as u8) {
            Some(end) => {
                masked.push(close);
                rest = &after[end + 1..];
            }
            None => rest = "",
        }
    }
    masked.push_str(rest);
    let mut out = String::with_capacity(masked.len());
    let mut after_rfc = false;
    for (i, w) in masked.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let b = w.as_bytes();
        let digits = b.iter().position(u8::is_ascii_digit);
        if b.starts_with(b"--") || b.windows(3).any(|x| x == b"://") {
            out.push('…');
        } else if let (Some(first), false, false) = (
            digits,
            after_rfc || w.starts_with('§'),
            // Letters, and any non-ASCII character to be safe, make it a word.
            b.iter().any(|&c| c.is_ascii_alphabetic() || c >= 0x80),
        ) {
            // Part numbers and counts: "(part 2.1)" -> "(part N)".
            let last = b.iter().rposition(u8::is_ascii_digit).unwrap_or(first);
            out.push_str(&w[..first]);
            out.push('N');
            out.push_str(&w[last + 1..]);
        } else {
            out.push_str(w);
        }
        after_rfc = w.ends_with("RFC");
    }
    out
}
