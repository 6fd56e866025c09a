//! Findings, the analysis that collects them, and the state the checks share.

use std::collections::{HashMap, HashSet};

use crate::engine::model::edit::{Edit, EditSet};
use crate::engine::model::mime;
use crate::engine::model::options::Options;
use crate::engine::model::rules::{Rule, Severity};

/// One finding of one rule at one place.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    pub rule: Rule,
    /// IMAP-style part path (`0` = top-level heading, `2.1.3`, `2.0` = heading of the
    /// message encapsulated in part 2).
    pub part: String,
    pub severity: Severity,
    /// Whether an edit that repairs this finding is on offer (see `edit`).
    pub fixable: bool,
    pub message: String,
    /// Index into [`Analysis::edits`] of the edit that repairs this finding.
    #[serde(skip)]
    pub edit: Option<usize>,
}

impl Finding {
    pub fn new(rule: Rule, part: impl AsRef<str>, message: impl Into<String>) -> Self {
        Finding {
            rule,
            part: part.as_ref().to_owned(),
            severity: rule.severity(),
            fixable: false,
            message: message.into(),
            edit: None,
        }
    }

    pub fn with_edit(mut self, edit: usize) -> Self {
        self.fixable = true;
        self.edit = Some(edit);
        self
    }
}

/// The result of analysing one message.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Analysis {
    pub findings: Vec<Finding>,
    /// Edits on offer, at most one per header field; findings point at them.
    pub edits: Vec<Edit>,
    /// Parts of the message that an HTML body shows by reference (an image, a
    /// background, a style sheet): the message has inline images when this is not 0.
    #[serde(skip)]
    pub shown_parts: usize,
    /// Every signature that covers an edit on offer, and whether its edits are made.
    pub signatures: Vec<crate::engine::model::signature::Signature>,
}

impl Analysis {
    /// The signatures that cover a repair on offer are all DKIM or ARC signatures whose
    /// body hash no longer matches (at least one): nothing the repairs change is
    /// protected, whatever `fix_signed` says.
    pub fn broken_signatures(&self) -> bool {
        use crate::engine::model::signature::Standing;
        !self.signatures.is_empty()
            && self
                .signatures
                .iter()
                .all(|s| matches!(s.standing, Standing::BodyHashBroken(_)))
    }

    /// The edits that repair at least one of the findings `wanted` says yes to. An edit
    /// that changes a reference (`Edit::requires`) also needs a wanted finding of that
    /// rule, and one that rides on another (`Edit::rides_on`) that other edit; an edit inside a chosen part replacement is dropped (the part is gone).
    /// Returned in message order, never overlapping.
    pub fn edits_for(&self, mut wanted: impl FnMut(&Finding) -> bool) -> Vec<&Edit> {
        self.edits_where(|i| wanted(&self.findings[i]))
    }

    /// [`edits_for`](Self::edits_for) with the findings named by their index in
    /// `findings`: for a caller that already decided each finding.
    pub fn edits_where(&self, mut wanted: impl FnMut(usize) -> bool) -> Vec<&Edit> {
        let mut chosen = vec![false; self.edits.len()];
        let mut gate = vec![false; self.edits.len()];
        for (n, f) in self.findings.iter().enumerate() {
            if let Some(i) = f.edit.filter(|&i| i < self.edits.len()) {
                if wanted(n) {
                    chosen[i] = true;
                    if self.edits[i].requires == Some(f.rule) {
                        gate[i] = true;
                    }
                }
            }
        }
        let made: Vec<bool> = self
            .edits
            .iter()
            .enumerate()
            .map(|(i, e)| chosen[i] && (e.requires.is_none() || gate[i]))
            .collect();
        let mut out: Vec<&Edit> = self
            .edits
            .iter()
            .enumerate()
            .filter(|&(i, e)| made[i] && e.rides_on.is_none_or(|j| made.get(j) == Some(&true)))
            .map(|(_, e)| e)
            .collect();
        // Outer ranges first, so that one pass drops everything inside a part.
        out.sort_by_key(|e| (e.range.start, std::cmp::Reverse(e.range.end)));
        let mut kept: Vec<&Edit> = Vec::with_capacity(out.len());
        for e in out {
            if kept.last().is_some_and(|k| e.range.start < k.range.end) {
                continue;
            }
            kept.push(e);
        }
        kept
    }
}

