//! The legacy access-types FTP, ANON-FTP and TFTP (RFC 2046 §5.2.3.2–3):
//! `extbody-legacy-access-type`, the scheme policy on the URL such a reference stands
//! for, and its conversion to `access-type=URL; URL="ftp://…"` / `"tftp://…"` (RULES.md;
//! never MAIL-SERVER, RFC 2017 §2, nor LOCAL-FILE). SITE, DIRECTORY, NAME and MODE go;
//! every other parameter (EXPIRATION, SIZE, PERMISSION…), the phantom heading and its
//! Content-ID stay byte for byte. The URL also goes through the rewrite rules.

use super::value::{self, Form};
use super::ExtField;
use crate::engine::model::analysis::{Context, Finding};
use crate::engine::model::rules::Rule;
use crate::engine::model::url_rules;
use crate::engine::rewriting::{rewrite, strip};
use crate::engine::syntax::ascii::excerpt;
use crate::engine::syntax::fold;
use crate::engine::syntax::params::{ContentType, Param};

/// What the legacy-to-URL conversion says about one reference: the finding's message
/// tail and the edit, if one is offered.
struct Legacy {
    note: String,
    edit: Option<usize>,
    /// The URL the reference stands for (before any rewrite rule).
    url: Option<Vec<u8>>,
    /// `extbody-url-rewritten` when a rewrite rule took part in the conversion.
    rewritten: Option<Finding>,
    failed: Option<Finding>,
}

/// The findings of a reference with the legacy access-type `access` (lower-case).
pub(super) fn check(cx: &mut Context, f: &ExtField, access: &str) {
    let msg = cx.msg;
    let path = &*msg.path(&msg.entities[f.idx]);
    let lg = convert(cx, f, access);
    let mut finding = Finding::new(
        Rule::ExtbodyLegacyAccessType,
        path,
        format!(
            "legacy access-type={access}: RFC 2017 URL access-type is better understood{}",
            lg.note
        ),
    );
    if let Some(i) = lg.edit {
        finding = finding.with_edit(i);
    }
    cx.report(finding);
    cx.findings.extend(lg.rewritten);
    cx.findings.extend(lg.failed);
    // The scheme policy applies to the URL such a reference stands for.
    let scheme: &str = if access == "tftp" { "tftp" } else { "ftp" };
    if let (Some(u), None, true) = (&lg.url, lg.edit, cx.opts.schemes.denies(scheme)) {
        let strip = strip::offer_strip(cx, f.idx, Rule::ExtbodyUrlSchemeDenied, u);
        let mut finding = Finding::new(
            Rule::ExtbodyUrlSchemeDenied,
            path,
            format!(
                "access-type={access} stands for a {scheme}: URL, a scheme denied by the scheme policy: {}",
                excerpt(u)
            ),
        );
        if let Some(i) = strip {
            finding = finding.with_edit(i);
        }
        cx.report(finding);
    }
}

/// The conversion of the reference to `access-type=URL`, when the options ask for it
/// and it can be made.
fn convert(cx: &mut Context, f: &ExtField, access: &str) -> Legacy {
    let url = legacy_url(access, f.ct);
    let mut out = Legacy {
        note: String::new(),
        edit: None,
        url: url.clone(),
        rewritten: None,
        failed: None,
    };
    let Some(url) = url else {
        return out;
    };
    let equivalent = format!(" (equivalent: access-type=URL; URL=\"{}\")", excerpt(&url));
    if !cx.opts.legacy_to_url {
        out.note = equivalent;
        return out;
    }
    if access == "ftp" && !cx.opts.legacy_ftp_with_login {
        out.note = format!("{equivalent}; not converted: access-type=FTP needs a login, which a URL would make the reader ask for (enable legacy.ftp_with_login)");
        return out;
    }
    let target = apply_rewrite_rules(cx, f.idx, access, &url, &mut out);
    if let Some(why) = rewrite::refuse(cx, &target) {
        out.note = format!("{equivalent}; not converted: the URL {why}");
        return out;
    }
    if !f.can_edit {
        out.note = format!("{equivalent}; not converted: the part cannot be edited in place");
        return out;
    }
    let Some(i) = offer_conversion(cx, f, &target) else {
        return out;
    };
    if out.rewritten.is_some() {
        cx.edits.also_fixes(i, Rule::ExtbodyUrlRewritten);
    }
    out.rewritten = out.rewritten.take().map(|f| f.with_edit(i));
    out.note = format!(
        ": converted to access-type=URL; URL=\"{}\"",
        excerpt(target.as_bytes())
    );
    out.edit = Some(i);
    out
}

