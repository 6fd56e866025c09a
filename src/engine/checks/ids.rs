//! Content-ID rules: `content-id-syntax` and `content-id-duplicate`.
//!
//! A Content-ID is a msg-id (RFC 2045 §7, RFC 5322 §3.6.4): `<left@right>`. The checks
//! and the other modules compare identifiers by their addr-spec, the part between the
//! angle brackets with comments and folding whitespace removed, octet by octet
//! (`cid:` URLs name that addr-spec, RFC 2392 §2).
//!
//! The msg-id syntax itself ([`parse_msg_id`], [`addr_spec`]) is in `syntax::msgid`.

use std::hash::{BuildHasher, Hasher};

use crate::engine::model::analysis::{Context, Finding};
use crate::engine::model::mime::{Kind, Message};
use crate::engine::model::rules::{Rule, Severity};
use crate::engine::syntax::ascii::eq_lower;
use crate::engine::syntax::msgid::{
    lenient_addr_spec, parse_msg_id, parse_msg_id_full, plain_msg_id_after, MsgIdError,
};

/// Runs the Content-ID rules over every heading.
pub fn check(cx: &mut Context) {
    // One pass: each Content-ID is parsed once and goes straight from the syntax rule to
    // the duplicate rule (a 10 000-part message spent a third of its analysis parsing
    // them twice, and then kept every id in a vector between two passes). Findings keep
    // their order within each part: a part's own syntax findings come before any
    // duplicate reported on it.
    let msg = cx.msg;
    let mut dups = Duplicates::default();
    // The `@` and right side of the last plain id: the next one is likely to share it.
    let mut at_right: &[u8] = &[];
    for (i, e) in msg.entities.iter().enumerate() {
        // The scan's index of the first Content-ID: the fields before it are not looked
        // at, and a part without one not at all.
        let Some(first_at) = e.cid_field else {
            continue;
        };
        // Its index in the message's fields, read from there without making the
        // heading's slice first.
        let at = e.field_span.start + first_at;
        let Some(f) = msg.all_fields.get(at).filter(|_| at < e.field_span.end) else {
            continue;
        };
        let v = &msg.buf(e)[f.value.clone()];
        // Fields after the first Content-ID: asked here, as the call cost a part whose
        // Content-ID is its last field (most of them) ~50 instructions.
        let later = at + 1 < e.field_span.end;
        // Nearly every Content-ID is plain, `<left@right>` of atext and dots: its
        // addr-spec is a slice of the value, handed on as it is, never a `Result` of a
        // `Cow` moved through the two rules (~17 instructions a part of a 10 000-part
        // message).
        match plain_msg_id_after(v, at_right) {
            Some((id, at)) => {
                at_right = &id[at..];
                if later {
                    check_later_ids(cx, i, first_at);
                }
                dups.check_plain(cx, i, id);
            }
            None => {
                let id = first_id_not_plain(cx, i, v);
                if later {
                    check_later_ids(cx, i, first_at);
                }
                dups.check_owned(cx, i, id);
            }
        }
    }
}

/// The addr-spec of entity `i`'s first Content-ID `v`, one that is not plain: parsed in
/// full, or read leniently (and `content-id-syntax` reported) when it is no msg-id.
#[inline(never)]
fn first_id_not_plain(cx: &mut Context, i: usize, v: &[u8]) -> Vec<u8> {
    match parse_msg_id_full(v) {
        Ok(id) => id.into_owned(),
        Err(why) => {
            // content-id-malformed said it, with what reads it and the repair.
            if !cx.malformed_ids.contains(&i) {
                report_syntax(cx, i, v, true, why);
            }
            lenient_addr_spec(v)
        }
    }
}

/// Reports entity `i`'s unparsable Content-IDs after its first, at `first_at`. A plain
/// loop rather than `fields_named`: its filter closure was inlined in some builds and
/// called in others, ~100 instructions a part either way round.
fn check_later_ids(cx: &mut Context, i: usize, first_at: usize) {
    let msg = cx.msg;
    let e = &msg.entities[i];
    let buf = msg.buf(e);
    for f in msg.fields(e).get(first_at + 1..).unwrap_or(&[]) {
        if !eq_lower(&buf[f.name.clone()], b"content-id") {
            continue;
        }
        let v = &buf[f.value.clone()];
        if let Err(why) = parse_msg_id(v) {
            report_syntax(cx, i, v, false, why);
        }
    }
}

