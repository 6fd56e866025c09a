//! Owner: in progress.
