//! Walking the paths named on the command line: message files, folders, Maildirs
//! (and their Maildir++ folders), with the links, excludes and special files skipped.
//!
//! A folder named is opened once, its links followed as `find` follows the paths it is
//! given; everything below it is reached through the descriptors of the folders above
//! (`openat` with `O_NOFOLLOW`), so that a folder swapped for a link while the walk
//! goes on leads nowhere. The files found are opened later, by their path below the
//! folder named and its descriptor, without following a link anywhere along that path
//! (`open_beneath` in `mod.rs`).

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{self as rfs, AtFlags, Dir, FileType, Mode, OFlags};
use rustix::io::Errno;

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
    /// Found in a walk: the folder it is opened below (the one named, or with
    /// `--follow-symlinks` a Maildir's `cur/` or `new/` elsewhere) and where in `path`
    /// its path below that folder starts. None: opened by `path` (named, or a link
    /// followed out of the tree with `--follow-symlinks`).
    pub(super) below: Option<(Arc<OwnedFd>, usize)>,
}

impl Source {
    /// A file named on the command line (or given as `check` takes it).
    pub fn named(path: PathBuf) -> Source {
        Source {
            path,
            named: true,
            below: None,
        }
    }

    /// The folder the file is opened below and its path there.
    pub(super) fn below(&self) -> Option<(BorrowedFd<'_>, &Path)> {
        let (dir, at) = self.below.as_ref()?;
        let rel = &self.path.as_os_str().as_bytes()[*at..];
        Some((dir.as_fd(), Path::new(OsStr::from_bytes(rel))))
    }
}

/// Lists the files `paths` stand for. A file named on the command line is always read;
/// `exclude` (globs with `*` and `?`) applies to the names found in directories.
/// `sizes`: add up the files' octets (one `stat` each, which only the progress bar
/// needs).
/// `follow_links`: links to files and a Maildir's `cur/` or `new/` are followed
/// wherever they lead (`--follow-symlinks`); links to other folders never are.
pub fn walk(paths: &[PathBuf], exclude: &[String], sizes: bool, follow_links: bool) -> Inputs {
    walk_listed(paths, exclude, sizes, follow_links, &mut |_| {})
}

/// [`walk`], with `listed` told each folder once its entries are listed and before
/// any of them is opened (the tests swap a folder for a link there).
pub(super) fn walk_listed(
    paths: &[PathBuf],
    exclude: &[String],
    sizes: bool,
    follow_links: bool,
    listed: &mut dyn FnMut(&Path),
) -> Inputs {
    let mut w = Walk {
        out: Inputs::default(),
        exclude,
        sizes,
        root: PathBuf::new(),
        root_fd: None,
        follow_links,
        listed,
    };
    for p in paths {
        match fs::metadata(p) {
            Ok(m) if m.is_dir() => {
                // The tree a link may lead into: the folder named, links resolved.
                let opened = fs::canonicalize(p).and_then(|r| {
                    let fd = rfs::open(&r, DIR_FLAGS, Mode::empty())?;
                    Ok((r, fd))
                });
                let (root, fd) = match opened {
                    Ok(o) => o,
                    Err(e) => {
                        w.out
                            .unreadable
                            .push((p.display().to_string(), e.to_string()));
                        continue;
                    }
                };
                let fd = Arc::new(fd);
                w.root = root;
                w.root_fd = Some(fd.clone());
                let folder = Folder {
                    dir: match fd.try_clone().and_then(|f| Ok(Dir::new(f)?)) {
                        Ok(d) => d,
                        Err(e) => {
                            w.out
                                .unreadable
                                .push((p.display().to_string(), e.to_string()));
                            continue;
                        }
                    },
                    path: p.clone(),
                    rel: PathBuf::new(),
                    base: fd,
                };
                if is_maildir(folder.fd()) {
                    w.maildir(folder);
                } else {
                    w.directory(folder);
                }
            }
            Ok(m) => {
                w.out.bytes += m.len();
                w.out.files.push(Source::named(p.clone()));
            }
            Err(e) => w
                .out
                .unreadable
                .push((p.display().to_string(), e.to_string())),
        }
    }
    w.out
}

