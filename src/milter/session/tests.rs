//! The session's stages driven directly: what is kept, spilled, lent and counted.

use super::*;
use crate::milter::buffer::{FIRST_ALLOCATION, POOL_MAX};

fn session(limit: usize) -> Session {
    spilling(limit, limit, std::env::temp_dir())
}

fn spilling(limit: usize, spill_at: usize, dir: std::path::PathBuf) -> Session {
    let mut cfg = Config::builtin();
    cfg.limits_mut().max_message_size = limit;
    cfg.limits_mut().max_header_size = limit;
    cfg.limits_mut().spill_threshold = spill_at;
    cfg.limits_mut().spill_directory = dir;
    with_config(cfg)
}

/// A session of `cfg` as the daemon starts one, but with a pool of its own: tests run
/// in parallel.
fn with_config(cfg: Config) -> Session {
    let mut s = Session::new(&Shared::new(cfg), "test".into(), 0);
    s.pool = Arc::new(Pool::default());
    s
}

fn body(s: &mut Session, b: &[u8]) {
    s.body(Bytes::copy_from_slice(b));
}

/// What end of message hands the engine.
fn buffered(s: &mut Session) -> Vec<u8> {
    let m = s.message.as_mut().unwrap();
    m.buf.take().read_back().unwrap()
}

#[test]
fn reconstructs_headers_byte_exactly() {
    let mut s = session(1 << 20);
    s.mail();
    s.header(b"Subject", b" caf\xe9\n\tfolded");
    s.header(b"X", b"");
    s.eoh();
    body(&mut s, b"body\r\n");
    let m = s.message.as_ref().unwrap();
    assert!(!m.buf.incomplete);
    let octets = m.octets;
    let got = buffered(&mut s);
    assert_eq!(got, b"Subject: caf\xe9\n\tfolded\r\nX:\r\n\r\nbody\r\n");
    assert_eq!(octets, got.len() as u64);
}

#[test]
fn stops_buffering_at_the_limit_and_keeps_counting() {
    let mut s = session(40);
    s.mail();
    s.header(b"Subject", b" short");
    s.eoh();
    body(&mut s, &[b'a'; 30]);
    body(&mut s, &[b'b'; 30]);
    let m = s.message.as_ref().unwrap();
    assert!(m.buf.incomplete);
    assert_eq!(m.buf.raw.len(), 40);
    assert_eq!(m.octets, 18 + 60);
}

fn feed(s: &mut Session) -> Vec<u8> {
    s.mail();
    s.header(b"Subject", b" a message that spills");
    s.eoh();
    for i in 0..50u8 {
        body(s, &[b'a' + i % 26; 1000]);
    }
    let mut want = b"Subject: a message that spills\r\n\r\n".to_vec();
    for i in 0..50u8 {
        want.extend_from_slice(&[b'a' + i % 26; 1000]);
    }
    want
}

#[test]
fn large_messages_spill_to_a_file_and_read_back_byte_exactly() {
    let mut s = spilling(1 << 20, 10_000, std::env::temp_dir());
    let want = feed(&mut s);
    let m = s.message.as_mut().unwrap();
    assert!(
        m.buf.spill.is_some(),
        "over spill_at the bytes go to a file"
    );
    assert!(
        m.buf.raw.is_empty() && m.buf.raw.capacity() == 0 && m.buf.chunks.is_empty(),
        "and leave memory"
    );
    assert_eq!((m.buf.len, m.buf.incomplete), (want.len(), false));
    assert_eq!(buffered(&mut s), want);
}

#[test]
fn spilled_messages_still_stop_at_the_size_limit() {
    let mut s = spilling(20_000, 10_000, std::env::temp_dir());
    let want = feed(&mut s);
    let m = s.message.as_mut().unwrap();
    assert!(m.buf.incomplete);
    assert_eq!(m.buf.len, 20_000);
    assert_eq!(m.octets, want.len() as u64);
    assert_eq!(buffered(&mut s), want[..20_000]);
}

#[test]
fn a_spill_directory_that_fails_keeps_the_message_in_memory() {
    let mut s = spilling(1 << 20, 10_000, "/nonexistent/mimeref-milter-test".into());
    let want = feed(&mut s);
    let m = s.message.as_ref().unwrap();
    assert!(m.buf.spill.is_none() && m.buf.spill_failed);
    assert!(!m.buf.incomplete && m.buf.lost.is_none());
    assert_eq!(s.budget.held(), want.len(), "held within memory_budget");
    assert_eq!(buffered(&mut s), want);
    assert_eq!(s.budget.held(), 0, "and given back once analysed");
}

