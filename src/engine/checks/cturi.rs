//! `cturi-uri-type` and `cturi-uri-denied`: Content-Types that are draft-eastlake-cturi
//! mappings of a URI (the mapping itself is in `syntax::cturi_map`).

use crate::engine::model::analysis::{Context, Finding};
use crate::engine::model::rules::Rule;
use crate::engine::rewriting::strip;
use crate::engine::syntax::ascii::clip;
use crate::engine::syntax::cturi_map::{to_uri, uri_forms};
use crate::engine::syntax::fold::unfold;
use crate::engine::syntax::uri;

/// Reports Content-Types that are ContentType: mappings (`cturi-uri-type`) and, when the
/// URI they stand for has a scheme the policy denies, `cturi-uri-denied` (draft §6).
pub fn check(cx: &mut Context) {
    let msg = cx.msg;
    for &idx in msg.uri_types() {
        let e = &msg.entities[idx];
        let Some(fi) = e.ctype_field else { continue };
        // Listed for one form or the other: which one the finding names.
        let (uri_tree, _) = uri_forms(&e.ctype);
        let Some(field) = msg.fields(e).get(fi) else {
            continue;
        };
        let value = String::from_utf8_lossy(&unfold(msg.value(e, field)))
            .trim()
            .to_string();
        let why = if uri_tree {
            "a media subtype in the uri. tree (draft-eastlake-cturi §2.3)"
        } else {
            "a URI-Body/URI-Fragment parameter (draft-eastlake-cturi §3)"
        };
        match to_uri(&value) {
            Ok(uri) => {
                cx.report(Finding::new(
                    Rule::CturiUriType,
                    msg.path(e),
                    format!(
                        "Content-Type \"{}\" has {why}; it stands for the URI <{}>",
                        clip(&value),
                        clip(&uri)
                    ),
                ));
                let scheme = uri::scheme(uri.as_bytes()).unwrap_or("");
                if !scheme.eq_ignore_ascii_case("contenttype") && cx.opts.schemes.denies(scheme) {
                    let mut f = Finding::new(
                        Rule::CturiUriDenied,
                        msg.path(e),
                        format!(
                            "Content-Type \"{}\" maps to <{}>, whose scheme \"{}\" is denied by policy (draft-eastlake-cturi §6)",
                            clip(&value),
                            clip(&uri),
                            scheme.to_ascii_lowercase()
                        ),
                    );
                    // Policy may strip the part, as for an external-body URL.
                    if let Some(i) =
                        strip::offer_strip(cx, idx, Rule::CturiUriDenied, uri.as_bytes())
                    {
                        f = f.with_edit(i);
                    }
                    cx.report(f);
                }
            }
            Err(err) => cx.report(Finding::new(
                Rule::CturiUriType,
                msg.path(e),
                format!(
                    "Content-Type \"{}\" has {why} but cannot be mapped to a URI: {err}",
                    clip(&value)
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{check as analyse, Options, SchemePolicy};

    fn rules_of(raw: &[u8], opts: &Options) -> Vec<(String, &'static str)> {
        let a = analyse(raw, opts);
        let mut v: Vec<_> = a
            .findings
            .iter()
            .filter(|f| f.rule.id().starts_with("cturi"))
            .map(|f| (f.part.clone(), f.rule.id()))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn check_reports_uri_tree_and_denied_schemes() {
        let raw = b"Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: application/uri.http%3A%2F%2Fx.test\n\nx\n--b\nContent-Type: application/uri.javascript%3Aalert%281%29\n\nx\n--b\nContent-Type: text/plain; URI-Body=\"file:///etc/passwd\"\n\nx\n--b--\n";
        let opts = Options::default();
        assert_eq!(
            rules_of(raw, &opts),
            vec![
                ("1".to_string(), "cturi-uri-type"),
                ("2".to_string(), "cturi-uri-denied"),
                ("2".to_string(), "cturi-uri-type"),
                ("3".to_string(), "cturi-uri-denied"),
                ("3".to_string(), "cturi-uri-type"),
            ]
        );
        let a = analyse(raw, &opts);
        let m = &a
            .findings
            .iter()
            .find(|f| f.part == "2" && f.rule == Rule::CturiUriDenied)
            .unwrap()
            .message;
        assert!(m.contains("javascript:alert(1)"), "{m}");
    }

    #[test]
    fn check_ignores_look_alikes_and_spares_the_contenttype_scheme() {
        // "uri" without the dot is not the tree; a parameter merely named like one is not
        // URI-Body.
        let raw = b"Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: application/uri-list\n\nx\n--b\nContent-Type: text/plain; uri=\"http://x\"; body-uri=\"x\"\n\nx\n--b--\n";
        assert!(rules_of(raw, &Options::default()).is_empty());
        // A lone URI-Fragment maps to a ContentType: URI, which no allow-list denies.
        let raw = b"Content-Type: text/plain; URI-Fragment=\"x\"\n\nx\n";
        let opts = Options {
            schemes: SchemePolicy {
                allow: vec!["https".into()],
                deny: vec![],
            },
            ..Options::default()
        };
        assert_eq!(
            rules_of(raw, &opts),
            vec![("0".to_string(), "cturi-uri-type")]
        );
    }

    #[test]
    fn denied_uri_part_is_stripped_only_inside_a_multipart_and_when_enabled() {
        use crate::engine::{check, fix, Options};
        let raw = "Subject: s\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nhi\n--b\nContent-Type: application/uri.javascript%3Aalert(1)\n\nx\n--b--\n";
        let denied = |o: &Options| {
            check(raw.as_bytes(), o)
                .findings
                .into_iter()
                .find(|f| f.rule == Rule::CturiUriDenied)
                .map(|f| (f.part, f.fixable))
        };
        assert_eq!(denied(&Options::default()), Some(("2".into(), false)));
        let strip = Options {
            strip_denied: true,
            ..Options::default()
        };
        assert_eq!(denied(&strip), Some(("2".into(), true)));
        let out = String::from_utf8(fix(raw.as_bytes(), &strip).unwrap().0).unwrap();
        assert!(out.starts_with("Subject: s\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nhi\n--b\nContent-Type: text/plain; charset=\"us-ascii\"\n"), "{out}");
        assert!(out.ends_with("  javascript:alert\n--b--\n"), "{out}");
        // Top level: reported, never stripped.
        let top = "Subject: s\nContent-Type: application/uri.javascript%3Aalert(1)\n\nx\n";
        let f = check(top.as_bytes(), &strip);
        assert!(f
            .findings
            .iter()
            .any(|f| f.rule == Rule::CturiUriDenied && !f.fixable));
    }
}
