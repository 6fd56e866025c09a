//! multipart/related (RFC 2387) and MHTML (RFC 2557) structure, and the Content-Location
//! and Content-Base rules, which apply to every heading of the message.
//!
//! Per multipart/related: `related-type-missing` (fixable: `type="<root type>"` is
//! inserted after the last parameter), `related-type-mismatch`, `related-start-dangling`,
//! `related-cid-duplicate`, `related-location-duplicate` (RFC 2557 §7, Content-IDs and
//! resolved Content-Locations checked independently among the direct children).
//! Per heading: `location-multiple`, `location-illegal-chars`, `location-line-too-long`
//! (fixable: RFC 2017 fold without quotes, RFC 2557 §4.4.2), `location-base-not-absolute`.
//!
//! The `cid:` references of text/html are checked in `checks::html`; Content-Location
//! resolution is in `syntax::content_location` and `model::base_uri`.
//!
//! Both RFC 2387 examples omit a `;` between parameters (§5.1 before `start=`, §5.2
//! before `type=`) and Opera writes `start=<…>` unquoted: the parameters after such a
//! defect are still read here (and no fix is offered on such a field), so that a `type`
//! written after a missing `;` is not reported as missing.

use std::collections::HashMap;

use crate::engine::model::analysis::{Context, Finding};
use crate::engine::model::base_uri;
use crate::engine::model::mime::{self, Entity, Kind, Message};
use crate::engine::model::rules::{Rule, Severity};
use crate::engine::syntax::ascii::eq_lower;
use crate::engine::syntax::ascii::excerpt;
use crate::engine::syntax::content_location::{self, parse_location};
use crate::engine::syntax::fold;
use crate::engine::syntax::msgid::addr_spec;
use crate::engine::syntax::params::ContentType;

/// RFC 5322 §2.1.1 soft line limit, which RFC 2557 §4.4.2 asks Content-Location to keep.
const SOFT_LINE: usize = 78;

fn is_related(e: &Entity) -> bool {
    // The kind first: one comparison settles it for every part that is not a multipart.
    matches!(e.kind, Kind::Multipart { .. }) && e.ctype.is("multipart", "related")
}

/// The direct children of `related` that carry a Content-ID, with its addr-spec (angle
/// brackets and CFWS removed, see `msgid::addr_spec`), in document order.
fn content_ids(msg: &Message, related: usize) -> Vec<(usize, Vec<u8>)> {
    let Some(r) = msg.entities.get(related) else {
        return Vec::new();
    };
    msg.children(r)
        .iter()
        .filter_map(|&c| {
            let e = &msg.entities[c];
            let f = msg.content_id(e)?;
            let id = addr_spec(msg.value(e, f));
            (!id.is_empty()).then_some((c, id))
        })
        .collect()
}

pub fn check(cx: &mut Context) {
    let msg = cx.msg;
    for i in 0..msg.entities.len() {
        let e = &msg.entities[i];
        if is_related(e) {
            check_related(cx, i);
        }
        // This runs for every part, and most have neither field: look before setting up
        // (the rules' set-up cost a 10 000-part message ~20 instructions a part).
        if e.has(mime::CONTENT_LOCATION | mime::CONTENT_BASE) {
            check_locations(cx, i);
        }
    }
}

fn check_related(cx: &mut Context, idx: usize) {
    let msg = cx.msg;
    let e = &msg.entities[idx];
    let Some(ct_field) = e.ctype_field else {
        return;
    };
    // The scanner's parse reads past a missing `;` (RFC 2387 §5.1 as printed) and an
    // unquoted start=<…> (Opera), as readers do.
    let params = &e.ctype;
    let children = msg.children(e);

    // Root: the start part, else the first (RFC 2387 §3.2).
    let ids = content_ids(msg, idx);
    let start = params.get("start").map(|v| v.value);
    let mut root = children.first().copied();
    if let Some(start) = &start {
        let want = addr_spec(start);
        match ids.iter().find(|(_, id)| *id == want) {
            Some(&(c, _)) => root = Some(c),
            None => {
                root = None;
                if !children.is_empty() {
                    cx.report(Finding::new(
                        Rule::RelatedStartDangling,
                        msg.path(e),
                        format!(
                            "multipart/related start=\"{}\" matches no Content-ID of its {} parts (RFC 2387 §3.2)",
                            excerpt(start),
                            children.len()
                        ),
                    ));
                }
            }
        }
    }

    check_type(cx, idx, ct_field, params, root);
    check_location_duplicates(cx, idx);
}

