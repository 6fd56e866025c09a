//! A DNS server on a loopback UDP port that knows only TXT records given to it (DKIM
//! keys), so that a verifier which reads its keys from DNS (rspamd) runs without the
//! network. NXDOMAIN for every other name, no answer for another type of a known name.

use std::collections::HashMap;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

const TXT: u16 = 16;
const ANY: u16 = 255;
const NXDOMAIN: u8 = 3;
const FORMERR: u8 = 1;

pub struct DnsServer {
    pub port: u16,
    /// Every question asked so far, as `name/type`, for failure messages.
    asked: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl DnsServer {
    /// `records`: (name without the trailing dot, TXT text); names compare without case.
    pub fn start(records: &[(String, String)]) -> DnsServer {
        let sock = UdpSocket::bind("127.0.0.1:0").expect("bind the test DNS server");
        let port = sock.local_addr().unwrap().port();
        // The loop looks at `stop` between reads.
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let map: HashMap<String, String> = records
            .iter()
            .map(|(n, t)| (n.to_ascii_lowercase(), t.clone()))
            .collect();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (a, s) = (asked.clone(), stop.clone());
        let thread = thread::spawn(move || {
            let mut buf = [0u8; 1500];
            while !s.load(Ordering::Relaxed) {
                let Ok((n, peer)) = sock.recv_from(&mut buf) else {
                    continue;
                };
                if let Some((reply, q)) = answer(&buf[..n], &map) {
                    a.lock().unwrap().push(q);
                    let _ = sock.send_to(&reply, peer);
                }
            }
        });
        DnsServer {
            port,
            asked,
            stop,
            thread: Some(thread),
        }
    }

    pub fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The reply to one query and the question as `name/type`; None for a packet that is
/// not a query with a header (dropped, as a server would).
fn answer(q: &[u8], map: &HashMap<String, String>) -> Option<(Vec<u8>, String)> {
    if q.len() < 12 || q[2] & 0x80 != 0 {
        return None;
    }
    let question = parse_question(q);
    // Same id and opcode, RD copied; QR and AA set.
    let mut r = vec![q[0], q[1], 0x84 | (q[2] & 0x79), 0x00];
    let Some((name, qtype, end)) = question else {
        r[3] = FORMERR;
        r.extend_from_slice(&[0; 8]);
        return Some((r, "(unparsed)".into()));
    };
    let record = map.get(&name);
    let answers = match record {
        Some(text) if qtype == TXT || qtype == ANY => vec![text],
        _ => Vec::new(),
    };
    if record.is_none() {
        r[3] = NXDOMAIN;
    }
    // One question (copied as asked), the answers, no authority or additional
    // records: an EDNS OPT in the query gets a plain DNS reply.
    r.extend_from_slice(&[0, 1, 0, answers.len() as u8, 0, 0, 0, 0]);
    r.extend_from_slice(&q[12..end]);
    for text in answers {
        let mut rdata = Vec::new();
        // A TXT record is a run of strings of at most 255 octets each.
        for chunk in text.as_bytes().chunks(255) {
            rdata.push(chunk.len() as u8);
            rdata.extend_from_slice(chunk);
        }
        r.extend_from_slice(&[0xc0, 12]); // the name, pointing at the question
        r.extend_from_slice(&TXT.to_be_bytes());
        r.extend_from_slice(&1u16.to_be_bytes()); // IN
        r.extend_from_slice(&60u32.to_be_bytes());
        r.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        r.extend_from_slice(&rdata);
    }
    Some((r, format!("{name}/{qtype}")))
}

/// The first question: its name (lower case, labels joined by dots), type, and where
/// it ends in the packet.
fn parse_question(q: &[u8]) -> Option<(String, u16, usize)> {
    if u16::from_be_bytes([q[4], q[5]]) != 1 {
        return None;
    }
    let mut at = 12;
    let mut labels = Vec::new();
    loop {
        let len = *q.get(at)? as usize;
        at += 1;
        if len == 0 {
            break;
        }
        // Compression pointers (0xc0) never start a question's name.
        if len > 63 {
            return None;
        }
        labels.push(String::from_utf8_lossy(q.get(at..at + len)?).to_ascii_lowercase());
        at += len;
    }
    let qtype = u16::from_be_bytes([*q.get(at)?, *q.get(at + 1)?]);
    q.get(at + 3)?;
    Some((labels.join("."), qtype, at + 4))
}
