//! The checks: each reads the model and reports findings, offering edits. Uses
//! `syntax`, `model` and `rewriting`; no check uses another (`cid_scope` and
//! `location_scope` are the `html` check's own parts: which Content-IDs a `cid:`
//! reference may name, which part a URL names by Content-Location). `inline`, `refs`
//! and `names` read what `html` recorded in the context (`Context::refs`,
//! `Context::html_parts`), as `ids` does; `inline` reads what `refs` repairs
//! (`Context::retyped`).
pub(crate) mod cid_scope;
pub mod cturi;
pub mod extbody;
pub mod headers;
pub mod html;
pub mod ids;
pub mod inline;
pub(crate) mod location_scope;
pub mod names;
pub mod refs;
pub mod related;
pub mod rfc822_encoded;
pub mod signed;
