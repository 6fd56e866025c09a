//! Message bytes: fixture files, line endings, and the heading split the ways the tests
//! need it. Plain std, so the fuzz targets and the examples can take it in by `#[path]`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// `tests/fixtures` of this repository.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// `tests/fixtures/REL` of this repository.
pub fn fixture_path(rel: &str) -> PathBuf {
    fixtures_dir().join(rel)
}

/// Reads `tests/fixtures/REL`.
pub fn fixture(rel: &str) -> Vec<u8> {
    let p = fixture_path(rel);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Lines including their terminator (the last one may have none).
pub fn lines(b: &[u8]) -> impl Iterator<Item = &[u8]> {
    b.split_inclusive(|&c| c == b'\n')
}

/// LF to CRLF, leaving existing CRLF alone (fixtures are stored with LF; on the wire
/// the body has CRLF).
pub fn to_crlf(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() + s.len() / 16);
    for (i, &b) in s.iter().enumerate() {
        if b == b'\n' && (i == 0 || s[i - 1] != b'\r') {
            out.push(b'\r');
        }
        out.push(b);
    }
    out
}

/// The message with every line ending as "\n" (how both MTAs store it).
pub fn to_lf(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len());
    for line in lines(b) {
        match line.strip_suffix(b"\r\n") {
            Some(l) => {
                out.extend_from_slice(l);
                out.push(b'\n');
            }
            None => out.extend_from_slice(line),
        }
    }
    if out.last() != Some(&b'\n') {
        out.push(b'\n');
    }
    out
}

/// Splits a message (LF line ends) into its header fields, each with its
/// continuation lines, and the rest (blank line + body).
pub fn split_fields(msg: &[u8]) -> (Vec<Vec<u8>>, Vec<u8>) {
    let mut fields: Vec<Vec<u8>> = Vec::new();
    let mut pos = 0;
    for line in lines(msg) {
        if line == b"\n" || line == b"\r\n" {
            break;
        }
        if matches!(line.first(), Some(b' ' | b'\t')) {
            if let Some(f) = fields.last_mut() {
                f.extend_from_slice(line);
                pos += line.len();
                continue;
            }
        }
        fields.push(line.to_vec());
        pos += line.len();
    }
    (fields, msg.get(pos..).unwrap_or_default().to_vec())
}

/// Values of all fields named `name` (case-insensitive), unfolded text
/// after the colon with surrounding whitespace trimmed.
pub fn header_values(msg: &[u8], name: &str) -> Vec<String> {
    let (fields, _) = split_fields(msg);
    fields
        .iter()
        .filter_map(|f| {
            let s = String::from_utf8_lossy(f);
            let (n, v) = s.split_once(':')?;
            n.eq_ignore_ascii_case(name)
                .then(|| v.replace("\r\n", "").replace('\n', "").trim().to_string())
        })
        .collect()
}

/// A heading as an MTA hands it to a milter, field by field.
pub struct MilterHeading {
    /// (name, value): the value with its leading space, folds as "\n", no line end.
    pub fields: Vec<(Vec<u8>, Vec<u8>)>,
    /// Where the body starts (after the blank line).
    pub body_at: usize,
    /// Lines left out: a continuation before any field, a line without a colon.
    pub stray: Vec<Vec<u8>>,
}

/// Splits the heading the way Postfix hands it over: each field as (name, value with
/// its leading space, folds as "\n"), line ends (LF or CRLF) dropped.
pub fn milter_heading(raw: &[u8]) -> MilterHeading {
    let mut fields: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut stray = Vec::new();
    let mut pos = 0;
    while pos < raw.len() {
        let end = raw[pos..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(raw.len(), |n| pos + n);
        let line = &raw[pos..end];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        pos = (end + 1).min(raw.len());
        if line.is_empty() {
            break;
        }
        if line[0] == b' ' || line[0] == b'\t' {
            match fields.last_mut() {
                Some(last) => {
                    last.1.push(b'\n');
                    last.1.extend_from_slice(line);
                }
                None => stray.push(line.to_vec()),
            }
        } else if let Some(c) = line.iter().position(|&b| b == b':') {
            fields.push((line[..c].to_vec(), line[c + 1..].to_vec()));
        } else {
            stray.push(line.to_vec());
        }
    }
    MilterHeading {
        fields,
        body_at: pos,
        stray,
    }
}

/// Puts a Message-ID field first, so a test finds its delivery by id.
pub fn with_message_id(msg: &[u8], id: &str) -> Vec<u8> {
    let mut out = format!("Message-ID: <{id}>\n").into_bytes();
    out.extend_from_slice(msg);
    out
}

/// Removes every field named `name` (case-insensitive) from the heading.
pub fn drop_fields(msg: &[u8], name: &str) -> Vec<u8> {
    let (fields, rest) = split_fields(msg);
    let mut out = Vec::with_capacity(msg.len());
    let prefix = format!("{}:", name.to_ascii_lowercase());
    for f in fields {
        let lower = String::from_utf8_lossy(&f).to_ascii_lowercase();
        if !lower.starts_with(&prefix) {
            out.extend_from_slice(&f);
        }
    }
    out.extend_from_slice(&rest);
    out
}

/// tests/fixtures/milter/nested-extbody.eml (a defect fixed in the body, so every
/// such message gets its body replaced) with a base64 attachment of about `size` octets put in before
/// the first (`last` false) or the closing (`last` true) occurrence of `delimiter`.
pub fn with_attachment(size: usize, delimiter: &[u8], last: bool) -> Vec<u8> {
    let raw = to_crlf(&fixture("milter/nested-extbody.eml"));
    let mut places = raw.windows(delimiter.len());
    let at = if last {
        places.rposition(|w| w == delimiter)
    } else {
        places.position(|w| w == delimiter)
    }
    .expect("delimiter");
    let mut out = raw[..at].to_vec();
    out.extend_from_slice(
        b"--outer\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n",
    );
    let line = b"QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAx\r\n";
    while out.len() < size {
        out.extend_from_slice(line);
    }
    out.extend_from_slice(&raw[at..]);
    out
}
