//! Benchmark messages, generated the same way on every run (a fixed-seed xorshift, no
//! clock, no files), so that figures from different machines describe the same bytes.
//! Shared by `benches/engine.rs` and the end-to-end tools in `examples/`.

#![allow(dead_code)]

/// Deterministic filler: xorshift64*, good enough to defeat compression-like shortcuts.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(n);
        v
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Base64 in 76-character lines, as mail clients send attachments.
pub fn base64_lines(data: &[u8], out: &mut Vec<u8>) {
    let mut col = 0;
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let quad = [
            B64[(n >> 18) as usize & 63],
            B64[(n >> 12) as usize & 63],
            if chunk.len() > 1 {
                B64[(n >> 6) as usize & 63]
            } else {
                b'='
            },
            if chunk.len() > 2 {
                B64[n as usize & 63]
            } else {
                b'='
            },
        ];
        out.extend_from_slice(&quad);
        col += 4;
        if col == 76 {
            out.extend_from_slice(b"\r\n");
            col = 0;
        }
    }
    if col > 0 {
        out.extend_from_slice(b"\r\n");
    }
}

const WORDS: &[&str] = &[
    "the",
    "message",
    "server",
    "queue",
    "relay",
    "report",
    "attached",
    "please",
    "review",
    "quarterly",
    "figures",
    "meeting",
    "tomorrow",
    "office",
    "network",
    "delivery",
    "customer",
    "invoice",
    "project",
    "schedule",
    "thanks",
    "regards",
    "update",
    "status",
    "pending",
];

/// Readable text in lines of about 70 characters.
pub fn text(rng: &mut Rng, n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n + 80);
    let mut col = 0;
    while out.len() < n {
        let w = WORDS[(rng.next() % WORDS.len() as u64) as usize];
        if col + w.len() > 70 {
            out.extend_from_slice(b"\r\n");
            col = 0;
        } else if col > 0 {
            out.push(b' ');
            col += 1;
        }
        out.extend_from_slice(w.as_bytes());
        col += w.len();
    }
    out.extend_from_slice(b"\r\n");
    out
}

fn heading(out: &mut Vec<u8>, subject: &str, ctype: &str) {
    out.extend_from_slice(
        format!(
            "Return-Path: <alice@example.org>\r\n\
             Received: from mx.example.org (mx.example.org [192.0.2.10])\r\n\tby mail.example.net (Postfix) with ESMTPS id 4AbCdEf;\r\n\tSat, 21 Nov 2026 10:00:00 +0000\r\n\
             From: Alice <alice@example.org>\r\n\
             To: Bob <bob@example.net>\r\n\
             Subject: {subject}\r\n\
             Date: Sat, 21 Nov 2026 10:00:00 +0000\r\n\
             Message-ID: <bench.{subject}@example.org>\r\n\
             MIME-Version: 1.0\r\n\
             Content-Type: {ctype}\r\n"
        )
        .as_bytes(),
    );
}

/// About 4 KB of text/plain.
pub fn small() -> Vec<u8> {
    let mut rng = Rng::new(1);
    let mut m = Vec::new();
    heading(&mut m, "small", "text/plain; charset=us-ascii");
    m.extend_from_slice(b"\r\n");
    let used = m.len();
    m.extend_from_slice(&text(&mut rng, 4096 - used - 2));
    m
}

/// About 60 KB multipart/related: quoted-printable HTML referring by cid: and by
/// Content-Location to three inline base64 images.
pub fn related() -> Vec<u8> {
    let mut rng = Rng::new(2);
    let mut m = Vec::new();
    heading(
        &mut m,
        "related",
        "multipart/related; boundary=\"rel-b0und\"; type=\"text/html\"",
    );
    m.extend_from_slice(b"\r\nThis is a multi-part message in MIME format.\r\n");
    m.extend_from_slice(
        b"--rel-b0und\r\nContent-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n",
    );
    let mut html = String::from("<html><head><title>Newsletter</title></head><body>\r\n");
    for i in 0..3 {
        html.push_str(&format!(
            "<p><img src=3D\"cid:img{i}.abc123@example.org\" alt=3D\"picture {i}\"></p>\r\n"
        ));
    }
    html.push_str("<p><img src=3D\"logo.png\"></p>\r\n");
    while html.len() < 12_000 {
        let t = text(&mut rng, 300);
        html.push_str("<p>");
        html.push_str(std::str::from_utf8(&t).unwrap_or("").trim_end());
        html.push_str("</p>=\r\n\r\n");
    }
    html.push_str("</body></html>\r\n");
    m.extend_from_slice(html.as_bytes());
    for i in 0..4 {
        m.extend_from_slice(
            b"--rel-b0und\r\nContent-Type: image/png\r\nContent-Transfer-Encoding: base64\r\n",
        );
        if i < 3 {
            m.extend_from_slice(format!("Content-ID: <img{i}.abc123@example.org>\r\n").as_bytes());
        } else {
            m.extend_from_slice(b"Content-Location: logo.png\r\n");
        }
        m.extend_from_slice(b"Content-Disposition: inline\r\n\r\n");
        let data = rng.bytes(8_500);
        base64_lines(&data, &mut m);
    }
    m.extend_from_slice(b"--rel-b0und--\r\n");
    m
}

