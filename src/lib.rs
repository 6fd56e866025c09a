//! mimeref-milter: keeps the references inside MIME messages well-formed.
//!
//! [`engine`] is the pure analysis library; everything else is glue around it.

#![forbid(unsafe_code)]

pub mod cli;
pub mod config;
pub mod daemon;
pub mod engine;
pub mod milter;
pub mod policy;
