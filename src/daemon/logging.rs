//! Where log lines go: standard error (the journal under systemd), with RFC 3339 time
//! stamps unless the journal adds its own, or a syslog socket (`log_target =
//! "syslog"`), one datagram per line, so that with the `mail` facility the lines land
//! in mail.log beside the MTA's, as OpenDKIM's do.
//!
//! A line the syslog socket does not take (no syslog running, its queue full) is
//! written to standard error instead, never waited for: logging must not hold up
//! the mail. Each such line counts in `mimeref_syslog_errors_total`.

use std::fmt;
use std::io::{self, Write};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

use crate::config::{Config, LogFormat, LogTarget};

/// The program name in each syslog line (the TAG of RFC 3164), as in mail.log.
const TAG: &str = "mimeref-milter";

/// Whether log lines go to standard error (set by [`init`]).
static ON_STDERR: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether log lines go to standard error: then a line logged is already on the
/// terminal of an admin who started the daemon by hand.
pub fn on_stderr() -> bool {
    ON_STDERR.load(std::sync::atomic::Ordering::Relaxed)
}

/// Installs the logger the configuration asks for; RUST_LOG overrides its level.
pub fn init(cfg: &Config) -> Result<(), String> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        EnvFilter::new(format!("warn,mimeref_milter={}", cfg.process().log_level))
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(false);
    let res = match (&cfg.process().log_target, cfg.process().log_format) {
        (LogTarget::Stderr, LogFormat::Text) if journal_stderr() => {
            builder.with_writer(io::stderr).without_time().try_init()
        }
        (LogTarget::Stderr, LogFormat::Text) => builder.with_writer(io::stderr).try_init(),
        (LogTarget::Stderr, LogFormat::Json) => builder.with_writer(io::stderr).json().try_init(),
        (LogTarget::Syslog { socket, facility }, format) => {
            let sink = Syslog::new(socket.clone(), *facility).map_err(|e| {
                format!("log_target = \"syslog\": cannot make a datagram socket: {e}")
            })?;
            let builder = builder.with_writer(sink);
            match format {
                LogFormat::Text => builder.event_format(SyslogText).try_init(),
                // The syslog daemon stamps the time; the JSON object keeps its own.
                LogFormat::Json => builder.json().try_init(),
            }
        }
    };
    // Logging that could not be set up writes nowhere: nothing is on standard error.
    ON_STDERR.store(
        res.is_ok() && matches!(cfg.process().log_target, LogTarget::Stderr),
        std::sync::atomic::Ordering::Relaxed,
    );
    res.map_err(|e| e.to_string())
}

/// With `log_target = "syslog"`, whether the socket is missing: lines then go to
/// standard error, which under a service manager other than systemd may be nowhere.
/// `config-check` says so as well as `serve`, before the admin restarts on it.
pub fn syslog_warning(cfg: &Config) -> Option<String> {
    match &cfg.process().log_target {
        LogTarget::Syslog { socket, .. } if !socket_exists(socket) => Some(format!(
            "syslog_socket {}: no socket there (is a syslog daemon running? inside a \
             chroot or container, mount the host's); log lines go to standard error until \
             one is",
            socket.display()
        )),
        _ => None,
    }
}

fn socket_exists(p: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(p).is_ok_and(|m| m.file_type().is_socket())
}

/// Whether standard error is the journal's stream: systemd sets JOURNAL_STREAM to
/// its device and inode (systemd.exec(5)), and the journal stamps every line with
/// the time itself. Compared with standard error, so that a JOURNAL_STREAM inherited
/// by a process whose standard error goes elsewhere still gets time stamps.
fn journal_stderr() -> bool {
    let Some(v) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = v.to_str().and_then(|v| v.split_once(':')) else {
        return false;
    };
    let (Ok(dev), Ok(ino)) = (dev.parse::<u64>(), ino.parse::<u64>()) else {
        return false;
    };
    match rustix::fs::fstat(io::stderr()) {
        Ok(st) => st.st_dev == dev && st.st_ino == ino,
        Err(_) => false,
    }
}

