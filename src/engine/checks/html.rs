//! References inside text/html parts (RFC 2557 §8.2, §8.3; RFC 2392).
//!
//! Each text/html leaf is transfer-decoded, charset-decoded and its references collected
//! by the scanner of `syntax::html_refs`; then:
//!
//! - `cid:` references must match the Content-ID of a part in the same or an enclosing
//!   multipart/related (RFC 2557 §8.3), never one in a nested or sibling one; else
//!   `related-ref-dangling`. A `Content-Location: cid:…` never satisfies them. An HTML
//!   part with no enclosing multipart/related may use any Content-ID of its own message
//!   (RFC 2392 §2 scopes cid to the message).
//! - `cid:`/`mid:` URLs that are not URL-encoded addr-specs: `cid-url-syntax`.
//! - `mid:` URLs naming another message than the one holding the part: `mid-url-external`.
//! - Relative references are not findings: one that matches no Content-Location may
//!   point to the web.
//! - References that lead neither to a part nor to the network (`data:`, `blob:`,
//!   `file:`, loopback hosts…, `syntax::unreachable`) are kept in `HtmlPart::outside`
//!   for the rules of `checks::refs`.
//! - A part that a `related-ref-mismatch` reference could mean only while nothing names
//!   its own Content-ID stops being a candidate once every reference is read and one
//!   does (`settle_candidates`); a reference left with none dangles.
//!
//! Work is capped: parts larger than [`MAX_HTML_BYTES`] once decoded are skipped, at most
//! [`MAX_REFS_PER_PART`] references are read per part, and Content-ID sets are built
//! once per multipart/related, so the cost is linear in the message.

use std::collections::{HashMap, HashSet};

use crate::engine::syntax::content_location::THIS_MESSAGE;

use crate::engine::model::analysis::{
    place_loads, Context, Finding, HtmlPart, OutsideRef, Reference, Target,
};
use crate::engine::model::mime::{Kind, Message};
use crate::engine::model::rules::{Rule, Severity};
use crate::engine::syntax::ascii::clip;
use crate::engine::syntax::cid_url::{self, IdRef, IdUrl};
use crate::engine::syntax::decode::{charset_decode_to_utf8, transfer_decode};

use super::cid_scope::{resolve_cid, CidScopes, Resolution};
use super::location_scope::{Located, LocationScopes};
use crate::engine::syntax::html_refs::{scan_utf8, HtmlRef};
use crate::engine::syntax::msgid::parse_msg_id;
use crate::engine::syntax::unreachable::outside;

/// Largest text/html part analysed, in octets after transfer decoding. Larger parts are
/// skipped: real HTML mail is far below it, and the scan must stay cheap.
pub const MAX_HTML_BYTES: usize = 8 * 1024 * 1024;

/// Most references read from one part; the rest of the part is not scanned.
pub const MAX_REFS_PER_PART: usize = 5_000;

/// The part's text as UTF-8 octets (see [`charset_decode_to_utf8`]).
fn html_text(msg: &Message, entity: usize) -> Option<Vec<u8>> {
    let e = msg.entities.get(entity)?;
    if !e.ctype.is("text", "html") || !matches!(e.kind, Kind::Leaf) {
        return None;
    }
    let body = msg.body(e);
    // Base64 is 4/3 of the decoded size; anything far beyond cannot fit once decoded.
    if body.len() > MAX_HTML_BYTES / 3 * 4 + MAX_HTML_BYTES / 8 {
        return None;
    }
    let decoded = transfer_decode(body, e.encoding);
    if decoded.len() > MAX_HTML_BYTES {
        return None;
    }
    let charset = e.ctype.get_str("charset");
    Some(charset_decode_to_utf8(decoded, charset.as_deref()))
}

fn tried(r: &IdRef) -> String {
    if r.raw == r.decoded {
        format!("<{}>", clip(&r.decoded))
    } else {
        format!(
            "<{}> (%-decoded) or <{}> (as written)",
            clip(&r.decoded),
            clip(&r.raw)
        )
    }
}

/// Relative references kept per part as examples (`html-base-remote` names them).
const RELATIVE_EXAMPLES: usize = 3;

