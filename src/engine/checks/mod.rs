//! The checks: each reads the model and reports findings, offering edits. Uses
//! `syntax`, `model` and `rewriting`; no check uses another (`cid_scope` is the
//! `html` check's own part: which Content-IDs a `cid:` reference may name).
pub(crate) mod cid_scope;
pub mod cturi;
pub mod extbody;
pub mod headers;
pub mod html;
pub mod ids;
pub mod inline;
pub(crate) mod location_scope;
pub mod related;
pub mod signed;
