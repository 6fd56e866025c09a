//! A private Postfix per test, and what it delivered.

use super::*;
use crate::support::message::{header_values, lines, split_fields};

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Duration;

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
",
            queue = queue.display(),
            data = data.display(),
            log = log.display(),
            milters = cfg.milters,
            action = cfg.default_action,
        );
        // A parameter set in extra_main replaces the line above rather than following
        // it: every Postfix process warns at start about each one set twice, and with
        // maillog_file that is enough datagrams (net.unix.max_dgram_qlen is 10) to
        // leave postlogd blocked on its own socket and smtpd with it, never greeting.
        let overridden: Vec<&str> = cfg
            .extra_main
            .iter()
            .filter(|l| !l.starts_with(|c: char| c.is_whitespace() || c == '#'))
            .filter_map(|l| l.split_once('=').map(|(name, _)| name.trim()))
            .collect();
        let mut main_cf: String = main_cf
            .lines()
            .filter(|l| {
                l.split_once('=')
                    .is_none_or(|(name, _)| !overridden.contains(&name.trim()))
            })
            .map(|l| format!("{l}\n"))
            .collect();
        for l in &cfg.extra_main {
            main_cf.push_str(l);
            main_cf.push('\n');
        }
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
        // Postfix rereads a configuration file every 300 ms until its mtime is more
        // than a second before the read began ("pausing to let ... cool down" at
        // -v -v): 1.8 s at every start, and in every postconf or postmap on a fresh
        // main.cf.
        settled(&etc.join("main.cf"));
        settled(&etc.join("master.cf"));

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

/// Dates a file a minute back, so that Postfix reads it at once.
pub fn settled(path: &Path) {
    let past = std::time::SystemTime::now() - Duration::from_secs(60);
    fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(past))
        .unwrap_or_else(|e| panic!("date {} back: {e}", path.display()));
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
        log.contains(&format!(": direction=inbound(default) verdict={verdict} "))
            && !log.contains("NOQUEUE"),
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