/// What the check of one message carries from one reference to the next.
struct State<'m, 'a> {
    scopes: CidScopes<'m, 'a>,
    locations: LocationScopes<'m, 'a>,
    /// Message headings whose Message-ID has been checked.
    message_ids_checked: HashSet<usize>,
    /// Parts given a Content-ID so far, with the edit: one per part, whatever the number
    /// of references to it.
    inserted: HashMap<usize, Option<usize>>,
    /// The HTML part being read lies in a multipart/related.
    in_related: bool,
    /// Candidates of `related-ref-mismatch` that stay candidates only while no
    /// reference names the Content-ID they have: (reference in `cx.refs`, part, id).
    conditional: Vec<(usize, usize, String)>,
}

/// Reports dangling `cid:` references, malformed `cid:`/`mid:` URLs and `mid:` URLs to
/// other messages, for every text/html part.
// Not inlined into `engine::run`: the benchmark guard and callgrind's `--toggle-collect`
// measure this check on its own.
#[inline(never)]
pub fn check(cx: &mut Context) {
    let msg = cx.msg;
    let htmls = msg.html_leaves();
    if htmls.is_empty() {
        return;
    }
    let mut st = State {
        scopes: CidScopes::new(msg),
        locations: LocationScopes::new(msg),
        message_ids_checked: HashSet::new(),
        inserted: HashMap::new(),
        in_related: false,
        conditional: Vec::new(),
    };
    for &idx in htmls {
        let Some(text) = html_text(msg, idx) else {
            cx.cid_refs_complete = false;
            continue;
        };
        let s = scan_utf8(&text, MAX_REFS_PER_PART);
        cx.cid_refs_complete &= !s.truncated;
        st.in_related = !st.scopes.related_ancestors(idx).is_empty();
        let mut part = HtmlPart {
            idx,
            own_base: s.base.clone(),
            ..HtmlPart::default()
        };
        // Relative references matter where they name a part, and where a base other
        // than the message itself sends them somewhere (`html-base-remote`).
        let base = st.locations.base(idx, s.base.as_deref());
        let with_locations = st.locations.any_location(idx);
        let locate = with_locations || base != THIS_MESSAGE;
        // URL -> its reference in cx.refs, so that a URL is recorded once per part.
        let mut seen: HashMap<&str, Option<usize>> = HashMap::new();
        // URL -> its place in part.outside, likewise.
        let mut outside_at: HashMap<&str, usize> = HashMap::new();
        for r in &s.refs {
            if let Some(&first) = seen.get(r.url.as_str()) {
                // An image after a link to the same part, or to the same place outside
                // the message: what the reader loads counts.
                if let Some(i) = first {
                    if !cx.refs[i].loads() {
                        cx.refs[i].place = r.place.clone();
                    }
                }
                if let Some(&o) = outside_at.get(r.url.as_str()) {
                    loaded_place(&mut part.outside[o].place, &r.place);
                }
                continue;
            }
            let Some(parsed) = cid_url::parse(&r.url) else {
                let at = locate
                    .then(|| locate_ref(cx, &mut st, &mut part, &base, r, with_locations))
                    .flatten();
                seen.insert(r.url.as_str(), at);
                // One that names a part (an MHTML archive's `file:` locations) is in
                // reach: the part is in the message.
                if at.is_none() && outside(&r.url) {
                    note_outside(&mut part, &mut outside_at, r);
                }
                continue;
            };
            seen.insert(
                r.url.as_str(),
                matches!(parsed, IdUrl::Cid(ref id) if !id.raw.is_empty()).then_some(cx.refs.len()),
            );
            let problem = cid_url::syntax_problem(&r.url);
            match parsed {
                IdUrl::Cid(id) if !id.raw.is_empty() => {
                    cx.cid_refs.push((idx, id.raw.clone(), id.decoded.clone()));
                    check_cid(cx, &mut st, idx, r, &id, problem.as_deref())
                }
                IdUrl::Cid(_) => {
                    if let Some(p) = problem {
                        cx.report(syntax_finding(&msg.path(&msg.entities[idx]), r, &p));
                    }
                }
                IdUrl::Mid { message, .. } => {
                    if let Some(p) = problem {
                        cx.report(syntax_finding(&msg.path(&msg.entities[idx]), r, &p));
                    }
                    check_mid(cx, &mut st, idx, r, &message);
                }
            }
        }
        cx.html_parts.push(part);
    }
    settle_candidates(cx, &st.conditional);
}

