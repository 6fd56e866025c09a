//! The checks: each reads the model and reports findings, offering edits. Uses
//! `syntax`, `model` and `repair`; no check uses another.
pub mod cturi;
pub mod extbody;
pub mod headers;
pub mod html;
pub mod ids;
pub mod related;
pub mod signed;
