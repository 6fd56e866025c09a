//! The copy of the heading that Stalwart sends at the start of the body: found, so that
//! the copy is analysed as the heading and does not come back in a replaced body.

use std::ops::{ControlFlow, Range};

use crate::engine::model::mime;

/// The length of the copy of `heading` (the fields as received, CRLF, the empty line)
/// that `body` starts with, if it does: Stalwart sends the whole message, heading
/// included, as the body. Compared field by field, name exactly and value without the
/// white space around it (which Stalwart trims from the values it sends), so that only
/// a copy of this very heading matches; Stalwart sends a value that is not UTF-8 as
/// an empty one.
pub(super) fn heading_copy_len(heading: &[u8], body: &[u8]) -> Option<usize> {
    let ours = Fields::read(heading, usize::MAX)?;
    if ours.fields.is_empty() || ours.end != heading.len() {
        return None;
    }
    let theirs = Fields::read(body, ours.fields.len())?;
    (ours.fields.len() == theirs.fields.len()
        && ours
            .fields
            .iter()
            .zip(&theirs.fields)
            .all(|(a, b)| same_field(a, b)))
    .then_some(theirs.end)
}

/// A heading's lines as this comparison has always taken them: each line with its
/// continuation lines is one field, whether the scan calls it a field or not, up to
/// the first empty line in CRLF, and where that line ends.
struct Fields<'a> {
    fields: Vec<&'a [u8]>,
    end: usize,
}

