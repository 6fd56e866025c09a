//! A message's octets while it is received: in memory up to `[limits] spill_threshold`,
//! beyond that in an unlinked file in `spill_directory`, so that many large messages
//! trickling in over slow SMTP sessions cost disk cache, not daemon memory; read back
//! whole at end of message (the engine works on one contiguous buffer), at most one
//! message per CPU at a time. Large buffers are kept for the next large messages
//! ([`Pool`]: at most `POOL_BUFFERS` of up to `POOL_MAX` octets).
//!
//! Every octet of a message the daemon holds in memory counts against `[limits]
//! memory_budget`, which all the messages of the daemon share ([`Budget`]): what it
//! keeps in memory while the message arrives, what it keeps in a spill file when the
//! spill directory is itself memory (tmpfs), and, at end of message, a replaced body
//! until it is sent. When the budget has no room for the next octets, a message that
//! can still spill to disk does so at once, below its threshold; one that cannot (its
//! spill failed, or spilled octets count as memory) is dropped from memory and marked
//! [`Lost`], for the session to tempfail: it is neither analysed as far as it got nor
//! passed on as oversize.
//!
//! A spill that fails (the file cannot be made, a write fails part-way: a full disk,
//! an I/O error) never cuts the message short: what the file holds comes back into
//! memory and the message goes on there, within the budget.
//!
//! A leaf of the milter: it knows bytes, files and the default spill threshold, nothing
//! of sessions, limits or policy. How a spill file is made is the configuration's
//! ([`spill_file`]), so that `config-check` tries exactly that.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use crate::config::spill_file;

/// A message up to this size is small: its buffer is not worth pooling, and the session
/// analyses it on the connection's own task.
pub const SMALL: usize = 256 << 10;

/// Read-backs of spilled messages at the same time (one per CPU): each needs the whole
/// message in memory while the engine runs.
pub fn read_back_permits() -> &'static tokio::sync::Semaphore {
    static PERMITS: OnceLock<tokio::sync::Semaphore> = OnceLock::new();
    PERMITS.get_or_init(|| {
        let n = std::thread::available_parallelism().map_or(2, |n| n.get());
        tokio::sync::Semaphore::new(n)
    })
}

/// Where and from what size a message spills, and how much all the messages may hold
/// in memory: `[limits] spill_threshold`, `spill_directory`, `memory_budget`.
#[derive(Debug, Clone, Copy)]
pub struct SpillTo<'a> {
    pub threshold: usize,
    pub dir: &'a Path,
    /// The spill directory is memory (tmpfs): spilled octets count against the budget.
    pub dir_in_memory: bool,
    pub budget: usize,
    /// The MTA's queue id once it has sent one (at end of header), for the log line
    /// of a failed spill.
    pub queue_id: &'a str,
}

/// The octets of message data held in memory, over all the connections of one daemon:
/// what `[limits] memory_budget` bounds.
#[derive(Debug, Default)]
pub struct Budget(AtomicUsize);

impl Budget {
    /// Octets held now.
    pub fn held(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }

    /// Takes `n` more octets if they fit under `limit`.
    fn take(&self, n: usize, limit: usize) -> bool {
        self.0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                used.checked_add(n).filter(|&u| u <= limit)
            })
            .is_ok()
    }
}

/// One message's share of a [`Budget`], given back when it is dropped (the message
/// analysed and its actions sent, aborted, or dropped from memory).
#[derive(Debug)]
pub struct Held {
    budget: Arc<Budget>,
    octets: usize,
    /// The message's spill failed: its share is shown in `mimeref_spill_held_bytes`
    /// too.
    failed_spill: bool,
}

impl Held {
    pub fn new(budget: &Arc<Budget>) -> Held {
        Held {
            budget: budget.clone(),
            octets: 0,
            failed_spill: false,
        }
    }

    pub fn octets(&self) -> usize {
        self.octets
    }

    /// Whether `n` more octets fit under `limit`; taken if so.
    fn grow(&mut self, n: usize, limit: usize) -> bool {
        if !self.budget.take(n, limit) {
            return false;
        }
        self.moved(n as f64);
        self.octets += n;
        true
    }

