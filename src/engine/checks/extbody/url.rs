//! The URL access-type (RFC 2017): the forms the URL parameter is written in, the URL
//! itself, the scheme policy and the admin's rewrite rules, and the rewrite of the URL
//! parameter that repairs them.

use std::borrow::Cow;

use iri_string::types::UriAbsoluteStr;

use super::value::{self, Form};
use super::ExtField;
use crate::engine::model::analysis::{Context, Finding};
use crate::engine::model::rules::Rule;
use crate::engine::model::url_rules;
use crate::engine::rewriting::{rewrite, strip};
use crate::engine::syntax::ascii::excerpt;
use crate::engine::syntax::fold;
use crate::engine::syntax::params::{is_token_byte, ContentType, Param};
use crate::engine::syntax::uri;

/// A URL finding before it is reported: whether the rewrite of the URL parameter (when
/// one is made) repairs it.
struct UrlFinding {
    rule: Rule,
    message: String,
    cured_by_rewrite: bool,
}

/// The URL parameters of a Content-Type, in the forms the sender wrote them.
struct UrlForms<'v> {
    /// `URL=` parameters (RFC 2017), in written order.
    plains: Vec<&'v Param>,
    /// `URL*`, `URL*0`, `URL*1*`… parameters (RFC 2231).
    pieces: Vec<&'v Param>,
    /// The URL of the first `URL=` parameter.
    plain_url: Option<Vec<u8>>,
    /// The URL the RFC 2231 pieces reassemble to.
    cont_url: Option<Vec<u8>>,
}

impl<'v> UrlForms<'v> {
    fn read(ct: &'v ContentType) -> Self {
        let plains: Vec<&Param> = ct
            .params
            .iter()
            .filter(|p| p.name == "url" && p.section.is_none() && !p.extended)
            .collect();
        let pieces: Vec<&Param> = ct.pieces("url").collect();
        let plain_url = plains.first().map(|p| fold::extract_url(&p.value));
        // RFC 2017 §3.1 extraction on the RFC 2231 reassembly, as RULES.md says: the LWSP
        // it removes is the header's, so it goes from each section as written, before the
        // %-decoding. An octet decoded from `%20` is part of the URL (and unencoded).
        let cont_url = ct
            .extended_with("url", |raw| Cow::Owned(fold::extract_url(raw)))
            .map(|v| v.value);
        UrlForms {
            plains,
            pieces,
            plain_url,
            cont_url,
        }
    }

    /// The URL a reader would use: the reassembled pieces, else the `URL=` parameter.
    fn url(&self) -> Option<Vec<u8>> {
        self.cont_url.clone().or_else(|| self.plain_url.clone())
    }

    /// Pieces given twice (two `URL*0`, or `URL*` beside `URL*0`), written after a missing
    /// `;`, or beside text the parser could not read: what a reader reassembles is a
    /// guess, and rewriting would leave the unread text behind (found by fuzzing).
    fn ambiguous(&self, ct: &ContentType) -> bool {
        let mut sections: Vec<Option<u32>> = self.pieces.iter().map(|p| p.section).collect();
        sections.sort_unstable();
        let n = sections.len();
        sections.dedup();
        let unsectioned_and_sectioned = sections.len() > 1 && sections.contains(&None);
        sections.len() != n
            || unsectioned_and_sectioned
            || self.pieces.iter().any(|p| p.after_defect)
            || ct.trailing.is_some()
    }

    /// A space inside a line of the quoted `URL=` value, not after a line break: RFC 2017
    /// drops it as folding, every reader tried (Python's email, GMime, MIME-tools, Ruby
    /// mail, mailparser, NeoMutt) keeps it as part of the URL. A rewrite would pick one
    /// reading; none is made (docs/INTEROP.md), the findings stay.
    fn inline_space(&self, value: &[u8]) -> bool {
        self.plains.first().is_some_and(|p| {
            let raw = &value[p.span.clone()];
            // The value as written (the parsed one is unfolded): from its opening quote.
            let from = raw.iter().position(|&b| b == b'"').unwrap_or(raw.len());
            p.quoted && has_inline_space(&raw[from..])
        })
    }
}

