//! One queue id through Postfix and mimeref-milter in one mail.log: a private rsyslog
//! (Debian's package) files the `mail` facility of its socket in a file, Postfix logs
//! to it through /dev/log (a symlink to that socket, in a mount namespace of Postfix's
//! own, so the host's /dev stays as it is) and the daemon with `log_target =
//! "syslog"`. The test client sends from loopback but says, with Postfix's XCLIENT,
//! that it is a host outside: the message is inbound, as from the Internet.

#[path = "../support/mod.rs"]
mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::message::{drop_fields, fixture, with_message_id};
use support::mta::{self, Daemon, Postfix, PostfixConfig, TempDir};

const RSYSLOGD: &str = "/usr/sbin/rsyslogd";

/// rsyslog (Debian's package, installed by scripts/install-test-deps, not started
/// system-wide): missing, the test fails unless a quick run without MTAs was asked for.
fn require_rsyslog() -> bool {
    if Path::new(RSYSLOGD).exists() {
        return true;
    }
    if std::env::var("MIMEREF_SKIP_MTA").is_ok_and(|v| v == "1") {
        eprintln!("SKIPPED (rsyslog): {RSYSLOGD} missing [MIMEREF_SKIP_MTA=1]");
        return false;
    }
    panic!("{RSYSLOGD} missing\n  install with: sudo scripts/install-test-deps");
}

/// A private rsyslogd in the foreground: its own datagram socket, the mail facility
/// to `mail.log`, as Debian's rsyslog.conf files it (mail.* to /var/log/mail.log).
struct Rsyslog {
    child: Child,
}

impl Rsyslog {
    fn start(dir: &Path) -> Rsyslog {
        let work = dir.join("work");
        std::fs::create_dir_all(&work).unwrap();
        let conf = dir.join("rsyslog.conf");
        std::fs::write(
            &conf,
            format!(
                "global(workDirectory=\"{work}\")\n\
                 module(load=\"imuxsock\" SysSock.Use=\"off\")\n\
                 input(type=\"imuxsock\" Socket=\"{sock}\")\n\
                 mail.* action(type=\"omfile\" file=\"{log}\")\n",
                work = work.display(),
                sock = dir.join("log.sock").display(),
                log = dir.join("mail.log").display(),
            ),
        )
        .unwrap();
        let child = Command::new(RSYSLOGD)
            .args(["-n", "-f"])
            .arg(&conf)
            .arg("-i")
            .arg(dir.join("rsyslogd.pid"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("rsyslogd.err")).unwrap())
            .spawn()
            .expect("start rsyslogd");
        let sock = dir.join("log.sock");
        mta::wait_for(mta::WAIT, || sock.exists().then_some(())).unwrap_or_else(|| {
            panic!(
                "rsyslogd made no socket: {}",
                std::fs::read_to_string(dir.join("rsyslogd.err")).unwrap_or_default()
            )
        });
        Rsyslog { child }
    }
}

impl Drop for Rsyslog {
    fn drop(&mut self) {
        mta::terminate_child(&mut self.child, Duration::from_secs(10));
    }
}

