//! Reload while connections are open, a reload that fails, and shutdown with a
//! transaction in flight.

#[path = "../support/mod.rs"]
mod support;

use std::time::Duration;

use indymilter_test::{ProtoOpts, Status};
use support::milter::*;

const REPORT: &str = "[policy.inbound]\n\"related-cid-duplicate\" = \"report\"\n";
const REJECT: &str = "[policy.inbound]\n\"related-cid-duplicate\" = \"reject\"\n";

#[tokio::test]
async fn reload_applies_to_new_connections_and_keeps_open_ones_on_their_snapshot() {
    let m = Milter::start("reload", REPORT).await;
    let cid = eml(&fixture("milter/cid-dup.eml"));
    let mut old = m.conn().await;
    connect(&mut old, "192.0.2.1", None).await;

    m.reload_with(REJECT).await;

    let mut new = m.conn().await;
    connect(&mut new, "192.0.2.1", None).await;
    let (_, st) = send(&mut new, &Envelope::default(), &cid).await;
    assert!(
        matches!(st, Status::Reject { .. }),
        "new connection: {st:?}"
    );
    // The connection opened before the reload still uses the old policy.
    let (_, st) = send(&mut old, &Envelope::default(), &cid).await;
    assert_eq!(st, Status::Accept, "open connection changed policy");
    old.close().await.unwrap();
    new.close().await.unwrap();

    // A broken file keeps the running configuration.
    m.reload_with("[policy.inbound]\n\"related-cid-duplicate\" = \"sometimes\"\n")
        .await;
    let mut c = m.conn().await;
    connect(&mut c, "192.0.2.1", None).await;
    let (_, st) = send(&mut c, &Envelope::default(), &cid).await;
    assert!(
        matches!(st, Status::Reject { .. }),
        "after failed reload: {st:?}"
    );
    c.close().await.unwrap();
    m.stop().await;
}

#[tokio::test]
async fn shutdown_lets_the_transaction_in_flight_finish() {
    let m = Milter::start("shutdown", "shutdown_timeout = 10\n").await;
    let addr = m.addr;
    let msg = eml(&fixture("milter/nested-extbody.eml"));
    let mut c = m.conn().await;
    connect(&mut c, "192.0.2.1", None).await;
    assert_eq!(c.mail(["<a@example.org>"]).await.unwrap(), Status::Continue);
    send_headers(&mut c, &msg).await;

    let run = m.begin_shutdown();
    // About elapsed time: run() must stay up for a while with a message in flight;
    // nothing to wait for but time.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !run.is_finished(),
        "run() returned with a message in flight"
    );
    // No new connections once shutdown has begun.
    let refused = tokio::time::timeout(
        Duration::from_secs(2),
        indymilter_test::TestConnection::configure()
            .exact_leading_space(true)
            .open_tcp(addr),
    )
    .await;
    assert!(
        !matches!(refused, Ok(Ok(_))),
        "a new connection was accepted during shutdown"
    );

    // The message in flight completes normally, with its fix.
    let want = accumulating(&c, ProtoOpts::NOREPLY_BODY);
    for chunk in msg.body.chunks(1000) {
        assert_eq!(c.body(chunk.to_vec()).await.unwrap(), want);
    }
    let (a, st) = c.eom().await.unwrap();
    assert_eq!(st, Status::Accept);
    assert!(replaced_body(&a).is_some());

    let res = tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("run() did not stop");
    res.unwrap().unwrap();
}

#[tokio::test]
async fn shutdown_deadline_bounds_the_wait() {
    let m = Milter::start("shutdown-deadline", "shutdown_timeout = 1\n").await;
    let mut c = m.conn().await;
    connect(&mut c, "192.0.2.1", None).await;
    assert_eq!(c.mail(["<a@example.org>"]).await.unwrap(), Status::Continue);
    let started = std::time::Instant::now();
    let run = m.begin_shutdown();
    // The MTA never finishes the message: run() still returns after the deadline.
    let res = tokio::time::timeout(Duration::from_secs(6), run)
        .await
        .expect("run() ignored its deadline");
    res.unwrap().unwrap();
    assert!(started.elapsed() >= Duration::from_millis(900));
}

