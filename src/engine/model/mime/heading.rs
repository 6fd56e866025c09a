//! The heading reader: the header fields of one heading, each as byte offsets (name,
//! value, end), and where its body starts.
//!
//! It runs over every line of every heading, so it is written for speed (a field's name
//! is measured eight octets at a time, its line searched from the colon). Its readers
//! that go on past a stray line (`fields_read_on`) serve scope matching and `survey`,
//! which must read the same fields as the scan.

use std::ops::{ControlFlow, Range};

/// One header field: `name: value EOL` (with any folded continuation lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// First octet of the name.
    pub start: usize,
    pub name: Range<usize>,
    /// After the colon up to (not including) the line ending that ends the field.
    pub value: Range<usize>,
    /// After the line ending that ends the field (or `value.end` at end of input).
    pub end: usize,
}

/// Where a heading read by [`read_heading`] lies, and how its lines end.
pub(super) struct Heading {
    pub(super) header: Range<usize>,
    pub(super) body: Range<usize>,
    pub(super) crlf: bool,
    pub(super) no_separator: bool,
}

/// Reads header fields from `range.start` until an empty line, or until a line that is
/// neither a field nor a continuation (then the body starts at that line).
/// The fields are appended to `all`.
pub(super) fn read_heading(
    buf: &[u8],
    range: Range<usize>,
    top: bool,
    all: &mut Vec<Field>,
) -> Heading {
    let end = range.end;
    let mut pos = range.start;
    let first = all.len();
    let fields = all;
    let mut crlf_lines = 0usize;
    let mut lf_lines = 0usize;
    // An mbox "From " envelope line is not part of the message proper.
    if top && buf[pos..end].starts_with(b"From ") {
        pos = line_end(buf, pos, end).1;
    }
    let header_start = pos;
    let mut body_start = end;
    let mut no_separator = true;
    let mut last_line_end = pos;
    // Counts a line's ending: CRLF, LF, or none (the last line of the input).
    let mut count = |content_end: usize, next: usize| match next - content_end {
        2 => crlf_lines += 1,
        1 => lf_lines += 1,
        _ => {}
    };
    while pos < end {
        // Each kind of line is handled whole in its arm: the empty line that ends the
        // heading needs no search for its end, and a field's line is searched from its
        // colon, the name having just been read.
        match buf[pos] {
            b'\n' => {
                count(pos, pos + 1);
                body_start = pos + 1;
                no_separator = false;
                break;
            }
            b'\r' if pos + 1 < end && buf[pos + 1] == b'\n' => {
                count(pos, pos + 2);
                body_start = pos + 2;
                no_separator = false;
                break;
            }
            b' ' | b'\t' => {
                // A continuation. Before any field it belongs to nothing; keep it in the
                // heading so that the bytes are not mistaken for body.
                let (content_end, next) = line_end(buf, pos, end);
                count(content_end, next);
                if let Some(f) = fields[first..].last_mut() {
                    f.value.end = content_end;
                    f.end = next;
                }
                last_line_end = next;
                pos = next;
            }
            _ => match field_name_end(&buf[pos..end]) {
                Some((name_len, colon)) => {
                    let (content_end, next) = line_end(buf, pos + colon + 1, end);
                    count(content_end, next);
                    fields.push(Field {
                        start: pos,
                        name: pos..pos + name_len,
                        value: pos + colon + 1..content_end,
                        end: next,
                    });
                    last_line_end = next;
                    pos = next;
                }
                None => {
                    let (content_end, next) = line_end(buf, pos, end);
                    count(content_end, next);
                    body_start = pos;
                    break;
                }
            },
        }
    }
    if pos >= end {
        body_start = end;
    }
    let header_end = fields[first..]
        .last()
        .map_or(header_start, |f| f.end)
        .max(last_line_end.min(body_start));
    Heading {
        header: header_start..header_end.max(header_start),
        body: body_start.min(end)..end,
        crlf: crlf_lines >= lf_lines && crlf_lines > 0,
        no_separator,
    }
}

