//! What each signature of a message made of the repairs under it: whether it still
//! protects what it covers, and whether a repair is made or withheld there and why. The
//! analysis keeps one record per signature that covers an edit on offer; the log line,
//! the metrics and `survey` read them.

use std::fmt;

use crate::engine::model::options::FixSigned;

/// What signs the content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SignatureKind {
    /// A DKIM-Signature field (RFC 6376).
    Dkim,
    /// An ARC-Message-Signature field (RFC 8617).
    Arc,
    /// A multipart/signed part (RFC 1847): OpenPGP or S/MIME detached.
    MultipartSigned,
    /// An application/pkcs7-mime part (S/MIME).
    Smime,
}

/// What is true of a signature, whatever the configuration says.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "standing", content = "detail")]
pub enum Standing {
    /// Its body hash no longer matches the body (or its `l=` is longer than the body):
    /// it fails for every verifier already, so it protects nothing. Why, in one line.
    BodyHashBroken(String),
    /// Its body hash matches.
    Intact(Verdict),
    /// Whether it still holds cannot be told here (why), e.g. it does not parse, names
    /// an algorithm this engine does not know, or its `l=` leaves part of the body
    /// unsigned.
    Unknown(String, Verdict),
    /// A cryptographic part (multipart/signed, S/MIME): no DKIM verdict touches it.
    Cms,
}

impl Standing {
    /// Whether the edits under a signature of this kind and standing are made, under
    /// `fix_signed`.
    pub fn decision(&self, kind: SignatureKind, mode: FixSigned) -> Result<Lift, Withheld> {
        let verdict = match self {
            Standing::BodyHashBroken(_) => return Ok(Lift::BodyHashBroken),
            Standing::Cms if mode == FixSigned::Always => return Ok(Lift::FixSigned),
            Standing::Cms if kind == SignatureKind::Smime => return Err(Withheld::Smime),
            Standing::Cms => return Err(Withheld::MultipartSigned),
            _ if mode == FixSigned::Always => return Ok(Lift::FixSigned),
            Standing::Intact(v) | Standing::Unknown(_, v) => v,
        };
        match (verdict, mode) {
            (Verdict::Taken(_), FixSigned::Verified) => Ok(Lift::Verified),
            (Verdict::Taken(_), _) => Err(Withheld::NotEnabled),
            (Verdict::Disagree(_), _) => Err(Withheld::Disagree),
            (Verdict::None, _) if matches!(self, Standing::Unknown(..)) => Err(Withheld::Unknown),
            (Verdict::None, _) => Err(Withheld::NoVerdict),
        }
    }
}

/// What trusted verifiers recorded about a DKIM or ARC signature at this hop, in
/// Authentication-Results fields above the first Received field.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "verdict", content = "by")]
pub enum Verdict {
    /// No trusted field records a result for it.
    None,
    /// `authserv-id:method=result`, e.g. `mx.example.org:dkim=pass`: every trusted
    /// result for it says the same.
    Taken(String),
    /// Trusted fields record different results for it (each named).
    Disagree(String),
}

/// Why a repair under a signature is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Lift {
    /// The signature's body hash no longer matches: it protects nothing.
    BodyHashBroken,
    /// A trusted verifier recorded its result at this hop (`fix_signed = "verified"`).
    Verified,
    /// `fix_signed = true`: the milter runs before the signer.
    FixSigned,
}

/// Why a repair under a signature is withheld.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Withheld {
    /// The signature holds and no trusted verifier recorded a result for it here.
    NoVerdict,
    /// A trusted verdict is there, but `fix_signed` is false: `"verified"` would repair.
    NotEnabled,
    /// Trusted fields disagree about it.
    Disagree,
    /// Whether it holds cannot be told, and no trusted verdict lifts it.
    Unknown,
    /// A multipart/signed part.
    MultipartSigned,
    /// An S/MIME part.
    Smime,
}

impl Lift {
    /// The metrics' `reason` label and the survey's word.
    pub fn reason(self) -> &'static str {
        match self {
            Lift::BodyHashBroken => "bh-broken",
            Lift::Verified => "verified",
            Lift::FixSigned => "fix-signed",
        }
    }
}

impl Withheld {
    /// The metrics' `reason` label and the survey's word.
    pub fn reason(self) -> &'static str {
        match self {
            Withheld::NoVerdict => "no-verdict",
            Withheld::NotEnabled => "not-enabled",
            Withheld::Disagree => "disagree",
            Withheld::Unknown => "unknown",
            Withheld::MultipartSigned => "multipart-signed",
            Withheld::Smime => "smime",
        }
    }

    /// Every reason, in the order survey lists them.
    pub const ALL: [Withheld; 6] = [
        Withheld::NoVerdict,
        Withheld::NotEnabled,
        Withheld::Disagree,
        Withheld::Unknown,
        Withheld::MultipartSigned,
        Withheld::Smime,
    ];
}

/// One signature that covers at least one edit on offer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Signature {
    pub kind: SignatureKind,
    /// How a log line names it: `d=example.com s=s1`, `i=1 d=example.com s=arc`, or the
    /// part path of a cryptographic part.
    pub name: String,
    /// Part path of what it belongs to (`0` for header signatures).
    pub part: String,
    pub standing: Standing,
    /// Under the options of the analysis: made (why) or withheld (why).
    pub decision: Result<Lift, Withheld>,
    /// The edits on offer it covers: indexes into `Analysis::edits`.
    #[serde(skip)]
    pub edits: Vec<usize>,
}

impl Signature {
    /// What a log line says a repair under it relied on: `verified=mx.example.org:dkim=pass`,
    /// `bh-broken=d=example.com`, `fix-signed`; None for a withheld one.
    pub fn relied_on(&self) -> Option<String> {
        match (self.decision, &self.standing) {
            (Ok(Lift::Verified), Standing::Intact(Verdict::Taken(v)))
            | (Ok(Lift::Verified), Standing::Unknown(_, Verdict::Taken(v))) => {
                Some(format!("verified={v}"))
            }
            (Ok(Lift::BodyHashBroken), _) => Some(format!("bh-broken={}", self.domain_name())),
            (Ok(l), _) => Some(l.reason().to_string()),
            (Err(_), _) => None,
        }
    }

    /// `d=…` of a header signature (its name's first word that starts so), else its
    /// name.
    fn domain_name(&self) -> &str {
        self.name
            .split(' ')
            .find(|w| w.starts_with("d="))
            .unwrap_or(&self.name)
    }
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            SignatureKind::Dkim => write!(f, "the DKIM-Signature {}", self.name),
            SignatureKind::Arc => write!(f, "the ARC-Message-Signature {}", self.name),
            SignatureKind::MultipartSigned => write!(f, "the multipart/signed part {}", self.name),
            SignatureKind::Smime => write!(f, "the S/MIME part {}", self.name),
        }
    }
}
