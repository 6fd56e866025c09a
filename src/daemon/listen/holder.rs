//! Which process holds a socket, as "pid 1234: /usr/bin/mimeref-milter serve ...", for
//! the error line when the socket is taken. Best effort: Linux's /proc, and only the
//! processes this user may look at.

use std::path::Path;

/// The process at the other end of a connected unix socket: the one that called
/// listen(2) (SO_PEERCRED, through tokio, which reads it without unsafe code here).
pub(super) fn of_connected(s: socket2::Socket) -> Option<String> {
    let s = tokio::net::UnixStream::from_std(std::os::unix::net::UnixStream::from(
        std::os::fd::OwnedFd::from(s),
    ))
    .ok()?;
    // 0: a process in another PID namespace.
    let pid = s.peer_cred().ok()?.pid().filter(|&p| p > 0)?;
    Some(describe(pid as u32))
}

/// The process holding the listening unix socket bound at `path`
/// (/proc/net/unix gives its inode).
pub(super) fn of_unix_path(path: &Path) -> Option<String> {
    let want = path.to_str()?;
    let table = std::fs::read_to_string("/proc/net/unix").ok()?;
    // Num RefCount Protocol Flags Type St Inode Path; flags 00010000: listening.
    let inode = table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 8 && f[7] == want && f[3] == "00010000").then(|| f[6].parse().ok())?
    })?;
    of_inode(inode)
}

/// The process holding the TCP socket that listens on `port`.
pub(super) fn of_tcp_port(port: u16) -> Option<String> {
    let want = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().find_map(|t| {
        let table = std::fs::read_to_string(t).ok()?;
        // sl local_address rem_address st ... inode (the 10th field); st 0A: LISTEN.
        let inode = table.lines().skip(1).find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 10 && f[1].ends_with(&want) && f[3] == "0A").then(|| f[9].parse().ok())?
        })?;
        of_inode(inode)
    })
}

/// The process with a descriptor for socket `inode`.
fn of_inode(inode: u64) -> Option<String> {
    let target = format!("socket:[{inode}]");
    let me = std::process::id();
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|p| {
        let pid: u32 = p.file_name().to_str()?.parse().ok()?;
        if pid == me {
            return None;
        }
        let fds = std::fs::read_dir(p.path().join("fd")).ok()?;
        fds.flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == target.as_str()))
            .then(|| describe(pid))
    })
}

/// "pid N: command line", or "pid N" when /proc hides it.
fn describe(pid: u32) -> String {
    let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .map(|c| {
            c.split(|&b| b == 0)
                .filter(|a| !a.is_empty())
                .map(String::from_utf8_lossy)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|c| !c.is_empty());
    match cmd {
        Some(c) => format!("pid {pid}: {}", c.escape_debug()),
        None => format!("pid {pid}"),
    }
}
