//! systemd's notifications (`Type=notify`), without systemd: each test binds the
//! datagram socket systemd would, points `NOTIFY_SOCKET` at it, runs the real daemon
//! binary and reads what it says. READY=1 comes only once both the milter socket and
//! the metrics endpoint answer, and never when either cannot be bound; SIGHUP gives
//! RELOADING=1 (with the CLOCK_MONOTONIC reading systemd 253 wants) then READY=1, for a
//! good and for a broken file; SIGTERM gives STOPPING=1; `WATCHDOG_USEC` gives pings at
//! half the interval, and none when `WATCHDOG_PID` names another process.

#[path = "../support/mod.rs"]
mod support;

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use indymilter_test::TestConnection;
use support::milter::http_get;
use support::mta::{daemon_bin, free_port, terminate_child, TempDir};

/// The socket systemd would listen on, and what came in so far (for the report).
struct Systemd {
    sock: UnixDatagram,
    /// The value of NOTIFY_SOCKET.
    name: String,
    seen: Vec<String>,
}

impl Systemd {
    fn at_path(path: &Path) -> Systemd {
        let sock = UnixDatagram::bind(path).expect("bind the notify socket");
        Systemd::with(sock, path.display().to_string())
    }

    fn abstract_name(name: &str) -> Systemd {
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let sock = UnixDatagram::bind_addr(&addr).expect("bind the abstract notify socket");
        Systemd::with(sock, format!("@{name}"))
    }

    fn with(sock: UnixDatagram, name: String) -> Systemd {
        Systemd {
            sock,
            name,
            seen: Vec::new(),
        }
    }

    /// The next datagram within `wait`, or None.
    fn next(&mut self, wait: Duration) -> Option<String> {
        self.sock.set_read_timeout(Some(wait)).unwrap();
        let mut buf = [0u8; 4096];
        let n = self.sock.recv(&mut buf).ok()?;
        let text = String::from_utf8_lossy(&buf[..n]).into_owned();
        self.seen.push(text.clone());
        Some(text)
    }

    /// The next datagram that is not a watchdog ping; panics after 10 s.
    fn expect(&mut self, what: &str) -> String {
        let end = Instant::now() + Duration::from_secs(10);
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            match self.next(left) {
                Some(m) if m == "WATCHDOG=1\n" => continue,
                Some(m) => return m,
                None => break,
            }
        }
        panic!("no {what} within 10 s; received so far: {:?}", self.seen);
    }

    fn report(&self, title: &str) {
        eprintln!("--- {title}: NOTIFY_SOCKET={}", self.name);
        for m in &self.seen {
            eprintln!("    {}", m.trim_end().replace('\n', " | "));
        }
    }
}

/// The real daemon with `config`, the milter socket on `port`, `env` added.
fn spawn(dir: &Path, config: &str, port: u16, env: &[(&str, &str)]) -> Child {
    let cfg = dir.join("mimeref-milter.toml");
    std::fs::write(&cfg, config).unwrap();
    let log = std::fs::File::create(dir.join("daemon.log")).unwrap();
    Command::new(daemon_bin())
        .arg("serve")
        .arg("--config")
        .arg(&cfg)
        .arg("--socket")
        .arg(format!("inet:127.0.0.1:{port}"))
        .env("RUST_LOG", "debug")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", daemon_bin().display()))
}

fn log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("daemon.log")).unwrap_or_default()
}

fn kill(child: &Child, signal: &str) {
    let st = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(st.success(), "kill -{signal}");
}

/// Waits (bounded) for `child` to exit.
fn exit_status(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let end = Instant::now() + within;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the daemon did not exit within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn monotonic_usec() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000 + t.tv_nsec as u64 / 1000
}

fn field<'a>(message: &'a str, key: &str) -> Option<&'a str> {
    message
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
}

/// The milter socket answers a real negotiation, and the endpoint says ready.
async fn both_answer(port: u16, http: u16) {
    let c = tokio::time::timeout(
        Duration::from_secs(5),
        TestConnection::configure().open_tcp(("127.0.0.1", port)),
    )
    .await
    .expect("negotiation within 5 s")
    .expect("milter negotiation");
    c.close().await.unwrap();
    let (code, body) = http_get(([127, 0, 0, 1], http).into(), "/readyz").await;
    assert!(code == 200 && body.starts_with("ready"), "{code} {body:?}");
}

fn notify_dir(tag: &str) -> (TempDir, PathBuf) {
    let dir = TempDir::new(tag);
    let path = dir.path().join("notify");
    (dir, path)
}

