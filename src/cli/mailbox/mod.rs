//! The inputs of `survey`, and the message paths `check` and `fix` take: message files,
//! directories of them, mbox files and Maildir folders, read as one stream of messages.
//!
//! - A file is one message, unless it starts with an mbox `From ` line (after a UTF-8
//!   byte order mark, if any): then it is an mbox, split at every `From ` line that
//!   starts the file or follows an empty line (mboxo and mboxrd; `>From ` lines lose
//!   one `>`). Its messages are named `PATH:OFFSET`, the offset of their `From ` line
//!   (0 for the first), and that name opens the message again ([`at_offset`],
//!   [`read_at`]): what `survey` prints, `check` and `fix` take.
//! - A directory with `cur/` and `new/` is a Maildir: the files in those two, then its
//!   Maildir++ folders (`.Name/` holding `cur/` and `new/`); `tmp/` is mail still being
//!   delivered and is left alone.
//! - Any other directory is walked: every file and folder in it, in name order, but
//!   those whose name starts with a dot or matches an `--exclude` glob.
//!
//! Only what is named is read. A symbolic link found in a walk is followed only when it
//! leads to a file inside the tree named on the command line (its real path); a link
//! out of it, or to a folder (which could lead back up), is skipped and named, as are
//! FIFOs, devices, sockets, and folders where a Maildir keeps messages. Files found in
//! a walk are opened without following a link (one that replaced the file since the
//! walk is skipped), every file without waiting (a FIFO would wait for a writer), and
//! only what the open descriptor says is a regular file is read. Of each message at
//! most `max_message_size` octets are kept: the rest is counted, not held, as the
//! daemon does past that limit.
//!
//! A path or message that cannot be read is reported and the rest goes on.

use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// What a walk of the paths found.
#[derive(Debug, Default)]
pub struct Inputs {
    /// Files to read, in order.
    pub files: Vec<Source>,
    /// Their octets, for the progress bar (0 when not asked for).
    pub bytes: u64,
    /// Files an `--exclude` glob matched.
    pub excluded: Vec<PathBuf>,
    /// Paths that could not be listed or read: (path, error).
    pub unreadable: Vec<(String, String)>,
    /// Paths not read on purpose: (path, why).
    pub skipped: Vec<(String, String)>,
}

/// A file to read.
#[derive(Debug, Clone)]
pub struct Source {
    pub path: PathBuf,
    /// Named on the command line: a link is followed. Found in a walk: never (the walk
    /// resolved the links it allows to their real path).
    pub named: bool,
}

