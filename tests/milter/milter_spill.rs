//! Messages past `[limits] spill_threshold` go to an unlinked file in `spill_directory`
//! while they are received and are read back at end of message: the actions must be
//! exactly those of a message kept in memory (body replacement byte for byte, the report
//! header). The daemon runs in this process, so its open files are ours: the spill file
//! shows up in /proc/self/fd as `DIR/#INODE (deleted)` (made with O_TMPFILE, it never
//! had a name).

#[path = "../support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use indymilter_test::{ProtoOpts, Status, TestConnection};
use mimeref_milter::engine;
use mimeref_milter::Config;
use mimeref_milter::Direction;
use support::message::with_attachment;
use support::milter::*;
use support::mta::{free_port, Daemon};
use support::xorshift::XorShift64;

const THRESHOLD: usize = 64 << 10;

/// nested-extbody.eml with a base64 attachment that takes it to about `size` octets.
fn large_nested(size: usize) -> Vec<u8> {
    with_attachment(size, b"--outer--", true)
}

/// A fresh, empty spill directory of this test's own.
fn spill_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("milter-tests")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The files of this process open in `dir` (as /proc shows them: unlinked ones end in
/// " (deleted)").
fn open_in(dir: &Path) -> Vec<String> {
    let prefix = format!("{}/", dir.display());
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|t| t.display().to_string())
        .filter(|t| t.starts_with(&prefix))
        .collect()
}

fn config(dir: &Path) -> String {
    format!(
        "[limits]\nspill_threshold = {THRESHOLD}\nspill_directory = \"{}\"\n",
        dir.display()
    )
}

#[tokio::test]
async fn a_message_past_the_threshold_spills_into_the_directory_and_gets_the_same_fix() {
    let dir = spill_dir("spill-past");
    let m = Milter::start("spill-past", &config(&dir)).await;
    let mut c = m.conn().await;
    connect(&mut c, REMOTE, None).await;
    let msg = eml(&large_nested(4 * THRESHOLD));
    assert_eq!(c.mail(["<a@example.org>"]).await.unwrap(), Status::Continue);
    send_headers(&mut c, &msg).await;
    for chunk in msg.body.chunks(65535) {
        c.body(chunk.to_vec()).await.unwrap();
    }
    // Body chunks get no reply: wait until the daemon has written past the threshold.
    let open = support::wait_until(
        "a spill file open in the spool directory",
        Duration::from_secs(10),
        Duration::from_millis(10),
        || async {
            let open = open_in(&dir);
            if open.is_empty() {
                Err(format!("nothing open in {}", dir.display()))
            } else {
                Ok(open)
            }
        },
    )
    .await;
    assert_eq!(open.len(), 1, "{open:?}");
    assert!(open[0].ends_with(" (deleted)"), "{open:?}");
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "the spill file is unlinked at once"
    );

    let (actions, status) = c.eom().await.unwrap();
    assert!(
        open_in(&dir).is_empty(),
        "spill file still open after end of message"
    );
    c.close().await.unwrap();
    m.stop().await;
    assert_eq!(status, Status::Accept);
    let body = replaced_body(&actions).expect("body replaced");
    let (wire, header_len) = as_received(&msg);
    let (fixed, _) =
        engine::fix(&wire, &Config::builtin().engine_options(Direction::Inbound)).unwrap();
    assert_eq!(body.len(), fixed.len() - header_len);
    assert!(
        body == fixed[header_len..],
        "replacement differs from the offline fix"
    );
    assert_ne!(body, msg.body);
    let rep = report(&actions, "X-MIMERef").expect("report header");
    assert!(rep.contains("fixed=extbody-url-unquoted"), "{rep}");
    assert!(!rep.contains("oversize"), "{rep}");
}