    /// Makes the share exactly `n` octets: false (and the share as it was) when the
    /// octets it needs more do not fit under `limit`.
    pub fn resize(&mut self, n: usize, limit: usize) -> bool {
        if n > self.octets {
            return self.grow(n - self.octets, limit);
        }
        let less = self.octets - n;
        self.budget.0.fetch_sub(less, Ordering::SeqCst);
        self.moved(-(less as f64));
        self.octets = n;
        true
    }

    /// From now on the share is that of a message whose spill failed.
    fn mark_failed_spill(&mut self) {
        if !self.failed_spill {
            self.failed_spill = true;
            super::metrics::spill_held(self.octets as f64);
        }
    }

    fn moved(&self, delta: f64) {
        super::metrics::memory_held(delta);
        if self.failed_spill {
            super::metrics::spill_held(delta);
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.resize(0, 0);
    }
}

/// Why a message's octets are gone: nothing can be analysed, end of message tempfails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lost {
    /// Holding the message in memory would have passed `memory_budget`: `needed`
    /// octets for it while `held` were taken by others. `failed_spill`: it was in
    /// memory because its spill failed (otherwise: spilled octets count as memory).
    OverBudget {
        needed: usize,
        held: usize,
        failed_spill: bool,
    },
    /// The spill failed, and what the file held could not be read back.
    ReadBack(String),
}

/// Buffers that held a whole message, kept for the next ones. A fresh multi-megabyte
/// buffer per message meant the allocator handing the memory back to the kernel and
/// faulting it in again, zeroed, page by page: 2 MB over TCP cost more system time in
/// page faults than the daemon's own work. At most `POOL_BUFFERS` buffers of at most
/// `POOL_MAX` octets stay resident.
#[derive(Debug, Default)]
pub struct Pool(std::sync::Mutex<Vec<Vec<u8>>>);

pub(crate) const POOL_BUFFERS: usize = 4;
/// Smaller buffers are cheap to allocate afresh.
const POOL_MIN: usize = SMALL;
/// A message larger than the default spill threshold goes to a file instead.
pub(crate) const POOL_MAX: usize = crate::config::SPILL_THRESHOLD;

impl Pool {
    /// The daemon's one pool.
    pub fn global() -> Arc<Pool> {
        static POOL: OnceLock<Arc<Pool>> = OnceLock::new();
        POOL.get_or_init(|| Arc::new(Pool::default())).clone()
    }

    /// The largest empty buffer with room for `len` octets.
    pub fn take(&self, len: usize) -> Option<Vec<u8>> {
        let mut pool = self.0.lock().ok()?;
        let (i, _) = pool
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= len)
            .max_by_key(|(_, b)| b.capacity())?;
        Some(pool.swap_remove(i))
    }

    /// Keeps a buffer if it is worth keeping; with a full pool the smallest gives way.
    pub fn give(&self, mut v: Vec<u8>) {
        if v.capacity() <= POOL_MIN || v.capacity() > POOL_MAX {
            return;
        }
        v.clear();
        let Ok(mut pool) = self.0.lock() else {
            return;
        };
        if pool.len() < POOL_BUFFERS {
            pool.push(v);
        } else if let Some(smallest) = pool.iter_mut().min_by_key(|b| b.capacity()) {
            if smallest.capacity() < v.capacity() {
                *smallest = v;
            }
        }
    }
}

/// The octets of one message as far as they are kept.
#[derive(Debug)]
pub struct Buffer {
    /// Header fields as received (`name:value CRLF`, the value with its leading space and
    /// embedded line breaks as the MTA sent them), the empty line, then the body as far
    /// as it fits the first allocation. Empty once the message has spilled.
    pub(crate) raw: Vec<u8>,
    /// The body chunks that came after `raw` was full past the size of a pooled buffer
    /// (a message kept in memory after its spill failed), or when no larger buffer
    /// could be allocated, as indymilter handed them over (each its own allocation of
    /// exactly the chunk's size), joined once at end of message. Growing `raw` instead copied the message
    /// again at every doubling: 1.3 MB of the 3.5 MB copied per 2 MB message.
    pub(crate) chunks: Vec<Bytes>,
    /// Where `raw` goes back when it is a large buffer.
    pub(crate) pool: Arc<Pool>,
    /// The same bytes in a temporary file once the message passed the threshold (or the
    /// budget had no room for them in memory).
    pub(crate) spill: Option<File>,
    /// Octets buffered (in `raw` and `chunks`, or in `spill`).
    pub(crate) len: usize,
    /// This message's share of `memory_budget`: the octets it holds in memory, and
    /// those in its spill file when that is memory too.
    pub(crate) share: Held,
    /// The spill failed: the message is in memory past the threshold.
    pub(crate) spill_failed: bool,
    /// Buffering stopped at a limit; later octets are not kept.
    pub(crate) incomplete: bool,
    /// The octets are gone (past the budget, or a failed spill not read back); later
    /// ones are not kept.
    pub(crate) lost: Option<Lost>,
    /// `raw` is lent to the connection for the next body chunk (see [`Buffer::lend`]):
    /// the length it had then. Every callback takes it back before touching the
    /// buffer.
    pub(crate) lent: Option<usize>,
}