/// Lists the files `paths` stand for. A file named on the command line is always read;
/// `exclude` (globs with `*` and `?`) applies to the names found in directories.
/// `sizes`: add up the files' octets (one `stat` each, which only the progress bar
/// needs).
/// `follow_links`: links to files and a Maildir's `cur/` or `new/` are followed
/// wherever they lead (`--follow-symlinks`); links to other folders never are.
pub fn walk(paths: &[PathBuf], exclude: &[String], sizes: bool, follow_links: bool) -> Inputs {
    let mut w = Walk {
        out: Inputs::default(),
        exclude,
        sizes,
        root: PathBuf::new(),
        follow_links,
    };
    for p in paths {
        match fs::metadata(p) {
            Ok(m) if m.is_dir() => {
                // The tree a link may lead into: the folder named, links resolved.
                w.root = match fs::canonicalize(p) {
                    Ok(r) => r,
                    Err(e) => {
                        w.out
                            .unreadable
                            .push((p.display().to_string(), e.to_string()));
                        continue;
                    }
                };
                if is_maildir(p) {
                    w.maildir(p);
                } else {
                    w.directory(p);
                }
            }
            Ok(m) => {
                w.out.bytes += m.len();
                w.out.files.push(Source {
                    path: p.clone(),
                    named: true,
                });
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
    /// A file to read, by this path (a link's real path).
    File(PathBuf),
    /// Not read, for this reason.
    Skip(String),
    /// Could not be looked at: the error.
    Unreadable(String),
}

/// Why a file of this type is not read.
fn not_a_file(t: fs::FileType) -> String {
    let what = if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_dir() {
        "a folder"
    } else {
        "not a regular file"
    };
    format!("{what}, not a message file")
}

struct Walk<'a> {
    out: Inputs,
    exclude: &'a [String],
    sizes: bool,
    /// The real path of the folder named on the command line being walked.
    root: PathBuf,
    /// Links out of `root` are followed too.
    follow_links: bool,
}

impl Walk<'_> {
    /// The entries of a directory sorted by name; what cannot be read is recorded.
    fn entries(&mut self, dir: &Path) -> Vec<(String, PathBuf, io::Result<fs::FileType>)> {
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
            match e {
                Ok(e) => v.push((
                    e.file_name().to_string_lossy().into_owned(),
                    e.path(),
                    e.file_type(),
                )),
                Err(err) => self
                    .out
                    .unreadable
                    .push((dir.display().to_string(), err.to_string())),
            }
        }
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// What an entry is, from the directory listing where it can (no `stat` but for
    /// links). A link is resolved: to a file inside the tree it is that file; out of
    /// the tree, or to a folder (a link to a folder above would walk for ever), it is
    /// skipped; a dangling one is reported like any file that cannot be read.
    fn kind(&self, path: &Path, t: &io::Result<fs::FileType>) -> Kind {
        let t = match t {
            Ok(t) => *t,
            Err(e) => return Kind::Unreadable(e.to_string()),
        };
        if t.is_dir() {
            return Kind::Dir;
        }
        if t.is_file() {
            return Kind::File(path.to_path_buf());
        }
        if !t.is_symlink() {
            return Kind::Skip(not_a_file(t));
        }
        let target = match self.inside(path) {
            Ok(t) => t,
            Err(k) => return k,
        };
        match fs::metadata(&target) {
            Ok(m) if m.is_file() => Kind::File(target),
            Ok(m) if m.is_dir() => {
                Kind::Skip("a symbolic link to a folder: not followed".to_string())
            }
            Ok(m) => Kind::Skip(format!("a symbolic link to {}", not_a_file(m.file_type()))),
            Err(e) => Kind::Unreadable(e.to_string()),
        }
    }

    /// The real path of the link `path` when it leads inside the tree.
    fn inside(&self, path: &Path) -> Result<PathBuf, Kind> {
        let target = fs::canonicalize(path).map_err(|e| Kind::Unreadable(e.to_string()))?;
        if self.follow_links || target.starts_with(&self.root) {
            Ok(target)
        } else {
            Err(Kind::Skip(format!(
                "a symbolic link to {}, outside {}: not followed (--follow-symlinks)",
                target.display(),
                self.root.display()
            )))
        }
    }

    fn record(&mut self, path: &Path, k: Kind) {
        match k {
            Kind::File(p) => self.file(p),
            Kind::Dir => self.out.skipped.push((
                path.display().to_string(),
                "a folder where a Maildir keeps messages".to_string(),
            )),
            Kind::Skip(why) => self.out.skipped.push((path.display().to_string(), why)),
            Kind::Unreadable(e) => self.out.unreadable.push((path.display().to_string(), e)),
        }
    }

    fn file(&mut self, path: PathBuf) {
        if self.sizes {
            self.out.bytes += fs::symlink_metadata(&path).map_or(0, |m| m.len());
        }
        self.out.files.push(Source { path, named: false });
    }

    fn directory(&mut self, dir: &Path) {
        for (name, path, t) in self.entries(dir) {
            if name.starts_with('.') {
                continue;
            }
            match self.kind(&path, &t) {
                Kind::Dir if is_maildir(&path) => self.maildir(&path),
                Kind::Dir => self.directory(&path),
                Kind::File(_)
                    if self
                        .exclude
                        .iter()
                        .any(|g| crate::policy::glob_match(g.as_bytes(), name.as_bytes())) =>
                {
                    self.out.excluded.push(path)
                }
                k => self.record(&path, k),
            }
        }
    }

    fn maildir(&mut self, dir: &Path) {
        for sub in ["cur", "new"] {
            let mut folder = dir.join(sub);
            // A `cur/` or `new/` that is a link is read only where it stays in the tree.
            if fs::symlink_metadata(&folder).is_ok_and(|m| m.file_type().is_symlink()) {
                match self.inside(&folder) {
                    Ok(real) => folder = real,
                    Err(k) => {
                        self.record(&dir.join(sub), k);
                        continue;
                    }
                }
            }
            for (name, path, t) in self.entries(&folder) {
                if !name.starts_with('.') {
                    let k = self.kind(&path, &t);
                    self.record(&path, k);
                }
            }
        }
        for (name, path, t) in self.entries(dir) {
            if name.starts_with('.') && t.is_ok_and(|t| t.is_dir()) && is_maildir(&path) {
                self.maildir(&path);
            }
        }
    }
}

/// One message read from an input.
#[derive(Debug)]
pub struct Message {
    /// The file, or `FILE:OFFSET` in an mbox.
    pub source: String,
    /// The message, at most the limit it was read under.
    pub bytes: Vec<u8>,
    /// Octets of the message past `bytes` that were counted but not kept (the limit).
    pub cut: u64,
    /// It came out of an mbox, its `From ` line taken off.
    pub in_mbox: bool,
}

/// Why an input or a message was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotRead {
    pub source: String,
    pub why: String,
    /// On purpose (not a regular file, a link): skipped, not unreadable.
    pub skipped: bool,
}