#[test]
fn one_queue_id_follows_the_message_through_postfix_and_the_milter_in_mail_log() {
    if !mta::require_postfix() || !require_rsyslog() {
        return;
    }
    let dir = TempDir::new("syslog");
    let syslog = Rsyslog::start(dir.path());
    let sock = dir.path().join("log.sock");
    let mail_log = dir.path().join("mail.log");

    let d = Daemon::start(
        &format!(
            "log_target = \"syslog\"\nsyslog_socket = \"{}\"\n",
            sock.display()
        ),
        &[],
    );
    // Postfix's /dev/log, in its own mount namespace: an overlay of the host's /dev
    // with one symlink added.
    let ov = dir.path().join("dev-overlay");
    std::fs::create_dir_all(&ov).unwrap();
    let mut cfg = PostfixConfig::with_milter(&d.postfix_spec());
    cfg.extra_main = vec![
        // Through syslog(3) rather than Postfix's own log file.
        "maillog_file =".into(),
        // The test client may say which client it stands for, from loopback only.
        "smtpd_authorized_xclient_hosts = 127.0.0.0/8".into(),
        // Postfix relays for the client it stands for, to the sink; for the milter it
        // is a host outside (not in its trusted_networks), so the mail is inbound.
        "mynetworks = 127.0.0.0/8, 192.0.2.0/24".into(),
    ];
    cfg.namespace_setup = Some(format!(
        "mount -t tmpfs tmpfs '{ov}'\n\
         mkdir '{ov}/up' '{ov}/work'\n\
         mount -t overlay overlay -o lowerdir=/dev,upperdir='{ov}/up',workdir='{ov}/work' /dev\n\
         ln -sf '{sock}' /dev/log",
        ov = ov.display(),
        sock = sock.display()
    ));
    let pf = Postfix::start(&cfg);

    let id = "syslog-e2e.1@sender.example";
    let msg = with_message_id(
        &drop_fields(&fixture("milter/top-extbody.eml"), "Message-ID"),
        id,
    );
    let mut c = pf.smtp();
    let r = c.cmd("XCLIENT ADDR=192.0.2.10 NAME=[UNAVAILABLE]");
    assert_eq!(r.code, 220, "XCLIENT: {r}");
    c.ehlo("client.example");
    let r = c.send("alice@sender.example", &["bob@receiver.example"], &msg);
    assert!(r.is_ok(), "{r}");
    c.quit();
    pf.wait_delivered(id);

    // The queue id Postfix's cleanup gave the message, then every line naming it.
    let read = || std::fs::read_to_string(&mail_log).unwrap_or_default();
    let queue_id = mta::wait_for(mta::WAIT, || {
        read().lines().find_map(|l| {
            let (_, rest) = l.split_once("postfix/cleanup[")?;
            let (_, rest) = rest.split_once("]: ")?;
            let (qid, what) = rest.split_once(": ")?;
            what.contains(id).then(|| qid.to_string())
        })
    })
    .unwrap_or_else(|| panic!("no cleanup line for {id} in mail.log:\n{}", read()));
    let excerpt = mta::wait_for(mta::WAIT, || {
        let lines: Vec<String> = read()
            .lines()
            .filter(|l| l.contains(&format!(": {queue_id}: ")))
            .map(String::from)
            .collect();
        lines
            .iter()
            .any(|l| l.contains("postfix/qmgr[") && l.ends_with(": removed"))
            .then_some(lines)
    })
    .unwrap_or_else(|| panic!("{queue_id} not removed from the queue:\n{}", read()));
    let has = |prog: &str, what: &str| {
        excerpt
            .iter()
            .any(|l| l.contains(&format!(" {prog}[")) && l.contains(what))
    };
    assert!(
        has("postfix/smtpd", "client=unknown[192.0.2.10]"),
        "{excerpt:#?}"
    );
    assert!(has("postfix/cleanup", "message-id=<"), "{excerpt:#?}");
    assert!(
        has(
            "mimeref-milter",
            &format!(
                ": {queue_id}: direction=inbound(default) verdict=fix findings=1 rules=extbody-url-unquoted edits=1 "
            )
        ),
        "{excerpt:#?}"
    );
    assert!(has("postfix/smtp", "status=sent"), "{excerpt:#?}");
    // In mail.log order: the milter's verdict after cleanup took the message, before
    // it left.
    let at = |prog: &str| {
        excerpt
            .iter()
            .position(|l| l.contains(&format!(" {prog}[")))
            .unwrap()
    };
    assert!(at("postfix/cleanup") < at("mimeref-milter"));
    assert!(at("mimeref-milter") < at("postfix/smtp"));
    // The daemon wrote nothing to standard error: every line went to syslog.
    assert!(d.log().trim().is_empty(), "{}", d.log());
    eprintln!("mail.log, lines with {queue_id}:\n{}", excerpt.join("\n"));
    drop(pf);
    drop(syslog);
}
