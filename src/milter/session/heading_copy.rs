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
}