/// Takes out of the references' candidates each part whose own Content-ID some
/// reference names after all (now that every reference is read): that id is in use, so
/// the part is not what the reference lost. A reference left with none dangles.
fn settle_candidates(cx: &mut Context, conditional: &[(usize, usize, String)]) {
    let msg = cx.msg;
    let mut emptied = Vec::new();
    for (n, part, id) in conditional {
        if !cx.content_id_used(id.as_bytes(), *part) {
            continue;
        }
        if let Target::Candidates(v) = &mut cx.refs[*n].target {
            v.retain(|p| p != part);
            if v.is_empty() {
                cx.refs[*n].target = Target::Nothing;
                emptied.push((*n, *part));
            }
        }
    }
    for (n, part) in emptied {
        let r = &cx.refs[n];
        let (Some((raw, decoded)), hr) = (
            r.cid.clone(),
            HtmlRef {
                place: r.place.clone(),
                url: r.url.clone(),
            },
        ) else {
            continue;
        };
        let id = IdRef { raw, decoded };
        let rel = super::cid_scope::related_ancestors(msg, r.html)
            .first()
            .copied();
        let mut f = dangling(msg, &msg.path(&msg.entities[r.html]), &hr, &id, rel, None);
        f.message.push_str(&format!(
            "; part {} looks meant for it, but another reference names the Content-ID it has",
            msg.path(&msg.entities[part])
        ));
        cx.report(f);
    }
}

/// Records reference `r`, which leads neither to a part nor to the network, in
/// `part.outside`, its URL cut to what is ever read of it.
fn note_outside<'s>(part: &mut HtmlPart, seen: &mut HashMap<&'s str, usize>, r: &'s HtmlRef) {
    let mut cut = r.url.len().min(OutsideRef::URL_KEPT);
    while !r.url.is_char_boundary(cut) {
        cut -= 1;
    }
    seen.insert(r.url.as_str(), part.outside.len());
    part.outside.push(OutsideRef {
        place: r.place.clone(),
        url: r.url[..cut].to_string(),
    });
}

/// `kept` becomes `place` when that loads what the URL names and `kept` does not: an
/// image after a link to the same file is what the reader tries to show.
fn loaded_place(kept: &mut String, place: &str) {
    if !place_loads(kept) && place_loads(place) {
        *kept = place.to_string();
    }
}

/// Records where non-`cid:` reference `r` of the part leads: to a part by its
/// Content-Location (a reference), or, relative, to the base (an example in `part`).
/// Returns the index of the reference recorded, if any.
fn locate_ref(
    cx: &mut Context,
    st: &mut State,
    part: &mut HtmlPart,
    base: &str,
    r: &HtmlRef,
    with_locations: bool,
) -> Option<usize> {
    match st.locations.locate(part.idx, base, &r.url, with_locations) {
        Located::Part(at) => {
            cx.refs.push(Reference {
                html: part.idx,
                place: r.place.clone(),
                url: r.url.clone(),
                cid: None,
                target: Target::Location(at),
                in_related: true,
            });
            Some(cx.refs.len() - 1)
        }
        Located::Relative => {
            part.relative_count += 1;
            if part.relative.len() < RELATIVE_EXAMPLES {
                part.relative.push(r.url.clone());
            }
            None
        }
        Located::Other => None,
    }
}

/// `cid-url-syntax`: reference `r` of part `path` is not a URL-encoded addr-spec.
fn syntax_finding(path: &str, r: &HtmlRef, problem: &str) -> Finding {
    Finding::new(
        Rule::CidUrlSyntax,
        path,
        format!(
            "{} \"{}\" in text/html is not a URL-encoded addr-spec: {problem} (RFC 2392 §2)",
            r.place,
            clip(&r.url)
        ),
    )
}