/// `content-id-syntax` for value `v` of entity `i` (`first`: its first Content-ID).
/// Out of line: most parts never get here.
#[cold]
#[inline(never)]
fn report_syntax(cx: &mut Context, i: usize, v: &[u8], first: bool, why: MsgIdError) {
    let mut f = Finding::new(
        Rule::ContentIdSyntax,
        cx.msg.path(&cx.msg.entities[i]),
        format!(
            "Content-ID \"{}\" is not a msg-id <left@right>: {} (RFC 5322 §3.6.4, RFC 2045 §7)",
            crate::engine::syntax::ascii::excerpt(v),
            why.describe()
        ),
    );
    // Gmail's `<ii_…>` and the like: readers match the id as written, so it harms none
    // while every cid: reference resolves (a dangling one may be meant for this part,
    // and keeps the warning).
    if first && (cx.cid_targets.contains(&i) || !cx.cid_dangling) {
        f.severity = Severity::Info;
        f.message.push_str(if cx.cid_targets.contains(&i) {
            "; cid: references resolve to it all the same"
        } else {
            "; no cid: reference depends on it"
        });
    }
    cx.report(f);
}

/// The entity a Content-ID belongs to: the phantom heading of an external-body names the
/// external-body part itself (RFC 2046 §5.2.3).
fn owner(msg: &Message, i: usize) -> usize {
    match (&msg.entities[i].kind, msg.entities[i].parent) {
        (Kind::Phantom, Some(p)) => p,
        _ => i,
    }
}

/// (shared with siblings, the multipart or part that is the scope)
type Scope = (bool, usize);

/// Where equal Content-IDs are allowed or already reported elsewhere: among the direct
/// children of one multipart/alternative (RFC 2045 §7, RFC 2046 §5.1.4) and of one
/// multipart/related (`related-cid-duplicate`). Parts in the same scope share a key.
fn scope(msg: &Message, owner: usize) -> Scope {
    if let Some(p) = msg.entities[owner].parent {
        let ct = &msg.entities[p].ctype;
        if ct.is("multipart", "alternative") || ct.is("multipart", "related") {
            return (true, p);
        }
    }
    (false, owner)
}

/// `content-id-duplicate`, fed each entity's first Content-ID in document order.
#[derive(Default)]
struct Duplicates<'m> {
    /// Each addr-spec seen, with the entity it was first seen on, in the order seen.
    seen: Vec<Seen<'m>>,
    /// A hash table of `seen`: index + 1, 0 for an empty slot; open addressing, linear
    /// probing; 32 bits, as zeroing the table is most of its set-up. Sized when the
    /// first id comes to twice the parts that may follow, as each part gives at most
    /// one id: it never grows again and stays at most half full. foldhash rather than
    /// SipHash: hashing was a third of this rule's cost on a 10 000-part message. The
    /// sender picks the ids, but the seed is random per table, and max_parts bounds even
    /// a full collision. A table of our own rather than a `HashMap` (or hashbrown's
    /// `HashTable`, no cheaper): it needs neither deletion nor growth, and its look-up
    /// inlined cost a 10 000-part message ~60 instructions less a part.
    slots: Vec<u32>,
    hasher: foldhash::fast::RandomState,
    /// The ids that had to be copied (comments or folding inside, or no msg-id at all).
    copies: Vec<Vec<u8>>,
    /// Owners already reported (allocated at the first repeat). Owners and scopes are
    /// only worked out when an id repeats: doing so for every id was a visible cost on
    /// a 10 000-part message.
    reported_owner: Vec<bool>,
}

/// An id in [`Duplicates::seen`]: a slice of the Content-ID's value (a plain one), or
/// one of [`Duplicates::copies`].
struct Seen<'m> {
    hash: u64,
    id: &'m [u8],
    /// Index into `copies`, or [`NOT_COPIED`].
    copy: usize,
    entity: usize,
}

const NOT_COPIED: usize = usize::MAX;

impl<'m> Duplicates<'m> {
    fn check_plain(&mut self, cx: &mut Context<'m, '_>, i: usize, id: &'m [u8]) {
        match self.find(cx.msg.entities.len() - i, id) {
            (_, Ok(first)) => self.repeated(cx, i, first, id),
            (hash, Err(slot)) => self.add(
                slot,
                Seen {
                    hash,
                    id,
                    copy: NOT_COPIED,
                    entity: i,
                },
            ),
        }
    }

