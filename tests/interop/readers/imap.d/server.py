#!/usr/bin/python3
"""Interop reader for an IMAP server (Dovecot, Cyrus): the message is delivered over
LMTP into a private mailbox of the server the harness started (lib/imapserver.py), then
read back as an IMAP client sees it: FETCH BODYSTRUCTURE (the server's own parse of
every part's type, parameters, Content-ID and Content-Location) and BODY.PEEK[n.MIME]
for each part, BODY.PEEK[n] for text/html. Values are reported as the server returns
them; a Content-Location the BODYSTRUCTURE lacks is taken from the part's MIME header,
as a client that reads it there would. References go to the first part with a matching
Content-ID (a first-match client), resolved with urllib.parse.urljoin.

Usage: server.py dovecot|cyrus FILE.eml. Reader contract: tests/interop/README.md."""
import os
import sys
import urllib.parse

lib = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib")
sys.path.insert(0, lib)
import imapclient  # noqa: E402
import imapserver  # noqa: E402
import readerlib  # noqa: E402


def extbody_url(p):
    """The URL parameter as a client gets it from BODYSTRUCTURE: `url` as the server
    gives it, else RFC 2231 continuations joined by the client (url*0, url*1*, …)."""
    if "url" in p:
        return p["url"]
    parts = []
    for k, v in p.items():
        base, _, rest = k.partition("*")
        if base != "url" or not rest:
            continue
        num, _, star = rest.partition("*")
        if not num.isdigit():
            continue
        parts.append((int(num), v, star == "" and k.endswith("*")))
    if not parts:
        return None
    parts.sort()
    out = ""
    for i, (n, v, enc) in enumerate(parts):
        if enc:
            if i == 0 and v.count("'") >= 2:
                v = v.split("'", 2)[2]
            v = urllib.parse.unquote(v, errors="replace")
        out += v
    return out


def main():
    name, path = sys.argv[1], sys.argv[2]
    with open(path, "rb") as f:
        data = f.read()
    addr = imapserver.connect(name)
    out = readerlib.new(name, addr["version"] + " (BODYSTRUCTURE and BODY.PEEK[n.MIME] over IMAP, delivered by LMTP)")
    user = imapserver.deliver(name, addr, data)
    m = imapserver.login(name, addr, user)
    try:
        typ, _ = m.select("INBOX", readonly=True)
        if typ != "OK":
            raise RuntimeError("SELECT INBOX: %s" % typ)
        bs = imapclient.attr(imapclient.fetch(m, "1", "BODYSTRUCTURE"), "BODYSTRUCTURE")
        nodes = imapclient.walk(bs)
        for n in nodes:
            section = "HEADER" if n["path"] == "0" else n["path"] + ".MIME"
            try:
                raw = imapclient.attr(imapclient.fetch(m, "1", "BODY.PEEK[%s]" % section),
                                      "BODY[%s]" % section)
            except (RuntimeError, ValueError) as e:
                out["defects"].append("%s: BODY.PEEK[%s]: %s" % (n["path"], section, e))
                raw = None
            hdr = imapclient.mime_header(raw)
            if n["location"] is None and hdr.get("Content-Location") is not None:
                n["location"] = str(hdr.get("Content-Location"))
        for n in nodes:
            p = n["params"]
            node = {"path": n["path"], "parent": n["parent"], "content_type": n["content_type"],
                    "content_id": n["id"], "content_location": n["location"],
                    "type": p.get("type"), "start": p.get("start"), "html": None}
            if n["content_type"] == "message/external-body":
                out["extbody"].append({"part": n["path"], "access_type": p.get("access-type"),
                                       "url": extbody_url(p)})
            elif n["content_type"] == "text/html":
                section = "TEXT" if n["path"] == "0" else n["path"]
                body = imapclient.attr(imapclient.fetch(m, "1", "BODY.PEEK[%s]" % section),
                                       "BODY[%s]" % section)
                node["html"] = imapclient.decode_body(body or b"", n["encoding"], p.get("charset"))
            n["node"] = node
        readerlib.finish(out, [n["node"] for n in nodes])
    finally:
        try:
            m.logout()
        except Exception:
            pass
    readerlib.emit(out)


if __name__ == "__main__":
    try:
        main()
    except (OSError, RuntimeError, ValueError) as e:
        # no server, or it refused: the reader cannot run
        print("%s reader: %s" % (sys.argv[1] if len(sys.argv) > 1 else "imap", e), file=sys.stderr)
        sys.exit(2)
