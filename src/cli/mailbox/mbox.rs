//! Splitting an mbox into its messages (mboxo and mboxrd), held whole or streamed
//! through a window of the file.

use std::io::{self, Read};

use super::{Message, NotRead};

/// Whether a message of an mbox starts 3 octets into `b`: a `From ` line after an empty
/// line, where the splitter cuts.
pub(super) fn starts_message(b: &[u8]) -> bool {
    b.len() == 8
        && &b[3..] == b"From "
        && b[2] == b'\n'
        && (b[1] == b'\n' || (b[1] == b'\r' && b[0] == b'\n'))
}

/// Where the first `From ` line starts (after a UTF-8 byte order mark) when `head`
/// is the start of an mbox.
pub(super) fn mbox_start(head: &[u8]) -> Option<usize> {
    let bom = if head.starts_with(b"\xef\xbb\xbf") {
        3
    } else {
        0
    };
    head[bom..].starts_with(b"From ").then_some(bom)
}

/// Octets read at a time from an mbox too large to be read whole.
pub(super) const CHUNK: usize = 1 << 20;

/// The part of an mbox in memory: `buf` starts at offset `base` of the file.
pub(super) struct Window<R> {
    pub(super) buf: Vec<u8>,
    pub(super) base: u64,
    pub(super) more: Option<R>,
    pub(super) eof: bool,
    pub(super) chunk: usize,
}

impl Window<io::Empty> {
    /// A whole mbox in memory.
    pub(super) fn whole(buf: Vec<u8>) -> Self {
        Window {
            buf,
            base: 0,
            more: None,
            eof: true,
            chunk: CHUNK,
        }
    }
}

impl<R: Read> Window<R> {
    /// Appends the next chunk; `eof` once nothing more comes.
    fn fill(&mut self, read: &mut impl FnMut(u64)) -> io::Result<()> {
        let Some(r) = self.more.as_mut() else {
            self.eof = true;
            return Ok(());
        };
        let n = r.take(self.chunk as u64).read_to_end(&mut self.buf)?;
        read(n as u64);
        self.eof = n == 0;
        Ok(())
    }

    /// Forgets the octets before `at`.
    fn drop_front(&mut self, at: usize) {
        self.buf.drain(..at);
        self.base += at as u64;
    }

    /// The end of the line that starts at `from` (a From line: its text is not
    /// needed, so a long one is dropped and `from` moves with the window); `None` when
    /// the file ends first.
    fn line_end(
        &mut self,
        from: &mut usize,
        read: &mut impl FnMut(u64),
    ) -> io::Result<Option<usize>> {
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[*from..]) {
                return Ok(Some(*from + i));
            }
            if self.eof {
                return Ok(None);
            }
            if self.buf.len() - *from > self.chunk {
                self.drop_front(self.buf.len());
                *from = 0;
            }
            self.fill(read)?;
        }
    }

    /// Forgets the octets before `at` once they are a chunk or more; returns how many.
    fn compact(&mut self, at: usize) -> usize {
        if at < self.chunk {
            return 0;
        }
        self.drop_front(at);
        at
    }
}

