//! The pseudo-random generator of the tests that want many varied cases and the same
//! ones on every run: Marsaglia's xorshift on 64 bits, no clock, no crate.
//!
//! One file for both kinds of test: the integration test binaries take it in with the
//! rest of tests/support (`support::xorshift`), the crate's unit tests through
//! `#[cfg(test)] #[path = "../tests/support/xorshift.rs"] mod xorshift;` in
//! src/lib.rs (`crate::xorshift`).
//!
//! Two steps on the same state, each test keeping to one: [`XorShift64::next_u64`]
//! (shifts 13, 7, 17, the state itself as output) and [`XorShift64::next_star`]
//! (xorshift64*: shifts 12, 25, 27, the state times 0x2545F4914F6CDD1D as output, whose
//! high bits are the good ones; [`XorShift64::below`] takes them). The sequences are
//! those of the copies the tests had before, so that their cases stay the same.
#![allow(dead_code)]

/// See the module: a xorshift generator on 64 bits of state.
#[derive(Clone, Debug)]
pub struct XorShift64(u64);

impl XorShift64 {
    /// `seed` is the first state, and must not be 0 (xorshift stays at 0).
    pub const fn new(seed: u64) -> XorShift64 {
        assert!(seed != 0, "xorshift: a seed of 0 gives only zeros");
        XorShift64(seed)
    }

    /// xorshift64 (13, 7, 17): the next state, which is also the output.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// xorshift64* (12, 25, 27): the next state times 0x2545F4914F6CDD1D.
    pub fn next_star(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` from the high 31 bits of [`XorShift64::next_star`] (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_star() >> 33) as usize % n
    }
}
