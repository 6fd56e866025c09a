//! Content-IDs that references miss: `content-id-malformed` and `related-ref-mismatch`.
//!
//! `content-id-malformed`: a `cid:` reference names a part only when its Content-ID is
//! read leniently (`msgid::id_forms`): written without angle brackets (`1312`, Python's
//! `add_attachment(cid=)`), with two pairs (`<<x>>`), with the scheme inside
//! (`<cid:x>`), RFC 2047-encoded, or with white space inside. Thunderbird and rspamd
//! strip one pair of brackets and compare the rest; Gmail is reported to need them.
//! Repair: the value becomes `<id>`, the id the references name, when exactly that part
//! matches and they all name it alike.
//!
//! `related-ref-mismatch`: a `cid:` reference matches no Content-ID in any reading, but
//! one part of its scope is plainly meant: its Content-ID differs only in letter case (a
//! gateway upper-cased it); or its file name is the id or the id's part before `@` and
//! it has no Content-ID (the sender never set one) or one no reference names (Symfony
//! Mailer's generated id beside a reference by file name); or its Content-ID, which no
//! reference names, is the id cut short or cuts it short (converters, simple-java-mail
//! #307). Repair: that part gets `Content-ID: <id>`, inserted, or replacing an id no
//! other reference uses, and only as a msg-id where it replaces a generated or cut one
//! (`cid:@images/logo.png`, a Twig asset path, is reported, never written). With several
//! candidates no part is guessed. A reference that lost characters inside
//! (`cid:image003png@…` for `<image003.png@…>`, the mark of a phishing kit's copy) is
//! none of these and stays `related-ref-dangling`: a repair would show the phish better.

use std::collections::{BTreeMap, BTreeSet};

use crate::engine::model::analysis::{Context, Finding, Reference, Target};
use crate::engine::model::mime::Message;
use crate::engine::model::rules::Rule;
use crate::engine::syntax::ascii::{clip, excerpt};
use crate::engine::syntax::msgid::{cut_short, id_forms, parse_msg_id, writable_id};

use super::insert_field;

/// Reports both rules; returns the parts whose Content-ID repair is on offer.
pub(super) fn check(cx: &mut Context) -> BTreeSet<usize> {
    let mut repaired = malformed(cx);
    repaired.extend(mismatch(cx));
    repaired
}

/// The id reference `r` names, in the form that matches `id` (its %-decoded form
/// unless only the form as written does): what a repaired Content-ID must say.
fn named_as(r: &Reference, id: &str) -> Option<String> {
    let (raw, decoded) = r.cid.as_ref()?;
    Some(if decoded != id && raw == id {
        raw.clone()
    } else {
        decoded.clone()
    })
}

/// Replaces the value of part `at`'s only Content-ID field by ` <id>`.
fn rewrite_id(cx: &mut Context, at: usize, id: &str, rule: Rule) -> Option<usize> {
    let msg = cx.msg;
    let e = &msg.entities[at];
    let mut fields = msg.content_ids(e);
    let (fi, field) = fields.next()?;
    if fields.next().is_some() || !e.editable() || e.depth == 0 || !writable_id(id) {
        return None;
    }
    let loc = msg.field_loc(e, fi);
    let value = format!(" <{id}>").into_bytes();
    Some(cx.edits.rewrite(field.value.clone(), loc, value, rule))
}

