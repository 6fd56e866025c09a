//! Owner: in progress.

use super::Context;

pub fn check_limits(_cx: &mut Context) {}
pub fn check_line_lengths(_cx: &mut Context) {}
