//! The restart-only keys of the process itself: `log_level`, `log_format`,
//! `log_target`, `syslog_socket`, `syslog_facility`.

use std::path::{Path, PathBuf};

use super::Validator;
use crate::config::raw::RawConfig;
use crate::config::{LogFormat, LogTarget, Process, DEFAULT_SYSLOG_SOCKET, SYSLOG_FACILITIES};

impl Validator<'_> {
    /// Restart-only: `log_level`, `log_format`, `log_target`, `syslog_socket`,
    /// `syslog_facility`.
    pub(super) fn process(&mut self, raw: &mut RawConfig) -> Process {
        let log_level = match raw.log_level.take() {
            None => "info".to_string(),
            Some(s) => {
                let l = s.get_ref().to_ascii_lowercase();
                if !["error", "warn", "info", "debug", "trace"].contains(&l.as_str()) {
                    self.err(
                        s.span(),
                        format!(
                            "log_level {:?}: expected error, warn, info, debug or trace",
                            s.get_ref()
                        ),
                    );
                }
                l
            }
        };
        let log_format = match raw.log_format.take() {
            None => LogFormat::Text,
            Some(s) => match s.get_ref().as_str() {
                "text" => LogFormat::Text,
                "json" => LogFormat::Json,
                other => {
                    self.err(
                        s.span(),
                        format!("log_format {other:?}: expected \"text\" or \"json\""),
                    );
                    LogFormat::Text
                }
            },
        };
        let target = raw.log_target.take();
        let socket = raw.syslog_socket.take();
        let facility = raw.syslog_facility.take();
        let facility = match &facility {
            None => 2,
            Some(f) => match SYSLOG_FACILITIES.iter().find(|(n, _)| *n == f.get_ref()) {
                Some((_, code)) => *code,
                None => {
                    let names: Vec<&str> = SYSLOG_FACILITIES.iter().map(|(n, _)| *n).collect();
                    self.err(
                        f.span(),
                        format!(
                            "syslog_facility {:?}: expected one of {}",
                            f.get_ref(),
                            names.join(", ")
                        ),
                    );
                    2
                }
            },
        };
        let socket = match socket {
            None => PathBuf::from(DEFAULT_SYSLOG_SOCKET),
            Some(s) => {
                if !Path::new(s.get_ref()).is_absolute() {
                    self.err(
                        s.span(),
                        format!("syslog_socket {:?}: not an absolute path", s.get_ref()),
                    );
                }
                PathBuf::from(s.into_inner())
            }
        };
        let log_target = match target.as_ref().map(|t| t.get_ref().as_str()) {
            None | Some("stderr") => LogTarget::Stderr,
            Some("syslog") => LogTarget::Syslog { socket, facility },
            Some(other) => {
                self.err(
                    target.as_ref().map_or(0..0, |t| t.span()),
                    format!("log_target {other:?}: expected \"stderr\" or \"syslog\""),
                );
                LogTarget::Stderr
            }
        };
        Process {
            log_level,
            log_format,
            log_target,
        }
    }
}
