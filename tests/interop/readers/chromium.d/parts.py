#!/usr/bin/env python3
"""Leaf parts of a message with digests of their decoded bodies, so that the chromium
reader can tell which part a resource Chromium loaded from the archive came from.
Paths are IMAP section numbers (0 the top-level entity, its children 1, 2, then 2.1).
Prints JSON: [{"part": "2", "sha256": [hex, ...], "content_type", "content_id", "content_location"}] (several digests per part: the
bytes, and for text the bytes with CRLF turned into LF, also without trailing line ends)."""
import email
import email.policy
import hashlib
import json
import sys


def walk(part, path, out, inner=False):
    if part.is_multipart():
        # An encapsulated message (message/rfc822, external-body) is one part to a
        # person; its own parts are searched for resources, marked `inner`.
        message = part.get_content_maintype() == "message"
        if message:
            out.append({"part": path, "sha256": [], "content_type": part.get_content_type(),
                        "content_id": None, "content_location": None, "inner": inner})
        for i, k in enumerate(part.get_payload(), 1):
            walk(k, str(i) if path == "0" else "%s.%d" % (path, i), out, inner or message)
        return
    try:
        body = part.get_payload(decode=True) or b""
    except Exception:
        return
    ds = {hashlib.sha256(body).hexdigest()}
    if part.get_content_maintype() == "text":
        ds.add(hashlib.sha256(body.replace(b"\r\n", b"\n")).hexdigest())
        # Chromium keeps the line end before the boundary: compare without it
        ds.add(hashlib.sha256(body.replace(b"\r\n", b"\n").rstrip(b"\n")).hexdigest())
        cs = part.get_content_charset() or "us-ascii"
        try:
            t = body.decode(cs).encode("utf-8")
            ds.add(hashlib.sha256(t).hexdigest())
            ds.add(hashlib.sha256(t.replace(b"\r\n", b"\n")).hexdigest())
        except (LookupError, UnicodeDecodeError):
            pass
    cid = part.get("Content-ID")
    loc = part.get("Content-Location")
    out.append({"part": path, "sha256": sorted(ds), "content_type": part.get_content_type(), "inner": inner,
                "content_id": str(cid).strip().strip("<>") if cid is not None else None,
                "content_location": "".join(str(loc).split()) if loc is not None else None})


def main():
    out = []
    try:
        msg = email.message_from_binary_file(open(sys.argv[1], "rb"), policy=email.policy.compat32)
        walk(msg, "0", out)
    except Exception:
        pass
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