fn malformed(cx: &mut Context) -> BTreeSet<usize> {
    let msg = cx.msg;
    let mut repaired = BTreeSet::new();
    // Part -> the references that find it only leniently.
    let mut by_part: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut ambiguous: Vec<usize> = Vec::new();
    for (n, r) in cx.refs.iter().enumerate() {
        match &r.target {
            Target::Lenient(parts) if parts.len() == 1 => {
                by_part.entry(parts[0]).or_default().push(n)
            }
            Target::Lenient(_) => ambiguous.push(n),
            _ => {}
        }
    }
    for (at, refs) in by_part {
        let e = &msg.entities[at];
        let Some(field) = msg.content_id(e) else {
            continue;
        };
        let value = msg.value(e, field);
        let forms = id_forms(value);
        let Some((lenient, why)) = forms.lenient else {
            continue;
        };
        let lenient = String::from_utf8_lossy(&lenient).into_owned();
        let first = &cx.refs[refs[0]];
        let mut f = Finding::new(
            Rule::ContentIdMalformed,
            msg.path(e),
            format!(
                "Content-ID \"{}\" is found by {} only when read leniently: {} (RFC 2045 §7, RFC 2392 §2); readers that compare it as written (Gmail is reported among them) do not show the part there",
                excerpt(value),
                first.describe(msg),
                why.describe()
            ),
        );
        let names: Vec<String> = refs
            .iter()
            .filter_map(|&n| named_as(&cx.refs[n], &lenient))
            .collect();
        let one = names.iter().all(|x| *x == names[0]);
        // Every reference that leads to the part, strictly or not, must still do so.
        let strict_users = cx
            .refs
            .iter()
            .any(|r| matches!(r.target, Target::ContentId { at: a, .. } if a == at));
        if let (true, false, Some(id)) = (one, strict_users, names.first()) {
            if let Some(edit) = rewrite_id(cx, at, id, Rule::ContentIdMalformed) {
                f.message
                    .push_str(&format!("; fix: Content-ID: <{}>", clip(id)));
                f = f.with_edit(edit);
                repaired.insert(at);
            }
        }
        cx.malformed_ids.insert(at);
        cx.report(f);
    }
    for n in ambiguous {
        let r = &cx.refs[n];
        let Target::Lenient(parts) = &r.target else {
            continue;
        };
        let paths: Vec<_> = parts.iter().map(|&p| msg.path(&msg.entities[p])).collect();
        let f = Finding::new(
            Rule::ContentIdMalformed,
            msg.path(&msg.entities[r.html]),
            format!(
                "{} matches, when read leniently, the Content-IDs of parts {}: none is a msg-id every reader matches, and which one is meant cannot be told (RFC 2045 §7, RFC 2392 §2)",
                r.describe(msg),
                paths.join(", ")
            ),
        );
        cx.report(f);
    }
    repaired
}

/// Why a part is a candidate for a reference's id X (see `cid_scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Why {
    /// Its Content-ID is X in another letter case.
    Case,
    /// It has no Content-ID, and its file name is X or X's part before `@`.
    Name,
    /// Its Content-ID, which no reference names, stands beside a file name that is X or
    /// X's part before `@`.
    NameBesideId,
    /// Its Content-ID, which no reference names, is X cut short, or X is it cut short.
    Cut,
}

/// Why part `c` is a candidate for reference `r`.
fn why(msg: &Message, c: usize, r: &Reference) -> Why {
    let e = &msg.entities[c];
    let Some(field) = msg.content_id(e) else {
        return Why::Name;
    };
    let forms = id_forms(msg.value(e, field));
    let own = forms
        .exact
        .into_iter()
        .chain(forms.lenient.map(|(id, _)| id))
        .map(|id| String::from_utf8_lossy(&id).into_owned());
    let ids: Vec<&str> = r
        .cid
        .iter()
        .flat_map(|(raw, dec)| [raw.as_str(), dec.as_str()])
        .collect();
    let own: Vec<String> = own.collect();
    if own
        .iter()
        .any(|o| ids.iter().any(|x| x.eq_ignore_ascii_case(o)))
    {
        Why::Case
    } else if own.iter().any(|o| ids.iter().any(|x| cut_short(x, o))) {
        Why::Cut
    } else {
        Why::NameBesideId
    }
}

/// What the finding says of candidate part `c`.
fn why_candidate(msg: &Message, c: usize, why: Why) -> String {
    let e = &msg.entities[c];
    let id = || {
        msg.content_id(e)
            .map(|f| excerpt(msg.value(e, f)))
            .unwrap_or_default()
    };
    match why {
        Why::Case => format!(
            "part {} has Content-ID \"{}\", which differs only in letter case",
            msg.path(e),
            id()
        ),
        Why::Name => format!(
            "part {} has no Content-ID, and its file name is the id",
            msg.path(e)
        ),
        Why::NameBesideId => format!(
            "part {}, whose file name is the id, has Content-ID \"{}\", which no reference names (a generated id beside a reference by file name)",
            msg.path(e),
            id()
        ),
        Why::Cut => format!(
            "part {} has Content-ID \"{}\", which no reference names and which is the id cut short, or the id is it cut short",
            msg.path(e),
            id()
        ),
    }
}

fn mismatch(cx: &mut Context) -> BTreeSet<usize> {
    let (by_part, claimed_once) = candidates(cx);
    let mut repaired = BTreeSet::new();
    for (c, refs) in by_part {
        if repair_candidate(cx, c, &refs, claimed_once.contains(&c)) {
            repaired.insert(c);
        }
    }
    repaired
}

