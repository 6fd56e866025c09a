//! The message model: the MIME structure scan, the base URIs of its entities, edits,
//! the rule catalogue, the options (with the URL rewrite rules) and the findings of an
//! analysis. Uses `syntax`.
pub(crate) mod analysis;
pub(crate) mod base_uri;
pub(crate) mod edit;
pub mod mime;
pub(crate) mod options;
pub(crate) mod rules;
pub(crate) mod url_rules;
