//! The unix socket with Postfix as Debian runs it: smtpd and cleanup chrooted in the
//! queue directory (`chroot = y` in master.cf), the socket in a directory of its own
//! there, written in main.cf as the chrooted smtpd sees it, and the daemon running
//! as an unprivileged user whose supplementary group `postfix` lets it give the socket
//! that group (what the package's postinst sets up for `mimeref-milter`; `nobody`
//! stands in for it here). Also what `config-check` says when that membership or the
//! directory's permissions are missing: the two mistakes that made every message get
//! a 451 with the setup the man page used to document.
//!
//! Needs root and Postfix: `sudo scripts/install-test-deps`.

#[path = "../support/mod.rs"]
mod support;

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::message::drop_fields;
use support::mta::{
    self, as_milter, chmod, chown, daemon_bin, free_port, nested_fixture, run_bounded,
    terminate_child, Postfix, PostfixConfig, Smtp, TempDir, WAIT,
};

/// main.cf's milter address: the socket's path inside the chroot.
const IN_CHROOT: &str = "unix:/mimeref-milter/mimeref-milter.sock";

/// Loopback clients would be outbound through the default trusted_networks.
const POLICY: &str = "trusted_networks = []\n";

/// How the daemon's user is run: `nobody` with `groups` as its supplementary groups
/// (empty: none).
fn as_daemon_user(groups: &str) -> Vec<String> {
    let groups = if groups.is_empty() {
        "--clear-groups".to_string()
    } else {
        format!("--groups={groups}")
    };
    [
        "setpriv",
        "--reuid=nobody",
        "--regid=nogroup",
        &groups,
        "--",
    ]
    .map(String::from)
    .to_vec()
}

/// The daemon binary where `nobody` may run it (the build tree may be private).
fn binary(dir: &Path) -> PathBuf {
    let bin = dir.join("mimeref-milter");
    std::fs::copy(daemon_bin(), &bin).expect("copy the daemon binary");
    chmod(&bin, 0o755);
    bin
}

/// The socket settings of the documented setup, for a socket in `sock_dir`.
fn socket_config(sock_dir: &Path) -> String {
    format!(
        r#"socket = "unix:{}/mimeref-milter.sock"
socket_mode = "0660"
socket_group = "postfix"
{POLICY}"#,
        sock_dir.display()
    )
}

/// `config-check` as the daemon's user with `groups`: (ok, stdout, stderr).
fn config_check(bin: &Path, cfg: &Path, groups: &str) -> (bool, String, String) {
    let argv = as_daemon_user(groups);
    run_bounded(
        Command::new(&argv[0])
            .args(&argv[1..])
            .arg(bin)
            .arg("config-check")
            .arg("--config")
            .arg(cfg),
        WAIT,
    )
}

/// A directory for the socket as postinst makes it: the daemon's user, group postfix,
/// 0750.
fn socket_dir(path: &Path) {
    std::fs::create_dir_all(path).unwrap();
    chown(path, "nobody:postfix");
    chmod(path, 0o750);
}

