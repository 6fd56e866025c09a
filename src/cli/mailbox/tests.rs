//! Tests of reading mailboxes: mbox splitting and unquoting against the line-by-line
//! references, maildirs, files that change while read.

use super::mbox::unquote_in_place;
use super::*;

/// The messages of an mbox held whole.
fn split(text: &[u8]) -> Vec<(String, Vec<u8>)> {
    streamed(text, 0, usize::MAX, usize::MAX)
}

/// The messages of an mbox of which `whole` octets are read at first and the rest
/// streamed in chunks of `chunk`.
fn streamed(text: &[u8], whole: usize, chunk: usize, limit: usize) -> Vec<(String, Vec<u8>)> {
    let whole = whole.min(text.len());
    let mut out = Vec::new();
    let mut total = whole as u64;
    let bom = mbox_start(text).unwrap_or(0);
    let rest = io::Cursor::new(text[whole..].to_vec());
    let mut input = Window {
        buf: text[..whole].to_vec(),
        base: 0,
        eof: chunk == usize::MAX,
        more: (chunk != usize::MAX).then_some(rest),
        chunk: chunk.clamp(1, 1 << 20),
    };
    if chunk == usize::MAX {
        input.buf = text.to_vec();
        total = text.len() as u64;
    }
    split_mbox(
        "m",
        &mut input,
        bom,
        0,
        limit,
        &mut |m: Message| {
            out.push((m.source, m.bytes));
            true
        },
        &mut |n| total += n,
    )
    .unwrap();
    assert_eq!(total, text.len() as u64);
    out
}

/// The unquoting by copy that [`unquote_in_place`] replaced, as the reference.
fn unquote_by_copy(content: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(content.len());
    let mut copied = 0;
    for q in memchr::memmem::find_iter(content, b">From ") {
        let line = content[..q]
            .iter()
            .rposition(|&b| b != b'>')
            .map_or(0, |i| i + 1);
        if line == 0 || content[line - 1] == b'\n' {
            out.extend_from_slice(&content[copied..line]);
            copied = line + 1;
        }
    }
    out.extend_from_slice(&content[copied..]);
    out
}

/// The line-by-line splitter the substring search replaced, kept as the reference
/// for what an mbox holds.
fn line_by_line(text: &[u8]) -> Vec<(String, Vec<u8>)> {
    let bom = mbox_start(text).unwrap_or(0);
    let mut out = Vec::new();
    let mut offset = 0usize;
    let mut current: Option<(usize, Vec<u8>)> = None;
    let mut after_empty = true;
    for (i, line) in text.split_inclusive(|&b| b == b'\n').enumerate() {
        let at = offset;
        offset += line.len();
        let text = if i == 0 { &line[bom..] } else { line };
        if after_empty && text.starts_with(b"From ") {
            if let Some((start, mut bytes)) = current.take() {
                if bytes.ends_with(b"\r\n") {
                    bytes.truncate(bytes.len() - 2);
                } else if bytes.ends_with(b"\n") {
                    bytes.truncate(bytes.len() - 1);
                }
                out.push((format!("m:{start}"), bytes));
            }
            current = Some((at, Vec::new()));
            after_empty = false;
            continue;
        }
        let content = text
            .strip_suffix(b"\n")
            .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
            .unwrap_or(text);
        after_empty = content.is_empty();
        if let Some((_, bytes)) = current.as_mut() {
            let quoted = content.iter().take_while(|&&b| b == b'>').count();
            if quoted > 0 && content[quoted..].starts_with(b"From ") {
                bytes.extend_from_slice(&text[1..]);
            } else {
                bytes.extend_from_slice(text);
            }
        }
    }
    if let Some((start, bytes)) = current {
        out.push((format!("m:{start}"), bytes));
    }
    out
}