/// Where a reference of an HTML part leads, as the `html` check resolved it; the rules
/// of what readers show (`checks::inline`) read these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The part whose Content-ID every reader matches; `in_related`: found in an
    /// enclosing multipart/related (else by RFC 2392's message-wide scope, with no
    /// multipart/related around the reference).
    ContentId { at: usize, in_related: bool },
    /// Only a lenient reading of these parts' Content-IDs matches (more than one:
    /// ambiguous).
    Lenient(Vec<usize>),
    /// Only this part's `Content-Location: cid:` matches.
    CidLocation(usize),
    /// Nothing matches; these parts are what the reference was likely meant for.
    Candidates(Vec<usize>),
    /// The part whose resolved Content-Location, in the same or an enclosing
    /// multipart/related, the resolved reference equals (RFC 2557 §8.2).
    Location(usize),
    /// Nothing.
    Nothing,
}

/// Whether a reference found at `place` (`tag@attribute`, as the scanner names it)
/// loads what it names into the view (an image, a background, a style sheet, a frame)
/// rather than offering it as a link to follow.
pub fn place_loads(place: &str) -> bool {
    let (tag, attr) = place.split_once('@').unwrap_or((place, ""));
    !matches!(
        (tag, attr),
        ("a" | "area", "href") | (_, "action" | "cite" | "longdesc" | "codebase")
    )
}

/// One reference of a text/html part to a part of its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The text/html part.
    pub html: usize,
    /// `tag@attribute` (or `style` for a style sheet), as the scanner names it.
    pub place: String,
    pub url: String,
    /// For a `cid:` URL, its id as written and %-decoded (RFC 2392 §2).
    pub cid: Option<(String, String)>,
    pub target: Target,
    /// The HTML part lies in a multipart/related (of its own message).
    pub in_related: bool,
}

impl Reference {
    /// `place "url" in part P`, as findings about the part it leads to name it.
    pub fn describe(&self, msg: &mime::Message) -> String {
        format!(
            "{} \"{}\" in part {}",
            self.place,
            crate::engine::syntax::ascii::clip(&self.url),
            msg.path(&msg.entities[self.html])
        )
    }

    /// Whether a reader loads what the reference names into the view (an image, a
    /// background, a style sheet, a frame) rather than offering it as a link to follow.
    pub fn loads(&self) -> bool {
        place_loads(&self.place)
    }

    /// The part it leads to when exactly one does.
    pub fn part(&self) -> Option<usize> {
        match &self.target {
            Target::ContentId { at, .. } | Target::CidLocation(at) | Target::Location(at) => {
                Some(*at)
            }
            Target::Lenient(v) | Target::Candidates(v) if v.len() == 1 => Some(v[0]),
            _ => None,
        }
    }
}

/// What the `html` check saw of one text/html part beyond its references to parts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HtmlPart {
    pub idx: usize,
    /// The document's own `<base href>`, if any.
    pub own_base: Option<String>,
    /// Relative references that lead to no part of the message (at most a few kept),
    /// and how many there were.
    pub relative: Vec<String>,
    pub relative_count: usize,
    /// References that lead to no part and to no host a recipient can reach, or that
    /// carry what they show (`data:`), each URL once (see `syntax::unreachable`); the
    /// rules of references that lead nowhere (`checks::refs`) read these.
    pub outside: Vec<OutsideRef>,
}