/// multipart/mixed: a short text part and one base64 attachment, `size` octets in all.
pub fn attachment(size: usize) -> Vec<u8> {
    let mut rng = Rng::new(3);
    let mut m = Vec::with_capacity(size + 1024);
    heading(
        &mut m,
        "attachment",
        "multipart/mixed; boundary=\"mix-b0und\"",
    );
    m.extend_from_slice(b"\r\n--mix-b0und\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\n");
    m.extend_from_slice(&text(&mut rng, 600));
    m.extend_from_slice(
        b"--mix-b0und\r\nContent-Type: application/pdf; name=\"report.pdf\"\r\nContent-Transfer-Encoding: base64\r\nContent-Disposition: attachment; filename=\"report.pdf\"\r\n\r\n",
    );
    let room = size.saturating_sub(m.len() + 20);
    // 57 input octets make one 78-octet line.
    let data = rng.bytes(room / 78 * 57);
    base64_lines(&data, &mut m);
    m.extend_from_slice(b"--mix-b0und--\r\n");
    m
}

/// multipart/mixed with `n` small text parts.
pub fn many_parts(n: usize) -> Vec<u8> {
    let mut rng = Rng::new(4);
    let mut m = Vec::new();
    heading(&mut m, "parts", "multipart/mixed; boundary=\"p\"");
    m.extend_from_slice(b"\r\n");
    for i in 0..n {
        m.extend_from_slice(
            format!("--p\r\nContent-Type: text/plain\r\nContent-ID: <part{i}@example.org>\r\n\r\n")
                .as_bytes(),
        );
        m.extend_from_slice(&text(&mut rng, 40));
    }
    m.extend_from_slice(b"--p--\r\n");
    m
}

/// `n` parts as a message with many attachments has them: each of its own type with a
/// name, a disposition and a Content-ID, so that no two headings are alike (in
/// `many_parts` every Content-Type is the same `text/plain`). Not in `NAMES`: it is a
/// guarded figure (BENCHMARKS.md), not one of the throughput benchmarks.
pub fn many_named_parts(n: usize) -> Vec<u8> {
    const TYPES: [(&str, &str); 4] = [
        ("text/plain; charset=\"utf-8\"", "txt"),
        ("image/png", "png"),
        ("application/pdf", "pdf"),
        ("application/vnd.ms-excel", "xls"),
    ];
    let mut rng = Rng::new(6);
    let mut m = Vec::new();
    heading(&mut m, "named-parts", "multipart/mixed; boundary=\"p\"");
    m.extend_from_slice(b"\r\n");
    for i in 0..n {
        let (ctype, ext) = TYPES[i % TYPES.len()];
        m.extend_from_slice(
            format!(
                "--p\r\nContent-Type: {ctype}; name=\"part{i}.{ext}\"\r\n\
                 Content-Disposition: attachment; filename=\"part{i}.{ext}\"\r\n\
                 Content-ID: <part{i}@example.org>\r\n\r\n"
            )
            .as_bytes(),
        );
        m.extend_from_slice(&text(&mut rng, 40));
    }
    m.extend_from_slice(b"--p--\r\n");
    m
}