/// The syslog socket, shared by every line.
#[derive(Clone)]
struct Syslog(Arc<Inner>);

struct Inner {
    socket: UnixDatagram,
    path: PathBuf,
    facility: u8,
    pid: u32,
}

impl Syslog {
    fn new(path: PathBuf, facility: u8) -> io::Result<Syslog> {
        let socket = UnixDatagram::unbound()?;
        // A syslog daemon that does not keep up must not stall the mail: a line it
        // cannot take at once goes to standard error.
        socket.set_nonblocking(true)?;
        Ok(Syslog(Arc::new(Inner {
            socket,
            path,
            facility,
            pid: std::process::id(),
        })))
    }
}

/// Severity codes (RFC 5424 §6.2.1).
fn severity(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        _ => 7,
    }
}

impl<'a> MakeWriter<'a> for Syslog {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        self.line(6)
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Line {
        self.line(severity(meta.level()))
    }
}

impl Syslog {
    fn line(&self, severity: u8) -> Line {
        let pri = u16::from(self.0.facility) * 8 + u16::from(severity);
        // RFC 3164 as syslog(3) writes to /dev/log, without the time stamp, which the
        // syslog daemon (rsyslog, the journal) sets on receipt.
        let head = format!("<{pri}>{TAG}[{}]: ", self.0.pid);
        let mut buf = Vec::with_capacity(256);
        buf.extend_from_slice(head.as_bytes());
        Line {
            sink: self.0.clone(),
            head: head.len(),
            buf,
        }
    }
}

/// One log line, sent as one datagram when the formatter is done with it.
pub struct Line {
    sink: Arc<Inner>,
    head: usize,
    buf: Vec<u8>,
}

impl Write for Line {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        while self.buf.last().is_some_and(|b| matches!(b, b'\n' | b'\r')) {
            self.buf.pop();
        }
        if self.buf.len() == self.head {
            return;
        }
        let s = &self.sink;
        if let Err(e) = s.socket.send_to(&self.buf, &s.path) {
            crate::milter::metrics::syslog_error();
            let text = String::from_utf8_lossy(&self.buf[self.head..]);
            // Not through tracing: that would come back here.
            let _ = writeln!(
                io::stderr().lock(),
                "{text} (not sent to syslog {}: {e})",
                s.path.display()
            );
        }
    }
}

/// Lines as Postfix writes them to mail.log: the message alone, after `warning: `,
/// `error: ` (or `debug: `) where the level is not info; the syslog daemon adds the
/// time, the host and the program name with its pid.
struct SyslogText;

impl<S, N> FormatEvent<S, N> for SyslogText
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let prefix = match *event.metadata().level() {
            Level::ERROR => "error: ",
            Level::WARN => "warning: ",
            Level::INFO => "",
            Level::DEBUG => "debug: ",
            Level::TRACE => "trace: ",
        };
        writer.write_str(prefix)?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each line is one datagram with the facility and severity in front, as syslog(3)
    /// writes them, and a socket that takes nothing loses no line.
    #[test]
    fn a_line_is_one_datagram_with_its_priority() {
        let dir = std::env::temp_dir().join(format!("mimeref-syslog-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log.sock");
        let rx = UnixDatagram::bind(&path).unwrap();
        let sink = Syslog::new(path.clone(), 2).unwrap();
        {
            let mut l = sink.line(4);
            l.write_all(b"warning: Q1: it failed\n").unwrap();
        }
        let mut buf = [0u8; 512];
        let n = rx.recv(&mut buf).unwrap();
        let want = format!(
            "<20>mimeref-milter[{}]: warning: Q1: it failed",
            std::process::id()
        );
        assert_eq!(std::str::from_utf8(&buf[..n]).unwrap(), want);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
