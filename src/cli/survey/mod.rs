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
//!
//! This file holds the command and its orchestration; the rest is in
//! - `pool`: the workers taking the inputs in turn, and the batches of an mbox;
//! - `stats`: what is counted per message (verdicts, rules, forms, senders);
//! - `example`: the example messages kept and the order forms and senders are listed in;
//! - `names`: the "names and types:" block (parts readers show otherwise than the
//!   sender meant);
//! - `summary`: the summary and its output, as text or JSON;
//! - `html`: the summary as one self-contained page.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use clap::Args;

use super::exit::{failed, CliError, Done};
use super::mailbox::{self, Message, NotRead, Source};
use super::{analyse, load_config, received, DirectionArg, EnvelopeArgs};
use crate::config::Config;
use crate::engine::Finding;
use crate::policy::plan::Plan;
use crate::policy::scope::Envelope;
use crate::policy::Direction;

mod example;
mod html;
mod names;
mod pool;
mod stats;
mod summary;

use pool::{Pool, Queue};
use stats::Stats;
use summary::Summary;

#[derive(Args, Debug)]
pub(crate) struct SurveyArgs {
    /// A summary for people (text), one JSON object for scripts (json), or one
    /// self-contained HTML page with charts, to look at or forward (html)
    #[arg(long, value_enum, default_value = "text")]
    pub format: SurveyFormat,
    /// Only messages written on or after this day (UTC): YYYY-MM-DD, or YYYY-MM for
    /// the month's first day. By the Date field, else the mbox From line; undated
    /// messages are left out (and counted) when a bound is given
    #[arg(long, value_name = "DATE", value_parser = since)]
    pub since: Option<i64>,
    /// Only messages written on or before this day (UTC): YYYY-MM-DD, or YYYY-MM for
    /// the month's last day
    #[arg(long, value_name = "DATE", value_parser = until)]
    pub until: Option<i64>,
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

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SurveyFormat {
    Text,
    Json,
    Html,
}

fn since(s: &str) -> Result<i64, String> {
    crate::cli::date::bound(s).map(|b| b.0)
}

fn until(s: &str) -> Result<i64, String> {
    crate::cli::date::bound(s).map(|b| b.1)
}

pub(crate) fn run(args: SurveyArgs) -> Result<Done, CliError> {
    let cfg = load_config(args.config.as_deref()).map_err(failed)?;
    let (direction, envelope) = args
        .envelope
        .resolve(&cfg, args.direction)
        .map_err(failed)?;
    let check_args = check_args(&args, direction);
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let started = Instant::now();
    let terminal = std::io::stderr().is_terminal();
    let inputs = mailbox::walk(&args.paths, &args.exclude, terminal, args.follow_symlinks);
    if let (Some(a), Some(b)) = (args.since, args.until) {
        if a > b {
            return Err(failed("--since is later than --until".to_string()));
        }
    }
    let window = (args.since.is_some() || args.until.is_some()).then(|| {
        (
            args.since.unwrap_or(i64::MIN),
            args.until.unwrap_or(i64::MAX),
        )
    });
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let ctx = Context {
        check_args,
        window,
        now,
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
        SurveyFormat::Text => summary.text(&mut out),
        SurveyFormat::Json => summary.json(&mut out),
        SurveyFormat::Html => html::page(&summary, &mut out),
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
    /// `--since` and `--until` in seconds since 1970 (UTC), when either is given.
    window: Option<(i64, i64)>,
    /// The clock at the start: dates after it (and a day's grace) are not believed.
    now: i64,
    /// The options `check --actions` needs to see a message as this survey saw it.
    check_args: Vec<String>,
}

/// `--config`, `--direction` and the envelope of the survey, as `check` takes them: an
/// example's command must show what the survey showed, scopes included.
fn check_args(args: &SurveyArgs, direction: Direction) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    let mut add = |k: &str, val: String| {
        v.push(k.to_string());
        v.push(val);
    };
    if let Some(c) = &args.config {
        add("--config", c.display().to_string());
    }
    add("--direction", direction.to_string());
    let e = &args.envelope;
    for m in &e.macros {
        add("--macro", m.clone());
    }
    if let Some(a) = e.client_addr {
        add("--client-addr", a.to_string());
    }
    if let Some(f) = &e.from {
        add("--from", f.clone());
    }
    for r in &e.rcpt {
        add("--rcpt", r.clone());
    }
    for h in &e.headers {
        add("--header", h.clone());
    }
    v
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

#[cfg(test)]
mod tests;
