//! The message model: the MIME structure scan, edits and the rule catalogue.
pub mod analysis;
pub mod base;
pub mod edit;
pub mod mime;
pub mod options;
pub mod rules;
