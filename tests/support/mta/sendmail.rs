//! A private Sendmail per test, and what it queued.

use super::*;
use crate::support::message::header_values;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

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