#[tokio::test]
async fn a_message_under_the_threshold_stays_in_memory() {
    let dir = spill_dir("spill-under");
    let m = Milter::start("spill-under", &config(&dir)).await;
    // Replies at every stage: once the last body chunk is answered, the daemon has
    // taken all of it.
    let mut c = m.conn_replying().await;
    assert!(!c.negotiated_opts().contains(ProtoOpts::NOREPLY_BODY));
    connect(&mut c, REMOTE, None).await;
    let msg = eml(&large_nested(THRESHOLD - 4096));
    assert!(as_received(&msg).0.len() <= THRESHOLD);
    assert_eq!(c.mail(["<a@example.org>"]).await.unwrap(), Status::Continue);
    send_headers(&mut c, &msg).await;
    for chunk in msg.body.chunks(65535) {
        assert_eq!(c.body(chunk.to_vec()).await.unwrap(), Status::Continue);
    }
    assert!(open_in(&dir).is_empty(), "{:?}", open_in(&dir));
    let (actions, status) = c.eom().await.unwrap();
    assert_eq!(status, Status::Accept);
    assert!(replaced_body(&actions).is_some());
    c.close().await.unwrap();
    m.stop().await;
}

#[tokio::test]
async fn large_messages_in_memory_one_after_another_each_get_their_own_fix() {
    // Past the first 16 KB a message continues in a buffer left by an earlier large
    // message, or as chunks joined at end of message: a larger message, then a smaller
    // one into the same buffer (stale octets past its end must not count), then one
    // larger than any buffer kept.
    let m = Milter::start("in-memory-sequence", "").await;
    let mut c = m.conn().await;
    connect(&mut c, REMOTE, None).await;
    let env = Envelope {
        queue_id: None,
        auth: None,
    };
    let options = Config::builtin().engine_options(Direction::Inbound);
    for size in [1_500_000, 300_000, 1_500_000, 2_500_000] {
        let msg = eml(&large_nested(size));
        let (actions, status) = send(&mut c, &env, &msg).await;
        assert_eq!(status, Status::Accept, "{size}");
        let (wire, header_len) = as_received(&msg);
        let (fixed, _) = engine::fix(&wire, &options).unwrap();
        let body = replaced_body(&actions).expect("body replaced");
        assert!(body == fixed[header_len..], "{size}: not the offline fix");
        let rep = report(&actions, "X-MIMERef").expect("report header");
        assert!(!rep.contains("oversize"), "{size}: {rep}");
    }
    c.close().await.unwrap();
    m.stop().await;
}

// ---------------------------------------------------------------------------------------
// When the spill fails: a full disk, files put in the way, internal errors. These run the
// real binary (support::mta::Daemon): its log and its /metrics are its own, so the
// counts in the log lines can be checked against the metrics exactly.