/// `related-cid-duplicate` for every multipart/related. Run after `checks::html`: a
/// duplicate that no reference or `start` names affects no reader, and is only logged.
pub fn check_duplicate_ids(cx: &mut Context) {
    let msg = cx.msg;
    for &i in msg.related() {
        if msg.entities[i].ctype_field.is_some() {
            let ids = content_ids(msg, i);
            check_cid_duplicates(cx, i, &ids);
        }
    }
}

fn check_type(
    cx: &mut Context,
    idx: usize,
    ct_field: usize,
    params: &ContentType,
    root: Option<usize>,
) {
    let msg = cx.msg;
    let e = &msg.entities[idx];
    // The root's path is made only for a finding: most type parameters match.
    let root_type = root.map(|r| (msg.entities[r].ctype.essence(), r));
    match params.get("type").map(|v| v.value) {
        None => {
            let mut finding = Finding::new(
                Rule::RelatedTypeMissing,
                msg.path(e),
                match &root_type {
                    Some((t, r)) => format!(
                        "multipart/related has no type parameter; its root (part {}) is {t} (RFC 2387 §3.1)",
                        msg.path(&msg.entities[*r])
                    ),
                    None => "multipart/related has no type parameter and no root part to take it from (RFC 2387 §3.1)".to_string(),
                },
            );
            if let (Some((t, _)), true) = (&root_type, params.is_clean()) {
                if let Some(edit) = insert_type(cx, idx, ct_field, t) {
                    finding = finding.with_edit(edit);
                }
            }
            cx.report(finding);
        }
        Some(given) => {
            let Some((t, r)) = root_type else {
                return;
            };
            let given_text = String::from_utf8_lossy(&given);
            let given_trim = given_text.trim_matches(|c: char| c.is_ascii_whitespace());
            if given_trim.eq_ignore_ascii_case(&t) {
                return;
            }
            let hint = if t == "multipart/alternative" {
                "; when the root is multipart/alternative, type must say so (RFC 2557 §7)"
            } else {
                ""
            };
            cx.report(Finding::new(
                Rule::RelatedTypeMismatch,
                msg.path(e),
                format!(
                    "multipart/related type=\"{}\" but its root (part {}) is {t} (RFC 2387 §3.1){hint}",
                    excerpt(given_trim.as_bytes()),
                    msg.path(&msg.entities[r])
                ),
            ));
        }
    }
}

/// Inserts `; type="<t>"` after the last parameter of the Content-Type value (as a
/// previous fixer left it), on a new line when the current one would pass 78 octets.
fn insert_type(cx: &mut Context, idx: usize, ct_field: usize, t: &str) -> Option<usize> {
    let msg = cx.msg;
    let e = &msg.entities[idx];
    if !e.editable() {
        return None;
    }
    let f = &msg.fields(e)[ct_field];
    let value: Vec<u8> = match cx.edits.pending(&f.value) {
        Some(v) => v.to_vec(),
        None => msg.value(e, f).to_vec(),
    };
    let ct = ContentType::parse(&value);
    if !ct.is_clean() || !ct.is("multipart", "related") {
        return None;
    }
    let at = ct.params.last()?.value_span.end;
    let line_start = value[..at]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |n| n + 1);
    let prefix = if line_start == 0 {
        f.value.start - f.start
    } else {
        0
    };
    let param = format!("type=\"{t}\"");
    let mut insert = Vec::new();
    insert.push(b';');
    if prefix + (at - line_start) + 2 + param.len() > SOFT_LINE {
        insert.extend_from_slice(e.eol());
    }
    insert.push(b' ');
    insert.extend_from_slice(param.as_bytes());
    let mut new = value[..at].to_vec();
    new.extend_from_slice(&insert);
    new.extend_from_slice(&value[at..]);
    let loc = msg.field_loc(e, ct_field);
    Some(
        cx.edits
            .rewrite(f.value.clone(), loc, new, Rule::RelatedTypeMissing),
    )
}

