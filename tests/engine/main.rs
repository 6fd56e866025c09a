//! The engine tests, fast and free of shared state: one test binary, so the 2-core CI
//! machine links it once.

#[path = "../support/mod.rs"]
mod support;

mod cli;
mod corpus;
mod docs;
mod golden;
mod hostile;
mod scopes;
mod security;
mod survey;
mod survey_html;
