#!/usr/bin/env python3
"""Interop reader "alpine": Alpine under tmux, reading the message as a person would.

The message becomes a one-message MMDF mailbox (c-client's mmdf driver: no ">From "
quoting needed) in a temporary directory; Alpine runs read-only on a throwaway pinerc
(no system pine.conf, no mailcap or mime.types, no mail check, the greeting already
seen) inside a private tmux server (its own socket, always killed). What is read off
the screen:

- the message view (a 250x200 window, paged to its end): `shown`, and its "Parts/Attachments:"
  list: every part Alpine knows of, "Shown" when its text is in the view, "OK" when
  it can be viewed but is not shown, blank when Alpine cannot display it (images,
  PDFs: no viewer) and shows only a "[ Part N, Type ... ]" box in its place;
- the attachment index (">"): each part's number (IMAP section numbers; multipart
  containers are not listed) and Type/SUBTYPE;
- the "About attachment" screen ("A") of each entry: its Content-Type parameters
  (RFC 2231 joined) and its disposition, as Alpine parsed them.

Facts: `attachment` is true for a part listed and not "Shown"; Alpine cannot display
images, so every image reference of a shown HTML part is in `images` with `to` null
(the references are taken from the message source, by the part Alpine shows: its
screens show only "[IMAGE]" or the alt text); `appended` is false (the part's box
names it, the picture is not shown). Content-ID, Content-Location, references and the
multipart/related root are on no Alpine screen: null / empty. `name`: what the
attachment index shows after the type (`(Name: "x")`, `(Filename: "x")`, or a forwarded
message's Subject); `opens`: a message/rfc822 part whose own parts Alpine lists (c-client
parsed the forwarded message) offers the message.

Prints one JSON object; exit 0 whatever the message; exit 1 only when alpine or tmux
cannot run.
"""
import email
import email.policy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "lib"))
import readerlib  # noqa: E402
import tmuxscreen  # noqa: E402

NAME = "alpine"
WIDTH, HEIGHT = 250, 200       # Alpine draws at most 200 rows
DEADLINE = 45.0
MAX_PAGES = 40
MAX_PARTS = 100


def die(msg):
    sys.stderr.write("%s reader: %s\n" % (NAME, msg))
    sys.exit(1)


class Tmux(tmuxscreen.Tmux):
    def capture(self, escapes=False):
        # Alpine leaves the rows below its screen blank: they are not part of it.
        lines = super().capture(escapes)
        while lines and lines[-1] == "":
            lines.pop()
        return lines


def title(lines):
    return lines[0] if lines else ""


def screen_is(name):
    return lambda ls: bool(ls) and ("ALPINE" in ls[0] and name in ls[0])


# "   2.1 Shown    ~2 lines  Text" / "   2          69 bytes  Image"
PARTS_LINE = re.compile(r"^\s+(\d+(?:\.\d+)*)\s+(?:(Shown|OK|[A-Za-z][A-Za-z ]*?)\s+)?"
                        r"(~?[\d.,]+\s*(?:lines?|bytes?|[KMG]B))\s+(\S.*?)\s*$")
# "   2.2    57 bytes   Image/JPEG (Name: "x")"
INDEX_LINE = re.compile(r"^\s+(\d+(?:\.\d+)*)\s+(~?[\d.,]+\s*(?:lines?|bytes?|[KMG]B))\s+"
                        r"([A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+)(.*?)\s*$")
ABOUT_FIELD = re.compile(r"^  (\S[^:]*?)\s*: (.*)$")
CONT = re.compile(r"^ {20}(\S.*)$")


SGR = re.compile(r"\x1b\[([0-9;]*)m")


