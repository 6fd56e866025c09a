//! What the daemon keeps of a message within `[limits] max_header_size` and
//! `max_message_size`, in one place: the session applies [`Intake`] to the fields and
//! body chunks as the MTA sends them, and the offline commands apply the same
//! [`Intake`] to a message file through [`as_received`], so that `check`, `check
//! --actions` and `fix` see exactly the bytes the daemon would analyse and decide as it
//! would.
//!
//! Octets are counted as the daemon buffers them: a header field is `name:value CRLF`
//! with the line breaks inside a folded value as the MTA sends them (LF), the empty line
//! is CRLF, and body lines end in CRLF (the milter protocol's form).

use std::borrow::Cow;

use crate::engine::{self, model::mime, Limits};

use super::plan::Received;

/// The buffering decisions for one message. Once a limit is reached nothing more is
/// kept: a header field is never cut in half (the heading stays a valid prefix, so the
/// indices of the fields before the cut are still right), a body chunk is cut at the
/// limit.
#[derive(Debug, Clone)]
pub struct Intake {
    max_header: usize,
    max_message: usize,
    header_octets: usize,
    kept: usize,
    stopped: bool,
}

impl Intake {
    /// Within `[limits] max_header_size` and `max_message_size`.
    pub fn new(max_header_size: usize, max_message_size: usize) -> Intake {
        Intake {
            max_header: max_header_size,
            max_message: max_message_size,
            header_octets: 0,
            kept: 0,
            stopped: false,
        }
    }

    /// A header field of `len` octets: whether it is kept.
    pub fn field(&mut self, len: usize) -> bool {
        if self.stopped
            || self.header_octets + len > self.max_header
            || self.kept + len > self.max_message
        {
            self.stopped = true;
            return false;
        }
        self.header_octets += len;
        self.kept += len;
        true
    }

    /// The empty line after the header fields: whether it is kept.
    pub fn end_of_header(&mut self) -> bool {
        self.body(2) == 2
    }

    /// A body chunk of `len` octets: how many of its first octets are kept. Fewer than
    /// `len` means buffering stopped here.
    pub fn body(&mut self, len: usize) -> usize {
        if self.stopped {
            return 0;
        }
        let room = self.max_message.saturating_sub(self.kept);
        if len > room {
            self.stopped = true;
            self.kept += room;
            room
        } else {
            self.kept += len;
            len
        }
    }

    /// Buffering stopped at a limit: the message is incomplete.
    pub fn stopped(&self) -> bool {
        self.stopped
    }
}

/// The engine options for a message of which `octets_not_given` octets were not kept.
pub fn options_for(base: &engine::Options, octets_not_given: u64) -> Cow<'_, engine::Options> {
    if octets_not_given == 0 {
        Cow::Borrowed(base)
    } else {
        Cow::Owned(engine::Options {
            octets_not_given,
            ..base.clone()
        })
    }
}

/// A message file as the daemon would have received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsReceived<'a> {
    /// The octets the daemon would have kept: a prefix of the file.
    pub bytes: &'a [u8],
    /// Buffering would have stopped at a limit.
    pub incomplete: bool,
    /// Octets of the file past `bytes` (at least 1 when incomplete).
    pub octets_not_given: u64,
    /// Top-level fields named like the report header, all of them (the daemon counts
    /// them also past a limit).
    pub report_fields: usize,
}

impl AsReceived<'_> {
    /// The engine options for these bytes.
    pub fn options<'o>(&self, base: &'o engine::Options) -> Cow<'o, engine::Options> {
        options_for(base, self.octets_not_given)
    }

    /// What the daemon would know beyond the bytes, for `Planner::plan_received`.
    pub fn received(&self) -> Received {
        Received {
            incomplete: self.incomplete,
            report_fields: Some(self.report_fields),
        }
    }
}

/// Octets a stretch of the file takes as the daemon buffers it: every line break CRLF.
fn wire_len(bytes: &[u8]) -> usize {
    let bare_lf = bytes
        .iter()
        .enumerate()
        .filter(|&(i, &b)| b == b'\n' && (i == 0 || bytes[i - 1] != b'\r'))
        .count();
    bytes.len() + bare_lf
}

/// The prefix of `body` whose CRLF form is at most `room` octets.
fn body_prefix(body: &[u8], room: usize) -> usize {
    let mut wire = 0;
    for (i, &b) in body.iter().enumerate() {
        let n = if b == b'\n' && (i == 0 || body[i - 1] != b'\r') {
            2
        } else {
            1
        };
        if wire + n > room {
            return i;
        }
        wire += n;
    }
    body.len()
}