/// What the rewrite of the URL parameters is to write, once the findings are known.
struct Plan<'a> {
    /// The RFC 2231 pieces are to be normalised to the RFC 2017 form.
    normalize: bool,
    /// The pieces are ambiguous ([`UrlForms::ambiguous`]): never rewritten.
    ambiguous: bool,
    /// The `URL=` form itself needs a rewrite (quotes, encoding, folding).
    form_needs_it: bool,
    /// The URL as a reader would use it, %-encoded.
    encoded: &'a [u8],
    /// The URL a rewrite rule made of it, to be written instead.
    rewritten: Option<&'a str>,
}

/// The rules of the URL access-type on the Content-Type field `f`.
pub(super) fn check(cx: &mut Context, f: &ExtField) {
    let forms = UrlForms::read(f.ct);
    let Some(url) = forms.url() else {
        return; // reported as extbody-param-missing
    };
    let mut found: Vec<UrlFinding> = Vec::new();
    let conflict = check_conflict(&forms, &mut found);
    let plain_needs_rewrite = check_plain_form(cx, f.value, &forms, &mut found);
    let ambiguous = forms.ambiguous(f.ct);
    let normalize = cx.opts.normalize_url_continuations && !forms.pieces.is_empty() && !ambiguous;
    let inline_space = forms.inline_space(f.value);
    if !forms.pieces.is_empty() {
        let names: Vec<String> = forms
            .pieces
            .iter()
            .map(|p| piece_name(f.value, p))
            .collect();
        found.push(UrlFinding {
            rule: Rule::ExtbodyUrlContinuation,
            message: format!(
                "URL given as RFC 2231 parameters ({}) rather than the RFC 2017 URL=\"…\" form: {}",
                names.join(", "),
                excerpt(&url)
            ),
            cured_by_rewrite: normalize,
        });
    }
    // Only a rewrite of the form the URL was read from repairs its encoding.
    let encoding_cured = forms.cont_url.is_none() || normalize;
    let encoded = check_content(cx, &url, encoding_cured, &mut found);
    let rewritten = if conflict {
        None
    } else {
        apply_rewrite_rules(cx, &encoded, &mut found)
    };
    let plan = Plan {
        normalize,
        ambiguous,
        form_needs_it: plain_needs_rewrite && !inline_space,
        encoded: &encoded,
        rewritten: rewritten.as_deref(),
    };
    let edit = if conflict {
        None
    } else {
        offer_rewrite(cx, f, &forms, &plan, &found)
    };
    // A denied scheme no rewrite cures: policy may strip the part.
    let strip =
        if rewritten.is_none() && found.iter().any(|f| f.rule == Rule::ExtbodyUrlSchemeDenied) {
            strip::offer_strip(cx, f.idx, Rule::ExtbodyUrlSchemeDenied, &url)
        } else {
            None
        };
    if found.is_empty() {
        return;
    }
    let path = cx.msg.path(&cx.msg.entities[f.idx]);
    for u in found {
        let mut finding = Finding::new(u.rule, &path, u.message);
        if let (Some(i), true) = (edit, u.cured_by_rewrite) {
            finding = finding.with_edit(i);
        } else if let (Some(i), Rule::ExtbodyUrlSchemeDenied) = (strip, u.rule) {
            finding = finding.with_edit(i);
        }
        cx.report(finding);
    }
}

