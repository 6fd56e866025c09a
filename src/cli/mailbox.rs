//! The inputs of `survey`: message files, directories of them, mbox files and Maildir
//! folders, read as one stream of messages.
//!
//! - A file is one message, unless it starts with an mbox `From ` line (after a UTF-8
//!   byte order mark, if any): then it is an mbox, split at every `From ` line that
//!   starts the file or follows an empty line (mboxo and mboxrd; `>From ` lines lose
//!   one `>`). Its messages are named `PATH:OFFSET`, the offset of their `From ` line.
//! - A directory with `cur/` and `new/` is a Maildir: the files in those two, then its
//!   Maildir++ folders (`.Name/` holding `cur/` and `new/`); `tmp/` is mail still being
//!   delivered and is left alone.
//! - Any other directory is walked: every file and folder in it, in name order, but
//!   those whose name starts with a dot or matches an `--exclude` glob.
//!
//! A path or message that cannot be read is reported and the rest goes on.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// What a walk of the paths found.
#[derive(Debug, Default)]
pub struct Inputs {
    /// Files to read, in order.
    pub files: Vec<PathBuf>,
    /// Their octets, for the progress bar (0 when not asked for).
    pub bytes: u64,
    /// Files an `--exclude` glob matched.
    pub excluded: Vec<PathBuf>,
    /// Paths that could not be listed or read: (path, error).
    pub unreadable: Vec<(String, String)>,
}

/// Lists the files `paths` stand for. A file named on the command line is always read;
/// `exclude` (globs with `*` and `?`) applies to the names found in directories.
/// `sizes`: add up the files' octets (one `stat` each, which only the progress bar
/// needs).
pub fn walk(paths: &[PathBuf], exclude: &[String], sizes: bool) -> Inputs {
    let mut w = Walk {
        out: Inputs::default(),
        exclude,
        sizes,
    };
    for p in paths {
        match fs::metadata(p) {
            Ok(m) if m.is_dir() => {
                if is_maildir(p) {
                    w.maildir(p);
                } else {
                    w.directory(p);
                }
            }
            Ok(m) => {
                w.out.bytes += m.len();
                w.out.files.push(p.clone());
            }
            Err(e) => w
                .out
                .unreadable
                .push((p.display().to_string(), e.to_string())),
        }
    }
    w.out
}

fn is_maildir(p: &Path) -> bool {
    p.join("cur").is_dir() && p.join("new").is_dir()
}

/// What a directory entry is.
enum Kind {
    Dir,
    File,
    /// Neither (a device, a socket, a link to a folder): passed over.
    Other,
}

struct Walk<'a> {
    out: Inputs,
    exclude: &'a [String],
    sizes: bool,
}

impl Walk<'_> {
    /// The entries of a directory sorted by name; what cannot be read is recorded.
    fn entries(&mut self, dir: &Path) -> Vec<(String, PathBuf, Kind)> {
        let rd = match fs::read_dir(dir) {
            Ok(rd) => rd,
            Err(e) => {
                self.out
                    .unreadable
                    .push((dir.display().to_string(), e.to_string()));
                return Vec::new();
            }
        };
        let mut v = Vec::new();
        for e in rd {
            let e = match e {
                Ok(e) => e,
                Err(err) => {
                    self.out
                        .unreadable
                        .push((dir.display().to_string(), err.to_string()));
                    continue;
                }
            };
            let path = e.path();
            match kind(&e) {
                Ok(k) => v.push((e.file_name().to_string_lossy().into_owned(), path, k)),
                Err(err) => self
                    .out
                    .unreadable
                    .push((path.display().to_string(), err.to_string())),
            }
        }
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    fn file(&mut self, path: PathBuf) {
        if self.sizes {
            self.out.bytes += fs::metadata(&path).map_or(0, |m| m.len());
        }
        self.out.files.push(path);
    }

    fn directory(&mut self, dir: &Path) {
        for (name, path, k) in self.entries(dir) {
            if name.starts_with('.') {
                continue;
            }
            match k {
                Kind::Dir if is_maildir(&path) => self.maildir(&path),
                Kind::Dir => self.directory(&path),
                Kind::File
                    if self
                        .exclude
                        .iter()
                        .any(|g| crate::policy::glob_match(g.as_bytes(), name.as_bytes())) =>
                {
                    self.out.excluded.push(path)
                }
                Kind::File => self.file(path),
                Kind::Other => {}
            }
        }
    }

    fn maildir(&mut self, dir: &Path) {
        for sub in ["cur", "new"] {
            for (name, path, k) in self.entries(&dir.join(sub)) {
                if matches!(k, Kind::File) && !name.starts_with('.') {
                    self.file(path);
                }
            }
        }
        for (name, path, k) in self.entries(dir) {
            if name.starts_with('.') && matches!(k, Kind::Dir) && is_maildir(&path) {
                self.maildir(&path);
            }
        }
    }
}

