//! The restart-only keys of how the daemon listens: `socket`, `socket_mode`,
//! `socket_group`, `metrics_listen`, `metrics_max_connections`, `max_connections` and
//! the timeouts of a connection and a transaction. Settings that expose the daemon are
//! warnings here, not errors.

use std::net::SocketAddr;
use std::time::Duration;

use toml::Spanned;

use super::Validator;
use crate::config::raw::RawConfig;
use crate::config::{metrics_exposure, Listen, SocketSpec, DEFAULT_SOCKET};

impl Validator<'_> {
    /// Restart-only: `socket`, `socket_mode`, `socket_group`, `metrics_listen`,
    /// `metrics_max_connections`, `max_connections`, `connection_timeout`.
    pub(super) fn listen(&mut self, raw: &mut RawConfig) -> Listen {
        let (socket, socket_mode, socket_group) = self.socket_and_access(raw);
        let metrics_listen = raw
            .metrics_listen
            .take()
            .and_then(|s| self.metrics_listen(s));
        let metrics_max_connections = self.int(
            raw.metrics_max_connections.take(),
            "metrics_max_connections",
            1,
            10_000,
            32,
        ) as usize;
        let max_connections = self.int(
            raw.max_connections.take(),
            "max_connections",
            1,
            100_000,
            2000,
        ) as usize;
        let connection_timeout = self.int(
            raw.connection_timeout.take(),
            "connection_timeout",
            1,
            86_400,
            7210,
        ) as u64;
        // From MAIL FROM to end of message. Postfix and Sendmail pass the message on
        // only once the SMTP client has sent all of it, so this takes in the whole
        // DATA phase over the client's link: an hour, Sendmail's Timeout.datablock,
        // lets 60 MB through at 133 kbit/s.
        let transaction_timeout = self.int(
            raw.transaction_timeout.take(),
            "transaction_timeout",
            1,
            86_400,
            3600,
        ) as u64;
        // Postfix waits milter_content_timeout (300 s) for the answer to end of
        // message: past that, nobody reads what is still to be written.
        let reply_timeout =
            self.int(raw.reply_timeout.take(), "reply_timeout", 1, 86_400, 300) as u64;
        Listen {
            socket,
            socket_mode,
            socket_group,
            metrics_listen,
            metrics_max_connections,
            max_connections,
            connection_timeout: Duration::from_secs(connection_timeout),
            transaction_timeout: Duration::from_secs(transaction_timeout),
            reply_timeout: Duration::from_secs(reply_timeout),
        }
    }

    /// `socket`, `socket_mode` and `socket_group`, and whether they fit together.
    fn socket_and_access(
        &mut self,
        raw: &mut RawConfig,
    ) -> (SocketSpec, Option<u32>, Option<String>) {
        let default_socket = || {
            SocketSpec::parse(DEFAULT_SOCKET).unwrap_or(SocketSpec::Inet {
                host: "127.0.0.1".into(),
                port: 8897,
            })
        };
        // As written, for the cross-field check below (also when it does not parse).
        let socket_unix = raw
            .socket
            .as_ref()
            .is_some_and(|s| s.get_ref().starts_with("unix:") || s.get_ref().starts_with("local:"));
        let socket = self
            .socket(raw.socket.as_ref())
            .unwrap_or_else(default_socket);
        let socket_span = raw.socket.as_ref().map(|s| s.span());
        let group_span = raw.socket_group.as_ref().map(|s| s.span());
        let mode_span = raw
            .socket_mode
            .as_ref()
            .map(|s| s.span())
            .or(group_span.clone());
        let socket_mode = raw.socket_mode.take().and_then(|s| self.socket_mode(s));
        let socket_group = raw.socket_group.take().and_then(|s| {
            if s.get_ref().is_empty() {
                self.err(s.span(), "socket_group: empty group name");
                None
            } else {
                Some(s.into_inner())
            }
        });
        if (socket_mode.is_some() || socket_group.is_some()) && !socket_unix {
            // Cross-field: harmless but a sign of a misunderstanding, so say it.
            self.err(
                mode_span.clone().unwrap_or(0..0),
                "socket_mode/socket_group only apply to a unix: socket",
            );
        }
        if let (SocketSpec::Unix(path), Some(group)) = (&socket, &socket_group) {
            use crate::config::socket_access::{check, Key};
            for (key, problem) in check(path, group, socket_mode) {
                let span = match key {
                    Key::Socket => socket_span.clone(),
                    Key::SocketMode => mode_span.clone(),
                    Key::SocketGroup => group_span.clone(),
                };
                self.err(span.unwrap_or(0..0), problem);
            }
        }
        (socket, socket_mode, socket_group)
    }

    /// `socket`: the specification, None when it does not parse (the error recorded).
    fn socket(&mut self, s: Option<&Spanned<String>>) -> Option<SocketSpec> {
        let s = s?;
        match SocketSpec::parse(s.get_ref()) {
            Ok(spec) => {
                if let Some(w) = spec.exposure() {
                    self.warn("socket", s.span(), w);
                }
                Some(spec)
            }
            Err(e) => {
                self.err(s.span(), format!("socket: {e}"));
                None
            }
        }
    }

    /// `socket_mode`: octal permissions; a mode that lets every local user in is
    /// allowed with a warning.
    fn socket_mode(&mut self, s: Spanned<String>) -> Option<u32> {
        let t = s.get_ref();
        match u32::from_str_radix(t, 8) {
            Ok(m) if m <= 0o777 && !t.is_empty() => {
                if m & 0o002 != 0 {
                    self.warn(
                        "socket_mode",
                        s.span(),
                        format!(
                            "socket_mode {t:?}: every local user can connect to the milter \
                             socket and hold its connections; use \"0660\" with \
                             socket_group = \"postfix\""
                        ),
                    );
                }
                Some(m)
            }
            _ => {
                self.err(
                    s.span(),
                    format!("socket_mode {t:?}: expected octal permissions such as \"0660\""),
                );
                None
            }
        }
    }

    /// `metrics_listen`: ADDRESS:PORT; empty means off.
    fn metrics_listen(&mut self, s: Spanned<String>) -> Option<SocketAddr> {
        if s.get_ref().is_empty() {
            return None;
        }
        match s.get_ref().parse::<SocketAddr>() {
            Ok(a) => {
                if let Some(w) = metrics_exposure(&a) {
                    self.warn("metrics_listen", s.span(), w);
                }
                Some(a)
            }
            Err(_) => {
                self.err(
                    s.span(),
                    format!(
                        "metrics_listen {:?}: expected ADDRESS:PORT, e.g. \"127.0.0.1:9357\"",
                        s.get_ref()
                    ),
                );
                None
            }
        }
    }
}
