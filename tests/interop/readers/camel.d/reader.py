#!/usr/bin/python3
"""Interop reader: Evolution's mail library Camel (evolution-data-server) through
python3-gi, the way Evolution reads an IMAP account: its IMAPX provider logs in to the
private Dovecot (lib/imapserver.py) where the message was delivered over LMTP, fetches
it and parses it with Camel's MIME parser. Values as Camel returns them; references go
to the first part with a matching Content-ID, resolved with urllib.parse.urljoin.

Usage: reader.py FILE.eml. Reader contract: tests/interop/README.md."""
import os
import shutil
import sys
import tempfile

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
    readerlib.emit(out)


if __name__ == "__main__":
    try:
        main()
    except (OSError, RuntimeError, gi.repository.GLib.Error) as e:
        print("evolution-camel reader: %s" % e, file=sys.stderr)
        sys.exit(2)
