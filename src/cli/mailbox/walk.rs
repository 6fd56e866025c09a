//! Walking the paths named on the command line: message files, folders, Maildirs
//! (and their Maildir++ folders), with the links, excludes and special files skipped.

use std::fs;
use std::io;
use std::os::unix::fs::FileTypeExt;
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
pub(super) fn not_a_file(t: fs::FileType) -> String {
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
