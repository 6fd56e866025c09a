//! Signed mail: fixes that would break a signature are withheld unless the admin says the
//! milter runs before the signer (`Options::fix_signed`).
//!
//! What a signature covers:
//! - DKIM-Signature and ARC-Message-Signature: the top-level fields named in `h=`, and the
//!   whole body (`bh=`), so any edit below the top-level heading breaks them.
//! - multipart/signed (RFC 1847): the first body part, heading included.
//! - application/pkcs7-mime (S/MIME): the whole entity.

use std::ops::Range;

use crate::engine::model::analysis::Finding;
use crate::engine::model::edit::Edit;
use crate::engine::model::mime::Message;
use crate::engine::model::options::Options;
use crate::engine::model::rules::Rule;

/// One thing a signature covers, and what signs it.
struct Cover {
    what: String,
    /// Part path the signature belongs to, for the finding.
    part: String,
    /// Byte ranges of the original message it covers.
    ranges: Vec<Range<usize>>,
}

/// Marks findings whose edit would break a signature as not fixable (unless
/// `fix_signed`), and reports `signed-content` for each signature so affected.
pub fn withhold_signed_fixes(
    msg: &Message,
    opts: &Options,
    findings: &mut [Finding],
    edits: &[Edit],
) -> Vec<Finding> {
    let mut extra = Vec::new();
    // No edit, nothing to withhold: the signatures are only looked for when there is one
    // (the look walks every part, ~10 instructions a part of a 10 000-part message).
    if edits.is_empty() {
        return extra;
    }
    let covers = covers(msg);
    if covers.is_empty() {
        return extra;
    }
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
        let mut rules: Vec<&str> = Vec::new();
        for (f, edit) in findings.iter_mut().zip(&offered) {
            if edit.is_some_and(|i| hit.contains(&i)) {
                if !rules.contains(&f.rule.id()) {
                    rules.push(f.rule.id());
                }
                if !opts.fix_signed {
                    f.fixable = false;
                    f.edit = None;
                }
            }
        }
        let verdict = if opts.fix_signed {
            "fixes applied anyway (fix_signed), breaking it"
        } else {
            "fixes withheld"
        };
        extra.push(Finding::new(
            Rule::SignedContent,
            cover.part.clone(),
            format!(
                "{} covers what the fixes for {} would change: {verdict}",
                cover.what,
                rules.join(", ")
            ),
        ));
    }
    extra
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
    for name in ["dkim-signature", "arc-message-signature"] {
        for (_, f) in msg.fields_named(top, name) {
            let signed_names = dkim_header_list(msg.value(top, f));
            let mut ranges: Vec<Range<usize>> = msg
                .fields(top)
                .iter()
                .filter(|g| {
                    let n = String::from_utf8_lossy(msg.name(top, g)).to_ascii_lowercase();
                    signed_names.contains(&n)
                })
                .map(|g| g.start..g.end)
                .collect();
            // The body hash covers everything after the top-level heading.
            ranges.push(top.body.start.min(msg.len)..msg.len);
            let label = if name == "dkim-signature" {
                "a DKIM-Signature"
            } else {
                "an ARC-Message-Signature"
            };
            out.push(Cover {
                what: label.into(),
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
                    what: format!("the multipart/signed part {}", msg.path(e)),
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
                what: format!("the S/MIME part {}", msg.path(e)),
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

/// Lower-case field names of a DKIM `h=` tag.
fn dkim_header_list(value: &[u8]) -> Vec<String> {
    let v = String::from_utf8_lossy(value);
    for tag in v.split(';') {
        let tag: String = tag.chars().filter(|c| !c.is_whitespace()).collect();
        if let Some(list) = tag.strip_prefix("h=") {
            return list
                .split(':')
                .filter(|s| !s.is_empty())
                .map(|s| s.to_ascii_lowercase())
                .collect();
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h_tag_is_read_across_folding() {
        let names = dkim_header_list(
            b" v=1; a=rsa-sha256; d=x.test;\r\n\th=From:To:\r\n\t Content-Type; bh=abc; b=def",
        );
        assert_eq!(names, ["from", "to", "content-type"]);
        assert!(dkim_header_list(b" v=1; d=x").is_empty());
    }

    /// Every signature that covers a fix names the rules of that fix, also when an
    /// earlier signature already withheld it.
    #[test]
    fn each_signature_names_the_rules_it_protects() {
        let raw = b"DKIM-Signature: v=1; d=x.test; h=From:Content-Type; bh=a; b=b\r\n\
ARC-Message-Signature: i=1; d=x.test; h=From:Content-Type; bh=a; b=b\r\n\
Content-Type: message/external-body; access-type=URL; URL=http://x.test/a\r\n\
\r\n\
Content-Type: text/plain\r\n\r\n";
        for fix_signed in [false, true] {
            let opts = Options {
                fix_signed,
                ..Options::default()
            };
            let a = crate::engine::check(raw, &opts);
            let signed: Vec<&str> = a
                .findings
                .iter()
                .filter(|f| f.rule == Rule::SignedContent)
                .map(|f| f.message.as_str())
                .collect();
            assert_eq!(signed.len(), 2, "{signed:?}");
            for m in signed {
                assert!(
                    m.contains("the fixes for extbody-url-unquoted would change"),
                    "{m}"
                );
            }
        }
    }
}
