//! The Content-Type / RFC 2231 parameter parser on arbitrary values, with every accessor;
//! the Content-Disposition reader and the Content-ID readings built on the same syntax.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mimeref_milter::engine::fuzzing::params::{self, ContentType, Disposition};

fuzz_target!(|data: &[u8]| {
    let ct = ContentType::parse(data);
    let strict = ct.strict();
    for view in [&ct, &strict] {
        let _ = view.essence();
        let _ = view.is_clean();
        let _ = view.is_multipart();
        for p in &view.params {
            let _ = view.get(&p.name);
            let _ = view.get_str(&p.name);
            let _ = view.extended(&p.name);
            let _ = view.pieces(&p.name).count();
        }
        let _ = view.get("url");
        let _ = view.get("boundary");
    }
    // The strict view stops at the first defect: never more parameters than lenient.
    assert!(strict.params.len() <= ct.params.len());
    let _ = params::percent_decode(data);
    let _ = params::skip_cfws(data, 0);
    // A disposition's type is a span of the value; its parameters read like the above.
    let d = Disposition::parse(data);
    assert!(d.kind_span.end <= data.len());
    let _ = d.filename();
    if let Some(sub) = params::subtype_span(data) {
        assert!(sub.end <= data.len() && sub.start < sub.end);
    }
    // A Content-ID's readings: the lenient one is never the strict one again.
    let forms = params::id_forms(data);
    if let (Some(exact), Some((lenient, _))) = (&forms.exact, &forms.lenient) {
        assert_ne!(exact, lenient);
    }
});
