//! The URL references of an HTML document, for the HTML reference check.
//!
//! The text is tokenised with `lol_html`, which streams: no DOM is built, so memory stays
//! flat whatever the markup. URL-valued attributes are collected (see
//! [`URL_ATTRIBUTES`], plus `srcset`, `archive` and `url(...)` inside `style`), and so
//! are the `url(...)` and `@import` references of `<style>` elements.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::LazyLock;

use lol_html::html_content::{Element, TextChunk};
use lol_html::{doctype, ElementContentHandlers, HtmlRewriter, MemorySettings, Selector, Settings};

/// The tokeniser's own memory ceiling (buffers for a tag split across chunks).
const TOKENISER_MEMORY: usize = 16 * 1024 * 1024;

/// Attributes whose whole value is one URL.
pub const URL_ATTRIBUTES: &[&str] = &[
    "src",
    "href",
    "background",
    "data",
    "poster",
    "lowsrc",
    "longdesc",
    "cite",
    "action",
    "codebase",
];

/// The selectors of the handlers, parsed once for the process rather than once per HTML
/// part (lol_html's `element!`/`text!` parse theirs each time): mail with many small
/// HTML parts pays the setup of the tokeniser per part.
static EVERY_ELEMENT: LazyLock<Selector> = LazyLock::new(|| selector("*"));
static STYLE_ELEMENT: LazyLock<Selector> = LazyLock::new(|| selector("style"));

fn selector(s: &str) -> Selector {
    s.parse().expect("a constant selector lol_html supports")
}

/// One reference found in an HTML part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HtmlRef {
    /// `tag@attribute`, e.g. `img@src`, for messages.
    pub place: String,
    /// The URL as written, character references decoded, surrounding spaces removed.
    pub url: String,
}

/// What the tokeniser found in one part.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    pub refs: Vec<HtmlRef>,
    /// The first `<base href>`, if any (RFC 2557 §8.2(a)).
    pub base: Option<String>,
    /// Scanning stopped early: too many references, or the tokeniser gave up.
    pub truncated: bool,
}

/// Collects the URL references of an HTML document, at most `max_refs` of them. Never
/// panics and never builds a tree; a tokeniser error ends the scan with what was found.
pub fn scan(html: &str, max_refs: usize) -> Scan {
    scan_utf8(html.as_bytes(), max_refs)
}

/// [`scan`] of a document given as octets, which must be UTF-8 (as
/// `decode::charset_decode_to_utf8` returns them): the tokeniser reads octets, so text
/// known to be UTF-8 need not be made a `str` first.
pub(crate) fn scan_utf8(html: &[u8], max_refs: usize) -> Scan {
    let out = RefCell::new(Scan::default());
    // The text of the `<style>` element being read: it comes in chunks, and a reference
    // may straddle two of them.
    let sheet = RefCell::new(String::new());
    let cap = |s: &mut Scan| -> lol_html::HandlerResult {
        if s.refs.len() >= max_refs {
            s.refs.truncate(max_refs);
            s.truncated = true;
            return Err("reference cap reached".into());
        }
        Ok(())
    };
    let result = {
        let settings = Settings::new()
            .with_strict(false)
            .with_memory_settings(
                MemorySettings::new().with_max_allowed_memory_usage(TOKENISER_MEMORY),
            )
            // Not for the doctype: a document-level handler keeps lol_html lexing all
            // the way through. Otherwise it scans for tag names and, since `*` wants
            // every start tag, goes back and lexes each tag a second time (measured:
            // 16k of related-60k's 261k).
            .append_document_content_handler(doctype!(|_| Ok(())))
            .append_element_content_handler((
                Cow::Borrowed(&*EVERY_ELEMENT),
                ElementContentHandlers::default().element(|el: &mut Element| {
                    let mut s = out.borrow_mut();
                    collect(el, &mut s);
                    cap(&mut s)
                }),
            ))
            .append_element_content_handler((
                Cow::Borrowed(&*STYLE_ELEMENT),
                ElementContentHandlers::default().text(|t: &mut TextChunk| {
                    let mut text = sheet.borrow_mut();
                    text.push_str(t.as_str());
                    if !t.last_in_text_node() {
                        return Ok(());
                    }
                    let css = std::mem::take(&mut *text);
                    let mut s = out.borrow_mut();
                    for (place, url) in css_refs(&css) {
                        push(&mut s, place.to_string(), &url);
                    }
                    cap(&mut s)
                }),
            ));
        let mut rewriter = HtmlRewriter::new(settings, |_: &[u8]| {});
        rewriter.write(html).and_then(|_| rewriter.end())
    };
    let mut s = out.into_inner();
    if result.is_err() {
        s.truncated = true;
    }
    s
}