/// Equal Content-IDs among the direct children, by addr-spec octets; each later
/// duplicate is reported once, naming the first.
fn check_cid_duplicates(cx: &mut Context, related: usize, ids: &[(usize, Vec<u8>)]) {
    let msg = cx.msg;
    let mut first: HashMap<&[u8], usize> = HashMap::with_capacity(ids.len());
    for (c, id) in ids {
        match first.get(id.as_slice()) {
            None => {
                first.insert(id, *c);
            }
            Some(&f) => {
                let mut finding = Finding::new(
                    Rule::RelatedCidDuplicate,
                    msg.path(&msg.entities[*c]),
                    format!(
                        "Content-ID <{}> is also on part {} of the same multipart/related (RFC 2557 §7)",
                        excerpt(id),
                        msg.path(&msg.entities[f])
                    ),
                );
                // Readers differ only in which part a reference or start finds
                // (docs/INTEROP.md); with none naming the id, none is affected.
                if !cx.content_id_used(id, related) {
                    finding.severity = Severity::Info;
                    finding
                        .message
                        .push_str("; no cid: reference or start names it");
                }
                cx.report(finding)
            }
        }
    }
}

/// Whether two parts give a reader the same content: same media type and parameters,
/// same transfer encoding, byte-identical bodies. Then it does not matter which of
/// them a duplicate Content-Location leads to.
fn same_content(msg: &Message, a: usize, b: usize) -> bool {
    let (ea, eb) = (&msg.entities[a], &msg.entities[b]);
    let ctype = |e: &Entity| {
        e.ctype_field
            .map(|f| fold::unfold(msg.value(e, &msg.fields(e)[f])))
    };
    matches!((&ea.kind, &eb.kind), (Kind::Leaf, Kind::Leaf))
        && ea.encoding == eb.encoding
        && ctype(ea) == ctype(eb)
        && msg.body(ea) == msg.body(eb)
}

fn check_location_duplicates(cx: &mut Context, idx: usize) {
    let msg = cx.msg;
    let base = base_uri::base_for(msg, idx);
    let mut first: HashMap<String, usize> = HashMap::new();
    for &c in msg.children(&msg.entities[idx]) {
        let Some(loc) = base_uri::resolved_location_with(msg, c, &base) else {
            continue;
        };
        match first.get(&loc) {
            None => {
                first.insert(loc, c);
            }
            Some(&f) => {
                let mut finding = Finding::new(
                    Rule::RelatedLocationDuplicate,
                    msg.path(&msg.entities[c]),
                    format!(
                        "Content-Location resolves to {}, as on part {} of the same multipart/related (RFC 2557 §7)",
                        excerpt(loc.as_bytes()),
                        msg.path(&msg.entities[f])
                    ),
                );
                // Whichever of the two a reader picks (docs/INTEROP.md), it gets the
                // same bytes.
                if same_content(msg, f, c) {
                    finding.severity = Severity::Info;
                    finding
                        .message
                        .push_str("; the two parts are byte-identical");
                }
                cx.report(finding)
            }
        }
    }
}