/// Splits an mbox into its messages: `w` holds its start (the first `From ` line at
/// `bom`, named `first_at`) and the rest, read as needed.
///
/// A message starts at a `From ` line at the start of the file or after an empty line
/// (`\n` or `\r\n`); that empty line separates and is not the message's. mboxrd quoting:
/// a line of one or more `>` before `From ` loses one `>`. The separators are found
/// with one substring search over the bytes, not line by line: splitting then costs
/// about one copy of each message. Of a message longer than the window, at most
/// `limit` octets are kept and the rest is counted as it passes: memory stays at a
/// chunk and the limit whatever the size of the message.
pub(super) fn split_mbox<R: Read>(
    name: &str,
    w: &mut Window<R>,
    bom: usize,
    first_at: u64,
    limit: usize,
    sink: &mut impl FnMut(Message) -> bool,
    read: &mut impl FnMut(u64),
) -> Result<(), NotRead> {
    let separator = memchr::memmem::Finder::new(b"\nFrom ");
    // The current message's From line, and the offset it is named by.
    let mut from = bom;
    let mut at = first_at;
    loop {
        let err = |e: io::Error| NotRead::error(format!("{name}:{at}"), e);
        let Some(nl) = w.line_end(&mut from, read).map_err(err)? else {
            // A From line with nothing after it: an empty message.
            sink(Message {
                source: format!("{name}:{at}"),
                bytes: Vec::new(),
                cut: 0,
                in_mbox: true,
                envelope_date: crate::cli::date::from_line(&w.buf[from..]),
            });
            return Ok(());
        };
        let envelope_date = crate::cli::date::from_line(&w.buf[from..nl]);
        let mut content = nl + 1;
        let mut searched = content;
        // The message's first octets, once it is longer than the window, and how many
        // octets went past the window.
        let mut kept: Vec<u8> = Vec::new();
        let mut passed: u64 = 0;
        let found = loop {
            let buf = &w.buf;
            let start = searched.max(content);
            // `\nFrom ` whose line break ends an empty line: the line before the From
            // line is `\n` or `\r\n` (never the From line itself: content - 1 is its
            // `\n`, or the window keeps 8 octets before the search).
            let found = separator
                .find_iter(&buf[start..])
                .map(|i| start + i)
                .find(|&p| buf[p - 1] == b'\n' || (buf[p - 1] == b'\r' && buf[p - 2] == b'\n'));
            if found.is_some() || w.eof {
                break found;
            }
            if buf.len() > content + 8 && buf.len() - content > w.chunk {
                // Longer than the window: its octets move out, at most `limit` kept,
                // but for the last 8, where a separator may begin.
                let upto = buf.len() - 8;
                let room = limit.saturating_sub(kept.len());
                if kept.capacity() == 0 {
                    // Room for the limit at once: grown by doubling, the old buffer and
                    // the new would both be held while it is copied.
                    kept.reserve_exact(limit.min(256 << 20));
                }
                let piece = &buf[content..upto];
                kept.extend_from_slice(&piece[..piece.len().min(room)]);
                passed += piece.len() as u64;
                w.drop_front(upto);
                content = 0;
                // Positions 0 and 1 were searched before the move.
                searched = 2;
            } else {
                // The separator may straddle the end: search again from just before it.
                searched = buf.len().saturating_sub(7).max(content);
            }
            w.fill(read).map_err(err)?;
        };
        let end = match found {
            Some(p) if w.buf[p - 1] == b'\r' => p - 1,
            Some(p) => p,
            None => w.buf.len(),
        };
        let (bytes, cut) = message_bytes(kept, passed, &w.buf[content..end], limit);
        let message = Message {
            source: format!("{name}:{at}"),
            bytes,
            cut,
            in_mbox: true,
            envelope_date,
        };
        if !sink(message) {
            return Ok(());
        }
        let Some(p) = found else {
            return Ok(());
        };
        from = p + 1;
        at = w.base + from as u64;
        from -= w.compact(from);
    }
}

/// A message's octets, unquoted, and how many were cut: `kept` (its first octets,
/// once it was longer than the window), `passed` octets gone past the window, and
/// `rest` still in it; at most `limit` are kept.
fn message_bytes(mut kept: Vec<u8>, passed: u64, rest: &[u8], limit: usize) -> (Vec<u8>, u64) {
    let total = passed + rest.len() as u64;
    let take = rest.len().min(limit.saturating_sub(kept.len()));
    let held = kept.len() + take;
    let bytes = if kept.is_empty() {
        unquote(&rest[..take])
    } else {
        kept.extend_from_slice(&rest[..take]);
        unquote_in_place(&mut kept);
        kept
    };
    (bytes, total - held as u64)
}

/// A message's lines of one or more `>` before `From ` lose one `>` (mboxrd).
fn unquote(content: &[u8]) -> Vec<u8> {
    let mut v = content.to_vec();
    unquote_in_place(&mut v);
    v
}

/// [`unquote`] without a second buffer: a message kept to the limit is not held twice.
pub(super) fn unquote_in_place(v: &mut Vec<u8>) {
    let finder = memchr::memmem::Finder::new(b">From ");
    // Octets before `read` are moved to `write`; those from `read` on are untouched.
    let (mut read, mut write, mut scan) = (0, 0, 0);
    while let Some(i) = finder.find(&v[scan..]) {
        let q = scan + i;
        scan = q + 1;
        // The `>`s before `From ` lie in the untouched part: the last match left a
        // `From ` between it and this one.
        let line = v[..q].iter().rposition(|&b| b != b'>').map_or(0, |i| i + 1);
        if line == 0 || v[line - 1] == b'\n' {
            if write != read {
                v.copy_within(read..line, write);
            }
            write += line - read;
            read = line + 1;
        }
    }
    let len = v.len();
    if write != read {
        v.copy_within(read..len, write);
    }
    v.truncate(write + len - read);
}