/// What a [`Buffer`] held, taken out of it to be read back (possibly on another thread).
#[derive(Debug)]
pub struct Taken {
    raw: Vec<u8>,
    chunks: Vec<Bytes>,
    spill: Option<File>,
    len: usize,
    pool: Arc<Pool>,
    spill_failed: bool,
    /// The message's share of the budget: kept until the analysis is done with its
    /// octets, and then for the replaced body until that is sent.
    pub(crate) share: Held,
}

impl Buffer {
    pub fn new(pool: Arc<Pool>, budget: Arc<Budget>) -> Buffer {
        Buffer {
            raw: Vec::new(),
            chunks: Vec::new(),
            pool,
            spill: None,
            len: 0,
            share: Held::new(&budget),
            spill_failed: false,
            incomplete: false,
            lost: None,
            lent: None,
        }
    }

    /// Nothing more is kept: a limit was reached or the octets are lost.
    fn stopped(&self) -> bool {
        self.incomplete || self.lost.is_some()
    }

    /// Everything kept so far, leaving the buffer empty.
    pub fn take(&mut self) -> Taken {
        debug_assert!(self.lent.is_none(), "raw taken while lent");
        let budget = self.share.budget.clone();
        Taken {
            raw: std::mem::take(&mut self.raw),
            chunks: std::mem::take(&mut self.chunks),
            spill: self.spill.take(),
            len: self.len,
            pool: self.pool.clone(),
            spill_failed: self.spill_failed,
            share: std::mem::replace(&mut self.share, Held::new(&budget)),
        }
    }
}

impl Taken {
    /// Every buffered octet in one buffer: `raw` (when it holds them all), `raw` and
    /// `chunks` joined, or the spill file read back whole; in a pooled buffer if one
    /// has room.
    pub fn read_back(self) -> io::Result<Vec<u8>> {
        if let Some(mut f) = self.spill {
            return read_file(&mut f, self.len, &self.pool);
        }
        join(self.raw, self.chunks, self.len, &self.pool)
    }

    /// Spilled, or held in memory after its spill failed: a large message.
    pub fn is_large(&self) -> bool {
        self.spill.is_some() || self.spill_failed
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The message's share of the budget, taken out to outlive the octets.
    pub fn take_share(&mut self) -> Held {
        let empty = Held::new(&self.share.budget);
        std::mem::replace(&mut self.share, empty)
    }
}

/// Where the next octets of a message go.
enum Place {
    Memory,
    File,
    Lost,
}

impl Buffer {
    /// Appends buffered octets, spilling to a file past the threshold.
    pub fn append(&mut self, bytes: &[u8], to: SpillTo) {
        if !self.make_room(bytes, to) {
            return;
        }
        if self.chunks.is_empty() {
            self.raw.extend_from_slice(bytes);
        } else {
            self.chunks.push(Bytes::copy_from_slice(bytes));
        }
        self.len += bytes.len();
    }