/// A reference of a text/html part to something that is neither a part of its message
/// nor on the network.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutsideRef {
    /// `tag@attribute`, as [`Reference::place`]: where an image or a style sheet is
    /// loaded from, the place it was first found there.
    pub place: String,
    /// The URL as written, cut after [`OutsideRef::URL_KEPT`] octets: a `data:` URL
    /// may be megabytes, and only its start is ever read.
    pub url: String,
}

impl OutsideRef {
    pub const URL_KEPT: usize = 256;
}

/// The Content-IDs something names, per message (by its heading's entity).
#[derive(Debug, Default)]
struct UsedIds {
    /// (message, addr-spec) named by a `cid:` reference or a `start`.
    ids: HashSet<(usize, Vec<u8>)>,
    /// Messages with a style sheet that mentions `cid:`: every id counts as used there.
    css: HashSet<usize>,
}

/// Findings of one rule listed per part before the rest are only counted: a heading of a
/// million bad Content-IDs, or an HTML body of a million dangling `cid:` links, must not
/// cost a million messages (hundreds of MB). Findings that carry an edit are always
/// kept, so every fix stays on offer.
pub const MAX_FINDINGS_PER_RULE: usize = 1000;

/// State shared by the checks of one analysis.
pub(crate) struct Context<'m, 'a> {
    pub msg: &'m mime::Message<'a>,
    pub opts: &'m Options,
    pub findings: Vec<Finding>,
    pub edits: EditSet,
    /// Findings reported so far, by rule and part.
    per_place: HashMap<(Rule, String), usize>,
    /// Entities that some `cid:` reference in text/html resolves to (by Content-ID, or
    /// by a `Content-Location: cid:`), and whether some `cid:` reference resolves to
    /// nothing: they tell whether a Content-ID's bad syntax affects a reader.
    pub cid_targets: HashSet<usize>,
    pub cid_dangling: bool,
    /// Every `cid:` reference of text/html: (the HTML part, the id as written, the id
    /// %-decoded). With `cid_refs_complete` false some HTML part was not read whole (too
    /// large, or too many references), so no Content-ID can be called unreferenced.
    pub cid_refs: Vec<(usize, String, String)>,
    pub cid_refs_complete: bool,
    /// Every reference of text/html to a part of the message (`cid:` ones whatever they
    /// lead to, Content-Location ones that lead to a part), in document order.
    pub refs: Vec<Reference>,
    /// Each text/html part read, in document order.
    pub html_parts: Vec<HtmlPart>,
    /// Entities whose Content-ID `content-id-malformed` reported: `content-id-syntax`
    /// does not report the same value again.
    pub malformed_ids: HashSet<usize>,
    /// Parts whose Content-Type `ref-image-type` repairs, with the media type it
    /// writes and its edit: the rules of what readers show of an image
    /// (`checks::inline`) judge the part as that repair leaves it.
    pub retyped: HashMap<usize, (&'static str, usize)>,
    used_ids: std::cell::OnceCell<UsedIds>,
}

/// The heading of the message holding entity `i` (0, or an encapsulated `N.0`): a
/// `cid:` reference does not leave its message (RFC 2392 §2).
fn message_root(msg: &mime::Message, i: usize) -> usize {
    let mut root = i;
    for a in msg.ancestors(i) {
        if matches!(
            msg.entities[a].kind,
            mime::Kind::Message | mime::Kind::ExternalBody
        ) {
            break;
        }
        root = a;
    }
    root
}

/// Says on the last listed finding of a rule how many more were only counted.
fn note_unlisted(findings: &mut [Finding], per_place: &HashMap<(Rule, String), usize>) {
    if !per_place.values().any(|&n| n > MAX_FINDINGS_PER_RULE) {
        return;
    }
    let mut listed: HashMap<(Rule, String), usize> = HashMap::new();
    for f in findings.iter() {
        *listed.entry((f.rule, f.part.clone())).or_default() += 1;
    }
    for f in findings.iter_mut().rev() {
        let key = (f.rule, f.part.clone());
        let (Some(&total), Some(shown)) = (per_place.get(&key), listed.get_mut(&key)) else {
            continue;
        };
        if total > *shown {
            f.message.push_str(&format!(
                " (and {} more like it, not listed)",
                total - *shown
            ));
            *shown = total;
        }
    }
}

impl<'m, 'a> Context<'m, 'a> {
    pub(crate) fn new(msg: &'m mime::Message<'a>, opts: &'m Options) -> Self {
        Context {
            msg,
            opts,
            findings: Vec::new(),
            edits: EditSet::default(),
            per_place: HashMap::new(),
            cid_targets: HashSet::new(),
            cid_dangling: false,
            cid_refs: Vec::new(),
            cid_refs_complete: true,
            refs: Vec::new(),
            html_parts: Vec::new(),
            malformed_ids: HashSet::new(),
            retyped: HashMap::new(),
            used_ids: std::cell::OnceCell::new(),
        }
    }

