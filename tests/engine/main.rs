//! The engine tests, fast and free of shared state: one test binary, so the 2-core CI
//! machine links it once.

#[path = "../support/invariants.rs"]
mod common;
#[path = "../support/milter.rs"]
mod milter_util;

mod cli;
mod corpus;
mod docs;
mod golden;
mod hostile;
mod security;