#[test]
fn small_messages_stay_in_memory() {
    let mut s = session(1 << 20);
    let want = feed(&mut s);
    assert!(s.message.as_ref().unwrap().buf.spill.is_none());
    assert_eq!(buffered(&mut s), want);
}

#[test]
fn past_the_first_allocation_a_message_continues_in_a_buffer_of_the_pools_size() {
    let mut s = session(1 << 20);
    s.mail();
    s.header(b"Subject", b" big");
    s.eoh();
    s.body(Bytes::from(vec![b'x'; 10_000]));
    s.body(Bytes::from(vec![b'y'; 10_000]));
    body(&mut s, b"tail");
    let m = s.message.as_ref().unwrap();
    assert!(m.buf.chunks.is_empty(), "no chunk held apart to be joined");
    assert!(m.buf.raw.capacity() >= POOL_MAX.min(1 << 20));
    let got = buffered(&mut s);
    let mut want = b"Subject: big\r\n\r\n".to_vec();
    want.extend_from_slice(&[b'x'; 10_000]);
    want.extend_from_slice(&[b'y'; 10_000]);
    want.extend_from_slice(b"tail");
    assert_eq!(got, want);
}

#[test]
fn a_large_message_stops_at_the_size_limit() {
    let mut s = session(30_000);
    let want = feed(&mut s);
    let m = s.message.as_ref().unwrap();
    assert!(m.buf.incomplete);
    assert_eq!((m.buf.len, m.octets), (30_000, want.len() as u64));
    assert_eq!(buffered(&mut s), want[..30_000]);
}

#[test]
fn a_large_message_goes_to_the_spill_file_in_order() {
    let mut s = spilling(1 << 20, 30_000, std::env::temp_dir());
    s.mail();
    s.header(b"Subject", b" a message that spills");
    s.eoh();
    for i in 0..25u8 {
        body(&mut s, &[b'a' + i; 1000]);
    }
    let m = s.message.as_ref().unwrap();
    assert!(m.buf.spill.is_none());
    let want = {
        let mut w = b"Subject: a message that spills\r\n\r\n".to_vec();
        for i in 0..50u8 {
            w.extend_from_slice(&[b'a' + i % 26; 1000]);
        }
        w
    };
    for i in 25..50u8 {
        body(&mut s, &[b'a' + i % 26; 1000]);
    }
    let m = s.message.as_ref().unwrap();
    assert!(m.buf.spill.is_some() && m.buf.chunks.is_empty() && m.buf.raw.capacity() == 0);
    assert_eq!(buffered(&mut s), want);
}

/// A session whose pool holds one buffer of the largest pooled size, and where
/// that buffer is.
fn session_with_pooled_buffer() -> (Session, *const u8) {
    let s = session(1 << 20);
    let pooled = Vec::with_capacity(POOL_MAX);
    let p = pooled.as_ptr();
    s.pool.give(pooled);
    (s, p)
}

#[test]
fn a_large_message_continues_in_a_pooled_buffer() {
    let (mut s, p) = session_with_pooled_buffer();
    let want = feed(&mut s);
    let m = s.message.as_ref().unwrap();
    assert_eq!(m.buf.raw.as_ptr(), p, "past the first allocation");
    assert!(
        m.buf.chunks.is_empty(),
        "every chunk copied once, none held"
    );
    assert_eq!(m.buf.raw, want);
    s.abort();
    let back = s.pool.take(1).unwrap();
    assert_eq!((back.as_ptr(), back.len()), (p, 0), "and back when done");
}

/// What the connection does with a lent buffer (indymilter's `read_into`): a
/// chunk that fits its spare capacity is appended, else it comes on its own.
fn body_lent(s: &mut Session, b: &[u8]) {
    match s.lend_body() {
        Some(mut v) if v.capacity() - v.len() >= b.len() => {
            v.extend_from_slice(b);
            s.body_in_buffer(v, b.len());
        }
        Some(v) => {
            s.reclaim_body(v);
            body(s, b);
        }
        None => body(s, b),
    }
}

fn feed_lent(s: &mut Session, chunks: usize) -> Vec<u8> {
    s.mail();
    s.header(b"Subject", b" a message read into its buffer");
    s.eoh();
    let mut want = b"Subject: a message read into its buffer\r\n\r\n".to_vec();
    for i in 0..chunks {
        let c = [b'a' + (i % 26) as u8; 1000];
        body_lent(s, &c);
        want.extend_from_slice(&c);
    }
    want
}

