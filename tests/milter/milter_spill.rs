//! Messages past `[limits] spill_threshold` go to an unlinked file in `spill_directory`
//! while they are received and are read back at end of message: the actions must be
//! exactly those of a message kept in memory (body replacement byte for byte, the report
//! header). The daemon runs in this process, so its open files are ours: the spill file
//! shows up in /proc/self/fd as `DIR/#INODE (deleted)` (made with O_TMPFILE, it never
//! had a name).

#[path = "../support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use indymilter_test::{ProtoOpts, Status};
use mimeref_milter::config::Config;
use mimeref_milter::engine;
use mimeref_milter::policy::Direction;
use support::milter::*;

const THRESHOLD: usize = 64 << 10;

/// nested-extbody.eml with a base64 attachment that takes it to about `size` octets.
fn large_nested(size: usize) -> Vec<u8> {
    let raw = to_crlf(&fixture("milter/nested-extbody.eml"));
    let close = b"--outer--";
    let at = raw
        .windows(close.len())
        .rposition(|w| w == close)
        .expect("close delimiter");
    let mut out = raw[..at].to_vec();
    out.extend_from_slice(
        b"--outer\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n",
    );
    let line = b"QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAx\r\n";
    while out.len() < size {
        out.extend_from_slice(line);
    }
    out.extend_from_slice(&raw[at..]);
    out
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
