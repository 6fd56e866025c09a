//! `[limits]`: the sizes a message may have, where a large one is spilled, and the
//! memory all messages may take; `oversize_action` is read here and goes to the
//! policies.

use std::path::{Path, PathBuf};

use toml::Spanned;

use super::Validator;
use crate::config::raw::RawLimits;
use crate::config::{
    spill, Limits, DEFAULT_MAX_HEADER_SIZE, DEFAULT_MEMORY_BUDGET, SPILL_THRESHOLD,
};
use crate::policy::Action;

/// Where a spilled message goes must be a directory in which the daemon can create
/// files: tried by creating (and at once dropping) a spill file there, as the daemon
/// would. `config-check` runs as the service's user, so it sees what the daemon sees.
fn check_spill_directory(p: &Path) -> Result<(), String> {
    if !p.is_absolute() {
        return Err("not an absolute path".into());
    }
    match std::fs::metadata(p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err("no such directory".into())
        }
        Err(e) => return Err(format!("cannot be read: {e}")),
        Ok(m) if !m.is_dir() => return Err("not a directory".into()),
        Ok(_) => {}
    }
    spill::spill_file(p)
        .map(drop)
        .map_err(|e| format!("cannot create a file in it: {e}"))
}

impl Validator<'_> {
    /// A `[limits]` size bounded by `max_message_size` (already validated): errors name
    /// that key and its value, the bound that applies, rather than the widest value the
    /// file format could hold. `above` says what goes wrong with a larger value.
    fn int_up_to_message_size(
        &mut self,
        v: Option<Spanned<i64>>,
        key: &str,
        min: usize,
        max_message_size: usize,
        default: usize,
        above: &str,
    ) -> usize {
        let Some(s) = v else {
            return default;
        };
        let n = *s.get_ref();
        match usize::try_from(n) {
            Ok(u) if u > max_message_size => {
                self.err(
                    s.span(),
                    format!(
                        "{key} = {n} is larger than max_message_size ({max_message_size}): {above}"
                    ),
                );
                max_message_size
            }
            Ok(u) if u >= min => u,
            _ => {
                self.err(
                    s.span(),
                    format!(
                        "{key} = {n}: must be between {min} and max_message_size ({max_message_size})"
                    ),
                );
                default
            }
        }
    }

    /// `[limits]`, with `oversize_action` apart (it goes to the policies).
    pub(super) fn limits(&mut self, rl: RawLimits) -> (Limits, Action) {
        let d = crate::engine::Limits::default();
        let max_message_size = self.int(
            rl.max_message_size,
            "[limits] max_message_size",
            1024,
            i64::from(u32::MAX),
            d.max_message_size as i64,
        ) as usize;
        // Header fields count towards max_message_size too, so a larger value could never
        // take effect; the default steps down with a small max_message_size instead of
        // clashing with a key the admin did not write.
        let max_header_size = self.int_up_to_message_size(
            rl.max_header_size,
            "[limits] max_header_size",
            1024,
            max_message_size,
            DEFAULT_MAX_HEADER_SIZE.min(max_message_size),
            "header fields count towards max_message_size, so it would never apply; set \
             it to max_message_size to limit only the whole message",
        );
        let max_depth = self.int(
            rl.max_depth,
            "[limits] max_depth",
            1,
            // Part paths grow with depth, so their total grows with its square.
            1_000,
            d.max_depth as i64,
        ) as usize;
        let max_parts = self.int(
            rl.max_parts,
            "[limits] max_parts",
            1,
            // About 700 octets of bookkeeping per part at most: under 1 GB.
            1_000_000,
            d.max_parts as i64,
        ) as usize;
        let oversize_action = match rl.oversize_action {
            None => Action::Report,
            Some(s) => match self.action(&s, "[limits] oversize_action") {
                Some(Action::Fix) => {
                    self.err(s.span(), "[limits] oversize_action: `fix` makes no sense for a message that was not read whole");
                    Action::Report
                }
                Some(a) => a,
                None => Action::Report,
            },
        };
        // The default never exceeds a small max_message_size; a value given above it
        // could never be reached, which is a sign of a mix-up of units or keys.
        let spill_threshold = self.int_up_to_message_size(
            rl.spill_threshold,
            "[limits] spill_threshold",
            1,
            max_message_size,
            SPILL_THRESHOLD.min(max_message_size),
            "no message could reach it; set it to max_message_size to keep every message in \
             memory",
        );
        let spill_directory = match rl.spill_directory {
            None => std::env::temp_dir(),
            Some(s) => {
                let p = PathBuf::from(s.get_ref());
                if let Err(e) = check_spill_directory(&p) {
                    self.err(
                        s.span(),
                        format!("[limits] spill_directory {:?}: {e}", s.get_ref()),
                    );
                }
                p
            }
        };
        let memory_budget = self.int(
            rl.memory_budget,
            "[limits] memory_budget",
            1,
            // 1 TiB: beyond any host this runs on, and far from overflowing a count.
            1 << 40,
            DEFAULT_MEMORY_BUDGET as i64,
        ) as usize;
        let limits = Limits {
            max_message_size,
            max_depth,
            max_parts,
            max_header_size,
            spill_threshold,
            spill_in_memory: spill::in_memory(&spill_directory),
            spill_directory,
            memory_budget,
        };
        (limits, oversize_action)
    }
}
