//! The configuration parser on arbitrary text: errors, never a panic; and whatever it
//! accepts keeps every limit bounded and every reply free of control characters.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mimeref_milter::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(cfg) = Config::parse(text, "fuzz.toml") {
        assert!(cfg.limits().max_depth >= 1 && cfg.limits().max_depth <= 1_000);
        assert!(cfg.limits().max_parts >= 1 && cfg.limits().max_parts <= 1_000_000);
        assert!(cfg.limits().max_message_size >= 1024);
        assert!(cfg.limits().max_header_size >= 1024 && cfg.limits().max_header_size <= cfg.limits().max_message_size);
        assert!(cfg.listen().max_connections >= 1);
        assert!(!cfg.listen().connection_timeout.is_zero());
        for t in [
            &cfg.replies().reject.text,
            &cfg.replies().tempfail.text,
            &cfg.replies().quarantine,
        ] {
            assert!(!t.chars().any(char::is_control), "{t:?}");
        }
        if let Some(h) = &cfg.report().header {
            assert!(
                h.bytes().all(|b| (33..=126).contains(&b) && b != b':'),
                "{h:?}"
            );
        }
    }
});