    /// Appends a body chunk: copied into `raw` while that has room, otherwise kept as it
    /// is.
    pub fn append_chunk(&mut self, chunk: Bytes, to: SpillTo) {
        if !self.make_room(&chunk, to) {
            return;
        }
        let full = self.raw.capacity() - self.raw.len() < chunk.len();
        if full && self.chunks.is_empty() {
            // The first allocation is full: a large message. It continues in a
            // pooled buffer if one has room, else in a new one of the pool's size:
            // chunks held apart cost a copy of each at end of message, while in one
            // buffer the next ones are read straight into it (`lend`).
            let need = self.len + chunk.len();
            if let Some(mut big) = self.pool.take(need).or_else(|| large(need, to.threshold)) {
                big.extend_from_slice(&self.raw);
                self.raw = big;
            }
        }
        self.len += chunk.len();
        if self.chunks.is_empty() && self.raw.capacity() - self.raw.len() >= chunk.len() {
            self.raw.extend_from_slice(&chunk);
        } else {
            self.chunks.push(chunk);
        }
    }

    /// `raw`, for the connection to read the next body chunk straight into its spare
    /// capacity (indymilter's `Context::lend_body_buffer`): the chunk then costs no
    /// copy of its own. Only while the message is in memory in `raw` alone; `None`
    /// otherwise, or when `raw` has no room.
    pub fn lend(&mut self) -> Option<Vec<u8>> {
        if self.lent.is_some()
            || self.stopped()
            || self.spill.is_some()
            || !self.chunks.is_empty()
            || self.raw.capacity() == self.raw.len()
        {
            return None;
        }
        self.lent = Some(self.raw.len());
        Some(std::mem::take(&mut self.raw))
    }

    /// Whether `raw` is lent.
    pub fn is_lent(&self) -> bool {
        self.lent.is_some()
    }

    /// `raw` back, as it was when lent (octets appended and not delivered dropped).
    pub fn reclaim(&mut self, mut v: Vec<u8>) {
        let Some(at) = self.lent.take() else {
            self.pool.give(v);
            return;
        };
        v.truncate(at);
        self.raw = v;
    }

    /// `raw` back with a body chunk appended to it, of which the first `keep` octets
    /// are kept. They stay where they are when memory is where they go; otherwise
    /// (the threshold or the budget passed) they go the way of any other chunk.
    pub fn append_lent(&mut self, mut v: Vec<u8>, keep: usize, to: SpillTo) {
        let Some(at) = self.lent.take() else {
            self.pool.give(v);
            return;
        };
        v.truncate(at + keep);
        let in_memory = !self.stopped()
            && self.spill.is_none()
            && self.chunks.is_empty()
            && (self.spill_failed || self.len + keep <= to.threshold)
            && self.share.grow(keep, to.budget);
        if in_memory {
            self.raw = v;
            self.len += keep;
            return;
        }
        let chunk = Bytes::copy_from_slice(&v[at..]);
        v.truncate(at);
        self.raw = v;
        self.append_chunk(chunk, to);
    }

    /// Finds a place for `bytes`: true when they are to be kept in memory (their octets
    /// taken from the budget), false when they went to the spill file or nothing more
    /// is kept.
    fn make_room(&mut self, bytes: &[u8], to: SpillTo) -> bool {
        if self.stopped() {
            return false;
        }
        match self.place(bytes.len(), to) {
            Place::Memory => true,
            Place::Lost => false,
            Place::File if self.write_spilled(bytes, to) => false,
            // The write failed: the file's octets are back in memory (or lost), and so
            // must these be (their octets already taken when the file was memory).
            Place::File => self.lost.is_none() && (to.dir_in_memory || self.hold(bytes.len(), to)),
        }
    }

    /// Where `n` more octets go, their octets taken from the budget where they count.
    fn place(&mut self, n: usize, to: SpillTo) -> Place {
        self.spill_past(n, to);
        if self.lost.is_some() {
            return Place::Lost;
        }
        if self.spill.is_some() {
            if to.dir_in_memory && !self.hold(n, to) {
                return Place::Lost;
            }
            return Place::File;
        }
        if self.share.grow(n, to.budget) {
            return Place::Memory;
        }
        // No room in memory for them: a message that can go to disk goes there now,
        // below its threshold, rather than be tempfailed.
        if !to.dir_in_memory && !self.spill_failed && self.spill_now(to) {
            return Place::File;
        }
        self.over_budget(n);
        Place::Lost
    }

