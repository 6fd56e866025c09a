//! The notice part that replaces a body part whose reference has a denied scheme (the
//! repair of `extbody-url-scheme-denied` and `cturi-uri-denied` when policy strips).

use crate::engine::model::analysis::Context;
use crate::engine::model::mime::Kind;
use crate::engine::model::rules::Rule;
use crate::engine::rewriting::rewrite::{change, display_url};

/// Characters of the removed URL quoted in a notice part.
const NOTICE_URL_MAX: usize = 300;
/// URL characters per notice line: with the indent every line stays under 78 octets, so
/// the part goes 7bit and no line can be taken for a boundary delimiter.
const NOTICE_URL_LINE: usize = 64;

/// The notice part that replaces a stripped body part, in the line endings `eol`. Built
/// with mail-builder; every header of it is a fixed string of ours (mail-builder 0.4
/// writes `Text` and `Raw` header values as given, CR LF included, so nothing taken
/// from the message ever goes into one). The URL only appears in the body, %-encoded
/// (display_url), cut, and wrapped on indented lines.
pub fn notice_part(rule: Rule, url: &[u8], eol: &[u8]) -> Vec<u8> {
    use mail_builder::headers::content_type::ContentType;
    use mail_builder::headers::text::Text;
    use mail_builder::mime::MimePart;

    let shown = display_url(url, NOTICE_URL_MAX);
    let mut text = String::new();
    text.push_str("A reference to external content was removed from this message by\r\n");
    text.push_str("the mail filter, because its URL scheme is not allowed here\r\n");
    text.push_str(&format!("(rule {}).\r\n\r\nRemoved URL:\r\n", rule.id()));
    let chars: Vec<char> = shown.chars().collect();
    for line in chars.chunks(NOTICE_URL_LINE) {
        text.push_str("  ");
        text.extend(line.iter());
        text.push_str("\r\n");
    }
    let part = MimePart::new(
        ContentType::new("text/plain").attribute("charset", "us-ascii"),
        text,
    )
    .header(
        "Content-Description",
        Text::new("external reference removed by policy"),
    )
    .transfer_encoding("7bit");
    let mut out = Vec::new();
    if part.write_part(&mut out).is_err() {
        return Vec::new();
    }
    // The part ends where the original did: the line break before the next delimiter
    // belongs to the delimiter (RFC 2046 §5.1.1).
    while out.ends_with(b"\r\n") {
        out.truncate(out.len() - 2);
    }
    if eol == b"\r\n" {
        return out;
    }
    let mut lf = Vec::with_capacity(out.len());
    let mut i = 0;
    while i < out.len() {
        if out[i] == b'\r' && out.get(i + 1) == Some(&b'\n') {
            lf.extend_from_slice(eol);
            i += 2;
        } else {
            lf.push(out[i]);
            i += 1;
        }
    }
    lf
}

/// Offers to replace entity `idx` with a notice part (repairing `rule`), when policy
/// allows stripping and the entity is a body part of a multipart in the original bytes.
/// A top-level entity, or one encapsulated directly in a message/rfc822, is never
/// stripped: there is no part to replace, only report or reject. Returns the edit index.
pub fn offer_strip(cx: &mut Context, idx: usize, rule: Rule, url: &[u8]) -> Option<usize> {
    if !cx.opts.strip_denied || cx.opts.octets_not_given > 0 {
        return None;
    }
    let msg = cx.msg;
    let e = msg.entities.get(idx)?;
    let parent = msg.entities.get(e.parent?)?;
    if !e.editable() || !matches!(parent.kind, Kind::Multipart { .. }) {
        return None;
    }
    let range = e.header.start..e.body.end;
    if range.start > range.end || range.end > msg.len {
        return None;
    }
    let fi = e.ctype_field?;
    let loc = msg.field_loc(e, fi);
    let part = notice_part(rule, url, e.eol());
    if part.is_empty() {
        return None;
    }
    let ch = change(rule, url, None);
    Some(cx.edits.replace_part(range, loc, part, rule, ch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notice_part_headers_are_fixed_and_the_url_stays_in_the_body() {
        let evil = b"javascript:alert(1)\r\nContent-Type: text/html\r\n\r\n--b\r\n<script>";
        for eol in [&b"\n"[..], b"\r\n"] {
            let p = notice_part(Rule::ExtbodyUrlSchemeDenied, evil, eol);
            let text = String::from_utf8(p.clone()).unwrap();
            let sep = if eol == b"\n" { "\n\n" } else { "\r\n\r\n" };
            let (head, body) = text.split_once(sep).unwrap();
            let e = std::str::from_utf8(eol).unwrap();
            assert_eq!(
                head,
                [
                    "Content-Type: text/plain; charset=\"us-ascii\"",
                    "Content-Description: external reference removed by policy",
                    "Content-Transfer-Encoding: 7bit"
                ]
                .join(e)
            );
            assert!(
                body.contains("javascript:alert(1)%0D%0AContent-Type:%20text/html"),
                "{body}"
            );
            for line in body.split(e) {
                assert!(line.len() < 78 && !line.starts_with('-'), "{line:?}");
                assert!(!line.contains('\r') && !line.contains('\n'));
            }
            assert!(!p.ends_with(eol));
            if eol == b"\n" {
                assert!(!p.contains(&b'\r'));
            }
        }
    }

    #[test]
    fn mail_builder_text_headers_pass_crlf_through() {
        // Why the notice headers never carry message data: mail-builder 0.4 writes an
        // ASCII text header value with CR LF as it is.
        use mail_builder::headers::text::Text;
        use mail_builder::headers::Header;
        let mut out = Vec::new();
        Text::new("a\r\nX-Injected: 1")
            .write_header(&mut out, 0)
            .unwrap();
        assert!(out.windows(13).any(|w| w == b"\r\nX-Injected:"));
    }
}