#[test]
fn chunks_read_into_the_lent_buffer_stay_where_they_are() {
    let (mut s, p) = session_with_pooled_buffer();
    let want = feed_lent(&mut s, 50);
    let m = s.message.as_ref().unwrap();
    assert!(!m.buf.is_lent() && m.buf.chunks.is_empty());
    assert_eq!(m.buf.raw.as_ptr(), p, "the pooled buffer, never moved");
    assert_eq!((m.octets, m.buf.len), (want.len() as u64, want.len()));
    assert_eq!(s.budget.held(), want.len(), "every octet counted");
    assert_eq!(buffered(&mut s), want);
}

#[test]
fn a_lent_buffer_past_the_spill_threshold_spills_in_order() {
    let mut s = spilling(1 << 20, 30_000, std::env::temp_dir());
    s.pool.give(Vec::with_capacity(POOL_MAX));
    let want = feed_lent(&mut s, 50);
    let m = s.message.as_ref().unwrap();
    assert!(m.buf.spill.is_some() && m.buf.raw.capacity() == 0);
    assert_eq!(buffered(&mut s), want);
}

#[test]
fn a_lent_buffer_stops_at_the_size_limit() {
    let mut s = session(30_500);
    s.pool.give(Vec::with_capacity(POOL_MAX));
    let want = feed_lent(&mut s, 50);
    let m = s.message.as_ref().unwrap();
    assert!(m.buf.incomplete);
    assert_eq!(m.octets, want.len() as u64, "every octet counted");
    let kept = m.buf.len;
    assert!(kept <= 30_500 && kept > 29_000, "{kept}");
    assert_eq!(buffered(&mut s), want[..kept]);
}

#[test]
fn a_lent_buffer_over_the_budget_loses_the_message() {
    let mut s = session(1 << 20);
    let mut cfg = (*s.config).clone();
    cfg.limits_mut().memory_budget = 20_000;
    // Spilled octets count as memory too: nowhere to go but lost.
    cfg.limits_mut().spill_in_memory = true;
    s.config = Arc::new(cfg);
    s.pool.give(Vec::with_capacity(POOL_MAX));
    feed_lent(&mut s, 50);
    let m = s.message.as_ref().unwrap();
    assert!(matches!(
        m.buf.lost,
        Some(crate::milter::buffer::Lost::OverBudget { .. })
    ));
    assert_eq!(s.budget.held(), 0);
}

#[test]
fn a_lent_buffer_comes_back_without_octets_not_delivered() {
    let mut s = session(1 << 20);
    s.mail();
    s.header(b"X", b" y");
    s.eoh();
    let mut v = s.lend_body().expect("room in the first allocation");
    v.extend_from_slice(b"never delivered");
    s.reclaim_body(v);
    body_lent(&mut s, b"body\r\n");
    assert_eq!(buffered(&mut s), b"X: y\r\n\r\nbody\r\n");
}

#[test]
fn a_pooled_buffer_too_small_for_the_message_is_left_for_later() {
    let mut s = session(1 << 20);
    s.pool.give(Vec::with_capacity(INLINE_MAX + 1));
    s.mail();
    s.header(b"X", b" y");
    s.eoh();
    let first = FIRST_ALLOCATION - 8;
    body(&mut s, &vec![b'a'; first]);
    body(&mut s, &vec![b'b'; INLINE_MAX]);
    let m = s.message.as_ref().unwrap();
    assert!(
        m.buf.raw.capacity() >= POOL_MAX.min(1 << 20) && m.buf.chunks.is_empty(),
        "a new buffer of the pool's size instead"
    );
    assert_eq!(s.pool.take(1).map(|v| v.capacity()), Some(INLINE_MAX + 1));
    s.pool.give(Vec::with_capacity(INLINE_MAX + 1));
    let mut want = b"X: y\r\n\r\n".to_vec();
    want.extend_from_slice(&vec![b'a'; first]);
    want.extend_from_slice(&vec![b'b'; INLINE_MAX]);
    assert_eq!(buffered(&mut s), want);
}

