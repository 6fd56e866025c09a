#!/usr/bin/python3
"""Interop reader "horde-mime": Horde_Mime (Debian php-horde-mime, the MIME library of
Horde IMP and Nextcloud Mail) run by php-cli (reader.php), with Nextcloud Mail's rules
for what a person sees. See README-gui.md ("horde-mime").

- parts: Horde_Mime_Part::parseMessage's parts; content_type, content_id
  (getContentId: the Content-ID with every leading/trailing '<' '>' trimmed) and the
  parameters as Horde returns them; content_location from the part's header as
  Horde_Mime_Headers parses it. `resolved`/`refs` by the contract's rule with
  urllib.parse.urljoin (PHP has no URL join), lib/readerlib.py.
- related root: Horde_Mime_Related::startId() (start parameter looked up among every
  part below the multipart/related, else the first child).
- attachment: Nextcloud Mail's ImapMessageFetcher::getPart (v5.11.2): a part for which
  Horde's isAttachment() holds, or message/rfc822 (signatures excepted), is an
  attachment; else one with a filename, or a Content-ID and a type other than text/* and
  multipart/*, is an inline attachment: listed only when the message has no HTML body.
- images: each image reference (img src, background attribute, CSS url()) of the HTML
  bodies Nextcloud shows; a cid: one displays the first inline attachment whose
  Content-ID equals the cid URL's path as HTMLPurifier normalises it
  (TransformURLScheme::replaceCidWithUrl); anything else is proxied as remote content
  and blocked by default (null). Each entry also carries `horde_related`: what
  Horde_Mime_Related::cidReplace gives for it (only img src and body/td background,
  only inside a multipart/related), for comparison.
- name: Horde's getName() (the disposition's filename, else the type's name); opens:
  the embedded message parseMessage makes of a message/rfc822 part (it does not undo a
  Content-Transfer-Encoding there), and the content of an application/octet-stream one.

Usage: horde-mime FILE.eml -> one JSON object. Reader contract: tests/interop/README.md."""
import json
import os
import re
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "lib"))
import readerlib  # noqa: E402

NAME = "horde-mime"
TAG = re.compile(r"<([A-Za-z][A-Za-z0-9]*)(\s[^>]*)?>")
ONE_ATTR = re.compile(r"""([^\s=/>"']+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>"']+)))?""")
ENT = re.compile(r"&(amp|quot|#39|lt|gt);")
ENTITIES = {"&amp;": "&", "&quot;": '"', "&#39;": "'", "&lt;": "<", "&gt;": ">"}
UNRESERVED = re.compile(r"[A-Za-z0-9._~-]")
PATH_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@/%")


def die(msg):
    sys.stderr.write("%s reader: %s\n" % (NAME, msg))
    sys.exit(2)


def unent(v):
    return ENT.sub(lambda e: ENTITIES[e.group(0)], v).strip()


def css_urls(text, out):
    for m in readerlib.CSSURL.finditer(text):
        v = unent(next(g for g in m.groups() if g is not None))
        if v:
            out.append(("css", v))


def image_refs(html):
    """(kind, value) of every img src, background attribute and CSS url(), in order."""
    out = []
    pos = 0
    for t in TAG.finditer(html):
        css_urls(html[pos:t.start()], out)
        pos = t.end()
        tag = t.group(1).lower()
        for a in ONE_ATTR.finditer(t.group(2) or ""):
            name = a.group(1).lower()
            v = next((g for g in a.groups()[1:] if g is not None), None)
            if v is None:
                continue
            v = unent(v)
            if name == "src" and tag == "img" and v:
                out.append(("img", v))
            elif name == "background" and v:
                out.append(("background:" + tag, v))
            elif name == "style":
                css_urls(v, out)
    css_urls(html[pos:], out)
    return out


def purifier_path(ref):
    """The path HTMLPurifier's URI parser gives a cid: URL after validation: up to '?'
    or '#', percent-encoding normalised (unreserved octets decoded, hex upper-cased,
    octets outside the path's set encoded)."""
    path = re.split(r"[?#]", ref[4:], maxsplit=1)[0]

    def norm(m):
        c = chr(int(m.group(1), 16))
        return c if UNRESERVED.fullmatch(c) else "%" + m.group(1).upper()
    path = re.sub(r"%([0-9A-Fa-f]{2})", norm, path)
    out = []
    for ch in path:
        if ch in PATH_OK:
            out.append(ch)
        else:
            out.extend("%%%02X" % b for b in ch.encode("utf-8"))
    return "".join(out)