/// What an entry is, from the directory listing where it can (no `stat`). Links are
/// not followed to folders (a link to a folder above would walk for ever); a link to a
/// file is read, and a dangling one is reported like any file that cannot be read.
fn kind(e: &fs::DirEntry) -> io::Result<Kind> {
    let t = e.file_type()?;
    let t = if t.is_symlink() {
        let target = fs::metadata(e.path())?.file_type();
        if target.is_file() {
            return Ok(Kind::File);
        }
        return Ok(Kind::Other);
    } else {
        t
    };
    Ok(if t.is_dir() {
        Kind::Dir
    } else if t.is_file() {
        Kind::File
    } else {
        Kind::Other
    })
}

/// One message read from an input.
#[derive(Debug)]
pub struct Message {
    /// The file, or `FILE:OFFSET` in an mbox.
    pub source: String,
    pub bytes: Vec<u8>,
}

/// Reads `path`: one message, or every message of an mbox, each handed to `sink`
/// (which returns false to stop). `read` is told the octets read as they go. Returns
/// the error that stopped the reading, with where it happened.
pub fn read(
    path: &Path,
    mut sink: impl FnMut(Message) -> bool,
    mut read: impl FnMut(u64),
) -> Result<(), (String, String)> {
    let name = path.display().to_string();
    let mut f = File::open(path).map_err(|e| (name.clone(), e.to_string()))?;
    let size = f.metadata().map_or(u64::MAX, |m| m.len());
    if size <= WHOLE {
        // Most files: one read into a buffer of the right size, as fs::read does; an
        // mbox this small is split in memory.
        let bytes = read_sized(&mut f, size).map_err(|e| (name.clone(), e.to_string()))?;
        let bom = mbox_start(&bytes);
        if let Some(bom) = bom {
            read(bytes.len() as u64);
            return mbox(&name, bytes, None::<File>, bom, &mut sink, &mut read);
        }
        read(bytes.len() as u64);
        sink(Message {
            source: name,
            bytes,
        });
        return Ok(());
    }
    // A large file, an mbox most likely: streamed, a message at a time.
    let mut head = Vec::with_capacity(8);
    (&mut f)
        .take(8)
        .read_to_end(&mut head)
        .map_err(|e| (name.clone(), e.to_string()))?;
    if let Some(bom) = mbox_start(&head) {
        read(head.len() as u64);
        return mbox(&name, head, Some(f), bom, &mut sink, &mut read);
    }
    let mut bytes = head;
    f.read_to_end(&mut bytes)
        .map_err(|e| (name.clone(), e.to_string()))?;
    read(bytes.len() as u64);
    sink(Message {
        source: name,
        bytes,
    });
    Ok(())
}

