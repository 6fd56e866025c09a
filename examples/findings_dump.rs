//! What the engine makes of each file, printed in full, for comparing two builds: a
//! change meant only to make the engine faster must print the same (bench/same-findings).
//!
//! `findings_dump engine FILE...`: per file, the findings and edits of `check` under the
//! option sets the engine fuzzer picks from, and the bytes `fix` writes (a hash).
//! `findings_dump html FILE...`: per file, what the HTML reference scanner finds in it
//! (as the html fuzz target reads a file: lossy UTF-8, at most 64 references).

use std::hash::{Hash, Hasher};
use std::process::ExitCode;

use mimeref_milter::engine;
use mimeref_milter::engine::fuzzing::html;

#[path = "../tests/support/fuzz_options.rs"]
mod fuzz_options;
use fuzz_options::options;

/// Option sets as the engine fuzz target picks them (its first byte; 16, its CRLF
/// copy, changes no option).
const FLAG_SETS: [u8; 4] = [0, 1 | 2, 4 | 8, 32];

fn digest(bytes: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

fn dump_engine(name: &str, raw: &[u8]) {
    for flags in FLAG_SETS {
        let opts = options(flags);
        let analysis = engine::check(raw, &opts);
        println!("{name} flags={flags} {analysis:?}");
        match engine::fix(raw, &opts) {
            Ok((out, _)) => println!("{name} flags={flags} fix {:016x}", digest(&out)),
            Err(e) => println!("{name} flags={flags} fix error {e:?}"),
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((mode, files)) = args.split_first() else {
        eprintln!("usage: findings_dump engine|html FILE...");
        return ExitCode::from(2);
    };
    for file in files {
        let raw = match std::fs::read(file) {
            Ok(raw) => raw,
            Err(e) => {
                eprintln!("{file}: {e}");
                return ExitCode::from(1);
            }
        };
        match mode.as_str() {
            "engine" => dump_engine(file, &raw),
            "html" => println!(
                "{file} {:?}",
                html::scan(&String::from_utf8_lossy(&raw), 64)
            ),
            _ => {
                eprintln!("usage: findings_dump engine|html FILE...");
                return ExitCode::from(2);
            }
        }
    }
    ExitCode::SUCCESS
}
