//! The engine on messages spelled in a small RFC 822 / MIME alphabet: each input byte
//! picks a token (field names, parameters, boundaries, delimiters, URLs, HTML), so the
//! fuzzer reaches deep structure far sooner than with raw bytes.
#![no_main]

#[path = "../../tests/support/invariants.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use mimeref_milter::engine::{FixSigned, Options};

const TOKENS: &[&[u8]] = &[
    b"\n",
    b"\n",
    b"\r\n",
    b"\r",
    b" ",
    b"\t",
    b":",
    b";",
    b"=",
    b"\"",
    b"\\",
    b"(",
    b")",
    b"<",
    b">",
    b"@",
    b"--",
    b"--b",
    b"--b--",
    b"--bb",
    b"\n\n",
    b"x",
    b"a",
    b"%",
    b"Content-Type: ",
    b"Content-ID: ",
    b"Content-Location: ",
    b"Content-Base: ",
    b"Content-Transfer-Encoding: ",
    b"MIME-Version: 1.0\n",
    b"DKIM-Signature: v=1\n",
    // Signatures and this hop's verdicts (issue 38): an intact-looking signature with
    // the empty body's hash, a verdict naming it, and the Received field that ends
    // this hop's fields.
    b"DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=x.test; s=s; h=From; bh=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=; b=AAAABBBB\n",
    b"ARC-Message-Signature: i=1; a=rsa-sha256; d=x.test; s=s; h=From; bh=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=; b=CCCC\n",
    b"Authentication-Results: mx.test.example; dkim=pass header.b=AAAABBBB\n",
    b"Authentication-Results: mx.test.example; dkim=fail header.d=x.test; arc=pass\n",
    b"Received: from a by b\n",
    b"; l=3",
    b"multipart/related",
    b"multipart/mixed",
    b"multipart/signed",
    b"multipart/digest",
    b"message/rfc822",
    b"message/external-body",
    b"text/html",
    b"text/plain",
    b"image/gif",
    b"application/octet-stream",
    b"base64",
    b"quoted-printable",
    b"; boundary=b",
    b"; boundary=\"bb\"",
    b"; type=\"text/html\"",
    b"; start=\"<a@b>\"",
    b"; access-type=URL",
    b"; access-type=anon-ftp",
    b"; site=x; name=y",
    b"; URL=\"http://example.org/",
    b"; URL*0=\"http://",
    b"; URL*1=\"x/\"",
    b"; URL*=utf-8''%41",
    b"; charset=utf-8",
    b"; charset=x-bogus",
    b"<a@b>",
    b"<b@a>",
    b"cid:a@b",
    b"cid:a%40b",
    b"mid:m@x/a@b",
    b"http://x/a.gif",
    b"a.gif",
    b"../",
    b"./",
    b"thismessage:/",
    b"ContentType:text/plain",
    b"ContentType:multipart/related;boundary=b",
    b"<img src=\"",
    b"<a href=\"",
    b"<base href=\"http://x/\">",
    b"\">",
    b"<html>",
    b"=?utf-8?Q?",
    b"=?x?B?",
    b"?=",
    b"=\n",
    b"=3D",
    b"QUJD",
    b"\0",
    b"\xff",
    b"\xc3\xa9",
    // File names (issue 39): both fields, RFC 2231 sections in two charsets, raw
    // 8-bit octets, the RFC 2047 twin. Appended, so the committed seeds keep their
    // meaning.
    b"Content-Disposition: ",
    b"attachment",
    b"application/pdf",
    b"; filename=\"a.pdf\"",
    b"; name=\"a.pdf\"",
    b"; filename*=utf-8''%C3%A9",
    b"; name*0*=iso-8859-1''%E9",
    b"; name*1*=%E9",
    b"; filename*2=x",
    b"; name=\"\xc3\x9c.pdf\"",
    b"; filename=\"=?UTF-8?B?w6k=?=\"",
    // Parts shown as the sender meant (issue 39), after the file-name tokens (the
    // refs_ and rfc822_ seeds are spelled in this order): image signatures in base64 (PNG, GIF, an SVG's `<svg`),
    // types and names, references no recipient can load, escaped and cut ids, encoded
    // forwards and the reports they may sit in.
    b"iVBORw0KGgo",
    b"R0lGODlhAQABAIAAAP",
    b"PHN2ZyB4bWxucz0i",
    b"image/png",
    b"message/global",
    b"message/partial",
    b"multipart/report",
    b"Content-Disposition: inline",
    b"Content-Disposition: attachment; filename=\"a.msg\"",
    b"; name=\"a\"",
    b"; name=\"a.pdf\"",
    b"; name=\"f.eml\"",
    b"Subject: =?utf-8?B?w6k=?=\n",
    b"blob:applewebdata://",
    b"file:///C:/Temp/msohtmlclip1/",
    b"imap://u@h/fetch>UID>INBOX>1?part=1.2",
    b"webkit-fake-url://",
    b"http://localhost/",
    b"data:image/png;base64,",
    b"cid:a%20b",
    b"<a@b.test.cut>",
    b"<style>p{background:url(",
];

fuzz_target!(|data: &[u8]| {
    let mut raw = Vec::with_capacity(data.len() * 8);
    for &b in data {
        raw.extend_from_slice(TOKENS[b as usize % TOKENS.len()]);
    }
    common::fix_and_verify("fuzz rfc822", &raw, &Options::default());
    let normalize = Options {
        normalize_url_continuations: true,
        fix_signed: FixSigned::Always,
        ..Options::default()
    };
    common::fix_and_verify("fuzz rfc822 normalize", &raw, &normalize);
    let verified = Options {
        fix_signed: FixSigned::Verified,
        trusted_authserv_ids: vec!["mx.test.example".into()],
        ..Options::default()
    };
    common::fix_and_verify("fuzz rfc822 verified", &raw, &verified);
    let insert = Options {
        name_insert_disposition: true,
        ..Options::default()
    };
    common::fix_and_verify("fuzz rfc822 name insert", &raw, &insert);
});