def selected_entry(lines):
    """Index (0-based, among the entry lines) of the attachment-index line drawn in
    reverse video, from a capture with escape sequences (an attribute carries over
    from one line to the next until reset)."""
    rev, k = False, -1
    for n, l in enumerate(lines):
        start_rev, pos = None, 0
        for m in list(SGR.finditer(l)) + [None]:
            chunk = l[pos:m.start()] if m else l[pos:]
            if start_rev is None and chunk.strip():
                start_rev = rev
            if m is None:
                break
            for c in [c for c in m.group(1).split(";") if c] or ["0"]:
                if c == "7":
                    rev = True
                elif c in ("0", "27"):
                    rev = False
            pos = m.end()
        if n > 0 and INDEX_LINE.match(SGR.sub("", l)):
            k += 1
            if start_rev:
                return k
    return None


def parse_about(lines):
    """'Details about Attachment #N' screen -> (N, {field: [values]})."""
    num, fields, cur = None, {}, None
    for l in lines[1:]:
        m = re.match(r"^Details about Attachment #(\S+) :", l)
        if m:
            num = m.group(1)
            continue
        m = ABOUT_FIELD.match(l)
        if m:
            cur = m.group(1).strip()
            fields.setdefault(cur, []).append(m.group(2).rstrip())
            continue
        m = CONT.match(l)
        if m and cur:
            fields[cur].append(m.group(1).rstrip())
    return num, fields


def params_of(values):
    out = []
    for v in values or []:
        if " = " in v:
            k, val = v.split(" = ", 1)
            out.append((k.strip().lower(), val))
    return out


def part_by_path(msg, path):
    """The email.message part at an IMAP section number (descending into
    message/rfc822 as IMAP does)."""
    if path == "0":
        return msg
    cur = msg
    for i, step in enumerate(path.split(".")):
        n = int(step)
        if cur.get_content_type() == "message/rfc822" and cur.is_multipart():
            cur = cur.get_payload(0)
            if not cur.is_multipart():
                if n != 1:
                    return None
                continue
        if not cur.is_multipart():
            return cur if n == 1 and i == 0 else None
        kids = cur.get_payload()
        if not isinstance(kids, list) or n < 1 or n > len(kids):
            return None
        cur = kids[n - 1]
    return cur


def image_refs(html):
    TAG = re.compile(r"<([A-Za-z][A-Za-z0-9]*)(\s[^>]*)?>")
    ATTR = re.compile(r"""([^\s=/>"']+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>"']+)))?""")
    ent = lambda v: re.sub(r"&(amp|quot|#39|lt|gt);", lambda e: readerlib.ENTITIES[e.group(0)], v).strip()
    out, pos = [], 0

    def css(text):
        for m in readerlib.CSSURL.finditer(text):
            v = ent(next(g for g in m.groups() if g is not None))
            if v:
                out.append(v)
    for t in TAG.finditer(html):
        css(html[pos:t.start()])
        pos = t.end()
        tag = t.group(1).lower()
        for a in ATTR.finditer(t.group(2) or ""):
            name = a.group(1).lower()
            v = next((g for g in a.groups()[1:] if g is not None), None)
            if v is None:
                continue
            v = ent(v)
            if (name == "src" and tag == "img" or name == "background") and v:
                out.append(v)
            elif name == "style":
                css(v)
    css(html[pos:])
    return out


