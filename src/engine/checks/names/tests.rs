//! One message per shape of the three name rules, and the input no repair may guess.
