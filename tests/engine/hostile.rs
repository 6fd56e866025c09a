//! Hostile mail: inputs built to exhaust a parser (deep nesting, huge part counts, giant
//! lines, millions of fields, broken boundaries, NUL, bare CR, bad charsets, giant URLs,
//! endless RFC 2231 continuations, encoded words where none belong).
//!
//! Each one goes through the engine (check, fix, re-check with the fix invariants of
//! `fix_and_verify`) under a per-thread allocation meter, and through the real
//! daemon, which must still answer with a verdict and pass the message on whole.
//!
//! Time bounds are deliberately generous (a loaded 2-core CI machine, debug build): they
//! catch a hang or a quadratic blow-up, not a slow day.

use crate::support::invariants::fix_and_verify;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::{Duration, Instant};

use mimeref_milter::engine::{self, Analysis, Limits, Options, Rule};

// ---------------------------------------------------------------------------------------
// A per-thread allocation meter: the engine is synchronous, so what the test thread
// allocates while it runs is what the engine needs for that input.

struct Meter;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn track(delta: isize) {
    // try_with: the allocator is also called while thread-locals are torn down.
    let _ = LIVE.try_with(|l| {
        let now = l.get() + delta;
        l.set(now);
        let _ = PEAK.try_with(|p| {
            if now > p.get() {
                p.set(now)
            }
        });
    });
}

