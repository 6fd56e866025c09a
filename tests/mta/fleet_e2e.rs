//! Several daemons behind one milter address: a private Postfix whose `smtpd_milters`
//! names an HAProxy (`mode tcp`, health checked on each daemon's `/readyz`) in front of
//! three mimeref-milter instances, under a bounded load of SMTP clients. Part-way
//! instance 1 gets SIGTERM (it drains; HAProxy must route around it), later instance 2
//! gets SIGKILL with a message in flight; instance 3 keeps the mail flowing.
//!
//! A client that gets a 4xx resends the same message (bounded retries, short back-off),
//! as an MTA's queue would. Each message is counted once: sent = delivered + rejected,
//! nothing lost, nothing bounced, each delivered message exactly what
//! `mimeref-milter fix --as-milter` writes offline.
//! Needs root, `postfix` and `haproxy`: `sudo scripts/install-test-deps`.
#[path = "../support/mod.rs"]
mod support;

use support::{message, mta};

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mta::{Daemon, Postfix, PostfixConfig, Smtp, TempDir, WAIT};

const CLIENTS: usize = 3;
const MESSAGES: usize = 150;
/// Attempts per message, 4xx replies included; with the back-off below about 10 s.
const ATTEMPTS: usize = 40;
/// Loopback clients count as inbound, so the built-in inbound policy applies.
const CONFIG: &str = "trusted_networks = []\n";
const FROM: &str = "alice@sender.example";
const TO: &str = "bob@receiver.example";

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis()
}

/// Message `id`: one in three has a fixable defect (a `cid:` reference whose part has
/// only `Content-Location: cid:…`, which the daemon fixes by inserting a Content-ID).
fn message(id: &str, fixable: bool) -> Vec<u8> {
    if fixable {
        let page = String::from_utf8(message::fixture("html/chrome-cid-location.eml"))
            .unwrap()
            .replace("From: <Saved by Blink>", &format!("From: {FROM}"));
        message::with_message_id(page.as_bytes(), id)
    } else {
        format!(
            "Message-ID: <{id}>\nFrom: {FROM}\nTo: {TO}\nSubject: fleet {id}\n\
             Date: Sat, 01 Mar 2025 10:00:00 +0000\n\nA small plain message.\n"
        )
        .into_bytes()
    }
}

/// A GET on a daemon's metrics address: status code and body.
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let code = text.split(' ').nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Some((code, body.to_string()))
}

struct Instance {
    name: &'static str,
    daemon: Daemon,
    metrics: u16,
}

impl Instance {
    fn start(name: &'static str) -> Instance {
        let metrics = mta::free_port();
        let daemon = Daemon::start(
            &format!("{CONFIG}metrics_listen = \"127.0.0.1:{metrics}\"\n"),
            &[],
        );
        assert!(mta::wait_port(metrics, WAIT), "{name}: no metrics endpoint");
        Instance {
            name,
            daemon,
            metrics,
        }
    }

