//! Signed mail: a repair that would change what a signature covers is withheld while
//! that signature still protects something, and made where it does not.
//!
//! What a signature covers:
//! - DKIM-Signature and ARC-Message-Signature: the top-level fields named in `h=`, and the
//!   whole body (`bh=`), so any edit below the top-level heading breaks them.
//! - multipart/signed (RFC 1847): the first body part, heading included.
//! - application/pkcs7-mime (S/MIME): the whole entity.
//!
//! When a DKIM or ARC signature no longer protects anything (`standing`): its body hash
//! no longer matches the body, so it fails for every verifier already; or, under
//! `fix_signed = "verified"`, a trusted verifier recorded its result at this hop
//! (`verdicts`), so a repair after it changes no decision. multipart/signed and S/MIME
//! are never lifted by a DKIM verdict: only `fix_signed = true` changes them.
//!
//! Files: this one finds the covers and withholds; `standing`: whether a DKIM or ARC
//! signature still holds; `verdicts`: the trusted Authentication-Results of this hop and
//! the signatures they are about.

mod standing;
mod verdicts;

use std::ops::Range;

use crate::engine::model::analysis::Finding;
use crate::engine::model::edit::Edit;
use crate::engine::model::mime::Message;
use crate::engine::model::options::Options;
use crate::engine::model::rules::Rule;
use crate::engine::model::signature::{
    Lift, Signature, SignatureKind, Standing, Verdict, Withheld,
};
use crate::engine::syntax::ascii::eq_lower;

/// One thing a signature covers, and what signs it.
struct Cover {
    kind: SignatureKind,
    /// The signature field's value (DKIM, ARC), to judge its standing.
    value: Option<Range<usize>>,
    /// Part path the signature belongs to.
    part: String,
    /// Byte ranges of the original message it covers.
    ranges: Vec<Range<usize>>,
}

/// Withholds the edits that a signature which still protects something covers (the
/// findings they repair become not fixable), and reports `signed-content` for every
/// signature that covers an edit on offer, saying whether its edits are made or
/// withheld and why. Returns those findings and one record per such signature.
pub fn withhold_signed_fixes(
    msg: &Message,
    opts: &Options,
    findings: &mut [Finding],
    edits: &[Edit],
) -> (Vec<Finding>, Vec<Signature>) {
    let mut extra = Vec::new();
    let mut records = Vec::new();
    // No edit, nothing to withhold: the signatures are only looked for when there is one
    // (the look walks every part, ~10 instructions a part of a 10 000-part message).
    if edits.is_empty() {
        return (extra, records);
    }
    let covers = covers(msg);
    if covers.is_empty() {
        return (extra, records);
    }
    let mut judge = standing::Judge::new(msg, opts);
    // The edit each finding had before any signature withheld it: a fix covered by two
    // signatures is named by both.
    let offered: Vec<Option<usize>> = findings.iter().map(|f| f.edit).collect();
    for cover in &covers {
        let hit: Vec<usize> = (0..edits.len())
            .filter(|&i| cover.ranges.iter().any(|r| overlaps(r, &edits[i].range)))
            .collect();
        if hit.is_empty() {
            continue;
        }
        let (name, standing) = match &cover.value {
            Some(v) => judge.header_signature(cover.kind, v.clone()),
            None => (cover.part.clone(), Standing::Cms),
        };
        let decision = standing.decision(cover.kind, opts.fix_signed);
        let mut rules: Vec<&str> = Vec::new();
        for (f, edit) in findings.iter_mut().zip(&offered) {
            if edit.is_some_and(|i| hit.contains(&i)) {
                if !rules.contains(&f.rule.id()) {
                    rules.push(f.rule.id());
                }
                if decision.is_err() {
                    f.fixable = false;
                    f.edit = None;
                }
            }
        }
        let record = Signature {
            kind: cover.kind,
            name,
            part: cover.part.clone(),
            standing,
            decision,
            edits: hit,
        };
        extra.push(Finding::new(
            Rule::SignedContent,
            cover.part.clone(),
            format!(
                "{record} covers what the fixes for {} would change: {}",
                rules.join(", "),
                said(&record)
            ),
        ));
        records.push(record);
    }
    (extra, records)
}

