//! The whole corpus (`tests/corpus`, 363 real messages) through the engine:
//! no panic, and every fix keeps the invariants of `fix_and_verify`. Each file
//! also runs with CRLF line endings. Figures (files, changed, findings per rule) go to
//! `target/corpus-report.txt`.

use crate::support::invariants::fix_and_verify;
use crate::support::message::to_crlf;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use mimeref_milter::engine::Options;

fn corpus_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    assert!(dir.is_dir(), "the corpus is missing at {}", dir.display());
    dir
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in fs::read_dir(&d).unwrap() {
            let p = entry.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                dirs.push(p);
            } else if !name.starts_with('.')
                && name != "INDEX.md"
                && name != "README.md"
                && name != "COPYING"
                && name != "ARTISTIC-LICENSE.txt"
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn corpus_is_analysed_and_fixed_losslessly() {
    let dir = corpus_dir();
    let files = files(&dir);
    assert!(
        files.len() == 363,
        "expected the 363 corpus messages, found {}",
        files.len()
    );
    let opts = Options::default();
    let mut per_rule: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut changed = 0;
    let mut with_findings = 0;
    let mut panics = Vec::new();
    for path in &files {
        let raw = fs::read(path).unwrap();
        let rel = path.strip_prefix(&dir).unwrap().display().to_string();
        for crlf in [false, true] {
            let input = if crlf { to_crlf(&raw) } else { raw.clone() };
            let name = format!("{rel}{}", if crlf { " (CRLF)" } else { "" });
            let res = std::panic::catch_unwind(|| fix_and_verify(&name, &input, &opts));
            match res {
                Ok((fixed, analysis)) if !crlf => {
                    if fixed != input {
                        changed += 1;
                    }
                    if !analysis.findings.is_empty() {
                        with_findings += 1;
                    }
                    for f in &analysis.findings {
                        *per_rule.entry(f.rule.id()).or_default() += 1;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    let msg = e
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()));
                    panics.push(format!("{name}: {}", msg.unwrap_or_default()));
                }
            }
        }
    }
    let mut report = format!(
        "corpus: {} files, {with_findings} with findings, {changed} changed by fix\n",
        files.len()
    );
    for (rule, n) in &per_rule {
        report.push_str(&format!("  {rule:40} {n}\n"));
    }
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    let _ = fs::create_dir_all(&target);
    let _ = fs::write(target.join("corpus-report.txt"), &report);
    println!("{report}");
    assert!(
        panics.is_empty(),
        "{} corpus files failed:\n{}",
        panics.len(),
        panics.join("\n")
    );
}
