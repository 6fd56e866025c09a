//! `part-name-8bit`: a `name` or `filename` value holding raw octets above 127.
//!
//! No MIME parameter may hold them (RFC 2045 §5.1; RFC 2231 §4 is the way to give
//! other characters), yet Gmail and several webmails write a UTF-8 name as it stands
//! (`filename="Überweisung.pdf"`), and older mailers a Latin-1 one. Readers show
//! mojibake, another name, or none (Gmail itself). When the octets are UTF-8 the
//! parameter is replaced by `filename*=utf-8''…` (resp. `name*=`) and its twin, the
//! form the other two rules find correct; other octets are reported only, since which
//! characters they stand for is not known.

use crate::engine::model::analysis::{Context, Finding};
use crate::engine::model::rules::Rule;

use super::fields::{offer, rewritten, NameField, NewParam, Which};
use super::{show, Part, MAX_NAME};

pub(super) fn check(cx: &mut Context, part: &mut Part) {
    for which in [Which::Type, Which::Disposition] {
        let Some(f) = part.get(which) else { continue };
        if let Some(k) = eight_bit_plain(f) {
            if plain(cx, part.i, f, k).is_some() {
                part.reread(cx, which);
            }
        } else if f.params.pieces(f.attr()).any(|p| !p.value.is_ascii()) {
            let msg = cx.msg;
            cx.report(Finding::new(
                Rule::PartName8bit,
                msg.path(&msg.entities[part.i]),
                format!(
                    "the {} parameter {}* holds raw 8-bit octets, which no MIME parameter may hold: readers show mojibake, another name or none (RFC 2231 §4, RFC 2045 §5.1); not changed: only its own sender could say how they were meant to be encoded",
                    which.field(),
                    f.attr()
                ),
            ));
        }
    }
}

/// The index of the plain parameter of `f` whose value holds an 8-bit octet.
fn eight_bit_plain(f: &NameField) -> Option<usize> {
    f.params.params.iter().position(|p| {
        p.name == f.attr() && p.section.is_none() && !p.extended && !p.value.is_ascii()
    })
}

/// Reports the 8-bit plain parameter `k` of `f`, with its repair where the octets are
/// UTF-8; the edit, if one is offered.
fn plain(cx: &mut Context, i: usize, f: &NameField, k: usize) -> Option<usize> {
    let msg = cx.msg;
    let e = &msg.entities[i];
    let raw = &f.params.params[k].value;
    let attr = f.attr();
    let mut finding = Finding::new(
        Rule::PartName8bit,
        msg.path(e),
        format!(
            "the {} parameter {attr}=\"{}\" holds raw 8-bit octets, which no MIME parameter may hold: readers show mojibake, another name or none (RFC 2045 §5.1, RFC 2231 §4)",
            f.which.field(),
            show(raw)
        ),
    );
    let text = std::str::from_utf8(raw).ok();
    // Which of two plain values a reader takes is its own business.
    let plain_count = f
        .params
        .params
        .iter()
        .filter(|p| p.name == attr && p.section.is_none() && !p.extended)
        .count();
    let why_not = match text {
        _ if plain_count > 1 => Some(format!("the field gives {attr} {plain_count} times")),
        None => Some(
            "its octets are not UTF-8, so which characters they stand for is not known".to_string(),
        ),
        Some(t) if t.chars().any(char::is_control) => {
            Some("it holds a control character".to_string())
        }
        Some(t) if t.len() > MAX_NAME => Some(format!(
            "a name of {} octets is longer than any file system keeps",
            t.len()
        )),
        Some(_) if !f.writable => Some(format!(
            "the {} field cannot be rewritten in place",
            f.which.field()
        )),
        Some(_) => None,
    };
    let edit = match (text, why_not) {
        (Some(t), None) => {
            // A second `attr*` beside one already there would make the value
            // unreadable: then the twin alone replaces the plain value.
            let (add, how) = if f.extended().is_some() {
                (
                    vec![NewParam::Twin(t.to_string())],
                    format!(
                        "replace it by the twin {attr}=\"=?UTF-8?B?…?=\" of the {attr}* beside it"
                    ),
                )
            } else {
                (
                    vec![
                        NewParam::Extended(t.to_string()),
                        NewParam::Twin(t.to_string()),
                    ],
                    format!("write it as {attr}*=utf-8''… with the twin {attr}=\"=?UTF-8?B?…?=\""),
                )
            };
            let new = rewritten(f, Some(k), &add, e.eol());
            finding.message.push_str(&format!("; fix: {how}"));
            Some(offer(cx, i, f, new, Rule::PartName8bit))
        }
        (_, Some(why)) => {
            finding.message.push_str(&format!("; not changed: {why}"));
            None
        }
        (None, None) => None,
    };
    if let Some(idx) = edit {
        finding = finding.with_edit(idx);
    }
    cx.report(finding);
    edit
}
