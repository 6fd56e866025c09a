//! `mimeref-milter survey PATH…`: what the daemon would have done to mail a site
//! already has, before the filter goes live.
//!
//! Every message (see `mailbox` for what the paths may be) goes through exactly what
//! `check --actions` does: the limits as the daemon applies them, the scopes, the engine
//! and the planner of `--config` for `--direction`. The summary counts messages per
//! verdict, per deciding scope and per rule (messages, share, severity, the actions the
//! configuration took), with the five most common forms of each rule's findings and
//! one example of each (path or mbox offset, Message-ID).
//!
//! One worker per CPU core (`--jobs`, the first is the calling thread) takes the
//! inputs in turn and reads and analyses each itself; an mbox's messages are offered
//! to idle workers in batches over a queue of at most one batch per worker, so memory
//! stays at a few messages per worker whatever the size of an mbox. Examples are chosen
//! by input order, so the output is the same whatever the number of workers. A message that cannot be read, or whose
//! analysis fails, is counted and named; the survey goes on.

use std::collections::BTreeMap;
use std::collections::VecDeque;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use clap::Args;

use super::exit::{failed, CliError, Done};
use super::mailbox::{self, Message, NotRead, Source};
use super::{analyse, load_config, printable, received, DirectionArg, EnvelopeArgs, Format};
use crate::config::Config;
use crate::engine::{Finding, Rule};
use crate::policy::matching::TopFields;
use crate::policy::plan::Plan;
use crate::policy::scope::Envelope;
use crate::policy::{Action, Direction};

