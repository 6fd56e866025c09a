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
use std::io::{self, BufRead, BufReader, Read};
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
        let mut bytes = Vec::with_capacity(size as usize + 1);
        f.read_to_end(&mut bytes)
            .map_err(|e| (name.clone(), e.to_string()))?;
        let bom = mbox_start(&bytes);
        if let Some(bom) = bom {
            return mbox(&name, io::Cursor::new(bytes), bom, &mut sink, &mut read);
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
        let r = BufReader::with_capacity(1 << 16, io::Cursor::new(head).chain(f));
        return mbox(&name, r, bom, &mut sink, &mut read);
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

/// Splits an mbox into its messages.
fn mbox(
    name: &str,
    mut r: impl BufRead,
    bom: usize,
    sink: &mut impl FnMut(Message) -> bool,
    read: &mut impl FnMut(u64),
) -> Result<(), (String, String)> {
    let mut offset = 0u64;
    let mut line = Vec::new();
    let mut current: Option<(u64, Vec<u8>)> = None;
    let mut after_empty = true;
    let mut first = true;
    loop {
        line.clear();
        let n = r
            .read_until(b'\n', &mut line)
            .map_err(|e| (format!("{name}:{offset}"), e.to_string()))?;
        if n == 0 {
            break;
        }
        read(n as u64);
        let at = offset;
        offset += n as u64;
        let text: &[u8] = if first { &line[bom..] } else { &line };
        first = false;
        if after_empty && text.starts_with(b"From ") {
            if let Some((start, mut bytes)) = current.take() {
                // The empty line before a From line separates; it is not the message's.
                strip_line_end(&mut bytes);
                if !sink(Message {
                    source: format!("{name}:{start}"),
                    bytes,
                }) {
                    return Ok(());
                }
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
            // mboxrd: ">From ", ">>From " ... stand for one '>' less.
            let quoted = content.iter().take_while(|&&b| b == b'>').count();
            if quoted > 0 && content[quoted..].starts_with(b"From ") {
                bytes.extend_from_slice(&text[1..]);
            } else {
                bytes.extend_from_slice(text);
            }
        }
    }
    if let Some((start, bytes)) = current {
        sink(Message {
            source: format!("{name}:{start}"),
            bytes,
        });
    }
    Ok(())
}

fn strip_line_end(b: &mut Vec<u8>) {
    if b.ends_with(b"\r\n") {
        b.truncate(b.len() - 2);
    } else if b.ends_with(b"\n") {
        b.truncate(b.len() - 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(text: &[u8]) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        let mut total = 0;
        mbox(
            "m",
            io::Cursor::new(text.to_vec()),
            0,
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