#[test]
fn config_check_catches_a_group_the_user_cannot_use_and_a_directory_it_cannot_enter() {
    if !mta::require_postfix() {
        return;
    }
    let dir = TempDir::new("sockcheck");
    let bin = binary(dir.path());
    let sock_dir = dir.path().join("spool/mimeref-milter");
    socket_dir(&sock_dir);
    let cfg = dir.path().join("mimeref-milter.toml");
    std::fs::write(&cfg, socket_config(&sock_dir)).unwrap();
    chmod(&cfg, 0o644);

    // As the package sets it up: a member of group postfix.
    let (ok, out, err) = config_check(&bin, &cfg, "postfix");
    assert!(ok, "{out}{err}");
    assert_eq!(out, format!("{}: OK\n", cfg.display()));

    // Not a member: chown(2) to postfix would fail with EPERM when the daemon binds.
    let (ok, _, err) = config_check(&bin, &cfg, "");
    assert!(
        !ok,
        "config-check passed a group the user cannot give the socket"
    );
    let want = format!(
        "{}:3: socket_group \"postfix\": user nobody is not a member of group postfix, so \
         the socket cannot be given that group (chown: Operation not permitted)",
        cfg.display()
    );
    assert!(err.starts_with(&want), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    // A member, but the directory keeps the group out: the MTA would get EACCES.
    chown(&sock_dir, "nobody:nogroup");
    let (ok, _, err) = config_check(&bin, &cfg, "postfix");
    assert!(
        !ok,
        "config-check passed a directory group postfix cannot enter"
    );
    let want = format!(
        "{}:1: group postfix cannot enter {} (0750 nobody:nogroup), so the MTA cannot \
         reach the socket",
        cfg.display(),
        sock_dir.display()
    );
    assert!(err.starts_with(&want), "{err}");

    // A set-group-ID directory of group postfix, as the package makes it: the socket
    // gets the group from it, so the daemon needs no membership and changes nothing.
    chown(&sock_dir, "nobody:postfix");
    chmod(&sock_dir, 0o2750);
    let (ok, out, err) = config_check(&bin, &cfg, "");
    assert!(ok, "{out}{err}");
    let socket = sock_dir.join("mimeref-milter.sock");
    let d = UnixDaemon::start(&socket_config(&sock_dir), &socket, "");
    let m = std::fs::metadata(&socket).unwrap();
    assert_eq!(Some(m.gid()), group_id("postfix"));
    assert_eq!(m.permissions().mode() & 0o777, 0o660);
    drop(d);
    chmod(&sock_dir, 0o750);

    // A mode that keeps the group from connecting.
    std::fs::write(
        &cfg,
        socket_config(&sock_dir).replace("\"0660\"", "\"0640\""),
    )
    .unwrap();
    let (ok, _, err) = config_check(&bin, &cfg, "postfix");
    assert!(!ok);
    assert!(
        err.starts_with(&format!(
            "{}:2: socket_mode \"0640\" with socket_group \"postfix\"",
            cfg.display()
        )),
        "{err}"
    );
}

/// The daemon run as its user on a unix socket, until dropped.
struct UnixDaemon {
    dir: TempDir,
    child: Child,
}

impl UnixDaemon {
    /// As `nobody` with the supplementary `groups`, after config-check as that user.
    fn start(config: &str, socket: &Path, groups: &str) -> UnixDaemon {
        let dir = TempDir::new("chroot-daemon");
        let bin = binary(dir.path());
        let cfg = dir.path().join("mimeref-milter.toml");
        std::fs::write(&cfg, config).unwrap();
        chmod(&cfg, 0o644);
        let (ok, out, err) = config_check(&bin, &cfg, groups);
        assert!(ok, "config-check as the daemon's user: {out}{err}");
        let log = std::fs::File::create(dir.path().join("daemon.log")).unwrap();
        let argv = as_daemon_user(groups);
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .arg(&bin)
            .arg("serve")
            .arg("--config")
            .arg(&cfg)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start the daemon");
        let end = Instant::now() + WAIT;
        while std::os::unix::net::UnixStream::connect(socket).is_err() {
            if let Ok(Some(st)) = child.try_wait() {
                panic!("daemon exited ({st}):\n{}", read_log(dir.path()));
            }
            assert!(Instant::now() < end, "no socket:\n{}", read_log(dir.path()));
            std::thread::sleep(Duration::from_millis(50));
        }
        UnixDaemon { dir, child }
    }

    fn log(&self) -> String {
        read_log(self.dir.path())
    }
}

impl Drop for UnixDaemon {
    fn drop(&mut self) {
        terminate_child(&mut self.child, Duration::from_secs(15));
    }
}

/// Whether `child` exited successfully within `limit` (killed otherwise).
fn exit_within(child: &mut Child, limit: Duration) -> bool {
    let end = Instant::now() + limit;
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            return st.success();
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("daemon.log")).unwrap_or_default()
}

