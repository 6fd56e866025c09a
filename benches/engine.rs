//! Engine throughput: `engine::check` and `engine::fix` against mail-parser's full parse
//! of the same bytes (the reference line), on messages of every shape the milter meets.
//!
//! `cargo bench --bench engine` (a few minutes); `BENCH_BIG=1` adds a 200 MB message for
//! the linearity check; `cargo bench --bench engine -- parts` runs one group.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mimeref_milter::engine::{self, Limits, Options};

mod gen;

fn options() -> Options {
    // Limits wide enough that every input is analysed whole, as a milter configured for
    // large mail would.
    Options {
        limits: Limits {
            max_message_size: 256 << 20,
            ..Limits::default()
        },
        ..Options::default()
    }
}

fn engine(c: &mut Criterion) {
    let big = std::env::var_os("BENCH_BIG").is_some();
    let opts = options();
    let parser = mail_parser::MessageParser::default();
    for &name in gen::NAMES {
        if name == "attach-200m" && !big {
            continue;
        }
        let Some(raw) = gen::named(name) else {
            continue;
        };
        let mut g = c.benchmark_group(name);
        g.throughput(Throughput::Bytes(raw.len() as u64));
        // Short runs: the whole suite should take minutes on a shared 2-core machine.
        if raw.len() > 1 << 20 {
            g.sample_size(10)
                .warm_up_time(Duration::from_millis(500))
                .measurement_time(Duration::from_secs(3));
        } else {
            g.sample_size(20)
                .warm_up_time(Duration::from_millis(500))
                .measurement_time(Duration::from_secs(2));
        }
        g.bench_function(BenchmarkId::new("check", raw.len()), |b| {
            b.iter(|| engine::check(std::hint::black_box(&raw), &opts))
        });
        g.bench_function(BenchmarkId::new("fix", raw.len()), |b| {
            b.iter(|| engine::fix(std::hint::black_box(&raw), &opts))
        });
        g.bench_function(BenchmarkId::new("mail-parser", raw.len()), |b| {
            b.iter(|| parser.parse(std::hint::black_box(&raw[..])))
        });
        g.finish();
    }
}

criterion_group!(benches, engine);
criterion_main!(benches);