/// The `cid:` reference `r` to `id` of text/html part `idx`, whose URL has the syntax
/// `problem`, if any. One defect, one finding: a URL that resolves is not reported again
/// for a syntax problem its Content-ID shares (content-id-syntax says it there), and one
/// that does not resolve says why in one finding.
fn check_cid(
    cx: &mut Context,
    st: &mut State,
    idx: usize,
    r: &HtmlRef,
    id: &IdRef,
    problem: Option<&str>,
) {
    let msg = cx.msg;
    // The part's path is made only for a finding: most references resolve cleanly.
    let path = || msg.path(&msg.entities[idx]);
    let resolution = resolve_cid(&mut st.scopes, idx, id);
    let target = match &resolution {
        Resolution::Found(at, in_related) => Target::ContentId {
            at: *at,
            in_related: *in_related,
        },
        Resolution::Lenient(parts) => Target::Lenient(parts.clone()),
        Resolution::LocationOnly(at) => Target::CidLocation(*at),
        Resolution::Candidates(parts) => {
            for (p, own) in parts {
                if let Some(own) = own {
                    st.conditional.push((cx.refs.len(), *p, own.clone()));
                }
            }
            Target::Candidates(parts.iter().map(|(p, _)| *p).collect())
        }
        Resolution::Dangling(..) => Target::Nothing,
    };
    cx.refs.push(Reference {
        html: idx,
        place: r.place.clone(),
        url: r.url.clone(),
        cid: Some((id.raw.clone(), id.decoded.clone())),
        target,
        in_related: st.in_related,
    });
    match resolution {
        Resolution::Found(at, _) => {
            cx.cid_targets.insert(at);
            if let Some(p) = problem {
                if content_id_parses(msg, at) {
                    let mut f = syntax_finding(&path(), r, p);
                    f.severity = Severity::Info;
                    f.message.push_str(&format!(
                        "; it resolves to part {} all the same",
                        msg.path(&msg.entities[at])
                    ));
                    cx.report(f);
                }
            }
        }
        Resolution::LocationOnly(at) => {
            cx.cid_targets.insert(at);
            let f = location_only(cx, &mut st.inserted, idx, at, r, id);
            cx.report(f);
        }
        // Reported by `checks::inline` (content-id-malformed), once every reference
        // is known: whether the repair is safe depends on all of them.
        Resolution::Lenient(parts) => cx.cid_targets.extend(parts),
        // Reported by `checks::inline` (related-ref-mismatch), likewise. No reader
        // finds the part.
        Resolution::Candidates(_) => cx.cid_dangling = true,
        Resolution::Dangling(rel, elsewhere) => {
            cx.cid_dangling = true;
            let mut f = dangling(msg, &path(), r, id, rel, elsewhere);
            if let Some(p) = problem {
                f.message.push_str(&format!(
                    "; the URL is also not a URL-encoded addr-spec: {p}"
                ));
            }
            cx.report(f);
        }
    }
}

/// The `mid:` reference `r` to `message` of text/html part `idx`: the Message-IDs of the
/// messages around the part are checked once, and a reference to another message is
/// `mid-url-external`.
fn check_mid(cx: &mut Context, st: &mut State, idx: usize, r: &HtmlRef, message: &IdRef) {
    for heading in st.scopes.message_headings_around(idx) {
        if st.message_ids_checked.insert(heading) {
            check_message_id(cx, heading);
        }
    }
    if message.raw.is_empty() {
        return;
    }
    let ours = st.scopes.message_ids_around(idx);
    if !ours.iter().any(|m| message.matches(m).is_some()) {
        let msg = cx.msg;
        cx.report(Finding::new(
            Rule::MidUrlExternal,
            msg.path(&msg.entities[idx]),
            format!(
                "{} \"{}\" names message {}, not this one: it cannot be resolved inside this message (RFC 2392 §2)",
                r.place,
                clip(&r.url),
                message.to_header()
            ),
        ));
    }
}

