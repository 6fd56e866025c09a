//! Support for every integration test binary: message bytes and fixtures
//! ([`message`]), the fix invariants ([`invariants`]), the daemon run in-process and
//! driven like an MTA ([`milter`]), the spawned daemon with private Postfix,
//! Sendmail and the other programs around it ([`mta`]), the scope configuration
//! the scope tests share ([`scopes`]), and the deterministic pseudo-random generator
//! ([`xorshift`], which the crate's unit tests take in too).
//!
//! Each binary takes it in with `#[path = "../support/mod.rs"] mod support;` and uses
//! only part of it.
#![allow(dead_code)]

pub mod invariants;
pub mod message;
pub mod milter;
pub mod mta;
pub mod scopes;
pub mod xorshift;

use std::time::{Duration, Instant};

/// Polls `f` every `every` until it returns Ok, or panics after `timeout` with
/// "`what`: not within TIMEOUT" and the detail `f` returned last. For async tests;
/// the blocking ones use [`mta::wait_for`].
pub async fn wait_until<T, F, Fut>(what: &str, timeout: Duration, every: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let end = Instant::now() + timeout;
    loop {
        match f().await {
            Ok(v) => return v,
            Err(last) if Instant::now() >= end => {
                panic!("{what}: not within {timeout:?} ({last})")
            }
            Err(_) => tokio::time::sleep(every).await,
        }
    }
}