proptest::proptest! {
    /// Any mbox made of the lines that matter, held whole or streamed in chunks
    /// of any size: the messages the line-by-line reading finds.
    #[test]
    fn the_search_splits_as_line_by_line_reading_does(
        lines in proptest::collection::vec(0usize..12, 0..40),
        whole in 0usize..200,
        chunk in 1usize..64,
        limit in 0usize..40,
    ) {
        const LINES: [&str; 12] = [
            "From a\n", "\n", "\r\n", ">From b\n", ">>From c\r\n", "text\n",
            "From", ">", "\r", "x>From d\n", "From  e\r\n", ">From",
        ];
        let mut text = b"From first\n".to_vec();
        for l in lines {
            text.extend_from_slice(LINES[l].as_bytes());
        }
        let want = line_by_line(&text);
        proptest::prop_assert_eq!(&split(&text), &want);
        let mut in_place = text.clone();
        unquote_in_place(&mut in_place);
        proptest::prop_assert_eq!(in_place, unquote_by_copy(&text));
        proptest::prop_assert_eq!(&streamed(&text, whole, chunk, usize::MAX), &want);
        // Under a limit: the same messages, none longer than it, those well within
        // it whole.
        let limited = streamed(&text, whole, chunk, limit);
        proptest::prop_assert_eq!(limited.len(), want.len());
        for ((name, bytes), (want_name, want_bytes)) in limited.iter().zip(&want) {
            proptest::prop_assert_eq!(name, want_name);
            proptest::prop_assert!(bytes.len() <= limit);
            if want_bytes.len() * 2 <= limit {
                proptest::prop_assert_eq!(bytes, want_bytes);
            }
        }
    }
}

#[test]
fn mbox_messages_split_at_from_lines_after_an_empty_line() {
    let text = b"From a@example.org Mon Jan  1 00:00:00 2024\nSubject: one\n\nbody\n\
                     From inside a paragraph: no separator\n>From escaped\n>>From twice\n\n\
                     From b@example.org Tue Jan  2 00:00:00 2024\nSubject: two\n\nlast\n";
    let got = split(text);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].0, "m:0");
    assert_eq!(
        got[0].1,
        b"Subject: one\n\nbody\nFrom inside a paragraph: no separator\nFrom escaped\n>From twice\n"
    );
    let second = text.windows(7).position(|w| w == b"From b@").unwrap();
    assert_eq!(got[1].0, format!("m:{second}"));
    assert_eq!(got[1].1, b"Subject: two\n\nlast\n");
}

/// The size taken before reading is only a hint: a file that grew (or shrank)
/// since is read to its end, never cut.
#[test]
fn a_file_is_read_whole_whatever_size_was_taken() {
    let p = std::env::temp_dir().join(format!("mimeref-read-sized-{}", std::process::id()));
    let text: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    fs::write(&p, &text).unwrap();
    for size in [0, 1, 8191, 8192, 19_999, 20_000, 20_001, 40_000] {
        let mut f = File::open(&p).unwrap();
        assert_eq!(read_sized(&mut f, size).unwrap(), text, "size {size}");
    }
    fs::remove_file(&p).unwrap();
}

#[test]
fn crlf_mboxes_and_empty_messages() {
    let got = split(b"From x\r\nA: 1\r\n\r\nFrom y\r\n\r\nFrom z\r\nB: 2\r\n");
    let bodies: Vec<&[u8]> = got.iter().map(|(_, b)| b.as_slice()).collect();
    assert_eq!(bodies, [&b"A: 1\r\n"[..], b"", b"B: 2\r\n"]);
}

