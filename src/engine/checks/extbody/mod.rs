//! message/external-body (RFC 2046 §5.2.3) and its URL access-type (RFC 2017).
//!
//! Every `extbody-*` rule of the catalogue is checked here, on each entity the scanner
//! marked [`Kind::ExternalBody`]; its phantom heading and body is the child entity marked
//! [`Kind::Phantom`]. This file reads the access-type and checks what every reference
//! needs (parameters, encoding, phantom heading); then:
//!
//! - `url`: the URL access-type (RFC 2017): the forms of the URL parameter, its content,
//!   the scheme policy and the rewrite rules;
//! - `legacy`: FTP, ANON-FTP and TFTP, and their conversion to `access-type=URL`;
//! - `value`: the one repair both make, a rewrite of the Content-Type value that
//!   re-emits the URL parameter in RFC 2017 form (encoded, quoted, folded into ≤40-octet
//!   words) and keeps every other byte of the value. The encoding and folding live in
//!   [`crate::engine::syntax::fold`].

mod legacy;
mod url;
mod value;

use std::borrow::Cow;

use crate::engine::model::analysis::{Context, Finding};
use crate::engine::model::mime::{Entity, Kind};
use crate::engine::model::rules::Rule;
use crate::engine::syntax::ascii::excerpt;
use crate::engine::syntax::decode::Encoding;
use crate::engine::syntax::fold;
use crate::engine::syntax::params::ContentType;

/// Access types of RFC 2046 §5.2.3.2–5 and RFC 2017, lower-case.
const KNOWN_ACCESS_TYPES: &[&str] = &[
    "url",
    "ftp",
    "anon-ftp",
    "tftp",
    "local-file",
    "mail-server",
];

/// The Content-Type field of one message/external-body entity, as its checks read it.
struct ExtField<'v> {
    /// The entity.
    idx: usize,
    /// Its Content-Type field (an index into the entity's fields).
    fi: usize,
    /// The field value, with the edit an earlier check made to it, if any.
    value: &'v [u8],
    /// `value`, read strictly.
    ct: &'v ContentType,
    /// Whether an edit of the field may be offered.
    can_edit: bool,
}

/// Runs every `extbody-*` rule on every message/external-body entity.
pub fn check(cx: &mut Context) {
    for &idx in cx.msg.external_bodies() {
        check_entity(cx, idx);
    }
}

fn check_entity(cx: &mut Context, idx: usize) {
    let msg = cx.msg;
    let e = &msg.entities[idx];
    let Some(fi) = e.ctype_field else {
        return;
    };
    let field = &msg.fields(e)[fi];
    // An incomplete message only gets edits in its top-level heading (see `Options`).
    let can_edit = e.editable() && (cx.opts.octets_not_given == 0 || e.parent.is_none());
    let value: Cow<[u8]> = match cx.edits.pending(&field.value) {
        Some(v) if can_edit => Cow::Owned(v.to_vec()),
        _ => Cow::Borrowed(msg.value(e, field)),
    };
    // Strict: a parameter after a missing `;` (RFC 2046 erratum 589) is not there for a
    // strict reader, and the findings say where reading stopped.
    let ct = ContentType::parse(&value).strict();
    let f = ExtField {
        idx,
        fi,
        value: &value,
        ct: &ct,
        can_edit,
    };

    check_encoding(cx, e);

    let access = ct
        .get_str("access-type")
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty());
    let Some(access) = access else {
        cx.report(Finding::new(
            Rule::ExtbodyAccessTypeMissing,
            msg.path(e),
            format!(
                "message/external-body without an access-type parameter (RFC 2046 §5.2.3.1 makes it mandatory){}",
                stop_note(&ct, &value)
            ),
        ));
        check_phantom(cx, e, None);
        return;
    };

    check_needed_params(cx, &f, &access);
    match access.as_str() {
        "ftp" | "anon-ftp" | "tftp" => legacy::check(cx, &f, &access),
        a if !KNOWN_ACCESS_TYPES.contains(&a) => {
            cx.report(Finding::new(
                Rule::ExtbodyUnknownAccessType,
                msg.path(e),
                format!(
                    "access-type={} is not one of RFC 2046 §5.2.3 or RFC 2017 (FTP, ANON-FTP, TFTP, LOCAL-FILE, MAIL-SERVER, URL): passed through untouched",
                    excerpt(access.as_bytes())
                ),
            ));
        }
        _ => {}
    }

    check_phantom(cx, e, Some(&access));
    if access == "url" {
        url::check(cx, &f);
    }
}