/// A tmpfs of `size` (mount(8) syntax, e.g. "6m") for one test, unmounted on drop: a
/// spill directory that really runs out of space (ENOSPC). Needs root, as the suite
/// has in CI; without it the test fails and says so.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(name: &str, size: &str) -> Tmpfs {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join("milter-tests")
            .join(name);
        // A mount left behind by an interrupted run.
        let _ = Command::new("umount").arg("-l").arg(&dir).output();
        std::fs::create_dir_all(&dir).unwrap();
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(&dir)
            .output();
        match out {
            Ok(o) if o.status.success() => Tmpfs(dir),
            Ok(o) => panic!(
                "cannot mount a {size} tmpfs on {}: {}; this test needs a spill directory \
                 that really fills up: run it as root (CI runs the suite as root)",
                dir.display(),
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            Err(e) => panic!("cannot run mount(8): {e}; this test needs root and util-linux"),
        }
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// nested-extbody.eml with the base64 attachment of [`large_nested`] put first, so that
/// its defect (extbody-url-unquoted) comes after the attachment, at the end of a message
/// of about `size` octets: only a message read whole shows it.
fn large_defect_last(size: usize) -> Vec<u8> {
    with_attachment(size, b"--outer\r\n", false)
}

/// A message of about `size` octets without any finding: a text part and a base64
/// attachment.
fn large_clean(size: usize) -> Vec<u8> {
    let mut out = b"From: alice@example.org\r\nTo: bob@example.net\r\n\
Subject: a large clean message\r\nMessage-ID: <large-clean@example.org>\r\n\
Date: Mon, 1 Jan 2024 00:00:00 +0000\r\nMIME-Version: 1.0\r\n\
Content-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n--b1\r\n\
Content-Type: text/plain; charset=us-ascii\r\n\r\nSee the attachment.\r\n--b1\r\n\
Content-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\
Content-Disposition: attachment; filename=\"data.bin\"\r\n\r\n"
        .to_vec();
    let line = b"QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAx\r\n";
    while out.len() < size {
        out.extend_from_slice(line);
    }
    out.extend_from_slice(b"--b1--\r\n");
    out
}

/// The real binary with `config` and its HTTP endpoint on a port of its own.
fn start_real(config: &str, env: &[(&str, &str)]) -> (Daemon, std::net::SocketAddr) {
    let http: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let d = Daemon::start_with_env(&format!("metrics_listen = \"{http}\"\n{config}"), &[], env);
    (d, http)
}

fn milter_addr(d: &Daemon) -> std::net::SocketAddr {
    format!("127.0.0.1:{}", d.port).parse().unwrap()
}

/// A connection answered at every stage (no "no reply" stages): once the last body chunk
/// is answered, the daemon has taken all of it.
async fn replying(addr: std::net::SocketAddr) -> TestConnection {
    let mut c = TestConnection::configure()
        .exact_leading_space(true)
        .available_opts(ProtoOpts::all() - NO_REPLY_ALL)
        .open_tcp(addr)
        .await
        .unwrap();
    connect(&mut c, REMOTE, None).await;
    c
}

/// MAIL, the heading and the whole body, without end of message.
async fn send_all_but_eom(c: &mut TestConnection, msg: &Eml) {
    assert_eq!(c.mail(["<a@example.org>"]).await.unwrap(), Status::Continue);
    send_headers(c, msg).await;
    for chunk in msg.body.chunks(65535) {
        assert_eq!(c.body(chunk.to_vec()).await.unwrap(), Status::Continue);
    }
}

/// The value of one series in a scrape (`name{labels}` as the exporter writes it); 0
/// when absent.
fn series(metrics: &str, key: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The sum of the counts in the log lines that match `re` (its first group).
fn logged(log: &str, re: &str) -> u64 {
    let re = regex::Regex::new(re).unwrap();
    log.lines()
        .filter_map(|l| re.captures(l))
        .map(|c| c[1].parse::<u64>().unwrap())
        .sum()
}

/// The files the process `pid` holds open in `dir`, with the /proc entry of each.
fn open_by(pid: u32, dir: &Path) -> Vec<(PathBuf, String)> {
    let prefix = format!("{}/", dir.display());
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            let t = std::fs::read_link(&p).ok()?.display().to_string();
            t.starts_with(&prefix).then_some((p, t))
        })
        .collect()
}

fn reply_text(st: &Status) -> String {
    match st {
        Status::Reject { message: Some(m) } | Status::Tempfail { message: Some(m) } => {
            m.to_string_lossy().into_owned()
        }
        other => format!("{other:?}"),
    }
}

const MESSAGE_10MB: usize = 10_000_000;

/// The issue's reproduction: spill_directory on a 6 MiB tmpfs, messages of 10 MB (well
/// under max_message_size). Before: the failed write cut the message short, so it was
/// passed on unanalysed as `message-too-large` (6 of 6 accepted although their defect
/// is `reject`), and with `oversize_action = "reject"` clean mail bounced (4 of 4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_spill_disk_neither_lets_a_defect_through_nor_bounces_clean_mail() {
    let disk = Tmpfs::mount("full-disk", "6m");
    let limits = format!(
        "[limits]\nspill_directory = \"{}\"\n",
        disk.path().display()
    );

    let (mut d, http) = start_real(
        &format!("{limits}[policy.inbound]\n\"extbody-url-unquoted\" = \"reject\"\n"),
        &[],
    );
    let defect = eml(&large_defect_last(MESSAGE_10MB));
    let mut c = replying(milter_addr(&d)).await;
    let (mut rejected, mut accepted, mut tempfailed) = (0, 0, 0);
    for i in 0..6 {
        send_all_but_eom(&mut c, &defect).await;
        let (_, st) = c.eom().await.unwrap();
        match &st {
            Status::Reject { .. } => rejected += 1,
            Status::Accept => accepted += 1,
            Status::Tempfail { .. } => tempfailed += 1,
            _ => {}
        }
        let text = reply_text(&st);
        assert!(
            text.starts_with("550 5.6.0") && text.contains("extbody-url-unquoted"),
            "defect message {i}: {text} (want the defect's own reject, from the analysis)\n{}",
            d.log()
        );
    }
    eprintln!(
        "full spill disk, defect = reject: sent 6, rejected {rejected}, accepted {accepted}, \
         tempfailed {tempfailed}"
    );
    let (_, metrics) = http_get(http, "/metrics").await;
    c.close().await.unwrap();
    d.stop();
    let log = d.log();
    assert_eq!(
        series(&metrics, "mimeref_spill_failures_total{stage=\"write\"}"),
        6.0,
        "{metrics}"
    );
    assert_eq!(series(&metrics, "mimeref_spill_tempfails_total"), 0.0);
    assert_eq!(
        series(&metrics, "mimeref_spill_held_bytes"),
        0.0,
        "nothing held once the messages are done"
    );
    assert_eq!(
        logged(&log, r"could not spill (\d+) message"),
        6,
        "the WARN lines count every failed spill, as the metric does:\n{log}"
    );
    assert!(
        log.contains("No space left on device"),
        "the WARN names the cause:\n{log}"
    );

    let (mut d, _) = start_real(&format!("{limits}oversize_action = \"reject\"\n"), &[]);
    let clean = eml(&large_clean(MESSAGE_10MB));
    let mut c = replying(milter_addr(&d)).await;
    let mut accepted = 0;
    for i in 0..4 {
        send_all_but_eom(&mut c, &clean).await;
        let (actions, st) = c.eom().await.unwrap();
        assert_eq!(
            st,
            Status::Accept,
            "clean message {i}: {}\n{}",
            reply_text(&st),
            d.log()
        );
        assert!(
            report(&actions, "X-MIMERef").is_none(),
            "a clean message, read whole, gets no report"
        );
        accepted += 1;
    }
    eprintln!("full spill disk, oversize_action = reject: sent 4 clean, accepted {accepted}");
    c.close().await.unwrap();
    d.stop();
}

