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

use super::message::{fixture, header_values, lines, split_fields, with_message_id};

use std::fs;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
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

/// A loopback port nobody listens on right now (the OS picks it).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("pick a free port")
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

// ---------------------------------------------------------------------------
// SMTP client

/// One SMTP reply: the code and the text of all its lines joined by '\n'.
#[derive(Debug, Clone)]
pub struct Reply {
    pub code: u16,
    pub text: String,
}

impl Reply {
    pub fn class(&self) -> u16 {
        self.code / 100
    }
    pub fn is_ok(&self) -> bool {
        self.class() == 2
    }
}

impl std::fmt::Display for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.code, self.text)
    }
}

/// A client that always waits for each reply before the next command
/// (Sendmail rejects clients that talk early). Works over TCP and over a
/// child's stdin/stdout (`sendmail -bs`).
pub struct Smtp {
    w: Box<dyn Write + Send>,
    rx: mpsc::Receiver<Vec<u8>>,
    buf: Vec<u8>,
    tcp: Option<TcpStream>,
    pub greeting: Reply,
}

impl Smtp {
    pub fn connect(port: u16) -> Smtp {
        let s = TcpStream::connect(("127.0.0.1", port))
            .unwrap_or_else(|e| panic!("connect 127.0.0.1:{port}: {e}"));
        let r = s.try_clone().expect("clone socket");
        let w = s.try_clone().expect("clone socket");
        let mut c = Smtp::over(Box::new(r), Box::new(w));
        c.tcp = Some(s);
        c
    }