/// `mimeref-milter serve` with no `--config`, reading the default path
/// /etc/mimeref-milter/mimeref-milter.toml: in a private mount namespace (as root, as
/// CI runs) that path is a bind mount of a test directory, so the real default-path
/// code runs without touching the host's /etc. After the file is moved away, and
/// again after it is broken, SIGHUP fails, is counted, and the reject policy stays:
/// a reload never falls back to the built-in defaults.
#[tokio::test]
async fn a_reload_never_falls_back_to_built_in_defaults() {
    use std::process::{Command, Stdio};
    use support::mta::{self, TempDir};

    let etc = std::path::Path::new("/etc/mimeref-milter");
    let made_etc = !etc.exists();
    std::fs::create_dir_all(etc).expect("create the mount point /etc/mimeref-milter (run as root)");
    let dir = TempDir::new("default-path");
    let conf = dir.path().join("etc");
    std::fs::create_dir(&conf).unwrap();
    let file = conf.join("mimeref-milter.toml");
    let (port, http) = (mta::free_port(), mta::free_port());
    std::fs::write(
        &file,
        format!("metrics_listen = \"127.0.0.1:{http}\"\n{REJECT}"),
    )
    .unwrap();
    let log_path = dir.path().join("daemon.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let script = format!(
        "mount --bind '{}' /etc/mimeref-milter && exec '{}' serve --socket inet:127.0.0.1:{port}",
        conf.display(),
        mta::daemon_bin().display()
    );
    // Killed whatever happens to the test: a failed assertion must not leave a daemon.
    struct Reaped(std::process::Child);
    impl Drop for Reaped {
        fn drop(&mut self) {
            mta::terminate_child(&mut self.0, Duration::from_secs(15));
        }
    }
    let child = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("unshare (util-linux)");
    let mut child = Reaped(child);
    let read_log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    mta::wait_listening("daemon", &mut child.0, port, mta::WAIT, read_log);
    assert!(
        read_log().contains("(config: /etc/mimeref-milter/mimeref-milter.toml)"),
        "started from the default path: {}",
        read_log()
    );
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let cid = eml(&fixture("milter/cid-dup.eml"));
    let verdict = || async {
        let mut c = indymilter_test::TestConnection::configure()
            .exact_leading_space(true)
            .open_tcp(addr)
            .await
            .unwrap();
        connect(&mut c, "192.0.2.1", None).await;
        let (_, st) = send(&mut c, &Envelope::default(), &cid).await;
        c.close().await.unwrap();
        st
    };
    assert!(
        matches!(verdict().await, Status::Reject { .. }),
        "{}",
        read_log()
    );

    let failed_reloads = || async {
        let (_, body) = http_get(([127, 0, 0, 1], http).into(), "/metrics").await;
        body.lines()
            .find(|l| l.starts_with("mimeref_reloads_total{result=\"failed\"}"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let hup = |n: usize| {
        Command::new("kill")
            .args(["-HUP", &child.0.id().to_string()])
            .status()
            .unwrap();
        mta::wait_for(mta::WAIT, || {
            (read_log()
                .matches("reload failed, keeping the running configuration")
                .count()
                >= n)
                .then_some(())
        })
        .unwrap_or_else(|| panic!("reload {n} did not fail: {}", read_log()));
    };
    std::fs::rename(&file, conf.join("moved-away.toml")).unwrap();
    hup(1);
    assert!(
        matches!(verdict().await, Status::Reject { .. }),
        "{}",
        read_log()
    );
    std::fs::write(
        &file,
        "[policy.inbound]\n\"related-cid-duplicate\" = \"sometimes\"\n",
    )
    .unwrap();
    hup(2);
    assert!(
        matches!(verdict().await, Status::Reject { .. }),
        "{}",
        read_log()
    );
    assert_eq!(failed_reloads().await, 2);
    let log_text = read_log();
    assert!(!log_text.contains("built-in"), "{log_text}");
    drop(child);
    if made_etc {
        let _ = std::fs::remove_dir(etc);
    }
}