/// The end of a `signed-content` finding: what happens to the edits, and why.
fn said(s: &Signature) -> String {
    let unknown = match &s.standing {
        Standing::Unknown(why, _) => format!(" ({why})"),
        _ => String::new(),
    };
    match (s.decision, &s.standing) {
        (Ok(Lift::BodyHashBroken), Standing::BodyHashBroken(why)) => {
            format!("{why}, so it protects nothing: fixes not withheld")
        }
        (Ok(Lift::Verified), Standing::Intact(Verdict::Taken(v)))
        | (Ok(Lift::Verified), Standing::Unknown(_, Verdict::Taken(v))) => {
            format!("its verdict is recorded at this hop ({v}), which a fix no longer changes: fixes not withheld")
        }
        (Ok(_), _) => "fixes applied anyway (fix_signed), breaking it".into(),
        (Err(Withheld::NotEnabled), Standing::Intact(Verdict::Taken(v)))
        | (Err(Withheld::NotEnabled), Standing::Unknown(_, Verdict::Taken(v))) => format!(
            "fixes withheld (a trusted verdict is recorded at this hop, {v}, but fix_signed is not \"verified\")"
        ),
        (Err(Withheld::Disagree), Standing::Intact(Verdict::Disagree(v)))
        | (Err(Withheld::Disagree), Standing::Unknown(_, Verdict::Disagree(v))) => {
            format!("fixes withheld (trusted verdicts disagree: {v})")
        }
        (Err(Withheld::Unknown), _) => format!("fixes withheld{unknown}"),
        (Err(Withheld::NoVerdict), _) => {
            "fixes withheld (it holds, and no trusted verdict is recorded for it at this hop)"
                .into()
        }
        (Err(_), _) => "fixes withheld".into(),
    }
}

fn overlaps(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}

fn covers(msg: &Message) -> Vec<Cover> {
    let mut out = Vec::new();
    let Some(top) = msg.entities.first() else {
        return out;
    };
    if top.buf != 0 {
        return out;
    }
    for (name, kind) in [
        ("dkim-signature", SignatureKind::Dkim),
        ("arc-message-signature", SignatureKind::Arc),
    ] {
        for (_, f) in msg.fields_named(top, name) {
            let signed_names = dkim_header_list(msg.value(top, f));
            // Compared in place: 50 signatures over 1,000 fields made 50,000 lower-case
            // copies of names.
            let mut ranges: Vec<Range<usize>> = msg
                .fields(top)
                .iter()
                .filter(|g| {
                    let n = msg.name(top, g);
                    signed_names.iter().any(|s| eq_lower(n, s.as_bytes()))
                })
                .map(|g| g.start..g.end)
                .collect();
            // The body hash covers everything after the top-level heading.
            ranges.push(top.body.start.min(msg.len)..msg.len);
            out.push(Cover {
                kind,
                value: Some(f.value.clone()),
                part: "0".into(),
                ranges,
            });
        }
    }
    for e in &msg.entities {
        if e.buf != 0 {
            continue;
        }
        if e.ctype.is("multipart", "signed") {
            if let Some(&first) = msg.children(e).first() {
                let c = &msg.entities[first];
                let start = msg.fields(c).first().map_or(c.header.start, |f| f.start);
                out.push(Cover {
                    kind: SignatureKind::MultipartSigned,
                    value: None,
                    part: msg.path(e).to_string(),
                    ranges: vec![Range {
                        start,
                        end: c.body.end,
                    }],
                });
            }
        } else if e.ctype.mtype == "application"
            && matches!(&*e.ctype.subtype, "pkcs7-mime" | "x-pkcs7-mime")
        {
            out.push(Cover {
                kind: SignatureKind::Smime,
                value: None,
                part: msg.path(e).to_string(),
                ranges: vec![Range {
                    start: e.header.start,
                    end: e.body.end,
                }],
            });
        }
    }
    out
}

/// Lower-case field names of a DKIM `h=` tag, read leniently: a signature too broken to
/// parse still names what a verifier would look at.
fn dkim_header_list(value: &[u8]) -> Vec<String> {
    for tag in value.split(|&b| b == b';') {
        let Some(eq) = tag.iter().position(|&b| b == b'=') else {
            continue;
        };
        if tag[..eq].trim_ascii() != b"h" {
            continue;
        }
        return tag[eq + 1..]
            .split(|&b| b == b':')
            .map(|n| n.trim_ascii())
            .filter(|n| !n.is_empty())
            .map(|n| String::from_utf8_lossy(n).to_ascii_lowercase())
            .collect();
    }
    Vec::new()
}

#[cfg(test)]
mod tests;