/// The top-level heading at the start of `buf` read on past the lines that are no field,
/// up to the empty line or the end: the fields the heading scan reads, and in its order
/// each line where it would start the body, with the continuation lines after it, as a
/// field whose name is empty and whose value starts at the line's first octet. For
/// readers that pass over a stray line rather than take the rest for the body: scope
/// matching and `survey`. An mbox `From ` line is such a line here.
pub fn fields_read_on(buf: &[u8]) -> Vec<Field> {
    let end = buf.len();
    let mut fields = Vec::new();
    let mut pos = 0;
    while pos < end {
        let h = read_heading(buf, pos..end, false, &mut fields);
        if !h.no_separator || h.body.start >= end {
            break;
        }
        let start = h.body.start;
        let (mut value_end, mut next) = line_end(buf, start, end);
        while next < end && matches!(buf[next], b' ' | b'\t') {
            (value_end, next) = line_end(buf, next, end);
        }
        fields.push(Field {
            start,
            name: start..start,
            value: start..value_end,
            end: next,
        });
        pos = next;
    }
    fields
}

/// [`fields_read_on`] over `buf` handed about `piece` octets at a time, each piece cut
/// where a line that is no continuation line begins, so that the scan reads the same
/// fields as over the whole: each piece's fields, with offsets into `buf`, go to `each`
/// until the heading ends or `each` breaks. A caller that keeps few of them holds one
/// piece's records at a time, not one per line of a large message file that has no
/// empty line.
pub fn fields_read_on_by_piece(
    buf: &[u8],
    piece: usize,
    mut each: impl FnMut(&[Field]) -> ControlFlow<()>,
) {
    let mut at = 0;
    while at < buf.len() {
        let cut = next_field_start(buf, (at + piece.max(1)).min(buf.len()), buf.len());
        let mut fields = fields_read_on(&buf[at..cut]);
        // The scan stopped before the cut at the empty line that ends the heading; a
        // first piece of nothing but continuation lines gives no field and no end.
        let ended = match fields.last() {
            Some(f) => f.end != cut - at,
            None => {
                let continuation = matches!(buf.first(), Some(b' ' | b'\t'));
                !(at == 0 && continuation && next_field_start(buf, 0, cut) == cut)
            }
        };
        for f in &mut fields {
            let shift = |r: &Range<usize>| r.start + at..r.end + at;
            (f.start, f.name, f.value, f.end) =
                (f.start + at, shift(&f.name), shift(&f.value), f.end + at);
        }
        if each(&fields).is_break() || ended {
            return;
        }
        at = cut;
    }
}

/// Where the first line at or after `from` that is no continuation line begins, or
/// `end`: a heading handed to the scan in two pieces cut there reads as one.
pub fn next_field_start(b: &[u8], from: usize, end: usize) -> usize {
    memchr::memchr_iter(b'\n', &b[from..end])
        .map(|lf| from + lf + 1)
        .find(|&next| next == end || !matches!(b[next], b' ' | b'\t'))
        .unwrap_or(end)
}

/// The length of the name and the position of the colon when `line` starts with a
/// field name (printable ASCII, no colon; obsolete whitespace before the colon allowed,
/// and not part of the name).
fn field_name_end(line: &[u8]) -> Option<(usize, usize)> {
    let i = name_len(line);
    if i == 0 {
        return None;
    }
    let mut j = i;
    while j < line.len() && matches!(line[j], b' ' | b'\t') {
        j += 1;
    }
    (j < line.len() && line[j] == b':').then_some((i, j))
}

