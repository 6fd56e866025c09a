//! message/external-body (RFC 2046 §5.2.3) and its URL access-type (RFC 2017).
//!
//! Every `extbody-*` rule of the catalogue is checked here, on each entity the scanner
//! marked [`Kind::ExternalBody`]; its phantom heading and body is the child entity marked
//! [`Kind::Phantom`].
//!
//! The one repair is a rewrite of the Content-Type value that re-emits the URL parameter
//! in RFC 2017 form (encoded, quoted, folded into ≤40-octet words) and keeps every other
//! byte of the value. The encoding and folding live in [`crate::engine::syntax::fold`].

use std::borrow::Cow;
use std::ops::Range;

use iri_string::types::UriAbsoluteStr;

use crate::engine::model::analysis::{Context, Finding};
use crate::engine::model::mime::{Entity, Kind};
use crate::engine::model::rules::Rule;
use crate::engine::repair::rewrite;
use crate::engine::repair::strip;
use crate::engine::syntax::decode::Encoding;
use crate::engine::syntax::fold;
use crate::engine::syntax::params::{is_token_byte, ContentType, Param};
use crate::engine::syntax::uri;

/// Access types of RFC 2046 §5.2.3.2–5 and RFC 2017, lower-case.
const KNOWN_ACCESS_TYPES: &[&str] = &[
    "url",
    "ftp",
    "anon-ftp",
    "tftp",
    "local-file",
    "mail-server",
];

