//! The container image behind a real Postfix on the host: scripts/check-image builds
//! the image (scripts/build-image) and runs this test with MIMEREF_IMAGE naming it.
//! The container runs as the README says (read-only root, the configuration mounted
//! read-only, the spill directory on a tmpfs, the milter port published on
//! 127.0.0.1), its HEALTHCHECK must turn healthy, and a message with a fixable
//! finding sent to the private Postfix comes out fixed. Without MIMEREF_IMAGE (a plain
//! `cargo test`) it says SKIPPED: the image is built by scripts/check-image, not here.
#[path = "../support/mod.rs"]
mod support;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use support::message::drop_fields;
use support::mta::{self, Postfix, PostfixConfig, TempDir};

/// podman as the project's scripts run it on these machines (scripts/podman).
fn podman(args: &[&str]) -> Output {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/podman");
    Command::new(script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("scripts/podman {args:?}: {e}"))
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Removes the container when the test ends, passed or not.
struct Container(String);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = podman(&["rm", "--force", "--time", "2", &self.0]);
    }
}

impl Container {
    fn logs(&self) -> String {
        let o = podman(&["logs", &self.0]);
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    }
}

#[test]
fn postfix_on_the_host_sends_mail_through_the_container() {
    let Ok(image) = std::env::var("MIMEREF_IMAGE") else {
        eprintln!("SKIPPED (container): MIMEREF_IMAGE unset; scripts/check-image builds the image and runs this test");
        return;
    };
    if !mta::require_postfix() {
        return;
    }
    // The image's own configuration, with the direction decided as the other
    // Postfix tests decide it: everything through port 25 is inbound, and fixed.
    let dir = TempDir::new("container");
    let config = dir.path().join("mimeref-milter.toml");
    let shipped = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("packaging/container/mimeref-milter.toml"),
    )
    .unwrap();
    std::fs::write(
        &config,
        format!(
            "trusted_networks = []\noutbound_daemons = [\"{}\"]\n{shipped}",
            mta::SUBMISSION_DAEMON_NAME
        ),
    )
    .unwrap();
    // Read by the container's user: the mount keeps the host's owner and mode.
    Command::new("chmod")
        .args(["0755", dir.path().to_str().unwrap()])
        .status()
        .unwrap();
    Command::new("chmod")
        .args(["0644", config.to_str().unwrap()])
        .status()
        .unwrap();

    let name = format!("mimeref-e2e-{}", std::process::id());
    // The directory, as the README mounts it.
    let mount = format!("{}:/etc/mimeref-milter:ro", dir.path().display());
    let run = podman(&[
        "run",
        "--detach",
        "--name",
        &name,
        "--read-only",
        "--tmpfs",
        "/var/spool/mimeref-milter:rw,size=64m,mode=0700,U",
        "--volume",
        &mount,
        "--publish",
        "127.0.0.1::8897",
        &image,
    ]);
    let ctr = Container(name.clone());
    assert!(
        run.status.success(),
        "podman run: {}",
        String::from_utf8_lossy(&run.stderr)
    );

    // The image's HEALTHCHECK (mimeref-milter probe), run as podman would run it.
    let start = Instant::now();
    let health = loop {
        let o = podman(&["healthcheck", "run", &name]);
        if o.status.success() {
            break o;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "never healthy: {}\n{}",
            String::from_utf8_lossy(&o.stderr),
            ctr.logs()
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    let _ = health;
    let state = stdout(&podman(&[
        "inspect",
        "--format",
        "{{.State.Health.Status}}|{{range .State.Health.Log}}{{.ExitCode}} {{.Output}};{{end}}",
        &name,
    ]));
    eprintln!("health: {state}");
    assert!(state.starts_with("healthy|"), "{state}");
    assert!(
        state.contains("0 ready: http://127.0.0.1:9357/readyz: ready"),
        "{state}"
    );

    // A non-root user inside, as the image says.
    let pid = stdout(&podman(&["inspect", "--format", "{{.State.Pid}}", &name]));
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    eprintln!("daemon {uid}");
    assert_eq!(
        uid.split_whitespace().skip(1).collect::<Vec<_>>(),
        ["8897"; 4]
    );

    // The probe says why when it is not ready: a port nothing listens on.
    let down = podman(&[
        "exec",
        &name,
        "/usr/bin/mimeref-milter",
        "probe",
        "--socket",
        "inet:127.0.0.1:1",
    ]);
    assert_eq!(down.status.code(), Some(1), "{down:?}");
    let line = stdout(&down);
    eprintln!("probe of a closed port: {line}");
    assert!(
        line.starts_with("not ready: inet:127.0.0.1:1: cannot connect to 127.0.0.1:1"),
        "{line}"
    );

    // Postfix on the host, its milter the published port.
    let port = stdout(&podman(&["port", &name, "8897/tcp"]));
    let port = port.rsplit(':').next().unwrap().to_string();
    let spec = format!("inet:127.0.0.1:{port}");
    eprintln!("smtpd_milters = {spec}");
    let pf = Postfix::start(&PostfixConfig::with_milter(&spec));
    let (input, fixed) = mta::nested_fixture("container-1@sender.example");
    let r = pf.send(&input);
    assert_eq!(r.code, 250, "{r}\n{}", ctr.logs());
    let got = pf.wait_delivered("container-1@");
    let report = got.header("X-MIMERef");
    eprintln!("delivered with X-MIMERef: {report:?}");
    assert_eq!(report.len(), 1, "{report:?}");
    assert!(report[0].starts_with("fix;"), "{report:?}");
    assert!(report[0].contains("extbody-url-unquoted"), "{report:?}");
    let body = drop_fields(&got.without_trace(), "X-MIMERef");
    assert_eq!(body, fixed, "{}", mta::show_diff(&fixed, &body));
    let logs = ctr.logs();
    eprintln!("container log:\n{logs}");
    assert!(logs.contains("fix"), "{logs}");
    mta::assert_queue_id_in_verdict(&logs, "fix");
}
