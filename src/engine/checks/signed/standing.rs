//! Whether a DKIM-Signature or ARC-Message-Signature still protects what it covers: its
//! body hash recomputed here (RFC 6376 §3.7, with its `c=`, `l=` and `a=`; no DNS is
//! needed for that half), and what trusted verifiers recorded about it at this hop.

use std::ops::Range;

use super::verdicts::{HopResults, SignatureId};
use crate::engine::model::mime::Message;
use crate::engine::model::options::Options;
use crate::engine::model::signature::{SignatureKind, Standing, Verdict};
use crate::engine::syntax::dkim::{self, BodyCanon, HashAlg};

/// Body hashes computed for one message at most: each is a pass over the whole body, so
/// 50 signatures with 50 different `l=` values must not cost 50 passes. A signature past
/// it is not known to be broken, and so still protects.
pub(super) const MAX_BODY_HASHES: usize = 8;

/// What a body hash is computed under: canonicalisation, hash function and `l=`.
type HashKey = (BodyCanon, HashAlg, Option<u64>);

/// Judges the header signatures of one message, sharing the work between them: the
/// body hashes already computed and the trusted results of this hop.
pub(super) struct Judge<'m> {
    msg: &'m Message<'m>,
    opts: &'m Options,
    hashes: Vec<(HashKey, dkim::BodyHash)>,
    /// Read at the first signature that needs them.
    hop: Option<HopResults>,
    /// The `d=` of every DKIM-Signature the message has: a result that names only a
    /// domain is about the signature of that domain only when it is the only one.
    domains: Option<Vec<String>>,
}

impl<'m> Judge<'m> {
    pub(super) fn new(msg: &'m Message<'m>, opts: &'m Options) -> Judge<'m> {
        Judge {
            msg,
            opts,
            hashes: Vec::new(),
            hop: None,
            domains: None,
        }
    }

    /// How a log line names the signature whose field value is `value` in the original
    /// message, and its standing.
    pub(super) fn header_signature(
        &mut self,
        kind: SignatureKind,
        value: Range<usize>,
    ) -> (String, Standing) {
        let raw = &self.msg.buffers[0][value];
        let field = match kind {
            SignatureKind::Arc => dkim::SignatureKind::ArcMessage,
            _ => dkim::SignatureKind::Dkim,
        };
        let sig = match dkim::Signature::parse(raw, field) {
            Ok(sig) => sig,
            Err(e) => {
                let name = name_of(kind, None, e.d.as_deref(), e.s.as_deref());
                let id = SignatureId {
                    kind,
                    d: e.d.as_deref(),
                    i: None,
                    b: None,
                };
                let verdict = self.verdict(&id);
                return (name, Standing::Unknown(e.why, verdict));
            }
        };
        let name = name_of(kind, sig.instance, Some(&sig.d), Some(&sig.s));
        let id = SignatureId {
            kind,
            d: Some(&sig.d),
            i: sig.i.as_deref(),
            b: Some(&sig.b),
        };
        let verdict = self.verdict(&id);
        let whole = self.opts.octets_not_given == 0;
        let standing = match self.body_hash(sig.body_canon, sig.algorithm.hash(), sig.l) {
            None if !whole => Standing::Unknown("the body was not seen whole".into(), verdict),
            None => Standing::Unknown(
                format!(
                    "more signatures than the {MAX_BODY_HASHES} body hashes computed per message"
                ),
                verdict,
            ),
            Some(h) => judge_hash(&sig, h, verdict),
        };
        (name, standing)
    }

    /// The trusted verdict of this hop about a signature.
    fn verdict(&mut self, id: &SignatureId) -> Verdict {
        if self.opts.trusted_authserv_ids.is_empty() {
            return Verdict::None;
        }
        let msg = self.msg;
        let hop = self
            .hop
            .get_or_insert_with(|| HopResults::read(msg, &self.opts.trusted_authserv_ids));
        if hop.is_empty() {
            return Verdict::None;
        }
        // Only a result without header.b needs them.
        let domains: &[String] = if hop.names_by_domain() {
            self.domains.get_or_insert_with(|| dkim_domains(msg))
        } else {
            &[]
        };
        hop.verdict(id, domains)
    }

    /// The hash of the message's body as `canon`, `hash` and `l=` make it, computed once
    /// per message for each combination; None when it cannot be computed (the body was
    /// not handed over whole, or too many have been computed).
    fn body_hash(
        &mut self,
        canon: BodyCanon,
        hash: HashAlg,
        l: Option<u64>,
    ) -> Option<&dkim::BodyHash> {
        if self.opts.octets_not_given > 0 {
            return None;
        }
        let key = (canon, hash, l);
        let at = match self.hashes.iter().position(|(k, _)| *k == key) {
            Some(at) => at,
            None if self.hashes.len() >= MAX_BODY_HASHES => return None,
            None => {
                let top = &self.msg.entities[0];
                let body = &self.msg.buffers[0][top.body.start.min(self.msg.len)..self.msg.len];
                self.hashes
                    .push((key, dkim::body_hash(body, canon, hash, l)));
                self.hashes.len() - 1
            }
        };
        Some(&self.hashes[at].1)
    }
}

/// The standing of a parsed signature once its body hash is known.
fn judge_hash(sig: &dkim::Signature, h: &dkim::BodyHash, verdict: Verdict) -> Standing {
    if let Some(l) = sig.l {
        if l > h.canonical_len {
            return Standing::BodyHashBroken(format!(
                "l={l} is longer than the body ({} octets canonicalised: the body was cut after signing)",
                h.canonical_len
            ));
        }
    }
    if h.digest != sig.bh {
        return Standing::BodyHashBroken(
            "body hash does not match (the body changed after signing)".into(),
        );
    }
    match sig.l {
        Some(l) if l < h.canonical_len => Standing::Unknown(
            format!(
                "l={l} signs only the first {l} of {} octets of the body, and an edit there still breaks it",
                h.canonical_len
            ),
            verdict,
        ),
        _ => Standing::Intact(verdict),
    }
}

/// `d=example.com s=s1`, with `i=N` first for an ARC instance; what is unknown is left
/// out.
fn name_of(kind: SignatureKind, instance: Option<u32>, d: Option<&str>, s: Option<&str>) -> String {
    let mut words = Vec::new();
    if let (SignatureKind::Arc, Some(i)) = (kind, instance) {
        words.push(format!("i={i}"));
    }
    if let Some(d) = d {
        words.push(format!("d={d}"));
    }
    if let Some(s) = s {
        words.push(format!("s={s}"));
    }
    if words.is_empty() {
        "(unreadable)".into()
    } else {
        words.join(" ")
    }
}

/// The `d=` of every DKIM-Signature of the top-level heading that has one, lower-cased,
/// read leniently (the tag alone, not the whole signature: a signature too broken to
/// parse still names its domain to a verifier).
fn dkim_domains(msg: &Message) -> Vec<String> {
    let top = &msg.entities[0];
    msg.fields_named(top, "dkim-signature")
        .filter_map(|(_, f)| {
            msg.value(top, f).split(|&b| b == b';').find_map(|tag| {
                let (name, value) = tag.split_at(tag.iter().position(|&b| b == b'=')?);
                (name.trim_ascii() == b"d")
                    .then(|| String::from_utf8_lossy(value[1..].trim_ascii()).to_ascii_lowercase())
            })
        })
        .collect()
}