#[inline(never)]
fn check_locations(cx: &mut Context, idx: usize) {
    let msg = cx.msg;
    let e = &msg.entities[idx];
    let mut locations: Vec<usize> = Vec::new();
    let mut bases: Vec<usize> = Vec::new();
    for (i, f) in msg.fields(e).iter().enumerate() {
        let name = msg.name(e, f);
        if eq_lower(name, b"content-location") {
            locations.push(i);
        } else if eq_lower(name, b"content-base") {
            bases.push(i);
        }
    }
    if locations.len() > 1 {
        cx.report(Finding::new(
            Rule::LocationMultiple,
            msg.path(e),
            format!(
                "{} Content-Location fields in one heading; only one is allowed (RFC 2557 §4.2)",
                locations.len()
            ),
        ));
    }
    for &fi in &locations {
        check_location_field(cx, idx, fi);
    }
    for fi in bases {
        let v = msg.value(e, &msg.fields(e)[fi]);
        let loc = parse_location(v);
        let enc = content_location::encode_for_comparison(&loc.value);
        if !content_location::is_absolute(&enc) {
            cx.report(Finding::new(
                Rule::LocationBaseNotAbsolute,
                msg.path(e),
                format!(
                    "Content-Base \"{}\" is not an absolute URI (RFC 3986 §4.3); it is ignored (Content-Base is obsolete, RFC 2557 §12)",
                    excerpt(v)
                ),
            ));
        }
    }
}

fn check_location_field(cx: &mut Context, idx: usize, fi: usize) {
    let msg = cx.msg;
    let e = &msg.entities[idx];
    let f = &msg.fields(e)[fi];
    let raw = msg.value(e, f);
    let loc = parse_location(raw);
    // CR LF and LF are folding; a CR on its own is not a line break (RFC 5322 §2.3)
    // but a control character inside the value.
    let ctl = raw.iter().enumerate().any(|(i, &b)| match b {
        b'\t' | b'\n' => false,
        b'\r' => raw.get(i + 1) != Some(&b'\n'),
        _ => b < 0x20 || b == 0x7f,
    });
    let eight = raw.iter().any(|&b| b >= 0x80);
    if loc.interior_space || ctl || eight {
        let what: Vec<&str> = [
            (loc.interior_space, "a space"),
            (ctl, "control characters"),
            (eight, "8-bit octets"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, w)| *w)
        .collect();
        cx.report(Finding::new(
            Rule::LocationIllegalChars,
            msg.path(e),
            format!(
                "Content-Location \"{}\" holds {} (RFC 2557 §4.4.1); not encoded here because the HTML that refers to it would have to change too",
                excerpt(raw),
                what.join(" and ")
            ),
        ));
    }
    let longest = crate::engine::model::mime::line_lengths(msg.buf(e), f)
        .max()
        .unwrap_or(0);
    if longest <= SOFT_LINE {
        return;
    }
    let mut finding = Finding::new(
        Rule::LocationLineTooLong,
        msg.path(e),
        format!(
            "Content-Location has a line of {longest} octets (RFC 5322 §2.1.1: at most {SOFT_LINE}; fold it as RFC 2557 §4.4.2 says)"
        ),
    );
    let clean = !(loc.interior_space || ctl || eight || loc.comments || loc.encoded_words);
    if clean && e.editable() {
        if let Some(edit) = fold_location(cx, idx, fi) {
            finding = finding.with_edit(edit);
        }
    }
    cx.report(finding);
}