    /// Moves what memory holds to a new spill file when `n` more octets would pass the
    /// threshold. If that fails the message is held in memory instead.
    fn spill_past(&mut self, n: usize, to: SpillTo) {
        if self.spill.is_some() || self.spill_failed || self.len + n <= to.threshold {
            return;
        }
        self.spill_now(to);
    }

    /// Moves what memory holds to a new spill file: false when that failed, and then
    /// the message stays in memory from now on.
    fn spill_now(&mut self, to: SpillTo) -> bool {
        let f = match spill_file(to.dir) {
            Ok(f) => f,
            Err(e) => {
                spill_failed("create", &e, &to);
                self.start_holding();
                return false;
            }
        };
        let write = |mut f: File| {
            f.write_all(&self.raw)?;
            for c in &self.chunks {
                f.write_all(c)?;
            }
            Ok::<_, io::Error>(f)
        };
        match write(f) {
            Ok(f) => {
                self.spill = Some(f);
                self.pool.give(std::mem::take(&mut self.raw));
                self.chunks = Vec::new();
                if !to.dir_in_memory {
                    self.share.resize(0, 0);
                }
                true
            }
            // Memory still holds every octet: the file is simply dropped.
            Err(e) => {
                spill_failed("write", &e, &to);
                self.start_holding();
                false
            }
        }
    }

    /// Writes to the spill file; false when that failed, the file's octets are back in
    /// memory (or lost) and `bytes` are still to be kept.
    fn write_spilled(&mut self, bytes: &[u8], to: SpillTo) -> bool {
        let Some(f) = self.spill.as_mut() else {
            return false;
        };
        match f.write_all(bytes) {
            Ok(()) => {
                self.len += bytes.len();
                true
            }
            Err(e) => {
                spill_failed("write", &e, &to);
                self.unspill(to);
                false
            }
        }
    }

    /// After a failed write: the octets the file holds (the first `len`; a write that
    /// failed part-way may have left more) back into memory, and the file dropped,
    /// which frees its space for other messages.
    fn unspill(&mut self, to: SpillTo) {
        let Some(mut f) = self.spill.take() else {
            return;
        };
        self.start_holding();
        // A file in memory was counted already.
        if !to.dir_in_memory && !self.hold(self.len, to) {
            return;
        }
        match read_file(&mut f, self.len, &self.pool) {
            Ok(v) => self.raw = v,
            Err(e) => self.lose(Lost::ReadBack(e.to_string())),
        }
    }

    /// The spill failed: the message stays in memory from now on.
    fn start_holding(&mut self) {
        self.spill_failed = true;
        self.share.mark_failed_spill();
    }

    /// Takes `n` octets of the budget; false, and the message lost, when they do not
    /// fit.
    fn hold(&mut self, n: usize, to: SpillTo) -> bool {
        if self.share.grow(n, to.budget) {
            return true;
        }
        self.over_budget(n);
        false
    }

    fn over_budget(&mut self, n: usize) {
        let mine = self.share.octets();
        let lost = Lost::OverBudget {
            needed: mine + n,
            held: self.share.budget.held().saturating_sub(mine),
            failed_spill: self.spill_failed,
        };
        self.lose(lost);
    }

    /// Drops every octet kept and what they held of the budget.
    fn lose(&mut self, why: Lost) {
        self.pool.give(std::mem::take(&mut self.raw));
        self.chunks = Vec::new();
        self.spill = None;
        self.share.resize(0, 0);
        self.lost = Some(why);
    }

    /// Appends `name:value CRLF`; in memory (most fields) without building the field
    /// first.
    pub fn append_field(&mut self, name: &[u8], value: &[u8], to: SpillTo) {
        let len = name.len() + 1 + value.len() + 2;
        if self.spill.is_none()
            && !self.spill_failed
            && self.chunks.is_empty()
            && self.len + len <= to.threshold
            && !self.stopped()
            && self.share.grow(len, to.budget)
        {
            if self.raw.capacity() == 0 {
                // Room for the heading and body of ordinary mail in one allocation.
                self.raw
                    .reserve(len.max(FIRST_ALLOCATION.min(to.threshold)));
            }
            self.raw.extend_from_slice(name);
            self.raw.push(b':');
            self.raw.extend_from_slice(value);
            self.raw.extend_from_slice(b"\r\n");
            self.len += len;
        } else {
            let mut field = Vec::with_capacity(len);
            field.extend_from_slice(name);
            field.push(b':');
            field.extend_from_slice(value);
            field.extend_from_slice(b"\r\n");
            self.append(&field, to);
        }
    }
}

/// One spill that failed at `stage` ("create": no file; "write": the file took the
/// octets only in part): a WARN, at most one a second with the exact count, and the
/// metric beside it.
fn spill_failed(stage: &'static str, e: &io::Error, to: &SpillTo) {
    super::throttle::SPILL_FAILED.hit(|| {
        format!(
            "among them {}: {stage} in {}: {e}",
            to.queue_id,
            to.dir.display()
        )
    });
    super::metrics::spill_failure(stage);
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.pool.give(std::mem::take(&mut self.raw));
    }
}