unsafe impl GlobalAlloc for Meter {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            track(layout.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        track(-(layout.size() as isize));
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            track(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static METER: Meter = Meter;

/// Runs `f` and returns its result with the peak number of octets it held at once.
fn metered<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let out = f();
    let peak = PEAK.with(Cell::get) - base;
    (out, peak.max(0) as usize)
}

/// Generous: catches a hang or a quadratic algorithm, not a slow machine.
const TIME_BOUND: Duration = Duration::from_secs(60);

/// Memory the engine may use for an input of `len` octets: a small multiple of the input
/// (the scan keeps offsets, decoded copies and one edited value per field) plus slack.
fn memory_bound(len: usize) -> usize {
    12 * len + 64 * 1024 * 1024
}

/// Check, fix, re-check: bounded time and memory, fix invariants kept, and the findings
/// list stays proportionate (a million fields must not give a million findings).
fn engine_run(name: &str, raw: &[u8], opts: &Options) -> Analysis {
    let t = Instant::now();
    let ((_, analysis), peak) = metered(|| fix_and_verify(name, raw, opts));
    let took = t.elapsed();
    eprintln!(
        "{name}: {} octets, {} findings, {:?}, peak {} KiB",
        raw.len(),
        analysis.findings.len(),
        took,
        peak / 1024
    );
    assert!(took < TIME_BOUND, "{name}: took {took:?}");
    assert!(
        peak < memory_bound(raw.len()),
        "{name}: peak allocation {peak} octets for {} octets of input",
        raw.len()
    );
    assert!(
        analysis.findings.len() <= opts.limits.max_parts * 4 + 64,
        "{name}: {} findings",
        analysis.findings.len()
    );
    analysis
}

fn fired(a: &Analysis, rule: Rule) -> bool {
    a.findings.iter().any(|f| f.rule == rule)
}

fn rules(a: &Analysis) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = a.findings.iter().map(|f| f.rule.id()).collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn assert_fires(name: &str, a: &Analysis, rule: Rule) {
    assert!(
        fired(a, rule),
        "{name}: expected {rule}, got {:?}",
        rules(a)
    );
}

// ---------------------------------------------------------------------------------------
// The hostile messages. Each generator returns LF-terminated bytes.

const TOP: &str = "From: a@example.org\nTo: b@example.net\nSubject: hostile\nMIME-Version: 1.0\n";

fn deep_multipart(levels: usize) -> Vec<u8> {
    let mut head = String::from(TOP);
    let mut tail = String::new();
    for i in 0..levels {
        let b = format!("d{i}");
        head.push_str(&format!(
            "Content-Type: multipart/mixed; boundary=\"{b}\"\n\n--{b}\n"
        ));
        tail = format!("\n--{b}--\n{tail}");
    }
    head.push_str("Content-Type: text/plain\n\nbottom");
    head.push_str(&tail);
    head.into_bytes()
}

fn deep_rfc822(levels: usize) -> Vec<u8> {
    let mut out = String::from(TOP);
    for _ in 0..levels {
        out.push_str("Content-Type: message/rfc822\n\nSubject: inner\n");
    }
    out.push_str("Content-Type: text/plain\n\nbottom\n");
    out.into_bytes()
}

fn many_parts(n: usize, ctype: &str) -> Vec<u8> {
    let mut out = format!("{TOP}Content-Type: {ctype}; boundary=\"p\"\n\n");
    out.reserve(n * 80);
    for i in 0..n {
        out.push_str(&format!(
            "--p\nContent-Type: text/plain\nContent-ID: <p{i}@example.org>\n\npart {i}\n"
        ));
    }
    out.push_str("--p--\n");
    out.into_bytes()
}

fn giant_line(field: &str, prefix: &str, octets: usize) -> Vec<u8> {
    let mut out = format!("{TOP}{field}: {prefix}").into_bytes();
    out.resize(out.len() + octets, b'a');
    out.extend_from_slice(b"\nContent-Type: text/plain\n\nbody\n");
    out
}

fn many_fields(n: usize, line: &str) -> Vec<u8> {
    let mut out = String::with_capacity(TOP.len() + n * (line.len() + 1) + 64);
    out.push_str(TOP);
    for _ in 0..n {
        out.push_str(line);
        out.push('\n');
    }
    out.push_str("Content-Type: text/plain\n\nbody\n");
    out.into_bytes()
}

fn extbody(url_params: &str) -> Vec<u8> {
    format!(
        "{TOP}Content-Type: message/external-body; access-type=URL;\n {url_params}\n\n\
         Content-Type: text/plain\nContent-ID: <ext@example.org>\n\n"
    )
    .into_bytes()
}

fn long_url(octets: usize) -> Vec<u8> {
    let mut url = String::from("http://example.org/");
    while url.len() < octets {
        url.push_str("abcdefghij/");
    }
    extbody(&format!("URL=\"{url}\""))
}

fn continuations(n: usize) -> Vec<u8> {
    let mut p = String::new();
    p.push_str("URL*0=\"http://example.org/\"");
    for i in 1..n {
        p.push_str(&format!(";\n URL*{i}=\"s{i}/\""));
    }
    extbody(&p)
}

/// Boundaries that are prefixes of one another: `--b` must not end the part delimited
/// by `--bb`, and `--bb` must not end the outer one. The duplicate Content-ID is only
/// found when both levels are split right.
fn prefix_boundaries() -> Vec<u8> {
    format!(
        "{TOP}Content-Type: multipart/related; boundary=\"b\"; type=\"multipart/related\"\n\n\
         --b\nContent-Type: multipart/related; boundary=\"bb\"; type=\"text/plain\"\n\n\
         --bb\nContent-Type: text/plain\nContent-ID: <same@example.org>\n\n--bbb is not a delimiter\n\
         --bb\nContent-Type: text/plain\nContent-ID: <same@example.org>\n\n--b-- inside is text\n\
         --bb--\n\
         --b\nContent-Type: text/plain\n\nlast\n--b--\n"
    )
    .into_bytes()
}

/// No boundary parameter: nothing can be split, the multipart is read as one opaque
/// body (the catalogue has no rule for it; see SECURITY.md).
fn no_boundary() -> Vec<u8> {
    format!(
        "{TOP}Content-Type: multipart/related; type=\"text/html\"; start=\"<a@b>\"\n\n\
         --\n--x\nContent-ID: <a@b>\n\n--x--\n"
    )
    .into_bytes()
}

fn nul_bytes() -> Vec<u8> {
    let mut m = format!(
        "{TOP}Content-Type: multipart/related; boundary=\"n\0n\"\n\n--n\0n\n\
         Content-Type: text/html\nContent-Location: http://example.org/\0a\n\n\
         <img src=\"cid:x\0y@example.org\">\0\n--n\0n--\n"
    )
    .into_bytes();
    m.extend_from_slice(b"\0\0\0");
    m
}

fn bare_cr() -> Vec<u8> {
    // A bare CR is not a line break (RFC 5322 §2.3): the fields around it are one line,
    // and a CR inside a Content-Location is a CTL there.
    b"From: a@example.org\rX-Smuggled: yes\nTo: b@example.net\nMIME-Version: 1.0\n\
         Content-Type: multipart/related; boundary=\"r\"; type=\"text/html\"\n\n\
         --r\rContent-Type: text/plain\r\n\
         --r\nContent-Type: text/html\nContent-Location: http://example.org/a\rb.html\n\n\
         <img src=\"cid:nowhere@example.org\">\r\r\n--r--\r"
        .to_vec()
}

fn bad_charsets() -> Vec<u8> {
    let mut m = format!(
        "{TOP}Content-Type: multipart/related; boundary=\"c\"; type=\"text/html\"\n\n\
         --c\nContent-Type: text/html; charset=x-no-such-charset\n\
         Content-Location: =?x-bogus?B?!!!?= =?utf-8?Q?=FF=FE?=\n\n\
         <img src=\"cid:missing@example.org\">"
    )
    .into_bytes();
    // Invalid UTF-8 in the body, in a header value and in a URL.
    m.extend_from_slice(b"\xff\xfe\xc3\x28 <a href=\"\xe2\x82\">\n");
    m.extend_from_slice(b"--c\nContent-Type: text/html; charset=\"utf-8\"\nContent-Location: http://ex\xffample.org/\xc3\x28\n");
    m.extend_from_slice(b"Content-Base: \xf0\x28\x8c\x28\n\n<img src=\"\xfe\xfe\">\n--c--\n");
    m
}

/// RFC 2557 §8.2 resolution decodes RFC 2047 words first: the encoded `pic.png` and
/// the plain one are the same location, which only decoding can tell.
fn encoded_location() -> Vec<u8> {
    format!(
        "{TOP}Content-Type: multipart/related; boundary=\"e\"; type=\"text/html\"\n\n\
         --e\nContent-Type: text/html\n\
         Content-Location: =?utf-8?Q?http://example.org/caf=C3=A9.html?=\n\n\
         <img src=\"pic.png\">\n\
         --e\nContent-Type: image/png\nContent-Location: =?iso-8859-1?B?cGljLnBuZw==?=\n\nPNG\n\
         --e\nContent-Type: image/png\nContent-Location: pic.png\n\nPNG\n\
         --e\nContent-Type: image/png\nContent-Location: =?x-no-such?Q?=FF=?= =?utf-8?B?!!?=\n\nPNG\n--e--\n"
    )
    .into_bytes()
}

/// An attachment whose heading is `heading`, after a text body: the file-name rules
/// (`part-name-*`) on names built to hurt.
fn named_part(heading: &str) -> Vec<u8> {
    format!(
        "{TOP}Content-Type: multipart/mixed; boundary=\"n\"\n\n--n\nContent-Type: text/plain\n\nbody\n\
         --n\n{heading}\nContent-Transfer-Encoding: base64\n\nQUJDREVG\n--n--\n"
    )
    .into_bytes()
}

/// `filename*N*=` sections of `piece` each, `n` of them, written last first.
fn reversed_sections(n: usize, piece: &str) -> String {
    let mut p =
        String::from("Content-Type: application/octet-stream\nContent-Disposition: attachment");
    for i in (0..n).rev() {
        let lead = if i == 0 { "utf-8''" } else { "" };
        p.push_str(&format!(";\n filename*{i}*={lead}{piece}"));
    }
    p
}

// ---------------------------------------------------------------------------------------
// Engine

fn opts() -> Options {
    Options::default()
}

#[test]
fn nesting_10_000_deep() {
    let a = engine_run("deep multipart", &deep_multipart(10_000), &opts());
    assert_fires("deep multipart", &a, Rule::MimeDepthExceeded);
    let a = engine_run("deep rfc822", &deep_rfc822(10_000), &opts());
    assert_fires("deep rfc822", &a, Rule::MimeDepthExceeded);
    // The ceiling the configuration allows must hold too.
    let o = Options {
        limits: Limits {
            max_depth: 1_000,
            ..Limits::default()
        },
        ..Options::default()
    };
    let a = engine_run(
        "deep multipart, max_depth 1000",
        &deep_multipart(10_000),
        &o,
    );
    assert_fires(
        "deep multipart, max_depth 1000",
        &a,
        Rule::MimeDepthExceeded,
    );
    let a = engine_run("deep rfc822, max_depth 1000", &deep_rfc822(10_000), &o);
    assert_fires("deep rfc822, max_depth 1000", &a, Rule::MimeDepthExceeded);
}

#[test]
fn a_100_000_part_message() {
    let m = many_parts(100_000, "multipart/mixed");
    let a = engine_run("100k parts", &m, &opts());
    assert_fires("100k parts", &a, Rule::MimePartsExceeded);
    // With the limit raised past the count, every part is analysed: the rules that
    // compare parts with one another must stay linear.
    let o = Options {
        limits: Limits {
            max_parts: 200_000,
            ..Limits::default()
        },
        ..Options::default()
    };
    let related = many_parts(100_000, "multipart/related; type=\"text/plain\"");
    let a = engine_run("100k related parts", &related, &o);
    assert!(!fired(&a, Rule::MimePartsExceeded));
    assert!(!fired(&a, Rule::RelatedCidDuplicate), "{:?}", rules(&a));
}

#[test]
fn a_10_mb_header_line() {
    const MB10: usize = 10 * 1024 * 1024;
    let a = engine_run("10 MB Subject", &giant_line("Subject", "", MB10), &opts());
    assert_fires("10 MB Subject", &a, Rule::HeaderLineTooLong);
    let a = engine_run(
        "10 MB Content-Type",
        &giant_line("Content-Type", "multipart/related; boundary=", MB10),
        &opts(),
    );
    assert_fires("10 MB Content-Type", &a, Rule::HeaderLineTooLong);
    let a = engine_run(
        "10 MB Content-Location",
        &giant_line("Content-Location", "http://example.org/", MB10),
        &opts(),
    );
    assert_fires("10 MB Content-Location", &a, Rule::HeaderLineTooLong);
}

#[test]
fn a_million_header_fields() {
    let a = engine_run(
        "1M Received",
        &many_fields(1_000_000, "Received: from x"),
        &opts(),
    );
    assert!(a.findings.len() <= 4, "{:?}", rules(&a));
    let a = engine_run(
        "1M Content-Location",
        &many_fields(1_000_000, "Content-Location: http://example.org/x"),
        &opts(),
    );
    assert_fires("1M Content-Location", &a, Rule::LocationMultiple);
    // Several Content-IDs in one heading are no rule of the catalogue; a bad one is.
    let a = engine_run(
        "1M Content-ID",
        &many_fields(1_000_000, "Content-ID: <x@@example.org>"),
        &opts(),
    );
    assert_fires("1M Content-ID", &a, Rule::ContentIdSyntax);
    // Listed up to the per-rule cap, the rest counted on the last one listed.
    let syntax: Vec<_> = a
        .findings
        .iter()
        .filter(|f| f.rule == Rule::ContentIdSyntax)
        .collect();
    assert_eq!(syntax.len(), engine::MAX_FINDINGS_PER_RULE);
    assert!(
        syntax[syntax.len() - 1].message.ends_with(&format!(
            "(and {} more like it, not listed)",
            1_000_000 - engine::MAX_FINDINGS_PER_RULE
        )),
        "{}",
        syntax[syntax.len() - 1].message
    );
}

#[test]
fn multipart_without_boundary() {
    let m = no_boundary();
    let (fixed, analysis) = fix_and_verify("no boundary", &m, &opts());
    assert!(fixed == m);
    assert!(
        analysis
            .findings
            .iter()
            .any(|f| f.rule == Rule::MimeBoundaryMissing && f.part == "0"),
        "{:?}",
        analysis.findings
    );
    let parsed = engine::model::mime::Message::parse(&m, &Limits::default());
    assert_eq!(parsed.entities.len(), 1, "split without a boundary");
    // An empty boundary is no boundary either.
    let empty = String::from_utf8(m)
        .unwrap()
        .replace("start=", "boundary=\"\"; start=");
    let parsed = engine::model::mime::Message::parse(empty.as_bytes(), &Limits::default());
    assert_eq!(parsed.entities.len(), 1, "split on an empty boundary");
    let a = engine_run("empty boundary", empty.as_bytes(), &opts());
    assert!(a
        .findings
        .iter()
        .any(|f| f.rule == Rule::MimeBoundaryMissing));
}

#[test]
fn boundaries_that_are_prefixes_of_each_other() {
    let m = prefix_boundaries();
    let a = engine_run("prefix boundaries", &m, &opts());
    assert_fires("prefix boundaries", &a, Rule::RelatedCidDuplicate);
    let parsed = engine::model::mime::Message::parse(&m, &Limits::default());
    // Top, the inner multipart, its two parts, and the outer last part.
    assert_eq!(parsed.entities.len(), 5, "boundaries split wrongly");
}

#[test]
fn nul_bytes_bare_cr_and_bad_charsets() {
    let a = engine_run("NUL", &nul_bytes(), &opts());
    assert!(!a.findings.is_empty(), "NUL: {:?}", rules(&a));
    let a = engine_run("bare CR", &bare_cr(), &opts());
    assert_fires("bare CR", &a, Rule::LocationIllegalChars);
    assert_fires("bare CR", &a, Rule::RelatedRefDangling);
    let a = engine_run("bad charsets", &bad_charsets(), &opts());
    assert!(!a.findings.is_empty(), "bad charsets: {:?}", rules(&a));
    for f in &a.findings {
        // Messages go to logs and report headers: never raw control characters.
        assert!(
            !f.message.chars().any(|c| c.is_control()),
            "control character in finding message {:?}",
            f.message
        );
    }
}

/// multipart/related whose HTML shows part 2 by `cid:`; part 2 is typed
/// application/octet-stream and has base64 body `body`.
fn octet_image(body: &[u8]) -> Vec<u8> {
    let mut m = format!(
        "{TOP}Content-Type: multipart/related; boundary=r; type=\"text/html\"\n\n--r\nContent-Type: text/html\n\n<img src=\"cid:i@x.test\">\n--r\nContent-Type: application/octet-stream\nContent-Disposition: inline\nContent-ID: <i@x.test>\nContent-Transfer-Encoding: base64\n\n"
    )
    .into_bytes();
    m.extend_from_slice(body);
    m.extend_from_slice(b"\n--r--\n");
    m
}

/// An image the HTML shows whose body is a PNG signature cut to three octets, garbage,
/// or 50 MB of garbage: one finding that says no image format is known, no retype, no
/// change to the body, and only the body's first octets decoded.
#[test]
fn image_bodies_cut_short_broken_or_huge() {
    for (name, body) in [
        ("PNG signature in 3 octets", b"iVBO".to_vec()),
        ("garbage base64", b"!!\0\xff====****".repeat(1000)),
        ("50 MB of garbage", vec![b'#'; 50 << 20]),
    ] {
        let a = engine_run(name, &octet_image(&body), &opts());
        let f: Vec<_> = a
            .findings
            .iter()
            .filter(|f| f.rule == Rule::RefImageType)
            .collect();
        assert_eq!(f.len(), 1, "{name}: {:?}", rules(&a));
        assert!(!f[0].fixable, "{name}: {}", f[0].message);
        assert!(f[0].message.contains("no image format"), "{}", f[0].message);
    }
}

/// 50 MB of body and no HTML, and 50 MB of a base64-encoded forward: the reference
/// rules have nothing to read, the forward's repair changes its Content-Type alone.
#[test]
fn fifty_mb_without_html() {
    let plain = format!(
        "{TOP}Content-Type: text/plain\n\n{}\n",
        "fifty megabytes of plain text\n".repeat((50 << 20) / 30)
    );
    let a = engine_run("50 MB text", plain.as_bytes(), &opts());
    assert!(a.findings.is_empty(), "{:?}", rules(&a));
    let line = "RnJvbTogYUBleGFtcGxlLm9yZwpTdWJqZWN0OiBmaWZ0eSBtZWdhYnl0ZXMKCmhpCg==\n";
    let forward = format!(
        "{TOP}Content-Type: multipart/mixed; boundary=m\n\n--m\nContent-Type: text/plain\n\nsee below\n--m\nContent-Type: message/rfc822\nContent-Transfer-Encoding: base64\n\n{}--m--\n",
        line.repeat((50 << 20) / line.len())
    );
    let a = engine_run("50 MB forward", forward.as_bytes(), &opts());
    assert_fires("50 MB forward", &a, Rule::Rfc822Encoded);
    assert!(a
        .findings
        .iter()
        .any(|f| f.rule == Rule::Rfc822Encoded && f.fixable));
}

#[test]
fn a_50_000_octet_url() {
    let a = engine_run("50k URL", &long_url(50_000), &opts());
    assert_fires("50k URL", &a, Rule::ExtbodyUrlWordTooLong);
    assert!(a.findings.iter().all(|f| f.message.len() < 1000));
}

#[test]
fn ten_thousand_rfc2231_continuations() {
    let a = engine_run("10k continuations", &continuations(10_000), &opts());
    assert_fires("10k continuations", &a, Rule::ExtbodyUrlContinuation);
    let o = Options {
        normalize_url_continuations: true,
        ..Options::default()
    };
    let a = engine_run("10k continuations, normalised", &continuations(10_000), &o);
    assert_fires(
        "10k continuations, normalised",
        &a,
        Rule::ExtbodyUrlContinuation,
    );
}

/// The name rules on names built to hurt: a clear finding or none, never a panic, a
/// twin cut inside a character, a change to a body, or time beyond linear.
#[test]
fn hostile_file_names() {
    let big = "é".repeat(50_000);
    // (what, message, the findings of the name rules: rule and whether fixable)
    type Case = (&'static str, Vec<u8>, &'static [(Rule, bool)]);
    let cases: Vec<Case> = vec![
        (
            "100 KB raw UTF-8 name",
            named_part(&format!("Content-Type: application/pdf; name=\"{big}\"\nContent-Disposition: attachment; filename=\"{big}\"")),
            &[(Rule::PartName8bit, false)],
        ),
        (
            "100 KB RFC 2231 name",
            named_part(&format!(
                "Content-Type: application/pdf\nContent-Disposition: attachment; filename*=utf-8''{}",
                "%C3%A9".repeat(17_000)
            )),
            &[
                (Rule::PartNameRfc2231Only, false),
                (Rule::PartNameOneField, false),
            ],
        ),
        (
            "100 KB ASCII name in one field",
            named_part(&format!(
                "Content-Type: application/pdf; name=\"{}\"\nContent-Disposition: attachment",
                "a".repeat(100_000)
            )),
            &[(Rule::PartNameOneField, false)],
        ),
        (
            "10 000 sections, last first",
            named_part(&reversed_sections(10_000, "%E2%82%AC")),
            &[
                (Rule::PartNameRfc2231Only, false),
                (Rule::PartNameOneField, false),
            ],
        ),
        (
            "300 sections, last first",
            named_part(&reversed_sections(300, "%E2%82%AC")),
            &[(Rule::PartNameRfc2231Only, true)],
        ),
        (
            "sections with a gap",
            named_part("Content-Type: application/pdf\nContent-Disposition: attachment; filename*0*=utf-8''a; filename*1=b; filename*3=d"),
            &[(Rule::PartNameRfc2231Only, false)],
        ),
        (
            "a section twice",
            named_part("Content-Type: application/pdf; name*0=a; name*1=b; name*1=c"),
            &[(Rule::PartNameRfc2231Only, false)],
        ),
        (
            "an unknown charset",
            named_part("Content-Type: application/pdf; name*=x-no-such-charset''%FF%FE.pdf"),
            &[(Rule::PartNameRfc2231Only, false)],
        ),
        (
            "not UTF-8 once decoded",
            named_part("Content-Type: application/pdf\nContent-Disposition: attachment; filename*=utf-8''%C3%28%A0%A1.pdf"),
            &[(Rule::PartNameRfc2231Only, false)],
        ),
        (
            "raw octets that are not UTF-8",
            {
                let m = named_part("Content-Type: application/pdf; name=\"#.pdf\"");
                let at = m.iter().position(|&b| b == b'#').unwrap();
                [&m[..at], b"\xff\xfe\xc3\x28", &m[at + 1..]].concat()
            },
            &[(Rule::PartName8bit, false)],
        ),
    ];
    for (name, raw, want) in &cases {
        let a = engine_run(name, raw, &opts());
        let mut got: Vec<(Rule, bool)> = a
            .findings
            .iter()
            .filter(|f| f.rule.misnames_part())
            .map(|f| (f.rule, f.fixable))
            .collect();
        got.dedup();
        assert_eq!(got, *want, "{name}");
        assert!(a.findings.iter().all(|f| f.message.len() < 1000), "{name}");
        let (fixed, _) = engine::fix(raw, &opts()).unwrap();
        // The body of every part comes out as it went in.
        assert!(fixed.ends_with(b"\n\nQUJDREVG\n--n--\n"), "{name}");
        assert!(
            memchr::memmem::find(&fixed, b"\n\nbody\n--n\n").is_some(),
            "{name}"
        );
        twins_hold_whole_characters(name, &fixed);
    }
}

/// Every encoded-word a fix wrote decodes, alone, to whole UTF-8 characters.
fn twins_hold_whole_characters(name: &str, fixed: &[u8]) {
    use base64::Engine as _;
    let text = String::from_utf8_lossy(fixed);
    for w in text.split("=?UTF-8?B?").skip(1) {
        let b64 = &w[..w.find("?=").unwrap_or(w.len())];
        let octets = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(std::str::from_utf8(&octets).is_ok(), "{name}: {b64}");
        assert!(
            b64.len() + 12 <= 75,
            "{name}: a word of {} octets",
            b64.len() + 12
        );
    }
}

#[test]
fn encoded_words_in_content_location() {
    let a = engine_run("RFC 2047 Content-Location", &encoded_location(), &opts());
    assert_fires(
        "RFC 2047 Content-Location",
        &a,
        Rule::RelatedLocationDuplicate,
    );
}

// ---------------------------------------------------------------------------------------
// Through the daemon: the same messages as an MTA hands them over. Each must end with an
// explicit verdict, and a replaced body must be exactly the engine's fix of the message
// (nothing lost, nothing cut).

use crate::support::message::to_crlf;
use crate::support::milter::{
    as_received, connect, header_changes, replaced_body, send, Envelope, Milter,
};
use indymilter_test::Status;
use mimeref_milter::Config;
use mimeref_milter::Direction;

/// Splits a hostile message into header fields and body as an MTA would pass them:
/// header values cannot carry NUL (C strings in the milter protocol), so NULs in the
/// heading are dropped; LF-only lines become CRLF in the body.
fn as_mta_sends(raw: &[u8]) -> Eml {
    let sep = memchr::memmem::find(raw, b"\n\n").map_or(raw.len(), |n| n + 1);
    let heading: Vec<u8> = raw[..sep].iter().copied().filter(|&b| b != 0).collect();
    let mut headers: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for line in heading.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        match (line[0], line.iter().position(|&b| b == b':')) {
            (b' ' | b'\t', _) if !headers.is_empty() => {
                let last = headers.len() - 1;
                headers[last].1.push(b'\n');
                headers[last].1.extend_from_slice(line);
            }
            (_, Some(c)) if c > 0 => headers.push((line[..c].to_vec(), line[c + 1..].to_vec())),
            _ => {}
        }
    }
    let body = raw.get(sep + 1..).unwrap_or_default();
    Eml {
        headers,
        body: to_crlf(body),
    }
}

use crate::support::milter::Eml;

async fn through_milter(m: &Milter, cfg: &Config, name: &str, raw: &[u8]) -> Status {
    let eml = as_mta_sends(raw);
    let t = Instant::now();
    let mut c = m.conn().await;
    connect(&mut c, "192.0.2.1", None).await;
    let env = Envelope {
        queue_id: Some("HOSTILE"),
        auth: None,
    };
    let (actions, status) = send(&mut c, &env, &eml).await;
    c.close().await.unwrap();
    eprintln!("milter {name}: {status:?} in {:?}", t.elapsed());
    assert!(
        t.elapsed() < TIME_BOUND,
        "{name}: milter took {:?}",
        t.elapsed()
    );
    // Default policy: nothing here is rejected or tempfailed, the message passes.
    assert!(
        matches!(status, Status::Accept | Status::Continue),
        "{name}: {status:?}"
    );
    // The message as the daemon buffers it (see `session.rs`).
    let buffered = as_received(&eml).0;
    let incomplete = buffered.len() > cfg.limits().max_message_size
        || buffered.len() - eml.body.len() > cfg.limits().max_header_size;
    match replaced_body(&actions) {
        Some(body) => {
            assert!(
                !incomplete,
                "{name}: body of an incomplete message replaced"
            );
            let (fixed, _) =
                engine::fix(&buffered, &cfg.engine_options(Direction::Inbound)).unwrap();
            let sep = memchr::memmem::find(&fixed, b"\r\n\r\n").unwrap() + 4;
            assert!(body == fixed[sep..], "{name}: replaced body is not the fix");
        }
        None => {
            for (field, _, v) in header_changes(&actions) {
                let v = v.unwrap_or_default();
                assert!(
                    !v.contains(&0) && !v.contains(&b'\r'),
                    "{name}: change of {field} carries CR or NUL"
                );
            }
        }
    }
    status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_mail_gets_a_verdict_from_the_daemon() {
    let m = Milter::start("hostile", "").await;
    let cfg = Config::builtin();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("deep multipart", deep_multipart(10_000)),
        ("deep rfc822", deep_rfc822(10_000)),
        ("100k parts", many_parts(100_000, "multipart/mixed")),
        // One header packet stays under the protocol's 1 MB; a longer line is a
        // protocol fault (tests/milter/milter_faults.rs).
        ("1 MB Subject", giant_line("Subject", "", 1_000_000)),
        (
            "1 MB Content-Location",
            giant_line("Content-Location", "http://example.org/", 1_000_000),
        ),
        // Past max_header_size: oversize, passed on untouched.
        ("100k fields", many_fields(100_000, "Received: from x")),
        ("no boundary", no_boundary()),
        ("prefix boundaries", prefix_boundaries()),
        ("NUL", nul_bytes()),
        ("bare CR", bare_cr()),
        ("bad charsets", bad_charsets()),
        ("50k URL", long_url(50_000)),
        ("10k continuations", continuations(10_000)),
        ("RFC 2047 Content-Location", encoded_location()),
        (
            "10 000 name sections",
            named_part(&reversed_sections(10_000, "%E2%82%AC")),
        ),
        (
            "300 name sections",
            named_part(&reversed_sections(300, "%E2%82%AC")),
        ),
        // A 10 MB body line.
        ("10 MB body", {
            let mut v = no_boundary();
            v.resize(v.len() + 10 * 1024 * 1024, b'x');
            v
        }),
    ];
    for (name, raw) in &cases {
        through_milter(&m, &cfg, name, raw).await;
    }
    m.stop().await;
}

/// Found by the engine_rfc822 fuzz target: a Content-Type whose value folds into a line
/// over 998 octets once fixed.
#[test]
fn fuzz_rfc822_long_content_type_fixes_whole() {
    let raw = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/fuzz-rfc822-long-content-type.eml"
    ))
    .unwrap();
    crate::support::invariants::fix_and_verify(
        "fuzz rfc822",
        &raw,
        &mimeref_milter::engine::Options::default(),
    );
}

