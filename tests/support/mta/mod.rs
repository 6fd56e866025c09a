//! Support code for end-to-end tests behind real MTAs.
//!
//! Each test gets its own private Postfix (or Sendmail) instance: own config
//! directory, own queue, loopback ports picked at run time, everything torn
//! down on drop. Delivered mail lands in an `smtp-sink -d` dump directory so
//! tests can compare the bytes that came out with the bytes that went in.
//!
//! Tests that need an MTA call [`require_postfix`] / [`require_sendmail`]
//! first: when the MTA is missing they panic with the command that installs
//! it, unless `MIMEREF_SKIP_MTA=1` asks for a quick local run without MTAs.
//! Every wait is bounded, so a broken MTA fails a test instead of hanging it.
#![allow(dead_code)]

pub mod probe;

mod daemon;
mod dns;
mod opendkim;
mod postfix;
mod rspamd;
mod sendmail;
mod smtp;

// Every test crate uses its own share of them.
#[allow(unused_imports)]
pub use {daemon::*, dns::*, opendkim::*, postfix::*, rspamd::*, sendmail::*, smtp::*};

use std::fs;
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// Upper bound for any single SMTP reply or MTA state change.
pub const WAIT: Duration = Duration::from_secs(30);

pub const SBIN: &str = "/usr/sbin";
pub const HOSTNAME: &str = "mimeref-test.localdomain";

fn skip_requested() -> bool {
    std::env::var("MIMEREF_SKIP_MTA").is_ok_and(|v| v == "1")
}

fn is_root() -> bool {
    // The Postfix master and Sendmail both need root to start; the
    // effective uid is visible through /proc without libc.
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

fn require(what: &str, missing: Option<String>) -> bool {
    let problem = match missing {
        None if is_root() => return true,
        None => format!("{what} tests must run as root (the MTA master process needs it)"),
        Some(p) => p,
    };
    if skip_requested() {
        eprintln!("SKIPPED ({what}): {problem} [MIMEREF_SKIP_MTA=1]");
        return false;
    }
    panic!(
        "{problem}\n  install with: sudo scripts/install-test-deps\n  \
         or skip MTA tests for a quick local run: MIMEREF_SKIP_MTA=1"
    );
}

/// True when the test may go on; false only when the user asked to skip.
pub fn require_postfix() -> bool {
    let missing = ["postfix", "postconf", "postqueue", "smtp-sink"]
        .iter()
        .map(|t| Path::new(SBIN).join(t))
        .find(|p| !p.exists())
        .map(|p| format!("Postfix is not installed ({} missing)", p.display()));
    require("postfix", missing)
}

pub fn sendmail_root() -> PathBuf {
    std::env::var_os("MIMEREF_SENDMAIL_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/mimeref-test/sendmail"))
}

pub fn require_sendmail() -> bool {
    let root = sendmail_root();
    let missing = [
        root.join("usr/libexec/sendmail/sendmail"),
        root.join("usr/share/sendmail/cf/m4/cf.m4"),
        PathBuf::from("/usr/bin/m4"),
    ]
    .into_iter()
    .find(|p| !p.exists())
    .map(|p| format!("Sendmail is not unpacked ({} missing)", p.display()));
    require("sendmail", missing)
}

/// HAProxy, for the tests of several daemons behind one milter address.
pub fn require_haproxy() -> bool {
    let missing = (!Path::new(SBIN).join("haproxy").exists())
        .then(|| "HAProxy is not installed (/usr/sbin/haproxy missing)".to_string());
    require("haproxy", missing)
}

pub fn require_miltertest() -> bool {
    let missing = (!Path::new("/usr/bin/miltertest").exists())
        .then(|| "miltertest is not installed (/usr/bin/miltertest missing)".to_string());
    // miltertest needs no root; only the install check matters.
    if missing.is_none() {
        return true;
    }
    require("miltertest", missing)
}

/// The Python of the virtual environment that holds the PyPI `miltertest` library
/// (scripts/install-test-deps.d/py-miltertest.sh; `MIMEREF_PY_VENV` moves it), or
/// None when the user asked to skip.
pub fn require_py_miltertest() -> Option<PathBuf> {
    let venv = std::env::var_os("MIMEREF_PY_VENV").map_or_else(
        || PathBuf::from("/opt/mimeref-test/py-miltertest"),
        PathBuf::from,
    );
    let python = venv.join("bin/python");
    let ok = Command::new(&python)
        .args(["-c", "import miltertest"])
        .output()
        .is_ok_and(|o| o.status.success());
    let missing = (!ok).then(|| {
        format!(
            "the PyPI miltertest library is not installed ({} cannot import it)",
            python.display()
        )
    });
    if missing.is_none() {
        return Some(python);
    }
    require("py-miltertest", missing).then_some(python)
}

