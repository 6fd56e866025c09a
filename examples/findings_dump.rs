//! What the engine makes of each file, printed in full, for comparing two builds: a
//! change meant only to make the engine faster must print the same (bench/same-findings).
//!
//! `findings_dump engine FILE...`: per file, the findings and edits of `check` under the
//! option sets the engine fuzzer picks from, and the bytes `fix` writes (a hash).
//! `findings_dump html FILE...`: per file, what the HTML reference scanner finds in it
//! (as the html fuzz target reads a file: lossy UTF-8, at most 64 references).

use std::hash::{Hash, Hasher};
use std::process::ExitCode;

use mimeref_milter::engine::fuzzing::html;
use mimeref_milter::engine::{self, Limits, Options};

/// The fuzz target's option flags that change what the engine reports (1 small depth,
/// 2 few parts, 4 fix signed mail, 8 normalise URL continuations, 32 whole URL words).
const FLAG_SETS: [u8; 4] = [0, 1 | 2, 4 | 8, 32];

fn options(flags: u8) -> Options {
    Options {
        limits: Limits {
            max_depth: if flags & 1 != 0 { 4 } else { 64 },
            max_parts: if flags & 2 != 0 { 8 } else { 20_000 },
            ..Limits::default()
        },
        fix_signed: flags & 4 != 0,
        normalize_url_continuations: flags & 8 != 0,
        whole_url_words: flags & 32 != 0,
        ..Options::default()
    }
}

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