#[derive(Args, Debug)]
pub(crate) struct SurveyArgs {
    /// A summary for people (text) or one JSON object for scripts (json)
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Configuration file (policy, scopes, limits, schemes)
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Survey as inbound or outbound mail [default: from --macro and --client-addr as
    /// the daemon derives it, which is inbound without them]
    #[arg(long, value_enum)]
    pub direction: Option<DirectionArg>,
    /// Worker threads [default: the number of CPU cores]
    #[arg(long, short = 'j', value_name = "N")]
    pub jobs: Option<usize>,
    /// Skip files whose name matches this glob (`*`, `?`) in the directories walked;
    /// once per glob, e.g. --exclude '*.md'
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,
    /// Follow symbolic links out of the folders named (to files, and a Maildir's cur/
    /// or new/); without it they are skipped and named
    #[arg(long)]
    pub follow_symlinks: bool,
    /// What every message's envelope would be, for the scopes
    #[command(flatten)]
    pub envelope: EnvelopeArgs,
    /// Message files, directories of them, mbox files, Maildir folders
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// Forms of findings kept per rule; more are counted together.
const MAX_FORMS: usize = 10_000;
/// Forms shown per rule.
const SHOWN_FORMS: usize = 5;

pub(crate) fn run(args: SurveyArgs) -> Result<Done, CliError> {
    let cfg = load_config(args.config.as_deref()).map_err(failed)?;
    let (direction, envelope) = args
        .envelope
        .resolve(&cfg, args.direction)
        .map_err(failed)?;
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let started = Instant::now();
    let terminal = std::io::stderr().is_terminal();
    let inputs = mailbox::walk(&args.paths, &args.exclude, terminal, args.follow_symlinks);
    let ctx = Context {
        opts: cfg.engine_options(direction),
        cfg,
        direction,
        envelope,
    };
    let progress = Progress::default();
    let bar = terminal.then(|| progress.draw(inputs.bytes));
    let (stats, not_read) = survey(&ctx, &inputs.files, jobs, &progress);
    progress.done.store(true, Ordering::SeqCst);
    if let Some(b) = bar {
        let _ = b.join();
    }
    let mut unreadable = inputs.unreadable;
    let mut skipped = inputs.skipped;
    for n in not_read {
        if n.skipped {
            skipped.push((n.source, n.why));
        } else {
            unreadable.push((n.source, n.why));
        }
    }
    unreadable.extend(stats.failed.iter().map(|(_, s, e)| (s.clone(), e.clone())));
    unreadable.sort();
    skipped.sort();
    let summary = Summary {
        ctx: &ctx,
        stats: &stats,
        unreadable: &unreadable,
        skipped: &skipped,
        excluded: &inputs.excluded,
        seconds: started.elapsed().as_secs_f64(),
        jobs,
    };
    let out = std::io::stdout();
    let mut out = out.lock();
    let res = match args.format {
        Format::Text => summary.text(&mut out),
        Format::Json => summary.json(&mut out),
    };
    if let Err(e) = res.and_then(|_| out.flush()) {
        return Err(failed(format!("writing output: {e}")));
    }
    // Anything named that was not read, on purpose or not, is worth a look.
    Ok(if unreadable.is_empty() && skipped.is_empty() {
        Done::Success
    } else {
        Done::NotAllRead
    })
}

/// What every message is surveyed under.
struct Context {
    cfg: Config,
    direction: Direction,
    envelope: Envelope,
    /// The engine options of the direction, built once.
    opts: crate::engine::Options,
}

impl Context {
    /// The daemon's analysis of one message and its verdict (the plan without the
    /// actions).
    fn one(&self, m: &Message) -> (Vec<Finding>, Plan, usize) {
        let given = received(&self.cfg, m);
        let (analysis, scopes) = analyse(
            &self.cfg,
            self.direction,
            &self.envelope,
            &self.opts,
            &given,
        );
        let plan =
            self.cfg
                .planner()
                .verdict_scoped(self.direction, &analysis, given.received(), &scopes);
        (analysis.findings, plan, analysis.shown_parts)
    }
}

/// Counters the progress bar reads.
#[derive(Default, Clone)]
struct Progress {
    bytes: Arc<AtomicU64>,
    messages: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
}

impl Progress {
    /// Draws the bar on standard error until `done`, then clears it.
    fn draw(&self, total: u64) -> std::thread::JoinHandle<()> {
        let p = self.clone();
        std::thread::spawn(move || {
            let mut err = std::io::stderr();
            // Drawn at least once, however short the survey.
            loop {
                let finished = p.done.load(Ordering::SeqCst);
                let read = p.bytes.load(Ordering::Relaxed);
                let share = if total == 0 {
                    1.0
                } else {
                    (read as f64 / total as f64).min(1.0)
                };
                let filled = (share * 30.0) as usize;
                let _ = write!(
                    err,
                    "\r[{}{}] {:3.0}% {} messages",
                    "#".repeat(filled),
                    " ".repeat(30 - filled),
                    share * 100.0,
                    p.messages.load(Ordering::Relaxed)
                );
                let _ = err.flush();
                if finished {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
        })
    }
}

/// Surveys the messages of `files` on `jobs` workers, the first of them this thread.
///
/// Each worker reads the files it takes (the next one not yet taken), so that a
/// message is read and analysed on the same core: handed from a reading thread to
/// another core, its bytes cost about 12 % more CPU in cache misses than `check`
/// spends. An mbox is split by the worker that opened it, which offers batches of its
/// messages to the others through a queue of at most `jobs` batches and analyses a
/// batch itself when the queue is full: nobody ever waits on a full queue, and a
/// large mbox is still spread over every core.
fn survey(
    ctx: &Context,
    files: &[Source],
    jobs: usize,
    progress: &Progress,
) -> (Stats, Vec<NotRead>) {
    let pool = Pool {
        ctx,
        files,
        jobs,
        progress,
        queue: Mutex::new(Queue::default()),
        ready: Condvar::new(),
    };
    std::thread::scope(|s| {
        let helpers: Vec<_> = (1..jobs).map(|_| s.spawn(|| pool.work())).collect();
        let (mut total, mut unreadable) = pool.work();
        for w in helpers {
            match w.join() {
                Ok((st, u)) => {
                    total.merge(st);
                    unreadable.extend(u);
                }
                // A worker's panic outside the caught analysis: say so rather than
                // print counts that miss its messages.
                Err(_) => unreadable.push(NotRead {
                    source: "(worker)".into(),
                    why: "a worker thread failed; its messages are missing from the counts".into(),
                    skipped: false,
                }),
            }
        }
        total.failed.sort();
        (total, unreadable)
    })
}

/// The input order of a message: (file, message within the file).
type Seq = (u64, u64);

/// What the workers share.
struct Pool<'a> {
    ctx: &'a Context,
    files: &'a [Source],
    jobs: usize,
    progress: &'a Progress,
    queue: Mutex<Queue>,
    /// Signalled when a batch is queued or a file is done.
    ready: Condvar,
}

/// The files not yet taken, and batches of mbox messages offered to idle workers.
#[derive(Default)]
struct Queue {
    /// The index of the next file no worker has taken.
    next_file: usize,
    /// Files being read: while any is, it may be an mbox and more batches may come.
    reading: usize,
    batches: VecDeque<Vec<(Seq, Message)>>,
}

impl Pool<'_> {
    /// One worker: queued batches first, then the next file, until both run out.
    fn work(&self) -> (Stats, Vec<NotRead>) {
        let mut stats = Stats::default();
        let mut unreadable = Vec::new();
        loop {
            if let Some(batch) = self.queued() {
                self.survey_batch(&mut stats, batch);
                continue;
            }
            if let Some(i) = self.take_file() {
                let res = self.survey_file(&mut stats, i as u64, &self.files[i]);
                self.lock().reading -= 1;
                self.ready.notify_all();
                if let Err(e) = res {
                    unreadable.push(e);
                }
                continue;
            }
            // No file left: wait for the batches of an mbox still being split.
            let mut q = self.lock();
            while q.batches.is_empty() && q.reading > 0 {
                q = self.ready.wait(q).unwrap_or_else(|p| p.into_inner());
            }
            if q.batches.is_empty() {
                return (stats, unreadable);
            }
        }
    }

    fn queued(&self) -> Option<Vec<(Seq, Message)>> {
        if self.jobs == 1 {
            return None;
        }
        self.lock().batches.pop_front()
    }

    /// The next file no worker has taken, counted as being read from then on (in
    /// the same lock: a worker that finds no file left must not miss it).
    fn take_file(&self) -> Option<usize> {
        let mut q = self.lock();
        let i = q.next_file;
        if i >= self.files.len() {
            return None;
        }
        q.next_file += 1;
        q.reading += 1;
        Some(i)
    }

    fn survey_batch(&self, stats: &mut Stats, batch: Vec<(Seq, Message)>) {
        for (seq, m) in &batch {
            stats.add(self.ctx, *seq, m);
        }
        self.progress
            .messages
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
    }

    /// Reads one file and surveys its messages; an mbox's are shared out in batches.
    /// A file of one message (most) is surveyed as it is, without a batch.
    fn survey_file(&self, stats: &mut Stats, file: u64, src: &Source) -> Result<(), NotRead> {
        let mut n = 0u64;
        let mut first: Option<Message> = None;
        let mut batch = Batch::default();
        let res = mailbox::read(
            src,
            self.ctx.cfg.limits().max_message_size,
            |m| {
                n += 1;
                if n == 1 {
                    first = Some(m);
                    return true;
                }
                if let Some(m1) = first.take() {
                    batch.push((file, 1), m1);
                }
                if let Some(full) = batch.push((file, n), m) {
                    self.offer(stats, full);
                }
                true
            },
            |octets| {
                self.progress.bytes.fetch_add(octets, Ordering::Relaxed);
            },
        );
        if let Some(m) = first {
            stats.add(self.ctx, (file, 1), &m);
            self.progress.messages.fetch_add(1, Ordering::Relaxed);
        }
        if !batch.messages.is_empty() {
            self.survey_batch(stats, batch.messages);
        }
        res
    }

    /// A full batch of an mbox: to an idle worker when the queue has room, else here.
    fn offer(&self, stats: &mut Stats, batch: Vec<(Seq, Message)>) {
        if self.jobs > 1 {
            let mut q = self.lock();
            if q.batches.len() < self.jobs {
                q.batches.push_back(batch);
                drop(q);
                self.ready.notify_one();
                return;
            }
        }
        self.survey_batch(stats, batch);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Messages handed to a worker at once: one hand-over (a lock, a wake-up) costs about
/// as much as analysing a small message, so they go in batches, small enough that
/// every worker gets some of a short survey.
#[derive(Default)]
struct Batch {
    messages: Vec<(Seq, Message)>,
    octets: usize,
}

impl Batch {
    const MESSAGES: usize = 16;
    const OCTETS: usize = 1 << 20;

    /// Adds a message; the batch to hand on when it is full.
    fn push(&mut self, seq: Seq, m: Message) -> Option<Vec<(Seq, Message)>> {
        self.octets += m.bytes.len();
        self.messages.push((seq, m));
        if self.messages.len() >= Self::MESSAGES || self.octets >= Self::OCTETS {
            self.octets = 0;
            Some(std::mem::take(&mut self.messages))
        } else {
            None
        }
    }
}

/// Counts over the messages one worker surveyed.
#[derive(Default)]
struct Stats {
    messages: u64,
    with_findings: u64,
    verdicts: [u64; Action::ALL.len()],
    /// Messages per deciding scope and verdict.
    scopes: BTreeMap<String, [u64; Action::ALL.len()]>,
    /// Indexed like `Rule::ALL`.
    rules: Vec<RuleStats>,
    /// Messages whose analysis failed: (input order, source, why).
    failed: Vec<(Seq, String, String)>,
    known_forms: KnownForms,
    inline: InlineStats,
}

/// Inline images: how many messages show some, how many of them some reader shows
/// wrongly (`Rule::misshows_inline`), what the configuration repairs, and who sent them.
#[derive(Default)]
struct InlineStats {
    /// Messages whose HTML shows parts of the message.
    with_images: u64,
    /// Messages with a finding of a rule under which a reader shows an inline part
    /// wrongly.
    misshown: u64,
    /// Of those, messages where the configuration fixes such a finding.
    repaired: u64,
    /// By sender form (see [`sender`]): messages, repaired, the first example.
    senders: HashMap<String, Sender>,
}

#[derive(Clone)]
struct Sender {
    messages: u64,
    repaired: u64,
    example: (Seq, String, Option<String>),
}

/// Senders listed in the summary.
const SHOWN_SENDERS: usize = 10;
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
struct RuleStats {
    messages: u64,
    /// Messages per action this rule got in them.
    actions: [u64; Action::ALL.len()],
    /// foldhash: one lookup per finding, on strings SipHash is slow for.
    forms: HashMap<String, Form>,
}

#[derive(Clone)]
struct Form {
    messages: u64,
    /// The first message (in input order) with this form: (order, source, Message-ID).
    example: (Seq, String, Option<String>),
    /// What sent that example ([`sender`]).
    sender: String,
}

fn rule_index(r: Rule) -> usize {
    Rule::ALL.iter().position(|x| *x == r).unwrap_or(0)
}

impl Stats {
    fn add(&mut self, ctx: &Context, seq: Seq, m: &Message) {
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
        self.verdicts[plan.verdict as usize] += 1;
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

    fn merge(&mut self, o: Stats) {
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
        self.failed.extend(o.failed);
        self.failed.sort();
        let (mine, theirs) = (&mut self.inline, o.inline);
        mine.with_images += theirs.with_images;
        mine.misshown += theirs.misshown;
        mine.repaired += theirs.repaired;
        for (who, s) in theirs.senders {
            match mine.senders.get_mut(&who) {
                Some(m) => {
                    m.messages += s.messages;
                    m.repaired += s.repaired;
                    if s.example.0 < m.example.0 {
                        m.example = s.example;
                    }
                }
                None => {
                    mine.senders.insert(who, s);
                }
            }
        }
    }
}

/// A finding's message with what differs from message to message masked (quoted
/// values, `<...>`, numbers, boundaries, URLs): findings of the same kind then share it.
/// Byte searches only (no substring searcher per word): this runs for every finding of
/// every message surveyed, and used to cost more than the survey's counting.
fn form(message: &str) -> String {
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

struct Summary<'a> {
    ctx: &'a Context,
    stats: &'a Stats,
    unreadable: &'a [(String, String)],
    skipped: &'a [(String, String)],
    excluded: &'a [PathBuf],
    seconds: f64,
    jobs: usize,
}

/// A rule's line of the summary.
struct RuleLine<'a> {
    rule: Rule,
    stats: &'a RuleStats,
    forms: Vec<(&'a String, &'a Form)>,
}

impl<'a> Summary<'a> {
    fn share(&self, n: u64) -> f64 {
        if self.stats.messages == 0 {
            0.0
        } else {
            n as f64 / self.stats.messages as f64
        }
    }

    /// Rules with findings, most messages first.
    fn rules(&self) -> Vec<RuleLine<'a>> {
        let mut v: Vec<RuleLine> = Rule::ALL
            .iter()
            .zip(&self.stats.rules)
            .filter(|(_, s)| s.messages > 0)
            .map(|(r, s)| {
                let mut forms: Vec<(&String, &Form)> = s.forms.iter().collect();
                forms.sort_by(|a, b| {
                    b.1.messages
                        .cmp(&a.1.messages)
                        .then(a.1.example.0.cmp(&b.1.example.0))
                });
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

    fn actions(counts: &[u64]) -> Vec<(Action, u64)> {
        Action::ALL
            .iter()
            .rev()
            .zip(counts.iter().rev())
            .filter(|(_, n)| **n > 0)
            .map(|(a, n)| (*a, *n))
            .collect()
    }

    fn text(&self, out: &mut impl Write) -> std::io::Result<()> {
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
    fn senders(&self) -> Vec<(&String, &Sender)> {
        let mut v: Vec<(&String, &Sender)> = self.stats.inline.senders.iter().collect();
        v.sort_by(|a, b| {
            b.1.messages
                .cmp(&a.1.messages)
                .then(a.1.example.0.cmp(&b.1.example.0))
        });
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
            "  shown wrongly, by sender (messages, repaired; rules: those marked * above):"
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

    fn json(&self, out: &mut impl Write) -> std::io::Result<()> {
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

#[cfg(test)]
mod tests;
