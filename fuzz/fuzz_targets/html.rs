//! The HTML reference scanner on arbitrary text: no panic, and never more references
//! than asked for.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mimeref_milter::engine::fuzzing::html;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let s = html::scan(&text, 64);
    assert!(s.refs.len() <= 64);
});