#[tokio::test]
async fn ready_once_both_sockets_answer_then_reload_and_stop() {
    let (dir, path) = notify_dir("notify-path");
    let mut systemd = Systemd::at_path(&path);
    let (port, http) = (free_port(), free_port());
    let config = format!("metrics_listen = \"127.0.0.1:{http}\"\n");
    let mut child = spawn(
        dir.path(),
        &config,
        port,
        &[("NOTIFY_SOCKET", &systemd.name)],
    );

    // The first thing said is READY=1, and at that moment both sockets answer.
    let ready = systemd.expect("READY=1");
    both_answer(port, http).await;
    assert!(
        ready.starts_with("READY=1\n"),
        "{ready:?}\n{}",
        log(dir.path())
    );
    assert_eq!(
        field(&ready, "STATUS"),
        Some(format!("listening on inet:127.0.0.1:{port}, metrics on 127.0.0.1:{http}").as_str())
    );

    // A reload that loads the file: RELOADING=1 stamped between the signal and now,
    // then READY=1.
    std::fs::write(
        dir.path().join("mimeref-milter.toml"),
        format!("{config}[policy.inbound]\n\"related-*\" = \"report\"\n"),
    )
    .unwrap();
    let before = monotonic_usec();
    kill(&child, "HUP");
    let reloading = systemd.expect("RELOADING=1");
    let after = monotonic_usec();
    assert!(reloading.starts_with("RELOADING=1\n"), "{reloading:?}");
    let stamp: u64 = field(&reloading, "MONOTONIC_USEC")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no MONOTONIC_USEC: {reloading:?}"));
    assert!(
        (before..=after).contains(&stamp),
        "MONOTONIC_USEC={stamp} not between {before} and {after}"
    );
    let ready = systemd.expect("READY=1 after the reload");
    assert!(ready.starts_with("READY=1\n"), "{ready:?}");
    assert!(
        field(&ready, "STATUS").is_some_and(|s| s.ends_with("; configuration reloaded")),
        "{ready:?}"
    );
    assert!(
        log(dir.path()).contains("reload: configuration"),
        "{}",
        log(dir.path())
    );

    // A broken file: the reload fails, the running configuration serves, and systemd
    // hears the reload is over all the same.
    std::fs::write(
        dir.path().join("mimeref-milter.toml"),
        "max_connections = \"many\"\n",
    )
    .unwrap();
    kill(&child, "HUP");
    assert!(systemd.expect("RELOADING=1").starts_with("RELOADING=1\n"));
    let ready = systemd.expect("READY=1 after the failed reload");
    assert!(
        field(&ready, "STATUS").is_some_and(|s| s.contains("last reload failed")),
        "{ready:?}"
    );
    both_answer(port, http).await;

    kill(&child, "TERM");
    let stopping = systemd.expect("STOPPING=1");
    assert!(stopping.starts_with("STOPPING=1\n"), "{stopping:?}");
    let st = exit_status(&mut child, Duration::from_secs(15));
    assert!(st.success(), "{st}\n{}", log(dir.path()));
    assert_eq!(
        systemd.next(Duration::from_millis(200)),
        None,
        "nothing after STOPPING=1"
    );
    systemd.report("path socket");
}

#[tokio::test]
async fn an_abstract_socket_and_the_watchdog() {
    let dir = TempDir::new("notify-abstract");
    let mut systemd = Systemd::abstract_name(&format!("mimeref-notify-{}", std::process::id()));
    let port = free_port();
    // 300 ms: a ping every 150 ms.
    let mut child = spawn(
        dir.path(),
        "",
        port,
        &[
            ("NOTIFY_SOCKET", &systemd.name),
            ("WATCHDOG_USEC", "300000"),
        ],
    );
    let ready = systemd.expect("READY=1");
    assert!(
        ready.starts_with("READY=1\n"),
        "{ready:?}\n{}",
        log(dir.path())
    );
    let start = Instant::now();
    let mut pings = 0;
    while start.elapsed() < Duration::from_millis(1500) {
        match systemd.next(Duration::from_millis(500)) {
            Some(m) if m == "WATCHDOG=1\n" => pings += 1,
            Some(m) => panic!("unexpected {m:?}"),
            None => break,
        }
    }
    // 10 due in 1.5 s; a loaded machine may delay a few, never leave out most.
    assert!(pings >= 6, "{pings} watchdog pings in 1.5 s");
    kill(&child, "TERM");
    assert!(systemd.expect("STOPPING=1").starts_with("STOPPING=1\n"));
    assert!(exit_status(&mut child, Duration::from_secs(15)).success());
    systemd.report("abstract socket, WATCHDOG_USEC=300000");

    // WATCHDOG_PID of another process: the variables were not meant for this one.
    let dir = TempDir::new("notify-other-pid");
    let port = free_port();
    let mut child = spawn(
        dir.path(),
        "",
        port,
        &[
            ("NOTIFY_SOCKET", &systemd.name),
            ("WATCHDOG_USEC", "300000"),
            ("WATCHDOG_PID", "1"),
        ],
    );
    assert!(systemd.expect("READY=1").starts_with("READY=1\n"));
    assert_eq!(systemd.next(Duration::from_millis(800)), None, "no ping");
    terminate_child(&mut child, Duration::from_secs(15));
}

/// A socket that cannot be bound ends the daemon before READY=1: systemd sees the
/// start fail rather than a service that is up without its socket.
#[test]
fn no_ready_when_a_socket_cannot_be_bound() {
    for taken in ["milter", "metrics"] {
        let (dir, path) = notify_dir("notify-taken");
        let mut systemd = Systemd::at_path(&path);
        let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let busy_port = busy.local_addr().unwrap().port();
        let (port, http) = match taken {
            "milter" => (busy_port, free_port()),
            _ => (free_port(), busy_port),
        };
        let config = format!("metrics_listen = \"127.0.0.1:{http}\"\n");
        let mut child = spawn(
            dir.path(),
            &config,
            port,
            &[("NOTIFY_SOCKET", &systemd.name)],
        );
        let st = exit_status(&mut child, Duration::from_secs(15));
        assert!(!st.success(), "{taken} port taken, yet the daemon ran");
        let said = systemd.next(Duration::from_millis(100));
        assert_eq!(said, None, "{taken} port taken:\n{}", log(dir.path()));
        assert!(
            log(dir.path()).contains(&busy_port.to_string()),
            "the error names the port: {}",
            log(dir.path())
        );
    }
}
