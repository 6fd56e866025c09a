//! The image format a body's first octets announce (its file signature), for the image
//! formats mail readers show inline: PNG, JPEG, GIF, WebP, BMP and ICO, and SVG, which
//! is only recognised so that it is never announced as something else.
//!
//! A signature is read from the decoded body (see `decode::transfer_decode_head`), never
//! from the name or the Content-Type: the rule that uses it (`ref-image-type`) is there
//! because those two are wrong. Every test looks only at octets that are there: a body
//! shorter than a signature matches nothing.

/// Decoded octets that every fixed signature fits in: the longest needs 22 (ICO's first
/// directory entry).
pub const SIGNATURE: usize = 24;

/// Decoded octets [`sniff`] reads at most: an SVG document may open with an XML
/// declaration, a comment or a DOCTYPE before its `<svg`.
pub const HEAD: usize = 512;

/// Whether `head`, the first [`SIGNATURE`] octets of a body, may start markup (a byte
/// order mark, blanks, `<`): only then is more of the body read, for an `<svg`.
pub fn may_be_markup(head: &[u8]) -> bool {
    let text = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    !text.is_empty()
        && text
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_none_or(|&b| b == b'<')
}

/// An image format known by its signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Image {
    Png,
    Jpeg,
    Gif,
    Webp,
    Bmp,
    Ico,
    /// Script-capable: recognised, never written into a Content-Type.
    Svg,
}

impl Image {
    /// The media type to write for a body of this format; `None` for SVG, which no
    /// repair announces (a reader that shows `image/svg+xml` inline runs its scripts in
    /// some versions).
    pub fn media_type(self) -> Option<&'static str> {
        Some(match self {
            Image::Png => "image/png",
            Image::Jpeg => "image/jpeg",
            Image::Gif => "image/gif",
            Image::Webp => "image/webp",
            Image::Bmp => "image/bmp",
            // The registered name (IANA); readers decide on the `image/` tree and the
            // octets, not on which of the two names is used.
            Image::Ico => "image/vnd.microsoft.icon",
            Image::Svg => return None,
        })
    }

    /// The format's name with its article, for a finding: "a PNG", "an SVG".
    pub fn a_name(self) -> &'static str {
        match self {
            Image::Png => "a PNG",
            Image::Jpeg => "a JPEG",
            Image::Gif => "a GIF",
            Image::Webp => "a WebP",
            Image::Bmp => "a BMP",
            Image::Ico => "an ICO",
            Image::Svg => "an SVG",
        }
    }

    /// Whether image subtype `subtype` (lower case) names this format, under any of the
    /// names senders use for it (`image/jpg`, `image/x-png`, `image/x-icon`…).
    pub fn has_subtype(self, subtype: &str) -> bool {
        let names: &[&str] = match self {
            Image::Png => &["png", "x-png", "apng"],
            Image::Jpeg => &["jpeg", "jpg", "pjpeg", "jpe"],
            Image::Gif => &["gif"],
            Image::Webp => &["webp", "x-webp"],
            Image::Bmp => &["bmp", "x-bmp", "x-ms-bmp", "ms-bmp"],
            Image::Ico => &["vnd.microsoft.icon", "x-icon", "ico", "icon", "x-ico"],
            Image::Svg => &["svg+xml", "svg"],
        };
        names.contains(&subtype)
    }

    /// Whether file name extension `ext` (without the dot, any case) is one of this
    /// format's.
    pub fn has_extension(self, ext: &str) -> bool {
        let exts: &[&str] = match self {
            Image::Png => &["png", "apng"],
            Image::Jpeg => &["jpg", "jpeg", "jpe", "jfif", "pjpeg", "pjp"],
            Image::Gif => &["gif"],
            Image::Webp => &["webp"],
            Image::Bmp => &["bmp", "dib"],
            Image::Ico => &["ico"],
            Image::Svg => &["svg", "svgz"],
        };
        exts.iter().any(|e| e.eq_ignore_ascii_case(ext))
    }
}

/// The image format whose signature `head` (the first decoded octets of a body) starts
/// with, if any.
pub fn sniff(head: &[u8]) -> Option<Image> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(Image::Png)
    } else if head.starts_with(b"\xff\xd8\xff") {
        Some(Image::Jpeg)
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some(Image::Gif)
    } else if head.starts_with(b"RIFF") && head.get(8..12) == Some(b"WEBP") {
        Some(Image::Webp)
    } else if is_bmp(head) {
        Some(Image::Bmp)
    } else if is_ico(head) {
        Some(Image::Ico)
    } else if is_svg(head) {
        Some(Image::Svg)
    } else {
        None
    }
}

