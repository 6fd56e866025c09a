//! The message model: the MIME structure scan, edits and the rule catalogue.
pub(crate) mod analysis;
pub(crate) mod base;
pub(crate) mod edit;
pub mod mime;
pub(crate) mod options;
pub(crate) mod rules;
