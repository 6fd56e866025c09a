//! The SMTP client the tests talk to the MTAs with.

use super::*;
use crate::support::message::lines;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::Instant;

/// One SMTP reply: the code and the text of all its lines joined by '\n'.
#[derive(Debug, Clone)]
pub struct Reply {
    pub code: u16,
    pub text: String,
}

impl Reply {
    pub fn class(&self) -> u16 {
        self.code / 100
    }
    pub fn is_ok(&self) -> bool {
        self.class() == 2
    }
}

impl std::fmt::Display for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.code, self.text)
    }
}

/// A client that always waits for each reply before the next command
/// (Sendmail rejects clients that talk early). Works over TCP and over a
/// child's stdin/stdout (`sendmail -bs`).
pub struct Smtp {
    w: Box<dyn Write + Send>,
    rx: mpsc::Receiver<Vec<u8>>,
    buf: Vec<u8>,
    tcp: Option<TcpStream>,
    pub greeting: Reply,
}

impl Smtp {
    pub fn connect(port: u16) -> Smtp {
        let s = TcpStream::connect(("127.0.0.1", port))
            .unwrap_or_else(|e| panic!("connect 127.0.0.1:{port}: {e}"));
        let r = s.try_clone().expect("clone socket");
        let w = s.try_clone().expect("clone socket");
        let mut c = Smtp::over(Box::new(r), Box::new(w));
        c.tcp = Some(s);
        c
    }

    pub fn over(r: Box<dyn Read + Send>, w: Box<dyn Write + Send>) -> Smtp {
        let (tx, rx) = mpsc::channel();
        let mut r = r;
        thread::spawn(move || {
            let mut b = [0u8; 4096];
            loop {
                match r.read(&mut b) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if tx.send(b[..n].to_vec()).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let mut c = Smtp {
            w,
            rx,
            buf: Vec::new(),
            tcp: None,
            greeting: Reply {
                code: 0,
                text: String::new(),
            },
        };
        c.greeting = c.reply();
        c
    }

    /// Reads one (possibly multi-line) reply; panics on timeout or EOF.
    pub fn reply(&mut self) -> Reply {
        let end = Instant::now() + WAIT;
        let mut text = Vec::new();
        loop {
            while let Some(nl) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=nl).collect();
                let line = String::from_utf8_lossy(&line).trim_end().to_string();
                let code = line.get(..3).and_then(|c| c.parse::<u16>().ok());
                let more = line.as_bytes().get(3) == Some(&b'-');
                text.push(line.get(4..).unwrap_or("").to_string());
                match code {
                    Some(code) if !more => {
                        return Reply {
                            code,
                            text: text.join("\n"),
                        }
                    }
                    Some(_) => {}
                    None => panic!("not an SMTP reply line: {line:?}"),
                }
            }
            let left = end.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(chunk) => self.buf.extend_from_slice(&chunk),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("no SMTP reply within {WAIT:?} (partial: {text:?})")
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    // A closed connection reads as a pseudo reply so tests
                    // can assert on it.
                    return Reply {
                        code: 0,
                        text: format!("connection closed (partial: {text:?})"),
                    };
                }
            }
        }
    }

    pub fn cmd(&mut self, line: &str) -> Reply {
        self.w
            .write_all(format!("{line}\r\n").as_bytes())
            .and_then(|_| self.w.flush())
            .unwrap_or_else(|e| panic!("write {line:?}: {e}"));
        self.reply()
    }

    pub fn ehlo(&mut self, name: &str) -> Reply {
        let r = self.cmd(&format!("EHLO {name}"));
        assert_eq!(r.code, 250, "EHLO refused: {r}");
        r
    }

    /// One whole transaction. Returns the first reply that is not positive
    /// (MAIL, RCPT, DATA) or the reply to the end of data.
    pub fn send(&mut self, from: &str, to: &[&str], message: &[u8]) -> Reply {
        let r = self.cmd(&format!("MAIL FROM:<{from}>"));
        if !r.is_ok() {
            return r;
        }
        for rcpt in to {
            let r = self.cmd(&format!("RCPT TO:<{rcpt}>"));
            if !r.is_ok() {
                let _ = self.cmd("RSET");
                return r;
            }
        }
        self.data(message)
    }

    /// DATA and the message, after MAIL and RCPT; the reply to the end of data, or
    /// the refusal of DATA.
    pub fn data(&mut self, message: &[u8]) -> Reply {
        let r = self.cmd("DATA");
        if r.code != 354 {
            return r;
        }
        let data = smtp_data(message);
        self.w
            .write_all(&data)
            .and_then(|_| self.w.flush())
            .expect("write message data");
        self.reply()
    }

    pub fn quit(mut self) {
        let _ = self.w.write_all(b"QUIT\r\n");
        let _ = self.w.flush();
        let _ = self.reply();
        if let Some(s) = &self.tcp {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Smtp {
    fn drop(&mut self) {
        if let Some(s) = &self.tcp {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// Message bytes as sent after DATA: CRLF line ends, dot-stuffed, and the
/// terminating ".".
pub fn smtp_data(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 64);
    for line in lines(message) {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        let body = body.strip_suffix(b"\r").unwrap_or(body);
        if body.first() == Some(&b'.') {
            out.push(b'.');
        }
        out.extend_from_slice(body);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b".\r\n");
    out
}