/// `raw` (a message file) as the daemon would have received and kept it within `limits`
/// and `max_header_size`, counting the fields named `report_header`.
pub fn as_received<'a>(
    raw: &'a [u8],
    limits: &Limits,
    max_header_size: usize,
    report_header: Option<&str>,
) -> AsReceived<'a> {
    // Only the top-level heading matters here.
    let msg = mime::Message::parse(raw, &limits.heading_only());
    let mut intake = Intake::new(max_header_size, limits.max_message_size);
    let report = report_header.map(str::as_bytes);
    let mut given = AsReceived {
        bytes: raw,
        incomplete: false,
        octets_not_given: 0,
        report_fields: 0,
    };
    let Some(top) = msg.entities.first().filter(|e| e.buf == 0) else {
        return given;
    };
    let mut cut: Option<usize> = None;
    for f in msg.fields(top) {
        let name = msg.name(top, f);
        if report.is_some_and(|r| r.eq_ignore_ascii_case(name)) {
            given.report_fields += 1;
        }
        if cut.is_some() {
            continue;
        }
        // `name:value CRLF`, the folds inside the value as LF.
        let value = msg.value(top, f);
        let folds_crlf = value.windows(2).filter(|w| w == b"\r\n").count();
        let len = name.len() + 1 + value.len() - folds_crlf + 2;
        if !intake.field(len) {
            cut = Some(f.start);
        }
    }
    let body_start = top.body.start.min(raw.len());
    let end = match cut {
        Some(at) => at,
        None if !intake.end_of_header() => {
            // The last field's end: what lies between it and the body is the empty line.
            msg.fields(top).last().map_or(0, |f| f.end)
        }
        None => {
            let body = &raw[body_start..];
            let room = intake.body(wire_len(body));
            if intake.stopped() {
                body_start + body_prefix(body, room)
            } else {
                raw.len()
            }
        }
    };
    if intake.stopped() {
        given.bytes = &raw[..end];
        given.incomplete = true;
        given.octets_not_given = ((raw.len() - end) as u64).max(1);
    }
    given
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Limits as a configuration gives them, the report header the default one.
    struct Cfg {
        limits: Limits,
        max_header_size: usize,
        report_header: Option<String>,
    }

    fn config(max_message: usize, max_header: usize) -> Cfg {
        Cfg {
            limits: Limits {
                max_message_size: max_message,
                ..Limits::default()
            },
            max_header_size: max_header,
            report_header: Some("X-MIMERef".into()),
        }
    }

    fn as_received<'a>(raw: &'a [u8], c: &Cfg) -> AsReceived<'a> {
        super::as_received(
            raw,
            &c.limits,
            c.max_header_size,
            c.report_header.as_deref(),
        )
    }

    #[test]
    fn a_message_within_the_limits_is_given_whole() {
        let raw = b"Subject: x\r\n folded\r\n\r\nbody\r\n";
        let g = as_received(raw, &config(1 << 20, 1 << 20));
        assert_eq!(
            (g.bytes, g.incomplete, g.octets_not_given),
            (&raw[..], false, 0)
        );
        // Exactly at the limit, in the daemon's count (LF counted as CRLF).
        let lf = b"Subject: x\n\nbody\n";
        let wire = wire_len(lf);
        assert_eq!(wire, 20);
        assert!(!as_received(lf, &config(wire, wire)).incomplete);
        assert!(as_received(lf, &config(wire - 1, wire)).incomplete);
    }

    #[test]
    fn the_header_limit_cuts_between_fields() {
        let raw = b"A: 1234\r\nB: 5678\r\nC: 9\r\n\r\nbody\r\n";
        let g = as_received(raw, &config(1 << 20, 20));
        assert_eq!(g.bytes, b"A: 1234\r\nB: 5678\r\n");
        assert!(g.incomplete);
        assert_eq!(g.octets_not_given as usize, raw.len() - 18);
    }

    #[test]
    fn the_size_limit_cuts_the_body() {
        let raw = b"A: 1\r\n\r\n0123456789";
        let g = as_received(raw, &config(12, 12));
        assert_eq!((g.bytes, g.incomplete), (&b"A: 1\r\n\r\n0123"[..], true));
        assert_eq!(g.octets_not_given, 6);
    }

    proptest::proptest! {
        /// Any bytes, any limits: a prefix, and incomplete exactly when something is
        /// left over.
        #[test]
        fn any_message_gives_a_prefix(
            raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
            max_message in 0usize..500,
            max_header in 0usize..500,
        ) {
            let g = as_received(&raw, &config(max_message, max_header));
            proptest::prop_assert!(raw.starts_with(g.bytes));
            proptest::prop_assert_eq!(
                g.incomplete,
                g.octets_not_given > 0
            );
            if !g.incomplete {
                proptest::prop_assert_eq!(g.bytes.len(), raw.len());
            }
        }
    }

    #[test]
    fn report_fields_are_counted_past_the_limit() {
        let mut cfg = config(1 << 20, 20);
        cfg.report_header = Some("X-R".into());
        let raw = b"X-R: forged 1\r\nX-R: forged 2\r\nX-R: forged 3\r\n\r\n";
        let g = as_received(raw, &cfg);
        assert!(g.incomplete);
        assert_eq!(g.report_fields, 3);
        assert_eq!(g.received().report_fields, Some(3));
    }
}