/// The RFC 2017 §3.1 fold without quotes: ≤40-octet pieces joined by `<eol> SP`. Offered
/// only when the folded value reads back as the same URI and every line then fits.
fn fold_location(cx: &mut Context, idx: usize, fi: usize) -> Option<usize> {
    let msg = cx.msg;
    let e = &msg.entities[idx];
    let f = &msg.fields(e)[fi];
    let current = cx.current_value(e, f);
    let uri = parse_location(current).value;
    if uri.is_empty() {
        return None;
    }
    let mut new = vec![b' '];
    new.extend_from_slice(&fold::fold_plain(&uri, e.eol()));
    let name_len = f.value.start - f.start;
    let fits = new.split(|&b| b == b'\n').enumerate().all(|(n, l)| {
        let l = l.strip_suffix(b"\r").unwrap_or(l).len();
        l + if n == 0 { name_len } else { 0 } <= SOFT_LINE
    });
    if !fits || parse_location(&new).value != uri {
        return None;
    }
    let loc = msg.field_loc(e, fi);
    Some(
        cx.edits
            .rewrite(f.value.clone(), loc, new, Rule::LocationLineTooLong),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{check as analyse, fix, Limits, Options};

    fn found(raw: &str) -> Vec<(String, Rule, bool)> {
        let mut v: Vec<_> = analyse(raw.as_bytes(), &Options::default())
            .findings
            .into_iter()
            .map(|f| (f.part, f.rule, f.fixable))
            .collect();
        v.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        v
    }

    fn has(raw: &str, rule: Rule) -> Vec<String> {
        found(raw)
            .into_iter()
            .filter(|f| f.1 == rule)
            .map(|f| f.0)
            .collect()
    }

    fn fixed(raw: &str) -> String {
        String::from_utf8(fix(raw.as_bytes(), &Options::default()).unwrap().0).unwrap()
    }

    const REL: &str = "Content-Type: multipart/related; boundary=b\n\n--b\nContent-Type: text/html\nContent-ID: <root@x>\n\n<img src=cid:img@x>\n--b\nContent-Type: image/gif\nContent-Disposition: inline\nContent-ID: <img@x>\n\nGIF\n--b--\n";

    #[test]
    fn type_missing_is_fixed_with_the_root_type() {
        assert_eq!(
            found(REL),
            [("0".to_string(), Rule::RelatedTypeMissing, true)]
        );
        let out = fixed(REL);
        assert!(out.starts_with(
            "Content-Type: multipart/related; boundary=b; type=\"text/html\"\n\n--b\n"
        ));
        assert_eq!(out.len(), REL.len() + "; type=\"text/html\"".len());
        assert!(found(&out).is_empty(), "{out}");
    }

    #[test]
    fn type_missing_uses_the_start_part_and_folds_when_long() {
        let raw = REL
            .replace(
                "boundary=b\n",
                "boundary=\"b\"; start=\"<img@x>\";\n\tx-long-parameter-name=\"some long value to fill the line up and more\"\n",
            );
        let out = fixed(&raw);
        assert!(
            out.contains("and more\";\n type=\"image/gif\"\n\n--b"),
            "{out}"
        );
        assert!(has(&out, Rule::RelatedTypeMissing).is_empty());
    }

    #[test]
    fn type_after_a_missing_semicolon_is_not_missing() {
        // RFC 2387 §5.2 as printed: no ';' before type=.
        let raw = REL.replace(
            "boundary=b\n",
            "boundary=b; start=\"<root@x>\"\n type=\"Text/HTML\"\n",
        );
        assert!(found(&raw).is_empty(), "{:?}", found(&raw));
        // And without a type anywhere, reported but not fixed on such a field.
        let raw = REL.replace("boundary=b\n", "boundary=b\n start=\"<root@x>\"\n");
        assert_eq!(
            found(&raw),
            [("0".to_string(), Rule::RelatedTypeMissing, false)]
        );
    }

    #[test]
    fn type_mismatch_and_multipart_alternative_root() {
        let raw = REL.replace("boundary=b\n", "boundary=b; type=\"image/gif\"\n");
        assert_eq!(has(&raw, Rule::RelatedTypeMismatch), ["0"]);
        let same = REL.replace("boundary=b\n", "boundary=b; type=\"TEXT/HTML\"\n");
        assert!(has(&same, Rule::RelatedTypeMismatch).is_empty());
        let alt = "Content-Type: multipart/related; boundary=b; type=\"text/html\"\n\n--b\nContent-Type: multipart/alternative; boundary=a\n\n--a\n\nt\n--a\nContent-Type: text/html\n\nh\n--a--\n--b\nContent-ID: <i@x>\n\ni\n--b--\n";
        assert_eq!(has(alt, Rule::RelatedTypeMismatch), ["0"]);
        let ok = alt.replace("type=\"text/html\"", "type=\"multipart/alternative\"");
        assert!(has(&ok, Rule::RelatedTypeMismatch).is_empty());
    }

    #[test]
    fn start_dangling() {
        let raw = REL.replace(
            "boundary=b\n",
            "boundary=b; type=\"text/html\"; start=\"<nobody@x>\"\n",
        );
        assert_eq!(
            found(&raw),
            [("0".to_string(), Rule::RelatedStartDangling, false)]
        );
        // CFWS and brackets do not matter; the Opera unquoted form is read.
        let ok = REL.replace(
            "boundary=b\n",
            "boundary=b; type=\"image/gif\"; start=\" (c) <img@x> \"\n",
        );
        assert!(found(&ok).is_empty(), "{:?}", found(&ok));
        let opera = REL.replace(
            "boundary=b\n",
            "start=<img@x>; boundary=b; type=\"image/gif\"\n",
        );
        assert!(found(&opera).is_empty(), "{:?}", found(&opera));
    }

    #[test]
    fn cid_duplicates_among_direct_children_only() {
        let raw = REL.replace("<img@x>", "<root@x>");
        assert_eq!(has(&raw, Rule::RelatedCidDuplicate), ["2"]);
        assert!(has(REL, Rule::RelatedCidDuplicate).is_empty());
        // Octet comparison: case matters.
        let case = REL.replace("<img@x>", "<ROOT@x>");
        assert!(has(&case, Rule::RelatedCidDuplicate).is_empty());
    }

    fn severity_of(raw: &str, rule: Rule) -> Vec<(String, Severity)> {
        analyse(raw.as_bytes(), &Options::default())
            .findings
            .into_iter()
            .filter(|f| f.rule == rule)
            .map(|f| (f.part, f.severity))
            .collect()
    }

    /// Two images with one Content-ID, the HTML naming `ref_id`.
    fn dup_ids(ref_id: &str, start: &str) -> String {
        format!("Content-Type: multipart/related; boundary=b; type=\"text/html\"{start}\n\n--b\nContent-Type: text/html\n\n<img src=\"cid:{ref_id}\">\n--b\nContent-Type: image/gif\nContent-Disposition: inline\nContent-ID: <img@x>\n\nGIF1\n--b\nContent-Type: image/gif\nContent-Disposition: inline\nContent-ID: <img@x>\n\nGIF2\n--b--\n")
    }

    #[test]
    fn cid_duplicate_is_an_error_only_where_something_names_the_id() {
        let used = dup_ids("img@x", "");
        assert_eq!(
            severity_of(&used, Rule::RelatedCidDuplicate),
            [("3".to_string(), Severity::Error)]
        );
        // %-encoded in the URL, as RFC 2392 writes it: still a use.
        let encoded = dup_ids("img%40x", "");
        assert_eq!(
            severity_of(&encoded, Rule::RelatedCidDuplicate),
            [("3".to_string(), Severity::Error)]
        );
        // Named by start only: the root depends on it.
        let by_start = dup_ids("other@x", "; start=\"<img@x>\"");
        assert_eq!(
            severity_of(&by_start, Rule::RelatedCidDuplicate),
            [("3".to_string(), Severity::Error)]
        );
        // Nothing names it: still found, but info (logged, no report header).
        let unused = dup_ids("other@x", "");
        assert_eq!(
            severity_of(&unused, Rule::RelatedCidDuplicate),
            [("3".to_string(), Severity::Info)]
        );
        // A stylesheet that names any cid: is not followed, so it keeps the error.
        let css = unused.replace(
            "--b--\n",
            "--b\nContent-Type: text/css\n\nbody { background: url(cid:img@x) }\n--b--\n",
        );
        assert_eq!(
            severity_of(&css, Rule::RelatedCidDuplicate),
            [("3".to_string(), Severity::Error)]
        );
        // A reference in a message encapsulated elsewhere does not reach these parts.
        let elsewhere = format!(
            "Content-Type: multipart/mixed; boundary=m\n\n--m\n{}--m\nContent-Type: message/rfc822\n\nContent-Type: text/html\n\n<img src=\"cid:img@x\">\n--m--\n",
            unused
        );
        assert_eq!(
            severity_of(&elsewhere, Rule::RelatedCidDuplicate),
            [("1.3".to_string(), Severity::Info)]
        );
    }

    #[test]
    fn location_duplicate_of_identical_parts_is_info() {
        let raw = "Content-Type: multipart/related; boundary=b; type=\"text/html\"\n\n--b\nContent-Type: text/html\nContent-Location: http://x/p.html\n\n<img src=a.gif>\n--b\nContent-Type: image/gif\nContent-Location: http://x/a.gif\n\nGIF1\n--b\nContent-Type: image/gif\nContent-Location: http://x/a.gif\n\nGIF1\n--b--\n";
        assert_eq!(
            severity_of(raw, Rule::RelatedLocationDuplicate),
            [("3".to_string(), Severity::Info)]
        );
        // One octet of the body, the media type or the transfer encoding apart: the
        // reader's pick matters again.
        for other in [
            raw.replacen("GIF1\n--b--", "GIF2\n--b--", 1),
            raw.replacen(
                "image/gif\nContent-Location: http://x/a.gif\n\nGIF1\n--b--",
                "image/png\nContent-Location: http://x/a.gif\n\nGIF1\n--b--",
                1,
            ),
            raw.replacen(
                "a.gif\n\nGIF1\n--b--",
                "a.gif\nContent-Transfer-Encoding: base64\n\nGIF1\n--b--",
                1,
            ),
        ] {
            assert_ne!(other, raw);
            assert_eq!(
                severity_of(&other, Rule::RelatedLocationDuplicate),
                [("3".to_string(), Severity::Error)],
                "{other}"
            );
        }
    }

    #[test]
    fn location_duplicates_after_resolution() {
        let raw = "Content-Type: multipart/related; boundary=b; type=\"text/html\"\nContent-Location: http://x/dir/\n\n--b\nContent-Type: text/html\nContent-Location: a.gif\n\nh\n--b\nContent-Location: http://x/dir/a.gif\n\ni\n--b\nContent-Location: cid:a@b\n\nj\n--b\nContent-Location: CID:a@b\n\nk\n--b--\n";
        assert_eq!(has(raw, Rule::RelatedLocationDuplicate), ["2"]);
        // The multipart's own location is not in its children's set.
        let own = "Content-Type: multipart/related; boundary=b; type=\"text/html\"\nContent-Location: http://x/a\n\n--b\nContent-Type: text/html\nContent-Location: http://x/a\n\nh\n--b--\n";
        assert!(has(own, Rule::RelatedLocationDuplicate).is_empty());
        let cid = raw.replace("CID:a@b", "cid:a@b");
        assert_eq!(has(&cid, Rule::RelatedLocationDuplicate), ["2", "4"]);
    }

    #[test]
    fn location_field_rules() {
        let two = "Content-Location: a\nContent-Location: b\n\nx\n";
        assert_eq!(has(two, Rule::LocationMultiple), ["0"]);
        assert!(has(
            "Content-Location: a\nContent-ID: <b@c>\n\nx\n",
            Rule::LocationMultiple
        )
        .is_empty());
        assert_eq!(
            has(
                "Content-Location: a b.gif\n\nx\n",
                Rule::LocationIllegalChars
            ),
            ["0"]
        );
        assert_eq!(
            has(
                "Content-Location: caf\u{e9}.gif\n\nx\n",
                Rule::LocationIllegalChars
            ),
            ["0"]
        );
        assert!(has(
            "Content-Location: http://x/a\n b.gif (comment)\n\nx\n",
            Rule::LocationIllegalChars
        )
        .is_empty());
        // A bare CR is a control character; CR LF folding is not.
        assert_eq!(
            has(
                "Content-Location: http://x/a\rb.gif\n\nx\n",
                Rule::LocationIllegalChars
            ),
            ["0"]
        );
        assert!(has(
            "Content-Location: http://x/a\r\n b.gif\r\n\r\nx\r\n",
            Rule::LocationIllegalChars
        )
        .is_empty());
        assert_eq!(
            has(
                "Content-Base: images/\n\nx\n",
                Rule::LocationBaseNotAbsolute
            ),
            ["0"]
        );
        assert!(has(
            "Content-Base: http://x/images/\n\nx\n",
            Rule::LocationBaseNotAbsolute
        )
        .is_empty());
    }

    #[test]
    fn long_location_is_folded_rfc2017_style() {
        let url = format!(
            "https://en.wikipedia.org/wiki/{}_(planet)",
            "Mercury".repeat(10)
        );
        let raw = format!("Content-Type: text/html\nContent-Location: {url}\n\nx\n");
        assert_eq!(
            found(&raw),
            [("0".to_string(), Rule::LocationLineTooLong, true)]
        );
        let out = fixed(&raw);
        assert!(out.lines().all(|l| l.len() <= 78), "{out}");
        assert!(out.starts_with("Content-Type: text/html\nContent-Location: https://"));
        assert!(out.ends_with("\n\nx\n"));
        let m = Message::parse(out.as_bytes(), &Limits::default());
        assert_eq!(
            base_uri::resolved_location_with(&m, 0, content_location::THIS_MESSAGE).as_deref(),
            Some(url.as_str())
        );
        assert!(found(&out).is_empty(), "{out}");
        // 78 octets exactly is fine.
        let short = format!("Content-Location: {}\n\nx\n", "a".repeat(78 - 18));
        assert!(found(&short).is_empty());
        // A space in it: reported, not folded (folding would delete the space).
        let spaced = format!("Content-Location: {} b\n\nx\n", "a".repeat(80));
        assert!(found(&spaced).contains(&("0".to_string(), Rule::LocationLineTooLong, false)));
    }

    #[test]
    fn big_inputs_stay_linear() {
        // 19 000 children sharing one Content-ID and one Content-Location, and a
        // Content-Type of 20 000 parameters each missing its ';'.
        let mut raw =
            String::from("Content-Type: multipart/related; boundary=b; type=\"image/gif\"\n\n");
        for _ in 0..19_000 {
            raw.push_str("--b\nContent-Type: image/gif\nContent-Disposition: inline\nContent-ID: <same@x>\nContent-Location: a.gif\n\nx\n");
        }
        raw.push_str("--b--\n");
        let mut junk = String::from("Content-Type: multipart/related; boundary=b");
        for i in 0..20_000 {
            junk.push_str(&format!("\n x{i}=y"));
        }
        junk.push_str("\n\n--b\n\nx\n--b--\n");
        let t = std::time::Instant::now();
        let f = found(&raw);
        assert_eq!(
            f.iter()
                .filter(|f| f.1 == Rule::RelatedCidDuplicate)
                .count(),
            18_999
        );
        assert_eq!(
            f.iter()
                .filter(|f| f.1 == Rule::RelatedLocationDuplicate)
                .count(),
            18_999
        );
        assert_eq!(has(&junk, Rule::RelatedTypeMissing), ["0"]);
        assert!(t.elapsed().as_secs() < 30, "{:?}", t.elapsed());
    }

    #[test]
    fn content_ids_are_the_addr_specs_of_the_direct_children() {
        let raw = "Content-Type: multipart/related; boundary=o; type=\"multipart/related\"\n\n--o\nContent-Type: multipart/related; boundary=i; type=\"text/html\"\n\n--i\nContent-Type: text/html\n\nh\n--i\nContent-ID: <a%25b@x>\n\ni\n--i--\n--o--\n";
        let m = Message::parse(raw.as_bytes(), &Limits::default());
        assert_eq!(content_ids(&m, 1), [(3, b"a%25b@x".to_vec())]);
    }
}
