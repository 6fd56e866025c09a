//! The engine options the engine fuzz target picks with its first input byte, shared
//! with `examples/findings_dump` (which compares two builds under the same sets). Taken
//! in by `#[path]`.
#![allow(dead_code)]

use mimeref_milter::engine::{Limits, Options};

/// Options from `flags`: 1 a small depth limit, 2 few parts, 4 fix signed mail, 8
/// normalise URL continuations, 32 whole URL words (16 is the fuzz target's CRLF copy).
pub fn options(flags: u8) -> Options {
    Options {
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
    }
}
