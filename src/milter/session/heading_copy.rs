//! The copy of the heading that Stalwart sends at the start of the body: found, so that
//! the copy is analysed as the heading and does not come back in a replaced body.

/// The length of the copy of `heading` (the fields as received, CRLF, the empty line)
/// that `body` starts with, if it does: Stalwart sends the whole message, heading
/// included, as the body. Compared field by field, name exactly and value without the
/// white space around it (which Stalwart trims from the values it sends), so that only
/// a copy of this very heading matches; Stalwart sends a value that is not UTF-8 as
/// an empty one.
pub(super) fn heading_copy_len(heading: &[u8], body: &[u8]) -> Option<usize> {
    let (mut ours, mut theirs) = (0, 0);
    let mut fields = 0;
    loop {
        match (
            next_field(heading, &mut ours)?,
            next_field(body, &mut theirs)?,
        ) {
            (Err(_), Err(end)) => return (fields > 0 && ours == heading.len()).then_some(end),
            (Ok(a), Ok(b)) if same_field(a, b) => fields += 1,
            _ => return None,
        }
    }
}

/// The field at `*at` without its line end (`Ok`), or the end of the heading: the
/// empty line, with where it ends (`Err`). None when `b` ends first.
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
}
