//! The message model: the MIME structure scan, the base URIs of its entities, edits,
//! the rule catalogue, the options (with the URL rewrite rules), the findings of an
//! analysis and what its signatures made of the repairs. Uses `syntax`.
pub(crate) mod analysis;
pub(crate) mod base_uri;
pub(crate) mod edit;
pub mod mime;
pub(crate) mod options;
pub(crate) mod rules;
pub(crate) mod signature;
pub(crate) mod url_rules;
