//! The readers of `survey`, `check` and `fix` (src/cli/mailbox/) on arbitrary files:
//! an mbox split held whole, streamed in chunks of any size, and under a limit gives
//! the same messages, and each message's `FILE:OFFSET` name leads back to its From
//! line. The first two octets choose the chunk size and the limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mimeref_milter::cli_fuzzing;

fuzz_target!(|data: &[u8]| {
    let [c, l, file @ ..] = data else {
        return;
    };
    let chunk = 1 + usize::from(*c % 64);
    let limit = usize::from(*l) * 4;
    cli_fuzzing::mailbox(file, chunk, limit);
});