/// The first allocation of a message's buffer: a typical message fits without
/// growing it.
pub(crate) const FIRST_ALLOCATION: usize = 16 << 10;

/// A new buffer for a large message of `need` octets so far: the size of a pooled one
/// (no larger than the spill threshold, past which the message goes to a file), so
/// that it holds every message the pool's buffers hold. Only its pages that are
/// written are memory. `None` past that size (a message kept in memory after its
/// spill failed) or when the allocation fails: the chunks are then held apart.
fn large(need: usize, threshold: usize) -> Option<Vec<u8>> {
    let cap = POOL_MAX.min(threshold).max(POOL_MIN);
    if need > cap {
        return None;
    }
    let mut v = Vec::new();
    v.try_reserve_exact(cap).ok()?;
    Some(v)
}

/// A buffer for `len` octets: pooled if one has room, else allocated, failing rather
/// than aborting when memory is short.
fn buffer_for(len: usize, pool: &Pool) -> io::Result<Vec<u8>> {
    if let Some(v) = pool.take(len) {
        return Ok(v);
    }
    let mut v = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|e| io::Error::new(io::ErrorKind::OutOfMemory, e.to_string()))?;
    Ok(v)
}

/// The first `len` octets of a spill file.
fn read_file(f: &mut File, len: usize, pool: &Pool) -> io::Result<Vec<u8>> {
    let mut v = buffer_for(len, pool)?;
    f.seek(SeekFrom::Start(0))?;
    f.take(len as u64).read_to_end(&mut v)?;
    if v.len() != len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("spill file holds {} of the {len} octets written", v.len()),
        ));
    }
    Ok(v)
}

