//! The copy of the heading that Stalwart sends at the start of the body: found, so that
//! the copy is analysed as the heading and does not come back in a replaced body.

use crate::engine::model::mime;
use crate::engine::Limits;

/// The length of the copy of `heading` (the fields as received, CRLF, the empty line)
/// that `body` starts with, if it does: Stalwart sends the whole message, heading
/// included, as the body. Compared field by field, name exactly and value without the
/// white space around it (which Stalwart trims from the values it sends), so that only
/// a copy of this very heading matches; Stalwart sends a value that is not UTF-8 as
/// an empty one.
pub(super) fn heading_copy_len(heading: &[u8], body: &[u8]) -> Option<usize> {
    let ours = Fields::read(heading)?;
    if ours.end != heading.len() {
        return None;
    }
    let theirs = Fields::read(body)?;
    (ours.fields.len() == theirs.fields.len()
        && ours
            .fields
            .iter()
            .zip(&theirs.fields)
            .all(|(a, b)| same_field(a, b)))
    .then_some(theirs.end)
}

/// The top-level fields of a heading as the engine's heading scan reads them, each
/// from its name to the end of its value (folds included), and where the empty line
/// after them ends.
struct Fields<'a> {
    fields: Vec<&'a [u8]>,
    end: usize,
}

impl<'a> Fields<'a> {
    /// None unless the scan reads `b` as one or more fields from its first octet on,
    /// ended by an empty line in CRLF: a line before the first field, one that is not a
    /// field, an mbox From line, a bare LF empty line or none at all is no heading the
    /// MTA sent.
    fn read(b: &'a [u8]) -> Option<Fields<'a>> {
        // The scan reads no further than the first empty line; the body after it
        // (megabytes, maybe a multipart to split) is not given to it.
        let end = empty_line_end(b)?;
        let msg = mime::Message::parse(&b[..end], &Limits::default().heading_only());
        let top = msg.entities.first()?;
        let fields = msg.fields(top);
        let (first, last) = (fields.first()?, fields.last()?);
        if first.start != 0 || top.no_separator || b.get(last.end..end) != Some(&b"\r\n"[..]) {
            return None;
        }
        Some(Fields {
            fields: fields.iter().map(|f| &b[f.start..f.value.end]).collect(),
            end,
        })
    }
}

/// Where the first empty line of `b` ends: what the heading scan needs to see of it.
fn empty_line_end(b: &[u8]) -> Option<usize> {
    if b.starts_with(b"\n") || b.starts_with(b"\r\n") {
        return Some(if b[0] == b'\n' { 1 } else { 2 });
    }
    memchr::memchr_iter(b'\n', b).find_map(|lf| match &b[lf + 1..] {
        [b'\n', ..] => Some(lf + 2),
        [b'\r', b'\n', ..] => Some(lf + 3),
        _ => None,
    })
}

/// The same field: the name (with any white space before the colon) exactly, the value
/// without the white space around it, or empty for a value that is not UTF-8.
fn same_field(a: &[u8], b: &[u8]) -> bool {
    match (memchr::memchr(b':', a), memchr::memchr(b':', b)) {
        (Some(ca), Some(cb)) => {
            let (va, vb) = (a[ca + 1..].trim_ascii(), b[cb + 1..].trim_ascii());
            a[..ca] == b[..cb] && (va == vb || va.is_empty() && std::str::from_utf8(vb).is_err())
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_that_repeats_the_heading_is_found() {
        let heading = b"From: a@example.org\r\nSubject: one\r\n two\r\n\r\n";
        let copy = b"From:   a@example.org\r\nSubject:\tone\r\n two \r\n\r\n";
        let mut body = copy.to_vec();
        body.extend_from_slice(b"hello\r\n");
        assert_eq!(heading_copy_len(heading, &body), Some(copy.len()));
        // A value that is not UTF-8 reaches the milter empty.
        let copy = b"From: a@example.org\r\nSubject: caf\xe9\r\n\r\n";
        assert_eq!(
            heading_copy_len(b"From: a@example.org\r\nSubject:\r\n\r\n", copy),
            Some(copy.len())
        );
        // Another value, another name, one field fewer, no empty line: no copy.
        for other in [
            &b"From: b@example.org\r\nSubject: one\r\n two\r\n\r\n"[..],
            b"Frum: a@example.org\r\nSubject: one\r\n two\r\n\r\n",
            b"From: a@example.org\r\n\r\n",
            b"From: a@example.org\r\nSubject: one\r\n two\r\n",
            b"hello\r\n",
            b"From: a@example.org\r\nSubject: caf\xe9\r\n two\r\n\r\n",
        ] {
            assert_eq!(heading_copy_len(heading, other), None, "{other:?}");
        }
    }

    /// Today's answers on the inputs where a header reader may differ (folds, bare LF,
    /// no colon, NUL, no empty line, an mbox From line, white space at odd places),
    /// pinned before the reader changed.
    #[test]
    fn odd_headings_keep_their_answers() {
        let heading = b"From: a@example.org\r\nSubject: one\r\n two\r\n\r\n";
        let lf_folds = b"From: a@example.org\r\nSubject: one\n two\r\n\r\n";
        let cases: &[(&[u8], &[u8], Option<usize>)] = &[
            // Folded: the fold as the MTA sent it, CRLF or LF.
            (
                heading,
                b"From: a@example.org\r\nSubject: one\r\n two\r\n\r\nhi",
                Some(43),
            ),
            (
                lf_folds,
                b"From: a@example.org\r\nSubject: one\n two\r\n\r\nhi",
                Some(42),
            ),
            (
                lf_folds,
                b"From: a@example.org\r\nSubject: one\r\n two\r\n\r\nhi",
                None,
            ),
            (
                heading,
                b"From: a@example.org\r\nSubject: one\r\n\ttwo\r\n\r\n",
                None,
            ),
            (
                heading,
                b"From: a@example.org\r\nSubject:\r\n one\r\n two\r\n\r\n",
                Some(45),
            ),
            // Bare LF: ending a field, a fold, or the heading.
            (
                heading,
                b"From: a@example.org\nSubject: one\r\n two\n\r\nhi",
                Some(41),
            ),
            (
                heading,
                b"From: a@example.org\r\nSubject: one\r\n two\r\n\nhi",
                None,
            ),
            (
                heading,
                b"From: a@example.org\nSubject: one\n two\n\n",
                None,
            ),
            (b"X: a\n\nb\r\n\r\n", b"X: a\n\nb\r\n\r\n", None),
            (b"X: a\n\r\nb\r\n\r\n", b"X: a\n\r\nb\r\n\r\n", None),
            (b"X: a\nY: b\r\n\r\n", b"X: a\r\nY: b\r\n\r\n", Some(14)),
            (b"X: a\r\n\r\n", b"X: a\r\n\r\n\r\n", Some(8)),
            // A bare CR is no line end.
            (b"X: a\rY: b\r\n\r\n", b"X: a\rY: b\r\n\r\n", Some(13)),
            (b"X: a\r\n\r\n", b"X: a\r\r\n\r\n", Some(9)),
        ];
        pinned(cases);
    }

    /// Each case's answer as pinned.
    fn pinned(cases: &[(&[u8], &[u8], Option<usize>)]) {
        for (i, (heading, body, want)) in cases.iter().enumerate() {
            assert_eq!(
                heading_copy_len(heading, body),
                *want,
                "case {i}: {:?} in {:?}",
                String::from_utf8_lossy(heading),
                String::from_utf8_lossy(body)
            );
        }
    }

    /// As above: lines that are no field, and headings that end early or late.
    #[test]
    fn headings_that_end_oddly_keep_their_answers() {
        let heading = b"From: a@example.org\r\nSubject: one\r\n two\r\n\r\n";
        let cases: &[(&[u8], &[u8], Option<usize>)] = &[
            // No colon.
            (
                heading,
                b"From a@example.org\r\nSubject: one\r\n two\r\n\r\n",
                None,
            ),
            (b"X: a\nb\r\n\r\n", b"X: a\nb\r\n\r\n", None),
            (b"X: a\r\n\r\n", b"X: a\r\nno colon\r\n\r\n", None),
            // NUL.
            (b"X: a\r\n\r\n", b"X: a\0\r\n\r\n", None),
            (b"X: a\r\n\r\n", b"X\0: a\r\n\r\n", None),
            (b"X: a\r\nY: b\r\n\r\n", b"X: a\r\n\0Y: b\r\n\r\n", None),
            // No empty line, or the body ends first.
            (
                heading,
                b"From: a@example.org\r\nSubject: one\r\n two\r\n",
                None,
            ),
            (
                heading,
                b"From: a@example.org\r\nSubject: one\r\n two",
                None,
            ),
            (heading, b"From: a@example.org\r\n", None),
            (heading, b"", None),
            (heading, b"\r\n", None),
            (b"X: a\r\n", b"X: a\r\n\r\n", None),
            (b"\r\n", b"\r\n", None),
            (b"X: a\r\n\r\nmore", b"X: a\r\n\r\nmore", None),
            // An mbox From line, white space before the first field or the colon.
            (
                heading,
                b"From x\r\nFrom: a@example.org\r\nSubject: one\r\n two\r\n\r\n",
                None,
            ),
            (b"From: a\r\n\r\n", b"From : a\r\n\r\n", None),
            (b"X : a\r\n\r\n", b"X : a\r\n\r\n", Some(9)),
            (b"X: a\r\n\r\n", b" X: a\r\n\r\n", None),
            (b"X: a\r\n\r\n", b" y\r\nX: a\r\n\r\n", None),
            // One field more or fewer, in either.
            (b"X: a\r\nY: b\r\n\r\n", b"X: a\r\n\r\n", None),
            (b"X: a\r\n\r\n", b"X: a\r\nY: b\r\n\r\n", None),
        ];
        pinned(cases);
    }

    /// The one place the engine's heading scan answers otherwise than the line reader
    /// it replaced: a heading with a line that is no field to the scan (a name that is
    /// empty or holds white space, a control or an 8-bit octet; a first line that begins
    /// with "From ") is not taken as copied, though the body repeat it. Only an MTA
    /// that sends such a name can make such a heading; the analysis reads the message
    /// the same way, ending its heading at that line.
    #[test]
    fn a_heading_the_scan_does_not_read_whole_is_not_taken_as_copied() {
        for heading in [
            &b"X Y: a\r\n\r\n"[..],
            b": a\r\n\r\n",
            b"X: a\r\n\xe9: b\r\n\r\n",
            b"From : a\r\n\r\n",
            b" X: a\r\n\r\n",
        ] {
            let mut body = heading.to_vec();
            body.extend_from_slice(b"hello\r\n");
            assert_eq!(heading_copy_len(heading, &body), None, "{heading:?}");
        }
    }
}
