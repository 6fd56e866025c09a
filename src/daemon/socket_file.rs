//! The unix socket file the daemon made, as it was right after bind(2): the listener
//! records it, `/readyz` and the gauge compare the path with it, and the daemon removes
//! the file at exit only while it is still this one. A module of its own so that the
//! listener and the health state both use it without depending on each other.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// The unix socket file this daemon created, known by the device, inode and birth time
/// it had right after bind(2): whatever is at the path later is checked against them,
/// so that the daemon notices when its socket is removed or replaced (by a second
/// instance, a cleanup job), and never removes a socket it did not create. The birth
/// time because a file created after ours was removed often gets the same inode number;
/// unlike the change time, it stays when an admin changes the socket's mode or group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketFile {
    path: PathBuf,
    dev: u64,
    ino: u64,
    /// None where the file system does not keep it (dev and inode alone then).
    born: Option<std::time::SystemTime>,
}

impl SocketFile {
    pub(super) fn at(path: &std::path::Path) -> io::Result<SocketFile> {
        let m = std::fs::symlink_metadata(path)?;
        Ok(SocketFile {
            path: path.to_path_buf(),
            dev: m.dev(),
            ino: m.ino(),
            born: m.created().ok(),
        })
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Ok while the path still names this socket; else what became of it. One
    /// statx(2): cheap enough for every `/readyz` and every scrape.
    pub fn check(&self) -> Result<(), &'static str> {
        match std::fs::symlink_metadata(&self.path) {
            Ok(m)
                if m.dev() == self.dev
                    && m.ino() == self.ino
                    && (self.born.is_none() || m.created().ok() == self.born) =>
            {
                Ok(())
            }
            Ok(_) => Err("was replaced by another file"),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err("was removed"),
            Err(_) => Err("cannot be looked at"),
        }
    }
}

/// The socket file this daemon created, removed when this is dropped (the daemon
/// stops, or fails after binding) if the path still names it: a socket another
/// process put there since is that process's, and stays.
#[derive(Debug)]
pub struct OwnSocket(SocketFile);

impl OwnSocket {
    pub(super) fn new(path: &std::path::Path) -> io::Result<OwnSocket> {
        SocketFile::at(path).map(OwnSocket)
    }

    pub fn file(&self) -> &SocketFile {
        &self.0
    }
}

impl Drop for OwnSocket {
    fn drop(&mut self) {
        match self.0.check() {
            Ok(()) => {
                let _ = std::fs::remove_file(&self.0.path);
            }
            Err(what) => tracing::warn!(
                "milter socket {} {what} since this daemon created it; left as it is",
                self.0.path.display()
            ),
        }
    }
}
