#!/usr/bin/python3
"""Interop reader: Evolution's mail library Camel (evolution-data-server) through
python3-gi, the way Evolution reads an IMAP account: its IMAPX provider logs in to the
private Dovecot (lib/imapserver.py) where the message was delivered over LMTP, fetches
it and parses it with Camel's MIME parser. Values as Camel returns them; references go
to the first part with a matching Content-ID, resolved with urllib.parse.urljoin.
`attachment`, `appended` and `images` are what Evolution's mail view makes of Camel's
parse: evolution_view() below follows its parser and formatter (GNOME/evolution,
src/em-format); Evolution itself is not run.

Usage: reader.py FILE.eml. Reader contract: tests/interop/README.md."""
import os
import shutil
import sys
import tempfile
import urllib.parse

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "lib"))
import imapserver  # noqa: E402
import readerlib  # noqa: E402

SERVER = "dovecot"

try:
    import gi
    gi.require_version("Camel", "1.2")
    from gi.repository import Camel, Gio  # noqa: E402
except (ImportError, ValueError) as e:
    print("evolution-camel reader: Camel not available through python3-gi (%s; scripts/install-test-deps)" % e,
          file=sys.stderr)
    sys.exit(2)


class Session(Camel.Session):
    def do_authenticate_sync(self, service, mechanism, cancellable):
        return service.authenticate_sync(mechanism, cancellable) == Camel.AuthenticationResult.ACCEPTED


def camel_version():
    import subprocess
    v = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "libcamel-1.2-64"], capture_output=True,
                       text=True).stdout.strip()
    return v or "?"


def fetch(addr, user, tmp):
    """The message as Evolution has it: IMAPX store, INBOX, first message."""
    Camel.provider_init()
    session = Session(user_data_dir=tmp, user_cache_dir=tmp)
    session.set_online(True)
    store = session.add_service("interop", "imapx", Camel.ProviderType.STORE)
    s = store.ref_settings()
    s.set_property("host", "127.0.0.1")
    s.set_property("port", addr["imap"])
    s.set_property("user", user)
    s.set_property("security-method", Camel.NetworkSecurityMethod.NONE)
    s.set_property("auth-mechanism", "PLAIN")
    store.set_password(imapserver.PASSWORD)
    store.set_online_sync(True, None)
    store.connect_sync(None)
    folder = store.get_folder_sync("INBOX", 0, None)
    folder.refresh_info_sync(None)
    uids = folder.get_uids()
    if not uids:
        raise RuntimeError("IMAPX sees no message in INBOX")
    msg = folder.get_message_sync(uids[0], None)
    store.disconnect_sync(True, None)
    return msg


def decoded(part):
    out = Gio.MemoryOutputStream.new_resizable()
    part.get_content().decode_to_output_stream_sync(out, None)
    out.close(None)
    return bytes(out.steal_as_bytes().get_data())


def opens(part):
    """What Evolution offers of a message/rfc822 part: e-mail-parser-message-rfc822.c
    decodes the part's content (undoing its Content-Transfer-Encoding) and constructs a
    message from it, shown below the body; a message with no header field is not the
    forwarded one. An application/octet-stream part is a file, its content decoded."""
    data = decoded(part)
    if not data.strip():
        return "empty"
    if (part.get_content_type().simple() or "").lower().startswith("message/"):
        from gi.repository import GLib
        mp = Camel.MimeParser.new()
        mp.init_with_bytes(GLib.Bytes.new(data))
        m = Camel.MimeMessage.new()
        m.construct_from_parser_sync(mp, None)
        heads = m.dup_headers()
        return "message" if heads is not None and heads.get_length() else "undecodable"
    return "file"


def text_of(part):
    out = Gio.MemoryOutputStream.new_resizable()
    part.get_content().decode_to_output_stream_sync(out, None)
    out.close(None)
    data = bytes(out.steal_as_bytes().get_data())
    charset = part.get_content_type().param("charset") or "us-ascii"
    try:
        return data.decode(charset, "replace")
    except LookupError:
        return data.decode("utf-8", "replace")


class EPart:
    """One EMailPart of Evolution's part list: kind 'attachment' (EMailPartAttachment,
    an entry of the attachment bar), 'image' (EMailPartImage), 'html', 'text' or
    'other'; path of the Camel part it shows."""

    def __init__(self, kind, path, cid=None, is_attachment=False, hidden=False):
        self.kind, self.path, self.cid = kind, path, cid
        self.is_attachment, self.hidden = is_attachment, hidden
        self.shown = self.possible = False