/// The daemon and the offline commands (`intake::as_received` on the message file)
/// keep the same octets and decide "incomplete" alike, whichever limit stops them.
#[test]
fn the_session_keeps_what_the_offline_commands_analyse() {
    let fields: &[(&[u8], &[u8])] = &[
        (b"From", b" a@example.org"),
        (b"Subject", b" one\n two"),
        (b"X-Pad", b" 0123456789012345678901234567890123456789"),
    ];
    let body = b"line one\r\nline two\r\nline three\r\n";
    // The file: folds as CRLF, which the MTA sends as LF.
    let mut file = Vec::new();
    for (n, v) in fields {
        file.extend_from_slice(n);
        file.push(b':');
        file.extend_from_slice(&v.iter().fold(Vec::new(), |mut o, &b| {
            if b == b'\n' {
                o.push(b'\r');
            }
            o.push(b);
            o
        }));
        file.extend_from_slice(b"\r\n");
    }
    file.extend_from_slice(b"\r\n");
    file.extend_from_slice(body);
    let wire = file.len() - 1;
    for (max_msg, max_hdr) in [
        (1 << 20, 1 << 20),
        (wire, wire),
        (wire - 1, wire - 1),
        (wire - body.len() - 2, 1 << 10),
        (wire - body.len() - 1, 1 << 10),
        (wire - 5, 1 << 10),
        (1 << 20, wire - body.len() - 2),
        (1 << 20, wire - body.len() - 3),
        (1 << 20, 20),
    ] {
        let mut cfg = Config::builtin();
        cfg.limits_mut().max_message_size = max_msg;
        cfg.limits_mut().max_header_size = max_hdr;
        let mut s = with_config(cfg.clone());
        s.mail();
        for (n, v) in fields {
            s.header(n, v);
        }
        s.eoh();
        for chunk in body.chunks(7) {
            s.body(Bytes::copy_from_slice(chunk));
        }
        let m = s.message.as_ref().unwrap();
        let (incomplete, not_given) = (m.buf.incomplete, m.octets - m.buf.len as u64);
        let kept = buffered(&mut s);
        let g = cfg.as_received(&file);
        let case = format!("max_message_size {max_msg}, max_header_size {max_hdr}");
        assert_eq!(g.incomplete, incomplete, "{case}");
        // The one fold is a CR longer in the file.
        let fold_cr = usize::from(g.bytes.len() > 40);
        assert_eq!(g.bytes.len(), kept.len() + fold_cr, "{case}");
        // Counted in the file's octets: the fold's CR, when not kept, is one more.
        assert_eq!(
            g.octets_not_given as usize,
            not_given as usize + (1 - fold_cr) * usize::from(incomplete),
            "{case}"
        );
    }
}

const WITHOUT: ValueForm = ValueForm {
    leading_space: false,
    crlf_folds: false,
};

#[test]
fn without_leading_space_the_dropped_space_goes_back_in_and_out() {
    let cases: &[(&[u8], &[u8])] = &[
        (b"v", b" v"),
        (b" two", b"  two"),
        (b"\ttab", b"\ttab"),
        (b"\n folded", b"\n folded"),
        (b"", b""),
    ];
    for (sent, kept) in cases {
        assert_eq!(&*WITHOUT.received(sent), *kept);
    }
    assert_eq!(&*WITHOUT.sent(b" a;\n b=1"), b"a;\n b=1");
    assert_eq!(&*WITHOUT.sent(b"\tx"), b"\tx");
    let crlf = ValueForm {
        crlf_folds: true,
        ..WITHOUT
    };
    assert_eq!(&*crlf.sent(b" a;\n b=1\r\n c"), b"a;\r\n b=1\r\n c");
    let with = ValueForm {
        leading_space: true,
        crlf_folds: false,
    };
    assert_eq!(&*with.received(b"v"), b"v");
    assert_eq!(&*with.sent(b" a\n b"), b" a\n b");
}

/// A panic in a stage ends the transaction, not the session: nothing more of that
/// message is kept, and the next transaction starts clean.
#[test]
fn a_panic_in_a_stage_fails_the_transaction_only() {
    let mut s = session(1 << 20);
    s.guarded(Session::mail);
    s.guarded(|s| s.header(b"Subject", b" one"));
    s.guarded(|_| panic!("in a stage"));
    assert!(s.message.is_none(), "what was kept is dropped");
    let f = s.broken.clone().expect("the transaction is failed");
    assert_eq!(f.cause, Cause::Panic);
    assert!(f.detail.contains("in a stage"), "{f:?}");
    s.guarded(|s| s.body(Bytes::from_static(b"more")));
    s.guarded(Session::eoh);
    assert!(s.message.is_none(), "the rest is not kept");
    s.guarded(Session::mail);
    assert!(s.broken.is_none());
    s.guarded(|s| s.header(b"Subject", b" two"));
    s.guarded(Session::eoh);
    assert_eq!(buffered(&mut s), b"Subject: two\r\n\r\n");
}

#[test]
fn in_flight_counts_transactions() {
    let shared = Shared::new(Config::builtin());
    let counter = shared.in_flight.clone();
    let mut s = Session::new(&shared, "test".into(), 0);
    s.mail();
    assert_eq!(counter.get(), 1);
    s.abort();
    assert_eq!(counter.get(), 0);
    s.mail();
    drop(s);
    assert_eq!(counter.get(), 0);
}
