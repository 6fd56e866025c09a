//! Tests of the survey: the forms a summary shows mask what differs between messages.

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