/// `extbody-param-missing`: the parameters access-type `access` (lower-case) needs.
fn check_needed_params(cx: &mut Context, f: &ExtField, access: &str) {
    let (needed, section): (&[&str], &str) = match access {
        "url" => (&["url"], "RFC 2017 §3(2)"),
        "ftp" | "tftp" => (&["name", "site"], "RFC 2046 §5.2.3.2"),
        "anon-ftp" => (&["name", "site"], "RFC 2046 §5.2.3.3"),
        "local-file" => (&["name"], "RFC 2046 §5.2.3.4"),
        "mail-server" => (&["server"], "RFC 2046 §5.2.3.5"),
        _ => (&[], ""),
    };
    let msg = cx.msg;
    for &name in needed {
        // A URL parameter that is there but empty is `extbody-url-invalid` (url::check):
        // the parameter is not absent, its value is not an absolute URI.
        let present =
            f.ct.get(name)
                .is_some_and(|v| name == "url" || !v.value.is_empty());
        if !present {
            cx.report(Finding::new(
                Rule::ExtbodyParamMissing,
                msg.path(&msg.entities[f.idx]),
                format!(
                    "access-type={access} needs a non-empty {} parameter ({section}){}",
                    name.to_ascii_uppercase(),
                    stop_note(f.ct, f.value)
                ),
            ));
        }
    }
}

/// `extbody-bad-encoding`: RFC 2046 §5.2.3 allows only 7bit on the external-body entity.
fn check_encoding(cx: &mut Context, e: &Entity) {
    if e.encoding == Encoding::SevenBit {
        return;
    }
    let cte = cx
        .msg
        .field(e, "content-transfer-encoding")
        .map(|f| excerpt(cx.msg.value(e, f).trim_ascii()))
        .unwrap_or_default();
    cx.report(Finding::new(
        Rule::ExtbodyBadEncoding,
        cx.msg.path(e),
        format!("Content-Transfer-Encoding: {cte} on a message/external-body (RFC 2046 §5.2.3: only 7bit is allowed)"),
    ));
}

/// The phantom heading rules: Content-ID MUST be there (RFC 2046 §5.2.3); with the URL
/// access-type the phantom body SHOULD be blank (RFC 2017 §3(3)).
fn check_phantom(cx: &mut Context, e: &Entity, access: Option<&str>) {
    let msg = cx.msg;
    // No phantom entity when the depth limit stopped the scan: nothing to judge.
    let Some(ph) = msg
        .children(e)
        .iter()
        .map(|&c| &msg.entities[c])
        .find(|c| matches!(c.kind, Kind::Phantom))
    else {
        return;
    };
    if msg.content_id(ph).is_none() {
        cx.report(Finding::new(
            Rule::ExtbodyInnerContentIdMissing,
            msg.path(e),
            "the phantom heading inside this message/external-body has no Content-ID (RFC 2046 §5.2.3: MUST)",
        ));
    }
    if access == Some("url") {
        let body = msg.body(ph);
        if let Some(start) = body.iter().position(|&b| !fold::is_lwsp(b)) {
            let end = body.len().min(start + 120);
            cx.report(Finding::new(
                Rule::ExtbodyPhantomBodyNotEmpty,
                msg.path(e),
                format!(
                    "access-type=URL with a phantom body that is not blank (RFC 2017 §3(3): should be left blank): {}",
                    excerpt(&body[start..end])
                ),
            ));
        }
    }
}

/// `; parameters unreadable from …` when the parser stopped early (e.g. a missing `;`,
/// RFC 2046 erratum 589), so that an admin sees why a parameter counts as missing.
fn stop_note(ct: &ContentType, value: &[u8]) -> String {
    match ct.trailing {
        Some(t) if t < value.len() => format!(
            "; the parameter list is unreadable from {} (missing ';'?)",
            excerpt(&value[t..])
        ),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests;