/// `content-id-syntax` for a Message-ID that `mid:` URLs of this message rely on (RFC 2392
/// §2 resolves them against it): it must be a msg-id like any Content-ID.
fn check_message_id(cx: &mut Context, heading: usize) {
    let msg = cx.msg;
    let e = &msg.entities[heading];
    for (_, f) in msg.fields_named(e, "message-id") {
        let v = msg.value(e, f);
        if let Err(why) = parse_msg_id(v) {
            cx.report(Finding::new(
                Rule::ContentIdSyntax,
                msg.path(e),
                format!(
                    "Message-ID \"{}\", which mid: URLs in this message refer to, is not a msg-id <left@right>: {} (RFC 5322 §3.6.4, RFC 2392 §2)",
                    crate::engine::syntax::ascii::excerpt(v),
                    why.describe()
                ),
            ));
        }
    }
}

/// Whether the first Content-ID of entity `i` is a msg-id.
fn content_id_parses(msg: &Message, i: usize) -> bool {
    let e = &msg.entities[i];
    msg.content_id(e)
        .is_some_and(|f| parse_msg_id(msg.value(e, f)).is_ok())
}

/// `related-cid-location-only` for a reference that only a `Content-Location: cid:` of
/// part `at` satisfies, with the repair on offer: `Content-ID: <id>` inserted right
/// after that Content-Location field (a new field of that heading; every other byte
/// stays). Not offered where the heading cannot be edited in place or the id could
/// not be written as a msg-id.
fn location_only(
    cx: &mut Context,
    inserted: &mut HashMap<usize, Option<usize>>,
    idx: usize,
    at: usize,
    r: &HtmlRef,
    id: &IdRef,
) -> Finding {
    let msg = cx.msg;
    let e = &msg.entities[at];
    let mut f = Finding::new(
        Rule::RelatedCidLocationOnly,
        msg.path(&msg.entities[idx]),
        format!(
            "{} \"{}\" matches no Content-ID, only the Content-Location of part {}, which readers that resolve cid: by Content-ID (RFC 2392 §2, RFC 2557 §8.3) do not find",
            r.place,
            clip(&r.url),
            msg.path(e)
        ),
    );
    if let Some(&edit) = inserted.get(&at) {
        if let Some(i) = edit {
            f = f.with_edit(i);
        }
        return f;
    }
    inserted.insert(at, None);
    let Some((fi, field)) = msg.fields_named(e, "content-location").next() else {
        return f;
    };
    // RFC 2392 §2: the Content-ID is the URL's %-decoded form.
    let writable = crate::engine::syntax::msgid::writable_id(&id.decoded);
    if !e.editable() || e.depth == 0 || !writable {
        return f;
    }
    let current = cx
        .edits
        .pending(&field.value)
        .map(<[u8]>::to_vec)
        .unwrap_or_else(|| msg.value(e, field).to_vec());
    let mut value = current;
    value.extend_from_slice(e.eol());
    value.extend_from_slice(b"Content-ID: <");
    value.extend_from_slice(id.decoded.as_bytes());
    value.push(b'>');
    let loc = msg.field_loc(e, fi);
    let i = cx.edits.rewrite(
        field.value.clone(),
        loc,
        value,
        Rule::RelatedCidLocationOnly,
    );
    f.message.push_str(&format!(
        "; fix: insert Content-ID: <{}> into part {}",
        clip(&id.decoded),
        msg.path(e)
    ));
    inserted.insert(at, Some(i));
    f.with_edit(i)
}