/// `extbody-url-conflict`: every form the sender gave must name the same URL. Whether
/// they conflict.
fn check_conflict(forms: &UrlForms, found: &mut Vec<UrlFinding>) -> bool {
    if forms.plains.len() + usize::from(forms.cont_url.is_some()) < 2 {
        return false; // one form: nothing to disagree with
    }
    let mut urls: Vec<Vec<u8>> = forms
        .plains
        .iter()
        .map(|p| fold::extract_url(&p.value))
        .collect();
    urls.extend(forms.cont_url.clone());
    // Compared as a reader would send them: `a%20b` in one form and a decoded `a b` in
    // the other are the same URL. Encoding only where the octets differ keeps a long URL
    // given twice alike from being encoded at all.
    let mut first_encoded = None;
    let Some(other) = urls.iter().skip(1).find(|u| {
        **u != urls[0]
            && fold::pct_encode_unsafe(u)
                != *first_encoded.get_or_insert_with(|| fold::pct_encode_unsafe(&urls[0]))
    }) else {
        return false;
    };
    found.push(UrlFinding {
        rule: Rule::ExtbodyUrlConflict,
        message: format!(
            "the URL parameters give different URLs: {} and {} (RFC 2231 §3 reassembly vs RFC 2017 §3.1)",
            excerpt(&urls[0]),
            excerpt(other)
        ),
        cured_by_rewrite: false,
    });
    true
}

/// The RFC 2017 form rules, which concern `URL="…"` only (RULES.md):
/// `extbody-url-unquoted` and `extbody-url-word-too-long`. Whether the `URL=` parameter
/// needs a rewrite of its form (including its encoding).
fn check_plain_form(
    cx: &Context,
    value: &[u8],
    forms: &UrlForms,
    found: &mut Vec<UrlFinding>,
) -> bool {
    let Some(p) = forms.plains.first() else {
        return false;
    };
    let mut needs_rewrite = false;
    if !p.quoted {
        needs_rewrite = true;
        found.push(UrlFinding {
            rule: Rule::ExtbodyUrlUnquoted,
            message: format!(
                "URL parameter is not a quoted-string (RFC 2017 §3.1: the quotes are always required): {}",
                excerpt(&value[p.span.clone()])
            ),
            cured_by_rewrite: true,
        });
    } else if let Some(w) = p
        .value
        .split(|&b| b == b' ' || b == b'\t')
        .find(|w| w.len() > fold::MAX_URL_WORD)
    {
        // Folding is the only repair, and it may be off (see `fold::quote_url_param`).
        needs_rewrite |= !cx.opts.whole_url_words;
        found.push(UrlFinding {
            rule: Rule::ExtbodyUrlWordTooLong,
            message: format!(
                "URL-word of {} octets (RFC 2017 §3.1(2): at most 40): {}",
                w.len(),
                excerpt(w)
            ),
            cured_by_rewrite: !cx.opts.whole_url_words,
        });
    }
    if forms
        .plain_url
        .as_ref()
        .is_some_and(|u| needs_encoding(u).is_some())
    {
        needs_rewrite = true;
    }
    needs_rewrite
}

/// The content rules, on the URL a reader would use: `extbody-url-unencoded` (repaired
/// by a rewrite when `encoding_cured`), `extbody-url-invalid`,
/// `extbody-url-not-retrieval` and `extbody-url-scheme-denied`. Returns the URL
/// %-encoded.
fn check_content(
    cx: &Context,
    url: &[u8],
    encoding_cured: bool,
    found: &mut Vec<UrlFinding>,
) -> Vec<u8> {
    if let Some(what) = needs_encoding(url) {
        found.push(UrlFinding {
            rule: Rule::ExtbodyUrlUnencoded,
            message: format!(
                "URL holds unencoded {what} (RFC 2017 §3.1(1): SP, CTLs, '\"', '\\' and 8-bit octets must be %-encoded): {}",
                excerpt(url)
            ),
            cured_by_rewrite: encoding_cured,
        });
    }
    let encoded = fold::pct_encode_unsafe(url);
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
                excerpt(&encoded)
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
                    excerpt(&encoded)
                ),
                cured_by_rewrite: false,
            });
        }
        if cx.opts.schemes.denies(&scheme) {
            found.push(UrlFinding {
                rule: Rule::ExtbodyUrlSchemeDenied,
                message: format!(
                    "URL scheme {scheme}: is denied by the scheme policy: {}",
                    excerpt(&encoded)
                ),
                cured_by_rewrite: false,
            });
        }
    }
    encoded
}