    fn check_owned(&mut self, cx: &mut Context<'m, '_>, i: usize, id: Vec<u8>) {
        if id.is_empty() {
            return;
        }
        match self.find(cx.msg.entities.len() - i, &id) {
            (_, Ok(first)) => self.repeated(cx, i, first, &id),
            (hash, Err(slot)) => {
                let copy = self.copies.len();
                self.copies.push(id);
                self.add(
                    slot,
                    Seen {
                        hash,
                        id: &[],
                        copy,
                        entity: i,
                    },
                );
            }
        }
    }

    /// `id`'s hash, and the entity it was first seen on, or else the empty slot for it;
    /// `left`: the entities from this one on, the most ids that can still come.
    #[inline(always)]
    fn find(&mut self, left: usize, id: &[u8]) -> (u64, Result<usize, usize>) {
        if self.slots.len() <= 2 * self.seen.len() {
            self.grow(left);
        }
        // Its octets only: foldhash mixes the length in, `Hash for [u8]` would add it
        // again.
        let mut h = self.hasher.build_hasher();
        h.write(id);
        let hash = h.finish();
        let mask = self.slots.len() - 1;
        let mut at = hash as usize & mask;
        loop {
            let n = self.slots[at] as usize;
            let Some(s) = n.checked_sub(1).map(|k| &self.seen[k]) else {
                return (hash, Err(at));
            };
            let key = match self.copies.get(s.copy) {
                Some(c) => c,
                None => s.id,
            };
            if s.hash == hash && key == id {
                return (hash, Ok(s.entity));
            }
            at = (at + 1) & mask;
        }
    }

    fn add(&mut self, slot: usize, s: Seen<'m>) {
        // Beyond 4 294 967 294 ids (max_parts allows a million) one is left out.
        if let Ok(n) = u32::try_from(self.seen.len() + 1) {
            self.seen.push(s);
            self.slots[slot] = n;
        }
    }

    /// Makes room for `left` more ids, at most half the slots filled. Once per
    /// message: the first id sizes the table for every part that may follow.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, left: usize) {
        let len = (2 * (self.seen.len() + left)).next_power_of_two().max(16);
        self.slots = vec![0; len];
        self.seen.reserve(left);
        let mask = len - 1;
        for (k, s) in self.seen.iter().enumerate() {
            let mut at = s.hash as usize & mask;
            while self.slots[at] != 0 {
                at = (at + 1) & mask;
            }
            self.slots[at] = k as u32 + 1;
        }
    }

    /// Entity `i`'s first Content-ID `id` was first seen on entity `first`.
    fn repeated(&mut self, cx: &mut Context<'m, '_>, i: usize, first: usize, id: &[u8]) {
        let msg = cx.msg;
        let (o, fo) = (owner(msg, i), owner(msg, first));
        if fo == o || scope(msg, fo) == scope(msg, o) {
            return;
        }
        if self.reported_owner.is_empty() {
            self.reported_owner = vec![false; msg.entities.len()];
        }
        if self.reported_owner[o] {
            return;
        }
        self.reported_owner[o] = true;
        report_duplicate(cx, o, fo, id);
    }
}

