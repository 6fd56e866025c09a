//! UNIX socket handling (stale socket replaced, anything else left alone, mode applied;
//! a socket another daemon serves left alone, a socket taken away noticed) and the
//! Prometheus endpoint.

#[path = "../support/mod.rs"]
mod support;

use std::net::SocketAddr;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use indymilter_test::TestConnection;
use mimeref_milter::bind;
use mimeref_milter::{Config, SocketSpec};
use support::milter::*;
use support::mta;

fn dir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("milter-sock")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[tokio::test]
async fn unix_socket_replaces_only_a_stale_socket_and_serves() {
    let d = dir("unix");
    let path = d.join("m.sock");
    // A stale socket left by a crashed instance.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(std::fs::symlink_metadata(&path)
        .unwrap()
        .file_type()
        .is_socket());
    let spec = SocketSpec::parse(&format!("unix:{}", path.display())).unwrap();
    let cfg = Config::parse(
        &format!("socket_mode = \"0660\"\nsocket = \"{spec}\"\n"),
        "t",
    )
    .unwrap();
    let sockets = bind(&spec, &cfg).await.expect("stale socket replaced");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o660);

    let (_reload, rx) = tokio::sync::mpsc::channel(1);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(mimeref_milter::run(sockets, cfg.clone(), rx, async {
        let _ = stopped.await;
    }));
    let mut c = TestConnection::configure()
        .exact_leading_space(true)
        .open_unix(&path)
        .await
        .unwrap();
    accept_one(&mut c, "192.0.2.1", "milter/clean.eml").await;
    c.close().await.unwrap();
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();

    // A regular file in the way is never removed.
    let file = d.join("not-a-socket");
    std::fs::write(&file, b"data").unwrap();
    let spec = SocketSpec::parse(&format!("unix:{}", file.display())).unwrap();
    let Err(err) = bind(&spec, &Config::builtin()).await else {
        panic!("bind over a regular file succeeded");
    };
    assert!(err.to_string().contains("not a socket"), "{err}");
    assert_eq!(std::fs::read(&file).unwrap(), b"data");
}

#[tokio::test]
async fn prometheus_endpoint_counts_messages_and_rules() {
    let m = Milter::start_http("metrics", "").await;
    let addr = m.http.unwrap();
    let mut c = m.conn().await;
    accept_one(&mut c, "192.0.2.1", "milter/nested-extbody.eml").await;
    c.close().await.unwrap();
    m.stop().await;

    let (code, body) = http_get(addr, "/metrics").await;
    assert_eq!(code, 200);
    assert!(
        body.contains("mimeref_messages_total{direction=\"inbound\",verdict=\"fix\"} 1"),
        "{body}"
    );
    assert!(
        body.contains("mimeref_findings_total{rule=\"extbody-url-unquoted\",action=\"fix\",direction=\"inbound\"} 1"),
        "{body}"
    );
    assert!(body.contains("mimeref_processing_seconds"), "{body}");
    assert!(body.contains("mimeref_message_bytes_total"), "{body}");
}

// ---------------------------------------------------------------------------------------
// The real binary on a unix socket: a second instance, a daemon killed, a socket file
// taken away.

/// `mimeref-milter serve` on `socket` (a path, or a whole socket specification) with
/// `config`, its standard error in DIR/NAME.log; stopped on drop whatever happens to
/// the test.
struct Serving {
    child: Option<Child>,
    log: PathBuf,
}

impl Serving {
    fn spawn(d: &Path, name: &str, socket: impl AsRef<std::ffi::OsStr>, config: &str) -> Serving {
        let socket = socket.as_ref().to_string_lossy();
        let spec = if socket.starts_with('/') {
            format!("unix:{socket}")
        } else {
            socket.into_owned()
        };
        let cfg = d.join(format!("{name}.toml"));
        std::fs::write(&cfg, config).unwrap();
        let log = d.join(format!("{name}.log"));
        let child = Command::new(mta::daemon_bin())
            .arg("serve")
            .arg("--config")
            .arg(&cfg)
            .arg("--socket")
            .arg(spec)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Serving {
            child: Some(child),
            log,
        }
    }