fn le32(b: &[u8], at: usize) -> Option<u32> {
    let w: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
    Some(u32::from_le_bytes(w))
}

/// `BM` alone starts too much text ("BMW…"): the size of the header after the file
/// header must also be one that a BMP version defines.
fn is_bmp(head: &[u8]) -> bool {
    head.starts_with(b"BM")
        && le32(head, 14).is_some_and(|n| [12, 40, 52, 56, 64, 108, 124].contains(&n))
}

/// `00 00 01 00` (a cursor is `00 00 02 00`), at least one image, and a first directory
/// entry whose reserved octet is 0 and whose colour planes are 0 or 1.
fn is_ico(head: &[u8]) -> bool {
    let (Some(count), Some(&reserved), Some(planes)) =
        (head.get(4..6), head.get(9), head.get(10..12))
    else {
        return false;
    };
    head.starts_with(b"\0\0\x01\0")
        && u16::from_le_bytes([count[0], count[1]]) > 0
        && reserved == 0
        && u16::from_le_bytes([planes[0], planes[1]]) <= 1
}

/// Markup (after a byte order mark and blanks) with an `<svg` element in the first
/// [`HEAD`] octets.
fn is_svg(head: &[u8]) -> bool {
    let head = &head[..head.len().min(HEAD)];
    let text = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    let start = text.iter().position(|b| !b.is_ascii_whitespace());
    start.is_some_and(|s| text[s] == b'<')
        && text.windows(4).any(|w| w.eq_ignore_ascii_case(b"<svg"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn each_signature_is_recognised() {
        let mut bmp = b"BM\x36\0\0\0\0\0\0\0\x36\0\0\0".to_vec();
        bmp.extend_from_slice(&40u32.to_le_bytes());
        let ico = b"\0\0\x01\0\x01\0\x10\x10\0\0\x01\0\x20\0\x68\x04\0\0\x16\0\0\0";
        for (head, want) in [
            (PNG, Image::Png),
            (&b"\xff\xd8\xff\xe0\0\x10JFIF"[..], Image::Jpeg),
            (b"GIF89a\x01\0\x01\0", Image::Gif),
            (b"GIF87a", Image::Gif),
            (b"RIFF\x24\0\0\0WEBPVP8 ", Image::Webp),
            (&bmp, Image::Bmp),
            (ico, Image::Ico),
            (
                b"\xef\xbb\xbf  <?xml version=\"1.0\"?>\n<SVG xmlns=\"x\">",
                Image::Svg,
            ),
        ] {
            assert_eq!(sniff(head), Some(want), "{head:?}");
        }
    }

    /// Every prefix of a signature is too short to match, and none panics: a 3-octet
    /// body that starts like a PNG is no PNG.
    #[test]
    fn short_bodies_match_nothing() {
        for n in 0..=PNG.len() {
            assert_eq!(sniff(&PNG[..n]).is_some(), n >= 8, "{n}");
        }
        assert_eq!(sniff(b"\x89PN"), None);
        assert_eq!(sniff(b"\xff\xd8"), None);
        assert_eq!(sniff(b"RIFF\0\0\0\0WEB"), None);
        assert_eq!(sniff(b"\0\0\x01\0\x01"), None);
        assert_eq!(sniff(b"BM"), None);
    }

    #[test]
    fn text_that_starts_alike_is_no_image() {
        assert_eq!(sniff(b"BMW owners club newsletter, issue 4"), None);
        assert_eq!(sniff(b"RIFF\x24\0\0\0WAVEfmt "), None);
        // A cursor, not an icon.
        assert_eq!(sniff(b"\0\0\x02\0\x01\0\x10\x10\0\0\x01\0\x20\0"), None);
        assert_eq!(sniff(b"<html><body>an svg file</body></html>"), None);
        assert_eq!(sniff(b"plain <svg> mention"), None);
    }

    #[test]
    fn only_what_may_be_markup_is_read_further() {
        assert!(may_be_markup(b"\xef\xbb\xbf\n  <?xml version="));
        assert!(may_be_markup(b"<!-- Generator: Adobe"));
        assert!(may_be_markup(b"   "));
        assert!(!may_be_markup(PNG));
        assert!(!may_be_markup(b""));
        assert!(!may_be_markup(b"GIF89a<svg"));
    }

    #[test]
    fn svg_is_never_given_a_media_type() {
        assert_eq!(Image::Svg.media_type(), None);
        assert_eq!(Image::Png.media_type(), Some("image/png"));
        assert!(Image::Jpeg.has_subtype("jpg") && Image::Jpeg.has_extension("JPG"));
        assert!(!Image::Png.has_extension("pdf") && !Image::Gif.has_subtype("png"));
    }
}
