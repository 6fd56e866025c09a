//! `rfc822-encoded`: an encapsulated message sent base64- or quoted-printable-encoded.
//!
//! RFC 2046 §5.2.1 allows only 7bit, 8bit and binary on message/rfc822 (§5.2.2 only
//! 7bit on message/partial), so that a reader can read the encapsulated message as it
//! stands. Outlook and Exchange forwards as attachment, and libraries that encode every
//! attachment alike (a `message/rfc822` attached as bytes), send it base64-encoded:
//! Thunderbird, Roundcube and Zimbra show an empty or undecodable attachment, some
//! servers refuse the message, Postfix warns. message/global (RFC 6532 §3.5) may be
//! encoded; it is reported too, since a reader that takes it for message/rfc822 fails
//! alike.
//!
//! Repair: the part becomes what it can be read as, `application/octet-stream` with a
//! `name` ending in `.eml`: its own name, else the encapsulated message's Subject made
//! a file name, else `forwarded.eml`. Every other parameter stays, and the body, which
//! every reader decodes for an octet stream, is untouched. Not for message/partial (a
//! fragment is no message file), nor where the part's Content-Disposition names a file
//! that is not `.eml` (readers would show that name), nor for an encoding other than
//! base64 and quoted-printable (readers would not decode it), nor on a message's own
//! heading (the whole message would show as one attachment).
//!
//! Never inside multipart/report (RFC 6522): report generators encode the returned
//! message on purpose, and there it is neither reported nor repaired. message/
//! external-body is `extbody-bad-encoding`'s (an error there for any encoding but
//! 7bit), not reported twice.

use crate::engine::model::analysis::{Context, Finding};
use crate::engine::model::mime::{Kind, Message};
use crate::engine::model::rules::Rule;
use crate::engine::syntax::ascii::excerpt;
use crate::engine::syntax::decode::{rfc2047, Encoding};
use crate::engine::syntax::fold::unfold;
use crate::engine::syntax::params::{essence_span, ContentType, Disposition};

/// RFC 5322 §2.1.1 soft line limit: the new `name=` goes on a line of its own past it.
const SOFT_LINE: usize = 78;

/// The longest file name made from a Subject, in characters, before `.eml`.
const SUBJECT_NAME: usize = 60;

/// The name given when the part has none and the message no Subject.
const FALLBACK: &str = "forwarded.eml";

/// Reports every encoded message part outside multipart/report.
pub fn check(cx: &mut Context) {
    let msg = cx.msg;
    for (i, e) in msg.entities.iter().enumerate() {
        // Nearly every part is 7bit: settled before its type is compared.
        if matches!(
            e.encoding,
            Encoding::SevenBit | Encoding::EightBit | Encoding::Binary
        ) || e.ctype.mtype != "message"
            || !matches!(&*e.ctype.subtype, "rfc822" | "global" | "partial")
            || msg
                .ancestors(i)
                .any(|a| msg.entities[a].ctype.is("multipart", "report"))
        {
            continue;
        }
        check_part(cx, i);
    }
}

fn check_part(cx: &mut Context, i: usize) {
    let msg = cx.msg;
    let e = &msg.entities[i];
    let cte = msg
        .field(e, "content-transfer-encoding")
        .map(|f| excerpt(msg.value(e, f).trim_ascii()))
        .unwrap_or_default();
    let rule_of = match &*e.ctype.subtype {
        "partial" => "RFC 2046 §5.2.2: only 7bit",
        "global" => {
            "RFC 6532 §3.5 allows it, but readers that take it for message/rfc822 do not decode it"
        }
        _ => "RFC 2046 §5.2.1: only 7bit, 8bit or binary",
    };
    let mut f = Finding::new(
        Rule::Rfc822Encoded,
        msg.path(e),
        format!(
            "{} with Content-Transfer-Encoding: {cte} ({rule_of}): Thunderbird, Roundcube and Zimbra show an empty or undecodable attachment",
            e.ctype.essence()
        ),
    );
    match repair(cx, i) {
        Ok((edit, name)) => {
            f.message.push_str(&format!(
                "; fix: Content-Type application/octet-stream, name \"{}\"",
                excerpt(name.as_bytes())
            ));
            f = f.with_edit(edit);
            // The name given on Content-Type goes on a Content-Disposition that names
            // no file too, or readers that read only `filename` show a made-up one
            // (part-name-one-field, which judges the part as this repair leaves it).
            if let Some(cd_edit) = disposition_name(cx, i, &name) {
                let mut g = Finding::new(
                    Rule::Rfc822Encoded,
                    msg.path(e),
                    format!(
                        "{} offered as a file: its Content-Disposition names none; fix: filename \"{}\", as on Content-Type",
                        e.ctype.essence(),
                        excerpt(name.as_bytes())
                    ),
                );
                g = g.with_edit(cd_edit);
                cx.report(f);
                cx.report(g);
                return;
            }
        }
        Err(why) => {
            f.message.push_str("; not changed: ");
            f.message.push_str(why);
        }
    }
    cx.report(f);
}