    /// The value of field `f` of entity `e` as the repairs made so far leave it (the
    /// original bytes where none touched it): later checks judge what earlier ones made.
    pub fn current_value(&self, e: &mime::Entity, f: &mime::Field) -> &[u8] {
        self.edits
            .pending(&f.value)
            .unwrap_or_else(|| self.msg.value(e, f))
    }

    /// Whether a reader's choice can depend on which part carries Content-ID `id`
    /// (addr-spec octets) in the message that holds entity `at`: a `cid:` reference of
    /// that message names it, a multipart/related `start` there names it, or not every
    /// reference could be read. Run after `checks::html`, which collects the references.
    pub fn content_id_used(&self, id: &[u8], at: usize) -> bool {
        if !self.cid_refs_complete {
            return true;
        }
        let home = message_root(self.msg, at);
        let used = self.used_ids.get_or_init(|| self.ids_named());
        used.css.contains(&home) || used.ids.contains(&(home, id.to_vec()))
    }

    /// What names Content-IDs in each message, built once per analysis: a message of
    /// thousands of parts asks for every one of them.
    fn ids_named(&self) -> UsedIds {
        let msg = self.msg;
        let mut used = UsedIds::default();
        for (h, raw, dec) in &self.cid_refs {
            let home = message_root(msg, *h);
            used.ids.insert((home, raw.as_bytes().to_vec()));
            used.ids.insert((home, dec.as_bytes().to_vec()));
        }
        for (i, e) in msg.entities.iter().enumerate() {
            if e.ctype.is("multipart", "related") {
                if let Some(s) = e.ctype.get("start") {
                    let id = crate::engine::syntax::msgid::addr_spec(&s.value);
                    used.ids.insert((message_root(msg, i), id));
                }
            } else if e.ctype.is("text", "css")
                && matches!(e.kind, mime::Kind::Leaf)
                // A stylesheet may name a part by cid: too; those references are not
                // followed, so one that mentions cid: at all counts as using every id.
                && crate::engine::syntax::decode::transfer_decode(msg.body(e), e.encoding)
                    .windows(4)
                    .any(|w| w.eq_ignore_ascii_case(b"cid:"))
            {
                used.css.insert(message_root(msg, i));
            }
        }
        used
    }

    /// The findings, each rule's count noted where some were only counted, the edits
    /// and the number of parts HTML shows by reference.
    pub(crate) fn finish(self) -> (Vec<Finding>, EditSet, usize) {
        let shown: HashSet<usize> = self
            .refs
            .iter()
            .filter(|r| r.loads())
            .filter_map(Reference::part)
            .collect();
        let mut findings = self.findings;
        note_unlisted(&mut findings, &self.per_place);
        (findings, self.edits, shown.len())
    }

    pub fn report(&mut self, f: Finding) {
        let n = self.per_place.entry((f.rule, f.part.clone())).or_default();
        *n += 1;
        if *n > MAX_FINDINGS_PER_RULE && f.edit.is_none() {
            return;
        }
        self.findings.push(f);
    }
}
