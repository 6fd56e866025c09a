//! The mimeref-milter daemon under test, and the offline commands the end-to-end tests compare with.

use super::*;
use crate::support::message::{fixture, with_message_id};

use std::fs;
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

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
        // free_port() only checked that the port was free: something else may have
        // bound it since. The daemon then exits at once with 69 (EX_UNAVAILABLE,
        // src/cli/exit.rs), and it starts again on another port, in the same log file.
        for _ in 1..MOVES {
            match d.try_spawn() {
                Ok(()) => return d,
                Err(st) if st.code() == Some(IN_USE) => {
                    d.starts -= 1;
                    d.port = free_port();
                }
                Err(st) => panic!("daemon exited at start ({st}):\n{}", d.log()),
            }
        }
        d.spawn();
        d
    }

    /// Starts the process on `self.port` and waits until it listens there; panics
    /// when it exits first.
    fn spawn(&mut self) {
        if let Err(st) = self.try_spawn() {
            panic!("daemon exited at start ({st}):\n{}", self.log());
        }
    }

    /// [`Daemon::spawn`], the exit status returned when the process exits at start.
    fn try_spawn(&mut self) -> Result<(), std::process::ExitStatus> {
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
        try_wait_listening("daemon", &mut child, self.port, WAIT, || self.log())?;
        self.child = Some(child);
        Ok(())
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

/// The exit status of `serve` when its socket is taken: sysexits(3) EX_UNAVAILABLE.
pub const IN_USE: i32 = 69;

/// How many ports [`Daemon::start`] tries before it gives up.
const MOVES: usize = 5;

/// Waits until `child` accepts connections on 127.0.0.1:PORT. Panics, with `log()`,
/// when it exits first or does not listen within `timeout` (killed then).
pub fn wait_listening(
    what: &str,
    child: &mut Child,
    port: u16,
    timeout: Duration,
    log: impl Fn() -> String,
) {
    if let Err(st) = try_wait_listening(what, child, port, timeout, &log) {
        panic!("{what} exited at start ({st}):\n{}", log());
    }
}

/// [`wait_listening`], the exit status returned when `child` exits first (a port
/// taken meanwhile: [`IN_USE`]).
pub fn try_wait_listening(
    what: &str,
    child: &mut Child,
    port: u16,
    timeout: Duration,
    log: impl Fn() -> String,
) -> Result<(), std::process::ExitStatus> {
    let end = Instant::now() + timeout;
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            return Err(st);
        }
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            // Not a process that has just exited, the port taken by what answered.
            match child.try_wait() {
                Ok(Some(st)) => return Err(st),
                _ => return Ok(()),
            }
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
