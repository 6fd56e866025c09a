//! `html-base-remote`: relative links of an HTML body sent to a network host by a base
//! taken from a MIME header field.
//!
//! RFC 2557 resolves the relative references of an HTML part against the nearest
//! absolute Content-Location (or, before RFC 2557 §12 removed it, Content-Base) of its
//! heading or an enclosing one. Thunderbird writes that base into the document as
//! `<BASE HREF>`, ahead of any the HTML has. Spam and phishing scanners (rspamd,
//! SpamAssassin) read only the HTML's own `<base>`: they see relative links where the
//! reader follows links to the host, the BaseStriker trick moved into MIME headers.
//!
//! Reported for a text/html part whose references include relative ones that name no
//! part of the message, when its base comes from a header field and has a network
//! host. A Content-Base may be removed (policy `fix`): RFC 2557 no longer defines it,
//! and it is removed only where no Content-Location and no reference of the message
//! resolves against it. A Content-Location is also the part's name inside the message,
//! so it is only reported.

use crate::engine::model::analysis::{Context, Finding, Target};
use crate::engine::model::base_uri::{base_source, BaseSource};
use crate::engine::model::rules::Rule;
use crate::engine::syntax::ascii::{clip, excerpt};

/// The host of an absolute URI with an authority (`scheme://host…`), if it names one.
fn network_host(uri: &str) -> Option<&str> {
    let (_, rest) = uri.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit('@').next()?;
    let host = host.split(':').next().filter(|h| !h.is_empty())?;
    Some(host)
}

pub(super) fn check(cx: &mut Context) {
    let msg = cx.msg;
    for k in 0..cx.html_parts.len() {
        let hp = &cx.html_parts[k];
        if hp.relative_count == 0 {
            continue;
        }
        let Some(src) = base_source(msg, hp.idx) else {
            continue;
        };
        let Some(host) = network_host(&src.base) else {
            continue;
        };
        let holder = &msg.entities[src.entity];
        let field_name = if src.content_base {
            "Content-Base"
        } else {
            "Content-Location"
        };
        let own = match &hp.own_base {
            Some(b) => format!(
                "; the HTML's own <base href=\"{}\"> is not what Thunderbird uses",
                clip(b)
            ),
            None => String::new(),
        };
        let examples: Vec<String> = hp
            .relative
            .iter()
            .map(|u| format!("\"{}\"", clip(u)))
            .collect();
        let mut f = Finding::new(
            Rule::HtmlBaseRemote,
            msg.path(&msg.entities[hp.idx]),
            format!(
                "{} relative reference{} ({}) against {} from the {field_name} of part {}, which names the host {}: Thunderbird makes it the document's <BASE HREF>, while scanners that read only the HTML see relative links{own} (RFC 2557 §5, §12)",
                hp.relative_count,
                if hp.relative_count == 1 { " resolves" } else { "s resolve" },
                examples.join(", "),
                excerpt(src.base.as_bytes()),
                msg.path(holder),
                excerpt(host.as_bytes())
            ),
        );
        if src.content_base {
            if let Some(edit) = remove_content_base(cx, &src) {
                f.message.push_str("; fix: remove the Content-Base");
                f = f.with_edit(edit);
            }
        }
        cx.report(f);
    }
}

/// Offers the removal of the Content-Base `src` names, when that ends the remote base
/// and nothing of the message resolves against it: it is the message's only Content-Base
/// (with another, removing one would let the next take its place, one repair after
/// the other), no enclosing heading gives a base by Content-Location, and no part of
/// the message has a Content-Location (whose resolution, or that of a reference to
/// it, the removal would change).
fn remove_content_base(cx: &mut Context, src: &BaseSource) -> Option<usize> {
    let msg = cx.msg;
    let e = &msg.entities[src.entity];
    let bases: usize = msg
        .entities
        .iter()
        .map(|x| msg.fields_named(x, "content-base").count())
        .sum();
    if !e.editable() || bases != 1 {
        return None;
    }
    if e.parent.is_some_and(|p| base_source(msg, p).is_some()) {
        return None;
    }
    // Without it, relative references resolve against another base, and may then name
    // a part by its Content-Location (one repair making the next): with any
    // Content-Location in the message, the Content-Base stays.
    let located = msg
        .entities
        .iter()
        .any(|x| msg.field(x, "content-location").is_some())
        || cx
            .refs
            .iter()
            .any(|r| matches!(r.target, Target::Location(_)));
    if located {
        return None;
    }
    let field = msg.fields(e).get(src.field)?;
    let range = field.start..field.end;
    let loc = msg.field_loc(e, src.field);
    Some(cx.edits.remove_field(range, loc, Rule::HtmlBaseRemote))
}
