//! `FILE:OFFSET`, the name `survey` gives a message of an mbox: taking it apart and
//! reading the message it names.

use std::ffi::OsStr;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::mbox::{mbox_start, split_mbox, starts_message, Window, CHUNK};
use super::{open_regular, Message, NotRead};

/// `FILE:OFFSET` as `survey` names a message of an mbox: the file and the offset, when
/// `arg` ends in `:` and digits and no file has that very name (Maildir names hold
/// colons, `1700000000.1:2,S`).
pub fn at_offset(arg: &Path) -> Option<(PathBuf, u64)> {
    if fs::symlink_metadata(arg).is_ok() {
        return None;
    }
    let (file, offset) = split_offset(arg.as_os_str().as_bytes())?;
    Some((PathBuf::from(OsStr::from_bytes(file)), offset))
}

/// `FILE:OFFSET` taken apart, whatever is on disk.
pub fn split_offset(arg: &[u8]) -> Option<(&[u8], u64)> {
    let colon = arg.iter().rposition(|&b| b == b':')?;
    let (file, digits) = (&arg[..colon], &arg[colon + 1..]);
    if file.is_empty() || digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let offset = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some((file, offset))
}

/// The message of the mbox `path` whose `From ` line is at `offset` (0: the first), as
/// `survey` read it, with at most `limit` octets kept.
pub fn read_at(path: &Path, offset: u64, limit: usize) -> Result<Message, NotRead> {
    let file = path.display().to_string();
    let name = format!("{file}:{offset}");
    let (mut f, _) = open_regular(path, false)?;
    let mut head = Vec::with_capacity(8);
    (&mut f)
        .take(8)
        .read_to_end(&mut head)
        .map_err(|e| NotRead::error(&name, e))?;
    let Some(bom) = mbox_start(&head) else {
        return Err(NotRead::error(
            &name,
            format!(
                "{file} is not an mbox (it does not start with a From line): FILE:OFFSET \
                 names a message of an mbox"
            ),
        ));
    };
    let no_message = || {
        NotRead::error(
            &name,
            format!(
                "no message of {file} starts at offset {offset} (survey and check name a \
                 message by the offset of its From line, 0 for the first)"
            ),
        )
    };
    let (buf, bom) = if offset == 0 {
        (head, bom)
    } else {
        // The From line must follow an empty line, as where the splitter cuts.
        let at = offset.checked_sub(3).ok_or_else(no_message)?;
        f.seek(SeekFrom::Start(at))
            .map_err(|e| NotRead::error(&name, e))?;
        let mut b = Vec::with_capacity(8);
        (&mut f)
            .take(8)
            .read_to_end(&mut b)
            .map_err(|e| NotRead::error(&name, e))?;
        if !starts_message(&b) {
            return Err(no_message());
        }
        (b[3..].to_vec(), 0)
    };
    let mut w = Window {
        buf,
        base: offset,
        more: Some(f),
        eof: false,
        chunk: CHUNK,
    };
    let mut got = None;
    split_mbox(
        &file,
        &mut w,
        bom,
        offset,
        limit,
        &mut |m| {
            got = Some(m);
            false
        },
        &mut |_| {},
    )?;
    got.ok_or_else(no_message)
}
