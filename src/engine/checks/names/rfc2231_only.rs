//! `part-name-rfc2231-only`: a part whose file name is given only in RFC 2231 form
//! (`filename*=utf-8''…`, `name*0*=…` sections), as Python's `email`, Apple Mail and
//! several send APIs write it.
//!
//! RFC 2231 is the standard way, but Outlook (older, and over POP and IMAP), IBM
//! Notes, QQ Mail, Office 365's IMAP BODYSTRUCTURE and several libraries do not read
//! it and show a made-up name. The repair adds the twin they read, keeping the RFC
//! 2231 parameter: `name="=?UTF-8?B?…?="` on Content-Type and, where the part has a
//! Content-Disposition, the same as `filename` there, the text being the RFC 2231
//! value decoded (the field's own, else the other field's). A part that has a plain
//! name in either field (Thunderbird's RFC 2047 `name` beside an RFC 2231
//! `filename*`) is named for those readers already.

use crate::engine::model::analysis::{Context, Finding};
use crate::engine::model::rules::Rule;
use crate::engine::syntax::rfc2231::Unreadable;

use super::fields::{offer, rewritten, NameField, NewParam, Which};
use super::{show, Part, MAX_NAME};

pub(super) fn check(cx: &mut Context, part: &mut Part) {
    let named_plain = |f: Option<&NameField>| f.is_some_and(|f| f.plain().is_some());
    if named_plain(part.ct.as_ref()) || named_plain(part.cd.as_ref()) {
        return;
    }
    let ext = |w: Which| part.get(w).and_then(NameField::extended);
    let (from_ct, from_cd) = (ext(Which::Type), ext(Which::Disposition));
    if from_ct.is_none() && from_cd.is_none() {
        return;
    }
    for which in [Which::Type, Which::Disposition] {
        // The field's own RFC 2231 value, else the other field's.
        let (own, other) = match which {
            Which::Type => (&from_ct, &from_cd),
            Which::Disposition => (&from_cd, &from_ct),
        };
        let text = match (own, other) {
            (Some(Ok(t)), _) | (_, Some(Ok(t))) => Ok(t.clone()),
            (Some(Err(why)), _) | (_, Some(Err(why))) => Err(why.clone()),
            (None, None) => continue,
        };
        if part.get(which).is_some() && twin(cx, part, which, text) {
            part.reread(cx, which);
        }
    }
}

/// Reports the part's name for field `which`, offering its twin there from `text`;
/// whether an edit is offered.
fn twin(cx: &mut Context, part: &Part, which: Which, text: Result<String, Unreadable>) -> bool {
    let Some(f) = part.get(which) else {
        return false;
    };
    let msg = cx.msg;
    let e = &msg.entities[part.i];
    let forms: Vec<String> = [part.ct.as_ref(), part.cd.as_ref()]
        .into_iter()
        .flatten()
        .filter(|f| f.extended().is_some())
        .map(|f| format!("{}*", f.attr()))
        .collect();
    let mut finding = Finding::new(
        Rule::PartNameRfc2231Only,
        msg.path(e),
        format!(
            "the part names its file only in RFC 2231 form ({}{}): Outlook (older, and over POP and IMAP), IBM Notes, Office 365's IMAP and several libraries show a made-up name (RFC 2231 §4)",
            forms.join(", "),
            text.as_ref().map_or(String::new(), |t| format!(": \"{}\"", show(t.as_bytes())))
        ),
    );
    let attr = f.attr();
    let why_not = match &text {
        Err(why) => Some(format!("its value cannot be read for sure: {why}")),
        Ok(t) if t.len() > MAX_NAME => Some(format!(
            "a name of {} octets is longer than any file system keeps",
            t.len()
        )),
        Ok(_) if !f.writable => Some(format!(
            "the {} field cannot be rewritten in place",
            which.field()
        )),
        Ok(_) => None,
    };
    let edit = match (text, why_not) {
        (Ok(t), None) => {
            let new = rewritten(f, None, &[NewParam::Twin(t)], e.eol());
            finding.message.push_str(&format!(
                "; fix: add its twin {attr}=\"…\" on {}",
                which.field()
            ));
            Some(offer(cx, part.i, f, new, Rule::PartNameRfc2231Only))
        }
        (_, why) => {
            if let Some(why) = why {
                finding
                    .message
                    .push_str(&format!("; no twin added on {}: {why}", which.field()));
            }
            None
        }
    };
    if let Some(i) = edit {
        finding = finding.with_edit(i);
    }
    cx.report(finding);
    edit.is_some()
}