/// multipart/mixed: a short text part and `n` attachments named only in RFC 2231 form,
/// each name in two `*0*`/`*1*` continuations with %-encoded UTF-8 (as Apple Mail and
/// mail libraries write long non-ASCII names), on Content-Type and Content-Disposition
/// alike: every one has a name twin on offer (`part-name-rfc2231-only`).
pub fn rfc2231_named_parts(n: usize) -> Vec<u8> {
    let mut rng = Rng::new(8);
    let mut m = Vec::new();
    heading(&mut m, "rfc2231-names", "multipart/mixed; boundary=\"n\"");
    m.extend_from_slice(b"\r\n--n\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n");
    m.extend_from_slice(&text(&mut rng, 200));
    for i in 0..n {
        // "Überweisung März 2026 Nr. {i}" / "Rechnung-Ä{i}.pdf", split across two pieces.
        let (a, b) = (
            "%C3%9Cberweisung%20M%C3%A4rz%202026%20",
            format!("Nr.%20{i}%20Rechnung-%C3%84{i}.pdf"),
        );
        m.extend_from_slice(
            format!(
                "--n\r\nContent-Type: application/pdf;\r\n\tname*0*=utf-8''{a};\r\n\tname*1*={b}\r\n\
                 Content-Disposition: attachment;\r\n\tfilename*0*=utf-8''{a};\r\n\tfilename*1*={b}\r\n\
                 Content-Transfer-Encoding: base64\r\n\r\n"
            )
            .as_bytes(),
        );
        base64_lines(&rng.bytes(300), &mut m);
    }
    m.extend_from_slice(b"--n--\r\n");
    m
}

/// Five levels: mixed > related > alternative > message/rfc822 > mixed, with text, HTML
/// and small images at each level.
pub fn nested() -> Vec<u8> {
    let mut rng = Rng::new(5);
    let mut m = Vec::new();
    heading(&mut m, "nested", "multipart/mixed; boundary=\"L1\"");
    m.extend_from_slice(b"\r\n--L1\r\nContent-Type: text/plain\r\n\r\n");
    m.extend_from_slice(&text(&mut rng, 500));
    m.extend_from_slice(b"--L1\r\nContent-Type: multipart/related; boundary=\"L2\"\r\n\r\n");
    m.extend_from_slice(b"--L2\r\nContent-Type: multipart/alternative; boundary=\"L3\"\r\n\r\n");
    m.extend_from_slice(b"--L3\r\nContent-Type: text/plain\r\n\r\n");
    m.extend_from_slice(&text(&mut rng, 500));
    m.extend_from_slice(
        b"--L3\r\nContent-Type: text/html\r\n\r\n<p><img src=\"cid:pic@example.org\"></p>\r\n",
    );
    m.extend_from_slice(b"--L3\r\nContent-Type: message/rfc822\r\n\r\n");
    m.extend_from_slice(
        b"From: Carol <carol@example.com>\r\nSubject: forwarded\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"L5\"\r\n\r\n",
    );
    m.extend_from_slice(b"--L5\r\nContent-Type: text/plain\r\n\r\n");
    m.extend_from_slice(&text(&mut rng, 500));
    m.extend_from_slice(
        b"--L5\r\nContent-Type: image/gif\r\nContent-Transfer-Encoding: base64\r\n\r\n",
    );
    base64_lines(&rng.bytes(3000), &mut m);
    m.extend_from_slice(b"--L5--\r\n--L3--\r\n");
    m.extend_from_slice(b"--L2\r\nContent-Type: image/png\r\nContent-ID: <pic@example.org>\r\nContent-Transfer-Encoding: base64\r\n\r\n");
    base64_lines(&rng.bytes(3000), &mut m);
    m.extend_from_slice(b"--L2--\r\n--L1--\r\n");
    m
}

/// message/external-body, access-type URL, with a 2 KB URL folded the RFC 2017 way.
pub fn external_body() -> Vec<u8> {
    let mut rng = Rng::new(6);
    let mut url = String::from("https://files.example.org/download/");
    while url.len() < 2048 {
        let w = WORDS[(rng.next() % WORDS.len() as u64) as usize];
        url.push_str(w);
        url.push(if rng.next() % 4 == 0 { '/' } else { '-' });
    }
    url.push_str("file.pdf");
    let mut folded = String::new();
    let bytes = url.as_bytes();
    for (i, chunk) in bytes.chunks(60).enumerate() {
        if i > 0 {
            folded.push_str("\r\n       ");
        }
        folded.push_str(std::str::from_utf8(chunk).unwrap_or(""));
    }
    let mut m = Vec::new();
    heading(
        &mut m,
        "extbody",
        &format!("message/external-body; access-type=URL;\r\n\tURL=\"{folded}\""),
    );
    m.extend_from_slice(
        b"\r\nContent-Type: application/pdf\r\nContent-ID: <ext1@example.org>\r\n\r\n",
    );
    m
}