/// Messages held in memory after a failed spill share `[limits] memory_budget`: past it
/// the answer is a tempfail (the MTA keeps the message and retries), never an accept of
/// a message that was not analysed; once the budget is free again the retry is analysed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_memory_budget_a_failed_spill_is_tempfailed_never_accepted() {
    let disk = Tmpfs::mount("full-disk-budget", "6m");
    let (mut d, http) = start_real(
        &format!(
            r#"[limits]
spill_directory = "{}"
memory_budget = {}
[policy.inbound]
"extbody-url-unquoted" = "reject"
"#,
            disk.path().display(),
            16 << 20
        ),
        &[],
    );
    let defect = eml(&large_defect_last(MESSAGE_10MB));
    let mut a = replying(milter_addr(&d)).await;
    let mut b = replying(milter_addr(&d)).await;
    // 10 MB held for the first; the second does not fit beside it, and this MTA waits
    // for a reply to each body chunk: it is tempfailed at the chunk that would pass
    // the budget, and the MTA aborts the transaction.
    send_all_but_eom(&mut a, &defect).await;
    assert_eq!(b.mail(["<a@example.org>"]).await.unwrap(), Status::Continue);
    send_headers(&mut b, &defect).await;
    let mut refused = None;
    for chunk in defect.body.chunks(65535) {
        match b.body(chunk.to_vec()).await.unwrap() {
            Status::Continue => {}
            other => {
                refused = Some(other);
                break;
            }
        }
    }
    let st_b = refused.expect("the second message refused at a body chunk");
    b.abort().await.unwrap();
    let (_, st_a) = a.eom().await.unwrap();
    assert!(
        reply_text(&st_a).contains("extbody-url-unquoted"),
        "the first is analysed in memory: {st_a:?}"
    );
    assert!(
        matches!(&st_b, Status::Tempfail { .. }),
        "past the budget: tempfail, not {st_b:?}\n{}",
        d.log()
    );
    assert!(reply_text(&st_b).starts_with("451 4.3.1"), "{st_b:?}");
    // The MTA's retry, with the budget free again.
    send_all_but_eom(&mut b, &defect).await;
    let (_, st_retry) = b.eom().await.unwrap();
    assert!(
        reply_text(&st_retry).contains("extbody-url-unquoted"),
        "the retry is analysed: {st_retry:?}"
    );
    eprintln!(
        "full spill disk, memory_budget = 16 MiB: sent 3, rejected 2 (analysed in memory), \
         tempfailed 1 (past the budget), accepted 0"
    );
    let (_, metrics) = http_get(http, "/metrics").await;
    a.close().await.unwrap();
    b.close().await.unwrap();
    d.stop();
    let log = d.log();
    assert_eq!(
        series(&metrics, "mimeref_spill_tempfails_total"),
        1.0,
        "{metrics}"
    );
    assert_eq!(
        series(&metrics, "mimeref_spill_failures_total{stage=\"write\"}"),
        3.0
    );
    assert_eq!(series(&metrics, "mimeref_spill_held_bytes"), 0.0);
    assert_eq!(
        logged(&log, r"tempfailed (\d+) message\(s\) whose spill failed"),
        1,
        "{log}"
    );
}