impl<'a> Fields<'a> {
    /// None when `b` has no empty line in CRLF, or more than `most` fields before it
    /// (no copy then; the rest of a large body is not read for it).
    fn read(b: &'a [u8], most: usize) -> Option<Fields<'a>> {
        let mut fields = Vec::new();
        let mut start = 0;
        loop {
            let end = next_empty_line(b, start)?;
            read_stretch(b, start..end, &mut fields, most)?;
            if b[end] == b'\r' {
                return Some(Fields {
                    fields,
                    end: end + 2,
                });
            }
            start = end;
        }
    }
}

/// How much of a stretch the scan is handed at a time, so that a body of short lines
/// and no empty line (up to `max_message_size`) is not turned into a field per line
/// before the count is seen to be past the heading's.
const SCAN_AT_ONCE: usize = 16 * 1024;

/// The fields of `stretch`, which holds no empty line but may begin with a bare LF
/// one, added to `fields`; None once there are more than `most`.
///
/// The engine's heading scan, read on past stray lines a piece at a time
/// ([`mime::fields_read_on_by_piece`]), reads the stretch. What it hands over nowhere
/// is taken here from where it starts reading: the continuation lines before its first
/// field, and an empty line in bare LF, which ends its heading but is a line of its
/// own to a milter and, with continuation lines after it, a field that may hold a
/// colon.
fn read_stretch<'a>(
    b: &'a [u8],
    stretch: Range<usize>,
    fields: &mut Vec<&'a [u8]>,
    most: usize,
) -> Option<()> {
    let after_lf = stretch.start + usize::from(b.get(stretch.start) == Some(&b'\n'));
    let (mut leading, mut over) = (true, false);
    mime::fields_read_on_by_piece(&b[after_lf..stretch.end], SCAN_AT_ONCE, |piece| {
        if let (true, Some(f)) = (leading, piece.first()) {
            leading = false;
            if after_lf + f.start > stretch.start {
                fields.push(without_line_end(&b[stretch.start..after_lf + f.start]));
            }
        }
        fields.extend(
            piece
                .iter()
                .map(|f| &b[after_lf + f.start..after_lf + f.value.end]),
        );
        over = fields.len() > most;
        if over {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    if leading && stretch.end > stretch.start {
        fields.push(without_line_end(&b[stretch.start..stretch.end]));
    }
    (!over && fields.len() <= most).then_some(())
}

/// Where the next empty line after `start` begins (`b` itself when it begins with a
/// CRLF one): the scan ends a heading there.
fn next_empty_line(b: &[u8], start: usize) -> Option<usize> {
    if start == 0 && b.starts_with(b"\r\n") {
        return Some(0);
    }
    memchr::memchr_iter(b'\n', &b[start..]).find_map(|lf| {
        let next = start + lf + 1;
        matches!(&b[next..], [b'\n', ..] | [b'\r', b'\n', ..]).then_some(next)
    })
}

/// `lines` without the LF that ends them and the CR before it, if any.
fn without_line_end(lines: &[u8]) -> &[u8] {
    let lines = &lines[..lines.len() - 1];
    match lines {
        [.., b'\r'] => &lines[..lines.len() - 1],
        _ => lines,
    }
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

    /// Where the engine's scan alone would answer otherwise than the line reader it
    /// replaced: a heading with a line that is no field to the scan (a name that is
    /// empty or holds white space, a control or an 8-bit octet; a first line that begins
    /// with "From "), continuation lines before the first field, or an empty line in
    /// bare LF followed by continuation lines, is found copied when the body repeats it,
    /// as it always was.
    #[test]
    fn a_heading_the_scan_does_not_read_whole_is_found_as_before() {
        for heading in [
            &b"X Y: a\r\n\r\n"[..],
            b": a\r\n\r\n",
            b"X: a\r\n\xe9: b\r\n\r\n",
            b"From : a\r\n\r\n",
            b" X: a\r\n\r\n",
            b"X: a\r\n\n y: b\r\n\r\n",
            b"\n\tX: a\r\n\r\n",
        ] {
            let mut body = heading.to_vec();
            body.extend_from_slice(b"hello\r\n");
            assert_eq!(
                heading_copy_len(heading, &body),
                Some(heading.len()),
                "{heading:?}"
            );
        }
    }

    /// Against the line reader this file used before the engine's scan, kept below as
    /// the oracle: the same answer on every heading and body, generated from the
    /// octets where the two could part (colon, white space, CR, LF, NUL, 8-bit, the
    /// letters of an mbox "From "), bodies mostly copies of their heading with an octet
    /// changed, so that copies are found as well as missed.
    #[test]
    fn answers_are_those_of_the_old_line_reader() {
        const PIECES: &[&[u8]] = &[
            b":",
            b" ",
            b"\t",
            b"\r",
            b"\n",
            b"\r\n",
            b"\0",
            b"\xff",
            b"From ",
            b"From",
            b"X",
            b"a",
            b"m",
            b"X: a\r\n",
            b": b\r\n",
            b"\r\n ",
            b"\n\t",
        ];
        const OCTETS: &[u8] = b": \t\r\n\0\xffFromXa";
        // xorshift64*: deterministic, and enough to spread the cases.
        let mut rng = crate::xorshift::XorShift64::new(0x9e37_79b9_7f4a_7c15);
        let mut next = move |n: usize| rng.below(n);
        let (mut found, mut missed) = (0, 0);
        for _ in 0..200_000 {
            let mut heading = Vec::new();
            for _ in 0..next(8) {
                heading.extend_from_slice(PIECES[next(PIECES.len())]);
            }
            if next(4) > 0 {
                heading.extend_from_slice(b"\r\n\r\n");
            }
            let mut body = heading.clone();
            match next(6) {
                0 => body = (0..next(12)).map(|_| OCTETS[next(OCTETS.len())]).collect(),
                1 if !body.is_empty() => body[next(heading.len())] = OCTETS[next(OCTETS.len())],
                2 => body.insert(next(heading.len() + 1), OCTETS[next(OCTETS.len())]),
                3 if !body.is_empty() => drop(body.remove(next(heading.len()))),
                _ => {}
            }
            body.extend_from_slice(&b"\r\n\r\nhello\r\n"[next(4) * 2..]);
            let want = old::heading_copy_len(&heading, &body);
            assert_eq!(
                heading_copy_len(&heading, &body),
                want,
                "{:?} in {:?}",
                String::from_utf8_lossy(&heading),
                String::from_utf8_lossy(&body)
            );
            if want.is_some() {
                found += 1;
            } else {
                missed += 1;
            }
        }
        // Both answers were put to the test, not only the common "no copy".
        assert!(
            found > 5_000 && missed > 5_000,
            "{found} found, {missed} missed"
        );
    }

    /// A heading longer than the scan is handed at once is read to the same answer,
    /// folds across the cuts included; a body of short lines and no empty line is given
    /// up on once past the heading's count of fields.
    #[test]
    fn long_headings_and_bodies_keep_their_answers() {
        let mut heading = b" lead: x\r\n".to_vec();
        for i in 0..3_000 {
            heading.extend_from_slice(format!("X-{i}: value\r\n\t folded {i}\r\n").as_bytes());
            if i % 700 == 0 {
                heading.extend_from_slice(b"From stray: line\r\n\n y: z\r\n");
            }
        }
        heading.extend_from_slice(b"\r\n");
        assert!(heading.len() > 4 * SCAN_AT_ONCE);
        let mut body = heading.clone();
        body.extend_from_slice(b"hello\r\n");
        assert_eq!(heading_copy_len(&heading, &body), Some(heading.len()));
        for at in [
            SCAN_AT_ONCE - 3,
            SCAN_AT_ONCE,
            2 * SCAN_AT_ONCE + 1,
            body.len() - 12,
        ] {
            for octet in [b'\n', b' ', b':', b'Z'] {
                let mut body = body.clone();
                body[at] = octet;
                let want = old::heading_copy_len(&heading, &body);
                assert_eq!(heading_copy_len(&heading, &body), want, "{at} {octet}");
            }
        }
        let mut lines = b"X: a\r\n".repeat(2);
        lines.extend_from_slice(&b"a\n".repeat(4_000_000));
        lines.extend_from_slice(b"\r\n");
        assert_eq!(heading_copy_len(b"X: a\r\nX: a\r\n\r\n", &lines), None);
    }

    /// The line reader as it was before the engine's scan replaced it (e17ba08,
    /// src/milter/session.rs), word for word: the oracle of the test above.
    mod old {
        use super::super::same_field;

        pub fn heading_copy_len(heading: &[u8], body: &[u8]) -> Option<usize> {
            let (mut ours, mut theirs) = (0, 0);
            let mut fields = 0;
            loop {
                match (
                    next_field(heading, &mut ours)?,
                    next_field(body, &mut theirs)?,
                ) {
                    (Err(_), Err(end)) => {
                        return (fields > 0 && ours == heading.len()).then_some(end)
                    }
                    (Ok(a), Ok(b)) if same_field(a, b) => fields += 1,
                    _ => return None,
                }
            }
        }

        fn next_field<'a>(b: &'a [u8], at: &mut usize) -> Option<Result<&'a [u8], usize>> {
            if b[*at..].starts_with(b"\r\n") {
                *at += 2;
                return Some(Err(*at));
            }
            let start = *at;
            loop {
                let nl = memchr::memchr(b'\n', &b[*at..])? + *at;
                *at = nl + 1;
                if !matches!(b.get(*at), Some(b' ' | b'\t')) {
                    let end = if nl > start && b[nl - 1] == b'\r' {
                        nl - 1
                    } else {
                        nl
                    };
                    return Some(Ok(&b[start..end]));
                }
            }
        }
    }
}