/// Found by the engine fuzz target: an image whose Content-ID only a lenient reader
/// matches and which has no Content-Disposition. The Content-ID repair makes the
/// reference find it, so the disposition is offered in the same pass: fixing once
/// leaves nothing to fix.
#[test]
fn fuzz_engine_malformed_id_and_missing_disposition_fix_in_one_pass() {
    let raw = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/fuzz-engine-malformed-id-no-disposition.eml"
    ))
    .unwrap();
    let (fixed, a) = crate::support::invariants::fix_and_verify(
        "fuzz engine",
        &raw,
        &mimeref_milter::engine::Options::default(),
    );
    let rules: Vec<&str> = a.findings.iter().map(|f| f.rule.id()).collect();
    assert!(rules.contains(&"content-id-malformed"), "{rules:?}");
    assert!(
        rules.contains(&"related-part-disposition-missing"),
        "{rules:?}"
    );
    assert!(String::from_utf8_lossy(&fixed).contains("Content-Disposition: inline"));
}

/// Found by the engine fuzz target: several Content-Base fields (two in one heading;
/// one on a multipart and one on each HTML part in it). Taking out one would let the
/// next take its place, one repair after the other, so no removal is offered.
#[test]
fn fuzz_engine_several_content_bases_offer_no_removal() {
    for file in [
        "fuzz-engine-two-content-bases.eml",
        "fuzz-engine-content-bases-nested.eml",
    ] {
        let raw = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures")
                .join(file),
        )
        .unwrap();
        let (_, a) = crate::support::invariants::fix_and_verify(
            file,
            &raw,
            &mimeref_milter::engine::Options::default(),
        );
        let bases: Vec<&mimeref_milter::engine::Finding> = a
            .findings
            .iter()
            .filter(|f| f.rule.id() == "html-base-remote")
            .collect();
        assert!(!bases.is_empty(), "{file}: reported");
        assert!(bases.iter().all(|f| !f.fixable), "{file}: {bases:?}");
    }
}

