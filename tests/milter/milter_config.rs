//! Configuration files with errors: each error is reported as FILE:LINE: message.

use std::path::PathBuf;

use mimeref_milter::Config;

fn path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/milter/config")
        .join(name)
}

fn errors(name: &str) -> Vec<String> {
    match Config::load(Some(&path(name))) {
        Ok(_) => panic!("{name} accepted"),
        Err(e) => e.to_string().lines().map(str::to_string).collect(),
    }
}

fn prefix(name: &str, line: usize) -> String {
    format!("{}:{line}: ", path(name).display())
}

#[test]
fn unknown_key() {
    let e = errors("unknown-key.toml");
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].starts_with(&prefix("unknown-key.toml", 5)), "{e:?}");
    assert!(e[0].contains("headr"), "{e:?}");
}

#[test]
fn wrong_type() {
    let e = errors("wrong-type.toml");
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].starts_with(&prefix("wrong-type.toml", 3)), "{e:?}");
}

#[test]
fn bad_glob() {
    let e = errors("bad-glob.toml");
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(
        e[0].starts_with(&prefix("bad-glob.toml", 3)) && e[0].contains("extbody-[url]"),
        "{e:?}"
    );
    assert!(
        e[1].starts_with(&prefix("bad-glob.toml", 4)) && e[1].contains("matches no rule"),
        "{e:?}"
    );
}

#[test]
fn bad_cidr() {
    let e = errors("bad-cidr.toml");
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(
        e[0].starts_with(&prefix("bad-cidr.toml", 3)) && e[0].contains("10.0.0.0/40"),
        "{e:?}"
    );
    assert!(
        e[1].starts_with(&prefix("bad-cidr.toml", 4)) && e[1].contains("not-a-net"),
        "{e:?}"
    );
}

#[test]
fn missing_named_file_is_an_error_and_config_check_exit_codes() {
    let e = errors("no-such-file.toml");
    assert!(e[0].contains("cannot read"), "{e:?}");
    let sample = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config/mimeref-milter.toml");
    assert_eq!(config_check(&sample), Some(0));
    assert_eq!(config_check(&path("bad-cidr.toml")), Some(1));
}

#[test]
fn every_error_of_a_file_is_reported_in_line_order() {
    let name = "many-errors.toml";
    let e = errors(name);
    let lines: Vec<usize> = e
        .iter()
        .map(|l| {
            let rest = l
                .strip_prefix(&format!("{}:", path(name).display()))
                .unwrap_or_else(|| panic!("{l}"));
            rest.split(':').next().unwrap().parse().unwrap()
        })
        .collect();
    assert_eq!(lines, [2, 3, 6, 11, 14, 15, 17], "{e:#?}");
    assert!(e[1].contains("log_levl"), "{e:?}");
    assert!(e[4].contains("rejekt"), "{e:?}");
    assert!(e[6].contains("nonsense"), "{e:?}");
}

/// Writes `text` as a config file of its own and returns its errors, one per line.
fn errors_of(name: &str, text: &str) -> (PathBuf, Vec<String>) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("milter-config");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    match Config::load(Some(&p)) {
        Ok(_) => panic!("{name} accepted"),
        Err(e) => (p, e.to_string().lines().map(str::to_string).collect()),
    }
}

fn assert_one_error(name: &str, text: &str, line: usize, what: &str) {
    let (p, e) = errors_of(name, text);
    assert_eq!(e.len(), 1, "{e:?}");
    let prefix = format!("{}:{line}: ", p.display());
    assert!(e[0].starts_with(&prefix) && e[0].contains(what), "{e:?}");
    assert_eq!(config_check(&p), Some(1));
}

/// The whole error line: the admin reads the bound that applies to this file, so the
/// number in it has to be this file's max_message_size, not the default's.
fn assert_exact_error(name: &str, text: &str, line: usize, message: &str) {
    let (p, e) = errors_of(name, text);
    assert_eq!(e, [format!("{}:{line}: {message}", p.display())]);
    assert_eq!(config_check(&p), Some(1));
}

#[test]
fn spill_threshold_out_of_range() {
    assert_exact_error(
        "spill-zero.toml",
        "[limits]\nspill_threshold = 0\n",
        2,
        "[limits] spill_threshold = 0: must be between 1 and max_message_size (67108864)",
    );
    assert_exact_error(
        "spill-negative-small-max.toml",
        "[limits]\nmax_message_size = 1048576\nspill_threshold = -1\n",
        3,
        "[limits] spill_threshold = -1: must be between 1 and max_message_size (1048576)",
    );
    assert_exact_error(
        "spill-over-max.toml",
        "[limits]\nmax_message_size = 1048576\n\nspill_threshold = 2097152\n",
        4,
        "[limits] spill_threshold = 2097152 is larger than max_message_size (1048576): no \
         message could reach it; set it to max_message_size to keep every message in memory",
    );
}

