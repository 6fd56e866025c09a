//! The whole engine on arbitrary bytes: check, fix, re-check, with the invariants of the
//! corpus test (no panic, bytes outside the edits unchanged, nothing fixable left after
//! a fix, fix idempotent), in LF and in CRLF form. The first byte picks the options.
#![no_main]

#[path = "../../tests/support/invariants.rs"]
mod common;
#[path = "../../tests/support/message.rs"]
mod message;

use libfuzzer_sys::fuzz_target;
use mimeref_milter::engine::{Limits, Options};

fuzz_target!(|data: &[u8]| {
    let Some((&flags, raw)) = data.split_first() else {
        return;
    };
    let opts = Options {
        limits: Limits {
            // Small limits so that the fuzzer reaches them.
            max_depth: if flags & 1 != 0 { 4 } else { 64 },
            max_parts: if flags & 2 != 0 { 8 } else { 20_000 },
            ..Limits::default()
        },
        fix_signed: flags & 4 != 0,
        normalize_url_continuations: flags & 8 != 0,
        whole_url_words: flags & 32 != 0,
        ..Options::default()
    };
    common::fix_and_verify("fuzz", raw, &opts);
    if flags & 16 != 0 {
        common::fix_and_verify("fuzz crlf", &message::to_crlf(raw), &opts);
    }
});