/// A file of `size` octets, whole: one read into a buffer of that size (its spare
/// capacity, not zeroed first) and one that finds the end, as `fs::read` does.
/// `File::read_to_end` would ask the file for its size and position again (a statx and
/// an lseek), and a reader without the size reads the first 8 KiB apart. A file that
/// grew since its size was taken is read on to its end.
fn read_sized(f: &mut File, size: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(size as usize + 1);
    loop {
        if bytes.len() == bytes.capacity() {
            bytes.reserve(8 << 10);
        }
        match rustix::io::read(&*f, rustix::buffer::spare_capacity(&mut bytes)) {
            Ok(0) => return Ok(bytes),
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Files up to this size are read whole; larger ones are streamed if they are mboxes.
const WHOLE: u64 = 64 << 20;

/// Where the first `From ` line starts (after a UTF-8 byte order mark) when `head`
/// is the start of an mbox.
fn mbox_start(head: &[u8]) -> Option<usize> {
    let bom = if head.starts_with(b"\xef\xbb\xbf") {
        3
    } else {
        0
    };
    head[bom..].starts_with(b"From ").then_some(bom)
}

/// Octets read at a time from an mbox too large to be read whole.
const CHUNK: usize = 1 << 20;

/// Splits an mbox into its messages: `buf` holds its start, `more` the rest when it was
/// too large to read whole (`read` is told the octets of each chunk taken from it).
///
/// A message starts at a `From ` line at the start of the file or after an empty line
/// (`\n` or `\r\n`); that empty line separates and is not the message's. mboxrd quoting:
/// a line of one or more `>` before `From ` loses one `>`. The separators are found
/// with one substring search over the bytes, not line by line: splitting then costs
/// about one copy of each message.
fn mbox<R: Read>(
    name: &str,
    buf: Vec<u8>,
    more: Option<R>,
    bom: usize,
    sink: &mut impl FnMut(Message) -> bool,
    read: &mut impl FnMut(u64),
) -> Result<(), (String, String)> {
    let mut input = Input {
        buf,
        base: 0,
        eof: more.is_none(),
        more,
        chunk: CHUNK,
    };
    split_mbox(name, &mut input, bom, sink, read)
}

/// The part of an mbox in memory: `buf` starts at offset `base` of the file.
struct Input<R> {
    buf: Vec<u8>,
    base: u64,
    more: Option<R>,
    eof: bool,
    chunk: usize,
}

impl<R: Read> Input<R> {
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

    /// Forgets the octets before `at` once they are a chunk or more; returns how many.
    fn compact(&mut self, at: usize) -> usize {
        if at < self.chunk {
            return 0;
        }
        self.buf.drain(..at);
        self.base += at as u64;
        at
    }
}

fn split_mbox<R: Read>(
    name: &str,
    input: &mut Input<R>,
    bom: usize,
    sink: &mut impl FnMut(Message) -> bool,
    read: &mut impl FnMut(u64),
) -> Result<(), (String, String)> {
    let separator = memchr::memmem::Finder::new(b"\nFrom ");
    // The current message's From line, and how far the search for its end has got.
    let mut from = bom;
    let mut searched = bom;
    let mut first = true;
    loop {
        let err = |input: &Input<R>, e: io::Error| {
            (
                format!("{name}:{}", input.base + from as u64),
                e.to_string(),
            )
        };
        let Some(nl) = memchr::memchr(b'\n', &input.buf[from..]) else {
            if !input.eof {
                input.fill(read).map_err(|e| err(input, e))?;
                continue;
            }
            // A From line with nothing after it: an empty message.
            let at = if first { 0 } else { input.base + from as u64 };
            sink(Message {
                source: format!("{name}:{at}"),
                bytes: Vec::new(),
            });
            return Ok(());
        };
        let content = from + nl + 1;
        let buf = &input.buf;
        // `\nFrom ` whose line break ends an empty line: the line before the From line
        // is `\n` or `\r\n` (never the From line itself: content - 1 is its `\n`).
        let found = separator
            .find_iter(&buf[searched.max(content)..])
            .map(|i| searched.max(content) + i)
            .find(|&p| buf[p - 1] == b'\n' || (buf[p - 1] == b'\r' && buf[p - 2] == b'\n'));
        let end = match found {
            Some(p) if buf[p - 1] == b'\r' => p - 1,
            Some(p) => p,
            None if !input.eof => {
                // The separator may straddle the end: search again from just before it.
                searched = buf.len().saturating_sub(7).max(content);
                input.fill(read).map_err(|e| err(input, e))?;
                continue;
            }
            None => buf.len(),
        };
        let at = if first { 0 } else { input.base + from as u64 };
        first = false;
        let message = Message {
            source: format!("{name}:{at}"),
            bytes: unquote(&buf[content..end]),
        };
        if !sink(message) {
            return Ok(());
        }
        let Some(p) = found else {
            return Ok(());
        };
        from = p + 1;
        let dropped = input.compact(from);
        from -= dropped;
        searched = from;
    }
}

/// A message's lines of one or more `>` before `From ` lose one `>` (mboxrd).
fn unquote(content: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(content.len());
    let mut copied = 0;
    for q in memchr::memmem::find_iter(content, b">From ") {
        let line = content[..q]
            .iter()
            .rposition(|&b| b != b'>')
            .map_or(0, |i| i + 1);
        if line == 0 || content[line - 1] == b'\n' {
            out.extend_from_slice(&content[copied..line]);
            copied = line + 1;
        }
    }
    out.extend_from_slice(&content[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages of an mbox held whole.
    fn split(text: &[u8]) -> Vec<(String, Vec<u8>)> {
        streamed(text, 0, usize::MAX)
    }

    /// The messages of an mbox of which `whole` octets are read at first and the rest
    /// streamed in chunks of `chunk`.
    fn streamed(text: &[u8], whole: usize, chunk: usize) -> Vec<(String, Vec<u8>)> {
        let whole = whole.min(text.len());
        let mut out = Vec::new();
        let mut total = whole as u64;
        let bom = mbox_start(text).unwrap_or(0);
        let rest = io::Cursor::new(text[whole..].to_vec());
        let mut input = Input {
            buf: text[..whole].to_vec(),
            base: 0,
            eof: chunk == usize::MAX,
            more: (chunk != usize::MAX).then_some(rest),
            chunk: chunk.clamp(1, 1 << 20),
        };
        if chunk == usize::MAX {
            input.buf = text.to_vec();
            total = text.len() as u64;
        }
        split_mbox(
            "m",
            &mut input,
            bom,
            &mut |m: Message| {
                out.push((m.source, m.bytes));
                true
            },
            &mut |n| total += n,
        )
        .unwrap();
        assert_eq!(total, text.len() as u64);
        out
    }

    /// The line-by-line splitter the substring search replaced, kept as the reference
    /// for what an mbox holds.
    fn line_by_line(text: &[u8]) -> Vec<(String, Vec<u8>)> {
        let bom = mbox_start(text).unwrap_or(0);
        let mut out = Vec::new();
        let mut offset = 0usize;
        let mut current: Option<(usize, Vec<u8>)> = None;
        let mut after_empty = true;
        for (i, line) in text.split_inclusive(|&b| b == b'\n').enumerate() {
            let at = offset;
            offset += line.len();
            let text = if i == 0 { &line[bom..] } else { line };
            if after_empty && text.starts_with(b"From ") {
                if let Some((start, mut bytes)) = current.take() {
                    if bytes.ends_with(b"\r\n") {
                        bytes.truncate(bytes.len() - 2);
                    } else if bytes.ends_with(b"\n") {
                        bytes.truncate(bytes.len() - 1);
                    }
                    out.push((format!("m:{start}"), bytes));
                }
                current = Some((at, Vec::new()));
                after_empty = false;
                continue;
            }
            let content = text
                .strip_suffix(b"\n")
                .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
                .unwrap_or(text);
            after_empty = content.is_empty();
            if let Some((_, bytes)) = current.as_mut() {
                let quoted = content.iter().take_while(|&&b| b == b'>').count();
                if quoted > 0 && content[quoted..].starts_with(b"From ") {
                    bytes.extend_from_slice(&text[1..]);
                } else {
                    bytes.extend_from_slice(text);
                }
            }
        }
        if let Some((start, bytes)) = current {
            out.push((format!("m:{start}"), bytes));
        }
        out
    }

    proptest::proptest! {
        /// Any mbox made of the lines that matter, held whole or streamed in chunks
        /// of any size: the messages the line-by-line reading finds.
        #[test]
        fn the_search_splits_as_line_by_line_reading_does(
            lines in proptest::collection::vec(0usize..12, 0..40),
            whole in 0usize..200,
            chunk in 1usize..64,
        ) {
            const LINES: [&str; 12] = [
                "From a\n", "\n", "\r\n", ">From b\n", ">>From c\r\n", "text\n",
                "From", ">", "\r", "x>From d\n", "From  e\r\n", ">From",
            ];
            let mut text = b"From first\n".to_vec();
            for l in lines {
                text.extend_from_slice(LINES[l].as_bytes());
            }
            let want = line_by_line(&text);
            proptest::prop_assert_eq!(&split(&text), &want);
            proptest::prop_assert_eq!(&streamed(&text, whole, chunk), &want);
        }
    }

    #[test]
    fn mbox_messages_split_at_from_lines_after_an_empty_line() {
        let text = b"From a@example.org Mon Jan  1 00:00:00 2024\nSubject: one\n\nbody\n\
                     From inside a paragraph: no separator\n>From escaped\n>>From twice\n\n\
                     From b@example.org Tue Jan  2 00:00:00 2024\nSubject: two\n\nlast\n";
        let got = split(text);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].0, "m:0");
        assert_eq!(
            got[0].1,
            b"Subject: one\n\nbody\nFrom inside a paragraph: no separator\nFrom escaped\n>From twice\n"
        );
        let second = text.windows(7).position(|w| w == b"From b@").unwrap();
        assert_eq!(got[1].0, format!("m:{second}"));
        assert_eq!(got[1].1, b"Subject: two\n\nlast\n");
    }

    /// The size taken before reading is only a hint: a file that grew (or shrank)
    /// since is read to its end, never cut.
    #[test]
    fn a_file_is_read_whole_whatever_size_was_taken() {
        let p = std::env::temp_dir().join(format!("mimeref-read-sized-{}", std::process::id()));
        let text: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        fs::write(&p, &text).unwrap();
        for size in [0, 1, 8191, 8192, 19_999, 20_000, 20_001, 40_000] {
            let mut f = File::open(&p).unwrap();
            assert_eq!(read_sized(&mut f, size).unwrap(), text, "size {size}");
        }
        fs::remove_file(&p).unwrap();
    }

    #[test]
    fn crlf_mboxes_and_empty_messages() {
        let got = split(b"From x\r\nA: 1\r\n\r\nFrom y\r\n\r\nFrom z\r\nB: 2\r\n");
        let bodies: Vec<&[u8]> = got.iter().map(|(_, b)| b.as_slice()).collect();
        assert_eq!(bodies, [&b"A: 1\r\n"[..], b"", b"B: 2\r\n"]);
    }

    #[test]
    fn files_mboxes_and_maildirs_are_told_apart() {
        let dir = std::env::temp_dir().join(format!("mimeref-mailbox-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let md = dir.join("Maildir");
        for d in ["cur", "new", "tmp", ".Sent/cur", ".Sent/new", ".Sent/tmp"] {
            fs::create_dir_all(md.join(d)).unwrap();
        }
        fs::write(md.join("cur/1:2,S"), "Subject: a\n\nx\n").unwrap();
        fs::write(md.join("new/2"), "Subject: b\n\nx\n").unwrap();
        fs::write(md.join("tmp/3"), "Subject: partial").unwrap();
        fs::write(md.join(".Sent/cur/4"), "Subject: c\n\nx\n").unwrap();
        fs::write(md.join("dovecot-uidlist"), "3 V1 N5\n").unwrap();
        fs::create_dir_all(dir.join("eml/sub")).unwrap();
        fs::write(dir.join("eml/a.eml"), "Subject: d\n\nx\n").unwrap();
        fs::write(dir.join("eml/sub/b.eml"), "Subject: e\n\nx\n").unwrap();
        fs::write(dir.join("eml/.hidden"), "Subject: f\n\nx\n").unwrap();
        fs::write(dir.join("eml/README.md"), "# not mail\n").unwrap();
        std::os::unix::fs::symlink(dir.join("nowhere"), dir.join("eml/dangling")).unwrap();
        fs::write(
            dir.join("eml/box.mbox"),
            "\u{feff}From - \nSubject: g\n\nx\n\nFrom - \nSubject: h\n\nx\n",
        )
        .unwrap();
        let inputs = walk(
            &[md.clone(), dir.join("eml"), dir.join("missing")],
            &["*.md".to_string()],
            true,
        );
        let rel: Vec<String> = inputs
            .files
            .iter()
            .map(|p| p.strip_prefix(&dir).unwrap().display().to_string())
            .collect();
        assert_eq!(
            rel,
            [
                "Maildir/cur/1:2,S",
                "Maildir/new/2",
                "Maildir/.Sent/cur/4",
                "eml/a.eml",
                "eml/box.mbox",
                "eml/sub/b.eml"
            ]
        );
        assert_eq!(inputs.excluded, [dir.join("eml/README.md")]);
        let unreadable: Vec<&str> = inputs.unreadable.iter().map(|u| u.0.as_str()).collect();
        assert_eq!(unreadable.len(), 2, "{unreadable:?}");
        assert!(unreadable[0].ends_with("eml/dangling"), "{unreadable:?}");
        assert!(unreadable[1].ends_with("missing"), "{unreadable:?}");
        let mut subjects = Vec::new();
        for f in &inputs.files {
            read(
                f,
                |m| {
                    subjects.push(String::from_utf8_lossy(&m.bytes[9..10]).into_owned());
                    true
                },
                |_| {},
            )
            .unwrap();
        }
        assert_eq!(subjects, ["a", "b", "c", "d", "g", "h", "e"]);
        fs::remove_dir_all(&dir).unwrap();
    }
}
