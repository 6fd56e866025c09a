//! draft-eastlake-cturi mapping in both directions on arbitrary text: no panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mimeref_milter::engine::fuzzing::cturi;

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    if let Ok(uri) = cturi::to_uri(&s) {
        let _ = cturi::to_content_type(&uri);
    }
    if let Ok(ct) = cturi::to_content_type(&s) {
        let _ = cturi::to_uri(&ct);
    }
    let _ = cturi::uri_scheme(s.as_bytes());
});