fn collect(el: &Element, s: &mut Scan) {
    let attributes = el.attributes();
    if attributes.is_empty() {
        // Most elements of a mail (`<p>`, `<td>`, `<span>`): nothing to read.
        return;
    }
    let tag = el.tag_name();
    for a in attributes {
        let name = a.name();
        // Only the attributes read below are decoded: `class`, `alt`, `width`... are
        // most of them.
        if !(URL_ATTRIBUTES.contains(&name.as_str())
            || matches!(name.as_str(), "archive" | "srcset" | "style"))
        {
            continue;
        }
        let value = decode_char_refs(&a.value());
        let place = || format!("{tag}@{name}");
        if tag == "base" && name == "href" {
            if s.base.is_none() {
                s.base = Some(value.trim().to_string());
            }
            continue;
        }
        if URL_ATTRIBUTES.contains(&name.as_str()) {
            push(s, place(), value.trim());
        } else if name == "archive" {
            for u in value.split(|c: char| c.is_ascii_whitespace() || c == ',') {
                push(s, place(), u);
            }
        } else if name == "srcset" {
            // Candidates are "URL [descriptor]", separated by commas.
            for cand in value.split(',') {
                if let Some(u) = cand.split_ascii_whitespace().next() {
                    push(s, place(), u);
                }
            }
        } else if name == "style" {
            for u in css_urls(&value) {
                push(s, place(), &u);
            }
        }
    }
}

fn push(s: &mut Scan, place: String, url: &str) {
    let url = url.trim_matches(|c: char| c.is_ascii_whitespace());
    if !url.is_empty() {
        s.refs.push(HtmlRef {
            place,
            url: url.to_string(),
        });
    }
}

/// The `url(...)` values of a style attribute; one linear pass.
fn css_urls(style: &str) -> Vec<String> {
    let lower = style.to_ascii_lowercase();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(p) = lower.get(from..).and_then(|t| t.find("url(")) {
        let start = from + p + 4;
        let Some(len) = style.get(start..).and_then(|t| t.find(')')) else {
            break;
        };
        let inner = style[start..start + len].trim();
        let inner = inner
            .strip_prefix(['"', '\''])
            .map(|t| t.strip_suffix(['"', '\'']).unwrap_or(t))
            .unwrap_or(inner);
        out.push(inner.trim().to_string());
        from = start + len + 1;
    }
    out
}