/// The `related-ref-dangling` finding for `id`, which matches nothing in scope.
fn dangling(
    msg: &Message,
    path: &str,
    r: &HtmlRef,
    id: &IdRef,
    related: Option<usize>,
    elsewhere: Option<usize>,
) -> Finding {
    let message = match (related, elsewhere) {
        (None, _) => format!(
            "{} \"{}\" matches no Content-ID {} in this message, which has no multipart/related (RFC 2392 §2, RFC 2557 §8.3)",
            r.place,
            clip(&r.url),
            tried(id)
        ),
        (Some(rel), None) => format!(
            "{} \"{}\" matches no Content-ID {} in the enclosing multipart/related (part {}) (RFC 2557 §8.3)",
            r.place,
            clip(&r.url),
            tried(id),
            msg.path(&msg.entities[rel])
        ),
        (Some(rel), Some(at)) => format!(
            "{} \"{}\" matches no Content-ID in the enclosing multipart/related (part {}); part {} has {} but lies outside it (RFC 2557 §8.3)",
            r.place,
            clip(&r.url),
            msg.path(&msg.entities[rel]),
            msg.path(&msg.entities[at]),
            tried(id)
        ),
    };
    Finding::new(Rule::RelatedRefDangling, path, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{check as analyse, Options};

    fn findings(raw: &[u8]) -> Vec<(String, &'static str)> {
        let a = analyse(raw, &Options::default());
        let mut v: Vec<_> = a
            .findings
            .iter()
            .filter(|f| {
                matches!(
                    f.rule,
                    Rule::RelatedRefDangling
                        | Rule::RelatedCidLocationOnly
                        | Rule::CidUrlSyntax
                        | Rule::MidUrlExternal
                        | Rule::ContentIdSyntax
                )
            })
            .map(|f| (f.part.clone(), f.rule.id()))
            .collect();
        v.sort();
        v
    }

    fn messages(raw: &[u8]) -> Vec<String> {
        analyse(raw, &Options::default())
            .findings
            .into_iter()
            .filter(|f| f.rule == Rule::RelatedRefDangling)
            .map(|f| f.message)
            .collect()
    }

    /// `<style>` elements are read like `style` attributes: `url(…)` with any quoting,
    /// and `@import` of a string or a `url(…)`. Comments are not references.
    #[test]
    fn dangling_cid_in_a_style_element_is_reported() {
        let raw = "Content-Type: multipart/related; boundary=r; type=\"text/html\"\n\n--r\nContent-Type: text/html\n\n<style>body { background: url(\"cid:gone@b.test\") }</style><img src=\"cid:a@b.test\">\n--r\nContent-Type: image/gif\nContent-Disposition: inline\nContent-ID: <a@b.test>\n\nGIF\n--r--\n";
        assert_eq!(
            findings(raw.as_bytes()),
            vec![("1".to_string(), "related-ref-dangling")]
        );
        let m = &messages(raw.as_bytes())[0];
        assert!(m.contains("gone@b.test"), "{m}");
    }

    const RELATED: &str = "Content-Type: multipart/related; boundary=r; type=\"text/html\"\n\n--r\nContent-Type: text/html\n\n<img src=\"cid:{REF}\">\n--r\nContent-Type: image/gif\nContent-Disposition: inline\nContent-ID: <{ID}>\n\nGIF\n--r--\n";

    fn related(reference: &str, id: &str) -> Vec<u8> {
        RELATED
            .replace("{REF}", reference)
            .replace("{ID}", id)
            .into_bytes()
    }

    #[test]
    fn cid_matches_decoded_and_raw_forms() {
        assert!(findings(&related("a@b.test", "a@b.test")).is_empty());
        // %-decoded form (RFC 2392 text)
        assert!(findings(&related("foo4%25foo1@bar.net", "foo4%foo1@bar.net")).is_empty());
        // the form as written (RFC 2392's example, erratum 454)
        assert!(findings(&related("foo4%25foo1@bar.net", "foo4%25foo1@bar.net")).is_empty());
        // scheme is case-insensitive
        let upper = String::from_utf8(related("a@b.test", "a@b.test"))
            .unwrap()
            .replace("cid:", "CID:");
        assert!(findings(upper.as_bytes()).is_empty());
    }

    #[test]
    fn dangling_cid_fires_and_says_what_was_tried() {
        assert_eq!(
            findings(&related("x%2By@b.test", "a@b.test")),
            vec![("1".to_string(), "related-ref-dangling")]
        );
        let m = &messages(&related("x%2By@b.test", "a@b.test"))[0];
        assert!(
            m.contains("<x+y@b.test> (%-decoded) or <x%2By@b.test> (as written)"),
            "{m}"
        );
        assert!(m.contains("part 0"), "{m}");
    }

    #[test]
    fn rfc2387_colon_typo_dangles_in_one_finding_that_names_the_syntax() {
        let raw = related("950118:AFDH@XIson.com", "950118.AFDH@XIson.com");
        assert_eq!(
            findings(&raw),
            vec![("1".to_string(), "related-ref-dangling")]
        );
        let m = &messages(&raw)[0];
        assert!(m.contains("also not a URL-encoded addr-spec"), "{m}");
    }

    #[test]
    fn content_location_cid_never_satisfies_a_cid_ref_and_the_content_id_is_inserted() {
        let raw = "Content-Type: multipart/related; boundary=r; type=\"text/html\"\n\n--r\nContent-Type: text/html\n\n<img src=\"cid:a@b.test\">\n--r\nContent-Type: image/gif\nContent-Disposition: inline\nContent-Location: cid:a@b.test\n\nGIF\n--r--\n";
        assert_eq!(
            findings(raw.as_bytes()),
            vec![("1".to_string(), "related-cid-location-only")]
        );
        let (fixed, a) = crate::engine::fix(raw.as_bytes(), &Options::default()).unwrap();
        assert!(a.findings[0].fixable);
        assert_eq!(
            String::from_utf8(fixed).unwrap(),
            raw.replace(
                "Content-Location: cid:a@b.test\n",
                "Content-Location: cid:a@b.test\nContent-ID: <a@b.test>\n"
            )
        );
        // With a Content-ID of its own the part is not given a second one.
        let other = raw.replace(
            "Content-Location: cid:a@b.test\n",
            "Content-Location: cid:a@b.test\nContent-ID: <z@b.test>\n",
        );
        assert_eq!(
            findings(other.as_bytes()),
            vec![("1".to_string(), "related-ref-dangling")]
        );
    }

    #[test]
    fn one_bad_id_referenced_consistently_is_one_info_finding() {
        // Gmail writes <ii_…> without an @ and refers to it as cid:ii_…
        let raw = related("ii_m3x9", "ii_m3x9");
        let a = analyse(&raw, &Options::default());
        let got: Vec<(&str, Severity)> = a
            .findings
            .iter()
            .map(|f| (f.rule.id(), f.severity))
            .collect();
        assert_eq!(got, vec![("content-id-syntax", Severity::Info)]);
        // Not referenced while a reference dangles: that reference may be meant for it.
        let a = analyse(&related("gone@x.test", "ii_m3x9"), &Options::default());
        let got: Vec<(&str, Severity)> = a
            .findings
            .iter()
            .map(|f| (f.rule.id(), f.severity))
            .collect();
        assert_eq!(
            got,
            vec![
                ("related-ref-dangling", Severity::Warning),
                ("content-id-syntax", Severity::Warning)
            ]
        );
    }

    #[test]
    fn sibling_related_dangles_enclosing_related_matches() {
        // 1 = related[html 1.1 -> cid in 2.2 and cid in 1.2 and cid in 0's direct child 3]
        let raw = "Content-Type: multipart/related; boundary=o; type=\"multipart/related\"\n\n--o\nContent-Type: multipart/related; boundary=a; type=\"text/html\"\n\n--a\nContent-Type: text/html\n\n<img src=\"cid:sib@x.test\"><img src=\"cid:own@x.test\"><img src=\"cid:outer@x.test\">\n--a\nContent-Type: image/gif\nContent-Disposition: inline\nContent-ID: <own@x.test>\n\nG\n--a--\n--o\nContent-Type: multipart/related; boundary=b; type=\"text/plain\"\n\n--b\nContent-Type: text/plain\n\nt\n--b\nContent-Type: image/gif\nContent-Disposition: inline\nContent-ID: <sib@x.test>\n\nG\n--b--\n--o\nContent-Type: image/gif\nContent-Disposition: inline\nContent-ID: <outer@x.test>\n\nG\n--o--\n";
        assert_eq!(
            findings(raw.as_bytes()),
            vec![("1.1".to_string(), "related-ref-dangling")]
        );
        let m = &messages(raw.as_bytes())[0];
        assert!(
            m.contains("cid:sib@x.test") && m.contains("part 2.2"),
            "{m}"
        );
    }

    #[test]
    fn without_related_the_whole_message_is_the_scope() {
        let raw = "Content-Type: multipart/mixed; boundary=m\n\n--m\nContent-Type: text/html\n\n<img src=\"cid:a@x.test\"><img src=\"cid:nope@x.test\">\n--m\nContent-Type: image/gif\nContent-Disposition: inline\nContent-ID: <a@x.test>\n\nG\n--m\nContent-Type: message/rfc822\n\nContent-Type: image/gif\nContent-Disposition: inline\nContent-ID: <nope@x.test>\n\nG\n--m--\n";
        // The part inside the attached message is another message: still dangling.
        assert_eq!(
            findings(raw.as_bytes()),
            vec![("1".to_string(), "related-ref-dangling")]
        );
    }

    #[test]
    fn message_id_used_by_mid_urls_must_be_a_msg_id() {
        let bad =
            "Message-ID: not-a-msg-id\nContent-Type: text/html\n\n<a href=\"mid:x@y\">m</a>\n";
        let f = findings(bad.as_bytes());
        // It cannot resolve against a broken Message-ID either, so it is also external.
        assert_eq!(
            f,
            [
                ("0".to_string(), "content-id-syntax"),
                ("0".to_string(), "mid-url-external")
            ]
        );
        // The same bad Message-ID is none of our business without a mid: URL.
        let no_mid =
            "Message-ID: not-a-msg-id\nContent-Type: text/html\n\n<a href=\"http://x/\">m</a>\n";
        assert!(findings(no_mid.as_bytes()).is_empty());
        let good = "Message-ID: <x@y>\nContent-Type: text/html\n\n<a href=\"mid:x@y\">m</a>\n";
        assert!(findings(good.as_bytes()).is_empty());
    }

    #[test]
    fn mid_urls_to_other_messages_are_external() {
        let raw = "Message-ID: <970701.32784@VIers.none.com>\nContent-type: text/html; charset=usascii\n\n<A HREF=\"mid:960830.1639@XIson.com/partA.960830.1639@XIson.com\">previous</A>\n<a href=\"MID:970701.32784@VIers.none.com\">self</a><a href=\"mid:bad\">x</a>\n";
        assert_eq!(
            findings(raw.as_bytes()),
            vec![
                ("0".to_string(), "cid-url-syntax"),
                ("0".to_string(), "mid-url-external"),
                ("0".to_string(), "mid-url-external"),
            ]
        );
    }

    #[test]
    fn encoded_html_is_decoded_and_relative_refs_are_not_findings() {
        // "<img src=3D"cid:q@x.test"><img src=3D"images/a.gif">" in QP, Latin-1.
        let raw = "Content-Type: multipart/related; boundary=r; type=\"text/html\"\n\n--r\nContent-Type: text/html; charset=iso-8859-1\nContent-Transfer-Encoding: quoted-printable\nContent-Location: http://w.test/p/index.html\n\n<p>caf=E9</p><img src=3D\"ci=\nd:q@x.test\"><img src=3D\"images/a.gif\">\n--r\nContent-Type: image/gif\nContent-Disposition: inline\nContent-ID: <q@x.test>\n\nG\n--r--\n";
        assert!(findings(raw.as_bytes()).is_empty());
        // and when the Content-ID is missing, the decoded reference dangles
        let broken = raw.replace("Content-ID: <q@x.test>\n", "");
        assert_eq!(
            findings(broken.as_bytes()),
            vec![("1".to_string(), "related-ref-dangling")]
        );
    }

    #[test]
    fn repeated_refs_are_reported_once() {
        let raw = related("zz@b.test", "a@b.test");
        let doubled = String::from_utf8(raw).unwrap().replace(
            "<img src=\"cid:zz@b.test\">",
            "<img src=\"cid:zz@b.test\"><a href=\"cid:zz@b.test\">x</a>",
        );
        assert_eq!(findings(doubled.as_bytes()).len(), 1);
    }
}