/// `raw` and `chunks` in one buffer.
fn join(raw: Vec<u8>, chunks: Vec<Bytes>, len: usize, pool: &Pool) -> io::Result<Vec<u8>> {
    if chunks.is_empty() {
        return Ok(raw);
    }
    let mut v = buffer_for(len, pool)?;
    v.extend_from_slice(&raw);
    pool.give(raw);
    // Each chunk is freed once copied.
    for c in chunks {
        v.extend_from_slice(&c);
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to(budget: usize) -> SpillTo<'static> {
        SpillTo {
            threshold: 1000,
            dir: Path::new("/nonexistent/mimeref-milter-test"),
            dir_in_memory: false,
            budget,
            queue_id: "NOQUEUE",
        }
    }

    /// A buffer that spilled `first` into a file on which writes fail from now on
    /// (opened read-only, EBADF; a full disk gives ENOSPC at the same place).
    fn spilled_then_failing(first: &[u8], budget: &Arc<Budget>) -> Buffer {
        let path = std::env::temp_dir().join(format!(
            "mimeref-buffer-unit-{}-{}",
            std::process::id(),
            first.len()
        ));
        std::fs::write(&path, first).unwrap();
        let f = File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let mut b = Buffer::new(Arc::new(Pool::default()), budget.clone());
        b.spill = Some(f);
        b.len = first.len();
        b
    }

    #[test]
    fn a_write_that_fails_brings_the_file_back_into_memory_and_goes_on() {
        let budget = Arc::new(Budget::default());
        let mut b = spilled_then_failing(&[b'a'; 1500], &budget);
        b.append_chunk(Bytes::from_static(&[b'b'; 700]), to(1 << 20));
        b.append(b"tail", to(1 << 20));
        assert!(b.spill.is_none() && b.spill_failed);
        assert!(!b.incomplete && b.lost.is_none(), "nothing cut short");
        assert_eq!(budget.held(), 2204, "every octet counted in the budget");
        let mut want = vec![b'a'; 1500];
        want.extend_from_slice(&[b'b'; 700]);
        want.extend_from_slice(b"tail");
        let mut taken = b.take();
        assert!(taken.is_large());
        let held = taken.take_share();
        assert_eq!(taken.read_back().unwrap(), want);
        assert_eq!(budget.held(), 2204, "until the analysis lets go of it");
        drop(held);
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn a_spill_file_that_cannot_be_made_keeps_the_message_in_memory() {
        let budget = Arc::new(Budget::default());
        let mut b = Buffer::new(Arc::new(Pool::default()), budget.clone());
        for _ in 0..3 {
            b.append_chunk(Bytes::from_static(&[b'x'; 600]), to(1 << 20));
        }
        assert!(b.spill.is_none() && b.spill_failed && b.lost.is_none());
        assert_eq!(budget.held(), 1800, "all of it");
        drop(b);
        assert_eq!(budget.held(), 0);
    }

    /// Held in memory after its spill failed and past the size of a buffer made for a
    /// large message: the chunks are kept apart and joined at end of message, every
    /// octet in its place.
    #[test]
    fn chunks_held_apart_are_joined_in_order() {
        let budget = Arc::new(Budget::default());
        let mut b = Buffer::new(Arc::new(Pool::default()), budget.clone());
        let mut want = Vec::new();
        // 64 KiB chunks, each of its own octet, past the 256 KiB that a buffer for a
        // large message holds when the threshold is small (`large`).
        for i in 0..6u8 {
            let chunk = vec![b'a' + i; 64 << 10];
            want.extend_from_slice(&chunk);
            b.append_chunk(Bytes::from(chunk), to(1 << 30));
        }
        assert!(b.spill_failed && b.lost.is_none());
        assert!(!b.chunks.is_empty(), "the later chunks are held apart");
        assert_eq!(budget.held(), want.len());
        let taken = b.take();
        assert!(taken.is_large());
        assert_eq!(taken.read_back().unwrap(), want);
    }

    #[test]
    fn past_the_budget_the_message_is_lost_and_its_share_given_back() {
        let budget = Arc::new(Budget::default());
        let limit = 3000;
        let mut first = spilled_then_failing(&[b'a'; 1200], &budget);
        first.append(&[b'a'; 800], to(limit));
        assert_eq!((budget.held(), first.lost.clone()), (2000, None));
        let mut second = spilled_then_failing(&[b'b'; 1200], &budget);
        second.append(&[b'b'; 10], to(limit));
        assert_eq!(
            second.lost,
            Some(Lost::OverBudget {
                needed: 1200,
                held: 2000,
                failed_spill: true,
            }),
            "what the file held does not fit beside the first"
        );
        assert!(
            second.raw.capacity() == 0 && second.chunks.is_empty() && second.share.octets() == 0
        );
        assert_eq!(budget.held(), 2000, "the second holds nothing");
        second.append(&[b'b'; 10], to(limit));
        assert_eq!(second.len, 1200, "and keeps nothing more");
        // The first may still grow to the limit, not past it.
        first.append(&[b'a'; 1000], to(limit));
        assert!(first.lost.is_none());
        first.append(b"!", to(limit));
        assert!(matches!(first.lost, Some(Lost::OverBudget { .. })));
        assert_eq!(budget.held(), 0, "everything given back");
    }

    #[test]
    fn a_file_that_cannot_be_read_back_loses_the_message() {
        let budget = Arc::new(Budget::default());
        let mut b = Buffer::new(Arc::new(Pool::default()), budget.clone());
        // A directory: writes fail (EBADF) and so does reading it (EISDIR).
        b.spill = Some(File::open(std::env::temp_dir()).unwrap());
        b.len = 1500;
        b.append(b"more", to(1 << 20));
        assert!(matches!(b.lost, Some(Lost::ReadBack(_))), "{:?}", b.lost);
        assert_eq!(budget.held(), 0);
    }

    fn dir(name: &str) -> std::path::PathBuf {
        let d =
            std::env::temp_dir().join(format!("mimeref-buffer-unit-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn every_octet_in_memory_counts_and_a_full_budget_sends_the_next_to_disk() {
        let budget = Arc::new(Budget::default());
        let d = dir("early");
        let to = SpillTo {
            threshold: 1 << 20,
            dir: &d,
            dir_in_memory: false,
            budget: 3000,
            queue_id: "NOQUEUE",
        };
        let pool = Arc::new(Pool::default());
        let mut first = Buffer::new(pool.clone(), budget.clone());
        first.append_field(b"Subject", b" one", to);
        first.append_chunk(Bytes::from_static(&[b'a'; 1500]), to);
        assert_eq!(
            budget.held(),
            14 + 1500,
            "below the threshold, in memory, counted"
        );
        let mut second = Buffer::new(pool, budget.clone());
        second.append_chunk(Bytes::from_static(&[b'b'; 1000]), to);
        assert_eq!(budget.held(), 2514);
        second.append_chunk(Bytes::from_static(&[b'c'; 1000]), to);
        assert!(
            second.spill.is_some(),
            "no room in memory: to disk, far below the threshold"
        );
        assert!(second.lost.is_none());
        assert_eq!(budget.held(), 1514, "and its octets given back");
        let mut want = vec![b'b'; 1000];
        want.extend_from_slice(&[b'c'; 1000]);
        assert_eq!(second.take().read_back().unwrap(), want);
        drop(first);
        assert_eq!(budget.held(), 0, "an aborted message gives back its share");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_spill_directory_in_memory_counts_and_past_the_budget_the_message_is_lost() {
        let budget = Arc::new(Budget::default());
        let d = dir("tmpfs");
        let to = SpillTo {
            threshold: 1000,
            dir: &d,
            dir_in_memory: true,
            budget: 2500,
            queue_id: "NOQUEUE",
        };
        let mut b = Buffer::new(Arc::new(Pool::default()), budget.clone());
        for _ in 0..2 {
            b.append_chunk(Bytes::from_static(&[b'x'; 800]), to);
        }
        assert!(b.spill.is_some());
        assert_eq!(budget.held(), 1600, "the file's octets count as memory");
        b.append_chunk(Bytes::from_static(&[b'x'; 800]), to);
        assert_eq!(budget.held(), 2400);
        b.append_chunk(Bytes::from_static(&[b'x'; 800]), to);
        assert_eq!(
            b.lost,
            Some(Lost::OverBudget {
                needed: 3200,
                held: 0,
                failed_spill: false
            })
        );
        assert!(b.spill.is_none(), "the file is dropped");
        assert_eq!(budget.held(), 0);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_share_resized_for_a_replaced_body_fits_the_budget_or_stays() {
        let budget = Arc::new(Budget::default());
        let mut h = Held::new(&budget);
        assert!(h.resize(700, 1000));
        let mut other = Held::new(&budget);
        assert!(!other.resize(400, 1000), "700 + 400 do not fit 1000");
        assert_eq!((budget.held(), other.octets()), (700, 0));
        assert!(h.resize(100, 1000));
        assert!(other.resize(400, 1000));
        drop((h, other));
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn the_pool_keeps_few_large_buffers() {
        let pool = Pool::default();
        pool.give(Vec::with_capacity(SMALL));
        pool.give(Vec::with_capacity(POOL_MAX + 1));
        assert!(pool.take(0).is_none(), "small and oversized ones are freed");
        for i in 1..=POOL_BUFFERS + 1 {
            let mut v = Vec::with_capacity(SMALL + i * 1000);
            v.push(1);
            pool.give(v);
        }
        let caps = |pool: &Pool| {
            let mut c: Vec<usize> = pool
                .0
                .lock()
                .unwrap()
                .iter()
                .map(|b| b.capacity())
                .collect();
            c.sort();
            c
        };
        let kept = caps(&pool);
        assert_eq!(kept.len(), POOL_BUFFERS, "the smallest gave way");
        assert!(kept[0] >= SMALL + 2000);
        assert!(pool.take(SMALL + (POOL_BUFFERS + 2) * 1000).is_none());
        let v = pool.take(SMALL).unwrap();
        assert!(v.is_empty() && v.capacity() >= SMALL + (POOL_BUFFERS + 1) * 1000);
    }
}