/// Found by the engine fuzz target: a forwarded message's `name` whose last four octets
/// begin inside a character (`alert-20261121.\x95eml`, lossy `…\u{fffd}eml`). The `.eml`
/// test sliced the text there and panicked; read as octets it is no `.eml` name, so
/// `.eml` is added to it.
#[test]
fn fuzz_engine_rfc822_name_with_8bit_before_eml() {
    let raw = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/fuzz-engine-rfc822-name-8bit-before-eml.eml"
    ))
    .unwrap();
    let (_, a) = crate::support::invariants::fix_and_verify(
        "fuzz engine",
        &raw,
        &mimeref_milter::engine::Options::default(),
    );
    let f = a
        .findings
        .iter()
        .find(|f| f.rule.id() == "rfc822-encoded")
        .expect("rfc822-encoded reported");
    assert!(f.message.contains("\u{fffd}eml.eml"), "{}", f.message);
}

/// Found by the engine fuzz target (`fuzz/seeds/engine/rfc822-encoded-past-parts-limit-70`,
/// flags: few parts): two quoted-printable forwards, the second past `max_parts`.
/// Retyping the first made its own parts stop counting, so the second came into view
/// with a fix of its own: past the parts limit no forward is retyped.
#[test]
fn fuzz_engine_no_forward_retyped_past_the_parts_limit() {
    let data = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fuzz/seeds/engine/rfc822-encoded-past-parts-limit-70"
    ))
    .unwrap();
    let (&flags, raw) = data.split_first().unwrap();
    let opts = fuzz_options::options(flags);
    assert_eq!(opts.limits.max_parts, 8);
    let (_, a) = crate::support::invariants::fix_and_verify("parts limit", raw, &opts);
    let found: Vec<&mimeref_milter::engine::Finding> = a
        .findings
        .iter()
        .filter(|f| f.rule.id() == "rfc822-encoded")
        .collect();
    assert!(!found.is_empty());
    for f in found {
        assert!(!f.fixable, "{}", f.message);
        assert!(f.message.contains("parts limit"), "{}", f.message);
    }
    // Under the default limit both forwards are retyped in one pass.
    let (_, a) = crate::support::invariants::fix_and_verify(
        "no limit",
        raw,
        &mimeref_milter::engine::Options::default(),
    );
    let fixable = a
        .findings
        .iter()
        .filter(|f| f.rule.id() == "rfc822-encoded" && f.fixable)
        .count();
    assert_eq!(fixable, 2);
}

