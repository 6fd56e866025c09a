//! RFC 2047 encoded-words written, for the twin of an RFC 2231 file name: the
//! `name="=?UTF-8?B?…?="` that readers which know no RFC 2231 read (Outlook, IBM
//! Notes, Office 365's IMAP, several libraries). RFC 2047 §5 does not allow an
//! encoded-word inside a quoted-string; Thunderbird, Outlook and Gmail write it there
//! all the same, and that is the form those readers read.
//!
//! B encoding of UTF-8 only: one form, no quoting rules. Each encoded-word holds whole
//! characters (RFC 2047 §5: a multi-octet character is never split between two words)
//! and at most 75 octets (§2); the words go one a line, so that no line of the
//! parameter passes 78 octets (RFC 5322 §2.1.1). A decoder drops the folding white
//! space between two encoded-words (§6.2), so the folded name reads back whole.

use base64::Engine as _;

use crate::engine::syntax::fold::SOFT_LINE;

/// RFC 2047 §2: an encoded-word is at most 75 octets long.
pub const MAX_WORD: usize = 75;
const OPEN: &str = "=?UTF-8?B?";
const CLOSE: &str = "?=";
/// The octets of a word besides its encoded text.
const OVERHEAD: usize = OPEN.len() + CLOSE.len();
/// The shortest word that holds any character: four octets of UTF-8 take eight of
/// base64.
const MIN_WORD: usize = OVERHEAD + 8;

/// Whether a parameter of `first_line` octets (its leading SP included) goes on a new
/// line after a line already `line_len` octets long: only when it would pass 78 octets
/// there and a new line is shorter (a line of one `;` gains nothing by breaking).
pub fn starts_new_line(line_len: usize, first_line: usize) -> bool {
    line_len > 1 && line_len + first_line > SOFT_LINE
}

/// The encoded-words of `text`: the first at most `first` octets long, the others at
/// most `rest` (each at least [`MIN_WORD`], at most [`MAX_WORD`]), each of whole
/// characters. An empty text gives no word.
pub fn words(text: &str, first: usize, rest: usize) -> Vec<String> {
    let octets = |max: usize| (max.clamp(MIN_WORD, MAX_WORD) - OVERHEAD) / 4 * 3;
    let mut out = Vec::new();
    let mut cap = octets(first);
    let mut start = 0;
    let mut len = 0;
    for c in text.chars() {
        let n = c.len_utf8();
        if len + n > cap {
            out.push(word(&text[start..start + len]));
            start += len;
            len = 0;
            cap = octets(rest);
        }
        len += n;
    }
    if len > 0 {
        out.push(word(&text[start..start + len]));
    }
    out
}

fn word(piece: &str) -> String {
    // Written in place: through `format!` a word cost a fifth of a 1,000-name repair.
    let mut w = String::with_capacity(OPEN.len() + piece.len().div_ceil(3) * 4 + CLOSE.len());
    w.push_str(OPEN);
    base64::engine::general_purpose::STANDARD.encode_string(piece.as_bytes(), &mut w);
    w.push_str(CLOSE);
    w
}

/// Whether `text` can be written as a quoted-string as it stands: printable ASCII that
/// no reader could take for an encoded-word, without `"` or `\` (quoted-pairs, which
/// some readers keep), short enough for a line of its own.
fn plain_ascii(text: &str, attr: &str) -> bool {
    text.bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
        && !text.contains("=?")
        && 1 + attr.len() + 2 + text.len() + 2 <= SOFT_LINE
}