    /// Started, and answering on `socket`.
    fn start(d: &Path, name: &str, socket: &Path, config: &str) -> Serving {
        let mut s = Serving::spawn(d, name, socket, config);
        mta::wait_for(mta::WAIT, || {
            assert!(s.alive(), "{name} exited:\n{}", s.log());
            UnixStream::connect(socket).ok().map(drop)
        })
        .unwrap_or_else(|| panic!("{name} not listening:\n{}", s.log()));
        s
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits (bounded) for it to exit on its own: its exit code.
    fn exit_code(&mut self) -> Option<i32> {
        let c = self.child.as_mut().unwrap();
        mta::wait_for(Duration::from_secs(20), || c.try_wait().unwrap())
            .unwrap_or_else(|| panic!("still running after 20 s:\n{}", self.log()))
            .code()
    }

    fn terminate(&mut self) {
        if let Some(mut c) = self.child.take() {
            if c.try_wait().unwrap().is_none() {
                mta::terminate_child(&mut c, Duration::from_secs(15));
            }
        }
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            mta::stop_child(&mut c);
        }
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// Which file is at `p`: its inode, and its birth time (a file created after another
/// was removed often gets the same inode number).
fn identity(p: &Path) -> (u64, std::time::SystemTime) {
    let m = std::fs::symlink_metadata(p).unwrap();
    (m.ino(), m.created().unwrap())
}

async fn one_message_over(socket: &Path) {
    let mut c = TestConnection::configure()
        .exact_leading_space(true)
        .open_unix(socket)
        .await
        .unwrap();
    accept_one(&mut c, "192.0.2.1", "milter/clean.eml").await;
    c.close().await.unwrap();
}

/// A second `serve` on the socket a running daemon serves (an admin trying it by
/// hand, a second unit instance) leaves it alone: it exits 69 (EX_UNAVAILABLE, as
/// OpenDKIM) and names the socket and the running daemon's pid on standard error and
/// in its log (syslog here); the first daemon keeps its socket file (the same inode)
/// and goes on serving mail.
#[tokio::test]
async fn a_second_daemon_leaves_a_served_socket_alone() {
    let d = dir("second");
    let sock = d.join("m.sock");
    let mut first = Serving::start(&d, "first", &sock, "");
    let before = identity(&sock);

    // Logging to syslog, as on a packaged host: the line goes there and to the terminal.
    let syslog = d.join("log.sock");
    let rx = std::os::unix::net::UnixDatagram::bind(&syslog).unwrap();
    rx.set_nonblocking(true).unwrap();
    let config = format!(
        "log_target = \"syslog\"\nsyslog_socket = \"{}\"\n",
        syslog.display()
    );
    let mut second = Serving::spawn(&d, "second", &sock, &config);
    let code = second.exit_code();
    let err = second.log();
    assert_eq!(code, Some(69), "{err}");
    let want = format!(
        "unix:{}: another process serves this socket (pid {}: ",
        sock.display(),
        first.pid()
    );
    assert!(err.contains(&want), "{err}");
    let mut buf = [0u8; 4096];
    let mut logged = Vec::new();
    while let Ok(n) = rx.recv(&mut buf) {
        logged.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    assert!(logged.iter().any(|l| l.contains(&want)), "{logged:#?}");

    assert!(first.alive(), "{}", first.log());
    assert_eq!(identity(&sock), before, "the socket file was replaced");
    one_message_over(&sock).await;
    // And at its own exit the first daemon removes its socket, as before.
    first.terminate();
    assert!(
        std::fs::symlink_metadata(&sock).is_err(),
        "socket left behind:\n{}",
        first.log()
    );
}

/// A socket file left by a daemon that died (SIGKILL: no chance to remove it) is
/// cleaned at the next start, which then serves.
#[tokio::test]
async fn a_socket_left_by_a_killed_daemon_is_replaced() {
    let d = dir("killed");
    let sock = d.join("m.sock");
    let mut first = Serving::start(&d, "first", &sock, "");
    let old = identity(&sock);
    first.kill();
    assert!(std::fs::symlink_metadata(&sock)
        .unwrap()
        .file_type()
        .is_socket());
    let next = Serving::start(&d, "next", &sock, "");
    assert_ne!(identity(&sock), old, "{}", next.log());
    one_message_over(&sock).await;
}

/// The socket file taken away under a running daemon: `/readyz` answers 503 and says
/// why, the gauge an alert reads turns 0, the log says it once; a socket another
/// process put at the path is left there when the daemon stops.
#[tokio::test]
async fn readyz_fails_when_the_socket_file_is_removed_or_replaced() {
    let d = dir("lost");
    let sock = d.join("m.sock");
    let http: SocketAddr = format!("127.0.0.1:{}", mta::free_port()).parse().unwrap();
    let mut daemon = Serving::start(
        &d,
        "daemon",
        &sock,
        &format!("metrics_listen = \"{http}\"\n"),
    );
    let gauge = |body: &str| {
        body.lines()
            .find_map(|l| l.strip_prefix("mimeref_milter_socket_reachable "))
            .map(str::to_string)
    };
    let (_, body) = readyz_turns(http, 200).await;
    assert_eq!(body, "ready\n");
    assert_eq!(
        gauge(&http_get(http, "/metrics").await.1).as_deref(),
        Some("1")
    );

    // Removed (renamed away: the daemon still listens, nobody can reach it).
    std::fs::rename(&sock, d.join("moved.sock")).unwrap();
    let (_, body) = readyz_turns(http, 503).await;
    assert_eq!(
        body,
        format!("not ready: milter socket {} was removed\n", sock.display())
    );
    assert_eq!(
        gauge(&http_get(http, "/metrics").await.1).as_deref(),
        Some("0")
    );
    mta::wait_for(mta::WAIT, || {
        daemon.log().contains("was removed").then_some(())
    })
    .unwrap_or_else(|| panic!("no log line:\n{}", daemon.log()));

    // Replaced by another process's socket.
    let other = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let theirs = identity(&sock);
    let (_, body) = http_get(http, "/readyz").await;
    assert_eq!(
        body,
        format!(
            "not ready: milter socket {} was replaced by another file\n",
            sock.display()
        )
    );
    daemon.terminate();
    assert_eq!(identity(&sock), theirs, "another's socket removed at exit");
    assert!(daemon.log().contains("left as it is"), "{}", daemon.log());
    drop(other);
}

/// A TCP address another process listens on stops the start the same way: exit 69, the
/// address and that process (this test) named.
#[test]
fn a_tcp_address_in_use_is_a_clear_error() {
    let d = dir("tcp");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let spec = format!("inet:{}", taken.local_addr().unwrap());
    let mut second = Serving::spawn(&d, "second", &spec, "");
    let code = second.exit_code();
    let err = second.log();
    assert_eq!(code, Some(69), "{err}");
    assert!(
        err.contains(&format!("{spec}: another process listens on this address")),
        "{err}"
    );
    assert!(
        err.contains(&format!("pid {}", std::process::id())),
        "{err}"
    );
}
