//! How connections and messages are served: `dry_run`, `shutdown_timeout`,
//! `no_reply_stages`, `internal_error_action`.

use std::time::Duration;

use super::Validator;
use crate::config::raw::RawConfig;
use crate::config::{InternalErrorAction, Service};

impl Validator<'_> {
    /// `dry_run`, `shutdown_timeout`, `no_reply_stages`, `internal_error_action`.
    pub(super) fn service(&mut self, raw: &mut RawConfig) -> Service {
        let shutdown_timeout =
            self.int(raw.shutdown_timeout.take(), "shutdown_timeout", 0, 3600, 30) as u64;
        let internal_error_action = match raw.internal_error_action.take() {
            None => InternalErrorAction::Tempfail,
            Some(s) => match s.get_ref().as_str() {
                "tempfail" => InternalErrorAction::Tempfail,
                "accept" => InternalErrorAction::Accept,
                other => {
                    self.err(
                        s.span(),
                        format!(
                            "internal_error_action {other:?}: expected \"tempfail\" or \"accept\""
                        ),
                    );
                    InternalErrorAction::Tempfail
                }
            },
        };
        Service {
            dry_run: raw.dry_run.unwrap_or(false),
            dry_run_forced: false,
            shutdown_timeout: Duration::from_secs(shutdown_timeout),
            no_reply_stages: raw.no_reply_stages.unwrap_or(true),
            internal_error_action,
        }
    }
}