/// OpenDKIM (signer, key generator) and python3-dkim (signing and verifying
/// without DNS), for tests/mta/dkim_e2e.rs. Only the install is checked here; the
/// Postfix those tests also need has its own check.
pub fn require_opendkim() -> bool {
    let missing = ["/usr/sbin/opendkim", "/usr/sbin/opendkim-genkey"]
        .iter()
        .find(|p| !Path::new(p).exists())
        .map(|p| format!("OpenDKIM is not installed ({p} missing)"))
        .or_else(|| {
            let ok = Command::new("/usr/bin/python3")
                .args(["-c", "import dkim"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            (!ok).then(|| "python3-dkim is not installed (import dkim failed)".to_string())
        });
    require("opendkim", missing)
}

/// rspamd (Debian package: the daemon and its `_rspamd` user), for tests/mta/rspamd_e2e.rs.
pub fn require_rspamd() -> bool {
    let missing = if !Path::new("/usr/bin/rspamd").exists() {
        Some("rspamd is not installed (/usr/bin/rspamd missing)".to_string())
    } else if !Command::new("id")
        .arg("_rspamd")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        Some("rspamd is not installed (no _rspamd user)".to_string())
    } else {
        None
    };
    require("rspamd", missing)
}

/// A directory removed with everything in it on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("mimeref-{tag}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).expect("create temp dir");
        // MTA processes run as unprivileged users and must traverse it.
        chmod(&p, 0o755);
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("MIMEREF_KEEP_TMP").is_none() {
            let _ = fs::remove_dir_all(&self.0);
        } else {
            eprintln!("kept {}", self.0.display());
        }
    }
}

/// SMTP AUTH for a test Postfix: Cyrus SASL's ANONYMOUS mechanism needs neither a
/// password database nor an authentication daemon, and Postfix passes `{auth_type}`
/// and `{auth_authen}` for it as for any other mechanism. Returns the directory holding
/// its `smtpd.conf` (keep it alive with the Postfix) and the main.cf lines.
pub fn sasl_anonymous() -> (TempDir, Vec<String>) {
    let dir = TempDir::new("sasl");
    std::fs::write(dir.path().join("smtpd.conf"), "mech_list: ANONYMOUS\n").unwrap();
    let main_cf = vec![
        "smtpd_sasl_auth_enable = yes".into(),
        "smtpd_sasl_type = cyrus".into(),
        format!("cyrus_sasl_config_path = {}", dir.path().display()),
        // The default, noanonymous, would hide the one mechanism offered.
        "smtpd_sasl_security_options =".into(),
    ];
    (dir, main_cf)
}

pub fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).expect("chmod");
}

pub fn chown(p: &Path, user: &str) {
    let st = Command::new("chown")
        .arg(user)
        .arg(p)
        .status()
        .expect("run chown");
    assert!(st.success(), "chown {user} {}", p.display());
}

/// A loopback port nobody listens on right now, for a daemon that binds it later.
///
/// Between this check and the daemon's bind(2) the port is free for anyone to take,
/// so it is picked where little else looks: outside the kernel's ephemeral range
/// (`net.ipv4.ip_local_port_range`), from which every bind to port 0 (the in-process
/// daemons of tests/milter, other test binaries' listeners) and every outgoing
/// connection's local port come; and never twice in one process (the tests of a
/// binary run on parallel threads), starting at a place that differs from process to
/// process (test binaries run side by side). [`Daemon`] also starts again on another
/// port when its own is taken after all (exit status 69).
pub fn free_port() -> u16 {
    use std::collections::HashSet;
    use std::sync::Mutex;
    static GIVEN: Mutex<Option<(HashSet<u16>, u64)>> = Mutex::new(None);

    let (lo, hi) = ports_outside_ephemeral_range();
    let span = u64::from(hi - lo) + 1;
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    let (seen, next) = given.get_or_insert_with(|| {
        // A start of its own for each process: the pid and the clock, mixed.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let mut x = (u64::from(std::process::id()) << 32) ^ t;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        (HashSet::new(), x % span)
    });
    for _ in 0..span {
        let port = lo + (*next % span) as u16;
        *next += 1;
        if seen.contains(&port) {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            seen.insert(port);
            return port;
        }
    }
    // Every one of them taken (hardly): the OS's choice, as before.
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("pick a free port")
}

/// The larger of the two port ranges around the ephemeral one, above 10000 (below it
/// sit the well-known services a test machine may run): [10000, first ephemeral) or
/// (last ephemeral, 65535]. Linux's default range 32768–60999 gives 10000–32767.
fn ports_outside_ephemeral_range() -> (u16, u16) {
    const FLOOR: u32 = 10_000;
    let (first, last) = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(|w| w.parse::<u32>().ok());
            Some((it.next()??, it.next()??))
        })
        .unwrap_or((32_768, 60_999));
    let below = first.saturating_sub(FLOOR);
    let above = 65_535u32.saturating_sub(last);
    if below >= above && below > 0 {
        (FLOOR as u16, (first - 1) as u16)
    } else if above > 0 {
        ((last + 1) as u16, 65_535)
    } else {
        (FLOOR as u16, 65_535)
    }
}

/// Waits until something accepts connections on 127.0.0.1:PORT.
pub fn wait_port(port: u16, timeout: Duration) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Polls `f` until it returns Some or the timeout passes.
pub fn wait_for<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= end {
            return None;
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// Runs a command with a time limit; returns (exit ok, stdout, stderr).
pub fn run_bounded(cmd: &mut Command, timeout: Duration) -> (bool, String, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let t_out = thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let t_err = thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let end = Instant::now() + timeout;
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break Some(st);
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(20));
    };
    let (o, e) = (
        t_out.join().unwrap_or_default(),
        t_err.join().unwrap_or_default(),
    );
    match status {
        Some(st) => (st.success(), o, e),
        None => (
            false,
            o,
            format!("{e}\n[timed out after {timeout:?}: {cmd:?}]"),
        ),
    }
}

/// Kills a child we started and reaps it.
pub fn stop_child(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Sends SIGTERM to a child and waits (bounded) for it to exit; SIGKILL after.
pub fn terminate_child(child: &mut Child, timeout: Duration) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
    stop_child(child);
}