/// The part's new Content-Type, offered: the edit and the name it gives, or why not.
fn repair(cx: &mut Context, i: usize) -> Result<(usize, String), &'static str> {
    let msg = cx.msg;
    let e = &msg.entities[i];
    if e.ctype.subtype == "partial" {
        return Err("a fragment of a split message is no message file");
    }
    if e.parent.is_none() {
        // Retyped, the message itself would show as one attachment in place of its
        // content: more than a repair of how a part is offered.
        return Err("it is the message itself, not a part of it");
    }
    if !matches!(e.encoding, Encoding::Base64 | Encoding::QuotedPrintable) {
        return Err("readers would not decode this encoding either");
    }
    if msg.overflow.parts_at.is_some() {
        // Retyped, the forward's own parts stop counting, and parts past the limit that
        // were never analysed would come into view: one fix must leave nothing to fix.
        return Err("analysis stopped at the parts limit (mime-parts-exceeded)");
    }
    let mut fields = msg.fields_named(e, "content-type");
    let (Some((fi, field)), None) = (fields.next(), fields.next()) else {
        return Err("it has no Content-Type field, or more than one");
    };
    if !e.editable() {
        return Err("the part lies inside an encoded message");
    }
    let value = cx.current_value(e, field).to_vec();
    let ct = ContentType::parse(&value);
    let span = essence_span(&value).filter(|_| ct.is_clean());
    let Some(span) = span else {
        return Err("its Content-Type cannot be read to its end");
    };
    let name = file_name(msg, i)?;
    let keep_name = ct.get_str("name").as_deref() == Some(name.as_str());
    let mut new = value[..span.start].to_vec();
    new.extend_from_slice(b"application/octet-stream");
    let mut at = span.end;
    if !keep_name {
        // Every form of the old name goes (`name=`, `name*=`, `name*0*=`…), each with
        // the `;` before it, and the new one is added last.
        for p in ct.params.iter().filter(|p| p.name == "name") {
            let semi = value[at..p.span.start]
                .iter()
                .rposition(|&b| b == b';')
                .map_or(p.span.start, |s| at + s);
            new.extend_from_slice(&value[at..semi]);
            at = p.span.end;
        }
    }
    let tail_end = value.len()
        - value[at..]
            .iter()
            .rev()
            .take_while(|b| b.is_ascii_whitespace())
            .count();
    new.extend_from_slice(&value[at..tail_end.max(at)]);
    if !keep_name {
        let param = format!("name=\"{}\"", quoted_name(&name));
        let line_start = new.iter().rposition(|&b| b == b'\n').map_or(0, |n| n + 1);
        let name_len = if line_start == 0 {
            field.value.start - field.start
        } else {
            0
        };
        new.push(b';');
        if name_len + (new.len() - line_start) + 1 + param.len() > SOFT_LINE {
            new.extend_from_slice(e.eol());
        }
        new.push(b' ');
        new.extend_from_slice(param.as_bytes());
    }
    new.extend_from_slice(&value[tail_end.max(at)..]);
    let loc = msg.field_loc(e, fi);
    let edit = cx
        .edits
        .rewrite(field.value.clone(), loc, new, Rule::Rfc822Encoded);
    Ok((edit, name))
}

/// The part's single Content-Disposition with `filename="…"` added, when it names no file
/// and the Content-Type repair gives the part a new name: the edit, offered.
fn disposition_name(cx: &mut Context, i: usize, name: &str) -> Option<usize> {
    let msg = cx.msg;
    let e = &msg.entities[i];
    let mut fields = msg.fields_named(e, "content-disposition");
    let ((fi, field), None) = (fields.next()?, fields.next()) else {
        return None;
    };
    if e.ctype.get_str("name").as_deref() == Some(name) {
        return None; // the name was the part's own: the name rules judge its fields
    }
    let value = cx.current_value(e, field).to_vec();
    let d = Disposition::parse(&value);
    if d.kind.is_empty()
        || !d.params.is_clean()
        || d.params.params.iter().any(|p| p.name == "filename")
    {
        return None;
    }
    let param = format!("filename=\"{}\"", quoted_name(name));
    let new = with_param(&value, &param, field.value.start - field.start, e.eol());
    let loc = msg.field_loc(e, fi);
    Some(
        cx.edits
            .rewrite(field.value.clone(), loc, new, Rule::Rfc822Encoded),
    )
}