def evolution_view(root):
    """Evolution's part list for a Camel message (e-mail-parser*.c, e-mail-part*.c):

    - image/*: an EMailPartImage, hidden when it has a Content-ID and its disposition is
      not `attachment`; when not hidden it is wrapped as an attachment.
    - text/html, text/*: shown; wrapped as an attachment when it is one by
      e_mail_part_is_attachment() (a text part with a file name); an HTML part's cid is
      its Content-Location (resolved against Content-Base when relative).
    - any type without a parser (application/*, ...): wrapped as an attachment.
    - multipart/mixed (and any multipart/* without a parser of its own): each part in
      turn; one whose first EMailPart has a cid and is not an attachment or is hidden is
      wrapped as an attachment (so an image with a Content-ID is listed).
    - multipart/alternative: the last part that is not an attachment and has a parser.
    - multipart/related: the start (or first) part, then the others; an image with a
      Content-ID that the display HTML refers to ("cid:X" in double quotes) stays
      hidden; one it does not refer to, or one with a Content-Type name ("possible
      attachment", behind the attachment bar's menu), is wrapped as an attachment.
    - wrapping hides the wrapped part; an attachment of a type with a parser is shown
      expanded (inline after the body) when its disposition is `inline`.
    - the attachment bar lists every attachment that is not hidden or possible; the
      pane loads cid:X from the first EMailPart whose cid is "cid:X", hidden or not."""
    HAS_PARSER = ("text/", "multipart/", "image/", "message/")

    def simple(part):
        ct = part.get_content_type()
        return (ct.simple() or "").lower() if ct else "text/plain"

    def kids(part):
        c = part.get_content()
        return [c.get_part(i) for i in range(c.get_number())] if isinstance(c, Camel.Multipart) else []

    def is_attachment(part):  # e_mail_part_is_attachment()
        t = simple(part)
        if t.startswith("multipart/") or t in ("application/xpkcs7mime", "application/xpkcs7-mime",
                                              "application/x-pkcs7-mime", "application/pkcs7-mime",
                                              "application/x-inlinepgp-signed", "application/x-inlinepgp-encrypted",
                                              "x-evolution/evolution-rss-feed", "text/calendar", "text/x-calendar"):
            return False
        return not (t.startswith("text/") and part.get_filename() is None)

    def wrap(part, path, q, possible=False):
        t = simple(part)
        disp = part.get_disposition()
        a = EPart("attachment", path, "cid:" + part.get_content_id() if part.get_content_id() else None, True)
        a.shown = t.startswith(HAS_PARSER) and disp is not None and disp.lower() == "inline"
        a.possible = possible
        if q and q[0].kind != "attachment":
            q[0].hidden = True
        q.insert(0, a)

    def parse(part, path):
        t = simple(part)
        ks = kids(part)
        if t == "multipart/alternative" and ks:
            best = None
            for i, k in enumerate(ks):
                size = k.get_content().calculate_decoded_size_sync(None) if k.get_content() else 0
                if size in (0, -1, 2 ** 64 - 1):
                    continue
                rel_att = simple(k) == "multipart/related" and kids(k) and is_attachment(related_display(k) or k)
                if not is_attachment(k) and not rel_att and simple(k).startswith(HAS_PARSER):
                    best = i
            if best is not None:
                return parse(ks[best], readerlib.child_path(path, best + 1))
            return mixed(ks, path)
        if t == "multipart/related" and ks:
            return related(part, ks, path)
        if t.startswith("multipart/"):
            return mixed(ks, path)
        if t.startswith("image/"):
            cid = part.get_content_id()
            disp = part.get_disposition() or "inline"
            img = EPart("image", path, "cid:" + cid if cid else None, True,
                        hidden=cid is not None and disp.lower() != "attachment")
            q = [img]
            if not img.hidden:
                wrap(part, path, q)
            return q
        if t == "text/html":
            loc, base = part.get_content_location(), part.get_header("Content-Base")
            cid = None
            if loc is not None:
                cid = urllib.parse.urljoin(base.strip(), loc) if ":" not in loc and base else loc
            q = [EPart("html", path, cid)]
            if is_attachment(part):
                wrap(part, path, q)
            return q
        if t.startswith("text/"):
            q = [EPart("text", path)]
            if is_attachment(part):
                wrap(part, path, q)
            return q
        if t.startswith("message/"):
            return [EPart("other", path)]
        q = []
        wrap(part, path, q)
        return q

    def mixed(ks, path):
        out = []
        for i, k in enumerate(ks):
            kp = readerlib.child_path(path, i + 1)
            q = parse(k, kp)
            head = q[0] if q else None
            if head is not None and head.cid is not None and (not head.is_attachment or head.hidden):
                wrap(k, kp, q)
            elif head is not None and simple(k).startswith("message/") and not head.is_attachment:
                wrap(k, kp, q)
                q[0].shown = True
            out += q
        return out

    def related_display(part):
        ks = kids(part)
        start = part.get_content_type().param("start")
        if start and len(start) > 2:
            s = start[1:-1]
            return next((k for k in ks if k.get_content_id() == s), None)
        return ks[0] if ks else None

    def related(part, ks, path):
        display = related_display(part)
        if display is None:
            return mixed(ks, path)
        may = display
        if simple(display) == "multipart/alternative":
            may = next((k for k in kids(display) if simple(k) == "text/html"), display)
        body = text_of(may) if simple(may) == "text/html" else None

        def refers(cid):
            if not body or not cid:
                return False
            i = body.find(cid)
            while i != -1:
                if i > 1 and body[i - 1] == '"' and body[i + len(cid):i + len(cid) + 1] == '"':
                    return True
                i = body.find(cid, i + 1)
            return False

        di = ks.index(display)
        out = parse(display, readerlib.child_path(path, di + 1))
        for i, k in enumerate(ks):
            if i == di:
                continue
            kp = readerlib.child_path(path, i + 1)
            q = parse(k, kp)
            for mp in list(q):
                can = mp.cid is not None and mp.kind == "image" and mp.is_attachment and mp.hidden
                name = k.get_content_type().param("name") if k.get_content_type() else None
                allow = can and bool(name)
                if not allow and refers(mp.cid):
                    mp.hidden = True
                elif can:
                    if allow and refers(mp.cid):
                        mp.hidden = True
                    wrap(k, kp, q, possible=allow)
            out += q
        return out

    return parse(root, "0")