    pub fn over(r: Box<dyn Read + Send>, w: Box<dyn Write + Send>) -> Smtp {
        let (tx, rx) = mpsc::channel();
        let mut r = r;
        thread::spawn(move || {
            let mut b = [0u8; 4096];
            loop {
                match r.read(&mut b) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if tx.send(b[..n].to_vec()).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let mut c = Smtp {
            w,
            rx,
            buf: Vec::new(),
            tcp: None,
            greeting: Reply {
                code: 0,
                text: String::new(),
            },
        };
        c.greeting = c.reply();
        c
    }

    /// Reads one (possibly multi-line) reply; panics on timeout or EOF.
    pub fn reply(&mut self) -> Reply {
        let end = Instant::now() + WAIT;
        let mut text = Vec::new();
        loop {
            while let Some(nl) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=nl).collect();
                let line = String::from_utf8_lossy(&line).trim_end().to_string();
                let code = line.get(..3).and_then(|c| c.parse::<u16>().ok());
                let more = line.as_bytes().get(3) == Some(&b'-');
                text.push(line.get(4..).unwrap_or("").to_string());
                match code {
                    Some(code) if !more => {
                        return Reply {
                            code,
                            text: text.join("\n"),
                        }
                    }
                    Some(_) => {}
                    None => panic!("not an SMTP reply line: {line:?}"),
                }
            }
            let left = end.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(chunk) => self.buf.extend_from_slice(&chunk),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("no SMTP reply within {WAIT:?} (partial: {text:?})")
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    // A closed connection reads as a pseudo reply so tests
                    // can assert on it.
                    return Reply {
                        code: 0,
                        text: format!("connection closed (partial: {text:?})"),
                    };
                }
            }
        }
    }

    pub fn cmd(&mut self, line: &str) -> Reply {
        self.w
            .write_all(format!("{line}\r\n").as_bytes())
            .and_then(|_| self.w.flush())
            .unwrap_or_else(|e| panic!("write {line:?}: {e}"));
        self.reply()
    }

    pub fn ehlo(&mut self, name: &str) -> Reply {
        let r = self.cmd(&format!("EHLO {name}"));
        assert_eq!(r.code, 250, "EHLO refused: {r}");
        r
    }

    /// One whole transaction. Returns the first reply that is not positive
    /// (MAIL, RCPT, DATA) or the reply to the end of data.
    pub fn send(&mut self, from: &str, to: &[&str], message: &[u8]) -> Reply {
        let r = self.cmd(&format!("MAIL FROM:<{from}>"));
        if !r.is_ok() {
            return r;
        }
        for rcpt in to {
            let r = self.cmd(&format!("RCPT TO:<{rcpt}>"));
            if !r.is_ok() {
                let _ = self.cmd("RSET");
                return r;
            }
        }
        self.data(message)
    }

    /// DATA and the message, after MAIL and RCPT; the reply to the end of data, or
    /// the refusal of DATA.
    pub fn data(&mut self, message: &[u8]) -> Reply {
        let r = self.cmd("DATA");
        if r.code != 354 {
            return r;
        }
        let data = smtp_data(message);
        self.w
            .write_all(&data)
            .and_then(|_| self.w.flush())
            .expect("write message data");
        self.reply()
    }

    pub fn quit(mut self) {
        let _ = self.w.write_all(b"QUIT\r\n");
        let _ = self.w.flush();
        let _ = self.reply();
        if let Some(s) = &self.tcp {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Smtp {
    fn drop(&mut self) {
        if let Some(s) = &self.tcp {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// Message bytes as sent after DATA: CRLF line ends, dot-stuffed, and the
/// terminating ".".
pub fn smtp_data(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 64);
    for line in lines(message) {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        let body = body.strip_suffix(b"\r").unwrap_or(body);
        if body.first() == Some(&b'.') {
            out.push(b'.');
        }
        out.extend_from_slice(body);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b".\r\n");
    out
}

// ---------------------------------------------------------------------------
// Postfix

/// What a test wants from its private Postfix.
#[derive(Clone, Debug)]
pub struct PostfixConfig {
    /// The `smtpd_milters` value (Postfix syntax: `inet:127.0.0.1:PORT`).
    pub milters: String,
    pub default_action: String,
    /// Also run a second smtpd named `submission` (own port, own
    /// `milter_macro_daemon_name`), as mail submission services are set up.
    pub submission: bool,
    /// Extra `main.cf` lines.
    pub extra_main: Vec<String>,
    /// Run smtpd and cleanup chrooted in the queue directory, as Debian's master.cf
    /// does (`chroot = y`), with the files Debian copies into the chroot.
    pub chroot: bool,
    /// Extra `master.cf` lines.
    pub extra_master: Vec<String>,
    /// A shell command run in a private mount namespace before Postfix starts there,
    /// so that its processes see the mounts it makes (a /dev/log of the test's own);
    /// None: started as it is.
    pub namespace_setup: Option<String>,
}

impl PostfixConfig {
    pub fn with_milter(milters: &str) -> PostfixConfig {
        PostfixConfig {
            milters: milters.to_string(),
            default_action: "tempfail".into(),
            submission: false,
            extra_main: Vec::new(),
            chroot: false,
            extra_master: Vec::new(),
            namespace_setup: None,
        }
    }
}

/// A private Postfix: smtpd on a loopback port (plus `submission` if asked),
/// relaying everything to an `smtp-sink -d` on another loopback port.
pub struct Postfix {
    root: TempDir,
    pub port: u16,
    pub submission_port: Option<u16>,
    pub sink_port: u16,
    sink: Child,
    started: bool,
}

pub const SUBMISSION_DAEMON_NAME: &str = "submission";

impl Postfix {
    pub fn start(cfg: &PostfixConfig) -> Postfix {
        let root = TempDir::new("postfix");
        let base = root.path().to_path_buf();
        let (etc, log, dump, data, queue) = (
            base.join("etc"),
            base.join("log"),
            base.join("dump"),
            base.join("data"),
            base.join("queue"),
        );
        for d in [&etc, &log, &dump, &data, &queue] {
            fs::create_dir_all(d).expect("mkdir");
        }
        // data_directory must belong to postfix (master.lock), the dump
        // directory to the user smtp-sink runs as.
        chown(&data, "postfix:postfix");
        chown(&dump, "nobody");

        let port = free_port();
        let sink_port = free_port();
        let submission_port = cfg.submission.then(free_port);

        let mut sink_cmd = Command::new(Path::new(SBIN).join("smtp-sink"));
        sink_cmd
            .arg("-u")
            .arg("nobody")
            .arg("-d")
            .arg(format!("{}/%Y%m%d%H%M%S.", dump.display()))
            .arg(format!("127.0.0.1:{sink_port}"))
            .arg("64")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(log.join("sink.err")).expect("sink log"));
        let sink = sink_cmd.spawn().expect("start smtp-sink");

        let main_cf = format!(
            "compatibility_level = 3.6
queue_directory = {queue}
data_directory = {data}
mail_owner = postfix
setgid_group = postdrop
maillog_file = {log}/postfix.log
maillog_file_prefixes = {log}
myhostname = {HOSTNAME}
mydomain = localdomain
myorigin = $myhostname
mydestination =
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
smtpd_relay_restrictions = permit_mynetworks, reject
smtpd_peername_lookup = no
# Keep Postfix from touching headers of mail from loopback clients, so the
# only changes in delivered mail are the milter's and the trace header.
local_header_rewrite_clients =
relayhost = [127.0.0.1]:{sink_port}
local_transport = error:local delivery disabled
alias_maps =
alias_database =
biff = no
smtpd_tls_security_level = none
smtp_tls_security_level = none
smtpd_milters = {milters}
non_smtpd_milters =
milter_default_action = {action}
milter_protocol = 6
# Short retry so a message deferred by a test is retried quickly.
queue_run_delay = 5s
minimal_backoff_time = 5s
maximal_backoff_time = 10s
{extra}
",
            queue = queue.display(),
            data = data.display(),
            log = log.display(),
            milters = cfg.milters,
            action = cfg.default_action,
            extra = cfg.extra_main.join("\n"),
        );
        fs::write(etc.join("main.cf"), main_cf).expect("write main.cf");

        // chroot n unless asked: a chrooted smtpd/cleanup needs copies of /etc files
        // inside the private queue directory.
        let ch = if cfg.chroot {
            copy_into_chroot(&queue);
            "y"
        } else {
            "n"
        };
        let mut master = format!("127.0.0.1:{port} inet n - {ch} - - smtpd\n");
        if let Some(sp) = submission_port {
            master.push_str(&format!(
                "127.0.0.1:{sp} inet n - {ch} - - smtpd\n  \
                 -o syslog_name=postfix/submission\n  \
                 -o milter_macro_daemon_name={SUBMISSION_DAEMON_NAME}\n"
            ));
        }
        for line in &cfg.extra_master {
            master.push_str(line);
            master.push('\n');
        }
        master.push_str(&format!("cleanup   unix  n - {ch} -  0 cleanup\n"));
        master.push_str(
            "pickup    unix  n - n 60 1 pickup
qmgr      unix  n - n 300 1 qmgr
rewrite   unix  - - n -  - trivial-rewrite
bounce    unix  - - n -  0 bounce
defer     unix  - - n -  0 bounce
trace     unix  - - n -  0 bounce
verify    unix  - - n -  1 verify
flush     unix  n - n 1000? 0 flush
proxymap  unix  - - n -  - proxymap
smtp      unix  - - n -  - smtp
relay     unix  - - n -  - smtp
error     unix  - - n -  - error
retry     unix  - - n -  - error
discard   unix  - - n -  - discard
anvil     unix  - - n -  1 anvil
scache    unix  - - n -  1 scache
postlog   unix-dgram n - n - 1 postlogd
",
        );
        fs::write(etc.join("master.cf"), master).expect("write master.cf");

        let mut pf = Postfix {
            root,
            port,
            submission_port,
            sink_port,
            sink,
            started: false,
        };
        assert!(
            wait_port(sink_port, WAIT),
            "smtp-sink did not start: {}",
            fs::read_to_string(log.join("sink.err")).unwrap_or_default()
        );
        let postfix = Path::new(SBIN).join("postfix");
        let mut start = match &cfg.namespace_setup {
            None => Command::new(&postfix),
            Some(setup) => {
                let mut c = Command::new("unshare");
                c.args(["--mount", "--propagation", "private", "sh", "-ec"])
                    .arg(format!("{setup}\nexec \"$0\" \"$@\""))
                    .arg(&postfix);
                c
            }
        };
        let (ok, out, err) = run_bounded(start.arg("-c").arg(&etc).arg("start"), WAIT);
        pf.started = ok;
        assert!(ok, "postfix start failed: {out}{err}\nlog:\n{}", pf.log());
        assert!(
            wait_port(port, WAIT),
            "postfix smtpd not listening:\n{}",
            pf.log()
        );
        pf
    }

    pub fn base(&self) -> &Path {
        self.root.path()
    }

    /// The queue directory: the chroot of chrooted services.
    pub fn queue(&self) -> PathBuf {
        self.base().join("queue")
    }

    pub fn etc(&self) -> PathBuf {
        self.base().join("etc")
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.base().join("log/postfix.log")).unwrap_or_default()
    }

    /// A session on the main smtpd, after the greeting and EHLO.
    pub fn smtp(&self) -> Smtp {
        let mut c = Smtp::connect(self.port);
        assert_eq!(c.greeting.code, 220, "greeting: {}", c.greeting);
        c.ehlo("client.example");
        c
    }

    pub fn submission(&self) -> Smtp {
        let port = self.submission_port.expect("started without submission");
        let mut c = Smtp::connect(port);
        assert_eq!(c.greeting.code, 220, "greeting: {}", c.greeting);
        c.ehlo("client.example");
        c
    }

    /// Sends one message in a fresh session on the main smtpd.
    pub fn send(&self, message: &[u8]) -> Reply {
        let mut c = self.smtp();
        let r = c.send("alice@sender.example", &["bob@receiver.example"], message);
        c.quit();
        r
    }

    /// Every message smtp-sink has finished receiving so far.
    pub fn delivered(&self) -> Vec<Delivered> {
        let mut out = Vec::new();
        let Ok(rd) = fs::read_dir(self.base().join("dump")) else {
            return out;
        };
        let mut paths: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        // smtp-sink writes while the transaction runs; a file is whole once its
        // size stops changing and it ends with the blank line. One pause for all
        // files keeps this quick with hundreds of them.
        let first: Vec<Option<Vec<u8>>> = paths.iter().map(|p| fs::read(p).ok()).collect();
        thread::sleep(Duration::from_millis(50));
        for (p, a) in paths.iter().zip(first) {
            let (Some(a), Ok(b)) = (a, fs::read(p)) else {
                continue;
            };
            if a != b || !b.ends_with(b"\n\n") {
                continue;
            }
            out.push(Delivered::parse(&b));
        }
        out
    }

    /// Waits for the delivered message whose Message-ID contains `id`.
    pub fn wait_delivered(&self, id: &str) -> Delivered {
        wait_for(WAIT, || {
            self.delivered().into_iter().find(|d| {
                header_values(&d.message, "Message-ID")
                    .iter()
                    .any(|v| v.contains(id))
            })
        })
        .unwrap_or_else(|| {
            panic!(
                "message {id} not delivered within {WAIT:?}\nqueue: {}\nlog:\n{}",
                self.queue_json().join("\n"),
                self.log()
            )
        })
    }

    /// `postqueue -j`: one JSON object per queued message.
    pub fn queue_json(&self) -> Vec<String> {
        let (_, out, _) = run_bounded(
            Command::new(Path::new(SBIN).join("postqueue"))
                .arg("-c")
                .arg(self.etc())
                .arg("-j"),
            WAIT,
        );
        out.lines().map(str::to_string).collect()
    }

    /// Queue entries in the hold queue (quarantined by a milter).
    pub fn held(&self) -> Vec<String> {
        self.queue_json()
            .into_iter()
            .filter(|l| {
                l.contains("\"queue_name\": \"hold\"") || l.contains("\"queue_name\":\"hold\"")
            })
            .collect()
    }

    /// Asks the queue manager to retry deferred mail now.
    pub fn flush(&self) {
        let _ = run_bounded(
            Command::new(Path::new(SBIN).join("postqueue"))
                .arg("-c")
                .arg(self.etc())
                .arg("-f"),
            WAIT,
        );
    }
}

impl Drop for Postfix {
    fn drop(&mut self) {
        if self.started {
            let pid = fs::read_to_string(self.base().join("queue/pid/master.pid"))
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok());
            let _ = run_bounded(
                Command::new(Path::new(SBIN).join("postfix"))
                    .arg("-c")
                    .arg(self.etc())
                    .arg("stop"),
                Duration::from_secs(10),
            );
            // `postfix stop` returns before the master has exited; the queue
            // must not vanish under a live master.
            if let Some(pid) = pid {
                let gone = wait_for(Duration::from_secs(10), || {
                    (!Path::new(&format!("/proc/{pid}")).exists()).then_some(())
                });
                if gone.is_none() {
                    let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
                }
            }
        }
        stop_child(&mut self.sink);
    }
}

/// What Debian's Postfix copies into its chroot before it starts
/// (/usr/lib/postfix/configure-instance.sh): the resolver and name service files and
/// the time zone, for services with `chroot = y`.
fn copy_into_chroot(queue: &Path) {
    let etc = queue.join("etc");
    fs::create_dir_all(&etc).expect("mkdir chroot etc");
    for name in [
        "localtime",
        "services",
        "resolv.conf",
        "hosts",
        "host.conf",
        "nsswitch.conf",
    ] {
        let from = Path::new("/etc").join(name);
        if from.is_file() {
            fs::copy(&from, etc.join(name)).expect("copy into the chroot");
            chmod(&etc.join(name), 0o644);
        }
    }
}

/// One message as smtp-sink received it from Postfix.
#[derive(Debug, Clone)]
pub struct Delivered {
    /// Envelope lines smtp-sink records (X-Mail-Args, X-Rcpt-Args, ...).
    pub envelope: Vec<String>,
    /// The message as Postfix sent it (LF line ends), trace header included.
    pub message: Vec<u8>,
}

impl Delivered {
    fn parse(dump: &[u8]) -> Delivered {
        let (fields, _) = split_fields(dump);
        let mut envelope = Vec::new();
        let mut skip = 0;
        for f in &fields {
            let s = String::from_utf8_lossy(f);
            let own = s.starts_with("X-Client-Addr:")
                || s.starts_with("X-Client-Proto:")
                || s.starts_with("X-Helo-Args:")
                || s.starts_with("X-Mail-Args:")
                || s.starts_with("X-Rcpt-Args:");
            let sink_received = s.starts_with("Received:") && s.contains("by smtp-sink");
            if !(own || sink_received) {
                break;
            }
            if own {
                envelope.push(s.trim_end().to_string());
            }
            skip += f.len();
        }
        let mut message = dump.get(skip..).unwrap_or_default().to_vec();
        // smtp-sink ends each dump with one empty line of its own.
        if message.ends_with(b"\n\n") {
            message.pop();
        }
        Delivered { envelope, message }
    }

    /// The message without the Received: field Postfix prepended.
    pub fn without_trace(&self) -> Vec<u8> {
        let (fields, _) = split_fields(&self.message);
        match fields.first() {
            Some(f)
                if f.starts_with(b"Received:")
                    && String::from_utf8_lossy(f).contains("(Postfix)") =>
            {
                self.message.get(f.len()..).unwrap_or_default().to_vec()
            }
            _ => self.message.clone(),
        }
    }

    pub fn header(&self, name: &str) -> Vec<String> {
        header_values(&self.message, name)
    }
}

/// Line-oriented diff summary for assertion messages.
/// The MTA's queue id (asked for at end of header: Sendmail sends `i` only from there
/// on) starts the daemon's verdict line, rather than `NOQUEUE`.
pub fn assert_queue_id_in_verdict(log: &str, verdict: &str) {
    assert!(
        log.contains(&format!(": direction=inbound verdict={verdict}")) && !log.contains("NOQUEUE"),
        "{log}"
    );
}

pub fn show_diff(expected: &[u8], got: &[u8]) -> String {
    let e: Vec<_> = lines(expected).collect();
    let g: Vec<_> = lines(got).collect();
    let mut out = String::new();
    let n = e.len().max(g.len());
    let mut shown = 0;
    for i in 0..n {
        let (a, b) = (e.get(i), g.get(i));
        if a != b && shown < 12 {
            out.push_str(&format!(
                "line {}: expected {:?}\n         got      {:?}\n",
                i + 1,
                a.map(|x| String::from_utf8_lossy(x)),
                b.map(|x| String::from_utf8_lossy(x))
            ));
            shown += 1;
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Sendmail

/// A private Sendmail from the unpacked Debian packages, run one SMTP
/// session at a time as `sendmail -C private.cf -bs -odq`: the session talks
/// on stdin/stdout, the milter runs as for a network client, and the result
/// stays in the private queue (`qf*` control file, `df*` body) to read back.
pub struct Sendmail {
    root: TempDir,
    pub cf: PathBuf,
}

impl Sendmail {
    /// `milter`: libmilter socket syntax (`inet:PORT@127.0.0.1`), or None.
    pub fn new(milter: Option<&str>) -> Sendmail {
        let named: Vec<(&str, &str)> = milter.map(|s| ("mimeref", s)).into_iter().collect();
        Sendmail::with_milters(&named)
    }

    /// Several filters as (name, socket), called in this order: each
    /// `INPUT_MAIL_FILTER` appends to `confINPUT_MAIL_FILTERS`.
    pub fn with_milters(milters: &[(&str, &str)]) -> Sendmail {
        let root = TempDir::new("sendmail");
        let base = root.path().to_path_buf();
        let queue = base.join("queue");
        fs::create_dir_all(&queue).expect("mkdir queue");
        // Sendmail refuses group- or world-writable queue directories.
        chmod(&queue, 0o700);
        let sm = sendmail_root();
        let cfdir = sm.join("usr/share/sendmail/cf");
        let filter: String = milters
            .iter()
            .map(|(name, s)| {
                // F=T: tempfail when the milter is unreachable; bounded
                // timeouts so a hung milter fails a test instead of hanging it.
                format!("INPUT_MAIL_FILTER(`{name}', `S={s}, F=T, T=C:10s;S:10s;R:20s;E:30s')dnl\n")
            })
            .collect();
        let mc = format!(
            "divert(-1)
divert(0)dnl
include(`{cf}/m4/cf.m4')dnl
OSTYPE(`linux')dnl
define(`confDOMAIN_NAME', `{HOSTNAME}')dnl
define(`QUEUE_DIR', `{queue}')dnl
define(`confPID_FILE', `{base}/sendmail.pid')dnl
define(`STATUS_FILE', `{base}/statistics')dnl
define(`ALIAS_FILE', `')dnl
define(`confHOST_STATUS_DIRECTORY', `')dnl
define(`confDONT_PROBE_INTERFACES', `True')dnl
define(`confTO_IDENT', `0s')dnl
define(`confMILTER_LOG_LEVEL', `14')dnl
FEATURE(`accept_unresolvable_domains')dnl
FEATURE(`promiscuous_relay')dnl
{filter}MAILER(`smtp')dnl
",
            cf = cfdir.display(),
            queue = queue.display(),
            base = base.display(),
        );
        let mc_path = base.join("private.mc");
        fs::write(&mc_path, mc).expect("write .mc");
        let (ok, out, err) = run_bounded(
            Command::new("m4")
                .arg(format!("-D_CF_DIR_={}/", cfdir.display()))
                .arg(&mc_path),
            WAIT,
        );
        assert!(ok, "m4 failed: {err}");
        let cf = base.join("private.cf");
        fs::write(&cf, out).expect("write .cf");
        Sendmail { root, cf }
    }

    pub fn base(&self) -> &Path {
        self.root.path()
    }

    /// Runs one SMTP session and returns the reply to the end of data (or
    /// the first refusal). The session always ends with QUIT and the
    /// process is reaped within the time limit.
    pub fn send(&self, message: &[u8]) -> Reply {
        let bin = sendmail_root().join("usr/libexec/sendmail/sendmail");
        let mut child = Command::new(bin)
            .arg("-C")
            .arg(&self.cf)
            .arg("-bs")
            .arg("-odq")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start sendmail -bs");
        let w = child.stdin.take().expect("stdin");
        let r = child.stdout.take().expect("stdout");
        let mut c = Smtp::over(Box::new(r), Box::new(w));
        assert_eq!(c.greeting.code, 220, "sendmail greeting: {}", c.greeting);
        c.ehlo("client.example");
        let reply = c.send("alice@sender.example", &["bob@receiver.example"], message);
        c.quit();
        let end = Instant::now() + WAIT;
        loop {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            if Instant::now() >= end {
                stop_child(&mut child);
                panic!("sendmail -bs did not exit after QUIT");
            }
            thread::sleep(Duration::from_millis(20));
        }
        reply
    }

    /// Messages left in the queue, ready for the next queue run.
    pub fn queued(&self) -> Vec<Queued> {
        self.read_queue("qf")
    }

    /// Messages a milter quarantined: Sendmail renames their control file
    /// from `qf*` to `hf*`, which queue runs and a plain `mailq` skip.
    pub fn quarantined(&self) -> Vec<Queued> {
        self.read_queue("hf")
    }

    fn read_queue(&self, control: &str) -> Vec<Queued> {
        let q = self.base().join("queue");
        let mut ids: Vec<String> = fs::read_dir(&q)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter_map(|e| {
                        let n = e.file_name().to_string_lossy().into_owned();
                        n.strip_prefix(control).map(str::to_string)
                    })
                    .collect()
            })
            .unwrap_or_default();
        ids.sort();
        ids.into_iter()
            .map(|id| {
                let qf = fs::read(q.join(format!("{control}{id}"))).unwrap_or_default();
                let df = fs::read(q.join(format!("df{id}"))).unwrap_or_default();
                Queued::parse(id, &qf, df)
            })
            .collect()
    }

    /// Runs the private Sendmail binary on this instance's config with
    /// `args` (`-bp -qQ`, `-q`, ...); returns (exit ok, stdout, stderr).
    pub fn run(&self, args: &[&str]) -> (bool, String, String) {
        let bin = sendmail_root().join("usr/libexec/sendmail/sendmail");
        run_bounded(Command::new(bin).arg("-C").arg(&self.cf).args(args), WAIT)
    }
}

/// A message in Sendmail's queue.
#[derive(Debug, Clone)]
pub struct Queued {
    /// The queue id (the file names without their `qf`/`hf`/`df`).
    pub id: String,
    /// The raw control file.
    pub qf: String,
    /// Header fields from the `H` lines ("\n" line ends), each with the
    /// `?flags?` condition Sendmail stored with it (empty for none).
    pub fields: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

impl Queued {
    fn parse(id: String, qf: &[u8], body: Vec<u8>) -> Queued {
        let text = String::from_utf8_lossy(qf).into_owned();
        let mut fields: Vec<(String, Vec<u8>)> = Vec::new();
        let mut in_header = false;
        for line in text.split_inclusive('\n') {
            if let Some(h) = line.strip_prefix('H') {
                // "H?FLAGS?Name: value": the ?..? part says when the field
                // applies (mailer flags), it is not part of the field.
                let (flags, h) = match h.strip_prefix('?') {
                    Some(rest) => rest.split_once('?').unwrap_or(("", rest)),
                    None => ("", h),
                };
                fields.push((flags.to_string(), h.as_bytes().to_vec()));
                in_header = true;
            } else if in_header && (line.starts_with(' ') || line.starts_with('\t')) {
                if let Some((_, f)) = fields.last_mut() {
                    f.extend_from_slice(line.as_bytes());
                }
            } else {
                in_header = false;
            }
        }
        Queued {
            id,
            qf: text,
            fields,
            body,
        }
    }

    /// The reason of a quarantined message: the control file's `q` line.
    /// Header continuation lines start with white space, so a line starting
    /// with `q` can only be that record.
    pub fn quarantine_reason(&self) -> Option<String> {
        self.qf
            .lines()
            .find_map(|l| l.strip_prefix('q'))
            .map(str::to_string)
    }

    /// Header fields, blank line, body: the message as it would go out.
    pub fn message(&self) -> Vec<u8> {
        let mut m: Vec<u8> = self.fields.iter().flat_map(|(_, f)| f.clone()).collect();
        m.push(b'\n');
        m.extend_from_slice(&self.body);
        m
    }

    /// The message without what Sendmail adds on its own: its Received:
    /// field and the fields it stores with a mailer condition
    /// (`H?P?Return-Path`, `H?D?Date` when the client sent none, ...).
    pub fn without_trace(&self) -> Vec<u8> {
        let mut m = Vec::new();
        let mut dropped = false;
        for (flags, f) in &self.fields {
            if !flags.is_empty() {
                continue;
            }
            if !dropped
                && f.starts_with(b"Received:")
                && String::from_utf8_lossy(f).contains("Sendmail")
                || (!dropped
                    && f.starts_with(b"Received:")
                    && String::from_utf8_lossy(f).contains(HOSTNAME))
            {
                dropped = true;
                continue;
            }
            m.extend_from_slice(f);
        }
        m.push(b'\n');
        m.extend_from_slice(&self.body);
        m
    }

    pub fn header(&self, name: &str) -> Vec<String> {
        header_values(&self.message(), name)
    }
}

/// libmilter socket syntax for a loopback TCP port (Sendmail, miltertest).
pub fn libmilter_spec(port: u16) -> String {
    format!("inet:{port}@127.0.0.1")
}

// ---------------------------------------------------------------------------
// The mimeref-milter daemon under test

/// The daemon binary: Cargo's for this package's integration tests, or
/// `MIMEREF_MILTER_BIN` (to run this harness against another build).
pub fn daemon_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("MIMEREF_MILTER_BIN") {
        return PathBuf::from(p);
    }
    match option_env!("CARGO_BIN_EXE_mimeref-milter") {
        Some(p) => PathBuf::from(p),
        None => panic!("no daemon binary: set MIMEREF_MILTER_BIN"),
    }
}

/// `mimeref-milter serve` on a loopback port with a test's config, run
/// until dropped (SIGTERM, then SIGKILL if it does not exit in time).
pub struct Daemon {
    dir: TempDir,
    pub port: u16,
    pub extra: Vec<String>,
    /// A command that runs the daemon (`prlimit --nofile=64 --`), or nothing.
    wrapper: Vec<String>,
    /// Environment variables added to the daemon's.
    env: Vec<(String, String)>,
    child: Option<Child>,
    starts: usize,
}

impl Daemon {
    /// `config`: TOML text; `extra`: more `serve` arguments (`--dry-run`).
    pub fn start(config: &str, extra: &[&str]) -> Daemon {
        Daemon::launch(&[], config, extra, &[])
    }

    /// [`Daemon::start`] through `wrapper`, a command that ends by running its arguments
    /// in its own place (`prlimit --nofile=64 --`), so that the pid is the daemon's.
    pub fn start_under(wrapper: &[&str], config: &str, extra: &[&str]) -> Daemon {
        Daemon::launch(wrapper, config, extra, &[])
    }

    /// [`Daemon::start`] with `env` added to the daemon's environment.
    pub fn start_with_env(config: &str, extra: &[&str], env: &[(&str, &str)]) -> Daemon {
        Daemon::launch(&[], config, extra, env)
    }

    fn launch(wrapper: &[&str], config: &str, extra: &[&str], env: &[(&str, &str)]) -> Daemon {
        let dir = TempDir::new("daemon");
        fs::write(dir.path().join("mimeref-milter.toml"), config).expect("write config");
        let mut d = Daemon {
            dir,
            port: free_port(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            wrapper: wrapper.iter().map(|s| s.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            child: None,
            starts: 0,
        };
        d.spawn();
        d
    }

    fn spawn(&mut self) {
        assert!(self.child.is_none(), "daemon already running");
        self.starts += 1;
        let log = fs::File::create(self.dir.path().join(format!("daemon.{}.log", self.starts)))
            .expect("daemon log");
        let mut cmd = match self.wrapper.split_first() {
            Some((w, args)) => {
                let mut c = Command::new(w);
                c.args(args).arg(daemon_bin());
                c
            }
            None => Command::new(daemon_bin()),
        };
        let child = cmd
            .arg("serve")
            .arg("--config")
            .arg(self.dir.path().join("mimeref-milter.toml"))
            .arg("--socket")
            .arg(format!("inet:127.0.0.1:{}", self.port))
            .args(&self.extra)
            .env("RUST_LOG", "debug")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", daemon_bin().display()));
        let mut child = child;
        wait_listening("daemon", &mut child, self.port, WAIT, || self.log());
        self.child = Some(child);
    }

    /// SIGTERM and wait, as an admin's `systemctl stop` would.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            terminate_child(&mut c, Duration::from_secs(15));
        }
    }

    /// Start again on the same port and config.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Sends SIGTERM without waiting: the daemon drains while the test goes on.
    pub fn signal_term(&self) {
        if let Some(pid) = self.pid() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status();
        }
    }

    /// Writes `config` over the daemon's file and sends SIGHUP, as `systemctl reload`
    /// does; returns once the daemon logged that it loaded the file (panics with the log
    /// when it does not within WAIT).
    pub fn reload_with(&self, config: &str) {
        const LOADED: &str = "reload: configuration";
        let before = self.log().matches(LOADED).count();
        fs::write(self.dir.path().join("mimeref-milter.toml"), config).expect("write config");
        let pid = self.pid().expect("daemon not running");
        let st = Command::new("kill")
            .arg("-HUP")
            .arg(pid.to_string())
            .status()
            .expect("run kill");
        assert!(st.success(), "kill -HUP {pid}");
        wait_for(WAIT, || {
            (self.log().matches(LOADED).count() > before).then_some(())
        })
        .unwrap_or_else(|| panic!("no reload within {WAIT:?}:\n{}", self.log()));
    }

    /// SIGKILL, as a crash would end it: messages in flight get no reply.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            stop_child(&mut c);
        }
    }

    /// The exit status once the process has ended (reaped then), None while it runs.
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        let st = self.child.as_mut()?.try_wait().ok()??;
        self.child = None;
        Some(st)
    }

    /// Everything the daemon logged, over all its starts.
    pub fn log(&self) -> String {
        (1..=self.starts)
            .map(|n| {
                fs::read_to_string(self.dir.path().join(format!("daemon.{n}.log")))
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("\n--- restart ---\n")
    }

    pub fn postfix_spec(&self) -> String {
        format!("inet:127.0.0.1:{}", self.port)
    }

    pub fn sendmail_spec(&self) -> String {
        libmilter_spec(self.port)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `mimeref-milter fix ARGS --config CFG MSG` offline, which must succeed: the
/// message it writes.
pub fn offline_fix(args: &[&str], cfg: &str, msg: &[u8]) -> Vec<u8> {
    let dir = TempDir::new("offline");
    let (c, m) = (dir.path().join("c.toml"), dir.path().join("m.eml"));
    fs::write(&c, cfg).unwrap();
    fs::write(&m, msg).unwrap();
    let out = Command::new(daemon_bin())
        .arg("fix")
        .args(args)
        .arg("--config")
        .arg(&c)
        .arg(&m)
        .output()
        .expect("run mimeref-milter fix");
    assert!(
        out.status.success(),
        "fix {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `fix --as-milter --direction DIRECTION` offline: the message the daemon should make
/// the MTA deliver (its edits and report header).
pub fn as_milter(direction: &str, cfg: &str, msg: &[u8]) -> Vec<u8> {
    offline_fix(&["--as-milter", "--direction", direction], cfg, msg)
}

/// Waits until `child` accepts connections on 127.0.0.1:PORT. Panics, with `log()`,
/// when it exits first or does not listen within `timeout` (killed then).
pub fn wait_listening(
    what: &str,
    child: &mut Child,
    port: u16,
    timeout: Duration,
    log: impl Fn() -> String,
) {
    let end = Instant::now() + timeout;
    loop {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        if let Ok(Some(st)) = child.try_wait() {
            panic!("{what} exited at start ({st}):\n{}", log());
        }
        if Instant::now() >= end {
            stop_child(child);
            panic!(
                "{what} not listening on {port} within {timeout:?}:\n{}",
                log()
            );
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// The nested external-body fixture and what the daemon's built-in defaults deliver for
/// it (the URL quoted and %-encoded as one word; `.fixed.eml` beside it is the engine's
/// RFC 2017 fold), both with `message_id`.
pub fn nested_fixture(message_id: &str) -> (Vec<u8>, Vec<u8>) {
    (
        with_message_id(&fixture("extbody/nested-rfc822-mixed.eml"), message_id),
        with_message_id(
            &fixture("extbody/nested-rfc822-mixed.delivered"),
            message_id,
        ),
    )
}
