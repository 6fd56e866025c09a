//! The verdicts of this hop: the results that Authentication-Results fields (RFC 8601)
//! with a trusted authserv-id record, and which signature each is about.
//!
//! Only fields above the first Received field count. Neither Postfix nor Sendmail shows
//! a milter its own Received field, and a verifier milter before this one inserts its
//! field at the top: so a field above every Received field was added at this hop, or
//! forged at the top by the client (which the MTA must strip before the milters run:
//! the recipe in docs/MTA.md). A field below a Received field arrived from outside, whatever
//! id it claims. A message file read by `check` is read the same way: the delivering
//! MTA's own Received field lies between a field its verifier added and the client's.

use crate::engine::model::mime::Message;
use crate::engine::model::signature::{SignatureKind, Verdict};
use crate::engine::syntax::ascii::eq_lower;
use crate::engine::syntax::auth_results;

/// One result a trusted field records, with what it says about the signature.
#[derive(Debug)]
struct HopResult {
    authserv_id: String,
    /// `dkim` or `arc`, lower-cased.
    method: String,
    result: String,
    /// `header.d`, `header.i`, `header.b` (RFC 6008): the signature it is about.
    d: Option<String>,
    i: Option<String>,
    b: Option<String>,
}

/// What a result is matched against: a DKIM or ARC signature.
pub(super) struct SignatureId<'a> {
    pub kind: SignatureKind,
    pub d: Option<&'a str>,
    pub i: Option<&'a str>,
    /// The `b=` tag without white space.
    pub b: Option<&'a str>,
}

/// The dkim and arc results of the trusted Authentication-Results fields of this hop.
#[derive(Debug, Default)]
pub(super) struct HopResults(Vec<HopResult>);

impl HopResults {
    /// Reads the top-level fields down to the first Received field. A field that does
    /// not parse counts for nothing.
    pub(super) fn read(msg: &Message, trusted: &[String]) -> HopResults {
        let mut out = Vec::new();
        let Some(top) = msg.entities.first() else {
            return HopResults(out);
        };
        for f in msg.fields(top) {
            let name = msg.name(top, f);
            if eq_lower(name, b"received") {
                break;
            }
            if !eq_lower(name, b"authentication-results") {
                continue;
            }
            let value = msg.value(top, f);
            if !may_name(value, trusted) {
                continue;
            }
            let Some(ar) = auth_results::parse(value) else {
                continue;
            };
            let id = ar.authserv_id.to_ascii_lowercase();
            if !trusted.contains(&id) {
                continue;
            }
            for r in &ar.results {
                if r.method != "dkim" && r.method != "arc" {
                    continue;
                }
                out.push(HopResult {
                    authserv_id: id.clone(),
                    method: r.method.clone(),
                    result: r.result.clone(),
                    d: r.prop("header", "d").map(str::to_string),
                    i: r.prop("header", "i").map(str::to_string),
                    b: r.prop("header", "b").map(str::to_string),
                });
            }
        }
        HopResults(out)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Some DKIM result names its signature without `header.b`: matching it needs the
    /// domains of every signature.
    pub(super) fn names_by_domain(&self) -> bool {
        self.0.iter().any(|r| r.method == "dkim" && r.b.is_none())
    }

    /// What the trusted results say about one signature; `domains`: the `d=` of every
    /// DKIM-Signature of the message, lower-cased.
    pub(super) fn verdict(&self, sig: &SignatureId, domains: &[String]) -> Verdict {
        // Each different `method=result` once, with the first id that recorded it.
        let mut said: Vec<(&str, String)> = Vec::new();
        for r in self.0.iter().filter(|r| r.is_about(sig, domains)) {
            let what = format!("{}={}", r.method, r.result);
            if !said.iter().any(|(_, w)| *w == what) {
                said.push((&r.authserv_id, what));
            }
        }
        let mut shown = said.iter().map(|(id, what)| format!("{id}:{what}"));
        match said.len() {
            0 => Verdict::None,
            1 => Verdict::Taken(shown.next().unwrap_or_default()),
            _ => Verdict::Disagree(shown.collect::<Vec<_>>().join(", ")),
        }
    }
}

impl HopResult {
    /// Whether this result is about `sig`. An ARC result is about every
    /// ARC-Message-Signature (the chain is judged whole). A DKIM result names its
    /// signature by `header.b`, a prefix of `b=` (RFC 6008), or, without it, by
    /// `header.d`/`header.i` when the message has only one signature of that domain.
    fn is_about(&self, sig: &SignatureId, domains: &[String]) -> bool {
        match sig.kind {
            SignatureKind::Arc => return self.method == "arc",
            SignatureKind::Dkim if self.method == "dkim" => {}
            _ => return false,
        }
        let Some(d) = sig.d else {
            return false;
        };
        let d_matches = self.d.as_deref().is_none_or(|x| x.eq_ignore_ascii_case(d));
        let i_matches = match (&self.i, sig.i) {
            (None, _) => true,
            (Some(x), Some(i)) => same_identity(x, i),
            (Some(x), None) => same_identity(x, &format!("@{d}")),
        };
        if !d_matches || !i_matches {
            return false;
        }
        match (&self.b, sig.b) {
            (Some(x), Some(b)) => !x.is_empty() && b.starts_with(x.as_str()),
            (Some(_), None) => false,
            (None, _) => {
                (self.d.is_some() || self.i.is_some())
                    && domains.iter().filter(|x| x.eq_ignore_ascii_case(d)).count() == 1
            }
        }
    }
}

/// Whether a field's value may carry one of the `trusted` ids (lower case): one of them
/// is written before its first `;`, where the authserv-id goes. Most fields of a
/// message are other hosts' (Gmail's, a list's), and a parse costs ~10,000
/// instructions. A trusted field that this skips could only be one written with
/// escapes or a `;` in a comment before its id, and skipping it only ever withholds.
fn may_name(value: &[u8], trusted: &[String]) -> bool {
    let head = value.split(|&b| b == b';').next().unwrap_or(value);
    trusted
        .iter()
        .any(|id| head.windows(id.len()).any(|w| eq_lower(w, id.as_bytes())))
}

/// Two DKIM identities (`[local-part]@domain`) are the same: the local part as written,
/// the domain without case.
fn same_identity(a: &str, b: &str) -> bool {
    match (a.rsplit_once('@'), b.rsplit_once('@')) {
        (Some((la, da)), Some((lb, db))) => la == lb && da.eq_ignore_ascii_case(db),
        _ => a.eq_ignore_ascii_case(b),
    }
}