/// The references that mean exactly one candidate part, by part, and the parts claimed
/// for one id only. A reference with several candidates is reported here, and none of
/// them is changed.
fn candidates(cx: &mut Context) -> (BTreeMap<usize, Vec<usize>>, BTreeSet<usize>) {
    let msg = cx.msg;
    // Candidate part -> references that mean it.
    let mut by_part: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    // Candidate part -> every id some reference could mean it for, also where it is one
    // of several candidates: a part claimed for two ids is given neither, or the repair
    // for one would change whom the other may mean (one repair after another).
    let mut claims: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
    let mut findings = Vec::new();
    for (n, r) in cx.refs.iter().enumerate() {
        if let (Target::Candidates(parts), Some((_, id))) = (&r.target, &r.cid) {
            for &p in parts {
                claims.entry(p).or_default().insert(id.clone());
            }
        }
        if let Target::Candidates(parts) = &r.target {
            if parts.len() == 1 {
                by_part.entry(parts[0]).or_default().push(n);
            } else {
                let paths: Vec<_> = parts.iter().map(|&p| msg.path(&msg.entities[p])).collect();
                let f = Finding::new(
                    Rule::RelatedRefMismatch,
                    msg.path(&msg.entities[r.html]),
                    format!(
                        "{} matches no Content-ID; parts {} could each be meant (a Content-ID in another letter case, or a file name), so none is changed (RFC 2392 §2, RFC 2557 §8.3)",
                        r.describe(msg),
                        paths.join(", ")
                    ),
                );
                findings.push(f);
            }
        }
    }
    for f in findings {
        cx.report(f);
    }
    let claimed_once = claims
        .iter()
        .filter(|(_, ids)| ids.len() == 1)
        .map(|(&p, _)| p)
        .collect();
    (by_part, claimed_once)
}

/// Gives candidate part `c` the id its references `refs` name, when they all name it
/// one way, nothing else claims it, and no other reference finds it by the id it has
/// now; reports each reference, with the fix on the first. True when an edit is offered.
fn repair_candidate(cx: &mut Context, c: usize, refs: &[usize], claimed_once: bool) -> bool {
    let msg = cx.msg;
    let names: Vec<String> = refs
        .iter()
        .filter_map(|&n| cx.refs[n].cid.as_ref().map(|(_, d)| d.clone()))
        .collect();
    let one = !names.is_empty() && claimed_once;
    // Another reference that finds the part by the id it has now keeps it.
    let in_use = cx.refs.iter().any(|r| {
        matches!(&r.target, Target::ContentId { at, .. } if *at == c)
            || matches!(&r.target, Target::Lenient(v) if v.contains(&c))
    });
    let has_id = msg.content_id(&msg.entities[c]).is_some();
    let why = why(msg, c, &cx.refs[refs[0]]);
    // A field added where there was none must itself be well-formed: an id with no
    // `@` (a bare file name) is not a msg-id, and libraries that parse Content-IDs
    // (Ruby's mail) report the new field as a defect (docs/INTEROP.md). So must an id
    // that replaces one a sender generated: `cid:@images/logo.png` (Symfony's Twig
    // paths) names a file, and is never written into a Content-ID.
    let msg_id = one && parse_msg_id(format!("<{}>", names[0]).as_bytes()).is_ok();
    let needs_msg_id = !has_id || why != Why::Case;
    let edit = match (one, in_use, has_id) {
        (true, false, true) if msg_id || !needs_msg_id => {
            rewrite_id(cx, c, &names[0], Rule::RelatedRefMismatch)
        }
        (true, _, false) if writable_id(&names[0]) && msg_id => insert_field(
            cx,
            c,
            "Content-ID",
            &format!("<{}>", names[0]),
            Rule::RelatedRefMismatch,
        ),
        _ => None,
    };
    for (k, &n) in refs.iter().enumerate() {
        let r = &cx.refs[n];
        let mut f = Finding::new(
            Rule::RelatedRefMismatch,
            msg.path(&msg.entities[r.html]),
            format!(
                "{} matches no Content-ID, but {} (RFC 2392 §2, RFC 2557 §8.3)",
                r.describe(msg),
                why_candidate(msg, c, why)
            ),
        );
        match edit {
            Some(i) => {
                if k == 0 {
                    f.message.push_str(&format!(
                        "; fix: Content-ID: <{}> on part {}",
                        clip(&names[0]),
                        msg.path(&msg.entities[c])
                    ));
                }
                f = f.with_edit(i);
            }
            None if !one => f
                .message
                .push_str("; references name it in different forms, so it is not changed"),
            None if in_use => f.message.push_str(
                "; another reference finds it by its present Content-ID, so it is not changed",
            ),
            None if !has_id && !msg_id => f.message.push_str(
                "; not inserted: the id has no @, so the new Content-ID would not be a msg-id",
            ),
            None if needs_msg_id && !msg_id => f.message.push_str(
                "; not changed: the id is not a msg-id <left@right>, so the new Content-ID would not be one",
            ),
            None => {}
        }
        cx.report(f);
    }
    edit.is_some()
}