/// The twin parameter `attr="…"` of `text`: the text as it stands when it is short
/// printable ASCII (every reader reads that), else its encoded-words, folded one a
/// line inside the quotes.
///
/// `line_len` is the number of octets already on the line, the `;` the parameter
/// follows included. The result begins with the whitespace that goes before the
/// parameter: SP, or `eol` and SP when the first line would pass 78 octets; every
/// line it makes is at most 78 octets, the `;` that may follow it included.
pub fn write_quoted(attr: &str, text: &str, line_len: usize, eol: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() * 2 + 16);
    // SP, `attr="`, then `"` and a `;` that may follow.
    let frame = 1 + attr.len() + 2 + 2;
    if plain_ascii(text, attr) {
        if starts_new_line(line_len, frame + text.len()) {
            out.extend_from_slice(eol);
        }
        out.extend_from_slice(format!(" {attr}=\"{text}\"").as_bytes());
        return out;
    }
    // One word on the line as it is, when the whole name fits there.
    let here = SOFT_LINE.saturating_sub(line_len + frame);
    let mut ws = words(text, here, MAX_WORD);
    if ws.len() > 1 || here < MIN_WORD || starts_new_line(line_len, frame + ws[0].len()) {
        if line_len > 1 {
            out.extend_from_slice(eol);
        }
        ws = words(text, SOFT_LINE - frame, MAX_WORD);
    }
    out.extend_from_slice(format!(" {attr}=\"").as_bytes());
    for (i, w) in ws.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(eol);
            out.push(b' ');
        }
        out.extend_from_slice(w.as_bytes());
    }
    out.push(b'"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::syntax::decode::rfc2047;
    use crate::engine::syntax::fold::{line_lengths, unfold};
    use crate::engine::syntax::params::ContentType;
    use proptest::prelude::*;

    /// The twin written after `a/b;` on a line of `line_len` octets: what a reader
    /// decodes (quotes removed, folds undone, encoded-words decoded) and the lines.
    fn read_back(text: &str, line_len: usize, eol: &[u8]) -> (String, Vec<usize>, Vec<u8>) {
        let w = write_quoted("filename", text, line_len, eol);
        let value = [b"a/b;".as_slice(), &w].concat();
        let ct = ContentType::parse(&value);
        let raw = ct.plain("filename").unwrap().value.clone();
        let got = String::from_utf8(rfc2047(&unfold(&raw))).unwrap();
        (got, line_lengths(line_len - 4, &value).collect(), w)
    }

    #[test]
    fn short_names_on_the_line_they_follow() {
        let (got, lines, w) = read_back("Überweisung.pdf", 20, b"\r\n");
        assert_eq!(got, "Überweisung.pdf");
        assert_eq!(lines.len(), 1);
        assert_eq!(w, b" filename=\"=?UTF-8?B?w5xiZXJ3ZWlzdW5nLnBkZg==?=\"");
        // ASCII as it stands; quotes and `=?` go encoded.
        assert_eq!(
            write_quoted("name", "report.pdf", 10, b"\n"),
            b" name=\"report.pdf\""
        );
        let (got, _, w) = read_back("a \"b\".pdf", 10, b"\n");
        assert_eq!(got, "a \"b\".pdf");
        assert!(w.starts_with(b" filename=\"=?UTF-8?B?"));
        let (got, _, _) = read_back("=?x?Q?y?=", 10, b"\n");
        assert_eq!(got, "=?x?Q?y?=");
    }

    #[test]
    fn long_names_fold_one_word_a_line() {
        let name = "Präsentation für die Geschäftsleitung März 2026 (endgültig).pptx";
        let (got, lines, w) = read_back(name, 50, b"\n");
        assert_eq!(got, name);
        assert!(w.starts_with(b"\n filename=\"=?UTF-8?B?"));
        assert!(lines.len() >= 3);
        assert!(lines.iter().all(|&l| l <= SOFT_LINE), "{lines:?}");
    }

    #[test]
    fn words_hold_whole_characters_and_75_octets() {
        for text in [
            "€".repeat(60),
            "😀".repeat(30),
            "aé".repeat(50),
            "日本".repeat(40),
        ] {
            let ws = words(&text, 30, MAX_WORD);
            assert!(ws.len() > 1);
            assert!(ws[0].len() <= 30);
            let mut whole = String::new();
            for w in &ws {
                assert!(w.len() <= MAX_WORD, "{w}");
                // Each word alone decodes to valid UTF-8: no character split.
                let b64 = &w[OPEN.len()..w.len() - CLOSE.len()];
                let piece = base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .unwrap();
                whole.push_str(std::str::from_utf8(&piece).unwrap());
            }
            assert_eq!(whole, text);
        }
        assert!(words("", 75, 75).is_empty());
        // A budget below one character's word still makes progress.
        assert_eq!(words("😀😀", 1, 1).len(), 2);
    }

    proptest! {
        #[test]
        fn any_text_reads_back_within_78_octets(
            text in "\\PC{1,120}",
            line_len in 1usize..90,
            crlf in any::<bool>(),
        ) {
            let eol: &[u8] = if crlf { b"\r\n" } else { b"\n" };
            let (got, lines, _) = read_back(&text, line_len.max(4), eol);
            prop_assert_eq!(got, text);
            // The first line may already be longer than 78 before the parameter.
            for &l in &lines[1..] {
                prop_assert!(l <= SOFT_LINE, "{:?}", lines);
            }
        }
    }
}
