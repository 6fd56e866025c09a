//! Interop reader for `scripts/interop`: the Rust `mail-parser` crate (Stalwart's
//! parser), the same version the product links, run on one message file and printed as
//! the reader contract's JSON object (tests/interop/README.md). Relative references are
//! joined with the `iri-string` crate (RFC 3986 §5.2). The product's own engine is not
//! used. Run through tests/interop/readers/rust-mail-parser.
//!
//! Listed: the parts `Message::attachments()` returns (the crate puts every non-text
//! leaf there, inline images too, and text parts that are not a body); shown: the
//! text/html parts of `Message::html_bodies()`; an image/audio/video part that
//! `html_bodies()` lists is displayed in sequence with the body (RFC 8621 htmlBody):
//! `appended`. The crate has no cid: lookup: images by the contract's rule. `name`:
//! `MimeHeaders::attachment_name()`; `opens`: the message the crate parses of a
//! message/rfc822 part (it decodes an encoded one first), or the decoded content.

use std::fmt::Write as _;

use iri_string::types::{UriAbsoluteStr, UriReferenceStr};
use mail_parser::{MessageParser, MimeHeaders, PartType};
use serde_json::{json, Value};

/// mail-parser's version, read from the project's Cargo.lock at build time.
fn version() -> String {
    let lock = include_str!("../Cargo.lock");
    let v = lock
        .split("[[package]]")
        .find(|p| p.contains("name = \"mail-parser\""))
        .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = \"")))
        .map(|v| v.trim_end_matches('"').to_string())
        .unwrap_or_else(|| "?".into());
    format!("mail-parser {v} (Rust crate, iri-string join)")
}

fn join(base: &str, rel: &str) -> Option<String> {
    let base = UriAbsoluteStr::new(base).ok()?;
    let rel = UriReferenceStr::new(rel).ok()?;
    let mut s = String::new();
    write!(s, "{}", rel.resolve_against(base)).ok()?;
    Some(s)
}

fn absolute(s: &str) -> bool {
    let mut it = s.char_indices();
    matches!(it.next(), Some((_, c)) if c.is_ascii_alphabetic())
        && s.find(':').is_some_and(|i| {
            s[..i]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
        })
}