    /// Milter connections open now (None once the endpoint is gone).
    fn connections_open(&self) -> Option<usize> {
        let (_, body) = http_get(self.metrics, "/metrics")?;
        body.lines()
            .find_map(|l| l.strip_prefix("mimeref_connections_open "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map(|v| v as usize)
    }

    /// Queue ids of the messages this instance gave a verdict for (its log line per
    /// message starts with the MTA's queue id).
    fn queue_ids(&self) -> Vec<String> {
        self.daemon
            .log()
            .lines()
            .filter(|l| l.contains(": direction=inbound(default) verdict="))
            .filter_map(|l| {
                let head = l.split(": direction=inbound(default) verdict=").next()?;
                head.split_whitespace().last().map(str::to_string)
            })
            .collect()
    }
}

/// `haproxy -f CFG -db` in front of the instances; every line it writes (its
/// per-connection log on stdout, server state changes on stderr) kept with the time
/// it was read.
struct Haproxy {
    child: Child,
    port: u16,
    lines: Arc<Mutex<Vec<(u128, String)>>>,
    _dir: TempDir,
}

impl Haproxy {
    fn start(instances: &[&Instance]) -> Haproxy {
        let dir = TempDir::new("haproxy");
        let port = mta::free_port();
        let servers: String = instances
            .iter()
            .map(|i| {
                format!(
                    "    server {} 127.0.0.1:{} check port {} inter 200ms fall 1 rise 2\n",
                    i.name, i.daemon.port, i.metrics
                )
            })
            .collect();
        // redispatch: a connection refused by an instance that has just closed its
        // socket (between SIGTERM and the next health check) goes to another one.
        let cfg = format!(
            "global
    log stdout format raw local0
    maxconn 1000
defaults
    mode tcp
    log global
    log-format \"conn %b/%s accept=%Ts.%ms Tc=%Tc Tt=%Tt ts=%ts\"
    option redispatch 1
    retries 3
    timeout connect 250ms
    timeout client 60s
    timeout server 60s
    timeout check 1s
frontend milter
    bind 127.0.0.1:{port}
    default_backend mimeref
backend mimeref
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
    option log-health-checks
{servers}"
        );
        let path = dir.path().join("haproxy.cfg");
        std::fs::write(&path, cfg).unwrap();
        let mut child = Command::new(Path::new(mta::SBIN).join("haproxy"))
            .arg("-f")
            .arg(&path)
            .arg("-db")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start haproxy");
        let lines: Arc<Mutex<Vec<(u128, String)>>> = Arc::default();
        let out = child.stdout.take().unwrap();
        let err = child.stderr.take().unwrap();
        for r in [
            Box::new(out) as Box<dyn Read + Send>,
            Box::new(err) as Box<dyn Read + Send>,
        ] {
            let lines = lines.clone();
            thread::spawn(move || {
                for l in BufReader::new(r).lines() {
                    let Ok(l) = l else { break };
                    lines.lock().unwrap().push((now_ms(), l));
                }
            });
        }
        let h = Haproxy {
            child,
            port,
            lines,
            _dir: dir,
        };
        assert!(mta::wait_port(port, WAIT), "haproxy:\n{}", h.text());
        h
    }

    fn text(&self) -> String {
        let l = self.lines.lock().unwrap();
        l.iter()
            .map(|(_, s)| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Waits until HAProxy has logged a passed health check of every server in
    /// `names` (option log-health-checks logs the first one, a change from unknown).
    fn wait_checked(&self, names: &[&str]) {
        let checked = mta::wait_for(WAIT, || {
            let t = self.text();
            names
                .iter()
                .all(|n| t.contains(&format!("Health check for server mimeref/{n} succeeded")))
                .then_some(())
        });
        assert!(
            checked.is_some(),
            "HAProxy did not pass a health check of each of {names:?} within {WAIT:?}:\n{}",
            self.text()
        );
    }

    /// When HAProxy said server `name` is DOWN (ms since the epoch).
    fn down_at(&self, name: &str) -> Option<u128> {
        let needle = format!("Server mimeref/{name} is DOWN");
        let l = self.lines.lock().unwrap();
        l.iter().find(|(_, s)| s.contains(&needle)).map(|(t, _)| *t)
    }

    /// Accept times (ms since the epoch) of the connections HAProxy handed to `name`.
    fn connections_to(&self, name: &str) -> Vec<u128> {
        let tag = format!("conn mimeref/{name} accept=");
        let l = self.lines.lock().unwrap();
        l.iter()
            .filter_map(|(_, s)| {
                let rest = s.strip_prefix(&tag)?;
                let stamp = rest.split_whitespace().next()?;
                let (sec, ms) = stamp.split_once('.')?;
                Some(sec.parse::<u128>().ok()? * 1000 + ms.parse::<u128>().ok()?)
            })
            .collect()
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        mta::stop_child(&mut self.child);
    }
}

#[derive(Default)]
struct Load {
    /// Clients wait before a new attempt while set (holder placement, below).
    paused: AtomicBool,
    active: AtomicUsize,
    accepted: AtomicUsize,
    rejected: AtomicUsize,
    tempfails: AtomicUsize,
    /// When each 250 to the end of data came.
    successes: Mutex<Vec<Instant>>,
    /// Message id -> the reply that ended its attempts.
    outcome: Mutex<HashMap<String, u16>>,
    odd: Mutex<Vec<String>>,
}

impl Load {
    /// Sends `msg` in a fresh session each attempt until it is accepted or refused
    /// for good; a 4xx (or a closed connection) means back off and send it again.
    fn deliver(&self, port: u16, id: &str, msg: &[u8]) {
        for attempt in 0..ATTEMPTS {
            let end = Instant::now() + WAIT;
            while self.paused.load(Ordering::SeqCst) && Instant::now() < end {
                thread::sleep(Duration::from_millis(10));
            }
            self.active.fetch_add(1, Ordering::SeqCst);
            let mut c = Smtp::connect(port);
            let r = if c.greeting.code == 220 {
                c.ehlo("client.example");
                c.send(FROM, &[TO], msg)
            } else {
                c.greeting.clone()
            };
            c.quit();
            self.active.fetch_sub(1, Ordering::SeqCst);
            match r.code {
                250 => {
                    self.successes.lock().unwrap().push(Instant::now());
                    self.accepted.fetch_add(1, Ordering::SeqCst);
                    self.outcome.lock().unwrap().insert(id.into(), 250);
                    return;
                }
                500..=599 => {
                    self.rejected.fetch_add(1, Ordering::SeqCst);
                    self.odd.lock().unwrap().push(format!("{id}: {r}"));
                    self.outcome.lock().unwrap().insert(id.into(), r.code);
                    return;
                }
                _ => {
                    self.tempfails.fetch_add(1, Ordering::SeqCst);
                    if self.odd.lock().unwrap().len() < 40 {
                        self.odd
                            .lock()
                            .unwrap()
                            .push(format!("{id} attempt {attempt}: {r}"));
                    }
                    // Back-off before the next attempt, as an SMTP client would.
                    thread::sleep(Duration::from_millis(50 * (attempt as u64 + 1).min(6)));
                }
            }
        }
        self.outcome.lock().unwrap().insert(id.into(), 0);
    }

    /// Stops new attempts and waits (bounded) until none runs and no milter
    /// connection is open on the live instances.
    fn pause(&self, live: &[&Instance]) {
        self.paused.store(true, Ordering::SeqCst);
        let quiet = mta::wait_for(WAIT, || {
            (self.active.load(Ordering::SeqCst) == 0
                && live.iter().all(|i| i.connections_open() == Some(0)))
            .then_some(())
        });
        assert!(quiet.is_some(), "the load did not pause");
    }

    fn resume(&self) {
        self.paused.store(false, Ordering::SeqCst);
    }
}

/// An SMTP session left open after RCPT: a transaction in flight on the instance
/// that HAProxy gave its milter connection to.
struct Holder {
    id: String,
    msg: Vec<u8>,
    smtp: Smtp,
}

/// With the load paused, opens sessions (at most 4) until one has its milter
/// connection on `target`, found by the instances' `mimeref_connections_open`.
/// Returns that one and the others (to be finished like any message).
fn hold_on(pf: &Postfix, live: &[&Instance], target: &str, tag: &str) -> (Holder, Vec<Holder>) {
    let mut others = Vec::new();
    for k in 0..4 {
        let id = format!("holder-{tag}-{k}@sender.example");
        let msg = message(&id, k % 2 == 0);
        let mut smtp = pf.smtp();
        let r = smtp.cmd(&format!("MAIL FROM:<{FROM}>"));
        assert_eq!(r.code, 250, "{r}");
        let r = smtp.cmd(&format!("RCPT TO:<{TO}>"));
        assert_eq!(r.code, 250, "{r}");
        let open = mta::wait_for(Duration::from_secs(5), || {
            let counts: Vec<usize> = live
                .iter()
                .map(|i| i.connections_open().unwrap_or(0))
                .collect();
            (counts.iter().sum::<usize>() == k + 1).then_some(counts)
        })
        .expect("holder's milter connection not seen");
        let h = Holder { id, msg, smtp };
        let on_target = live
            .iter()
            .zip(&open)
            .any(|(i, &n)| i.name == target && n == 1);
        if on_target {
            return (h, others);
        }
        others.push(h);
    }
    panic!("no holder session reached {target}");
}

/// Longest time without a successful delivery in the `window` after `from` (the time
/// from `from` to the first success counts).
fn gap_after(successes: &[Instant], from: Instant, window: Duration) -> Duration {
    let mut last = from;
    let mut gap = Duration::ZERO;
    for &t in successes.iter().filter(|&&t| t > from && t < from + window) {
        gap = gap.max(t - last);
        last = t;
    }
    gap
}

/// The three instances, HAProxy in front of them and Postfix in front of HAProxy.
/// Fields drop in order: Postfix first, the instances last.
struct Fleet {
    pf: Arc<Postfix>,
    hp: Haproxy,
    m3: Instance,
    m2: Instance,
    m1: Instance,
}

impl Fleet {
    /// Starts the fleet and returns once HAProxy has checked every instance and holds
    /// none of them down.
    fn start() -> Fleet {
        let m1 = Instance::start("m1");
        let m2 = Instance::start("m2");
        let m3 = Instance::start("m3");
        let hp = Haproxy::start(&[&m1, &m2, &m3]);
        // Servers count as up until a check fails: wait for each one's first check.
        hp.wait_checked(&["m1", "m2", "m3"]);
        let ready = mta::wait_for(WAIT, || {
            let t = hp.text();
            ["m1", "m2", "m3"]
                .iter()
                .all(|n| !t.contains(&format!("Server mimeref/{n} is DOWN")))
                .then_some(())
        });
        assert!(ready.is_some(), "{}", hp.text());
        let pf = Arc::new(Postfix::start(&PostfixConfig::with_milter(&format!(
            "inet:127.0.0.1:{}",
            hp.port
        ))));
        Fleet { pf, hp, m3, m2, m1 }
    }
}

/// The messages of the load, one in three fixable.
fn load_messages() -> Vec<(String, Vec<u8>)> {
    (0..MESSAGES)
        .map(|n| {
            let id = format!("fleet-{n}@sender.example");
            let msg = message(&id, n % 3 == 0);
            (id, msg)
        })
        .collect()
}

/// `CLIENTS` threads sending `sent` between them through Postfix.
fn start_clients(
    pf: &Arc<Postfix>,
    load: &Arc<Load>,
    sent: &[(String, Vec<u8>)],
) -> Vec<thread::JoinHandle<()>> {
    (0..CLIENTS)
        .map(|w| {
            let (pf, load) = (pf.clone(), load.clone());
            let mine: Vec<(String, Vec<u8>)> =
                sent.iter().skip(w).step_by(CLIENTS).cloned().collect();
            thread::spawn(move || {
                for (id, msg) in mine {
                    load.deliver(pf.port, &id, &msg);
                }
            })
        })
        .collect()
}

/// Waits (bounded) until the load has had `n` messages accepted.
fn accepted_reach(load: &Load, n: usize) {
    let r = mta::wait_for(Duration::from_secs(60), || {
        (load.accepted.load(Ordering::SeqCst) >= n).then_some(())
    });
    assert!(r.is_some(), "load stalled before {n} accepted");
}

impl Load {
    /// A message sent outside the clients (a holder's) was accepted.
    fn count_accepted(&self, id: &str) {
        self.successes.lock().unwrap().push(Instant::now());
        self.accepted.fetch_add(1, Ordering::SeqCst);
        self.outcome.lock().unwrap().insert(id.to_string(), 250);
    }
}

/// Ends the sessions opened on the way to a holder: each must be accepted.
fn finish_others(load: &Load, others: Vec<Holder>, sent: &mut Vec<(String, Vec<u8>)>) {
    for mut h in others {
        let r = h.smtp.data(&h.msg);
        h.smtp.quit();
        assert_eq!(r.code, 250, "{}: {r}", h.id);
        load.count_accepted(&h.id);
        sent.push((h.id, h.msg));
    }
}

/// What the SIGTERM step leaves for the checks at the end.
struct Drained {
    /// When m1 got SIGTERM.
    t_term: Instant,
    /// When HAProxy marked m1 down (ms since the epoch).
    down1: u128,
    /// When m1 had exited (ms since the epoch).
    drained_ms: u128,
    /// The message held open on m1 over SIGTERM.
    held: String,
}

/// Instance 1: SIGTERM with a transaction of its own open. It must stop being
/// offered connections, finish that message, and exit.
fn drain_m1(f: &mut Fleet, load: &Load, sent: &mut Vec<(String, Vec<u8>)>) -> Drained {
    accepted_reach(load, MESSAGES / 3);
    load.pause(&[&f.m1, &f.m2, &f.m3]);
    let (mut h1, others1) = hold_on(&f.pf, &[&f.m1, &f.m2, &f.m3], "m1", "term");
    // Postfix has passed MAIL and RCPT on by the time it answers RCPT; a moment more
    // for the daemon to have read them through HAProxy. A fixed time: the daemon
    // negotiates no reply to MAIL and RCPT and shows nothing when it has read them.
    thread::sleep(Duration::from_millis(200));
    let t_term = Instant::now();
    f.m1.daemon.signal_term();
    load.resume();
    let down1 = mta::wait_for(Duration::from_secs(5), || f.hp.down_at("m1"))
        .unwrap_or_else(|| panic!("HAProxy did not mark m1 down:\n{}", f.hp.text()));
    assert!(
        f.m1.daemon.try_wait().is_none(),
        "m1 exited with a message in flight:\n{}",
        f.m1.daemon.log()
    );
    let r = h1.smtp.data(&h1.msg);
    assert_eq!(
        r.code,
        250,
        "the drained message: {r}\n{}",
        f.m1.daemon.log()
    );
    h1.smtp.quit();
    load.count_accepted(&h1.id);
    sent.push((h1.id.clone(), h1.msg.clone()));
    let m1_exit = mta::wait_for(Duration::from_secs(10), || f.m1.daemon.try_wait())
        .unwrap_or_else(|| panic!("m1 did not exit after draining:\n{}", f.m1.daemon.log()));
    let drained_ms = now_ms();
    assert!(
        m1_exit.success(),
        "m1 exit: {m1_exit}\n{}",
        f.m1.daemon.log()
    );
    // The held message at least (a load session may have opened one more before the
    // socket closed).
    assert!(
        f.m1.daemon.log().contains("waiting up to 30s for "),
        "{}",
        f.m1.daemon.log()
    );
    finish_others(load, others1, sent);
    Drained {
        t_term,
        down1,
        drained_ms,
        held: h1.id,
    }
}

/// What the SIGKILL step leaves for the checks at the end.
struct Killed {
    /// When the load paused to place the holder on m2 (the end of the SIGTERM window).
    pause2: Instant,
    /// When m2 got SIGKILL.
    t_kill: Instant,
}

/// Instance 2: SIGKILL with a transaction open on it, under load. That message gets a
/// 4xx (milter_default_action = tempfail) and is sent again.
fn kill_m2(
    f: &mut Fleet,
    load: &Load,
    clients: &[thread::JoinHandle<()>],
    sent: &mut Vec<(String, Vec<u8>)>,
) -> Killed {
    accepted_reach(load, 2 * MESSAGES / 3);
    let pause2 = Instant::now();
    load.pause(&[&f.m2, &f.m3]);
    let (mut h2, others2) = hold_on(&f.pf, &[&f.m2, &f.m3], "m2", "kill");
    // As for m1: nothing shows the daemon has read MAIL and RCPT; a fixed moment.
    thread::sleep(Duration::from_millis(200));
    load.resume();
    // Under load: the kill comes once load sessions are open again (unless the
    // clients have sent all theirs).
    let busy = mta::wait_for(Duration::from_secs(10), || {
        (load.active.load(Ordering::SeqCst) > 0 || clients.iter().all(|c| c.is_finished()))
            .then_some(())
    });
    assert!(busy.is_some(), "the load did not resume");
    let t_kill = Instant::now();
    f.m2.daemon.kill();
    let r = h2.smtp.data(&h2.msg);
    h2.smtp.quit();
    assert_eq!(r.class(), 4, "the message in flight on the killed m2: {r}");
    load.tempfails.fetch_add(1, Ordering::SeqCst);
    finish_others(load, others2, sent);
    load.deliver(f.pf.port, &h2.id, &h2.msg);
    sent.push((h2.id.clone(), h2.msg.clone()));
    Killed { pause2, t_kill }
}

/// What came out of Postfix once the load is over, and which instance decided each
/// delivered message.
struct Outcome {
    accepted: usize,
    rejected: usize,
    delivered: Vec<mta::Delivered>,
    /// Ids of the sent messages not accepted, or not delivered exactly once.
    lost: Vec<String>,
    log: String,
    bounced: usize,
    queue: Vec<String>,
    /// Each instance's name and the queue ids it gave a verdict for.
    ids: Vec<(&'static str, Vec<String>)>,
    /// Delivered messages per instance.
    served: HashMap<&'static str, usize>,
}

/// Delivered messages by their Message-ID.
fn by_message_id(delivered: &[mta::Delivered]) -> HashMap<String, Vec<&mta::Delivered>> {
    let mut by_id: HashMap<String, Vec<&mta::Delivered>> = HashMap::new();
    for d in delivered {
        for v in d.header("Message-ID") {
            by_id
                .entry(v.trim_matches(['<', '>']).to_string())
                .or_default()
                .push(d);
        }
    }
    by_id
}

/// The queue id Postfix gave a delivered message (its Received field).
fn queue_id(d: &mta::Delivered) -> Option<String> {
    d.header("Received")
        .join(" ")
        .split("with ESMTP id ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
}

/// Everything accepted comes out of the queue, once: collects what came out.
fn collect_outcome(f: &Fleet, load: &Load, sent: &[(String, Vec<u8>)]) -> Outcome {
    let accepted = load.accepted.load(Ordering::SeqCst);
    let rejected = load.rejected.load(Ordering::SeqCst);
    // Whole messages only: smtp-sink creates a dump file when the transaction starts,
    // so counting files let the last message, still being written, count as lost.
    let delivered = mta::wait_for(Duration::from_secs(60), || {
        let d = f.pf.delivered();
        (d.len() >= accepted).then_some(d)
    })
    .unwrap_or_else(|| f.pf.delivered());
    let by_id = by_message_id(&delivered);
    let outcome = load.outcome.lock().unwrap().clone();
    let lost: Vec<String> = sent
        .iter()
        .map(|(id, _)| id)
        .filter(|id| outcome.get(*id) != Some(&250) || by_id.get(*id).map(Vec::len) != Some(1))
        .cloned()
        .collect();
    let log = f.pf.log();
    let bounced = log.matches("status=bounced").count();
    let queue = f.pf.queue_json();

    // Which instance gave each delivered message its verdict (queue id in the trace).
    let ids: Vec<(&'static str, Vec<String>)> = [&f.m1, &f.m2, &f.m3]
        .iter()
        .map(|i| (i.name, i.queue_ids()))
        .collect();
    let mut served: HashMap<&'static str, usize> = HashMap::new();
    for d in &delivered {
        let qid = queue_id(d)
            .unwrap_or_default()
            .trim_end_matches(';')
            .to_string();
        if let Some((name, _)) = ids.iter().find(|(_, q)| q.contains(&qid)) {
            *served.entry(name).or_default() += 1;
        }
    }
    Outcome {
        accepted,
        rejected,
        delivered,
        lost,
        log,
        bounced,
        queue,
        ids,
        served,
    }
}

/// The figures of the run, on standard output (`--nocapture`): BENCHMARKS.md quotes
/// them.
fn print_figures(
    f: &Fleet,
    load: &Load,
    sent: &[(String, Vec<u8>)],
    o: &Outcome,
    load_time: Duration,
    term: &Drained,
    kill: &Killed,
) {
    let successes = load.successes.lock().unwrap().clone();
    // Up to 5 s after each signal, and for SIGTERM only until the load paused again
    // (the pause for the second holder is no failover).
    let window = Duration::from_secs(5);
    let gap_term = gap_after(
        &successes,
        term.t_term,
        window.min(kill.pause2 - term.t_term),
    );
    let gap_kill = gap_after(&successes, kill.t_kill, window);
    let m1_after_down =
        f.hp.connections_to("m1")
            .into_iter()
            .filter(|&t| t > term.down1)
            .count();
    let m1_before = f.hp.connections_to("m1").len();
    println!(
        "fleet: {} messages ({MESSAGES} + {} holders), {CLIENTS} clients, {:.1} s of load, {:.1} msg/s accepted",
        sent.len(),
        sent.len() - MESSAGES,
        load_time.as_secs_f64(),
        o.accepted as f64 / load_time.as_secs_f64()
    );
    println!(
        "fleet: sent {} = delivered {} + rejected {}; lost {}; bounced {}; 4xx answered and resent {}",
        sent.len(),
        o.delivered.len(),
        o.rejected,
        o.lost.len(),
        o.bounced,
        load.tempfails.load(Ordering::SeqCst)
    );
    println!(
        "fleet: verdicts by instance m1 {} (SIGTERM), m2 {} (SIGKILL), m3 {}; HAProxy connections to m1 {m1_before}, after its DOWN {m1_after_down}",
        o.served.get("m1").unwrap_or(&0),
        o.served.get("m2").unwrap_or(&0),
        o.served.get("m3").unwrap_or(&0),
    );
    println!(
        "fleet: failover gap (longest time without a 250 after the signal; SIGTERM: {} ms until the next pause, SIGKILL: {} s): SIGTERM m1 {} ms, SIGKILL m2 {} ms",
        window.min(kill.pause2 - term.t_term).as_millis(),
        window.as_secs(),
        gap_term.as_millis(),
        gap_kill.as_millis()
    );
    let first = |from: Instant| -> Vec<u128> {
        let mut v: Vec<u128> = successes
            .iter()
            .filter(|&&t| t > from)
            .map(|&t| (t - from).as_millis())
            .collect();
        v.sort();
        v.truncate(6);
        v
    };
    println!(
        "fleet: first successes (ms) after SIGTERM {:?}, after SIGKILL {:?}; m1 marked down {} ms after SIGTERM",
        first(term.t_term),
        first(kill.t_kill),
        term.down1 as i128 - (now_ms() as i128 - term.t_term.elapsed().as_millis() as i128)
    );
    for o in load.odd.lock().unwrap().iter().take(20) {
        println!("fleet: {o}");
    }
}

/// Sent = delivered + rejected, nothing lost, rejected or bounced, the queue empty.
fn assert_nothing_lost(load: &Load, sent: &[(String, Vec<u8>)], o: &Outcome) {
    let (lost, queue) = (&o.lost, &o.queue);
    assert!(lost.is_empty(), "lost: {lost:?}\nqueue: {queue:?}");
    assert_eq!(o.rejected, 0, "{:?}", load.odd.lock().unwrap());
    assert_eq!(
        sent.len(),
        o.delivered.len() + o.rejected,
        "sent != delivered + rejected"
    );
    assert_eq!(o.bounced, 0, "{}", o.log);
    assert!(queue.is_empty(), "left in the queue: {queue:?}");
}

/// Each instance carried part of the mail; all of it went through one of them.
fn assert_every_instance_served(o: &Outcome) {
    let served = &o.served;
    for n in ["m1", "m2", "m3"] {
        assert!(
            served.get(n).is_some_and(|&c| c > 0),
            "{n} served nothing: {served:?}"
        );
    }
    assert_eq!(
        served.values().sum::<usize>(),
        o.delivered.len(),
        "{served:?}"
    );
}

/// The drained instance: messages before, its held message during the drain, no
/// connection from HAProxy once it was marked down, and none after it exited.
fn assert_m1_drained(f: &Fleet, o: &Outcome, term: &Drained) {
    let m1_before = f.hp.connections_to("m1").len();
    let m1_after_down: Vec<u128> =
        f.hp.connections_to("m1")
            .into_iter()
            .filter(|&t| t > term.down1)
            .collect();
    assert!(m1_before > 1, "{}", f.hp.text());
    assert!(
        m1_after_down.is_empty(),
        "{m1_after_down:?} after {}",
        term.down1
    );
    assert!(f
        .hp
        .connections_to("m1")
        .iter()
        .all(|&t| t < term.drained_ms));
    let by_id = by_message_id(&o.delivered);
    let h1_qid = queue_id(by_id[&term.held][0]).unwrap_or_default();
    assert!(
        o.ids[0].1.contains(&h1_qid),
        "the message held over SIGTERM was not m1's"
    );
}

/// Every delivered message is what the offline fix writes, and the fixable ones were
/// fixed. Returns how many were.
fn assert_delivered_as_offline(sent: &[(String, Vec<u8>)], o: &Outcome) -> usize {
    let by_id = by_message_id(&o.delivered);
    let mut fixed = 0;
    for (id, msg) in sent {
        let got = by_id[id][0].without_trace();
        let want = mta::as_milter("inbound", CONFIG, msg);
        assert_eq!(got, want, "{id}\n{}", mta::show_diff(&want, &got));
        if String::from_utf8_lossy(&got).contains("\nContent-ID: <css-1234@mhtml.blink>\n") {
            fixed += 1;
        }
    }
    assert!(fixed >= MESSAGES / 3, "only {fixed} fixed");
    fixed
}

#[test]
fn fleet_behind_haproxy_survives_drain_and_crash() {
    if !mta::require_postfix() || !mta::require_haproxy() {
        return;
    }
    let started = Instant::now();
    let mut f = Fleet::start();
    let mut sent = load_messages();
    let load = Arc::new(Load::default());
    let load_start = Instant::now();
    let clients = start_clients(&f.pf, &load, &sent);

    let term = drain_m1(&mut f, &load, &mut sent);
    let kill = kill_m2(&mut f, &load, &clients, &mut sent);
    for c in clients {
        c.join().expect("client thread");
    }
    let load_time = load_start.elapsed();

    let o = collect_outcome(&f, &load, &sent);
    print_figures(&f, &load, &sent, &o, load_time, &term, &kill);
    assert_nothing_lost(&load, &sent, &o);
    assert_every_instance_served(&o);
    assert_m1_drained(&f, &o, &term);
    let fixed = assert_delivered_as_offline(&sent, &o);
    println!(
        "fleet: {fixed} delivered fixed, as fix --as-milter writes; {:.1} s in all",
        started.elapsed().as_secs_f64()
    );
    assert!(started.elapsed() < Duration::from_secs(90));
}

/// Messages per second through HAProxy with one instance, then with two, each for the
/// same time (`MIMEREF_FLEET_SECONDS`, default 10) with the same clients. A by-hand
/// measurement for BENCHMARKS.md, not a check: `cargo test --test fleet_e2e -- --ignored
/// --nocapture`.
#[test]
#[ignore = "a measurement; run by hand"]
fn fleet_throughput_one_vs_two_instances() {
    if !mta::require_postfix() || !mta::require_haproxy() {
        return;
    }
    let seconds: u64 = std::env::var("MIMEREF_FLEET_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    for n in [1usize, 2] {
        let instances: Vec<Instance> = ["m1", "m2"][..n]
            .iter()
            .map(|name| Instance::start(name))
            .collect();
        let hp = Haproxy::start(&instances.iter().collect::<Vec<_>>());
        hp.wait_checked(&["m1", "m2"][..n]);
        let pf = Arc::new(Postfix::start(&PostfixConfig::with_milter(&format!(
            "inet:127.0.0.1:{}",
            hp.port
        ))));
        let load = Arc::new(Load::default());
        let end = Instant::now() + Duration::from_secs(seconds);
        let clients: Vec<_> = (0..CLIENTS)
            .map(|w| {
                let (pf, load) = (pf.clone(), load.clone());
                thread::spawn(move || {
                    let mut k = w;
                    while Instant::now() < end {
                        let id = format!("rate-{k}@sender.example");
                        load.deliver(pf.port, &id, &message(&id, k % 3 == 0));
                        k += CLIENTS;
                    }
                })
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }
        let accepted = load.accepted.load(Ordering::SeqCst);
        println!(
            "fleet rate: {n} instance(s), {CLIENTS} clients, {seconds} s: {accepted} accepted, {:.1} msg/s, {} 4xx",
            accepted as f64 / seconds as f64,
            load.tempfails.load(Ordering::SeqCst)
        );
        let per: Vec<usize> = instances.iter().map(|i| i.queue_ids().len()).collect();
        println!("fleet rate: verdicts per instance {per:?}");
        assert!(per.iter().all(|&c| c > 0));
    }
}