/// Runs every `extbody-*` rule on every message/external-body entity.
pub fn check(cx: &mut Context) {
    for idx in 0..cx.msg.entities.len() {
        if matches!(cx.msg.entities[idx].kind, Kind::ExternalBody) {
            check_entity(cx, idx);
        }
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
    let path = e.path.as_str();

    check_encoding(cx, e);

    let access = ct
        .get_str("access-type")
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty());
    let Some(access) = access else {
        cx.report(Finding::new(
            Rule::ExtbodyAccessTypeMissing,
            path,
            format!(
                "message/external-body without an access-type parameter (RFC 2046 §5.2.3.1 makes it mandatory){}",
                stop_note(&ct, &value)
            ),
        ));
        check_phantom(cx, e, None);
        return;
    };

    let (needed, section): (&[&str], &str) = match access.as_str() {
        "url" => (&["url"], "RFC 2017 §3(2)"),
        "ftp" | "tftp" => (&["name", "site"], "RFC 2046 §5.2.3.2"),
        "anon-ftp" => (&["name", "site"], "RFC 2046 §5.2.3.3"),
        "local-file" => (&["name"], "RFC 2046 §5.2.3.4"),
        "mail-server" => (&["server"], "RFC 2046 §5.2.3.5"),
        _ => (&[], ""),
    };
    for &name in needed {
        // A URL parameter that is there but empty is `extbody-url-invalid` (check_url):
        // the parameter is not absent, its value is not an absolute URI.
        let present = ct
            .get(name)
            .is_some_and(|v| name == "url" || !v.value.is_empty());
        if !present {
            cx.report(Finding::new(
                Rule::ExtbodyParamMissing,
                path,
                format!(
                    "access-type={access} needs a non-empty {} parameter ({section}){}",
                    name.to_ascii_uppercase(),
                    stop_note(&ct, &value)
                ),
            ));
        }
    }

    match access.as_str() {
        "ftp" | "anon-ftp" | "tftp" => {
            let lg = legacy_convert(cx, idx, fi, &value, &ct, &access, can_edit);
            let mut f = Finding::new(
                Rule::ExtbodyLegacyAccessType,
                path,
                format!(
                    "legacy access-type={access}: RFC 2017 URL access-type is better understood{}",
                    lg.note
                ),
            );
            if let Some(i) = lg.edit {
                f = f.with_edit(i);
            }
            cx.report(f);
            cx.findings.extend(lg.rewritten);
            cx.findings.extend(lg.failed);
            // The scheme policy applies to the URL such a reference stands for.
            let scheme: &str = if access == "tftp" { "tftp" } else { "ftp" };
            if let (Some(u), None, true) = (&lg.url, lg.edit, cx.opts.schemes.denies(scheme)) {
                let strip = strip::offer_strip(cx, idx, Rule::ExtbodyUrlSchemeDenied, u);
                let mut f = Finding::new(
                    Rule::ExtbodyUrlSchemeDenied,
                    path,
                    format!(
                        "access-type={access} stands for a {scheme}: URL, a scheme denied by the scheme policy: {}",
                        crate::engine::syntax::ascii::excerpt(u)
                    ),
                );
                if let Some(i) = strip {
                    f = f.with_edit(i);
                }
                cx.report(f);
            }
        }
        a if !KNOWN_ACCESS_TYPES.contains(&a) => {
            cx.report(Finding::new(
                Rule::ExtbodyUnknownAccessType,
                path,
                format!(
                    "access-type={} is not one of RFC 2046 §5.2.3 or RFC 2017 (FTP, ANON-FTP, TFTP, LOCAL-FILE, MAIL-SERVER, URL): passed through untouched",
                    crate::engine::syntax::ascii::excerpt(access.as_bytes())
                ),
            ));
        }
        _ => {}
    }

    check_phantom(cx, e, Some(&access));
    if access == "url" {
        check_url(cx, idx, fi, &value, &ct, can_edit);
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
        .map(|f| crate::engine::syntax::ascii::excerpt(cx.msg.value(e, f).trim_ascii()))
        .unwrap_or_default();
    cx.report(Finding::new(
        Rule::ExtbodyBadEncoding,
        &e.path,
        format!("Content-Transfer-Encoding: {cte} on a message/external-body (RFC 2046 §5.2.3: only 7bit is allowed)"),
    ));
}

/// The phantom heading rules: Content-ID MUST be there (RFC 2046 §5.2.3); with the URL
/// access-type the phantom body SHOULD be blank (RFC 2017 §3(3)).
fn check_phantom(cx: &mut Context, e: &Entity, access: Option<&str>) {
    let msg = cx.msg;
    // No phantom entity when the depth limit stopped the scan: nothing to judge.
    let Some(ph) = e
        .children
        .iter()
        .map(|&c| &msg.entities[c])
        .find(|c| matches!(c.kind, Kind::Phantom))
    else {
        return;
    };
    if msg.field(ph, "content-id").is_none() {
        cx.report(Finding::new(
            Rule::ExtbodyInnerContentIdMissing,
            &e.path,
            "the phantom heading inside this message/external-body has no Content-ID (RFC 2046 §5.2.3: MUST)",
        ));
    }
    if access == Some("url") {
        let body = msg.body(ph);
        if let Some(start) = body.iter().position(|&b| !fold::is_lwsp(b)) {
            let end = body.len().min(start + 120);
            cx.report(Finding::new(
                Rule::ExtbodyPhantomBodyNotEmpty,
                &e.path,
                format!(
                    "access-type=URL with a phantom body that is not blank (RFC 2017 §3(3): should be left blank): {}",
                    crate::engine::syntax::ascii::excerpt(&body[start..end])
                ),
            ));
        }
    }
}

/// A URL finding before it is reported: whether the rewrite of the URL parameter (when
/// one is made) repairs it.
struct UrlFinding {
    rule: Rule,
    message: String,
    cured_by_rewrite: bool,
}

fn check_url(
    cx: &mut Context,
    idx: usize,
    fi: usize,
    value: &[u8],
    ct: &ContentType,
    can_edit: bool,
) {
    let msg = cx.msg;
    let e = &msg.entities[idx];
    let plains: Vec<&Param> = ct
        .params
        .iter()
        .filter(|p| p.name == "url" && p.section.is_none() && !p.extended)
        .collect();
    let pieces: Vec<&Param> = ct.pieces("url").collect();
    let plain_url = plains.first().map(|p| fold::extract_url(&p.value));
    // RFC 2017 §3.1 extraction on the RFC 2231 reassembly, as RULES.md says: the LWSP it
    // removes is the header's, so it goes from each section as written, before the
    // %-decoding. An octet decoded from `%20` is part of the URL (and unencoded).
    let cont_url = ct
        .extended_with("url", |raw| Cow::Owned(fold::extract_url(raw)))
        .map(|v| v.value);
    let Some(url) = cont_url.clone().or_else(|| plain_url.clone()) else {
        return; // reported as extbody-param-missing
    };
    let mut found: Vec<UrlFinding> = Vec::new();

    // Every form the sender gave must name the same URL.
    let mut urls: Vec<Vec<u8>> = plains.iter().map(|p| fold::extract_url(&p.value)).collect();
    urls.extend(cont_url.clone());
    // Compared as a reader would send them: `a%20b` in one form and a decoded `a b` in
    // the other are the same URL.
    let conflict = urls
        .iter()
        .find(|u| fold::pct_encode_unsafe(u) != fold::pct_encode_unsafe(&urls[0]))
        .cloned();
    if let Some(other) = &conflict {
        found.push(UrlFinding {
            rule: Rule::ExtbodyUrlConflict,
            message: format!(
                "the URL parameters give different URLs: {} and {} (RFC 2231 §3 reassembly vs RFC 2017 §3.1)",
                crate::engine::syntax::ascii::excerpt(&urls[0]),
                crate::engine::syntax::ascii::excerpt(other)
            ),
            cured_by_rewrite: false,
        });
    }

    // The RFC 2017 form rules concern `URL="…"` only (RULES.md).
    let mut plain_needs_rewrite = false;
    if let Some(p) = plains.first() {
        if !p.quoted {
            plain_needs_rewrite = true;
            found.push(UrlFinding {
                rule: Rule::ExtbodyUrlUnquoted,
                message: format!(
                    "URL parameter is not a quoted-string (RFC 2017 §3.1: the quotes are always required): {}",
                    crate::engine::syntax::ascii::excerpt(&value[p.span.clone()])
                ),
                cured_by_rewrite: true,
            });
        } else if let Some(w) = p
            .value
            .split(|&b| b == b' ' || b == b'\t')
            .find(|w| w.len() > fold::MAX_URL_WORD)
        {
            // Folding is the only repair, and it may be off (see
            // `fold::quote_url_param`).
            plain_needs_rewrite |= !cx.opts.whole_url_words;
            found.push(UrlFinding {
                rule: Rule::ExtbodyUrlWordTooLong,
                message: format!(
                    "URL-word of {} octets (RFC 2017 §3.1(2): at most 40): {}",
                    w.len(),
                    crate::engine::syntax::ascii::excerpt(w)
                ),
                cured_by_rewrite: !cx.opts.whole_url_words,
            });
        }
        if plain_url
            .as_ref()
            .is_some_and(|u| needs_encoding(u).is_some())
        {
            plain_needs_rewrite = true;
        }
    }
    // Pieces given twice (two `URL*0`, or `URL*` beside `URL*0`), written after a missing
    // `;`, or beside text the parser could not read: what a reader reassembles is a guess,
    // and rewriting would leave the unread text behind (found by fuzzing). Report only.
    let ambiguous = {
        let mut sections: Vec<Option<u32>> = pieces.iter().map(|p| p.section).collect();
        sections.sort_unstable();
        let n = sections.len();
        sections.dedup();
        let unsectioned_and_sectioned = sections.len() > 1 && sections.contains(&None);
        sections.len() != n
            || unsectioned_and_sectioned
            || pieces.iter().any(|p| p.after_defect)
            || ct.trailing.is_some()
    };
    let normalize = cx.opts.normalize_url_continuations && !pieces.is_empty() && !ambiguous;
    // A space inside a line of the quoted URL, not after a line break: RFC 2017 drops it
    // as folding, every reader tried (Python's email, GMime, MIME-tools, Ruby mail,
    // mailparser, NeoMutt) keeps it as part of the URL. A rewrite would pick one
    // reading; none is made (docs/INTEROP.md), the findings stay.
    let inline_space = plains.first().is_some_and(|p| {
        let raw = &value[p.span.clone()];
        // The value as written (the parsed one is unfolded): from its opening quote.
        let from = raw.iter().position(|&b| b == b'"').unwrap_or(raw.len());
        p.quoted && has_inline_space(&raw[from..])
    });
    if !pieces.is_empty() {
        let names: Vec<String> = pieces.iter().map(|p| piece_name(value, p)).collect();
        found.push(UrlFinding {
            rule: Rule::ExtbodyUrlContinuation,
            message: format!(
                "URL given as RFC 2231 parameters ({}) rather than the RFC 2017 URL=\"…\" form: {}",
                names.join(", "),
                crate::engine::syntax::ascii::excerpt(&url)
            ),
            cured_by_rewrite: normalize,
        });
    }

    // Content rules, on the URL a reader would use.
    if let Some(what) = needs_encoding(&url) {
        found.push(UrlFinding {
            rule: Rule::ExtbodyUrlUnencoded,
            message: format!(
                "URL holds unencoded {what} (RFC 2017 §3.1(1): SP, CTLs, '\"', '\\' and 8-bit octets must be %-encoded): {}",
                crate::engine::syntax::ascii::excerpt(&url)
            ),
            // Only a rewrite of the form the URL was read from repairs it.
            cured_by_rewrite: cont_url.is_none() || normalize,
        });
    }
    let encoded = fold::pct_encode_unsafe(&url);
    // After encoding every octet is ASCII, so this never fails.
    let encoded_str = std::str::from_utf8(&encoded).unwrap_or_default();
    if UriAbsoluteStr::new(encoded_str).is_err() {
        let why = if encoded_str.is_empty() {
            " (it is empty)"
        } else if encoded_str.contains('#') {
            " (a fragment is not allowed)"
        } else {
            ""
        };
        found.push(UrlFinding {
            rule: Rule::ExtbodyUrlInvalid,
            message: format!(
                "URL is not an absolute URI (RFC 3986 §4.3){why}: {}",
                crate::engine::syntax::ascii::excerpt(&encoded)
            ),
            cured_by_rewrite: false,
        });
    }
    if let Some(scheme) = uri::scheme(&encoded).map(str::to_ascii_lowercase) {
        if uri::NON_RETRIEVAL_SCHEMES.contains(&scheme.as_str()) {
            found.push(UrlFinding {
                rule: Rule::ExtbodyUrlNotRetrieval,
                message: format!(
                    "{scheme}: URLs retrieve nothing (RFC 2017 §2: only URLs that retrieve something may be used): {}",
                    crate::engine::syntax::ascii::excerpt(&encoded)
                ),
                cured_by_rewrite: false,
            });
        }
        if cx.opts.schemes.denies(&scheme) {
            found.push(UrlFinding {
                rule: Rule::ExtbodyUrlSchemeDenied,
                message: format!(
                    "URL scheme {scheme}: is denied by the scheme policy: {}",
                    crate::engine::syntax::ascii::excerpt(&encoded)
                ),
                cured_by_rewrite: false,
            });
        }
    }

    // The admin's rewrite rules (first match wins), on the URL as a reader would use it.
    let mut rewritten: Option<String> = None;
    if conflict.is_none() {
        if let Some(rw) = rewrite::apply_rules(&cx.opts.rewrites, &encoded) {
            if rw.url.as_bytes() != encoded.as_slice() {
                match rewrite::refuse(cx, &rw.url) {
                    None => {
                        // Every URL form is replaced, so every finding about the old URL
                        // or its form is cured, except a conflict (never rewritten).
                        for f in &mut found {
                            f.cured_by_rewrite = true;
                        }
                        found.push(UrlFinding {
                            rule: Rule::ExtbodyUrlRewritten,
                            message: format!(
                                "{} rewrites the URL {} to {}",
                                rw.rule,
                                crate::engine::syntax::ascii::excerpt(&encoded),
                                crate::engine::syntax::ascii::excerpt(rw.url.as_bytes())
                            ),
                            cured_by_rewrite: true,
                        });
                        rewritten = Some(rw.url);
                    }
                    Some(why) => found.push(UrlFinding {
                        rule: Rule::ExtbodyUrlRewriteFailed,
                        message: format!(
                            "{} would rewrite the URL {} to {}, which {why}: URL left as is",
                            rw.rule,
                            crate::engine::syntax::ascii::excerpt(&encoded),
                            crate::engine::syntax::ascii::excerpt(rw.url.as_bytes())
                        ),
                        cured_by_rewrite: false,
                    }),
                }
            }
        }
    }

    // The rewrite: which URL parameters it replaces, and the URL it writes.
    let targets: Vec<&Param> = if normalize || rewritten.is_some() {
        plains.iter().chain(pieces.iter()).copied().collect()
    } else {
        plains.clone()
    };
    let field = &msg.fields(e)[fi];
    let name_len = field.value.start - field.start;
    let over_long = on_long_line(value, &targets, name_len);
    let wanted =
        normalize || over_long || rewritten.is_some() || (plain_needs_rewrite && !inline_space);
    let write_url: &[u8] = rewritten.as_ref().map_or(&encoded, |u| u.as_bytes());
    let mut edit = None;
    let pieces_targeted = targets.iter().any(|t| t.section.is_some() || t.extended);
    if can_edit
        && conflict.is_none()
        && wanted
        && !targets.is_empty()
        && !(ambiguous && pieces_targeted)
    {
        let form = Form {
            name_len,
            eol: e.eol(),
            fold_words: !cx.opts.whole_url_words,
        };
        let new_value = rewrite(value, &targets, write_url, &form, None, None);
        let first_rule = found
            .iter()
            .find(|f| f.cured_by_rewrite)
            .map_or(Rule::HeaderLineTooLong, |f| f.rule);
        let loc = msg.field_loc(e, fi);
        let i = cx
            .edits
            .rewrite(field.value.clone(), loc, new_value, first_rule);
        for f in found.iter().filter(|f| f.cured_by_rewrite) {
            cx.edits.also_fixes(i, f.rule);
        }
        if let Some(new) = &rewritten {
            let ch = rewrite::change(Rule::ExtbodyUrlRewritten, &encoded, Some(new.as_bytes()));
            cx.edits.set_change(i, ch);
        }
        edit = Some(i);
    }
    // A denied scheme no rewrite cures: policy may strip the part.
    let strip =
        if rewritten.is_none() && found.iter().any(|f| f.rule == Rule::ExtbodyUrlSchemeDenied) {
            strip::offer_strip(cx, idx, Rule::ExtbodyUrlSchemeDenied, &url)
        } else {
            None
        };
    for f in found {
        let mut finding = Finding::new(f.rule, &e.path, f.message);
        if let (Some(i), true) = (edit, f.cured_by_rewrite) {
            finding = finding.with_edit(i);
        } else if let (Some(i), Rule::ExtbodyUrlSchemeDenied) = (strip, f.rule) {
            finding = finding.with_edit(i);
        }
        cx.report(finding);
    }
}

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

/// ANON-FTP, FTP and TFTP to `access-type=URL; URL="ftp://…"` / `"tftp://…"` (RULES.md;
/// never MAIL-SERVER, RFC 2017 §2, nor LOCAL-FILE). SITE, DIRECTORY, NAME and MODE go;
/// every other parameter (EXPIRATION, SIZE, PERMISSION…), the phantom heading and its
/// Content-ID stay byte for byte. The URL also goes through the rewrite rules.
fn legacy_convert(
    cx: &mut Context,
    idx: usize,
    fi: usize,
    value: &[u8],
    ct: &ContentType,
    access: &str,
    can_edit: bool,
) -> Legacy {
    let msg = cx.msg;
    let e = &msg.entities[idx];
    let url = legacy_url(access, ct);
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
    let equivalent = format!(
        " (equivalent: access-type=URL; URL=\"{}\")",
        crate::engine::syntax::ascii::excerpt(&url)
    );
    if !cx.opts.legacy_to_url {
        out.note = equivalent;
        return out;
    }
    if access == "ftp" && !cx.opts.legacy_ftp_with_login {
        out.note = format!("{equivalent}; not converted: access-type=FTP needs a login, which a URL would make the reader ask for (enable legacy.ftp_with_login)");
        return out;
    }
    let url_str = String::from_utf8_lossy(&url).into_owned();
    let mut target = url_str.clone();
    if let Some(rw) = rewrite::apply_rules(&cx.opts.rewrites, &url) {
        if rw.url != url_str {
            match rewrite::refuse(cx, &rw.url) {
                None => {
                    out.rewritten = Some(Finding::new(
                        Rule::ExtbodyUrlRewritten,
                        &e.path,
                        format!(
                            "{} rewrites the URL {} (from access-type={access}) to {}",
                            rw.rule,
                            crate::engine::syntax::ascii::excerpt(&url),
                            crate::engine::syntax::ascii::excerpt(rw.url.as_bytes())
                        ),
                    ));
                    target = rw.url;
                }
                Some(why) => {
                    out.failed = Some(Finding::new(
                        Rule::ExtbodyUrlRewriteFailed,
                        &e.path,
                        format!(
                            "{} would rewrite the URL {} (from access-type={access}) to {}, which {why}: not rewritten",
                            rw.rule,
                            crate::engine::syntax::ascii::excerpt(&url),
                            crate::engine::syntax::ascii::excerpt(rw.url.as_bytes())
                        ),
                    ))
                }
            }
        }
    }
    if let Some(why) = rewrite::refuse(cx, &target) {
        out.note = format!("{equivalent}; not converted: the URL {why}");
        return out;
    }
    if !can_edit {
        out.note = format!("{equivalent}; not converted: the part cannot be edited in place");
        return out;
    }
    let field = &msg.fields(e)[fi];
    let name_len = field.value.start - field.start;
    let targets: Vec<&Param> = ct
        .params
        .iter()
        .filter(|p| matches!(&*p.name, "site" | "directory" | "name" | "mode"))
        .collect();
    let access_param = ct.params.iter().find(|p| p.name == "access-type");
    let (Some(ap), false) = (access_param, targets.is_empty()) else {
        return out;
    };
    let form = Form {
        name_len,
        eol: e.eol(),
        fold_words: !cx.opts.whole_url_words,
    };
    let new_value = rewrite(
        value,
        &targets,
        target.as_bytes(),
        &form,
        Some(b"URL"),
        Some((ap.span.clone(), b"access-type=URL".to_vec())),
    );
    let loc = msg.field_loc(e, fi);
    let i = cx.edits.rewrite(
        field.value.clone(),
        loc,
        new_value,
        Rule::ExtbodyLegacyAccessType,
    );
    // The old side of the record is the legacy reference as written, not its URL form.
    let mut legacy: Vec<u8> = value[ap.span.clone()].to_vec();
    for p in &targets {
        legacy.extend_from_slice(b";");
        legacy.extend_from_slice(&value[p.span.clone()]);
    }
    let ch = rewrite::change(
        Rule::ExtbodyLegacyAccessType,
        &legacy,
        Some(target.as_bytes()),
    );
    cx.edits.set_change(i, ch);
    if out.rewritten.is_some() {
        cx.edits.also_fixes(i, Rule::ExtbodyUrlRewritten);
    }
    out.rewritten = out.rewritten.take().map(|f| f.with_edit(i));
    out.note = format!(
        ": converted to access-type=URL; URL=\"{}\"",
        crate::engine::syntax::ascii::excerpt(target.as_bytes())
    );
    out.edit = Some(i);
    out
}

/// What in `url` RFC 2017 §3.1(1) wants %-encoded, in words for the message.
fn needs_encoding(url: &[u8]) -> Option<&'static str> {
    let b = *url.iter().find(|&&b| fold::must_encode(b))?;
    Some(match b {
        b' ' => "SP",
        b'"' => "'\"'",
        b'\\' => "'\\'",
        0x80.. => "8-bit octets",
        _ => "control characters",
    })
}