#[test]
fn chrooted_smtpd_reaches_the_socket_in_its_queue_directory() {
    if !mta::require_postfix() {
        return;
    }
    // A second smtpd, also chrooted, given the socket's path as seen from outside the
    // chroot: the form that does not work there.
    let outside_port = free_port();
    let mut pc = PostfixConfig::with_milter(IN_CHROOT);
    pc.chroot = true;
    // Local submission goes through cleanup, also chrooted, with the same path.
    pc.extra_main
        .push("non_smtpd_milters = $smtpd_milters".into());
    // The fixture's 8-bit header would make sendmail(1) mail need SMTPUTF8, which
    // smtp-sink does not offer.
    pc.extra_main
        .push("smtputf8_autodetect_classes = verify".into());
    pc.extra_master = vec![format!(
        "127.0.0.1:{outside_port} inet n - y - - smtpd\n  \
         -o syslog_name=postfix/outside\n  \
         -o smtpd_milters=unix:$queue_directory/mimeref-milter/mimeref-milter.sock"
    )];
    let pf = Postfix::start(&pc);
    let sock_dir = pf.queue().join("mimeref-milter");
    socket_dir(&sock_dir);
    let socket = sock_dir.join("mimeref-milter.sock");
    let d = UnixDaemon::start(&socket_config(&sock_dir), &socket, "postfix");

    // The socket as the MTA needs it: group postfix, which may write to it.
    let m = std::fs::metadata(&socket).unwrap();
    assert!(m.file_type().is_socket());
    assert_eq!(m.permissions().mode() & 0o777, 0o660);
    assert_eq!(Some(m.gid()), group_id("postfix"));

    let (input, _) = nested_fixture("chroot-1@sender.example");
    let want = as_milter("inbound", POLICY, &input);
    assert_ne!(want, input, "the fixture needs a fix");
    let r = pf.send(&input);
    assert_eq!(r.code, 250, "{r}\n{}\n{}", pf.log(), d.log());
    let got = pf.wait_delivered("chroot-1@").without_trace();
    assert_eq!(got, want, "{}\n{}", mta::show_diff(&want, &got), d.log());
    mta::assert_queue_id_in_verdict(&d.log(), "fix");

    // sendmail(1): postdrop, pickup, then cleanup with non_smtpd_milters.
    let (input, _) = nested_fixture("chroot-3@sender.example");
    let want = as_milter("inbound", POLICY, &input);
    let mut sendmail = Command::new(Path::new(mta::SBIN).join("sendmail"))
        .arg("-C")
        .arg(pf.etc())
        .args(["-f", "alice@sender.example", "bob@receiver.example"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run Postfix's sendmail");
    {
        use std::io::Write;
        let mut w = sendmail.stdin.take().unwrap();
        w.write_all(&input).unwrap();
    }
    assert!(exit_within(&mut sendmail, WAIT), "sendmail(1) failed");
    // Postfix adds its Received: (from userid 0) and, the fixture having none, a Date:.
    let got = pf.wait_delivered("chroot-3@").message;
    let got = drop_fields(&drop_fields(&got, "Received"), "Date");
    assert_eq!(got, want, "{}\n{}", mta::show_diff(&want, &got), d.log());
    assert_eq!(
        d.log()
            .matches(": direction=inbound(default) verdict=fix")
            .count(),
        2,
        "{}",
        d.log()
    );

    // The path outside the chroot does not exist inside it: the milter is unreachable
    // and milter_default_action answers.
    let (input, _) = nested_fixture("chroot-2@sender.example");
    let mut c = Smtp::connect(outside_port);
    assert_eq!(c.greeting.code, 220, "{}", c.greeting);
    c.ehlo("client.example");
    let r = c.send("alice@sender.example", &["bob@receiver.example"], &input);
    c.quit();
    assert_eq!(r.code, 451, "{r}");
    let log = pf.log();
    let refused = format!(
        "connect to Milter service unix:{}: No such file or directory",
        socket.display()
    );
    assert!(log.contains(&refused), "{log}");
    eprintln!(
        "--- Postfix log (smtpd chroot = y):\n{}\n--- daemon log:\n{}",
        log.lines()
            .filter(|l| l.contains("smtpd") || l.contains("cleanup"))
            .collect::<Vec<_>>()
            .join("\n"),
        d.log()
    );
}

/// The numeric id of group `name`, as the system's group database gives it.
fn group_id(name: &str) -> Option<u32> {
    let out = std::process::Command::new("getent")
        .args(["group", name])
        .output()
        .ok()?;
    let line = String::from_utf8(out.stdout).ok()?;
    line.trim().split(':').nth(2)?.parse().ok()
}