/// How a folder below the one named is opened: never through a link.
const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::CLOEXEC)
    .union(OFlags::NOCTTY);

/// Why a file or folder met in a walk is not read, when it was not a link as the folder
/// was listed but is one when opened.
pub(super) const SWAPPED: &str =
    "a symbolic link (it or a folder on its path) since the folder was listed: not followed";

/// `cur/` and `new/` in the folder `dir` (links followed: a Maildir whose `cur/` is a
/// link is still a Maildir, and its `cur/` is then read only as links allow).
fn is_maildir(dir: BorrowedFd<'_>) -> bool {
    ["cur", "new"].iter().all(|sub| {
        rfs::statat(dir, *sub, AtFlags::empty())
            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory)
    })
}

/// A folder being walked.
struct Folder {
    /// Its entries, and the descriptor its files and folders are opened from.
    dir: Dir,
    /// As shown: the path named, and the names below it.
    path: PathBuf,
    /// Its path below `base`.
    rel: PathBuf,
    /// The folder its files are opened below at reading.
    base: Arc<OwnedFd>,
}

impl Folder {
    fn fd(&self) -> BorrowedFd<'_> {
        self.dir.fd().expect("a Dir holds its descriptor")
    }
}

/// An entry of a folder.
struct Entry {
    /// Its name, as compared with dots and globs.
    name: String,
    raw: OsString,
    path: PathBuf,
    /// Its type, not following a link.
    t: io::Result<FileType>,
}

/// What a directory entry is.
enum Kind {
    Dir,
    /// A file to read: this entry (None), or the real path of the link it is.
    File(Option<PathBuf>),
    /// Not read, for this reason.
    Skip(String),
    /// Could not be looked at: the error.
    Unreadable(String),
}

/// Why a file of this type is not read.
pub(super) fn not_a_file(t: FileType) -> String {
    let what = match t {
        FileType::Fifo => "a FIFO",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Socket => "a socket",
        FileType::Directory => "a folder",
        _ => "not a regular file",
    };
    format!("{what}, not a message file")
}

/// The type of what `m` describes.
pub(super) fn file_type(m: &fs::Metadata) -> FileType {
    FileType::from_raw_mode(m.mode())
}

struct Walk<'a> {
    out: Inputs,
    exclude: &'a [String],
    sizes: bool,
    /// The real path of the folder named on the command line being walked.
    root: PathBuf,
    /// That folder, opened.
    root_fd: Option<Arc<OwnedFd>>,
    /// Links out of `root` are followed too.
    follow_links: bool,
    listed: &'a mut dyn FnMut(&Path),
}