/// Whether `value` has a run of SP/HTAB between two other octets of one line (not the
/// whitespace that starts a continuation line).
fn has_inline_space(value: &[u8]) -> bool {
    let wsp = |b: u8| matches!(b, b' ' | b'\t');
    let eol = |b: u8| matches!(b, b'\r' | b'\n');
    let mut i = 1;
    while i < value.len() {
        if wsp(value[i]) && !wsp(value[i - 1]) && !eol(value[i - 1]) {
            let end = value[i..].iter().position(|&b| !wsp(b)).map(|n| i + n);
            match end {
                Some(j) if !eol(value[j]) => return true,
                Some(j) => i = j,
                None => return false,
            }
        }
        i += 1;
    }
    false
}

/// The attribute of a parameter as written (`URL*0*`), for messages.
fn piece_name(value: &[u8], p: &Param) -> String {
    let attr = value
        .get(p.span.clone())
        .unwrap_or_default()
        .iter()
        .take_while(|&&b| is_token_byte(b))
        .copied()
        .collect::<Vec<u8>>();
    String::from_utf8_lossy(&attr).into_owned()
}

/// Some parameter of `targets` (in written order) shares a line longer than 998 octets
/// (field name included on the first line). One pass over the value, however many
/// parameters there are.
fn on_long_line(value: &[u8], targets: &[&Param], name_len: usize) -> bool {
    let mut next = targets.iter().peekable();
    let mut start = 0;
    let mut prefix = name_len;
    while start <= value.len() {
        let end = value[start..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(value.len(), |p| start + p);
        let content = if end > start && value[end - 1] == b'\r' {
            end - 1
        } else {
            end
        };
        let long = prefix + (content - start) > fold::HARD_LINE;
        // Every parameter still in `next` that starts by this line's end overlaps it.
        while let Some(p) = next.peek() {
            if p.span.start > end {
                break;
            }
            if long {
                return true;
            }
            if p.span.end > end {
                break; // it goes on to the next line
            }
            next.next();
        }
        if next.peek().is_none() {
            return false;
        }
        prefix = 0;
        start = end + 1;
    }
    false
}

/// How [`rewrite`] writes the URL parameter: the field name's length (the first line's
/// prefix), the message's line ending, and whether URL-words are folded.
struct Form<'a> {
    name_len: usize,
    eol: &'a [u8],
    fold_words: bool,
}

