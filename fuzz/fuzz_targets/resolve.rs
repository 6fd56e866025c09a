//! RFC 3986 resolution and Content-Location reading: base and reference separated by
//! the first NUL. No panic; a strict result is an absolute URI once its fragment is
//! dropped (RFC 3986 §4.3: an absolute URI has no fragment, a resolved one may).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mimeref_milter::engine::fuzzing::resolve;

fuzz_target!(|data: &[u8]| {
    let (base, reference) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (&b"http://example.org/a/b"[..], data),
    };
    let _ = resolve::parse_location(reference);
    let loc = resolve::location_value(reference);
    let _ = resolve::as_base(base);
    let _ = resolve::encode_for_comparison(reference);
    let base = String::from_utf8_lossy(base);
    let _ = resolve::is_absolute(&base);
    if let Ok(r) = resolve::resolve(&base, &loc) {
        let no_fragment = r.split_once('#').map_or(r.as_str(), |(a, _)| a);
        assert!(
            resolve::is_absolute(no_fragment),
            "{base:?} + {loc:?} gave {r:?}"
        );
    }
    let _ = resolve::resolve_lenient(&base, &loc);
});