def main():
    path = sys.argv[1]
    with open(path, "rb") as f:
        data = f.read()
    addr = imapserver.connect(SERVER)
    out = readerlib.new("evolution-camel", "Camel %s (evolution-data-server IMAPX) on %s"
                        % (camel_version(), addr["version"]))
    user = imapserver.deliver(SERVER, addr, data)
    tmp = tempfile.mkdtemp(prefix="mimeref-camel-")
    try:
        msg = fetch(addr, user, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    nodes = []

    def walk(part, path, parent):
        ct = part.get_content_type()
        simple = (ct.simple() or "").lower() if ct else "text/plain"
        n = {"path": path, "parent": parent, "content_type": simple,
             "content_id": part.get_content_id(), "content_location": part.get_content_location(),
             "type": ct.param("type") if ct else None, "start": ct.param("start") if ct else None,
             "html": None}
        nodes.append(n)
        if simple == "message/external-body":
            out["extbody"].append({"part": path, "access_type": ct.param("access-type"), "url": ct.param("url")})
        elif simple == "text/html":
            n["html"] = text_of(part)
        content = part.get_content()
        if isinstance(content, Camel.Multipart):
            for i in range(content.get_number()):
                walk(content.get_part(i), readerlib.child_path(path, i + 1), path)

    walk(msg, "0", None)
    readerlib.finish(out, nodes)
    # Names: camel_mime_part_get_filename() (the disposition's filename, else the type's
    # name, RFC 2231 and RFC 2047 decoded), which the attachment bar shows.
    names, opened = {}, {}

    def names_of(part, path):
        content = part.get_content()
        if isinstance(content, Camel.Multipart):
            for i in range(content.get_number()):
                names_of(content.get_part(i), readerlib.child_path(path, i + 1))
            return
        names[path] = part.get_filename()
        if (part.get_content_type().simple() or "").lower() in readerlib.OPENS_TYPES:
            opened[path] = opens(part)

    names_of(msg, "0")
    readerlib.set_names(out, names, opened)
    view = evolution_view(msg)
    bar = [p for p in view if p.kind == "attachment" and not p.hidden and not p.possible]
    readerlib.set_attachments(out, [p.path for p in bar],
                              [p.path for p in bar if p.shown and
                               next(n for n in nodes if n["path"] == p.path)["content_type"].startswith("image/")])
    out["images"] = []
    for h in view:
        if h.kind != "html" or h.hidden:
            continue
        for ref in readerlib.image_refs(next(n for n in nodes if n["path"] == h.path)["html"] or ""):
            to = None
            if ref[:4].lower() == "cid:":
                to = next((p.path for p in view if p.cid == "cid:" + ref[4:]), None)
            out["images"].append({"from": h.path, "ref": ref, "to": to})
    readerlib.emit(out)


if __name__ == "__main__":
    try:
        main()
    except (OSError, RuntimeError, gi.repository.GLib.Error) as e:
        print("evolution-camel reader: %s" % e, file=sys.stderr)
        sys.exit(2)
