//! Repairs beyond one field: URL rewrite rules and the notice that replaces a part.
pub mod rewrite;
pub mod strip;