/// The admin's rewrite rules (first match wins), on the URL as a reader would use it:
/// `extbody-url-rewritten` or `extbody-url-rewrite-failed`. Returns the URL to write
/// instead, when a rule rewrote it.
fn apply_rewrite_rules(
    cx: &Context,
    encoded: &[u8],
    found: &mut Vec<UrlFinding>,
) -> Option<String> {
    let rw = url_rules::apply_rules(&cx.opts.rewrites, encoded)?;
    if rw.url.as_bytes() == encoded {
        return None;
    }
    match rewrite::refuse(cx, &rw.url) {
        None => {
            // Every URL form is replaced, so every finding about the old URL or its form
            // is cured, except a conflict (never rewritten).
            for f in found.iter_mut() {
                f.cured_by_rewrite = true;
            }
            found.push(UrlFinding {
                rule: Rule::ExtbodyUrlRewritten,
                message: format!(
                    "{} rewrites the URL {} to {}",
                    rw.rule,
                    excerpt(encoded),
                    excerpt(rw.url.as_bytes())
                ),
                cured_by_rewrite: true,
            });
            Some(rw.url)
        }
        Some(why) => {
            found.push(UrlFinding {
                rule: Rule::ExtbodyUrlRewriteFailed,
                message: format!(
                    "{} would rewrite the URL {} to {}, which {why}: URL left as is",
                    rw.rule,
                    excerpt(encoded),
                    excerpt(rw.url.as_bytes())
                ),
                cured_by_rewrite: false,
            });
            None
        }
    }
}

/// Offers the rewrite of the URL parameters `plan` asks for, when one is wanted and
/// possible; every finding of `found` it cures points at it. Returns the edit index.
fn offer_rewrite(
    cx: &mut Context,
    f: &ExtField,
    forms: &UrlForms,
    plan: &Plan,
    found: &[UrlFinding],
) -> Option<usize> {
    let msg = cx.msg;
    let e = &msg.entities[f.idx];
    // Which URL parameters the rewrite replaces.
    let targets: Vec<&Param> = if plan.normalize || plan.rewritten.is_some() {
        forms
            .plains
            .iter()
            .chain(forms.pieces.iter())
            .copied()
            .collect()
    } else {
        forms.plains.clone()
    };
    let field = &msg.fields(e)[f.fi];
    let name_len = field.value.start - field.start;
    let over_long = on_long_line(f.value, &targets, name_len);
    let wanted = plan.normalize || over_long || plan.rewritten.is_some() || plan.form_needs_it;
    let pieces_targeted = targets.iter().any(|t| t.section.is_some() || t.extended);
    if !f.can_edit || !wanted || targets.is_empty() || (plan.ambiguous && pieces_targeted) {
        return None;
    }
    let form = Form {
        name_len,
        eol: e.eol(),
        fold_words: !cx.opts.whole_url_words,
        name: None,
    };
    let write_url: &[u8] = plan.rewritten.map_or(plan.encoded, str::as_bytes);
    let new_value = value::rewrite(f.value, &targets, write_url, &form);
    let first_rule = found
        .iter()
        .find(|u| u.cured_by_rewrite)
        .map_or(Rule::HeaderLineTooLong, |u| u.rule);
    let loc = msg.field_loc(e, f.fi);
    let i = cx
        .edits
        .rewrite(field.value.clone(), loc, new_value, first_rule);
    for u in found.iter().filter(|u| u.cured_by_rewrite) {
        cx.edits.also_fixes(i, u.rule);
    }
    if let Some(new) = plan.rewritten {
        let ch = rewrite::change(
            Rule::ExtbodyUrlRewritten,
            plan.encoded,
            Some(new.as_bytes()),
        );
        cx.edits.set_change(i, ch);
    }
    Some(i)
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
pub(super) fn has_inline_space(value: &[u8]) -> bool {
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