/// The references of a `<style>` element's style sheet, with their place: every
/// `url(…)` (any quoting, `@import url(…)` included) and every `@import "…"` or
/// `@import '…'`. Comments are skipped. Character references are not decoded: the
/// element's text is raw text.
fn css_refs(css: &str) -> Vec<(&'static str, String)> {
    let css = strip_css_comments(css);
    let mut out: Vec<(&'static str, String)> =
        css_urls(&css).into_iter().map(|u| ("style", u)).collect();
    let lower = css.to_ascii_lowercase();
    let mut from = 0;
    while let Some(p) = lower.get(from..).and_then(|t| t.find("@import")) {
        from += p + "@import".len();
        let rest = css[from..].trim_start_matches(|c: char| c.is_ascii_whitespace());
        let Some(q) = rest.chars().next().filter(|&c| c == '"' || c == '\'') else {
            continue; // url(…), found above, or not an import at all
        };
        if let Some(end) = rest[1..].find(q) {
            out.push(("style@import", rest[1..1 + end].trim().to_string()));
        }
    }
    out
}

/// `css` without its `/* … */` comments (an unterminated one runs to the end).
fn strip_css_comments(css: &str) -> std::borrow::Cow<'_, str> {
    if !css.contains("/*") {
        return std::borrow::Cow::Borrowed(css);
    }
    let mut out = String::with_capacity(css.len());
    let mut rest = css;
    while let Some(start) = rest.find("/*") {
        out.push_str(&rest[..start]);
        out.push(' ');
        match rest[start + 2..].find("*/") {
            Some(end) => rest = &rest[start + 2 + end + 2..],
            None => rest = "",
        }
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// Decodes the character references that matter in URLs: `&amp;` `&lt;` `&gt;` `&quot;`
/// `&apos;` and numeric ones. Others stay as written.
fn decode_char_refs(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(p) = rest.find('&') {
        out.push_str(&rest[..p]);
        let after = &rest[p + 1..];
        let end = after
            .char_indices()
            .take(12)
            .find(|&(_, c)| c == ';')
            .map(|(i, _)| i);
        let decoded = end.and_then(|e| {
            let name = &after[..e];
            let c = match name {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                _ => {
                    let num = name.strip_prefix('#')?;
                    let n = match num.strip_prefix(['x', 'X']) {
                        Some(h) => u32::from_str_radix(h, 16).ok()?,
                        None => num.parse().ok()?,
                    };
                    char::from_u32(n)
                }
            }?;
            Some((c, e))
        });
        match decoded {
            Some((c, e)) => {
                out.push(c);
                rest = &after[e + 1..];
            }
            None => {
                out.push('&');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_collects_every_url_attribute() {
        let s = scan(
            r#"<html><head><base href="http://b.test/d/"></head><body background="bg.gif">
            <img src=" cid:a@b " lowsrc="l.gif" longdesc="d.html" srcset="x1.png 1x, x2.png 2x">
            <a href="x?a=1&amp;b=&#50;">l</a><object data="o.swf" codebase="cb/" archive="a.jar b.jar">
            <video poster="p.jpg"></video><blockquote cite="c.html"></blockquote>
            <form action="f.cgi"></form><div style="background: URL( 'cid:s@t' )"></div>"#,
            100,
        );
        let urls: Vec<&str> = s.refs.iter().map(|r| r.url.as_str()).collect();
        assert_eq!(
            urls,
            [
                "bg.gif",
                "cid:a@b",
                "l.gif",
                "d.html",
                "x1.png",
                "x2.png",
                "x?a=1&b=2",
                "o.swf",
                "cb/",
                "a.jar",
                "b.jar",
                "p.jpg",
                "c.html",
                "f.cgi",
                "cid:s@t"
            ]
        );
        assert_eq!(s.base.as_deref(), Some("http://b.test/d/"));
        assert!(!s.truncated);
        assert_eq!(s.refs[1].place, "img@src");
    }

    #[test]
    fn an_element_with_several_url_attributes_is_read_once_in_any_case() {
        let s = scan(
            r#"<p>text</p><IMG SRC="cid:a@b" Style="background:url(c.png)" LowSrc="l.gif"><td>x</td>"#,
            100,
        );
        let got: Vec<(&str, &str)> = s
            .refs
            .iter()
            .map(|r| (r.place.as_str(), r.url.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("img@src", "cid:a@b"),
                ("img@style", "c.png"),
                ("img@lowsrc", "l.gif")
            ]
        );
    }

    #[test]
    fn scan_reads_style_elements() {
        let s = scan(
            r#"<html><head><style type="text/css">
            @import "cid:i1@x";
            @import 'cid:i2@x' screen;
            @IMPORT url(cid:i3@x);
            /* url(cid:comment@x) */
            body { background: url(cid:u1@x) }
            td { background-image: URL( "cid:u2@x" ); }
            p { background: url('cid:u3@x') no-repeat }
            </style></head><body><p style="background: url(cid:attr@x)">x</p></body>"#,
            100,
        );
        let mut urls: Vec<&str> = s.refs.iter().map(|r| r.url.as_str()).collect();
        urls.sort();
        assert_eq!(
            urls,
            [
                "cid:attr@x",
                "cid:i1@x",
                "cid:i2@x",
                "cid:i3@x",
                "cid:u1@x",
                "cid:u2@x",
                "cid:u3@x"
            ]
        );
        // Style text split over many chunks is read whole.
        let long = format!(
            "<style>{}body {{ background: url(cid:late@x) }}</style>",
            " ".repeat(100_000)
        );
        let s = scan(&long, 10);
        assert_eq!(s.refs.len(), 1);
        assert_eq!(s.refs[0].url, "cid:late@x");
    }

    #[test]
    fn scan_is_capped_and_survives_garbage() {
        let many = "<img src=a>".repeat(50);
        let s = scan(&many, 10);
        assert_eq!(s.refs.len(), 10);
        assert!(s.truncated);
        for junk in [
            "<",
            "<a href",
            "<a href='",
            "<!--",
            "<script>",
            "<svg><img src=x>",
            "\u{0}<a\u{0}>",
            "<img src=\"&#xFFFFFFFF;&#;&;&amp\">",
            "<select><xmp><img src=q>",
            "<style>@import",
            "<style>@import '",
            "<style>@import \"é",
            "<style>@importé url(é",
            "<style>url(",
            "<style>/*",
            "<style>/* é */ @import'é'",
        ] {
            let _ = scan(junk, 10);
        }
        assert_eq!(
            decode_char_refs("&#xFFFFFFFF;&#;&;&amp"),
            "&#xFFFFFFFF;&#;&;&amp"
        );
    }
}
