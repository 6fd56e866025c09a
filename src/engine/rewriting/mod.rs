//! External-body rewriting, the repairs beyond the RFC ones: the result of a URL
//! rewrite rule (`rewrite`), and the notice that replaces a part with a denied
//! reference (`strip`).
//! Uses `syntax` and `model`; the checks offer them.
pub mod rewrite;
pub mod strip;
