//! Owner: in progress.

use super::Context;

pub fn check(_cx: &mut Context) {}