def main():
    if len(sys.argv) != 2:
        die("usage: horde-mime FILE.eml")
    started = time.monotonic()
    if not os.path.isfile("/usr/share/php/Horde/Mime/Part.php"):
        die("php-horde-mime not installed (scripts/install-test-deps.d/horde-mime.sh)")
    try:
        ver = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "php-horde-mime"],
                             capture_output=True, text=True, timeout=10).stdout.strip() or "?"
    except Exception:
        ver = "?"
    try:
        p = subprocess.run(["php", "-d", "memory_limit=512M", os.path.join(here, "reader.php"), sys.argv[1]],
                           capture_output=True, timeout=50)
    except FileNotFoundError:
        die("php not found (scripts/install-test-deps.d/horde-mime.sh)")
    if p.returncode == 2:
        die(p.stderr.decode("utf-8", "replace").strip())
    out = readerlib.new(NAME, "Horde_Mime %s (Horde_Mime_Part::parseMessage, Horde_Mime_Related), "
                        "Nextcloud Mail 5.11.2 rules" % ver)
    try:
        res = json.loads(p.stdout.decode("utf-8"))
    except Exception:
        out["ok"] = False
        out["error"] = "php exited %d: %s" % (p.returncode, p.stderr.decode("utf-8", "replace").strip()[-500:])
        out["images"] = []
        readerlib.emit(out)
        return
    out["defects"] = res.get("defects", [])
    out["images"] = []
    if not res.get("ok"):
        out["ok"] = False
        out["error"] = res.get("error")
        readerlib.emit(out)
        return
    nodes = res["nodes"]
    readerlib.finish(out, nodes)
    for n in nodes:
        if n["content_type"] == "message/external-body":
            out["extbody"].append({"part": n["path"], "access_type": n.get("access_type"), "url": n.get("url")})
    # Horde_Mime_Related's root, in place of the contract's rule (which it agrees with
    # unless start names a grandchild or nothing).
    roots = {r["part"]: r["root"] for r in res["related"]}
    for r in out["related"]:
        if r["part"] in roots:
            r["root"] = roots[r["part"]]
    nc = res["nextcloud"]
    has_html = bool(nc["html"])
    listed = set(nc["attachments"]) | (set() if has_html else set(nc["inline"]))
    by = {n["path"]: n for n in nodes}
    for part in out["parts"]:
        n = by[part["part"]]
        if n["content_type"].startswith("multipart/"):
            continue
        part["attachment"] = part["part"] in listed
        part["appended"] = False
        # the name Nextcloud Mail shows: Horde's getName() (disposition filename, else
        # type name, as Horde_Mime_Headers decodes them)
        part["name"] = n.get("name")
        if n.get("opens"):
            part["opens"] = n["opens"]
        part["nextcloud_role"] = ("attachment" if part["part"] in nc["attachments"]
                                  else "inline attachment" if part["part"] in nc["inline"]
                                  else "html body" if part["part"] in nc["html"]
                                  else "text body" if part["part"] in nc["plain"]
                                  else "not shown")
    inline_cids = [(path, by[path]["content_id"]) for path in nc["inline"]]
    related = {}
    for c in res["cidreplace"]:
        related[(c["from"], c["ref"])] = c["to"]
    for path in nc["html"]:
        html = by[path]["html"] or ""
        for kind, ref in image_refs(html):
            to = None
            if ref[:4].lower() == "cid:":
                want = purifier_path(ref)
                to = next((pp for pp, cid in inline_cids if cid == want), None)
            entry = {"from": path, "ref": ref, "to": to}
            if ref.startswith("cid:") and (kind == "img" or kind in ("background:body", "background:td")):
                inside = any(path.startswith(r + ".") or r == "0" for r in roots)
                if inside:
                    entry["horde_related"] = related.get((path, ref))
            out["images"].append(entry)
    if os.environ.get("MIMEREF_READER_VERBOSE"):
        sys.stderr.write("%s reader: %s in %.2f s\n" % (NAME, os.path.basename(sys.argv[1]),
                                                        time.monotonic() - started))
    readerlib.emit(out)


if __name__ == "__main__":
    main()