/// Every input the fuzz targets found (`tests/fixtures/fuzz-*.eml`) keeps the
/// invariants of a fix: among them a part that two references could each mean by a
/// different id, which is given neither (repairing it for one changed whom the other
/// could mean, one repair after another), and a part whose Content-Type gives a raw
/// 8-bit `name` twice, which the 8-bit repair once left half done.
#[test]
fn fuzz_engine_inputs_keep_the_fix_invariants() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        // And those of engine_rfc822, decoded from its tokens.
        if name.starts_with("fuzz-") && name.ends_with(".eml") {
            let raw = std::fs::read(&p).unwrap();
            crate::support::invariants::fix_and_verify(
                &name,
                &raw,
                &mimeref_milter::engine::Options::default(),
            );
            n += 1;
        }
    }
    assert!(n >= 4, "{n} inputs");
}

/// Found by the engine fuzz target (`fuzz/seeds/engine/retyped-forward-unknown-disposition-70`):
/// a base64 forward named on Content-Type only, under a Content-Disposition of an
/// unknown type. Offered as `application/octet-stream` it is listed as an attachment,
/// so its name is copied to `filename` in the same pass, and only with the retype.
#[test]
fn fuzz_engine_a_retyped_forward_gets_its_filename_in_the_same_pass() {
    let data = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fuzz/seeds/engine/retyped-forward-unknown-disposition-70"
    ))
    .unwrap();
    let (&flags, raw) = data.split_first().unwrap();
    let opts = fuzz_options::options(flags);
    let (fixed, a) = crate::support::invariants::fix_and_verify("retyped forward", raw, &opts);
    let text = String::from_utf8_lossy(&fixed);
    assert!(
        text.contains("Content-Disposition: attach0BleGFtK; filename=\"alert-20261121.eml\""),
        "{text}"
    );
    // The copy rides on the retype: without it the forward is a message, shown inline.
    let only_name = a.edits_for(|f| f.rule.id() == "part-name-one-field");
    assert!(only_name.is_empty(), "{only_name:?}");
}

#[path = "../support/fuzz_options.rs"]
mod fuzz_options;

/// The committed seeds of the engine fuzz target (`fuzz/seeds/engine/`: the first octet
/// picks the options, as the target reads it) keep the fix invariants, LF and CRLF.
#[test]
fn engine_fuzz_seeds_keep_the_fix_invariants() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/engine");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let data = std::fs::read(&p).unwrap();
        let Some((&flags, raw)) = data.split_first() else {
            continue;
        };
        let opts = fuzz_options::options(flags);
        engine_run(&name, raw, &opts);
        if flags & 16 != 0 {
            engine_run(&name, &to_crlf(raw), &opts);
        }
        n += 1;
    }
    assert!(n >= 8, "{n} seeds");
}
