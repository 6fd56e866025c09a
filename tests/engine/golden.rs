//! Golden files: `tests/fixtures/<area>/NAME.eml` with the expected findings in
//! `NAME.findings` (sorted `PART RULE` lines) and, where a fix applies, the expected
//! output in `NAME.fixed.eml`. Optional `NAME.opts` sets engine options, one `key=value`
//! a line (`normalize_url_continuations`, `fix_signed` (`true`, `false`, `verified`),
//! `trusted_authserv_ids`, `whole_url_words`, `deny`, `allow`, `max_depth`, `max_parts`,
//! `max_message_size`, `name_insert_disposition`).
//!
//! Every fixture runs twice, as stored (LF) and with CRLF line endings. On a mismatch the
//! actual result is written beside the fixture as `NAME.failed` / `NAME.fixed.failed` (the
//! CRLF variant's as `NAME.fixed-crlf.failed`).

use crate::support::invariants::fix_and_verify;
use crate::support::message::{fixtures_dir, to_crlf};

use std::fs;
use std::path::{Path, PathBuf};

use mimeref_milter::engine::{FixSigned, Options};

fn fixtures() -> Vec<PathBuf> {
    let root = fixtures_dir();
    let mut out = Vec::new();
    let mut dirs = vec![root];
    while let Some(d) = dirs.pop() {
        for entry in fs::read_dir(&d).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "eml")
                && !p.to_string_lossy().ends_with(".fixed.eml")
                && p.with_extension("findings").exists()
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn options(eml: &Path) -> Options {
    let mut opts = Options::default();
    let Ok(text) = fs::read_to_string(eml.with_extension("opts")) else {
        return opts;
    };
    for line in text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (k, v) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("{}: bad line {line:?}", eml.display()));
        let list = || {
            v.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        };
        match k.trim() {
            "normalize_url_continuations" => opts.normalize_url_continuations = v.trim() == "true",
            "fix_signed" => {
                opts.fix_signed = match v.trim() {
                    "true" => FixSigned::Always,
                    "verified" => FixSigned::Verified,
                    _ => FixSigned::Never,
                }
            }
            "trusted_authserv_ids" => opts.trusted_authserv_ids = list(),
            "whole_url_words" => opts.whole_url_words = v.trim() == "true",
            "deny" => opts.schemes.deny = list(),
            "allow" => opts.schemes.allow = list(),
            "max_depth" => opts.limits.max_depth = v.trim().parse().unwrap(),
            "max_parts" => opts.limits.max_parts = v.trim().parse().unwrap(),
            "max_message_size" => opts.limits.max_message_size = v.trim().parse().unwrap(),
            "strip_denied" => opts.strip_denied = v.trim() == "true",
            "legacy_to_url" => opts.legacy_to_url = v.trim() == "true",
            "legacy_ftp_with_login" => opts.legacy_ftp_with_login = v.trim() == "true",
            "name_insert_disposition" => opts.name_insert_disposition = v.trim() == "true",
            // `rewrite=SCHEME|HOST_SUFFIX|TEMPLATE` (empty = any), one line per rule, in order.
            "rewrite" => {
                let f: Vec<&str> = v.trim().splitn(3, '|').collect();
                let [scheme, host, template] = f[..] else {
                    panic!("{}: rewrite=SCHEME|HOST_SUFFIX|TEMPLATE", eml.display())
                };
                opts.rewrites.push(mimeref_milter::engine::UrlRewrite {
                    name: format!("rewrite #{}", opts.rewrites.len() + 1),
                    scheme: (!scheme.is_empty()).then(|| scheme.to_string()),
                    host: (!host.is_empty())
                        .then(|| mimeref_milter::engine::HostMatch::Suffix(host.to_string())),
                    path: None,
                    template: mimeref_milter::engine::Template::parse(template).unwrap(),
                });
            }
            other => panic!("{}: unknown option {other}", eml.display()),
        }
    }
    opts
}

#[test]
fn golden_fixtures() {
    let files = fixtures();
    assert!(
        files.len() >= 10,
        "expected golden fixtures, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    for eml in &files {
        let opts = options(eml);
        let raw_lf = fs::read(eml).unwrap();
        let expected: Vec<String> = fs::read_to_string(eml.with_extension("findings"))
            .unwrap()
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect();
        let fixed_path = PathBuf::from(eml.to_string_lossy().replace(".eml", ".fixed.eml"));
        let fixed_lf = fs::read(&fixed_path).ok();
        for crlf in [false, true] {
            let variant = if crlf { "CRLF" } else { "LF" };
            let raw = if crlf {
                to_crlf(&raw_lf)
            } else {
                raw_lf.clone()
            };
            let name = format!("{} ({variant})", eml.display());
            let (fixed, analysis) = fix_and_verify(&name, &raw, &opts);
            let mut got: Vec<String> = analysis
                .findings
                .iter()
                .map(|f| format!("{} {}", f.part, f.rule))
                .collect();
            got.sort();
            let mut want = expected.clone();
            want.sort();
            if got != want {
                let detail: Vec<String> = analysis
                    .findings
                    .iter()
                    .map(|f| format!("{} {} # {}", f.part, f.rule, f.message))
                    .collect();
                fs::write(eml.with_extension("failed"), detail.join("\n") + "\n").unwrap();
                failures.push(format!(
                    "{name}: findings differ\n  want {want:?}\n  got  {got:?}"
                ));
                continue;
            }
            let want_fixed = match &fixed_lf {
                Some(f) if crlf => to_crlf(f),
                Some(f) => f.clone(),
                None => raw.clone(),
            };
            if fixed != want_fixed {
                // Each variant its own file: the LF one is what `.fixed.eml` holds.
                let ext = if crlf {
                    "fixed-crlf.failed"
                } else {
                    "fixed.failed"
                };
                fs::write(eml.with_extension(ext), &fixed).unwrap();
                failures.push(format!(
                    "{name}: fixed output differs from {}",
                    fixed_path.display()
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixtures failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}
