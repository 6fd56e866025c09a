//! The message model: the MIME structure scan, edits and the rule catalogue.
pub mod edit;
pub mod mime;
pub mod rules;
