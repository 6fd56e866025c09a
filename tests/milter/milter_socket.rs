//! UNIX socket handling (stale socket replaced, anything else left alone, mode applied)
//! and the Prometheus endpoint.

#[path = "../support/mod.rs"]
mod support;

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::PathBuf;
use std::time::Duration;

use indymilter_test::TestConnection;
use mimeref_milter::bind;
use mimeref_milter::{Config, SocketSpec};
use support::milter::*;

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
    let mut cfg = Config::parse("socket_mode = \"0660\"\nsocket = \"unix:/x\"\n", "t").unwrap();
    let spec = SocketSpec::parse(&format!("unix:{}", path.display())).unwrap();
    cfg.listen.socket = spec.clone();
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