/// `content-id-duplicate` on owner `o` of `id`, first seen on `fo`.
#[cold]
#[inline(never)]
fn report_duplicate(cx: &mut Context, o: usize, fo: usize, id: &[u8]) {
    let msg = cx.msg;
    let other = msg.path(&msg.entities[fo]);
    let mut f = Finding::new(
        Rule::ContentIdDuplicate,
        msg.path(&msg.entities[o]),
        format!(
            "Content-ID <{}> is also on part {other}; Content-IDs must be unique in the message except among alternatives (RFC 2045 §7, RFC 2392 §2)",
            crate::engine::syntax::ascii::excerpt(id)
        ),
    );
    // Readers differ only in which part a reference or start finds (docs/INTEROP.md);
    // with none naming the id, none is affected.
    if !cx.content_id_used(id, o) {
        f.severity = Severity::Info;
        f.message.push_str("; no cid: reference or start names it");
    }
    cx.report(f);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{check as analyse, Options};

    fn rules_at(raw: &str, rule: Rule) -> Vec<String> {
        analyse(raw.as_bytes(), &Options::default())
            .findings
            .into_iter()
            .filter(|f| f.rule == rule)
            .map(|f| f.part)
            .collect()
    }

    #[test]
    fn msg_ids_that_parse() {
        for (v, want) in [
            (" <foo4*foo1@bar.net>", "foo4*foo1@bar.net"),
            ("<950118.AEB0@XIson.com>", "950118.AEB0@XIson.com"),
            (" (c) < a . b @ x.y > (d)", "a.b@x.y"),
            ("<\"a b\"@x>", "\"a b\"@x"),
            ("<a@[1.2.3.4]>", "a@[1.2.3.4]"),
            ("\r\n <part1.abc@example.com>\r\n", "part1.abc@example.com"),
        ] {
            let got = parse_msg_id(v.as_bytes());
            assert_eq!(got.as_deref(), Ok(want.as_bytes()), "{v}");
        }
    }

    #[test]
    fn msg_ids_that_do_not_parse() {
        for (v, why) in [
            ("", MsgIdError::Empty),
            ("  (only a comment) ", MsgIdError::Empty),
            ("foo@bar", MsgIdError::NoOpeningBracket),
            ("<foo@bar", MsgIdError::NoClosingBracket),
            ("<foobar>", MsgIdError::NoAt),
            ("<@bar>", MsgIdError::EmptyLeft),
            ("<foo@>", MsgIdError::EmptyRight),
            ("<a..b@c>", MsgIdError::BadLeft),
            ("<a b@c>", MsgIdError::BadLeft),
            ("<a@b@c>", MsgIdError::BadRight),
            ("<a@b> x", MsgIdError::TrailingText),
            ("<a@[b>", MsgIdError::BadRight),
            // ':' is not atext: Opera's MHTML ids are not msg-ids.
            ("<op.mhtml.1234@1111:ffff>", MsgIdError::BadRight),
        ] {
            assert_eq!(parse_msg_id(v.as_bytes()), Err(why), "{v:?}");
        }
    }

    #[test]
    fn syntax_rule_fires_and_look_alike_does_not() {
        let bad = "Content-Type: text/plain\nContent-ID: foo@bar\n\nx\n";
        assert_eq!(rules_at(bad, Rule::ContentIdSyntax), ["0"]);
        let good = "Content-Type: text/plain\nContent-ID: <foo@bar>\n\nx\n";
        assert!(rules_at(good, Rule::ContentIdSyntax).is_empty());
    }

    const MIXED: &str = "Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-ID: <x@y>\n\none\n--b\nContent-ID: <x@y>\n\ntwo\n--b--\n";

    #[test]
    fn duplicate_outside_related_fires() {
        assert_eq!(rules_at(MIXED, Rule::ContentIdDuplicate), ["2"]);
        let distinct = MIXED.replacen("<x@y>", "<x@z>", 1);
        assert!(rules_at(&distinct, Rule::ContentIdDuplicate).is_empty());
    }

    #[test]
    fn duplicate_that_nothing_names_is_info() {
        let sev = |raw: &str| -> Vec<Severity> {
            analyse(raw.as_bytes(), &Options::default())
                .findings
                .into_iter()
                .filter(|f| f.rule == Rule::ContentIdDuplicate)
                .map(|f| f.severity)
                .collect()
        };
        // MIXED has no HTML at all: no reader's choice depends on the id.
        assert_eq!(sev(MIXED), [Severity::Info]);
        let html = MIXED.replace(
            "--b--\n",
            "--b\nContent-Type: text/html\n\n<img src=\"cid:x@y\">\n--b--\n",
        );
        assert_eq!(sev(&html), [Severity::Warning]);
        let other = html.replace("cid:x@y", "cid:z@y");
        assert_eq!(sev(&other), [Severity::Info]);
    }

    #[test]
    fn alternatives_and_related_children_may_share() {
        let alt = MIXED.replace("multipart/mixed", "multipart/alternative");
        assert!(rules_at(&alt, Rule::ContentIdDuplicate).is_empty());
        let rel = MIXED.replace("multipart/mixed", "multipart/related");
        assert!(rules_at(&rel, Rule::ContentIdDuplicate).is_empty());
        assert_eq!(rules_at(&rel, Rule::RelatedCidDuplicate), ["2"]);
    }

    /// An id written plainly and the same id written with white space inside (parsed
    /// in full, so kept apart from plain ones) are one id, in either order.
    #[test]
    fn plain_and_parsed_forms_of_one_id_are_duplicates() {
        for (a, b) in [
            ("<x@y>", "< x@y >"),
            ("< x@y >", "<x@y>"),
            ("<x@y>", "<x @y>"),
        ] {
            let raw = MIXED.replacen("<x@y>", a, 1).replacen("<x@y>", b, 1);
            assert_eq!(rules_at(&raw, Rule::ContentIdDuplicate), ["2"], "{a} {b}");
        }
        // Nor does a repeated unparsable id pass unnoticed, nor one that only reads as
        // another's id leniently.
        let raw = MIXED.replace("<x@y>", "<x@y:1>");
        assert_eq!(rules_at(&raw, Rule::ContentIdDuplicate), ["2"]);
        let raw = MIXED.replacen("<x@y>", "<x@y", 1);
        assert_eq!(rules_at(&raw, Rule::ContentIdDuplicate), ["2"]);
    }

    /// Every Content-ID field of a part is checked, not only the first, and in order: the
    /// part's syntax findings come before its duplicate.
    #[test]
    fn later_content_ids_are_checked_in_order() {
        let raw = "Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-ID: <x@y>\n\none\n--b\nContent-ID: <x@y>\nContent-Type: text/plain\ncontent-id: bad\nContent-ID: <z@y>\nContent-ID: (c) x\n\ntwo\n--b--\n";
        let got: Vec<(Rule, String, String)> = analyse(raw.as_bytes(), &Options::default())
            .findings
            .into_iter()
            .filter(|f| matches!(f.rule, Rule::ContentIdSyntax | Rule::ContentIdDuplicate))
            .map(|f| (f.rule, f.part, f.message.chars().take(24).collect()))
            .collect();
        let want = [
            (Rule::ContentIdSyntax, "2", "Content-ID \"bad\" is not "),
            (Rule::ContentIdSyntax, "2", "Content-ID \"(c) x\" is no"),
            (Rule::ContentIdDuplicate, "2", "Content-ID <x@y> is also"),
        ];
        let want: Vec<(Rule, String, String)> = want
            .iter()
            .map(|(r, p, m)| (*r, p.to_string(), m.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn external_body_phantom_id_is_the_parts_own() {
        let raw = "Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: message/external-body; access-type=URL; URL=\"http://x/\"\nContent-ID: <e@x>\n\nContent-ID: <e@x>\n\n--b\nContent-ID: <e@x>\n\n2\n--b--\n";
        // The external-body's own and its phantom's Content-ID are one part's; the
        // third part is a real duplicate.
        assert_eq!(rules_at(raw, Rule::ContentIdDuplicate), ["2"]);
    }

    /// The duplicate table answers as a map would: each id's first entity, whatever the
    /// ids, their number, copies among them, and the table grown at any point (here it
    /// is told one id at a time is left, so it grows again and again).
    #[test]
    fn duplicate_table_finds_each_ids_first_entity() {
        let values: Vec<Vec<u8>> = (0..3000u32)
            .map(|k| format!("p{}@x{}", k.wrapping_mul(2_654_435_761) % 700, k % 3).into_bytes())
            .collect();
        for left in [1, 3000] {
            let mut dups = Duplicates::default();
            let mut want: std::collections::HashMap<&[u8], usize> = Default::default();
            for (i, v) in values.iter().enumerate() {
                let copied = i % 5 == 0;
                let (hash, got) = dups.find(left, v);
                assert_eq!(got.ok(), want.get(&v[..]).copied(), "{i} {left}");
                if let Err(slot) = got {
                    want.insert(v, i);
                    let copy = dups.copies.len();
                    if copied {
                        dups.copies.push(v.clone());
                    }
                    let (id, copy) = if copied {
                        (&[][..], copy)
                    } else {
                        (&v[..], NOT_COPIED)
                    };
                    dups.add(
                        slot,
                        Seen {
                            hash,
                            id,
                            copy,
                            entity: i,
                        },
                    );
                }
            }
            assert_eq!(dups.seen.len(), want.len());
        }
    }

    #[test]
    fn many_parts_with_one_id_is_linear() {
        let mut raw = String::from("Content-Type: multipart/mixed; boundary=b\n\n");
        for _ in 0..5000 {
            raw.push_str("--b\nContent-ID: <same@x>\n\nx\n");
        }
        raw.push_str("--b--\n");
        let t = std::time::Instant::now();
        let n = rules_at(&raw, Rule::ContentIdDuplicate).len();
        assert_eq!(n, 4999);
        assert!(t.elapsed().as_secs() < 20);
    }
}