/// `value` with `; param` added after its last parameter (before trailing white
/// space), on a line of its own where the line would pass [`SOFT_LINE`]; `name_len`:
/// the octets of the field's name and colon before the value.
fn with_param(value: &[u8], param: &str, name_len: usize, eol: &[u8]) -> Vec<u8> {
    let tail_end = value.len()
        - value
            .iter()
            .rev()
            .take_while(|b| b.is_ascii_whitespace())
            .count();
    let mut new = value[..tail_end].to_vec();
    if new.last() == Some(&b';') {
        new.pop();
    }
    let line_start = new.iter().rposition(|&b| b == b'\n').map_or(0, |n| n + 1);
    let before = if line_start == 0 { name_len } else { 0 };
    new.push(b';');
    if before + (new.len() - line_start) + 1 + param.len() > SOFT_LINE {
        new.extend_from_slice(eol);
    }
    new.push(b' ');
    new.extend_from_slice(param.as_bytes());
    new.extend_from_slice(&value[tail_end..]);
    new
}

/// The `.eml` name part `i` is offered as: its own (Content-Disposition `filename`,
/// else Content-Type `name`), `.eml` added where it lacks it; else the encapsulated
/// message's Subject; else [`FALLBACK`]. A Content-Disposition that names another kind
/// of file stops the repair: readers show that name and would open the file by it.
fn file_name(msg: &Message, i: usize) -> Result<String, &'static str> {
    let e = &msg.entities[i];
    // Compared as octets: a name's last four octets need not start a character.
    let is_eml = |n: &str| n.len() > 4 && n.as_bytes()[n.len() - 4..].eq_ignore_ascii_case(b".eml");
    let disposition = msg
        .field(e, "content-disposition")
        .and_then(|f| Disposition::parse(msg.value(e, f)).filename())
        .map(|n| safe_name(&n))
        .filter(|n| !n.is_empty());
    match disposition {
        Some(n) if is_eml(&n) => return Ok(n),
        Some(_) => return Err("its Content-Disposition names a file that is not .eml"),
        None => {}
    }
    let own = e
        .ctype
        .get_str("name")
        .map(|n| safe_name(&n))
        .filter(|n| !n.is_empty());
    if let Some(n) = own {
        return Ok(if is_eml(&n) { n } else { format!("{n}.eml") });
    }
    Ok(subject(msg, i)
        .map(|s| format!("{s}.eml"))
        .unwrap_or_else(|| FALLBACK.to_string()))
}

/// The Subject of the message encapsulated in part `i`, decoded (RFC 2047) and made a
/// file name of at most [`SUBJECT_NAME`] characters; `None` when there is none left.
fn subject(msg: &Message, i: usize) -> Option<String> {
    let e = &msg.entities[i];
    if !matches!(e.kind, Kind::Message) {
        return None;
    }
    let inner = &msg.entities[*msg.children(e).first()?];
    let field = msg.field(inner, "subject")?;
    let text = rfc2047(&unfold(msg.value(inner, field)));
    let name: String = safe_name(&String::from_utf8_lossy(&text))
        .chars()
        .take(SUBJECT_NAME)
        .collect();
    let name = name.trim_end_matches(['.', ' ']).to_string();
    (!name.is_empty()).then_some(name)
}

/// `s` as a file name every system accepts: controls and the characters Windows
/// refuses (`\ / : * ? " < > |`) become `_`, white space runs one space, and no dot or
/// space starts or ends it.
fn safe_name(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut blank = false;
    for c in s.chars() {
        if c.is_whitespace() {
            blank = !out.is_empty();
            continue;
        }
        if blank {
            out.push(' ');
            blank = false;
        }
        out.push(if c.is_control() || "\\/:*?\"<>|".contains(c) {
            '_'
        } else {
            c
        });
    }
    out.trim_matches(['.', ' ']).to_string()
}

