//! DKIM-Signature and Authentication-Results fields, and DKIM body hashes, on arbitrary
//! octets: no panic, and what each reads holds together.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mimeref_milter::engine::fuzzing::auth::{
    auth_results, body_hash, tag_list, BodyCanon, BodyCheck, BodyHasher, HashAlg, Signature,
    SignatureKind,
};

fuzz_target!(|data: &[u8]| {
    if let Some(ar) = auth_results(data) {
        assert!(!ar.authserv_id.is_empty() || data.contains(&b'"'));
        for r in &ar.results {
            assert!(!r.method.is_empty() && !r.result.is_empty());
            assert_eq!(r.method, r.method.to_ascii_lowercase());
            // The first of a name is the one `prop` finds (a few: the search is linear).
            for p in r.props.iter().take(8) {
                let first = r
                    .props
                    .iter()
                    .find(|q| q.ptype == p.ptype && q.property == p.property);
                assert_eq!(
                    r.prop(&p.ptype.to_ascii_uppercase(), &p.property),
                    first.map(|q| q.value.as_str())
                );
            }
        }
    }
    if let Ok(tags) = tag_list(data) {
        let mut names = std::collections::HashSet::new();
        assert!(tags.iter().all(|t| names.insert(t.name)));
    }
    for kind in [SignatureKind::Dkim, SignatureKind::ArcMessage] {
        match Signature::parse(data, kind) {
            Ok(sig) => {
                assert!(!sig.d.is_empty() && !sig.s.is_empty() && !sig.h.is_empty());
                assert_eq!(sig.instance.is_some(), kind == SignatureKind::ArcMessage);
                // The field's own octets as a body: whatever the answer, it is one.
                if let BodyCheck::Matches { unsigned } = sig.check_body(data) {
                    assert!(sig.l.is_some() || unsigned == 0);
                }
            }
            Err(e) => assert!(!e.why.is_empty()),
        }
    }
    check_body_hashes(data);
});

/// Body hash invariants: a canonical body is at most the input with every bare LF made
/// CRLF and a CRLF added; relaxed is never longer than simple; a limit changes the
/// digest but not the length; chunks hash as the whole.
fn check_body_hashes(data: &[u8]) {
    let lfs = data.iter().filter(|&&b| b == b'\n').count() as u64;
    let simple = body_hash(data, BodyCanon::Simple, HashAlg::Sha256, None);
    let relaxed = body_hash(data, BodyCanon::Relaxed, HashAlg::Sha1, None);
    assert!(simple.canonical_len <= data.len() as u64 + lfs + 2);
    assert!(simple.canonical_len >= 2);
    assert!(relaxed.canonical_len <= simple.canonical_len);
    assert_eq!((simple.digest.len(), relaxed.digest.len()), (32, 20));
    let whole = body_hash(
        data,
        BodyCanon::Relaxed,
        HashAlg::Sha1,
        Some(relaxed.canonical_len),
    );
    assert_eq!(whole, relaxed);
    let half = relaxed.canonical_len / 2;
    let cut = body_hash(data, BodyCanon::Relaxed, HashAlg::Sha1, Some(half));
    assert_eq!(cut.canonical_len, relaxed.canonical_len);
    let at = data
        .first()
        .map_or(0, |&b| usize::from(b) % (data.len() + 1));
    let mut chunked = BodyHasher::new(BodyCanon::Simple, HashAlg::Sha256, None);
    chunked.update(&data[..at]);
    chunked.update(&data[at..]);
    assert_eq!(chunked.finish(), simple);
}