/// Spill files cannot be pre-empted: neither files with the names of the old scheme
/// (`.mimeref-milter-PID-SEQ`, which made every large message skip spilling) nor any
/// other names stop a large message from going to disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_put_in_the_spill_directory_do_not_stop_spilling() {
    let dir = spill_dir("pre-created");
    let (mut d, http) = start_real(&config(&dir), &[]);
    let pid = d.pid().unwrap();
    for seq in 0..100 {
        std::fs::write(dir.join(format!(".mimeref-milter-{pid}-{seq}")), b"").unwrap();
    }
    // Names of any shape, from the tests' generator seeded with the pid.
    let mut rng = XorShift64::new(0x9e37_79b9_7f4a_7c15 ^ u64::from(pid));
    for _ in 0..100 {
        let x = rng.next_u64();
        std::fs::write(
            dir.join(format!(".mimeref-milter-{x:016x}{:016x}", !x)),
            b"",
        )
        .unwrap();
    }
    let msg = eml(&large_nested(4 * THRESHOLD));
    let mut c = replying(milter_addr(&d)).await;
    for i in 0..4 {
        send_all_but_eom(&mut c, &msg).await;
        let open = open_by(pid, &dir);
        assert_eq!(open.len(), 1, "message {i}: spilled to one file: {open:?}");
        assert!(open[0].1.ends_with(" (deleted)"), "{open:?}");
        let (actions, st) = c.eom().await.unwrap();
        assert_eq!(st, Status::Accept);
        assert!(replaced_body(&actions).is_some(), "message {i}: fixed");
    }
    let (_, metrics) = http_get(http, "/metrics").await;
    c.close().await.unwrap();
    d.stop();
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        200,
        "the files put there are left alone, and no spill file is left behind"
    );
    assert_eq!(
        series(&metrics, "mimeref_spill_failures_total{stage=\"create\"}"),
        0.0,
        "{metrics}"
    );
}

/// `internal_error_action`: a read-back that fails (the spill file truncated behind
/// the daemon's back) and a panic in the analysis answer tempfail by default and accept
/// when configured; each is logged with its cause and counted in
/// `mimeref_internal_errors_total{cause,action}`, and the connection and the daemon
/// go on serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_errors_tempfail_by_default_and_accept_when_configured() {
    const TOKEN: &str = "panic-test-5f0c2a";
    for (setting, want) in [
        ("", "tempfail"),
        ("internal_error_action = \"accept\"\n", "accept"),
    ] {
        let dir = spill_dir(&format!("internal-{want}"));
        let (mut d, http) = start_real(
            &format!("{setting}{}", config(&dir)),
            &[("MIMEREF_MILTER_TEST_PANIC", TOKEN)],
        );
        let pid = d.pid().unwrap();
        let msg = eml(&large_nested(4 * THRESHOLD));
        let mut c = replying(milter_addr(&d)).await;

        // A failed read-back: the spill file emptied before end of message.
        send_all_but_eom(&mut c, &msg).await;
        let open = open_by(pid, &dir);
        assert_eq!(open.len(), 1, "{open:?}");
        std::fs::OpenOptions::new()
            .write(true)
            .open(&open[0].0)
            .unwrap()
            .set_len(0)
            .unwrap();
        let (actions, st) = c.eom().await.unwrap();
        check_internal(want, &st, &actions, "read-back");

        // A panic in the analysis (debug builds: MIMEREF_MILTER_TEST_PANIC).
        let mut marked = msg.clone();
        marked
            .headers
            .push((b"X-Test".to_vec(), format!(" {TOKEN}").into_bytes()));
        send_all_but_eom(&mut c, &marked).await;
        let (actions, st) = c.eom().await.unwrap();
        check_internal(want, &st, &actions, "panic");

        // The same connection goes on.
        send_all_but_eom(&mut c, &msg).await;
        let (actions, st) = c.eom().await.unwrap();
        assert_eq!(st, Status::Accept);
        assert!(replaced_body(&actions).is_some(), "analysed and fixed");

        let (_, metrics) = http_get(http, "/metrics").await;
        c.close().await.unwrap();
        d.stop();
        let log = d.log();
        for cause in ["read_back", "panic"] {
            let key =
                format!("mimeref_internal_errors_total{{cause=\"{cause}\",action=\"{want}\"}}");
            assert_eq!(series(&metrics, &key), 1.0, "{key}\n{metrics}");
        }
        assert_eq!(
            logged(&log, r"internal error at end of (\d+) message"),
            2,
            "one count per error, as in the metric:\n{log}"
        );
        assert!(log.contains("read_back: "), "{log}");
        assert!(log.contains("panic: "), "{log}");
    }
}

