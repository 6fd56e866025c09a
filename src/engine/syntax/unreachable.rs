//! URLs that no recipient can load: they name something on the sender's own machine,
//! in the sender's own mailbox or inside the program that wrote the message (`blob:`,
//! `file:`, `imap:`, `mailbox:`, `webkit-fake-url:`, private `x-` schemes, `about:`
//! pages other than `about:blank`), or a host that is the reader's own machine or
//! network (loopback, `localhost`, `.local`). And `data:` URLs, which carry what they
//! show and load nothing, but which several readers refuse.
//!
//! Only the start of a URL is read (the scheme, and the host of a network URL), so a
//! long `data:` URL costs no more than a short one.

/// Why a URL cannot be loaded by a recipient.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreachable {
    /// A scheme that names something local to the sender or to the sending program,
    /// in lower case.
    Scheme(String),
    /// A network URL whose host is the reader's own machine or local network, in lower
    /// case.
    Host(String),
}

/// Schemes whose URLs name something only the sender's program can open: a blob in the
/// composer's memory, a file on the sender's disk, a message in the sender's mailbox
/// (Thunderbird's `imap:` and `mailbox:`), WebKit's placeholder for a pasted image, the
/// document origin of Apple's mail views, a browser's or app's own pages.
const LOCAL_SCHEMES: &[&str] = &[
    "blob",
    "file",
    "imap",
    "imaps",
    "mailbox",
    "webkit-fake-url",
    "applewebdata",
    "about",
    "chrome",
    "chrome-extension",
    "moz-extension",
    "resource",
    "ms-appx",
    "ms-appx-web",
    "ms-appdata",
    "content",
];

/// Schemes whose URLs name a host, whose host is then looked at.
const NETWORK_SCHEMES: &[&str] = &["http", "https", "ftp", "ws", "wss"];

