//! The engine options the engine fuzz target picks with its first input byte, shared
//! with `examples/findings_dump` (which compares two builds under the same sets). Taken
//! in by `#[path]`.
#![allow(dead_code)]

use mimeref_milter::engine::{FixSigned, Limits, Options};

/// The authserv-id the fuzz inputs' Authentication-Results may claim (fuzz/seeds carry
/// it): trusted under flag 64.
pub const TRUSTED_ID: &str = "mx.test.example";

/// Options from `flags`: 1 a small depth limit, 2 few parts, 4 fix signed mail, 8
/// normalise URL continuations, 32 whole URL words, 64 repairs under a trusted verdict
/// of `TRUSTED_ID` (`fix_signed = "verified"`; 16 is the fuzz target's CRLF copy), 128
/// the insertion of a Content-Disposition for a file name (`name_insert_disposition`).
pub fn options(flags: u8) -> Options {
    Options {
        limits: Limits {
            // Small limits so that the fuzzer reaches them.
            max_depth: if flags & 1 != 0 { 4 } else { 64 },
            max_parts: if flags & 2 != 0 { 8 } else { 20_000 },
            ..Limits::default()
        },
        fix_signed: if flags & 4 != 0 {
            FixSigned::Always
        } else if flags & 64 != 0 {
            FixSigned::Verified
        } else {
            FixSigned::Never
        },
        trusted_authserv_ids: vec![TRUSTED_ID.to_string()],
        normalize_url_continuations: flags & 8 != 0,
        whole_url_words: flags & 32 != 0,
        name_insert_disposition: flags & 128 != 0,
        ..Options::default()
    }
}