fn check_internal(want: &str, st: &Status, actions: &indymilter_test::EomActions, what: &str) {
    match want {
        "tempfail" => assert!(matches!(st, Status::Tempfail { .. }), "{what}: {st:?}"),
        _ => assert_eq!(*st, Status::Accept, "{what}"),
    }
    assert!(
        actions.actions.is_empty(),
        "{what}: nothing changed in a message that was not analysed: {:?}",
        actions.actions
    );
}

/// The same full disk behind a real Postfix, as the issue measured it: what the SMTP
/// client is told and what reaches the next hop (smtp-sink). 10 MB messages are held in
/// memory and analysed (the defect rejected by its own rule, clean mail delivered byte
/// for byte although `oversize_action = "reject"`); 14 MB ones do not fit the 12 MiB
/// memory_budget and get a 451 from Postfix, so the client keeps them and retries.
#[test]
fn a_full_spill_disk_behind_postfix() {
    use support::message::{drop_fields, to_lf, with_message_id};
    use support::mta::{Postfix, PostfixConfig};
    if !support::mta::require_postfix() {
        return;
    }
    // As a client sends it: LF line ends (Postfix writes CRLF to the milter), a
    // Message-ID of its own to find it at the next hop.
    let smtp =
        |raw: Vec<u8>, id: &str| with_message_id(&drop_fields(&to_lf(&raw), "Message-ID"), id);
    let disk = Tmpfs::mount("full-disk-postfix", "6m");
    let d = Daemon::start(
        &format!(
            r#"trusted_networks = []
[limits]
spill_directory = "{}"
memory_budget = {}
oversize_action = "reject"
[policy.inbound]
"extbody-url-unquoted" = "reject"
"#,
            disk.path().display(),
            12 << 20
        ),
        &[],
    );
    let mut cfg = PostfixConfig::with_milter(&d.postfix_spec());
    cfg.extra_main
        .push("message_size_limit = 30000000".to_string());
    let pf = Postfix::start(&cfg);
    let (mut sent, mut rejected, mut tempfailed, mut delivered) = (0, 0, 0, 0);
    for i in 0..3 {
        let msg = smtp(large_defect_last(MESSAGE_10MB), &format!("defect-{i}@"));
        let r = pf.send(&msg);
        sent += 1;
        assert!(
            r.code == 550 && r.text.contains("extbody-url-unquoted"),
            "defect {i}: {r} (want the defect's own reject)\n{}",
            d.log()
        );
        rejected += 1;
    }
    for i in 0..3 {
        let msg = smtp(large_clean(MESSAGE_10MB), &format!("clean-{i}@"));
        let r = pf.send(&msg);
        sent += 1;
        assert_eq!(r.code, 250, "clean {i}: {r}\n{}", d.log());
        let got = pf.wait_delivered(&format!("clean-{i}@")).without_trace();
        assert!(got == msg, "clean {i}: delivered as sent");
        delivered += 1;
    }
    for i in 0..2 {
        let msg = smtp(large_clean(14_000_000), &format!("big-{i}@"));
        let r = pf.send(&msg);
        sent += 1;
        assert!(
            r.code == 451 && r.text.contains("4.3.1"),
            "past memory_budget {i}: {r}\n{}",
            d.log()
        );
        tempfailed += 1;
    }
    assert_eq!(
        pf.delivered().len(),
        delivered,
        "nothing else reached the next hop"
    );
    eprintln!(
        "full spill disk behind Postfix: sent {sent}, delivered {delivered}, rejected \
         {rejected}, tempfailed {tempfailed}"
    );
}
