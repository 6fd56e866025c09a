//! What the engine is asked to do: limits, scheme policy and the options of a check.

use crate::engine::model::url_rules::UrlRewrite;

/// Structural limits. Exceeding one is a finding, never a panic or a hang.
///
/// Public as `mimeref_milter::engine::Limits`. The configuration's `[limits]` section is
/// another type, `mimeref_milter::Limits`, whose `engine()` gives these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Deepest nesting of multiparts and encapsulated messages analysed.
    pub max_depth: usize,
    /// Most MIME entities analysed per message.
    pub max_parts: usize,
    /// Largest message analysed, in octets (`message-too-large` beyond it).
    pub max_message_size: usize,
}

impl Limits {
    /// These limits for reading the top-level heading alone: no part is descended into.
    pub fn heading_only(&self) -> Limits {
        Limits {
            max_depth: 0,
            max_parts: 1,
            ..self.clone()
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 64,
            max_parts: 20_000,
            max_message_size: 64 * 1024 * 1024,
        }
    }
}

/// URL scheme policy shared by external-body URLs and ContentType: URIs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemePolicy {
    /// When non-empty, only these schemes (lower-case) are allowed.
    pub allow: Vec<String>,
    /// Schemes (lower-case) that are always denied.
    pub deny: Vec<String>,
}

impl Default for SchemePolicy {
    fn default() -> Self {
        SchemePolicy {
            allow: Vec::new(),
            deny: ["file", "javascript", "data", "vbscript"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
        }
    }
}

impl SchemePolicy {
    pub fn denies(&self, scheme: &str) -> bool {
        let s = scheme.to_ascii_lowercase();
        self.deny.contains(&s) || (!self.allow.is_empty() && !self.allow.contains(&s))
    }
}

/// Which signed content a repair may change. Ordered from the most to the least
/// protective: several scopes of one message combine to the smallest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum FixSigned {
    /// Only what no intact signature covers (`fix_signed = false`).
    #[default]
    Never,
    /// Also what a DKIM or ARC signature covers once a trusted verifier recorded its
    /// result at this hop (`fix_signed = "verified"`): the last hop, after the verdict.
    Verified,
    /// Everything, every signature broken (`fix_signed = true`): for a milter placed
    /// before the signer.
    Always,
}

impl FixSigned {
    /// As the configuration file writes it.
    pub fn as_config(self) -> &'static str {
        match self {
            FixSigned::Never => "false",
            FixSigned::Verified => "\"verified\"",
            FixSigned::Always => "true",
        }
    }
}

/// What the engine is asked to do beyond the catalogue defaults.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Options {
    pub limits: Limits,
    pub schemes: SchemePolicy,
    /// Which signatures a repair may change what they cover (`signed`). A DKIM or ARC
    /// signature whose body hash no longer matches protects nothing under any of them.
    pub fix_signed: FixSigned,
    /// The authserv-ids (RFC 8601 §2.5) of the verifiers whose Authentication-Results,
    /// added at this hop, [`FixSigned::Verified`] relies on; compared without case.
    pub trusted_authserv_ids: Vec<String>,
    /// Offer the normalisation of RFC 2231 `URL*n` continuations to RFC 2017 form.
    pub normalize_url_continuations: bool,
    /// Write rewritten external-body URLs as one quoted word, folded only where its line
    /// would pass 998 octets, and offer no fold for `extbody-url-word-too-long` (see
    /// `fold::quote_url_param`). Off (the RFC 2017 form): folded words of at most 40
    /// octets.
    pub whole_url_words: bool,
    /// URL rewrite rules for external-body URLs, in order; the first that matches a URL
    /// rewrites it (`extbody-url-rewritten`).
    pub rewrites: Vec<UrlRewrite>,
    /// Offer the conversion of ANON-FTP and TFTP references to `access-type=URL`.
    pub legacy_to_url: bool,
    /// With `legacy_to_url`, also convert access-type=FTP (which needs a login the URL
    /// cannot carry: the reader is asked for it). Off: never converted.
    pub legacy_ftp_with_login: bool,
    /// Offer to replace a body part whose reference has a denied scheme with a notice
    /// part (the repair of `extbody-url-scheme-denied` and `cturi-uri-denied`).
    pub strip_denied: bool,
    /// Offer, for `part-name-one-field`, the insertion of a whole
    /// `Content-Disposition: attachment; filename=…` where a part listed as an
    /// attachment names its file on Content-Type alone and has no Content-Disposition.
    /// Off: such a part is reported without a repair, since a disposition where there
    /// was none moves the part in some readers (from the body to the attachment list,
    /// or the other way); on, for the reader matrix to rate the insertion.
    pub name_insert_disposition: bool,
    /// Octets of the message the caller did not hand over (e.g. the milter stopped
    /// buffering at its size limit). Non-zero means the message is incomplete: it is
    /// analysed as far as given, `message-too-large` is reported, and no edit is offered
    /// outside the top-level heading.
    pub octets_not_given: u64,
}