def main():
    if len(sys.argv) != 2:
        die("usage: alpine FILE.eml")
    path = sys.argv[1]
    for prog in ("alpine", "tmux"):
        if shutil.which(prog) is None:
            die("%s not found (scripts/install-test-deps.d/alpine.sh)" % prog)
    try:
        raw = open(path, "rb").read()
    except OSError as e:
        die("cannot read %s: %s" % (path, e))
    try:
        version = subprocess.run(["alpine", "-v"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 timeout=10).stdout.decode("utf-8", "replace").splitlines()[0].strip()
    except Exception as e:
        die("alpine -v failed: %s" % e)
    version = re.sub(r"\s+built .*$", "", version)

    out = {"reader": NAME, "version": version, "ok": True, "error": None, "extbody": [],
           "parts": [], "related": [], "refs": [], "images": [], "defects": [], "shown": "",
           "screenshot": None, "screenshot_sha256": None}
    tmp = tempfile.mkdtemp(prefix="mimeref-alpine-")
    tm = Tmux("mimeref-alpine-%d" % os.getpid(), DEADLINE)
    try:
        body = raw.replace(b"\r\n", b"\n")
        if not body.endswith(b"\n"):
            body += b"\n"
        if b"\x01\x01\x01\x01\n" in body:
            out["defects"].append("message contains an MMDF separator line")
        mbox = os.path.join(tmp, "mbox")
        with open(mbox, "wb") as f:
            f.write(b"\x01\x01\x01\x01\n" + body + b"\x01\x01\x01\x01\n")
        os.makedirs(os.path.join(tmp, "mail"))
        rc = os.path.join(tmp, "pinerc")
        with open(rc, "w") as f:
            # last-version-used: the greeting (which fetches a privacy policy from the
            # network) counts as seen.
            f.write("""personal-name=Reader
user-domain=example.org
inbox-path={d}/mbox
last-version-used=6.26
mailcap-search-path={d}/none
mimetype-search-path={d}/none
smtp-server=
nntp-server=
viewer-hdrs=
sort-key=arrival
feature-list=quit-without-confirm,
	disable-keymenu,
	no-enable-mail-check,
	quell-user-lookup-in-passwd-file,
	quell-lock-failure-warnings,
	no-show-cursor
""".format(d=tmp))
        env = dict(os.environ, HOME=tmp, LANG="C.UTF-8", LC_ALL="C.UTF-8", TERM="screen",
                   MAILCAPS=os.path.join(tmp, "none"), EDITOR="/bin/false", VISUAL="/bin/false")
        env.pop("TMUX", None)
        cmd = "exec alpine -p %s -P /dev/null -o -i -f %s" % (rc, mbox)
        subprocess.run(["tmux", "-L", tm.sock, "-f", "/dev/null", "new-session", "-d", "-s", "r",
                        "-x", str(WIDTH), "-y", str(HEIGHT), cmd], env=env, check=True, timeout=10,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        tm.wait(lambda ls: screen_is("MESSAGE INDEX")(ls) and "Message 1 of 1" in ls[0], "the index")

        # The message view, page by page: its title ends in ALL (one page), a
        # percentage, or END on the last page.
        tm.keys("Enter")
        lines = tm.wait(lambda ls: screen_is("MESSAGE TEXT")(ls), "the message view")
        # Rows 1..HEIGHT-2 are the text (no key menu); the last row is the status line.
        pages = [lines[1:HEIGHT - 1]]
        for _ in range(MAX_PAGES):
            if re.search(r"\b(ALL|END)\b", title(lines)):
                break
            prev = lines
            tm.keys("Space")
            lines = tm.wait(lambda ls: screen_is("MESSAGE TEXT")(ls) and ls != prev, "the next page")
            pages.append(lines[1:HEIGHT - 1])
        else:
            out["defects"].append("pager: more than %d pages, rest not read" % MAX_PAGES)
        text = []
        for p in pages:
            p = list(p)
            while p and not p[-1].strip():
                p.pop()
            text.extend(l.rstrip() for l in p)
        shown = "\n".join(text)
        out["shown"] = re.sub(r"\n{3,}", "\n\n", shown).strip("\n")
        status = {}
        in_parts = False
        for l in text:   # the list may go on past the first page
            if l.startswith("Parts/Attachments:"):
                in_parts = True
                continue
            if in_parts:
                m = PARTS_LINE.match(l)
                if not m:
                    break
                status[m.group(1)] = (m.group(2) or "").strip()

        # The attachment index, then "About" for each entry.
        tm.keys(">")
        lines = tm.wait(lambda ls: screen_is("ATTACHMENT INDEX")(ls) and len(ls) > 1,
                        "the attachment index", settle=0.15)
        entries = [m for m in (INDEX_LINE.match(l) for l in lines[1:]) if m]
        if len(entries) > MAX_PARTS:
            out["defects"].append("attachment index: more than %d entries, rest not read" % MAX_PARTS)
            entries = entries[:MAX_PARTS]
        single = not status   # no Parts/Attachments list: one part shown
        # Alpine numbers a single-part message's body "1"; IMAP and the contract "0".
        msg = email.message_from_bytes(raw, policy=email.policy.compat32)
        top_single = not msg.is_multipart()
        if not entries:
            out["defects"].append("attachment index: no entry read: %s" % " / ".join(
                l.strip() for l in lines[1:] if l.strip())[:300])
        # The index opens on the first part not shown; go up to the first entry.
        at = selected_entry(tm.capture(escapes=True)) if entries else 0
        if at is None:
            raise RuntimeError("no entry of the attachment index is selected")
        for _ in range(at):
            tm.keys("Up")
        if entries:
            tm.wait(lambda ls: selected_entry(tm.capture(escapes=True)) == 0, "the first entry selected",
                    settle=0.03)
        for i, m in enumerate(entries):
            num = m.group(1)
            if i > 0:
                tm.keys("Down")
            tm.keys("A")
            about = tm.wait(lambda ls: screen_is("ABOUT ATTACHMENT")(ls)
                            and any(l.startswith("Details about Attachment #") for l in ls), "about #" + num)
            anum, fields = parse_about(about)
            if anum != num:
                raise RuntimeError("about screen of #%s shown for #%s" % (anum, num))
            tm.keys("<")
            tm.wait(screen_is("ATTACHMENT INDEX"), "the attachment index again", settle=0.03)
            ctype = m.group(3).lower()
            params = params_of(fields.get("Parameters"))
            disp = fields.get("Disposition")
            path_ = "0" if top_single and num == "1" else num
            st = status.get(num, "Shown" if single else None)
            part = {"part": path_, "content_type": ctype, "content_id": None,
                    "content_location": None, "resolved": None,
                    "attachment": st is not None and st != "Shown", "appended": False,
                    "alpine_status": st, "alpine_description": (m.group(3) + m.group(4)).strip(),
                    "alpine_parameters": [k + "=" + v for k, v in params],
                    "alpine_disposition": " ".join(disp) if disp else None}
            if st is None:
                out["defects"].append("part %s: in the attachment index, not in Parts/Attachments" % num)
            if not ctype.startswith("multipart/"):
                # the name the attachment index shows: `(Name: "x")` or `(Filename: "x")`
                # after the type, or for a message part its Subject, `, "x"`
                nm = re.search(r'\((?:Name|Filename): "(.*)"\)\s*$', m.group(3) + m.group(4)) or \
                    re.search(r'^[^,(]*, "(.*)"\s*$', m.group(3) + m.group(4))
                part["name"] = nm.group(1) if nm else None
                if ctype in ("message/rfc822", "message/global"):
                    # c-client parsed the forwarded message when its parts are listed below it
                    part["opens"] = "message" if any(k.startswith(num + ".") for k in status) else "empty"
                elif ctype == "application/octet-stream":
                    part["opens"] = "file"
            out["parts"].append(part)
            if ctype == "message/external-body":
                d = dict(params)
                out["extbody"].append({"part": path_, "access_type": d.get("access-type"), "url": d.get("url")})

        # Images: Alpine shows none; the references of each HTML part it shows.
        for p in out["parts"]:
            if p["content_type"] != "text/html" or p["alpine_status"] != "Shown":
                continue
            src = part_by_path(msg, p["part"] if p["part"] != "0" else "0")
            if src is None:
                continue
            data = src.get_payload(decode=True) or b""
            cs = src.get_content_charset() or "utf-8"
            try:
                html = data.decode(cs, "replace")
            except LookupError:
                html = data.decode("utf-8", "replace")
            for ref in image_refs(html):
                out["images"].append({"from": p["part"], "ref": ref, "to": None})
        tm.keys("q")
    except (TimeoutError, RuntimeError, subprocess.SubprocessError) as e:
        out["ok"] = False
        out["error"] = str(e).replace(tmp, "TMP")
    finally:
        tm.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    if os.environ.get("MIMEREF_READER_VERBOSE"):
        sys.stderr.write("%s reader: %s in %.2f s\n" % (NAME, os.path.basename(path),
                                                        time.monotonic() - tm.started))
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
