//! The benchmark messages outside criterion.
//!
//! `bench_msgs write DIR [--big]`: writes every message as DIR/NAME.eml (the end-to-end
//! bench sends these through Postfix).
//! `bench_msgs check NAME [N] [fix]`: runs the engine N times on one message, for
//! `valgrind --tool=callgrind` or `perf record` (repeatable instruction counts).

use std::process::ExitCode;

use mimeref_milter::engine::{self, FixSigned, Limits, Options};

#[path = "../benches/gen/mod.rs"]
mod gen;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("write") => {
            let Some(dir) = args.get(1) else {
                eprintln!("usage: bench_msgs write DIR [--big]");
                return ExitCode::from(2);
            };
            let big = args.iter().any(|a| a == "--big");
            // `--only NAME[,NAME]`: just those (e.g. attach-20m for the memory bench).
            let only: Option<Vec<&str>> = args
                .iter()
                .position(|a| a == "--only")
                .and_then(|i| args.get(i + 1))
                .map(|l| l.split(',').collect());
            if let Some(names) = only {
                for name in names {
                    let Some(raw) = gen::named(name) else {
                        eprintln!("no message named {name}");
                        return ExitCode::from(2);
                    };
                    let path = format!("{dir}/{name}.eml");
                    if let Err(e) = std::fs::write(&path, &raw) {
                        eprintln!("{path}: {e}");
                        return ExitCode::from(1);
                    }
                    println!("{path} {}", raw.len());
                }
                return ExitCode::SUCCESS;
            }
            if let Err(e) = std::fs::create_dir_all(dir) {
                eprintln!("{dir}: {e}");
                return ExitCode::from(1);
            }
            for &name in gen::NAMES {
                if name == "attach-200m" && !big {
                    continue;
                }
                let Some(raw) = gen::named(name) else {
                    continue;
                };
                let path = format!("{dir}/{name}.eml");
                if let Err(e) = std::fs::write(&path, &raw) {
                    eprintln!("{path}: {e}");
                    return ExitCode::from(1);
                }
                println!("{path} {}", raw.len());
            }
            ExitCode::SUCCESS
        }
        Some("check") => {
            let name = args.get(1).map(String::as_str).unwrap_or("text-4k");
            let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
            let fix = args.get(3).is_some_and(|s| s == "fix");
            let Some(raw) = gen::named(name) else {
                eprintln!("no message named {name}");
                return ExitCode::from(2);
            };
            let mut opts = Options {
                limits: Limits {
                    max_message_size: 256 << 20,
                    ..Limits::default()
                },
                ..Options::default()
            };
            // The signed messages are judged as the last hop judges them: their trusted
            // verdicts read and matched.
            if name.starts_with("signed-") || name.starts_with("verdicts-") {
                opts.fix_signed = FixSigned::Verified;
                opts.trusted_authserv_ids = vec!["mx.test.example".into()];
            }
            let mut findings = 0;
            for _ in 0..n {
                findings += if fix {
                    engine::fix(&raw, &opts).unwrap().1.findings.len()
                } else {
                    engine::check(&raw, &opts).findings.len()
                };
            }
            println!(
                "{name}: {} octets, {findings} findings over {n} runs",
                raw.len()
            );
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("usage: bench_msgs write DIR [--big] | check NAME [N] [fix]");
            ExitCode::from(2)
        }
    }
}