/// The URL the conversion writes: `url`, or what the first rewrite rule that matches
/// makes of it when that may be written. The rule's finding goes into `out`.
fn apply_rewrite_rules(
    cx: &Context,
    idx: usize,
    access: &str,
    url: &[u8],
    out: &mut Legacy,
) -> String {
    let url_str = String::from_utf8_lossy(url).into_owned();
    let Some(rw) = url_rules::apply_rules(&cx.opts.rewrites, url) else {
        return url_str;
    };
    if rw.url == url_str {
        return url_str;
    }
    let path = &*cx.msg.path(&cx.msg.entities[idx]);
    match rewrite::refuse(cx, &rw.url) {
        None => {
            out.rewritten = Some(Finding::new(
                Rule::ExtbodyUrlRewritten,
                path,
                format!(
                    "{} rewrites the URL {} (from access-type={access}) to {}",
                    rw.rule,
                    excerpt(url),
                    excerpt(rw.url.as_bytes())
                ),
            ));
            rw.url
        }
        Some(why) => {
            out.failed = Some(Finding::new(
                Rule::ExtbodyUrlRewriteFailed,
                path,
                format!(
                    "{} would rewrite the URL {} (from access-type={access}) to {}, which {why}: not rewritten",
                    rw.rule,
                    excerpt(url),
                    excerpt(rw.url.as_bytes())
                ),
            ));
            url_str
        }
    }
}

/// Offers the rewrite of the field to `access-type=URL; URL="target"`: the access-type
/// parameter is replaced, SITE, DIRECTORY, NAME and MODE give way to the URL. `None`
/// when the field has no access-type parameter to replace or nothing to remove.
fn offer_conversion(cx: &mut Context, f: &ExtField, target: &str) -> Option<usize> {
    let msg = cx.msg;
    let e = &msg.entities[f.idx];
    let field = &msg.fields(e)[f.fi];
    let targets: Vec<&Param> =
        f.ct.params
            .iter()
            .filter(|p| matches!(&*p.name, "site" | "directory" | "name" | "mode"))
            .collect();
    let access_param = f.ct.params.iter().find(|p| p.name == "access-type");
    let (Some(ap), false) = (access_param, targets.is_empty()) else {
        return None;
    };
    let form = Form {
        name_len: field.value.start - field.start,
        eol: e.eol(),
        fold_words: !cx.opts.whole_url_words,
        name: Some(b"URL"),
    };
    let mut cuts = vec![(ap.span.clone(), b"access-type=URL".to_vec())];
    cuts.extend(value::url_cuts(f.value, &targets, target.as_bytes(), &form));
    let new_value = value::splice(f.value, cuts);
    let loc = msg.field_loc(e, f.fi);
    let i = cx.edits.rewrite(
        field.value.clone(),
        loc,
        new_value,
        Rule::ExtbodyLegacyAccessType,
    );
    // The old side of the record is the legacy reference as written, not its URL form.
    let mut legacy: Vec<u8> = f.value[ap.span.clone()].to_vec();
    for p in &targets {
        legacy.extend_from_slice(b";");
        legacy.extend_from_slice(&f.value[p.span.clone()]);
    }
    let ch = rewrite::change(
        Rule::ExtbodyLegacyAccessType,
        &legacy,
        Some(target.as_bytes()),
    );
    cx.edits.set_change(i, ch);
    Some(i)
}

/// The URL an FTP, ANON-FTP or TFTP reference stands for (RFC 1738 §3.2 `ftp://`, RFC
/// 3617 `tftp://`), or `None` without SITE and NAME. The basis of the conversion to
/// `access-type=URL` (RULES.md: never for MAIL-SERVER or LOCAL-FILE).
pub(super) fn legacy_url(access: &str, ct: &ContentType) -> Option<Vec<u8>> {
    let get = |n: &str| ct.get(n).map(|v| v.value).filter(|v| !v.is_empty());
    let site = get("site")?;
    let name = get("name")?;
    // NAME is one file name: a `/` or `;` in it is data, not structure.
    let segment = |s: &[u8]| -> Vec<u8> {
        let mut out = Vec::new();
        for &b in s {
            if matches!(b, b'/' | b';' | b'?' | b'#' | b'%') {
                out.extend_from_slice(format!("%{b:02X}").as_bytes());
            } else {
                out.extend_from_slice(&fold::pct_encode_unsafe(&[b]));
            }
        }
        out
    };
    let scheme: &[u8] = if access == "tftp" {
        b"tftp://"
    } else {
        b"ftp://"
    };
    let mut url = scheme.to_vec();
    url.extend_from_slice(&fold::pct_encode_unsafe(&site));
    if let Some(dir) = get("directory") {
        // FTP paths are relative to the login directory (RFC 1738 §3.2.2): an absolute
        // DIRECTORY starts with an encoded `/`, as in `ftp://host/%2Fetc/motd`.
        let mut lead: &[u8] = if dir.starts_with(b"/") { b"%2F" } else { b"" };
        for part in dir.split(|&b| b == b'/').filter(|p| !p.is_empty()) {
            url.push(b'/');
            url.extend_from_slice(lead);
            lead = b"";
            url.extend_from_slice(&segment(part));
        }
        if !lead.is_empty() {
            url.push(b'/');
            url.extend_from_slice(lead);
        }
    }
    url.push(b'/');
    url.extend_from_slice(&segment(&name));
    let mode = get("mode").map(|m| m.to_ascii_lowercase());
    match (access, mode.as_deref()) {
        ("tftp", Some(m @ (b"netascii" | b"octet" | b"mail"))) => {
            url.extend_from_slice(b";mode=");
            url.extend_from_slice(m);
        }
        (_, Some(b"ascii")) if access != "tftp" => url.extend_from_slice(b";type=a"),
        (_, Some(b"image")) if access != "tftp" => url.extend_from_slice(b";type=i"),
        _ => {}
    }
    Some(url)
}