impl NotRead {
    fn error(source: impl Into<String>, e: impl ToString) -> NotRead {
        NotRead {
            source: source.into(),
            why: e.to_string(),
            skipped: false,
        }
    }

    fn skip(source: impl Into<String>, why: impl Into<String>) -> NotRead {
        NotRead {
            source: source.into(),
            why: why.into(),
            skipped: true,
        }
    }
}

/// Opens `path` for reading without waiting (a FIFO would wait for a writer) and, when
/// `nofollow`, without following a link; the descriptor's own type decides (no race
/// with a file replaced since it was listed): a regular file, else skipped.
fn open_regular(path: &Path, nofollow: bool) -> Result<(File, u64), NotRead> {
    let name = path.display().to_string();
    let mut flags = libc::O_NONBLOCK;
    if nofollow {
        flags |= libc::O_NOFOLLOW;
    }
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| {
            if nofollow && e.raw_os_error() == Some(libc::ELOOP) {
                NotRead::skip(
                    &name,
                    "a symbolic link since the folder was listed: not followed",
                )
            } else {
                NotRead::error(&name, e)
            }
        })?;
    let m = f.metadata().map_err(|e| NotRead::error(&name, e))?;
    if !m.is_file() {
        return Err(NotRead::skip(&name, not_a_file(m.file_type())));
    }
    Ok((f, m.len()))
}

/// Reads the file `src`: one message, or every message of an mbox, each handed to
/// `sink` (which returns false to stop) with at most `limit` octets kept. `read` is
/// told the octets read (or passed over) as they go. Returns what stopped the reading,
/// with where it happened.
pub fn read(
    src: &Source,
    limit: usize,
    mut sink: impl FnMut(Message) -> bool,
    mut read: impl FnMut(u64),
) -> Result<(), NotRead> {
    let (mut f, size) = open_regular(&src.path, !src.named)?;
    let name = src.path.display().to_string();
    if size > WHOLE || size > limit as u64 {
        // A large file, an mbox most likely: streamed, a message at a time.
        return stream(&name, f, Some(size), limit, &mut sink, &mut read);
    }
    // Most files: one read into a buffer of the right size, as fs::read does; an mbox
    // this small is split in memory.
    let bytes = read_sized(&mut f, size).map_err(|e| NotRead::error(&name, e))?;
    read(bytes.len() as u64);
    if let Some(bom) = mbox_start(&bytes) {
        let mut w = Window::whole(bytes);
        return split_mbox(&name, &mut w, bom, 0, limit, &mut sink, &mut read);
    }
    // The file may have grown past the limit since its size was taken.
    let (bytes, cut) = keep(bytes, limit);
    sink(Message {
        source: name,
        bytes,
        cut,
        in_mbox: false,
    });
    Ok(())
}

/// At most `limit` octets of `bytes`, and how many more there were.
fn keep(mut bytes: Vec<u8>, limit: usize) -> (Vec<u8>, u64) {
    let cut = bytes.len().saturating_sub(limit) as u64;
    bytes.truncate(limit);
    (bytes, cut)
}

/// Reads the message (or the mbox) `name` from `r`, a chunk at a time; `size` is its
/// length when known (a regular file), so that what lies past the limit of a single
/// message is not read at all.
pub fn stream<R: Read>(
    name: &str,
    r: R,
    size: Option<u64>,
    limit: usize,
    sink: &mut impl FnMut(Message) -> bool,
    read: &mut impl FnMut(u64),
) -> Result<(), NotRead> {
    stream_chunked(name, r, size, limit, CHUNK, sink, read)
}