#[test]
fn spill_directory_missing_not_a_directory_or_relative() {
    assert_one_error(
        "spill-missing.toml",
        "# spill\n[limits]\nspill_directory = \"/nonexistent/mimeref-spill\"\n",
        3,
        "\"/nonexistent/mimeref-spill\": no such directory",
    );
    let file = path("unknown-key.toml");
    assert_one_error(
        "spill-file.toml",
        &format!("[limits]\nspill_directory = \"{}\"\n", file.display()),
        2,
        "not a directory",
    );
    assert_one_error(
        "spill-relative.toml",
        "[limits]\nspill_directory = \"spool\"\n",
        2,
        "not an absolute path",
    );
}

#[test]
fn spill_directory_not_writable() {
    use std::os::unix::fs::PermissionsExt;
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("milter-config/read-only");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
    // Root writes through permission bits; sysfs refuses new files even to root.
    let probe = dir.join("probe");
    let dir = if std::fs::write(&probe, b"").is_ok() {
        let _ = std::fs::remove_file(&probe);
        PathBuf::from("/sys/fs")
    } else {
        dir
    };
    assert!(dir.is_dir(), "{}", dir.display());
    assert_one_error(
        "spill-read-only.toml",
        &format!("[limits]\nspill_directory = \"{}\"\n", dir.display()),
        2,
        "cannot create a file in it",
    );
}

#[test]
fn spill_keys_accepted() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("milter-config/spool");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.with_extension("toml");
    std::fs::write(
        &p,
        format!(
            "[limits]\nspill_threshold = 65536\nspill_directory = \"{}\"\n",
            dir.display()
        ),
    )
    .unwrap();
    let c = Config::load(Some(&p)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.limits().spill_threshold, 65536);
    assert_eq!(c.limits().spill_directory, dir);
    // The probe file config-check creates does not stay behind.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

/// The exit status of `mimeref-milter config-check --config FILE`.
fn config_check(file: &std::path::Path) -> Option<i32> {
    std::process::Command::new(env!("CARGO_BIN_EXE_mimeref-milter"))
        .arg("config-check")
        .arg("--config")
        .arg(file)
        .output()
        .expect("run mimeref-milter config-check")
        .status
        .code()
}

/// `log_target = "syslog"` with no socket at `syslog_socket` is valid (a syslog daemon
/// may start later) but sends every line to standard error: `config-check` says so
/// before the admin restarts on it, and says nothing when the socket is there.
#[test]
fn config_check_warns_of_a_missing_syslog_socket() {
    let dir = std::env::temp_dir().join(format!("mimeref-syslog-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("log");
    let file = dir.join("c.toml");
    std::fs::write(
        &file,
        format!(
            "log_target = \"syslog\"\nsyslog_socket = \"{}\"\n",
            sock.display()
        ),
    )
    .unwrap();
    let run = || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mimeref-milter"))
            .args(["config-check", "--config"])
            .arg(&file)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        String::from_utf8(out.stderr).unwrap()
    };
    let warned = format!("warning: syslog_socket {}: no socket there", sock.display());
    let stderr = run();
    assert!(stderr.contains(&warned), "{stderr}");
    let _listener = std::os::unix::net::UnixDatagram::bind(&sock).unwrap();
    let stderr = run();
    assert!(!stderr.contains("syslog_socket"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `serve` on a configuration it cannot load stops before it binds anything, with the
/// error (FILE:LINE) on standard error and sysexits' EX_CONFIG, 78: the unit's
/// RestartPreventExitStatus= names it, so systemd leaves the unit failed instead of
/// starting it again every RestartSec=. `config-check` says 1 for the same file.
#[test]
fn serve_exits_78_on_a_configuration_it_cannot_load() {
    let dir = std::env::temp_dir().join(format!("mimeref-serve-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("bad.toml");
    std::fs::write(&p, "socket = \"inet:127.0.0.1:0\"\nmax_depth = \"deep\"\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mimeref-milter"))
        .arg("serve")
        .arg("--config")
        .arg(&p)
        .output()
        .expect("run mimeref-milter serve");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{err}");
    assert!(err.contains(&format!("{}:2:", p.display())), "{err}");
    assert_eq!(config_check(&p), Some(1));
    std::fs::remove_dir_all(&dir).ok();
}
