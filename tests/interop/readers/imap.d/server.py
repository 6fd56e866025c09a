#!/usr/bin/python3
"""Interop reader for an IMAP server (Dovecot, Cyrus): the message is delivered over
LMTP into a private mailbox of the server the harness started (lib/imapserver.py), then
read back as an IMAP client sees it: FETCH BODYSTRUCTURE (the server's own parse of
every part's type, parameters, Content-ID and Content-Location) and BODY.PEEK[n.MIME]
for each part, BODY.PEEK[n] for text/html. Values are reported as the server returns
them; a Content-Location the BODYSTRUCTURE lacks is taken from the part's MIME header,
as a client that reads it there would. References go to the first part with a matching
Content-ID (a first-match client), resolved with urllib.parse.urljoin.

What a person sees (`attachment`, `images`) is what Thunderbird for Android (K-9 Mail)
makes of that structure, the rule of phone and IMAP clients: see k9_view() below.

`name` is what K-9 lists an attachment as (readerlib.k9_name: MimeParameterDecoder on the
parameters RealImapFolder writes back from the BODYSTRUCTURE); `opens` is the server's
own parse of a forwarded message, its ENVELOPE in the BODYSTRUCTURE.

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


def k9_view(nodes):
    """Thunderbird for Android's (K-9 Mail's) view of a message, on the BODYSTRUCTURE
    (thunderbird/thunderbird-android: MessageExtractor.findViewablesAndAttachments,
    AttachmentInfoExtractor, AttachmentResolver, K9WebViewClient). Returns (listed
    paths, displayed text/html paths, cid map).

    - Every leaf that is not a text/plain or text/html body (a body: no disposition
      `attachment`, no disposition filename; in a multipart/alternative the first text
      and the HTML alternative) is an attachment, except application/pgp-signature and
      text/rfc822-headers; of a multipart/signed only the first part counts.
    - The attachment list leaves out an "inline attachment": disposition `inline`, a
      Content-ID and an image/* type (AttachmentInfoExtractor).
    - HTML shown: every HTML body, in an alternative the HTML if any (else its text).
    - cid map: Content-ID (from the first `<` to the last `>` stripped) -> part, over all
      leaves; the first in document order wins (AttachmentResolver's stack walk puts
      later parts first)."""
    kids = {}
    for n in nodes:
        kids.setdefault(n["parent"], []).append(n)

    def is_multi(n):
        return n["content_type"].startswith("multipart/")

    def textual(n):
        d = n.get("disposition")
        att = d is not None and (d[0] == "attachment" or "filename" in d[1])
        return not att and n["content_type"] in ("text/html", "text/plain", "application/pgp")

    atts, shown = [], []

    def find_text(n, direct):
        out = []
        for k in kids.get(n["path"], []):
            if is_multi(k):
                tv = find_text(k, False)
                if tv:
                    out += tv
                    if direct:
                        break
            elif textual(k) and k["content_type"] == "text/plain":
                out.append(k)
                if direct:
                    break
        return out

    def find_atts(n, known):
        for k in kids.get(n["path"], []):
            if is_multi(k):
                find_atts(k, known)
            elif k["path"] not in known:
                atts.append(k)

    def find_html(n, known, direct):
        out, found = [], False
        for k in kids.get(n["path"], []):
            if is_multi(k):
                if direct and found:
                    find_atts(k, known)
                else:
                    hv = find_html(k, known, False)
                    if hv:
                        found = True
                        out += hv
            elif not (direct and found) and textual(k) and k["content_type"] == "text/html":
                out.append(k)
                found = True
            elif k["path"] not in known:
                atts.append(k)
        return out

    def walk(n):
        ct = n["content_type"]
        if is_multi(n):
            if ct == "multipart/alternative":
                text = find_text(n, True)
                html = find_html(n, {t["path"] for t in text}, True)
                shown.extend(h["path"] for h in html if h["content_type"] == "text/html")
            elif ct == "multipart/signed":
                for k in kids.get(n["path"], [])[:1]:
                    walk(k)
            else:
                for k in kids.get(n["path"], []):
                    walk(k)
        elif ct == "message/rfc822" and (n.get("disposition") or ("",))[0] != "attachment":
            pass  # its own viewables (the reader does not descend into it)
        elif textual(n):
            if ct == "text/html":
                shown.append(n["path"])
        elif ct not in ("application/pgp-signature", "text/rfc822-headers"):
            atts.append(n)

    walk(next(n for n in nodes if n["parent"] is None))

    def inline_attachment(n):
        d = n.get("disposition")
        return (d is not None and d[0] == "inline" and n["id"] is not None
                and n["content_type"].startswith("image/"))

    listed = [n["path"] for n in atts if not inline_attachment(n)]
    k9_view.attachment_parts = atts
    cids = {}
    for n in reversed([n for n in nodes if not is_multi(n)]):
        if n["id"] is not None:
            c = n["id"]
            i, j = c.find("<"), c.rfind(">")
            cids[c[i + 1:j] if i != -1 and j != -1 else c] = n["path"]
    return listed, shown, cids


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
        listed, shown, cids = k9_view(nodes)
        readerlib.set_attachments(out, listed)
        # Names: AttachmentInfoExtractor's, on the parameters RealImapFolder writes back from
        # the BODYSTRUCTURE (readerlib.k9_name); only attachment parts have one. `opens`:
        # the server's own parse of a message/rfc822 part (its ENVELOPE: any field, or none
        # and an empty body), the size of an application/octet-stream one.
        names, opens = {}, {}
        for n in k9_view.attachment_parts:
            d = n.get("disposition")
            names[n["path"]] = readerlib.k9_name(d[2] if d else None, n["param_list"], n["content_type"])
        for n in nodes:
            if n["content_type"] in ("message/rfc822", "message/global"):
                env = n.get("envelope") or []
                # an ENVELOPE of NILs: the server found no header field (it parses the part
                # without undoing its Content-Transfer-Encoding): no message to offer
                opens[n["path"]] = "message" if any(x is not None for x in env) else "empty"
            elif n["content_type"] == "application/octet-stream":
                opens[n["path"]] = "file" if n.get("size") else "empty"
        readerlib.set_names(out, names, opens)
        out["images"] = []
        for path in shown:
            for ref in readerlib.image_refs(next(n["node"]["html"] for n in nodes if n["path"] == path) or ""):
                # the WebView hands K-9 the cid: URL with the scheme lower-cased and its
                # scheme-specific part %-decoded; anything else is remote content
                to = cids.get(urllib.parse.unquote(ref[4:])) if ref[:4].lower() == "cid:" else None
                out["images"].append({"from": path, "ref": ref, "to": to})
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
