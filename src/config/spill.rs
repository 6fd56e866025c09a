//! Spill files: the milter keeps a large message in one while it arrives, and
//! `config-check` creates one to prove `[limits] spill_directory` usable. Both call
//! [`spill_file`], so the check tries exactly what the daemon will do.
//!
//! Nobody else can open, guess or take a spill file's place. `O_TMPFILE` (tmpfs, ext4,
//! xfs, btrfs) makes a file that never has a name. Elsewhere the file gets a name of 128
//! bits from the OS's random source, is created only if that name is free, and is
//! unlinked at once; a taken name (someone else's file) costs a retry with a new name,
//! never the spill. The earlier names, `.mimeref-milter-PID-SEQ`, could be created in
//! advance by any local user with write access to the directory, and then every large
//! message skipped spilling.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Names tried when `O_TMPFILE` is not available. With random names a taken one is
/// already a coincidence; several in a row mean the directory is unusable.
const TRIES: usize = 4;

/// A new, empty, unlinked file in `dir`, readable and writable by this process only.
pub fn spill_file(dir: &Path) -> io::Result<File> {
    match unnamed(dir) {
        Err(e) if no_tmpfile(&e) => named(dir, random_name),
        r => r,
    }
}

fn unnamed(dir: &Path) -> io::Result<File> {
    // O_EXCL: the file can never be given a name (linkat) afterwards either.
    OpenOptions::new()
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_TMPFILE | libc::O_EXCL)
        .open(dir)
}

/// What open(2) answers when the filesystem (EOPNOTSUPP) or the kernel (EISDIR, EINVAL:
/// before Linux 3.11 the flag reads as O_DIRECTORY) has no `O_TMPFILE`.
fn no_tmpfile(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
    )
}

/// A file created under a name from `name` (tried up to [`TRIES`] times while the names
/// are taken), then unlinked.
fn named(dir: &Path, mut name: impl FnMut() -> io::Result<String>) -> io::Result<File> {
    let mut taken = None;
    for _ in 0..TRIES {
        let path = dir.join(name()?);
        match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(f) => {
                std::fs::remove_file(&path)?;
                return Ok(f);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => taken = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(taken.unwrap_or_else(|| io::Error::other("no name tried")))
}

/// Whether `dir` is on a filesystem kept in memory (tmpfs, ramfs): what is written
/// there is memory the daemon's cgroup is charged for, not disk. False when it cannot
/// be told.
pub fn in_memory(dir: &Path) -> bool {
    // Magic numbers from linux/magic.h.
    const TMPFS_MAGIC: u64 = 0x0102_1994;
    const RAMFS_MAGIC: u64 = 0x8584_58f6;
    rustix::fs::statfs(dir).is_ok_and(|s| {
        #[allow(clippy::unnecessary_cast)]
        let t = s.f_type as u64;
        t == TMPFS_MAGIC || t == RAMFS_MAGIC
    })
}

fn random_name() -> io::Result<String> {
    let mut bits = [0u8; 16];
    getrandom::fill(&mut bits).map_err(|e| io::Error::other(format!("random source: {e}")))?;
    let hex: String = bits.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!(".mimeref-milter-{hex}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, Write};

    fn dir(name: &str) -> std::path::PathBuf {
        let d =
            std::env::temp_dir().join(format!("mimeref-spill-unit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn entries(d: &Path) -> usize {
        std::fs::read_dir(d).unwrap().count()
    }

    #[test]
    fn a_spill_file_has_no_name_and_keeps_what_is_written() {
        let d = dir("plain");
        let mut f = spill_file(&d).unwrap();
        assert_eq!(entries(&d), 0, "nothing in the directory to find or open");
        f.write_all(b"octets").unwrap();
        f.rewind().unwrap();
        let mut back = String::new();
        f.read_to_string(&mut back).unwrap();
        assert_eq!(back, "octets");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn files_of_every_name_put_there_beforehand_change_nothing() {
        let d = dir("crowded");
        let pid = std::process::id();
        for seq in 0..100 {
            std::fs::write(d.join(format!(".mimeref-milter-{pid}-{seq}")), b"").unwrap();
            std::fs::write(d.join(format!(".mimeref-milter-{seq:032x}")), b"").unwrap();
        }
        for _ in 0..10 {
            spill_file(&d).unwrap();
            named(&d, random_name).unwrap();
        }
        assert_eq!(entries(&d), 200, "only the files put there remain");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn without_o_tmpfile_a_taken_name_costs_a_retry_not_the_spill() {
        let d = dir("taken");
        for n in 0..TRIES {
            std::fs::write(d.join(format!("taken-{n}")), b"someone else's").unwrap();
        }
        // Every name but the last taken: the file is made under the last one.
        let mut n = 0;
        let f = named(&d, || {
            n += 1;
            Ok(if n < TRIES {
                format!("taken-{n}")
            } else {
                "free".into()
            })
        });
        assert!(f.is_ok(), "{f:?}");
        assert_eq!(n, TRIES);
        assert!(!d.join("free").exists(), "unlinked at once");
        // Every name taken: an error, and the files put there are left as they were.
        let mut n = 0;
        let e = named(&d, || {
            n += 1;
            Ok(format!("taken-{}", n - 1))
        })
        .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(n, TRIES);
        assert_eq!(std::fs::read(d.join("taken-0")).unwrap(), b"someone else's");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn random_names_are_not_derived_from_the_process() {
        let a = random_name().unwrap();
        let b = random_name().unwrap();
        assert_ne!(a, b);
        let bits = a.strip_prefix(".mimeref-milter-").unwrap();
        assert!(
            bits.len() == 32 && bits.bytes().all(|c| c.is_ascii_hexdigit()),
            "128 random bits, nothing else: {a}"
        );
    }
}