/// The Content-Type value with the URL parameters `targets` replaced by one RFC 2017
/// parameter carrying `url` (already encoded): the first-written one becomes the folded
/// `URL="…"` (named as written, or `name`), the others are removed with the `;` before
/// them; `extra` is one more replacement (the access-type of a legacy conversion).
/// Every other byte stays.
fn rewrite(
    value: &[u8],
    targets: &[&Param],
    url: &[u8],
    form: &Form,
    name: Option<&[u8]>,
    extra: Option<(Range<usize>, Vec<u8>)>,
) -> Vec<u8> {
    let mut targets: Vec<&Param> = targets.to_vec();
    targets.sort_by_key(|p| p.span.start);
    let mut cuts: Vec<(Range<usize>, Vec<u8>)> = Vec::with_capacity(targets.len() + 1);
    cuts.extend(extra);
    if let Some(first) = targets.first() {
        let name: Vec<u8> = match name {
            Some(n) => n.to_vec(),
            None => value[first.span.clone()]
                .iter()
                .take_while(|&&b| is_token_byte(b) && b != b'*')
                .copied()
                .collect(),
        };
        let line_start = value[..first.span.start]
            .iter()
            .rposition(|&b| b == b'\n')
            .map(|p| p + 1);
        let prefix = match line_start {
            Some(s) => first.span.start - s,
            None => form.name_len + first.span.start,
        };
        let eol = form.eol;
        let mut folded = fold::quote_url_param(&name, url, prefix, eol, form.fold_words);
        let mut start = first.span.start;
        if folded.starts_with(eol) {
            // The parameter moves to a line of its own: the whitespace that separated it
            // from the `;` would be left trailing, so it goes.
            while start > 0 && matches!(value[start - 1], b' ' | b'\t') {
                start -= 1;
            }
            if start == 0 || matches!(value[start - 1], b'\n' | b'\r') {
                // Already at the start of a continuation line: one SP is enough.
                folded.drain(..eol.len());
            }
        }
        cuts.push((start..first.span.end, folded));
    }
    for p in targets.iter().skip(1) {
        let before = value[..p.span.start]
            .iter()
            .rposition(|&b| !fold::is_lwsp(b));
        let range = match before {
            Some(s) if value[s] == b';' => s..p.span.end,
            _ => p.span.clone(),
        };
        cuts.push((range, Vec::new()));
    }
    cuts.sort_by_key(|(r, _)| r.start);
    let mut out = Vec::with_capacity(value.len() + url.len());
    let mut pos = 0;
    for (r, rep) in cuts {
        if r.start < pos {
            continue; // cannot happen with disjoint parameter spans; never corrupt
        }
        out.extend_from_slice(&value[pos..r.start]);
        out.extend_from_slice(&rep);
        pos = r.end;
    }
    out.extend_from_slice(&value[pos.min(value.len())..]);
    out
}

/// `; parameters unreadable from …` when the parser stopped early (e.g. a missing `;`,
/// RFC 2046 erratum 589), so that an admin sees why a parameter counts as missing.
fn stop_note(ct: &ContentType, value: &[u8]) -> String {
    match ct.trailing {
        Some(t) if t < value.len() => format!(
            "; the parameter list is unreadable from {} (missing ';'?)",
            crate::engine::syntax::ascii::excerpt(&value[t..])
        ),
        _ => String::new(),
    }
}