/// How many octets at the start of `line` are [`FIELD_NAME`] octets. Eight at a time
/// while eight are left: it runs over the name of every field of every part.
pub(super) fn name_len(line: &[u8]) -> usize {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let mut at = 0;
    while let Some(word) = line.get(at..at + 8) {
        let x = u64::from_le_bytes(word.try_into().unwrap_or([0; 8]));
        // Octets below 0x21, above 0x7e, and colons. In each test the lowest flagged
        // octet is a true one (a borrow or carry only flags octets above one), so the
        // lowest of all three is the first octet that is not ftext.
        let below = x.wrapping_sub(ONES * 0x21) & !x;
        let above = x.wrapping_add(ONES) | x;
        let colon = x ^ (ONES * u64::from(b':'));
        let colon = colon.wrapping_sub(ONES) & !colon;
        let bad = (below | above | colon) & HIGH;
        if bad != 0 {
            return at + (bad.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at + line[at..]
        .iter()
        .position(|&b| !FIELD_NAME[usize::from(b)])
        .unwrap_or(line.len() - at)
}

/// Octets of a field name (RFC 5322 ftext): printable ASCII but the colon.
static FIELD_NAME: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0x21;
    while b < 0x7f {
        t[b] = b != 0x3a;
        b += 1;
    }
    t
};

/// (end of line content, start of next line). CRLF or LF end a line; a bare CR does not.
pub(super) fn line_end(buf: &[u8], pos: usize, end: usize) -> (usize, usize) {
    match find_lf(&buf[pos..end]) {
        Some(n) => {
            let lf = pos + n;
            let content_end = if lf > pos && buf[lf - 1] == b'\r' {
                lf - 1
            } else {
                lf
            };
            (content_end, lf + 1)
        }
        None => (end, end),
    }
}

/// Position of the first LF in `hay`. Called once per header line and per `--` line:
/// on x86-64 the SSE2 searcher (always present there) is called directly, which saves
/// `memchr`'s run-time choice of implementation on each of these short searches.
#[cfg(target_arch = "x86_64")]
fn find_lf(hay: &[u8]) -> Option<usize> {
    match memchr::arch::x86_64::sse2::memchr::One::new(b'\n') {
        Some(lf) => lf.find(hay),
        None => memchr::memchr(b'\n', hay),
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn find_lf(hay: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', hay)
}

/// The lengths of the physical lines of a field, name included, line endings excluded.
pub fn line_lengths<'b>(buf: &'b [u8], f: &Field) -> impl Iterator<Item = usize> + 'b {
    let bytes = &buf[f.start..f.value.end];
    bytes
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l).len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Handed in pieces, the heading scan read on past stray lines gives the fields it
    /// gives over the whole: lines of every kind (folds, stray lines, an mbox From line,
    /// empty lines, bare CR and LF, NUL, 8-bit) cut at sizes from one octet to past the end.
    #[test]
    fn fields_read_in_pieces_are_those_of_the_whole() {
        let lines: [&[u8]; 16] = [
            b"\r\n",
            b"\n",
            b" cont: x\r\n",
            b"\r",
            b"Subject: one\r\n",
            b" folded\r\n",
            b"\tand again\n",
            b"no colon here\r\n",
            b"From sender@example.org Thu Nov 26 2026\r\n",
            b"X-\0: nul\r\n",
            b"Sub ject: space\r\n",
            b"\xe9: eight-bit\r\n",
            b"X-Cr\r: y\r\n",
            b"List-Id: <l.example>\r\n",
            b": empty name\r\n",
            b"A: 1\n",
        ];
        let mut rng = crate::xorshift::XorShift64::new(0x2545_f491_4f6c_dd1d);
        for round in 0..2000 {
            let mut buf = Vec::new();
            for _ in 0..(round % 40 + 1) {
                let seed = rng.next_u64();
                buf.extend_from_slice(lines[(seed % lines.len() as u64) as usize]);
            }
            if round % 3 == 0 {
                buf.extend_from_slice(b"\r\nbody: not read\r\nmore: body\r\n");
            } else if round % 3 == 1 {
                buf.extend_from_slice(b"last: no line end");
            }
            let whole = fields_read_on(&buf);
            for piece in [1, 2, 7, 30, 64, 1 << 14] {
                let mut pieced = Vec::new();
                fields_read_on_by_piece(&buf, piece, |f| {
                    pieced.extend_from_slice(f);
                    ControlFlow::Continue(())
                });
                assert_eq!(pieced, whole, "round {round}, piece {piece}: {buf:?}");
            }
        }
    }

    /// The heading reader as it was before each kind of line got an arm of its own
    /// (2026-11-26), kept word for word as the reference the reader must agree with.
    fn read_heading_before(
        buf: &[u8],
        range: Range<usize>,
        top: bool,
        all: &mut Vec<Field>,
    ) -> Heading {
        let end = range.end;
        let mut pos = range.start;
        let first = all.len();
        let fields = all;
        let mut crlf_lines = 0usize;
        let mut lf_lines = 0usize;
        // An mbox "From " envelope line is not part of the message proper.
        if top && buf[pos..end].starts_with(b"From ") {
            pos = line_end(buf, pos, end).1;
        }
        let header_start = pos;
        let mut body_start = end;
        let mut no_separator = true;
        let mut last_line_end = pos;
        while pos < end {
            // The empty line that ends a heading needs no search for its end, and a
            // field's line is searched from its colon: the name was just read.
            let mut named = None;
            let (content_end, next) = match buf[pos] {
                b'\n' => (pos, pos + 1),
                b'\r' if pos + 1 < end && buf[pos + 1] == b'\n' => (pos, pos + 2),
                b' ' | b'\t' => line_end(buf, pos, end),
                _ => match field_name_end(&buf[pos..end]) {
                    Some((name_len, colon)) => {
                        named = Some((name_len, colon));
                        line_end(buf, pos + colon + 1, end)
                    }
                    None => line_end(buf, pos, end),
                },
            };
            if next - content_end == 2 {
                crlf_lines += 1;
            } else if next > content_end {
                lf_lines += 1;
            }
            let line = &buf[pos..content_end];
            if line.is_empty() {
                body_start = next;
                no_separator = false;
                break;
            }
            if line[0] == b' ' || line[0] == b'\t' {
                // A continuation. Before any field it belongs to nothing; keep it in the
                // heading so that the bytes are not mistaken for body.
                if let Some(f) = fields[first..].last_mut() {
                    f.value.end = content_end;
                    f.end = next;
                }
                last_line_end = next;
                pos = next;
                continue;
            }
            match named {
                Some((name_len, colon)) => {
                    fields.push(Field {
                        start: pos,
                        name: pos..pos + name_len,
                        value: pos + colon + 1..content_end,
                        end: next,
                    });
                    last_line_end = next;
                    pos = next;
                }
                None => {
                    body_start = pos;
                    break;
                }
            }
        }
        if pos >= end {
            body_start = end;
        }
        let header_end = fields[first..]
            .last()
            .map_or(header_start, |f| f.end)
            .max(last_line_end.min(body_start));
        Heading {
            header: header_start..header_end.max(header_start),
            body: body_start.min(end)..end,
            crlf: crlf_lines >= lf_lines && crlf_lines > 0,
            no_separator,
        }
    }

    proptest! {
        /// The heading reader reads what its earlier form read: the same fields, heading,
        /// body, line-ending style and separator, on headings of every kind of line
        /// (folds, stray lines, an mbox From line, empty lines, bare CR, CR at the end of
        /// the range), read from anywhere to anywhere.
        #[test]
        fn heading_reader_agrees_with_its_earlier_form(
            lines in proptest::collection::vec(
                prop_oneof![
                    Just(&b"Content-Type: text/plain\r\n"[..]), Just(&b"Content-ID: <a@b>\n"[..]),
                    Just(&b" folded\r\n"[..]), Just(&b"\tfolded\n"[..]), Just(&b"\r\n"[..]),
                    Just(&b"\n"[..]), Just(&b"\r"[..]), Just(&b"no colon\r\n"[..]),
                    Just(&b"X :  spaced\n"[..]), Just(&b"From a@b Thu\n"[..]),
                    Just(&b"Subject:"[..]), Just(&b"\xe9: x\r\n"[..]), Just(&b"X-\r: y\n"[..]),
                    Just(&b"body text\r\n"[..]), Just(&b":\n"[..]),
                ],
                0..12,
            ),
            start in 0usize..6,
            cut in 0usize..6,
            top in any::<bool>(),
        ) {
            let buf: Vec<u8> = lines.concat();
            let s = start.min(buf.len());
            let e = buf.len().saturating_sub(cut).max(s);
            let (mut now, mut before) = (Vec::new(), Vec::new());
            let a = read_heading(&buf, s..e, top, &mut now);
            let b = read_heading_before(&buf, s..e, top, &mut before);
            prop_assert_eq!(now, before);
            prop_assert_eq!(
                (a.header, a.body, a.crlf, a.no_separator),
                (b.header, b.body, b.crlf, b.no_separator)
            );
        }

        /// The word-at-a-time length of a field name is the octet-by-octet one, on
        /// lines mixing name octets with the octets around each limit of ftext.
        #[test]
        fn name_len_agrees_with_the_table(
            line in proptest::collection::vec(
                prop_oneof![
                    Just(b'a'), Just(b'C'), Just(b'-'), Just(b':'), Just(b' '), Just(b'\t'),
                    Just(0x20u8), Just(0x21u8), Just(0x7eu8), Just(0x7fu8), Just(0x80u8),
                    Just(0xffu8), Just(0u8), Just(b'\r'), Just(b'\n'), Just(0x39u8),
                    Just(0x3bu8), any::<u8>(),
                ],
                0..40,
            ),
            ones in 0usize..24,
        ) {
            let mut line = line;
            // Mostly-name prefixes, so that words without any stop octet are common.
            line.splice(0..0, std::iter::repeat_n(b'x', ones));
            let want = line
                .iter()
                .position(|&b| !FIELD_NAME[usize::from(b)])
                .unwrap_or(line.len());
            prop_assert_eq!(name_len(&line), want);
        }
    }
}
