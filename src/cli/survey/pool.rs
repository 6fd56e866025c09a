//! The workers of a survey: each takes the inputs in turn, and an mbox's messages are
//! offered to idle workers in batches.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Condvar, Mutex};

use super::example::Seq;
use super::stats::Stats;
use super::{Context, Progress};
use crate::cli::mailbox::{self, Message, NotRead, Source};

/// What the workers share.
pub(super) struct Pool<'a> {
    pub(super) ctx: &'a Context,
    pub(super) files: &'a [Source],
    pub(super) jobs: usize,
    pub(super) progress: &'a Progress,
    pub(super) queue: Mutex<Queue>,
    /// Signalled when a batch is queued or a file is done.
    pub(super) ready: Condvar,
}

/// The files not yet taken, and batches of mbox messages offered to idle workers.
#[derive(Default)]
pub(super) struct Queue {
    /// The index of the next file no worker has taken.
    next_file: usize,
    /// Files being read: while any is, it may be an mbox and more batches may come.
    reading: usize,
    batches: VecDeque<Vec<(Seq, Message)>>,
}

impl Pool<'_> {
    /// One worker: queued batches first, then the next file, until both run out.
    pub(super) fn work(&self) -> (Stats, Vec<NotRead>) {
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