/// A heading of `n` header fields (trace and list fields), then a short text body.
pub fn many_headers(n: usize) -> Vec<u8> {
    let mut rng = Rng::new(7);
    let mut m = Vec::new();
    for i in 0..n {
        let line = match i % 4 {
            0 => format!(
                "Received: from relay{i}.example.net (relay{i}.example.net [198.51.100.{}])\r\n\tby mx.example.org with ESMTP id {:x}; Sat, 21 Nov 2026 10:00:00 +0000\r\n",
                i % 250,
                rng.next()
            ),
            1 => format!("X-Spam-Check-{i}: score=0.{} tests=NONE\r\n", rng.next() % 100),
            2 => format!("Comments: note {i} {:x}\r\n", rng.next()),
            _ => format!("X-Trace: {i}; ok\r\n"),
        };
        m.extend_from_slice(line.as_bytes());
    }
    heading(&mut m, "headers", "text/plain");
    m.extend_from_slice(b"\r\n");
    m.extend_from_slice(&text(&mut rng, 1000));
    m
}

/// The 60 KB newsletter of [`related`] with one image's `Content-Disposition: inline`
/// taken out (Outlook's form, so a repair is on offer under every signature) and, at
/// its top, `verdicts` Authentication-Results fields of the trusted id
/// `mx.test.example` (only the last names a signature: header.b of the first) and
/// `signatures` intact DKIM-Signatures (simple/simple, their real body hash). What
/// judging signatures costs when a sender or a forger piles them up: `signed-50`,
/// `verdicts-1000` (checked with `fix_signed = "verified"`, see `bench_msgs`).
pub fn signed(signatures: usize, verdicts: usize) -> Vec<u8> {
    use base64::Engine as _;
    use sha2::Digest as _;
    let rel = related();
    let split = rel.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(0) + 4;
    let (head, body) = rel.split_at(split);
    let body = String::from_utf8_lossy(body).replacen("Content-Disposition: inline\r\n", "", 1);
    let b64 = base64::engine::general_purpose::STANDARD;
    let bh = b64.encode(sha2::Sha256::digest(body.as_bytes()));
    let mut rng = Rng::new(7);
    let mut m = Vec::new();
    let sig_b: Vec<String> = (0..signatures.max(1))
        .map(|_| b64.encode(rng.bytes(256)))
        .collect();
    for v in 0..verdicts {
        let b = if v + 1 == verdicts {
            sig_b[0][..8].to_string()
        } else {
            b64.encode(rng.bytes(6))
        };
        m.extend_from_slice(
            format!(
                "Authentication-Results: mx.test.example;\r\n\tdkim=pass (2048-bit key; unprotected) header.d=example.org\r\n\theader.i=@example.org header.a=rsa-sha256 header.s=s{v} header.b={b}\r\n"
            )
            .as_bytes(),
        );
    }
    for (n, b) in sig_b.iter().enumerate().take(signatures) {
        let folded: Vec<&str> = b
            .as_bytes()
            .chunks(72)
            .map(|c| std::str::from_utf8(c).unwrap_or(""))
            .collect();
        m.extend_from_slice(
            format!(
                "DKIM-Signature: v=1; a=rsa-sha256; c=simple/simple; d=example.org; s=s{n};\r\n\tt=1795000000; h=from:to:subject:date:message-id:mime-version:content-type;\r\n\tbh={bh};\r\n\tb={}\r\n",
                folded.join("\r\n\t ")
            )
            .as_bytes(),
        );
    }
    m.extend_from_slice(head);
    m.extend_from_slice(body.as_bytes());
    m
}

/// The names of the benchmark messages, smallest first; `attach-200m` is the big one.
pub const NAMES: &[&str] = &[
    "text-4k",
    "related-60k",
    "extbody-2k-url",
    "nested-5",
    "headers-5000",
    "parts-10000",
    "attach-2m",
    "attach-50m",
    "attach-200m",
];

/// One benchmark message by name.
pub fn named(name: &str) -> Option<Vec<u8>> {
    Some(match name {
        "text-4k" => small(),
        "related-60k" => related(),
        "extbody-2k-url" => external_body(),
        "nested-5" => nested(),
        "headers-5000" => many_headers(5000),
        "parts-10000" => many_parts(10_000),
        "parts-10000-named" => many_named_parts(10_000),
        "attach-2m" => attachment(2 << 20),
        "attach-20m" => attachment(20 << 20),
        "attach-50m" => attachment(50 << 20),
        "attach-200m" => attachment(200 << 20),
        "names-1000" => rfc2231_named_parts(1000),
        "names-2000" => rfc2231_named_parts(2000),
        // Any count: `signed-100`, `verdicts-2000` show how the cost grows.
        n if n.starts_with("signed-") => signed(n["signed-".len()..].parse().ok()?, 1),
        n if n.starts_with("verdicts-") => signed(1, n["verdicts-".len()..].parse().ok()?),
        _ => return None,
    })
}
