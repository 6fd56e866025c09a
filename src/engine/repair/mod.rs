//! Repairs beyond the RFC ones: the result of a URL rewrite rule, and the notice that
//! replaces a part.
//! Uses `syntax` and `model`; the checks offer them.
pub mod rewrite;
pub mod strip;