fn stream_chunked<R: Read>(
    name: &str,
    mut r: R,
    size: Option<u64>,
    limit: usize,
    chunk: usize,
    sink: &mut impl FnMut(Message) -> bool,
    read: &mut impl FnMut(u64),
) -> Result<(), NotRead> {
    let mut head = Vec::with_capacity(8);
    (&mut r)
        .take(8)
        .read_to_end(&mut head)
        .map_err(|e| NotRead::error(name, e))?;
    read(head.len() as u64);
    if let Some(bom) = mbox_start(&head) {
        let mut w = Window {
            buf: head,
            base: 0,
            more: Some(r),
            eof: false,
            chunk,
        };
        return split_mbox(name, &mut w, bom, 0, limit, sink, read);
    }
    let mut bytes = head;
    let head_len = bytes.len();
    let want = (limit as u64).saturating_sub(head_len as u64);
    (&mut r)
        .take(want)
        .read_to_end(&mut bytes)
        .map_err(|e| NotRead::error(name, e))?;
    read((bytes.len() - head_len) as u64);
    let got = bytes.len() as u64;
    let (bytes, mut cut) = keep(bytes, limit);
    if bytes.len() == limit {
        // Past the limit: counted, not kept (nor read, when the size is known).
        let rest = match size {
            Some(s) => s.saturating_sub(got),
            None => io::copy(&mut r, &mut io::sink()).map_err(|e| NotRead::error(name, e))?,
        };
        read(rest);
        cut += rest;
    }
    sink(Message {
        source: name.to_string(),
        bytes,
        cut,
        in_mbox: false,
    });
    Ok(())
}

/// `FILE:OFFSET` as `survey` names a message of an mbox: the file and the offset, when
/// `arg` ends in `:` and digits and no file has that very name (Maildir names hold
/// colons, `1700000000.1:2,S`).
pub fn at_offset(arg: &Path) -> Option<(PathBuf, u64)> {
    if fs::symlink_metadata(arg).is_ok() {
        return None;
    }
    let (file, offset) = split_offset(arg.as_os_str().as_bytes())?;
    Some((PathBuf::from(OsStr::from_bytes(file)), offset))
}

/// `FILE:OFFSET` taken apart, whatever is on disk.
pub fn split_offset(arg: &[u8]) -> Option<(&[u8], u64)> {
    let colon = arg.iter().rposition(|&b| b == b':')?;
    let (file, digits) = (&arg[..colon], &arg[colon + 1..]);
    if file.is_empty() || digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let offset = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some((file, offset))
}

/// The message of the mbox `path` whose `From ` line is at `offset` (0: the first), as
/// `survey` read it, with at most `limit` octets kept.
pub fn read_at(path: &Path, offset: u64, limit: usize) -> Result<Message, NotRead> {
    let file = path.display().to_string();
    let name = format!("{file}:{offset}");
    let (mut f, _) = open_regular(path, false)?;
    let mut head = Vec::with_capacity(8);
    (&mut f)
        .take(8)
        .read_to_end(&mut head)
        .map_err(|e| NotRead::error(&name, e))?;
    let Some(bom) = mbox_start(&head) else {
        return Err(NotRead::error(
            &name,
            format!(
                "{file} is not an mbox (it does not start with a From line): FILE:OFFSET \
                 names a message of an mbox"
            ),
        ));
    };
    let no_message = || {
        NotRead::error(
            &name,
            format!(
                "no message of {file} starts at offset {offset} (survey and check name a \
                 message by the offset of its From line, 0 for the first)"
            ),
        )
    };
    let (buf, bom) = if offset == 0 {
        (head, bom)
    } else {
        // The From line must follow an empty line, as where the splitter cuts.
        let at = offset.checked_sub(3).ok_or_else(no_message)?;
        f.seek(SeekFrom::Start(at))
            .map_err(|e| NotRead::error(&name, e))?;
        let mut b = Vec::with_capacity(8);
        (&mut f)
            .take(8)
            .read_to_end(&mut b)
            .map_err(|e| NotRead::error(&name, e))?;
        if !starts_message(&b) {
            return Err(no_message());
        }
        (b[3..].to_vec(), 0)
    };
    let mut w = Window {
        buf,
        base: offset,
        more: Some(f),
        eof: false,
        chunk: CHUNK,
    };
    let mut got = None;
    split_mbox(
        &file,
        &mut w,
        bom,
        offset,
        limit,
        &mut |m| {
            got = Some(m);
            false
        },
        &mut |_| {},
    )?;
    got.ok_or_else(no_message)
}

/// A message path as `check` and `fix` take it: `-` (standard input), `FILE:OFFSET` (a
/// message of an mbox, as `survey` names it), or a file: one message, or an mbox whose
/// messages are handed to `sink` one by one (which returns false to stop). Unlike
/// `survey`, a pipe is read (`check <(…)`), but never more than `limit` octets of a
/// message are kept.
pub fn given(
    arg: &Path,
    limit: usize,
    sink: &mut impl FnMut(Message) -> bool,
) -> Result<(), NotRead> {
    if arg == Path::new("-") {
        return stream("-", io::stdin().lock(), None, limit, sink, &mut |_| {});
    }
    if let Some((file, offset)) = at_offset(arg) {
        sink(read_at(&file, offset, limit)?);
        return Ok(());
    }
    let name = arg.display().to_string();
    let f = File::open(arg).map_err(|e| NotRead::error(&name, e))?;
    let m = f.metadata().map_err(|e| NotRead::error(&name, e))?;
    if m.is_dir() {
        return Err(NotRead::error(
            &name,
            "a folder: this takes message files (survey takes folders, mbox files and Maildirs)",
        ));
    }
    let size = m.is_file().then_some(m.len());
    stream(&name, f, size, limit, sink, &mut |_| {})
}