/// `name` as the content of a quoted `name=` parameter: as it is when it is printable
/// ASCII ([`safe_name`] has taken out `"` and `\`), else RFC 2047 encoded-words of at
/// most 75 octets, the form readers decode in a file name (RFC 2231 is read by fewer).
fn quoted_name(name: &str) -> String {
    use base64::Engine as _;
    if name.bytes().all(|b| (b' '..=b'~').contains(&b)) {
        return name.to_string();
    }
    // 45 octets make 60 base64 characters: `=?UTF-8?B?` and `?=` bring a word to 72.
    let mut words = Vec::new();
    let mut rest = name;
    while !rest.is_empty() {
        let mut cut = rest.len().min(45);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (word, next) = rest.split_at(cut);
        words.push(format!(
            "=?UTF-8?B?{}?=",
            base64::engine::general_purpose::STANDARD.encode(word)
        ));
        rest = next;
    }
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{check as analyse, Options};

    fn found(raw: &str) -> Vec<(String, bool)> {
        analyse(raw.as_bytes(), &Options::default())
            .findings
            .into_iter()
            .filter(|f| f.rule == Rule::Rfc822Encoded)
            .map(|f| (f.part, f.fixable))
            .collect()
    }

    /// The message with this rule's repair alone: the file-name rules may also repair
    /// the same heading (a `.msg` name copied into Content-Type), which is theirs to test.
    fn fixed(raw: &str) -> String {
        let a = analyse(raw.as_bytes(), &Options::default());
        let out = crate::engine::apply(
            raw.as_bytes(),
            a.edits_for(|f| f.rule == Rule::Rfc822Encoded),
        );
        String::from_utf8(out.unwrap()).unwrap()
    }

    const FORWARD: &str = "Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nsee attached\n--b\nContent-Type: message/rfc822{PARAMS}\nContent-Transfer-Encoding: {CTE}\n{EXTRA}\nU3ViamVjdDogPT91dGYtOD9CP1VrVTZJRkUwSU9LR2tqSXdNalV0TVRFPT89CkZyb206IGFAZXhhbXBsZS5vcmcKCmhpCg==\n--b--\n";

    fn forward(params: &str, cte: &str, extra: &str) -> String {
        FORWARD
            .replace("{PARAMS}", params)
            .replace("{CTE}", cte)
            .replace("{EXTRA}", extra)
    }

    #[test]
    fn the_subject_names_the_file_when_the_part_has_no_name() {
        let raw = forward("", "base64", "");
        assert_eq!(found(&raw), [("2".to_string(), true)]);
        // The Subject is "RE: Q4 →2025-11" (RFC 2047, with an arrow and a colon).
        let out = fixed(&raw);
        assert!(
            out.contains("Content-Type: application/octet-stream;\n name=\"=?UTF-8?B?UkVfIFE0IOKGkjIwMjUtMTEuZW1s?=\"\n"),
            "{out}"
        );
        assert!(out.ends_with("CmhpCg==\n--b--\n"));
    }

    #[test]
    fn an_own_name_wins_and_gets_its_extension() {
        let out = fixed(&forward("; name=\"Weekly report\"", "base64", ""));
        assert!(
            out.contains("Content-Type: application/octet-stream; name=\"Weekly report.eml\"\n"),
            "{out}"
        );
        // A name that ends in .eml is kept as written, RFC 2231 form included.
        let raw = forward("; name*=utf-8''%C3%A9t%C3%A9.eml", "base64", "");
        let out = fixed(&raw);
        // (part-name-rfc2231-only adds its twin to the same field's edit.)
        assert!(
            out.contains("Content-Type: application/octet-stream; name*=utf-8''%C3%A9t%C3%A9.eml"),
            "{out}"
        );
    }

    #[test]
    fn a_disposition_name_that_is_not_eml_stops_the_repair() {
        let raw = forward(
            "",
            "base64",
            "Content-Disposition: attachment; filename=\"mail.msg\"\n",
        );
        assert_eq!(found(&raw), [("2".to_string(), false)]);
        assert_eq!(fixed(&raw), raw);
        let raw = forward(
            "",
            "base64",
            "Content-Disposition: attachment; filename=\"Fwd.eml\"\n",
        );
        assert!(fixed(&raw).contains("octet-stream; name=\"Fwd.eml\"\n"));
    }

    #[test]
    fn allowed_encodings_partial_and_reports_are_left_alone() {
        for cte in ["7bit", "8bit", "binary", "7BIT (plain)"] {
            assert!(found(&forward("", cte, "")).is_empty(), "{cte}");
        }
        let partial = forward("", "base64", "")
            .replace("message/rfc822", "message/partial; id=\"x@y\"; number=1");
        assert_eq!(found(&partial), [("2".to_string(), false)]);
        let uu = forward("", "x-uuencode", "");
        assert_eq!(found(&uu), [("2".to_string(), false)]);
        let report = forward("", "base64", "").replace(
            "multipart/mixed; boundary=b",
            "multipart/report; report-type=delivery-status; boundary=b",
        );
        assert!(found(&report).is_empty());
        let nested = report
            .replace(
                "--b\nContent-Type: text/plain",
                "--b\nContent-Type: multipart/mixed; boundary=c\n\n--c\nContent-Type: text/plain",
            )
            .replace("\n--b--\n", "\n--c--\n--b--\n");
        assert!(found(&nested).is_empty(), "{nested}");
    }

    #[test]
    fn names_are_made_safe_and_short() {
        assert_eq!(safe_name("  a/b:c  \t d?.  "), "a_b_c d_");
        assert_eq!(safe_name("\"quoted\"\\"), "_quoted__");
        assert_eq!(quoted_name("plain.eml"), "plain.eml");
        let long = quoted_name(&"é".repeat(40));
        assert!(long.split(' ').all(|w| w.len() <= 75), "{long}");
        assert_eq!(long.split(' ').count(), 2);
    }
}