/// The scheme of `url` as written, read no further than its end: RFC 3986 §3.1
/// `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )` and a `:`. Leading blanks and controls
/// are skipped, as browsers do. Schemes compare case-insensitively.
pub fn scheme(url: &str) -> Option<&str> {
    let t = url.trim_start_matches(|c: char| c <= ' ');
    let b = t.as_bytes();
    let n = b
        .iter()
        .take_while(|&&c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'))
        .count();
    let ok = n > 0 && b[0].is_ascii_alphabetic() && b.get(n) == Some(&b':');
    ok.then(|| &t[..n])
}

/// Whether `url` is a `data:` URL (RFC 2397).
pub fn is_data(url: &str) -> bool {
    scheme(url).is_some_and(|s| s.eq_ignore_ascii_case("data"))
}

/// Whether `url` is a `data:` URL or one no recipient can load: what the `html` check
/// keeps of a reference that leads to no part. Called for every reference of an HTML
/// part, `cid:` ones first among them, so the scheme is read once and nothing is
/// allocated.
pub fn outside(url: &str) -> bool {
    let trimmed = url.trim_start_matches(|c: char| c <= ' ');
    match scheme(trimmed) {
        Some(s) if s.eq_ignore_ascii_case("cid") || s.eq_ignore_ascii_case("mid") => false,
        Some(s) if s.eq_ignore_ascii_case("data") => true,
        _ => judge(trimmed, false).is_some(),
    }
}

/// Why no recipient can load `url`, if none can.
pub fn unreachable(url: &str) -> Option<Unreachable> {
    judge(url.trim_start_matches(|c: char| c <= ' '), true)
}

/// [`unreachable`] of `trimmed` (leading blanks and controls removed); the reason is
/// made (allocated) only when `say` asks for it, and is then a placeholder otherwise.
fn judge(trimmed: &str, say: bool) -> Option<Unreachable> {
    let one_of = |s: &str, list: &[&str]| list.iter().any(|l| l.eq_ignore_ascii_case(s));
    // A network-path reference (`//host/…`) takes the scheme of its base, a network one
    // in mail.
    let (scheme, rest) = match scheme(trimmed) {
        Some(s) => (s, &trimmed[s.len() + 1..]),
        None if trimmed.starts_with("//") => ("http", trimmed),
        None => return None,
    };
    if one_of(scheme, NETWORK_SCHEMES) {
        return local_host(rest).map(Unreachable::Host);
    }
    let private = scheme.len() > 2 && scheme.as_bytes()[..2].eq_ignore_ascii_case(b"x-");
    if scheme.eq_ignore_ascii_case("about") && is_blank_page(rest) {
        return None;
    }
    (private || one_of(scheme, LOCAL_SCHEMES)).then(|| {
        Unreachable::Scheme(if say {
            scheme.to_ascii_lowercase()
        } else {
            String::new()
        })
    })
}

/// `about:blank`, with nothing after it but a query or a fragment.
fn is_blank_page(rest: &str) -> bool {
    let b = rest.as_bytes();
    b.len() >= 5
        && b[..5].eq_ignore_ascii_case(b"blank")
        && matches!(b.get(5), None | Some(b'?' | b'#'))
}

/// The host of `rest` (what follows a network URL's scheme and colon) when it is the
/// reader's own machine or local network: `localhost` and its subdomains, 127.0.0.0/8,
/// `[::1]`, and mDNS names under `.local`.
fn local_host(rest: &str) -> Option<String> {
    let auth = rest
        .strip_prefix("//")
        .or_else(|| rest.strip_prefix("\\\\"))?;
    let end = auth.find(['/', '?', '#', '\\']).unwrap_or(auth.len());
    let auth = &auth[..end];
    let host_port = auth.rsplit_once('@').map_or(auth, |(_, h)| h);
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next().unwrap_or(v6)
    } else {
        host_port.split(':').next().unwrap_or(host_port)
    };
    let host = host.trim_end_matches('.');
    let ends = |suffix: &str| {
        host.len() > suffix.len()
            && host.as_bytes()[host.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
    };
    let octet = |p: &str| !p.is_empty() && p.len() <= 3 && p.bytes().all(|c| c.is_ascii_digit());
    let loopback_v4 =
        host.starts_with("127.") && host.split('.').count() == 4 && host.split('.').all(octet);
    let local = host.eq_ignore_ascii_case("localhost")
        || ends(".localhost")
        || ends(".local")
        || loopback_v4
        || matches!(host, "::1" | "0:0:0:0:0:0:0:1");
    local.then(|| host.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn why(url: &str) -> Option<String> {
        unreachable(url).map(|u| match u {
            Unreachable::Scheme(s) => format!("scheme {s}"),
            Unreachable::Host(h) => format!("host {h}"),
        })
    }

    #[test]
    fn local_schemes_and_hosts_are_unreachable() {
        for (url, want) in [
            ("blob:https://outlook.office.com/0c1e-4b", "scheme blob"),
            ("BLOB:applewebdata://5A1F/2C9D", "scheme blob"),
            (
                "file:///C:/Users/ann/AppData/Local/Temp/msohtmlclip1/01/clip_image001.png",
                "scheme file",
            ),
            (
                "imap://ann%40example.org@imap.example.org:993/fetch%3EUID%3E/INBOX%3E35?part=1.2",
                "scheme imap",
            ),
            (
                "mailbox:///home/ann/Mail/Inbox?number=4&part=1.2",
                "scheme mailbox",
            ),
            (
                "webkit-fake-url://9C2B1E7A/image.tiff",
                "scheme webkit-fake-url",
            ),
            (
                "x-apple-data-detectors://0",
                "scheme x-apple-data-detectors",
            ),
            ("about:logo.png", "scheme about"),
            ("  http://localhost:8080/logo.png", "host localhost"),
            ("https://127.0.0.1/a.png", "host 127.0.0.1"),
            ("http://user@[::1]:80/a.png", "host ::1"),
            ("http://printer.local./status.css", "host printer.local"),
            ("//app.localhost/a.gif", "host app.localhost"),
        ] {
            assert_eq!(why(url).as_deref(), Some(want), "{url}");
        }
    }

    #[test]
    fn loadable_urls_are_not() {
        for url in [
            "https://cdn.example.org/logo.png",
            "http://127.0.0.1.example.org/a.png",
            "http://localhost.example.org/a.png",
            "http://example.local.test/a.png",
            "about:blank",
            "ABOUT:BLANK#top",
            "cid:logo@example.org",
            "images/logo.png",
            "x-:y",
            "data:image/png;base64,iVBOR",
            "",
            "é:x",
            "http:",
        ] {
            assert_eq!(why(url), None, "{url}");
        }
        assert!(is_data(" DATA:image/gif;base64,R0lG") && !is_data("dat"));
        assert!(outside("data:,x") && outside("FILE:///x") && outside("//localhost/a"));
        assert!(!outside("cid:a@b") && !outside("https://example.org/") && !outside("a.png"));
        assert_eq!(scheme(" Mailbox:///x"), Some("Mailbox"));
    }
}
