//! A message's octets while it is received: in memory up to `[limits] spill_threshold`,
//! beyond that in an unlinked file in `spill_directory`, so that many large messages
//! trickling in over slow SMTP sessions cost disk cache, not daemon memory; read back
//! whole at end of message (the engine works on one contiguous buffer), at most one
//! spilled message per CPU at a time. Large buffers are kept for the next large
//! messages ([`Pool`]: at most `POOL_BUFFERS` of up to `POOL_MAX` octets).
//!
//! A leaf of the milter: it knows bytes, files and the default spill threshold, nothing
//! of sessions, limits or policy. How a spill file is made is the configuration's
//! ([`spill_file`]), so that `config-check` tries exactly that.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use tracing::warn;

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
    /// The body chunks that came after `raw` was full and no pooled buffer had room, as
    /// indymilter handed them over (each its own allocation of exactly the chunk's
    /// size), joined once at end of message. Growing `raw` instead copied the message
    /// again at every doubling: 1.3 MB of the 3.5 MB copied per 2 MB message.
    pub(crate) chunks: Vec<Bytes>,
    /// Where `raw` goes back when it is a large buffer.
    pub(crate) pool: Arc<Pool>,
    /// The same bytes in a temporary file once the message passed `spill_at`.
    pub(crate) spill: Option<File>,
    /// Octets buffered (in `raw` and `chunks`, or in `spill`).
    pub(crate) len: usize,
    /// Spilling failed once for this message: keep the rest in memory.
    pub(crate) no_spill: bool,
    /// Buffering stopped (at a limit, or a spill file could not be written); later
    /// octets are not kept.
    pub(crate) incomplete: bool,
}

/// What a [`Buffer`] held, taken out of it to be read back (possibly on another thread).
#[derive(Debug)]
pub struct Taken {
    raw: Vec<u8>,
    chunks: Vec<Bytes>,
    spill: Option<File>,
    len: usize,
    pool: Arc<Pool>,
}

impl Buffer {
    pub fn new(pool: Arc<Pool>) -> Buffer {
        Buffer {
            raw: Vec::new(),
            chunks: Vec::new(),
            pool,
            spill: None,
            len: 0,
            no_spill: false,
            incomplete: false,
        }
    }

    pub fn is_spilled(&self) -> bool {
        self.spill.is_some()
    }

    /// Everything kept so far, leaving the buffer empty.
    pub fn take(&mut self) -> Taken {
        Taken {
            raw: std::mem::take(&mut self.raw),
            chunks: std::mem::take(&mut self.chunks),
            spill: self.spill.take(),
            len: self.len,
            pool: self.pool.clone(),
        }
    }
}

impl Taken {
    /// Every buffered octet in one buffer: `raw` (when it holds them all), `raw` and
    /// `chunks` joined, or the spill file read back whole; in a pooled buffer if one
    /// has room.
    pub fn read_back(self) -> io::Result<Vec<u8>> {
        read_back(self.raw, self.chunks, self.spill, self.len, &self.pool)
    }

    pub fn is_spilled(&self) -> bool {
        self.spill.is_some()
    }

    pub fn len(&self) -> usize {
        self.len
    }
}

impl Buffer {
    /// Appends buffered octets, spilling to a file past `spill_at`.
    pub fn append(&mut self, bytes: &[u8], spill_at: usize, dir: &std::path::Path) {
        if self.incomplete {
            return;
        }
        self.spill_past(bytes.len(), spill_at, dir);
        if self.spill.is_some() {
            self.write_spilled(bytes);
        } else {
            if self.chunks.is_empty() {
                self.raw.extend_from_slice(bytes);
            } else {
                self.chunks.push(Bytes::copy_from_slice(bytes));
            }
            self.len += bytes.len();
        }
    }

    /// Appends a body chunk: copied into `raw` while that has room, otherwise kept as it
    /// is.
    pub fn append_chunk(&mut self, chunk: Bytes, spill_at: usize, dir: &std::path::Path) {
        if self.incomplete {
            return;
        }
        self.spill_past(chunk.len(), spill_at, dir);
        if self.spill.is_some() {
            self.write_spilled(&chunk);
        } else {
            let full = self.raw.capacity() - self.raw.len() < chunk.len();
            if full && self.chunks.is_empty() {
                // The first allocation is full: a large message. It continues in a
                // pooled buffer if one has room, as one copy of each chunk.
                if let Some(mut big) = self.pool.take(self.len + chunk.len()) {
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
    }

    /// Moves what memory holds to a new spill file when `n` more octets would pass
    /// `spill_at`. If that fails the message stays in memory.
    fn spill_past(&mut self, n: usize, spill_at: usize, dir: &std::path::Path) {
        if self.spill.is_some() || self.no_spill || self.len + n <= spill_at {
            return;
        }
        let write = |mut f: File| {
            f.write_all(&self.raw)?;
            for c in &self.chunks {
                f.write_all(c)?;
            }
            Ok::<_, io::Error>(f)
        };
        match spill_file(dir).and_then(write) {
            Ok(f) => {
                self.spill = Some(f);
                self.pool.give(std::mem::take(&mut self.raw));
                self.chunks = Vec::new();
            }
            Err(e) => {
                self.no_spill = true;
                warn!(
                    "cannot spill a large message to {}: {e}; keeping it in memory",
                    dir.display()
                );
            }
        }
    }

    /// A failing write ends buffering (the message is then analysed as far as it was
    /// kept, like one over the size limit) rather than losing the message.
    fn write_spilled(&mut self, bytes: &[u8]) {
        let Some(f) = self.spill.as_mut() else {
            return;
        };
        match f.write_all(bytes) {
            Ok(()) => self.len += bytes.len(),
            Err(e) => {
                warn!("writing a spilled message: {e}; the rest is not analysed");
                self.incomplete = true;
            }
        }
    }

    /// Appends `name:value CRLF`; in memory (most fields) without building the field
    /// first.
    pub fn append_field(
        &mut self,
        name: &[u8],
        value: &[u8],
        spill_at: usize,
        dir: &std::path::Path,
    ) {
        let len = name.len() + 1 + value.len() + 2;
        if self.spill.is_none() && self.chunks.is_empty() && self.len + len <= spill_at {
            if self.raw.capacity() == 0 {
                // Room for the heading and body of ordinary mail in one allocation.
                self.raw.reserve(len.max(FIRST_ALLOCATION.min(spill_at)));
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
            self.append(&field, spill_at, dir);
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.pool.give(std::mem::take(&mut self.raw));
    }
}

/// The first allocation of a message's buffer: a typical message fits without
/// growing it.
pub(crate) const FIRST_ALLOCATION: usize = 16 << 10;

fn read_back(
    raw: Vec<u8>,
    chunks: Vec<Bytes>,
    spill: Option<File>,
    len: usize,
    pool: &Pool,
) -> io::Result<Vec<u8>> {
    if spill.is_none() && chunks.is_empty() {
        return Ok(raw);
    }
    let mut v = match pool.take(len) {
        Some(v) => v,
        None => {
            let mut v = Vec::new();
            v.try_reserve_exact(len)
                .map_err(|e| io::Error::new(io::ErrorKind::OutOfMemory, e.to_string()))?;
            v
        }
    };
    if let Some(mut f) = spill {
        f.seek(SeekFrom::Start(0))?;
        f.take(len as u64).read_to_end(&mut v)?;
    } else {
        v.extend_from_slice(&raw);
        pool.give(raw);
        // Each chunk is freed once copied.
        for c in chunks {
            v.extend_from_slice(&c);
        }
    }
    if v.len() != len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "message shorter than buffered",
        ));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

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
