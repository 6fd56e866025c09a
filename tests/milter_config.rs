//! Configuration files with errors: each error is reported as FILE:LINE: message.

use std::path::PathBuf;
use std::process::ExitCode;

use mimeref_milter::config::Config;

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
    assert_eq!(
        mimeref_milter::daemon::config_check(Some(&sample)),
        ExitCode::SUCCESS
    );
    assert_eq!(
        mimeref_milter::daemon::config_check(Some(&path("bad-cidr.toml"))),
        ExitCode::from(1)
    );
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
