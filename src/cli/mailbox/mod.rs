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
//! FIFOs, devices, sockets, and folders where a Maildir keeps messages. Links in the
//! path of the folder named are followed (as `find` follows its arguments), none below
//! it but those allowed: the walk opens each folder from its parent's descriptor with
//! `O_NOFOLLOW`, and a file found in a walk is opened by its path below the folder
//! named, from that folder's descriptor, without following a link anywhere along it
//! (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, or a folder at a time with
//! `O_NOFOLLOW`): a file or folder that became a link since the walk listed it is
//! skipped and named, never read. Every file is opened without waiting (a FIFO would
//! wait for a writer), and only what the open descriptor says is a regular file is
//! read. Of each message at most `max_message_size` octets are kept: the rest is
//! counted, not held, as the daemon does past that limit.
//!
//! A path or message that cannot be read is reported and the rest goes on.
//!
//! This file holds a message, its reading from a file or a stream, and the paths
//! `check` and `fix` take; the rest is in
//! - `walk`: walking the paths named (folders, Maildirs, what is skipped);
//! - `mbox`: splitting an mbox into its messages;
//! - `offset`: `FILE:OFFSET` names and reading the message they name.

use std::fs::{self, File};
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{self as rfs, AtFlags, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

mod mbox;
mod offset;
mod walk;

use mbox::{mbox_start, split_mbox, starts_message, Window, CHUNK};
pub use offset::{at_offset, read_at, split_offset};
use walk::not_a_file;
pub use walk::{walk, Source};

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
    /// The date of that `From ` line (seconds since 1970, UTC), when it has one.
    pub envelope_date: Option<i64>,
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
pub(super) fn open_regular(path: &Path, nofollow: bool) -> Result<(File, u64), NotRead> {
    let mut flags = libc::O_NONBLOCK;
    if nofollow {
        flags |= libc::O_NOFOLLOW;
    }
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path);
    regular(path, f, nofollow)
}

/// Opens the file `src` as [`open_regular`] does; one found in a walk below a folder
/// named is opened by its path below that folder's descriptor, without following a
/// link anywhere along it.
fn open_source(src: &Source) -> Result<(File, u64), NotRead> {
    match src.below() {
        Some((dir, rel)) => {
            let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
            regular(
                &src.path,
                open_beneath(dir, rel, flags).map(File::from),
                true,
            )
        }
        None => open_regular(&src.path, !src.named),
    }
}

/// The file `f` opened at `path` when it is a regular file, and its size.
fn regular(path: &Path, f: io::Result<File>, nofollow: bool) -> Result<(File, u64), NotRead> {
    let name = path.display().to_string();
    let f = f.map_err(|e| {
        if nofollow && e.raw_os_error() == Some(libc::ELOOP) {
            NotRead::skip(&name, walk::SWAPPED)
        } else {
            NotRead::error(&name, e)
        }
    })?;
    let m = f.metadata().map_err(|e| NotRead::error(&name, e))?;
    if !m.is_file() {
        return Err(NotRead::skip(&name, not_a_file(walk::file_type(&m))));
    }
    Ok((f, m.len()))
}

/// The kernel has no `openat2` (before Linux 5.6, or a sandbox refusing it): the
/// paths below a folder are opened a folder at a time.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// Opens `rel`, a path below the folder `dir` (no `..`), with `flags`, following no
/// link anywhere along it (`ELOOP` where one is met): `openat2` with `RESOLVE_BENEATH`
/// and `RESOLVE_NO_SYMLINKS`, or where the kernel lacks it, [`open_by_folder`].
pub(super) fn open_beneath(dir: BorrowedFd<'_>, rel: &Path, flags: OFlags) -> io::Result<OwnedFd> {
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS;
        match rfs::openat2(dir, rel, flags | OFlags::NOFOLLOW, Mode::empty(), resolve) {
            Err(Errno::NOSYS) => NO_OPENAT2.store(true, Ordering::Relaxed),
            // Refused by a sandbox, or a rename raced the lookup: a folder at a time.
            Err(Errno::PERM | Errno::AGAIN) => {}
            r => return r.map_err(io::Error::from),
        }
    }
    open_by_folder(dir, rel, flags)
}

/// [`open_beneath`] without `openat2`: each folder on the path opened from the one
/// above with `O_NOFOLLOW`, then the file itself.
pub(super) fn open_by_folder(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
) -> io::Result<OwnedFd> {
    let mut names = rel.components().peekable();
    let mut at: Option<OwnedFd> = None;
    loop {
        let Some(Component::Normal(name)) = names.next() else {
            return Err(io::Error::from(Errno::INVAL));
        };
        let from = at.as_ref().map_or(dir, |f| f.as_fd());
        if names.peek().is_none() {
            return Ok(rfs::openat(
                from,
                name,
                flags | OFlags::NOFOLLOW,
                Mode::empty(),
            )?);
        }
        let folder = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        at = Some(rfs::openat(from, name, folder, Mode::empty()).map_err(|e| {
            // A link opened with O_PATH, O_DIRECTORY and O_NOFOLLOW is "not a folder".
            let link = e == Errno::NOTDIR
                && rfs::statat(from, name, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
                    rfs::FileType::from_raw_mode(st.st_mode) == rfs::FileType::Symlink
                });
            io::Error::from(if link { Errno::LOOP } else { e })
        })?);
    }
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
    let (mut f, size) = open_source(src)?;
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
        envelope_date: None,
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
        envelope_date: None,
    });
    Ok(())
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

#[cfg(test)]
mod tests;
