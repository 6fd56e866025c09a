#!/usr/bin/python3
"""Interop reader: Roundcube webmail's own IMAP and MIME code (rcube_imap,
rcube_message, rcube_washtml of the Debian roundcube-core package, run by php-cli)
against a private IMAP server (Dovecot or Cyrus, lib/imapserver.py). The message is
delivered over LMTP, then reader.php loads it as Roundcube's message view does and
reports each part as rcube_message holds it and, for each HTML part it shows, where
its cid map (the last part with a Content-ID wins) sends each reference. `resolved`
uses urllib.parse.urljoin on Roundcube's Content-Location values. `attachment` and
`appended` are the message view's (show.php): its attachment list, and the image
attachments it shows after the body; `images` where washtml sends each image.

Usage: reader.py dovecot|cyrus FILE.eml. Reader contract: tests/interop/README.md."""
import json
import os
import re
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "lib"))
import imapserver  # noqa: E402
import readerlib  # noqa: E402

HOME = os.environ.get("MIMEREF_ROUNDCUBE_HOME", "/usr/share/roundcube")


def version():
    try:
        with open(os.path.join(HOME, "program/include/iniset.php")) as f:
            m = re.search(r"define\('RCMAIL_VERSION', '([^']+)'\)", f.read())
            return m.group(1) if m else "?"
    except OSError:
        return "?"


def main():
    server, path = sys.argv[1], sys.argv[2]
    if not os.path.isfile(os.path.join(HOME, "program/lib/Roundcube/rcube_message.php")):
        raise RuntimeError("roundcube-core not found in %s (scripts/install-test-deps)" % HOME)
    with open(path, "rb") as f:
        data = f.read()
    addr = imapserver.connect(server)
    out = readerlib.new("roundcube-" + server, "Roundcube %s (rcube_imap, rcube_message) on %s"
                        % (version(), addr["version"]))
    user = imapserver.deliver(server, addr, data)
    login, password, authcid = imapserver.credentials(server, addr, user)
    with tempfile.TemporaryDirectory(prefix="mimeref-roundcube-") as cfg:
        # A configuration of its own: no database, no log files outside this run.
        with open(os.path.join(cfg, "config.inc.php"), "w") as f:
            f.write("<?php\n$config = ['log_driver' => 'stdout', 'temp_dir' => %s,"
                    " 'imap_cache' => null, 'messages_cache' => false];\n"
                    % json.dumps(cfg))
        defaults = "/etc/roundcube/defaults.inc.php"
        if os.path.exists(defaults):
            os.symlink(defaults, os.path.join(cfg, "defaults.inc.php"))
        env = dict(os.environ, ROUNDCUBE_CONFIG_DIR=cfg)
        args = ["php", os.path.join(here, "reader.php"), "127.0.0.1", str(addr["imap"]), login, password]
        if authcid:
            args.append(authcid)
        p = subprocess.run(args, capture_output=True, env=env, timeout=60)
    if p.returncode != 0:
        raise RuntimeError("php exit %d: %s %s" % (p.returncode, p.stderr.decode(errors="replace").strip()[-300:],
                                                   p.stdout.decode(errors="replace").strip()[-300:]))
    raw = json.loads(p.stdout.decode("utf-8").strip().splitlines()[-1])
    nodes = []
    for part in raw["parts"]:
        prm = part["params"] if isinstance(part["params"], dict) else {}
        cid = part["content_id"]
        nodes.append({"path": part["part"], "parent": part["parent"], "content_type": part["content_type"],
                      "content_id": cid, "content_location": part["content_location"] or None,
                      "type": prm.get("type"), "start": prm.get("start"), "html": None})
        if part["content_type"] == "message/external-body":
            out["extbody"].append({"part": part["part"], "access_type": prm.get("access-type"),
                                   "url": prm.get("url")})
    readerlib.finish(out, nodes)
    out["refs"] = [{"from": c["part"], "ref": r["ref"], "to": r["to"]}
                   for c in raw["content"] for r in c["refs"]]
    readerlib.set_attachments(out, raw["listed"], raw["appended"])
    readerlib.set_names(out, raw.get("names") or {}, raw.get("opens") or {})
    out["images"] = [{"from": c["part"], "ref": r["ref"], "to": r["to"]}
                     for c in raw["content"] for r in c["images"]]
    readerlib.emit(out)


if __name__ == "__main__":
    try:
        main()
    except (OSError, RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
        print("roundcube reader: %s" % e, file=sys.stderr)
        sys.exit(2)
