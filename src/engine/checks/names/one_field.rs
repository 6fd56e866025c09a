//! `part-name-one-field`: an attachment that names its file in only one of
//! Content-Type `name` and Content-Disposition `filename`.
//!
//! RFC 2183 puts the name in `filename`; `name` on Content-Type is older (RFC 1341)
//! and still what some readers read first, or only. Outlook and Exchange write both;
//! many libraries only one, and the reader that reads only the other shows a made-up
//! name. The repair copies the name, in each sound form it has (RFC 2231 re-encoded in
//! UTF-8, the plain value as written), into the other field. A missing
//! Content-Disposition is inserted only under `Options::name_insert_disposition`:
//! where there was none, some readers move the part between the body and the
//! attachment list.

use crate::engine::model::analysis::{Context, Finding};
use crate::engine::model::rules::Rule;

use super::fields::{insert_disposition, offer, rewritten, NameField, NewParam, Which};
use super::{show, Part, MAX_NAME};

/// `with`: the edit that makes the part listed (a retype), which the copy rides on.
pub(super) fn check(cx: &mut Context, part: &mut Part, with: Option<usize>) {
    let named = |w: Which| part.get(w).is_some_and(NameField::named);
    let source = match (named(Which::Type), named(Which::Disposition)) {
        (true, false) => Which::Type,
        (false, true) => Which::Disposition,
        _ => return,
    };
    let Some(from) = part.get(source) else { return };
    // A name no repair can read is reported by its own rule; there is nothing to copy.
    let Some(copy) = copy_of(from) else { return };
    let too_long = copy
        .iter()
        .map(NewParam::len)
        .max()
        .filter(|&n| n > MAX_NAME);
    let target = source.other();
    let msg = cx.msg;
    let e = &msg.entities[part.i];
    let shown_name = match (from.extended(), from.plain()) {
        (Some(Ok(t)), _) => show(t.as_bytes()),
        (_, Some(p)) => show(&p.value),
        _ => String::new(),
    };
    let mut finding = Finding::new(
        Rule::PartNameOneField,
        msg.path(e),
        format!(
            "the part is listed as an attachment and names its file (\"{shown_name}\") only in {} {}, not in {} {}: readers that read only the other field show a made-up name (RFC 2183 §2.3)",
            source.field(),
            source.attr(),
            target.field(),
            target.attr()
        ),
    );
    let edit = match (&copy, part.get(target)) {
        _ if too_long.is_some() => {
            finding.message.push_str(&format!(
                "; not copied: a name of {} octets is longer than any file system keeps",
                too_long.unwrap_or_default()
            ));
            None
        }
        (add, Some(to)) if to.writable => {
            let new = rewritten(to, None, add, e.eol());
            finding.message.push_str(&format!(
                "; fix: copy it to {} on {}",
                target.attr(),
                target.field()
            ));
            Some(offer(cx, part.i, to, new, Rule::PartNameOneField))
        }
        (_, Some(_)) => {
            finding.message.push_str(&format!(
                "; not copied: the {} field cannot be rewritten in place",
                target.field()
            ));
            None
        }
        (_, None) if target == Which::Type => {
            finding
                .message
                .push_str("; not copied: the part has no Content-Type field to hold it");
            None
        }
        (add, None) if cx.opts.name_insert_disposition => {
            let edit = insert_disposition(cx, part.i, add);
            if edit.is_some() {
                finding
                    .message
                    .push_str("; fix: insert Content-Disposition: attachment with the name");
            }
            edit
        }
        (_, None) => {
            finding.message.push_str(
                "; not repaired: the part has no Content-Disposition, and inserting one moves the part in some readers",
            );
            None
        }
    };
    if let Some(i) = edit {
        if let Some(on) = with {
            cx.edits.ride_on(i, on);
        }
        finding = finding.with_edit(i);
        part.reread(cx, target);
    }
    cx.report(finding);
}

/// The parameters that copy `from`'s name into the other field, RFC 2231 form first,
/// then a plain one (the value as written when printable ASCII, else the twin of the
/// text), so that the copy is named for both kinds of reader. None when no form can be
/// read for sure (raw octets that are not UTF-8 text, an unreadable RFC 2231 value).
fn copy_of(from: &NameField) -> Option<Vec<NewParam>> {
    let printable = |v: &[u8]| v.iter().all(|&b| b == b'\t' || (0x20..0x7f).contains(&b));
    let ascii = from
        .plain()
        .filter(|p| printable(&p.value))
        .map(|p| p.value.clone());
    let text = match (from.extended(), from.plain()) {
        (Some(Ok(t)), _) => t,
        (_, Some(p)) if ascii.is_none() => std::str::from_utf8(&p.value)
            .ok()
            .filter(|t| !t.chars().any(char::is_control))?
            .to_string(),
        (_, Some(_)) => String::new(),
        (_, None) => return None,
    };
    let mut add = Vec::with_capacity(2);
    if !text.is_empty() {
        add.push(NewParam::Extended(text.clone()));
    }
    add.push(match ascii {
        Some(v) => NewParam::Copy(v),
        None => NewParam::Twin(text),
    });
    Some(add)
}
