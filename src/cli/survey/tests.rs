//! Tests of the survey: the forms a summary shows mask what differs between messages.

use super::example::ranked;
use super::example::Seq;
use super::stats::form;

#[test]
fn forms_mask_what_differs_between_messages() {
    assert_eq!(
            form("multipart/related has no type parameter; its root (part 1.1) is text/html (RFC 2387 §3.1)"),
            "multipart/related has no type parameter; its root (part N) is text/html (RFC 2387 §3.1)"
        );
    assert_eq!(
        form("Content-ID \"<a b@c>\" is not a msg-id <left@right>: there is no @"),
        "Content-ID \"…\" is not a msg-id <…>: there is no @"
    );
    assert_eq!(
        form("no delimiter line --x occurs; URL http://a.example/x too long"),
        "no delimiter line … occurs; URL … too long"
    );
    assert_eq!(
        form("Content-Transfer-Encoding: base64 (RFC 2046 §5.2.3: only 7bit), 1200 octets"),
        "Content-Transfer-Encoding: base64 (RFC 2046 §5.2.3: only 7bit), N octets"
    );
}

/// Forms found in the same message tie on their count and their first example; the
/// map they are counted in iterates in a random order per process, so only the text
/// can make the order shown the same in every run.
#[test]
fn forms_that_tie_are_shown_in_the_order_of_their_text() {
    let texts: Vec<String> = (0..12).map(|i| format!("form {}", (i * 7) % 12)).collect();
    let mut counted: std::collections::HashMap<&str, (u64, Seq)> =
        texts.iter().map(|t| (t.as_str(), (3, (0, 5)))).collect();
    counted.insert("seen earlier", (3, (0, 1)));
    counted.insert("in more messages", (4, (0, 9)));
    let mut shown: Vec<(&str, (u64, Seq))> = counted.into_iter().collect();
    shown.sort_by_key(|&(text, (messages, first))| ranked(messages, first, text));
    let order: Vec<&str> = shown.iter().map(|&(t, _)| t).collect();
    let mut tied: Vec<&str> = texts.iter().map(String::as_str).collect();
    tied.sort();
    let mut want = vec!["in more messages", "seen earlier"];
    want.extend(tied);
    assert_eq!(order, want);
}