/// The URL an FTP, ANON-FTP or TFTP reference stands for (RFC 1738 §3.2 `ftp://`, RFC
/// 3617 `tftp://`), or `None` without SITE and NAME. The basis of the conversion to
/// `access-type=URL` (RULES.md: never for MAIL-SERVER or LOCAL-FILE).
pub fn legacy_url(access: &str, ct: &ContentType) -> Option<Vec<u8>> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{check, fix, Options};

    /// `(part, rule, fixable)` of the extbody findings, in report order.
    fn found(raw: &str, opts: &Options) -> Vec<(String, Rule, bool)> {
        check(raw.as_bytes(), opts)
            .findings
            .into_iter()
            .filter(|f| f.rule.id().starts_with("extbody-"))
            .map(|f| (f.part, f.rule, f.fixable))
            .collect()
    }

    fn rules(raw: &str) -> Vec<Rule> {
        found(raw, &Options::default())
            .into_iter()
            .map(|f| f.1)
            .collect()
    }

    fn fixed(raw: &str, opts: &Options) -> String {
        String::from_utf8(fix(raw.as_bytes(), opts).unwrap().0).unwrap()
    }

    /// A top-level external-body with `params` after the type and a phantom part.
    fn ext(params: &str, phantom: &str) -> String {
        format!("Subject: x\nContent-Type: message/external-body;{params}\n\n{phantom}")
    }

    const PH: &str = "Content-Type: text/plain\nContent-ID: <a@b>\n\n";

    #[test]
    fn access_type_missing() {
        assert_eq!(
            rules(&ext(" name=\"x.url\"", PH)),
            [Rule::ExtbodyAccessTypeMissing]
        );
        assert_eq!(
            rules(&ext(" access-type=\"\"", PH)),
            [Rule::ExtbodyAccessTypeMissing]
        );
        assert!(rules(&ext(" access-type=URL; URL=\"http://a.example/\"", PH)).is_empty());
    }

    #[test]
    fn mandatory_parameters_per_access_type() {
        assert_eq!(
            rules(&ext(" access-type=local-file", PH)),
            [Rule::ExtbodyParamMissing]
        );
        assert!(rules(&ext(" access-type=local-file; name=\"/tmp/x\"", PH)).is_empty());
        assert_eq!(
            rules(&ext(" access-type=anon-ftp; name=x", PH)),
            [Rule::ExtbodyParamMissing, Rule::ExtbodyLegacyAccessType]
        );
        assert_eq!(
            rules(&ext(" access-type=URL", PH)),
            [Rule::ExtbodyParamMissing]
        );
        // RFC 2231 form counts as present.
        assert!(rules(&ext(
            " access-type=mail-server; server*=''a%40b.example",
            PH
        ))
        .is_empty());
        // Erratum 589: the missing `;` hides SERVER, and the message says why.
        let a = check(
            ext(
                " access-type=mail-server\n server=\"listserv@bogus.bitnet\"",
                PH,
            )
            .as_bytes(),
            &Options::default(),
        );
        let f = &a.findings[0];
        assert_eq!(f.rule, Rule::ExtbodyParamMissing);
        assert!(f.message.contains("missing ';'"), "{}", f.message);
    }

    #[test]
    fn unquoted_url_is_read_whole_and_quoted() {
        let raw = ext(" access-type=URL; URL=http://a.example/b?c=d; x=y", PH);
        assert_eq!(rules(&raw), [Rule::ExtbodyUrlUnquoted]);
        let out = fixed(&raw, &Options::default());
        // `URL="` and the URL would push the first line past 78 octets: a line of its own.
        assert!(
            out.contains("access-type=URL;\n URL=\"http://a.example/b?c=d\"; x=y\n"),
            "{out}"
        );
        assert!(rules(&out).is_empty());
        // A quoted URL is not reported.
        assert!(rules(&ext(" access-type=URL; URL=\"http://a.example/b?c=d\"", PH)).is_empty());
    }

    #[test]
    fn whole_url_words_quote_without_folding() {
        let long = "http://a.example/reports/2024/quarterly/finance/summary-of-all.pdf";
        let raw = ext(&format!(" access-type=URL; URL={long}"), PH);
        let whole = Options {
            whole_url_words: true,
            ..Options::default()
        };
        let out = fixed(&raw, &whole);
        assert!(
            out.contains("access-type=URL;\n URL=\"http://a.example/reports/2024/quarterly/finance/summary-of-all.pdf\"\n"),
            "{out}"
        );
        // The long word stays, reported without a fix; fixing again changes nothing.
        assert_eq!(
            found(&out, &whole),
            [("0".into(), Rule::ExtbodyUrlWordTooLong, false)]
        );
        assert_eq!(fixed(&out, &whole), out);
        // The RFC 2017 form of the same repair folds.
        let folded = fixed(&raw, &Options::default());
        assert!(folded.contains("/quarterly/\n finance/"), "{folded}");
    }

    #[test]
    fn a_space_inside_a_line_of_the_url_is_not_rewritten() {
        // RFC 2017 drops it, readers keep it: no rewrite picks one reading.
        let raw = ext(
            " access-type=URL;\n URL=\"http://a.example/a b/caf\u{e9}.pdf\"",
            PH,
        );
        assert_eq!(
            found(&raw, &Options::default()),
            [("0".into(), Rule::ExtbodyUrlUnencoded, false)]
        );
        assert!(has_inline_space(b"a b"));
        assert!(!has_inline_space(b"a/b\r\n c"));
        assert!(!has_inline_space(b"a/b \r\n c"));
        assert!(!has_inline_space(b" ab "));
        // The same URL folded at a line break is rewritten as before.
        let folded = ext(
            " access-type=URL;\n URL=\"http://a.example/a\n b/caf\u{e9}.pdf\"",
            PH,
        );
        let out = fixed(&folded, &Options::default());
        assert!(
            out.contains("URL=\"http://a.example/ab/caf%C3%A9.pdf\""),
            "{out}"
        );
    }

    #[test]
    fn unencoded_octets_are_encoded() {
        let raw = ext(
            " access-type=URL; URL=\"http://a.example/caf\u{e9}\\\"q\"",
            PH,
        );
        assert_eq!(
            found(&raw, &Options::default()),
            [("0".into(), Rule::ExtbodyUrlUnencoded, true)]
        );
        let out = fixed(&raw, &Options::default());
        assert!(
            out.contains("URL=\"http://a.example/caf%C3%A9%22q\"\n"),
            "{out}"
        );
        // Encoded octets are fine; a stray `%` is not encoded, but RFC 3986 rejects it.
        assert!(rules(&ext(
            " access-type=URL; URL=\"http://a.example/caf%C3%A9\"",
            PH
        ))
        .is_empty());
        assert_eq!(
            rules(&ext(" access-type=URL; URL=\"http://a.example/?%zz\"", PH)),
            [Rule::ExtbodyUrlInvalid]
        );
        assert!(rules(&ext(" access-type=URL; URL=\"http://a.example/ a b\"", PH)).is_empty());
    }

    #[test]
    fn rules_md_fold_vector() {
        let raw = ext(
            " access-type=URL; URL=\"ftp://ftp.deepdirs.org/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17/18/20/21/file.html\"",
            "Content-type: text/html\nContent-ID: <a@b>\n",
        );
        assert_eq!(
            found(&raw, &Options::default()),
            [("0".into(), Rule::ExtbodyUrlWordTooLong, true)]
        );
        let out = fixed(&raw, &Options::default());
        assert!(
            out.contains(concat!(
                "Content-Type: message/external-body; access-type=URL;\n",
                " URL=\"ftp://ftp.deepdirs.org/1/2/3/4/5/6/7/8/9\n",
                " /10/11/12/13/14/15/16/17/18/20/21/file.h\n",
                " tml\"\n\n"
            )),
            "{out}"
        );
        assert!(rules(&out).is_empty());
        // 40 octets exactly is a legal URL-word.
        let w40 = format!("http://a.example/{}", "x".repeat(23));
        assert!(rules(&ext(&format!(" access-type=URL; URL=\"{w40}\""), PH)).is_empty());
    }

    #[test]
    fn fix_changes_only_the_url_parameter() {
        let raw = ext(
            " (c) access-type=URL;\r\n\tURL=http://a.example/\u{fc}; expiration=\"x\"",
            PH,
        );
        let out = fixed(&raw, &Options::default());
        assert_eq!(
            out,
            ext(
                " (c) access-type=URL;\r\n\tURL=\"http://a.example/%C3%BC\"; expiration=\"x\"",
                PH
            )
        );
    }

    #[test]
    fn continuations_are_info_and_normalised_on_request() {
        let raw = ext(
            " access-type=URL;\n URL*0=\"ftp://\";\n URL*1=\"cs.utk.edu/pub/moore/bulk-mailer/bulk-mailer.tar\"",
            PH,
        );
        assert_eq!(
            found(&raw, &Options::default()),
            [("0".into(), Rule::ExtbodyUrlContinuation, false)]
        );
        assert_eq!(fixed(&raw, &Options::default()), raw);
        let opts = Options {
            normalize_url_continuations: true,
            ..Options::default()
        };
        assert_eq!(
            found(&raw, &opts),
            [("0".into(), Rule::ExtbodyUrlContinuation, true)]
        );
        let out = fixed(&raw, &opts);
        assert_eq!(
            out,
            ext(
                " access-type=URL;\n URL=\"ftp://cs.utk.edu/pub/moore/bulk-mailer/b\n ulk-mailer.tar\"",
                PH
            )
        );
        assert!(found(&out, &opts).is_empty());
    }

    /// RFC 2017's LWSP removal applies to the header's whitespace, not to octets
    /// decoded from %-escapes of a `*`-marked RFC 2231 segment: a decoded space stays in
    /// the URL, is reported unencoded, and the normalisation writes it back as `%20`.
    #[test]
    fn a_decoded_space_in_a_continuation_is_kept_and_reencoded() {
        let raw = ext(
            " access-type=URL;\n URL*0*=us-ascii''http://a.example/my%20file;\n URL*1=\".txt\"",
            PH,
        );
        let a = check(raw.as_bytes(), &Options::default());
        let unenc: Vec<&Finding> = a
            .findings
            .iter()
            .filter(|f| f.rule == Rule::ExtbodyUrlUnencoded)
            .collect();
        assert_eq!(unenc.len(), 1, "{:?}", a.findings);
        assert!(
            unenc[0].message.contains("http://a.example/my file.txt"),
            "{}",
            unenc[0].message
        );
        let opts = Options {
            normalize_url_continuations: true,
            ..Options::default()
        };
        assert_eq!(
            found(&raw, &opts),
            [
                ("0".into(), Rule::ExtbodyUrlContinuation, true),
                ("0".into(), Rule::ExtbodyUrlUnencoded, true)
            ]
        );
        let out = fixed(&raw, &opts);
        assert!(
            out.contains("URL=\"http://a.example/my%20file.txt\""),
            "{out}"
        );
        assert!(found(&out, &opts).is_empty());
        assert_eq!(fixed(&out, &opts), out, "idempotent");
        // The same URL in both forms is no conflict.
        let both = ext(
            " access-type=URL; URL=\"http://a.example/my%20file\";\n URL*=us-ascii''http://a.example/my%20file",
            PH,
        );
        assert!(!rules(&both).contains(&Rule::ExtbodyUrlConflict));
        // LWSP written in the header inside a segment is still removed.
        let folded = ext(" access-type=URL;\n URL*0=\"http://a.example/ x\"", PH);
        assert!(!rules(&folded).contains(&Rule::ExtbodyUrlUnencoded));
    }

    #[test]
    fn ambiguous_continuations_are_not_normalised() {
        // Found by fuzzing: `URL*` beside `URL*0`, an unterminated quoted-string and
        // text after it. The rewrite removed the pieces but left the unread text, and
        // the next pass found continuations again (fix not idempotent).
        let raw = "Content-Type: message/external-body; access-type=URL; URL*=utf-8''%41; charset=utf-8; URL*0=\"http://; URL*0=\"http://; URL*=utf-8''%41; URL*0=\"http://; URL*0=\"http://";
        let opts = Options {
            normalize_url_continuations: true,
            ..Options::default()
        };
        let (fixed, a) = crate::engine::fix(raw.as_bytes(), &opts).unwrap();
        assert!(a
            .findings
            .iter()
            .any(|f| f.rule == Rule::ExtbodyUrlContinuation && !f.fixable));
        assert_eq!(fixed, raw.as_bytes());
        // Two URL*0 sections, well formed otherwise: which one counts is a guess.
        let twice = "Content-Type: message/external-body; access-type=URL;\n URL*0=\"http://a/\"; URL*0=\"http://b/\"\n\nContent-ID: <x@y>\n\n";
        let (fixed, _) = crate::engine::fix(twice.as_bytes(), &opts).unwrap();
        assert_eq!(fixed, twice.as_bytes());
        // The plain case still normalises.
        let plain = "Content-Type: message/external-body; access-type=URL;\n URL*0=\"http://a/\"; URL*1=\"b\"\n\nContent-ID: <x@y>\n\n";
        let (fixed, _) = crate::engine::fix(plain.as_bytes(), &opts).unwrap();
        assert!(String::from_utf8_lossy(&fixed).contains("URL=\"http://a/b\""));
    }

    #[test]
    fn conflicting_forms_are_an_error_and_not_fixed() {
        let raw = ext(
            " access-type=URL; URL=\"http://a.example/\"; URL*0=\"http://b.example/\"",
            PH,
        );
        let f = found(&raw, &Options::default());
        assert!(f.contains(&("0".into(), Rule::ExtbodyUrlConflict, false)));
        let same = ext(
            " access-type=URL; URL=\"http://a.example/\"; URL*0=\"http://a.example/\"",
            PH,
        );
        assert!(!rules(&same).contains(&Rule::ExtbodyUrlConflict));
    }

    #[test]
    fn invalid_and_non_retrieval_and_denied_urls() {
        assert_eq!(
            rules(&ext(" access-type=URL; URL=\"a.example/x\"", PH)),
            [Rule::ExtbodyUrlInvalid]
        );
        assert_eq!(
            rules(&ext(
                " access-type=URL; URL=\"http://a.example/x#frag\"",
                PH
            )),
            [Rule::ExtbodyUrlInvalid]
        );
        assert_eq!(
            rules(&ext(" access-type=URL; URL=\"mailto:a@b.example\"", PH)),
            [Rule::ExtbodyUrlNotRetrieval]
        );
        assert_eq!(
            rules(&ext(" access-type=URL; URL=\"file:///etc/passwd\"", PH)),
            [Rule::ExtbodyUrlSchemeDenied]
        );
        assert!(rules(&ext(" access-type=URL; URL=\"nntp://n.example/g/1\"", PH)).is_empty());
        let mut opts = Options::default();
        opts.schemes.allow = vec!["https".into()];
        let f = found(
            &ext(" access-type=URL; URL=\"http://a.example/\"", PH),
            &opts,
        );
        assert_eq!(f, [("0".into(), Rule::ExtbodyUrlSchemeDenied, false)]);
        assert!(found(
            &ext(" access-type=URL; URL=\"https://a.example/\"", PH),
            &opts
        )
        .is_empty());
    }

    /// `URL=""` is one defect, not two: the parameter is there, its value is not an
    /// absolute URI.
    #[test]
    fn an_empty_url_is_one_finding() {
        for params in [
            " access-type=URL; URL=\"\"",
            " access-type=URL; URL=\" \"",
            " access-type=URL; URL*0=\"\"",
        ] {
            let a = check(ext(params, PH).as_bytes(), &Options::default());
            let got: Vec<(Rule, &str)> = a
                .findings
                .iter()
                .filter(|f| {
                    f.rule.id().starts_with("extbody-url-") || f.rule == Rule::ExtbodyParamMissing
                })
                .filter(|f| f.rule != Rule::ExtbodyUrlContinuation)
                .map(|f| (f.rule, f.message.as_str()))
                .collect();
            assert_eq!(got.len(), 1, "{params}: {got:?}");
            assert_eq!(got[0].0, Rule::ExtbodyUrlInvalid, "{params}");
            assert!(got[0].1.contains("empty"), "{}", got[0].1);
        }
    }

    #[test]
    fn legacy_and_unknown_access_types() {
        let raw = ext(
            " access-type=ANON-FTP; site=ftp.example; directory=pub; name=a.txt; mode=ascii",
            PH,
        );
        let a = check(raw.as_bytes(), &Options::default());
        assert_eq!(a.findings.len(), 1);
        assert_eq!(a.findings[0].rule, Rule::ExtbodyLegacyAccessType);
        assert!(a.findings[0]
            .message
            .contains("ftp://ftp.example/pub/a.txt;type=a"));
        assert!(!a.findings[0].fixable);
        assert_eq!(
            rules(&ext(" access-type=x-mutt-deleted; expiration=x", PH)),
            [Rule::ExtbodyUnknownAccessType]
        );
        assert!(rules(&ext(" access-type=\"local-file\"; name=x", PH)).is_empty());
    }

    #[test]
    fn legacy_url_escapes_file_names() {
        let ct = ContentType::parse(
            b"message/external-body; access-type=tftp; site=h; name=\"a/b c\"; mode=octet",
        );
        assert_eq!(
            legacy_url("tftp", &ct).unwrap(),
            b"tftp://h/a%2Fb%20c;mode=octet"
        );
        let ct = ContentType::parse(b"message/external-body; access-type=ftp; site=h");
        assert_eq!(legacy_url("ftp", &ct), None);
    }

    #[test]
    fn transfer_encoding_other_than_7bit() {
        let p = " access-type=URL; URL=\"http://a.example/\"";
        let with = |cte: &str| {
            format!("Subject: x\nContent-Type: message/external-body;{p}\nContent-Transfer-Encoding: {cte}\n\n{PH}")
        };
        assert_eq!(rules(&with("base64")), [Rule::ExtbodyBadEncoding]);
        assert_eq!(rules(&with("8bit")), [Rule::ExtbodyBadEncoding]);
        assert!(rules(&with("7BIT (plain)")).is_empty());
    }

    #[test]
    fn phantom_heading_and_body() {
        let p = " access-type=URL; URL=\"http://a.example/\"";
        assert_eq!(
            rules(&ext(p, "Content-Type: text/plain\n\n")),
            [Rule::ExtbodyInnerContentIdMissing]
        );
        assert_eq!(
            rules(&ext(
                p,
                "Content-ID: <a@b>\n\nTHIS IS NOT REALLY THE BODY!\n"
            )),
            [Rule::ExtbodyPhantomBodyNotEmpty]
        );
        assert!(rules(&ext(p, "Content-ID: <a@b>\n\n \n\t\n")).is_empty());
        // MAIL-SERVER puts its commands in the phantom body: that is no finding.
        assert!(rules(&ext(
            " access-type=mail-server; server=a@b.example",
            "Content-ID: <a@b>\n\nget x\n"
        ))
        .is_empty());
    }

    #[test]
    fn encoded_encapsulation_is_reported_not_fixed() {
        let inner = ext(" access-type=URL; URL=http://a.example/", PH);
        // Quoted-printable of ASCII lines only needs `=` written as `=3D`.
        let qp = inner.replace('=', "=3D");
        let raw = format!("Subject: o\nContent-Type: message/rfc822\nContent-Transfer-Encoding: quoted-printable\n\n{qp}\n");
        assert_eq!(
            found(&raw, &Options::default()),
            [("1.0".into(), Rule::ExtbodyUrlUnquoted, false)]
        );
        assert_eq!(fixed(&raw, &Options::default()), raw);
    }

    #[test]
    fn url_on_an_over_long_line_is_folded() {
        let url = format!("http://a.example/{}", "x/".repeat(600));
        let raw = ext(
            &format!(" access-type=URL; URL=\"{}\"", url.replace("x/x/", "x/ x/")),
            PH,
        );
        // Every URL-word is short, but the line is over 998 octets.
        assert!(rules(&raw).is_empty());
        let a = check(raw.as_bytes(), &Options::default());
        assert_eq!(a.findings.len(), 1);
        assert_eq!(
            (a.findings[0].rule, a.findings[0].fixable),
            (Rule::HeaderLineTooLong, true)
        );
        let out = fixed(&raw, &Options::default());
        assert!(out.lines().all(|l| l.len() <= 78), "{out}");
        assert!(check(out.as_bytes(), &Options::default())
            .findings
            .is_empty());
        // The same when the long line is a later line of the parameter.
        let raw = raw.replace("URL=\"http://a.example/", "URL=\"http://a.example/\n ");
        let a = check(raw.as_bytes(), &Options::default());
        assert_eq!(a.findings.len(), 1);
        assert!(a.findings[0].fixable);
        assert!(fixed(&raw, &Options::default())
            .lines()
            .all(|l| l.len() <= 78));
    }

    fn with_rules(rules: &[(&str, &str)]) -> Options {
        Options {
            rewrites: rules
                .iter()
                .enumerate()
                .map(|(n, (scheme, t))| crate::engine::UrlRewrite {
                    name: format!("rewrite #{}", n + 1),
                    scheme: Some(scheme.to_string()),
                    host: None,
                    path: None,
                    template: crate::engine::Template::parse(t).unwrap(),
                })
                .collect(),
            ..Options::default()
        }
    }

    #[test]
    fn rewrite_rule_replaces_every_url_form_and_folds() {
        let opts = with_rules(&[("http", "https://gateway.example.net/fetch?u={url_pct}")]);
        let raw = ext(
            " access-type=URL; expiration=\"x\";\n URL*0=\"http://a.example/\";\n URL*1=\"caf\u{e9}\"",
            PH,
        );
        let f = found(&raw, &opts);
        assert_eq!(
            f,
            [
                ("0".into(), Rule::ExtbodyUrlContinuation, true),
                ("0".into(), Rule::ExtbodyUrlUnencoded, true),
                ("0".into(), Rule::ExtbodyUrlRewritten, true),
            ]
        );
        let a = check(raw.as_bytes(), &opts);
        let ch = a.edits[0].change.clone().unwrap();
        assert_eq!(ch.old, "http://a.example/caf%C3%A9");
        assert_eq!(
            ch.new.as_deref(),
            Some("https://gateway.example.net/fetch?u=http%3A%2F%2Fa.example%2Fcaf%25C3%25A9")
        );
        let out = fixed(&raw, &opts);
        assert_eq!(
            out,
            ext(
                " access-type=URL; expiration=\"x\";\n URL=\"https://gateway.example.net/fetch?u=http\n %3A%2F%2Fa.example%2Fcaf%25C3%25A9\"",
                PH
            )
        );
        assert!(found(&out, &opts).is_empty());
        // No rule, no rewrite; a rule for another scheme, no rewrite.
        let plain = ext(" access-type=URL; URL=\"ftp://a.example/x\"", PH);
        assert!(found(&plain, &opts).is_empty());
    }

    #[test]
    fn rewrite_cures_a_denied_scheme_or_fails_safely() {
        let mut opts = with_rules(&[("http", "https://{authority}{path}{query}")]);
        opts.schemes.allow = vec!["https".into()];
        let raw = ext(
            " access-type=URL; URL=\"http://[2001:db8::1]:8080/a?b\"",
            PH,
        );
        assert_eq!(
            found(&raw, &opts),
            [
                ("0".into(), Rule::ExtbodyUrlSchemeDenied, true),
                ("0".into(), Rule::ExtbodyUrlRewritten, true),
            ]
        );
        assert!(fixed(&raw, &opts).contains("URL=\"https://[2001:db8::1]:8080/a?b\""));
        // A template whose result is denied is refused, and the URL is left as is.
        let mut bad = with_rules(&[("http", "file:///{host}{path}")]);
        bad.schemes = Default::default();
        let raw = ext(" access-type=URL; URL=\"http://a.example/x\"", PH);
        assert_eq!(
            found(&raw, &bad),
            [("0".into(), Rule::ExtbodyUrlRewriteFailed, false)]
        );
        assert_eq!(fixed(&raw, &bad), raw);
        // A rule that would match its own output again is refused.
        let looping = with_rules(&[("http", "http://gw.example/?u={url_pct}")]);
        assert_eq!(
            found(&raw, &looping),
            [("0".into(), Rule::ExtbodyUrlRewriteFailed, false)]
        );
    }

    #[test]
    fn rewrite_is_applied_only_when_its_own_finding_asks() {
        let opts = with_rules(&[("http", "https://{host}{path}")]);
        let raw = ext(" access-type=URL; URL=http://a.example/x", PH);
        let a = check(raw.as_bytes(), &opts);
        // The unquoted URL alone wants a fix, the rewrite is reported only: nothing.
        let only_unquoted = a.edits_for(|f| f.rule == Rule::ExtbodyUrlUnquoted);
        assert!(only_unquoted.is_empty());
        let both = a.edits_for(|f| f.fixable);
        assert_eq!(both.len(), 1);
        assert!(fixed(&raw, &opts).contains("URL=\"https://a.example/x\""));
    }

    fn legacy_opts() -> Options {
        Options {
            legacy_to_url: true,
            ..Options::default()
        }
    }

    #[test]
    fn legacy_conversion_keeps_the_other_parameters() {
        let raw = ext(
            " access-type=ANON-FTP;\n site=\"ftp.example\"; directory=\"/pub/my dir\";\n name=\"a;b.tar\"; mode=image;\n expiration=\"Fri, 14 Jun 2030 19:13:14 -0400 (EDT)\"; size=1234; permission=read",
            "Content-Type: application/x-tar\nContent-ID: <t@x>\n\n",
        );
        assert_eq!(
            found(&raw, &Options::default()),
            [("0".into(), Rule::ExtbodyLegacyAccessType, false)]
        );
        assert_eq!(
            found(&raw, &legacy_opts()),
            [("0".into(), Rule::ExtbodyLegacyAccessType, true)]
        );
        let out = fixed(&raw, &legacy_opts());
        assert_eq!(
            out,
            ext(
                " access-type=URL;\n URL=\"ftp://ftp.example/%2Fpub/my%20dir/a%3Bb.\n tar;type=i\";\n expiration=\"Fri, 14 Jun 2030 19:13:14 -0400 (EDT)\"; size=1234; permission=read",
                "Content-Type: application/x-tar\nContent-ID: <t@x>\n\n",
            )
        );
        assert!(found(&out, &legacy_opts()).is_empty());
        let a = check(raw.as_bytes(), &legacy_opts());
        let ch = a.edits[0].change.clone().unwrap();
        assert_eq!(ch.rule, Rule::ExtbodyLegacyAccessType);
        // Old: the legacy reference as written; new: the URL it became.
        assert!(
            ch.old.starts_with("access-type=ANON-FTP;site="),
            "{}",
            ch.old
        );
        assert_eq!(
            ch.new.as_deref(),
            Some("ftp://ftp.example/%2Fpub/my%20dir/a%3Bb.tar;type=i")
        );
    }

    #[test]
    fn legacy_tftp_and_ftp_with_login_and_never_mail_server_or_local_file() {
        let tftp = ext(
            " access-type=TFTP; site=h.example; name=boot.img; mode=octet",
            PH,
        );
        assert_eq!(
            fixed(&tftp, &legacy_opts()),
            ext(
                " access-type=URL;\n URL=\"tftp://h.example/boot.img;mode=octet\"",
                PH
            )
        );
        let ftp = ext(" access-type=FTP; site=h.example; name=x", PH);
        assert_eq!(
            found(&ftp, &legacy_opts()),
            [("0".into(), Rule::ExtbodyLegacyAccessType, false)]
        );
        let a = check(ftp.as_bytes(), &legacy_opts());
        assert!(
            a.findings[0].message.contains("needs a login"),
            "{}",
            a.findings[0].message
        );
        let login = Options {
            legacy_ftp_with_login: true,
            ..legacy_opts()
        };
        assert_eq!(
            fixed(&ftp, &login),
            ext(" access-type=URL; URL=\"ftp://h.example/x\"", PH)
        );
        for other in [
            " access-type=mail-server; server=\"listserv@example.org\"",
            " access-type=local-file; name=\"/u/x\"; site=h.example",
        ] {
            let raw = ext(other, PH);
            assert_eq!(fixed(&raw, &login), raw);
        }
        // A denied ftp scheme: not converted, and the reference is denied itself.
        let mut deny = legacy_opts();
        deny.schemes.deny.push("tftp".into());
        assert_eq!(
            found(&tftp, &deny),
            [
                ("0".into(), Rule::ExtbodyLegacyAccessType, false),
                ("0".into(), Rule::ExtbodyUrlSchemeDenied, false)
            ]
        );
        // The rewrite rules see the converted URL.
        let mut via = with_rules(&[("ftp", "https://mirror.example/ftp/{host}{path}")]);
        via.legacy_to_url = true;
        let raw = ext(
            " access-type=anon-ftp; site=h.example; directory=pub; name=x",
            PH,
        );
        assert_eq!(
            found(&raw, &via),
            [
                ("0".into(), Rule::ExtbodyLegacyAccessType, true),
                ("0".into(), Rule::ExtbodyUrlRewritten, true)
            ]
        );
        assert!(fixed(&raw, &via)
            .replace("\n ", "")
            .contains("URL=\"https://mirror.example/ftp/h.example/pub/x\""));
    }

    /// A nested multipart with an external-body part at 1.2.
    fn nested(url: &str) -> String {
        format!(
            "Subject: n\nContent-Type: multipart/mixed; boundary=o\n\n--o\nContent-Type: multipart/alternative; boundary=i\n\n--i\nContent-Type: text/plain\n\nhi\n--i\nContent-Type: message/external-body; access-type=URL;\n URL=\"{url}\"\n\nContent-Type: text/html\nContent-ID: <p@x>\n\n--i--\n--o--\n"
        )
    }

    #[test]
    fn denied_scheme_part_is_stripped_when_enabled() {
        let raw = nested("javascript:alert(document.cookie)//caf\u{e9}");
        assert_eq!(
            found(&raw, &Options::default()),
            [
                ("1.2".into(), Rule::ExtbodyUrlUnencoded, true),
                ("1.2".into(), Rule::ExtbodyUrlSchemeDenied, false)
            ]
        );
        let opts = Options {
            strip_denied: true,
            ..Options::default()
        };
        let f = found(&raw, &opts);
        assert_eq!(f[1], ("1.2".into(), Rule::ExtbodyUrlSchemeDenied, true));
        let a = check(raw.as_bytes(), &opts);
        // The fold of the URL and the strip: only the strip is applied.
        assert_eq!(a.edits.len(), 2);
        assert_eq!(a.edits_for(|f| f.fixable).len(), 1);
        let out = fixed(&raw, &opts);
        let start = raw.find("Content-Type: message/external-body").unwrap();
        let end = raw.find("\n--i--").unwrap();
        assert_eq!(&out[..start], &raw[..start]);
        assert!(out.ends_with(&raw[end..]));
        let notice = &out[start..out.len() - (raw.len() - end)];
        assert!(
            notice.starts_with("Content-Type: text/plain; charset=\"us-ascii\"\n"),
            "{notice}"
        );
        assert!(
            notice.ends_with("\n\nRemoved URL:\n  javascript:alert(document.cookie)//caf%C3%A9"),
            "{notice}"
        );
        assert!(check(out.as_bytes(), &opts).findings.is_empty());
        // Only the strip, with the denial reported only: the fold alone is applied.
        let fold_only = a.edits_for(|f| f.rule == Rule::ExtbodyUrlUnencoded);
        assert_eq!(fold_only.len(), 1);
        assert_eq!(fold_only[0].kind, crate::engine::EditKind::Field);
        // A top-level external-body is never stripped.
        let top = ext(" access-type=URL; URL=\"javascript:x\"", PH);
        assert_eq!(
            found(&top, &opts),
            [("0".into(), Rule::ExtbodyUrlSchemeDenied, false)]
        );
    }

    #[test]
    fn garbage_never_panics() {
        for params in [
            "",
            ";",
            " access-type",
            " access-type=URL; URL=",
            " access-type=URL; URL=\"",
            " access-type=URL; URL=:",
            " access-type=URL; URL=a:b:c;;; x",
            " access-type=URL; URL*9=x; URL*=''%",
            " access-type=URL; URL=\"\"",
        ] {
            let _ = fix(ext(params, "").as_bytes(), &Options::default());
            let _ = fix(
                ext(params, PH).replace('\n', "\r\n").as_bytes(),
                &Options::default(),
            );
        }
    }
}