/// Whether a message of an mbox starts 3 octets into `b`: a `From ` line after an empty
/// line, where the splitter cuts.
fn starts_message(b: &[u8]) -> bool {
    b.len() == 8
        && &b[3..] == b"From "
        && b[2] == b'\n'
        && (b[1] == b'\n' || (b[1] == b'\r' && b[0] == b'\n'))
}

/// For the fuzz target `mailbox` (fuzz/fuzz_targets/mailbox.rs): reads `data` as a
/// message file held whole, streamed in chunks of `chunk`, and under `limit`, and
/// panics where they disagree or a message's `FILE:OFFSET` name does not lead back to
/// it.
pub fn fuzz(data: &[u8], chunk: usize, limit: usize) {
    let _ = split_offset(data);
    let run = |chunk: usize, limit: usize| {
        let (mut out, mut total) = (Vec::new(), 0u64);
        stream_chunked(
            "m",
            io::Cursor::new(data),
            None,
            limit,
            chunk.max(1),
            &mut |m| {
                out.push(m);
                true
            },
            &mut |n| total += n,
        )
        .expect("reading memory cannot fail");
        (out, total)
    };
    let (whole, total) = run(CHUNK, usize::MAX);
    assert_eq!(total, data.len() as u64, "every octet is read once");
    let (chunked, _) = run(chunk, usize::MAX);
    let (limited, _) = run(chunk, limit);
    assert_eq!(whole.len(), chunked.len());
    assert_eq!(whole.len(), limited.len());
    for ((w, c), l) in whole.iter().zip(&chunked).zip(&limited) {
        assert_eq!((&w.source, &w.bytes, w.cut), (&c.source, &c.bytes, 0));
        assert_eq!(w.source, l.source);
        assert!(l.bytes.len() <= limit);
        if w.bytes.len().saturating_mul(2) <= limit {
            assert_eq!((&w.bytes, l.cut), (&l.bytes, 0));
        }
        if !w.in_mbox {
            assert_eq!(w.bytes, data);
            continue;
        }
        let (file, offset) = split_offset(w.source.as_bytes()).expect("FILE:OFFSET");
        assert_eq!(file, b"m");
        let offset = offset as usize;
        if offset == 0 {
            assert!(mbox_start(data).is_some());
        } else {
            assert!(starts_message(
                &data[offset - 3..(offset + 5).min(data.len())]
            ));
        }
    }
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

/// Files up to this size (and the limit) are read whole; larger ones are streamed.
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

/// The part of an mbox in memory: `buf` starts at offset `base` of the file.
struct Window<R> {
    buf: Vec<u8>,
    base: u64,
    more: Option<R>,
    eof: bool,
    chunk: usize,
}

impl Window<io::Empty> {
    /// A whole mbox in memory.
    fn whole(buf: Vec<u8>) -> Self {
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
fn split_mbox<R: Read>(
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
        // The end of the From line; its text is not needed, so a long one is dropped.
        let nl = loop {
            if let Some(i) = memchr::memchr(b'\n', &w.buf[from..]) {
                break Some(from + i);
            }
            if w.eof {
                break None;
            }
            if w.buf.len() - from > w.chunk {
                w.drop_front(w.buf.len());
                from = 0;
            }
            w.fill(read).map_err(err)?;
        };
        let Some(nl) = nl else {
            // A From line with nothing after it: an empty message.
            sink(Message {
                source: format!("{name}:{at}"),
                bytes: Vec::new(),
                cut: 0,
                in_mbox: true,
            });
            return Ok(());
        };
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
        let rest = &w.buf[content..end];
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
        let message = Message {
            source: format!("{name}:{at}"),
            bytes,
            cut: total - held as u64,
            in_mbox: true,
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

/// A message's lines of one or more `>` before `From ` lose one `>` (mboxrd).
fn unquote(content: &[u8]) -> Vec<u8> {
    let mut v = content.to_vec();
    unquote_in_place(&mut v);
    v
}

/// [`unquote`] without a second buffer: a message kept to the limit is not held twice.
fn unquote_in_place(v: &mut Vec<u8>) {
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

#[cfg(test)]
mod tests;
