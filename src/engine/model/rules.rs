//! The rule catalogue of `RULES.md` as code. Rule ids are public interface (logs, report
//! header, JSON, metrics labels, policy keys): add rules, never rename one.

use std::fmt;

/// How bad a finding is by default; policy, not severity, decides what happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }

    pub fn parse(s: &str) -> Option<Severity> {
        [Severity::Info, Severity::Warning, Severity::Error]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

macro_rules! rules {
    ($( $variant:ident = $id:literal, $sev:ident, $fixable:literal; )*) => {
        /// One rule of the catalogue.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Rule { $( $variant, )* }

        impl Rule {
            /// Every rule, in catalogue order.
            pub const ALL: &'static [Rule] = &[ $( Rule::$variant, )* ];

            /// The stable rule id, e.g. `extbody-url-word-too-long`.
            pub fn id(self) -> &'static str {
                match self { $( Rule::$variant => $id, )* }
            }

            pub fn severity(self) -> Severity {
                match self { $( Rule::$variant => Severity::$sev, )* }
            }

            /// Whether the engine has a repair for this rule at all. A given finding may
            /// still be unfixable (see `Finding::fixable`), e.g. inside an encoded part.
            pub fn has_fix(self) -> bool {
                match self { $( Rule::$variant => $fixable, )* }
            }
        }
    };
}

rules! {
    // message/external-body (RFC 2046 §5.2.3, RFC 2017)
    ExtbodyAccessTypeMissing = "extbody-access-type-missing", Error, false;
    ExtbodyParamMissing = "extbody-param-missing", Error, false;
    ExtbodyUrlUnquoted = "extbody-url-unquoted", Warning, true;
    ExtbodyUrlUnencoded = "extbody-url-unencoded", Warning, true;
    ExtbodyUrlWordTooLong = "extbody-url-word-too-long", Warning, true;
    ExtbodyUrlContinuation = "extbody-url-continuation", Info, true;
    ExtbodyUrlConflict = "extbody-url-conflict", Error, false;
    ExtbodyUrlInvalid = "extbody-url-invalid", Error, false;
    ExtbodyUrlNotRetrieval = "extbody-url-not-retrieval", Error, false;
    ExtbodyUrlSchemeDenied = "extbody-url-scheme-denied", Error, true; // a rewrite rule, or a strip (strip_denied)
    ExtbodyLegacyAccessType = "extbody-legacy-access-type", Info, true; // conversion to access-type=URL when enabled
    ExtbodyUnknownAccessType = "extbody-unknown-access-type", Info, false;
    ExtbodyBadEncoding = "extbody-bad-encoding", Error, false;
    ExtbodyInnerContentIdMissing = "extbody-inner-content-id-missing", Warning, false;
    ExtbodyPhantomBodyNotEmpty = "extbody-phantom-body-not-empty", Info, false;
    // URL policy: the admin's rewrite rules
    ExtbodyUrlRewritten = "extbody-url-rewritten", Info, true;
    ExtbodyUrlRewriteFailed = "extbody-url-rewrite-failed", Warning, false;
    // multipart/related and MHTML (RFC 2387, RFC 2557)
    RelatedTypeMissing = "related-type-missing", Warning, true;
    RelatedTypeMismatch = "related-type-mismatch", Warning, false;
    RelatedStartDangling = "related-start-dangling", Error, false;
    RelatedCidDuplicate = "related-cid-duplicate", Error, false;
    RelatedLocationDuplicate = "related-location-duplicate", Error, false;
    RelatedRefDangling = "related-ref-dangling", Warning, false;
    RelatedCidLocationOnly = "related-cid-location-only", Warning, true;
    LocationMultiple = "location-multiple", Error, false;
    LocationIllegalChars = "location-illegal-chars", Warning, false;
    LocationLineTooLong = "location-line-too-long", Warning, true;
    LocationBaseNotAbsolute = "location-base-not-absolute", Warning, false;
    // identifiers, headers and structure
    ContentIdSyntax = "content-id-syntax", Warning, false;
    ContentIdDuplicate = "content-id-duplicate", Warning, false;
    CidUrlSyntax = "cid-url-syntax", Warning, false;
    MidUrlExternal = "mid-url-external", Info, false;
    HeaderLineTooLong = "header-line-too-long", Error, true;
    MimeDepthExceeded = "mime-depth-exceeded", Error, false;
    MimePartsExceeded = "mime-parts-exceeded", Error, false;
    MimeBoundaryMissing = "mime-boundary-missing", Warning, false;
    MessageTooLarge = "message-too-large", Error, false;
    SignedContent = "signed-content", Info, false;
    // inline parts: what readers show (added by the project from real-world reports)
    RelatedPartDisposition = "related-part-disposition", Warning, true;
    RelatedPartDispositionMissing = "related-part-disposition-missing", Info, true;
    ContentIdMalformed = "content-id-malformed", Warning, true;
    RelatedRefMismatch = "related-ref-mismatch", Warning, true;
    CidOutsideRelated = "cid-outside-related", Warning, true;
    RelatedAttachmentHidden = "related-attachment-hidden", Info, false;
    HtmlBaseRemote = "html-base-remote", Info, true; // a removal of Content-Base, when policy asks
    // parts shown as the sender meant: names, types, references that lead nowhere
    // (added by the project from real-world reports)
    PartNameRfc2231Only = "part-name-rfc2231-only", Warning, true;
    PartName8bit = "part-name-8bit", Warning, true;
    PartNameOneField = "part-name-one-field", Info, true;
    Rfc822Encoded = "rfc822-encoded", Warning, true;
    RefImageType = "ref-image-type", Warning, true;
    RefUnreachable = "ref-unreachable", Warning, false;
    RefDataUri = "ref-data-uri", Info, false;
    CidRefEscaped = "cid-ref-escaped", Info, false;
    // ContentType: URIs (draft-eastlake-cturi)
    CturiUriType = "cturi-uri-type", Info, false;
    CturiUriDenied = "cturi-uri-denied", Error, true; // a strip (strip_denied)
}

impl Rule {
    /// The rules under which some reader shows an inline part wrongly: an image listed
    /// as an attachment, shown twice, or not shown at all (what `survey` sums up as
    /// inline images readers show wrongly).
    pub fn misshows_inline(self) -> bool {
        matches!(
            self,
            Rule::RelatedPartDisposition
                | Rule::RelatedPartDispositionMissing
                | Rule::ContentIdMalformed
                | Rule::RelatedRefMismatch
                | Rule::CidOutsideRelated
                | Rule::RelatedAttachmentHidden
                | Rule::RelatedRefDangling
                | Rule::RelatedCidLocationOnly
        )
    }
}

impl Rule {
    /// The rules under which some reader shows a part other than the sender meant: a
    /// made-up name, a forward that opens empty, an image typed wrong or a reference no
    /// recipient can load (what `survey` sums up as names and types).
    pub fn misnames_part(self) -> bool {
        matches!(
            self,
            Rule::PartNameRfc2231Only
                | Rule::PartName8bit
                | Rule::PartNameOneField
                | Rule::Rfc822Encoded
                | Rule::RefImageType
                | Rule::RefUnreachable
                | Rule::RefDataUri
                | Rule::CidRefEscaped
        )
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

impl serde::Serialize for Rule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for &r in Rule::ALL {
            assert!(seen.insert(r.id()), "duplicate id {}", r.id());
        }
        assert_eq!(Rule::ALL.len(), 55);
    }
}