#[test]
fn files_mboxes_and_maildirs_are_told_apart() {
    let dir = std::env::temp_dir().join(format!("mimeref-mailbox-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let md = dir.join("Maildir");
    for d in ["cur", "new", "tmp", ".Sent/cur", ".Sent/new", ".Sent/tmp"] {
        fs::create_dir_all(md.join(d)).unwrap();
    }
    fs::write(md.join("cur/1:2,S"), "Subject: a\n\nx\n").unwrap();
    fs::write(md.join("new/2"), "Subject: b\n\nx\n").unwrap();
    fs::write(md.join("tmp/3"), "Subject: partial").unwrap();
    fs::write(md.join(".Sent/cur/4"), "Subject: c\n\nx\n").unwrap();
    fs::write(md.join("dovecot-uidlist"), "3 V1 N5\n").unwrap();
    fs::create_dir_all(dir.join("eml/sub")).unwrap();
    fs::write(dir.join("eml/a.eml"), "Subject: d\n\nx\n").unwrap();
    fs::write(dir.join("eml/sub/b.eml"), "Subject: e\n\nx\n").unwrap();
    fs::write(dir.join("eml/.hidden"), "Subject: f\n\nx\n").unwrap();
    fs::write(dir.join("eml/README.md"), "# not mail\n").unwrap();
    std::os::unix::fs::symlink(dir.join("nowhere"), dir.join("eml/dangling")).unwrap();
    fs::write(
        dir.join("eml/box.mbox"),
        "\u{feff}From - \nSubject: g\n\nx\n\nFrom - \nSubject: h\n\nx\n",
    )
    .unwrap();
    let inputs = walk(
        &[md.clone(), dir.join("eml"), dir.join("missing")],
        &["*.md".to_string()],
        true,
        false,
    );
    let rel: Vec<String> = inputs
        .files
        .iter()
        .map(|p| p.path.strip_prefix(&dir).unwrap().display().to_string())
        .collect();
    assert_eq!(
        rel,
        [
            "Maildir/cur/1:2,S",
            "Maildir/new/2",
            "Maildir/.Sent/cur/4",
            "eml/a.eml",
            "eml/box.mbox",
            "eml/sub/b.eml"
        ]
    );
    assert_eq!(inputs.excluded, [dir.join("eml/README.md")]);
    let unreadable: Vec<&str> = inputs.unreadable.iter().map(|u| u.0.as_str()).collect();
    assert_eq!(unreadable.len(), 2, "{unreadable:?}");
    assert!(unreadable[0].ends_with("eml/dangling"), "{unreadable:?}");
    assert!(unreadable[1].ends_with("missing"), "{unreadable:?}");
    let mut subjects = Vec::new();
    for f in &inputs.files {
        read(
            f,
            usize::MAX,
            |m| {
                subjects.push(String::from_utf8_lossy(&m.bytes[9..10]).into_owned());
                true
            },
            |_| {},
        )
        .unwrap();
    }
    assert_eq!(subjects, ["a", "b", "c", "d", "g", "h", "e"]);
    fs::remove_dir_all(&dir).unwrap();
}

/// A reader of `n` octets of one long body line after line, never a separator.
struct Endless {
    left: u64,
}

impl Read for Endless {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = (buf.len() as u64).min(self.left) as usize;
        for (i, b) in buf[..n].iter_mut().enumerate() {
            *b = if i % 100 == 99 { b'\n' } else { b'x' };
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// A message far longer than the limit, streamed: the window never holds more than
/// a few chunks of it, the message keeps the limit, and the rest is counted.
#[test]
fn a_long_message_is_held_only_to_the_limit() {
    let size = 40u64 << 20;
    let limit = 1 << 20;
    let mut w = Window {
        buf: b"From x\nSubject: long\n\n".to_vec(),
        base: 0,
        more: Some(Endless { left: size }),
        eof: false,
        chunk: CHUNK,
    };
    let mut got = Vec::new();
    let head = w.buf.len() as u64;
    let mut total = head;
    split_mbox(
        "m",
        &mut w,
        0,
        0,
        limit,
        &mut |m| {
            got.push((m.bytes.len(), m.cut));
            true
        },
        &mut |n| total += n,
    )
    .unwrap();
    let content = size + b"Subject: long\n\n".len() as u64;
    assert_eq!(got, [(limit, content - limit as u64)]);
    assert_eq!(total, size + head);
    assert!(
        w.buf.capacity() <= 4 * CHUNK,
        "the window grew to {} octets",
        w.buf.capacity()
    );
}

#[test]
fn file_offset_names_are_taken_apart() {
    assert_eq!(
        split_offset(b"box.mbox:1234"),
        Some((&b"box.mbox"[..], 1234))
    );
    assert_eq!(split_offset(b"a:b:0"), Some((&b"a:b"[..], 0)));
    for no in [
        &b"1700000000.1:2,S"[..],
        b"box",
        b":12",
        b"box:",
        b"box:1x",
        b"box:99999999999999999999999",
    ] {
        assert_eq!(split_offset(no), None, "{}", String::from_utf8_lossy(no));
    }
}

/// Every message an mbox is split into opens again by its name, whole or within a
/// limit; an offset where no message starts is refused.
#[test]
fn every_message_opens_by_its_offset() {
    let dir = std::env::temp_dir().join(format!("mimeref-at-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    let p = dir.join("box");
    let text = "\u{feff}From a\nSubject: 1\n\nbody\nFrom here\n>From quoted\n\n\
                    From b\r\nSubject: 2\r\n\r\nFrom c\n\nFrom d\nSubject: 4\n";
    fs::write(&p, text).unwrap();
    let src = Source::named(p.clone());
    let mut all = Vec::new();
    read(
        &src,
        usize::MAX,
        |m| {
            all.push(m);
            true
        },
        |_| {},
    )
    .unwrap();
    assert_eq!(all.len(), 4);
    for m in &all {
        let (file, offset) = at_offset(Path::new(&m.source)).unwrap();
        assert_eq!(file, p);
        let again = read_at(&file, offset, usize::MAX).unwrap();
        assert_eq!((&again.source, &again.bytes), (&m.source, &m.bytes));
        let cut = read_at(&file, offset, 3).unwrap();
        assert_eq!(cut.bytes, m.bytes[..m.bytes.len().min(3)]);
    }
    let name = p.display().to_string();
    assert_eq!(all[0].source, format!("{name}:0"));
    assert_eq!(
        all[0].bytes,
        b"Subject: 1\n\nbody\nFrom here\nFrom quoted\n"
    );
    for bad in [1, 3, 4, 20, 10_000] {
        let e = read_at(&p, bad, usize::MAX).unwrap_err();
        assert!(e.why.contains("no message"), "{bad}: {e:?}");
    }
    fs::write(dir.join("plain"), "Subject: x\n\n").unwrap();
    let e = read_at(&dir.join("plain"), 0, usize::MAX).unwrap_err();
    assert!(e.why.contains("not an mbox"), "{e:?}");
    fs::remove_dir_all(&dir).unwrap();
}

/// The subjects of every message `files` hold, and why those not read were not.
fn subjects(files: &[Source]) -> (Vec<String>, Vec<NotRead>) {
    let (mut got, mut not) = (Vec::new(), Vec::new());
    for f in files {
        let res = read(
            f,
            usize::MAX,
            |m| {
                got.push(String::from_utf8_lossy(&m.bytes).into_owned());
                true
            },
            |_| {},
        );
        not.extend(res.err());
    }
    (got, not)
}

/// A tree and, beside it, a folder out of it whose messages must never be read.
fn swap_tree(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mimeref-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    for d in ["tree/a/sub", "tree/b/gone", "tree/md/cur", "tree/md/new"] {
        fs::create_dir_all(dir.join(d)).unwrap();
    }
    for d in ["outside/sub", "outside/cur", "outside/a/sub"] {
        fs::create_dir_all(dir.join(d)).unwrap();
    }
    fs::write(dir.join("tree/a/sub/m1"), "Subject: in\n\nx\n").unwrap();
    fs::write(dir.join("tree/a/z.eml"), "Subject: in\n\nx\n").unwrap();
    fs::write(dir.join("tree/b/gone/m2"), "Subject: in\n\nx\n").unwrap();
    fs::write(dir.join("tree/c.eml"), "Subject: in\n\nx\n").unwrap();
    fs::write(dir.join("tree/md/cur/m3"), "Subject: in\n\nx\n").unwrap();
    for f in [
        "outside/sub/m1",
        "outside/cur/m3",
        "outside/a/sub/m1",
        "outside/a/z.eml",
    ] {
        fs::write(dir.join(f), "Subject: OUTSIDE\n\nx\n").unwrap();
    }
    fs::write(dir.join("outside/c.eml"), "Subject: OUTSIDE\n\nx\n").unwrap();
    dir
}

/// Folders swapped for links out of the tree, and a folder removed, between the
/// listing of their parent and their opening: nothing outside is read, the links are
/// skipped and named, the folder gone is unreadable, and the rest is read.
#[test]
fn a_folder_swapped_for_a_link_during_the_walk_is_not_followed() {
    let dir = swap_tree("swap-walk");
    let tree = dir.join("tree");
    let mut listed = Vec::new();
    let inputs = walk::walk_listed(
        std::slice::from_ref(&tree),
        &[],
        true,
        false,
        &mut |p: &Path| {
            listed.push(p.to_path_buf());
            if p == tree {
                // The Maildir's cur/ is a link when the Maildir is opened.
                fs::rename(tree.join("md/cur"), dir.join("stash-cur")).unwrap();
                std::os::unix::fs::symlink(dir.join("outside/cur"), tree.join("md/cur")).unwrap();
            } else if p == tree.join("a") {
                fs::rename(tree.join("a/sub"), dir.join("stash-sub")).unwrap();
                std::os::unix::fs::symlink(dir.join("outside/sub"), tree.join("a/sub")).unwrap();
            } else if p == tree.join("b") {
                fs::remove_dir_all(tree.join("b/gone")).unwrap();
            }
        },
    );
    assert!(listed.contains(&tree.join("a")), "{listed:?}");
    let rel: Vec<String> = inputs
        .files
        .iter()
        .map(|f| f.path.strip_prefix(&tree).unwrap().display().to_string())
        .collect();
    assert_eq!(rel, ["a/z.eml", "c.eml"]);
    let skipped: Vec<(String, String)> = inputs
        .skipped
        .iter()
        .map(|(p, why)| {
            (
                Path::new(p)
                    .strip_prefix(&tree)
                    .unwrap()
                    .display()
                    .to_string(),
                why.clone(),
            )
        })
        .collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert_eq!(skipped[0].0, "a/sub");
    assert_eq!(skipped[0].1, walk::SWAPPED);
    assert_eq!(skipped[1].0, "md/cur");
    assert!(skipped[1].1.contains("outside"), "{skipped:?}");
    assert_eq!(inputs.unreadable.len(), 1, "{:?}", inputs.unreadable);
    assert!(inputs.unreadable[0].0.ends_with("b/gone"));
    let (got, not) = subjects(&inputs.files);
    assert_eq!(got.len(), 2, "{got:?} {not:?}");
    assert!(got.iter().all(|s| s.starts_with("Subject: in")), "{got:?}");
    fs::remove_dir_all(&dir).unwrap();
}

/// Folders and files swapped for links out of the tree after the walk listed them and
/// before they are read: opening them fails, with `openat2` and a folder at a time,
/// and nothing outside is read.
#[test]
fn a_folder_swapped_for_a_link_before_reading_is_not_followed() {
    let dir = swap_tree("swap-read");
    let tree = dir.join("tree");
    let inputs = walk(std::slice::from_ref(&tree), &[], false, false);
    let rel: Vec<String> = inputs
        .files
        .iter()
        .map(|f| f.path.strip_prefix(&tree).unwrap().display().to_string())
        .collect();
    assert_eq!(
        rel,
        ["a/sub/m1", "a/z.eml", "b/gone/m2", "c.eml", "md/cur/m3"]
    );
    fs::rename(tree.join("a"), dir.join("stash-a")).unwrap();
    std::os::unix::fs::symlink(dir.join("outside/a"), tree.join("a")).unwrap();
    fs::rename(tree.join("c.eml"), dir.join("stash-c.eml")).unwrap();
    std::os::unix::fs::symlink(dir.join("outside/c.eml"), tree.join("c.eml")).unwrap();
    let (got, not) = subjects(&inputs.files);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got.iter().all(|s| s.starts_with("Subject: in")), "{got:?}");
    let not: Vec<(String, bool)> = not
        .iter()
        .map(|n| (n.source.clone(), n.skipped && n.why == walk::SWAPPED))
        .collect();
    let want: Vec<(String, bool)> = ["a/sub/m1", "a/z.eml", "c.eml"]
        .iter()
        .map(|r| (tree.join(r).display().to_string(), true))
        .collect();
    assert_eq!(not, want);
    // The same, a folder at a time (a kernel without openat2).
    let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::NONBLOCK;
    for f in &inputs.files {
        let (at, rel) = f.below().unwrap();
        let got = open_by_folder(at, rel, flags).map(|_| ());
        if rel.starts_with("a") || rel == Path::new("c.eml") {
            assert_eq!(
                got.unwrap_err().raw_os_error(),
                Some(libc::ELOOP),
                "{rel:?}"
            );
        } else {
            got.unwrap();
        }
    }
    fs::remove_dir_all(&dir).unwrap();
}