impl Walk<'_> {
    /// The entries of a folder sorted by name; what cannot be read is recorded.
    fn entries(&mut self, folder: &mut Folder) -> Vec<Entry> {
        let mut v = Vec::new();
        while let Some(e) = folder.dir.read() {
            match e {
                Ok(e) => {
                    let raw = OsStr::from_bytes(e.file_name().to_bytes());
                    if raw == "." || raw == ".." {
                        continue;
                    }
                    v.push(Entry {
                        name: raw.to_string_lossy().into_owned(),
                        raw: raw.to_owned(),
                        path: folder.path.join(raw),
                        t: Ok(e.file_type()),
                    });
                }
                Err(err) => {
                    self.out
                        .unreadable
                        .push((folder.path.display().to_string(), err.to_string()));
                    break;
                }
            }
        }
        // Where the listing does not say (some file systems), a stat does.
        for e in &mut v {
            if e.t.as_ref().is_ok_and(|t| *t == FileType::Unknown) {
                e.t = rfs::statat(folder.fd(), &e.raw, AtFlags::SYMLINK_NOFOLLOW)
                    .map(|st| FileType::from_raw_mode(st.st_mode))
                    .map_err(io::Error::from);
            }
        }
        v.sort_by(|a, b| a.name.cmp(&b.name));
        (self.listed)(&folder.path);
        v
    }

    /// Opens the folder `e` of `parent`, not following a link: one that replaced it
    /// since `parent` was listed is skipped, as is a folder that is gone.
    fn open_folder(&mut self, parent: &Folder, e: &Entry) -> Option<Folder> {
        let opened = rfs::openat(
            parent.fd(),
            &e.raw,
            DIR_FLAGS | OFlags::NOFOLLOW,
            Mode::empty(),
        )
        .and_then(Dir::new);
        match opened {
            Ok(dir) => Some(Folder {
                dir,
                path: e.path.clone(),
                rel: parent.rel.join(&e.raw),
                base: parent.base.clone(),
            }),
            Err(err) => {
                let path = e.path.display().to_string();
                let link = matches!(err, Errno::LOOP | Errno::NOTDIR)
                    && rfs::statat(parent.fd(), &e.raw, AtFlags::SYMLINK_NOFOLLOW)
                        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink);
                if link {
                    self.out.skipped.push((path, SWAPPED.to_string()));
                } else {
                    self.out
                        .unreadable
                        .push((path, io::Error::from(err).to_string()));
                }
                None
            }
        }
    }

    /// What an entry is, from the directory listing where it can (no `stat` but for
    /// links). A link is resolved: to a file inside the tree it is that file; out of
    /// the tree, or to a folder (a link to a folder above would walk for ever), it is
    /// skipped; a dangling one is reported like any file that cannot be read.
    fn kind(&self, e: &Entry) -> Kind {
        let t = match &e.t {
            Ok(t) => *t,
            Err(err) => return Kind::Unreadable(err.to_string()),
        };
        match t {
            FileType::Directory => return Kind::Dir,
            FileType::RegularFile => return Kind::File(None),
            FileType::Symlink => {}
            t => return Kind::Skip(not_a_file(t)),
        }
        let target = match self.inside(&e.path) {
            Ok(t) => t,
            Err(k) => return k,
        };
        match fs::metadata(&target) {
            Ok(m) if m.is_file() => Kind::File(Some(target)),
            Ok(m) if m.is_dir() => {
                Kind::Skip("a symbolic link to a folder: not followed".to_string())
            }
            Ok(m) => Kind::Skip(format!("a symbolic link to {}", not_a_file(file_type(&m)))),
            Err(e) => Kind::Unreadable(e.to_string()),
        }
    }

    /// The real path of the link `path` when it leads inside the tree (or anywhere,
    /// with `--follow-symlinks`). Only where it leads is decided here: what is read
    /// there is opened below the folder named without following a link.
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

    /// The folder named and `real`'s path below it, when `real` is inside it.
    fn below_root<'p>(&self, real: &'p Path) -> Option<(Arc<OwnedFd>, &'p Path)> {
        let rel = real.strip_prefix(&self.root).ok()?;
        if rel.as_os_str().is_empty() {
            return None;
        }
        Some((self.root_fd.clone()?, rel))
    }

    fn record(&mut self, folder: &Folder, e: &Entry, k: Kind) {
        match k {
            Kind::File(real) => self.file(folder, e, real),
            Kind::Dir => self.out.skipped.push((
                e.path.display().to_string(),
                "a folder where a Maildir keeps messages".to_string(),
            )),
            Kind::Skip(why) => self.out.skipped.push((e.path.display().to_string(), why)),
            Kind::Unreadable(err) => self
                .out
                .unreadable
                .push((e.path.display().to_string(), err)),
        }
    }

    /// A file to read: the entry `e` of `folder`, or `real`, the file the link `e` leads
    /// to.
    fn file(&mut self, folder: &Folder, e: &Entry, real: Option<PathBuf>) {
        let Some(real) = real else {
            if self.sizes {
                self.out.bytes += rfs::statat(folder.fd(), &e.raw, AtFlags::SYMLINK_NOFOLLOW)
                    .map_or(0, |st| st.st_size as u64);
            }
            let rel_len = folder.rel.join(&e.raw).as_os_str().len();
            let at = e.path.as_os_str().len() - rel_len;
            debug_assert!(e.path.ends_with(folder.rel.join(&e.raw)));
            self.out.files.push(Source {
                path: e.path.clone(),
                named: false,
                below: Some((folder.base.clone(), at)),
            });
            return;
        };
        if self.sizes {
            self.out.bytes += fs::symlink_metadata(&real).map_or(0, |m| m.len());
        }
        let below = self.below_root(&real).map(|(fd, rel)| {
            let at = real.as_os_str().len() - rel.as_os_str().len();
            (fd, at)
        });
        self.out.files.push(Source {
            path: real,
            named: false,
            below,
        });
    }

    fn directory(&mut self, mut folder: Folder) {
        for e in self.entries(&mut folder) {
            if e.name.starts_with('.') {
                continue;
            }
            match self.kind(&e) {
                Kind::Dir => {
                    if let Some(sub) = self.open_folder(&folder, &e) {
                        if is_maildir(sub.fd()) {
                            self.maildir(sub);
                        } else {
                            self.directory(sub);
                        }
                    }
                }
                Kind::File(_)
                    if self
                        .exclude
                        .iter()
                        .any(|g| crate::policy::glob_match(g.as_bytes(), e.name.as_bytes())) =>
                {
                    self.out.excluded.push(e.path)
                }
                k => self.record(&folder, &e, k),
            }
        }
    }

    /// The `cur/` or `new/` of the Maildir `dir`, opened: a link is followed only where
    /// it stays in the tree (or with `--follow-symlinks`), and then to its real path.
    fn maildir_sub(&mut self, dir: &Folder, sub: &str) -> Option<Folder> {
        let e = Entry {
            name: sub.to_string(),
            raw: sub.into(),
            path: dir.path.join(sub),
            t: Ok(FileType::Directory),
        };
        let st = rfs::statat(dir.fd(), sub, AtFlags::SYMLINK_NOFOLLOW);
        if !st.is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink) {
            return self.open_folder(dir, &e);
        }
        let real = match self.inside(&e.path) {
            Ok(real) => real,
            Err(k) => {
                self.record(dir, &e, k);
                return None;
            }
        };
        let opened = match self.below_root(&real) {
            Some((root, rel)) => super::open_beneath(root.as_fd(), rel, DIR_FLAGS)
                .map(|fd| (fd, root, rel.to_path_buf())),
            None => rfs::open(&real, DIR_FLAGS, Mode::empty())
                .map_err(io::Error::from)
                .and_then(|fd| Ok((fd.try_clone()?, Arc::new(fd), PathBuf::new()))),
        };
        match opened.and_then(|(fd, base, rel)| Ok((Dir::new(fd)?, base, rel))) {
            Ok((d, base, rel)) => Some(Folder {
                dir: d,
                path: real,
                rel,
                base,
            }),
            // A link on the way since the link was resolved.
            Err(err) if err.raw_os_error() == Some(libc::ELOOP) => {
                let path = e.path.display().to_string();
                self.out.skipped.push((path, SWAPPED.into()));
                None
            }
            Err(err) => {
                let path = e.path.display().to_string();
                self.out.unreadable.push((path, err.to_string()));
                None
            }
        }
    }

    fn maildir(&mut self, mut dir: Folder) {
        for sub in ["cur", "new"] {
            let Some(mut folder) = self.maildir_sub(&dir, sub) else {
                continue;
            };
            for e in self.entries(&mut folder) {
                if !e.name.starts_with('.') {
                    let k = self.kind(&e);
                    self.record(&folder, &e, k);
                }
            }
        }
        for e in self.entries(&mut dir) {
            // Only a folder that looks like a Maildir (as its `cur/` and `new/` are
            // seen from here) is opened: other dot folders are left alone, unread.
            let looks = e.name.starts_with('.')
                && e.t.as_ref().is_ok_and(|t| *t == FileType::Directory)
                && ["cur", "new"].iter().all(|sub| {
                    rfs::statat(dir.fd(), Path::new(&e.raw).join(sub), AtFlags::empty())
                        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory)
                });
            if looks {
                if let Some(sub) = self.open_folder(&dir, &e) {
                    if is_maildir(sub.fd()) {
                        self.maildir(sub);
                    }
                }
            }
        }
    }
}
