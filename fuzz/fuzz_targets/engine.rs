//! The whole engine on arbitrary bytes: check, fix, re-check, with the invariants of the
//! corpus test (no panic, bytes outside the edits unchanged, nothing fixable left after
//! a fix, fix idempotent), in LF and in CRLF form. The first byte picks the options.
#![no_main]

#[path = "../../tests/support/invariants.rs"]
mod common;
#[path = "../../tests/support/fuzz_options.rs"]
mod fuzz_options;
#[path = "../../tests/support/message.rs"]
mod message;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, raw)) = data.split_first() else {
        return;
    };
    let opts = fuzz_options::options(flags);
    common::fix_and_verify("fuzz", raw, &opts);
    if flags & 16 != 0 {
        common::fix_and_verify("fuzz crlf", &message::to_crlf(raw), &opts);
    }
});