fn html_refs(text: &str) -> Vec<String> {
    let attr = regex::Regex::new(
        r#"(?i)\b(?:src|href|background)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>"']+))"#,
    )
    .unwrap();
    let css = regex::Regex::new(r#"(?i)url\(\s*(?:"([^"]*)"|'([^']*)'|([^)\s]*))\s*\)"#).unwrap();
    let mut out = Vec::new();
    for rx in [&attr, &css] {
        for c in rx.captures_iter(text) {
            let Some(v) = c.get(1).or(c.get(2)).or(c.get(3)) else {
                continue;
            };
            let v = v
                .as_str()
                .replace("&amp;", "&")
                .replace("&quot;", "\"")
                .replace("&#39;", "'")
                .replace("&lt;", "<")
                .replace("&gt;", ">");
            let v = v.trim();
            if !v.is_empty() {
                out.push(v.to_string());
            }
        }
    }
    out
}

/// The references loaded as images: img (and input type=image) src, any background
/// attribute, CSS url(...); decoded as html_refs decodes them.
fn image_refs(text: &str) -> Vec<String> {
    let tag =
        regex::Regex::new(r#"<([A-Za-z][A-Za-z0-9-]*)((?:[^>"']|"[^"]*"|'[^']*')*)>"#).unwrap();
    let attr = regex::Regex::new(
        r#"(?i)\b(src|href|background)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>"']+))"#,
    )
    .unwrap();
    let input_image = regex::Regex::new(r#"(?i)\btype\s*=\s*["']?image\b"#).unwrap();
    let css = regex::Regex::new(r#"(?i)url\(\s*(?:"([^"]*)"|'([^']*)'|([^)\s]*))\s*\)"#).unwrap();
    let dec = |v: &str| {
        v.replace("&amp;", "&")
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .trim()
            .to_string()
    };
    let mut out = Vec::new();
    for t in tag.captures_iter(text) {
        let name = t[1].to_ascii_lowercase();
        let attrs = &t[2];
        let img = name == "img" || (name == "input" && input_image.is_match(attrs));
        for c in attr.captures_iter(attrs) {
            let a = c[1].to_ascii_lowercase();
            let Some(v) = c.get(2).or(c.get(3)).or(c.get(4)) else {
                continue;
            };
            let v = dec(v.as_str());
            if !v.is_empty() && (a == "background" || (a == "src" && img)) {
                out.push(v);
            }
        }
    }
    for c in css.captures_iter(text) {
        let Some(v) = c.get(1).or(c.get(2)).or(c.get(3)) else {
            continue;
        };
        let v = dec(v.as_str());
        if !v.is_empty() {
            out.push(v);
        }
    }
    out
}

fn pct_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

struct Node {
    id: usize,
    path: String,
    parent: Option<usize>,
    ct: Option<String>,
    cid: Option<String>,
    cl: Option<String>,
    rtype: Option<String>,
    start: Option<String>,
    html: Option<String>,
    resolved: Option<String>,
    name: Option<String>,
    opens: Option<&'static str>,
}

/// What the crate offers of a forwarded message or a file (the reader contract's
/// `opens`): a parsed message (the crate undoes a Content-Transfer-Encoding first) with
/// header fields, or none; the decoded content of an application/octet-stream part.
fn opens(part: &mail_parser::MessagePart, ct: Option<&str>) -> Option<&'static str> {
    match (&part.body, ct) {
        (PartType::Message(m), _) => Some(if !m.headers().is_empty() {
            "message"
        } else if m.raw_message().iter().all(u8::is_ascii_whitespace) {
            "empty"
        } else {
            "undecodable"
        }),
        (body, Some("application/octet-stream" | "message/rfc822" | "message/global")) => {
            let data: &[u8] = match body {
                PartType::Binary(b) | PartType::InlineBinary(b) => b,
                PartType::Text(t) | PartType::Html(t) => t.as_bytes(),
                _ => &[],
            };
            Some(if data.iter().all(u8::is_ascii_whitespace) {
                "empty"
            } else {
                "file"
            })
        }
        _ => None,
    }
}

fn strip_id(s: &str) -> &str {
    s.trim().trim_start_matches('<').trim_end_matches('>')
}

fn main() {
    let Some(file) = std::env::args().nth(1) else {
        eprintln!("usage: interop_mail_parser FILE.eml");
        std::process::exit(2);
    };
    let raw = match std::fs::read(&file) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{file}: {e}");
            std::process::exit(2);
        }
    };
    let mut out = json!({
        "reader": "rust-mail-parser", "version": version(), "ok": true, "error": null,
        "extbody": [], "parts": [], "related": [], "refs": [], "defects": [],
    });
    let Some(msg) = MessageParser::default().parse(&raw) else {
        out["ok"] = json!(false);
        out["error"] = json!("MessageParser::parse returned None");
        println!("{out}");
        return;
    };
    let mut nodes: Vec<Node> = Vec::new();
    // (part id, path, parent index)
    let mut stack = vec![(0usize, "0".to_string(), None::<usize>)];
    while let Some((id, path, parent)) = stack.pop() {
        let Some(part) = msg.parts.get(id) else {
            continue;
        };
        let ct = part
            .content_type()
            .map(|c| format!("{}/{}", c.ctype(), c.subtype().unwrap_or("")).to_ascii_lowercase());
        let attr = |n: &str| {
            part.content_type()
                .and_then(|c| c.attribute(n))
                .map(str::to_string)
        };
        let mut node = Node {
            id,
            path: path.clone(),
            parent,
            ct: ct.clone(),
            cid: part.content_id().map(str::to_string),
            cl: part.content_location().map(str::to_string),
            rtype: attr("type"),
            start: attr("start"),
            html: None,
            resolved: None,
            name: None,
            opens: None,
        };
        if !matches!(part.body, PartType::Multipart(_)) {
            node.name = part.attachment_name().map(str::to_string);
            node.opens = opens(part, ct.as_deref());
        }
        if ct.as_deref() == Some("message/external-body") {
            out["extbody"].as_array_mut().unwrap().push(json!({
                "part": path, "access_type": attr("access-type"), "url": attr("url"),
            }));
        }
        if let PartType::Html(h) = &part.body {
            node.html = Some(h.to_string());
        }
        let me = nodes.len();
        nodes.push(node);
        if let PartType::Multipart(kids) = &part.body {
            for (i, k) in kids.iter().enumerate().rev() {
                let p = if path == "0" {
                    format!("{}", i + 1)
                } else {
                    format!("{path}.{}", i + 1)
                };
                stack.push((*k as usize, p, Some(me)));
            }
        }
    }
    let id_of = |p: &mail_parser::MessagePart| msg.parts.iter().position(|q| std::ptr::eq(q, p));
    let listed: Vec<usize> = msg.attachments().filter_map(id_of).collect();
    let bodies: Vec<usize> = msg.html_bodies().filter_map(id_of).collect();
    for i in 0..nodes.len() {
        let mut base = "thismessage:/".to_string();
        let mut p = nodes[i].parent;
        while let Some(pi) = p {
            if let Some(pcl) = &nodes[pi].cl {
                if absolute(pcl.trim()) {
                    base = nodes[pi]
                        .resolved
                        .clone()
                        .unwrap_or_else(|| "thismessage:/".into());
                    break;
                }
            }
            p = nodes[pi].parent;
        }
        nodes[i].resolved = nodes[i].cl.as_ref().and_then(|cl| join(&base, cl.trim()));
        let n = &nodes[i];
        let mut entry = json!({
            "part": n.path, "content_type": n.ct, "content_id": n.cid,
            "content_location": n.cl, "resolved": n.resolved,
            "attachment": listed.contains(&n.id),
        });
        if !matches!(
            msg.parts.get(n.id).map(|p| &p.body),
            Some(PartType::Multipart(_))
        ) {
            entry["name"] = json!(n.name);
        }
        if let Some(o) = n.opens {
            entry["opens"] = json!(o);
        }
        if bodies.contains(&n.id)
            && matches!(
                msg.parts.get(n.id).map(|p| &p.body),
                Some(PartType::InlineBinary(_))
            )
        {
            entry["appended"] = json!(true);
        }
        out["parts"].as_array_mut().unwrap().push(entry);
    }
    for (i, n) in nodes.iter().enumerate() {
        if n.ct.as_deref() != Some("multipart/related") {
            continue;
        }
        let kids: Vec<&Node> = nodes.iter().filter(|k| k.parent == Some(i)).collect();
        let mut root = kids.first().map(|k| k.path.clone());
        if let Some(s) = n.start.as_deref().filter(|s| !s.is_empty()) {
            root = kids
                .iter()
                .find(|k| k.cid.as_deref().map(strip_id) == Some(strip_id(s)))
                .map(|k| k.path.clone());
        }
        out["related"]
            .as_array_mut()
            .unwrap()
            .push(json!({"part": n.path, "type": n.rtype, "root": root}));
    }
    let find_cid = |x: &str| {
        nodes
            .iter()
            .find(|k| k.cid.as_deref().map(strip_id) == Some(x))
            .map(|k| k.path.clone())
    };
    let mut refs: Vec<Value> = Vec::new();
    for n in &nodes {
        let Some(html) = &n.html else { continue };
        for r in html_refs(html) {
            let to = if r.len() >= 4 && r[..4].eq_ignore_ascii_case("cid:") {
                let x = &r[4..];
                find_cid(x).or_else(|| find_cid(&pct_decode(x)))
            } else {
                let base = n.resolved.clone().unwrap_or_else(|| "thismessage:/".into());
                join(&base, &r).and_then(|t| {
                    nodes
                        .iter()
                        .find(|k| k.resolved.as_deref() == Some(t.as_str()))
                        .map(|k| k.path.clone())
                })
            };
            refs.push(json!({"from": n.path, "ref": r, "to": to}));
        }
    }
    let mut images: Vec<Value> = Vec::new();
    for n in &nodes {
        let Some(html) = &n.html else { continue };
        if !bodies.contains(&n.id) {
            continue;
        }
        for r in image_refs(html) {
            let to = refs
                .iter()
                .find(|x| x["from"] == json!(n.path) && x["ref"] == json!(r))
                .map(|x| x["to"].clone())
                .unwrap_or(Value::Null);
            images.push(json!({"from": n.path, "ref": r, "to": to}));
        }
    }
    out["refs"] = Value::Array(refs);
    out["images"] = Value::Array(images);
    println!("{out}");
}
