#!/usr/bin/env python3
"""Interop reader "neomutt": NeoMutt under tmux, reading the message as a person would.

The message becomes a one-message MMDF mailbox in a temporary directory; NeoMutt runs on a
throwaway muttrc (no system muttrc, no mailcap, no caches, read-only) in a private tmux
server (its own socket, always killed). What is read off the screen:

- the index's <edit-type> prompt: the top-level Content-Type as NeoMutt parsed it
  (parameters re-serialised, e.g. `URL="..."; access-type=URL`);
- the pager (200x50, paged with <next-page> to the end): `shown`. NeoMutt shows every
  part of a multipart/related like multipart/mixed (no root chosen), and for a
  message/external-body part only "[-- This text/html attachment is not included,
  --] [-- and the indicated access-type URL is unsupported --]" and the phantom
  headers: the URL itself appears there only when it is a top-level header;
- the attachment menu (<view-attachments>, window widened to 1000 columns), and
  <edit-type> on each entry: every part's media type and parameters as parsed. The
  external-body `url` is that prompt's URL parameter, exactly as NeoMutt holds it
  (folding whitespace it kept stays in);
- `attachment`: read off the pager. A part the pager does not display but stands in
  for with a notice ("[-- image/png is unsupported (use 'v' to view this part) --]",
  "This is an attachment", "... attachment is not included", "... has been deleted")
  is one a person has to fetch from the attachment menu: true; a part shown inline, a
  container, or an alternative not chosen: false. NeoMutt shows no HTML without a
  mailcap entry, so `images` is empty.
- `name`: the attachment menu's description column (%d: Content-Description, else the
  file name); `opens`: whether the pager shows a message/rfc822 part as the forwarded
  message (its From/Subject/Date lines), something else, or nothing.

Prints one JSON object; exit 0 whatever the message; exit 1 only when neomutt or tmux
cannot run.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
import tmuxscreen  # noqa: E402

NAME = "neomutt"
WIDTH, HEIGHT = 200, 50          # the pager's window
WIDE, TALL = 1000, 300           # the attachment menu's (long Content-Type prompts)
DEADLINE = 20.0                  # seconds for the whole screen session (typically 1-3)
MAX_PAGES = 40
MAX_PARTS = 200


def die(msg):
    sys.stderr.write("%s reader: %s\n" % (NAME, msg))
    sys.exit(1)


Tmux = tmuxscreen.Tmux


def split_params(s):
    """'type/sub; a=b; c="d e"' -> ('type/sub', [(name, value)]), values unquoted."""
    items, cur, q, esc = [], "", False, False
    for ch in s:
        if esc:
            cur += ch
            esc = False
        elif q and ch == "\\":
            cur += ch
            esc = True
        elif ch == '"':
            cur += ch
            q = not q
        elif ch == ";" and not q:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    items.append(cur)
    ctype = items[0].strip().lower()
    params = []
    for it in items[1:]:
        if "=" not in it:
            continue
        k, v = it.split("=", 1)
        v = v.strip()
        if len(v) >= 2 and v[0] == '"' and v[-1] == '"':
            v = re.sub(r"\\(.)", r"\1", v[1:-1])
        params.append((k.strip(), v))
    return ctype, params


def param(params, name):
    for k, v in params:
        if k.lower() == name:
            return v
    return None


PROMPT = "Content-Type: "


def prompt_line(lines):
    for l in reversed(lines):
        if l.startswith(PROMPT):
            return l
    return None


def read_edit_type(tm):
    """Send <edit-type>, read the prompt, cancel it."""
    tm.keys("C-e")
    lines = tm.wait(lambda ls: prompt_line(ls) is not None, "the edit-type prompt")
    value = prompt_line(lines)[len(PROMPT):].rstrip()
    tm.keys("C-g")
    tm.wait(lambda ls: prompt_line(ls) is None, "the edit-type prompt closed", settle=0.03)
    return value


STATUS_PAGER = re.compile(r"-- \((all|end|\d+%)\)\s*$")


def pager_status(lines):
    m = STATUS_PAGER.search(lines[-2]) if len(lines) >= 2 else None
    return m.group(1) if m else None


TYPE_LINE = re.compile(r"^\[-- Type: ([^\s,;]+)[,;]")
NOTICE = re.compile(r"^\[-- (?:This is an attachment|This \S+ attachment |.* is unsupported\b|.* has been deleted\b)")


def pager_attachments(text, nodes):
    """Paths of the parts the pager stands in for with a notice. Each part the
    pager shows in a multipart gets a "[-- Type: x/y, ... --]" line (in tree order; the
    chosen part of an alternative gets none); the lines up to the next such block are
    its content."""
    lines = text.split("\n")
    if not nodes[0]["ctype"].startswith("multipart/"):
        body = lines[next((i for i, l in enumerate(lines) if l == ""), len(lines)):]
        return {"0"} if any(NOTICE.match(l) for l in body) else set()
    blocks = []
    for l in lines:
        m = TYPE_LINE.match(l)
        if m:
            blocks.append([m.group(1).lower(), False])
        elif l.startswith("[-- Attachment #"):
            continue
        elif blocks and NOTICE.match(l):
            blocks[-1][1] = True
    out, i = set(), 1
    for ctype, notice in blocks:
        j = next((k for k in range(i, len(nodes)) if nodes[k]["ctype"] == ctype), None)
        if j is None:
            continue
        if notice:
            out.add(nodes[j]["path"])
        i = j + 1
    return out


def pager_blocks(text, nodes):
    """{path: the pager's lines for that part} for the parts of a multipart, cut at the
    "[-- Type: ..." lines as pager_attachments() cuts them."""
    lines = text.split("\n")
    if not nodes[0]["ctype"].startswith("multipart/"):
        return {}
    blocks = []
    for l in lines:
        m = TYPE_LINE.match(l)
        if m:
            blocks.append([m.group(1).lower(), []])
        elif blocks:
            blocks[-1][1].append(l)
    out, i = {}, 1
    for ctype, body in blocks:
        j = next((k for k in range(i, len(nodes)) if nodes[k]["ctype"] == ctype), None)
        if j is None:
            continue
        out[nodes[j]["path"]] = body
        i = j + 1
    return out


def opens(node, block):
    """What the pager offers of a message/rfc822 part: the forwarded message (its header
    shown: From or Subject), something else (undecodable) or nothing; an
    application/octet-stream part stands for a file to save."""
    if node["ctype"] in ("message/rfc822", "message/global"):
        if block is None:
            return None
        body = [l for l in block if l.strip() and not l.startswith("[-- ")]
        if any(re.match(r"^(From|Subject|Date): ", l) for l in body):
            return "message"
        return "undecodable" if body else "empty"
    if node["ctype"] == "application/octet-stream":
        return "file"
    return None


ATT_LINE = re.compile(r"^#(\d+) ([ *|`>-]*)([A-Za-z0-9][^\s/]*/\S+) \[(.*)\]\s*$")


def main():
    if len(sys.argv) != 2:
        die("usage: neomutt FILE.eml")
    path = sys.argv[1]
    for prog in ("neomutt", "tmux"):
        if shutil.which(prog) is None:
            die("%s not found (run scripts/install-test-deps)" % prog)
    try:
        raw = open(path, "rb").read()
    except OSError as e:
        die("cannot read %s: %s" % (path, e))
    try:
        version = subprocess.run(["neomutt", "-v"], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, timeout=10).stdout.decode(
                                     "utf-8", "replace").splitlines()[0].strip()
    except Exception as e:
        die("neomutt -v failed: %s" % e)

    out = {"reader": NAME, "version": version, "ok": True, "error": None, "extbody": [],
           "parts": [], "related": [], "refs": [], "images": [], "defects": [], "shown": "",
           "screenshot": None, "screenshot_sha256": None}

    tmp = tempfile.mkdtemp(prefix="mimeref-neomutt-")
    tm = Tmux("mimeref-neomutt-%d" % os.getpid(), DEADLINE)
    try:
        # One-message MMDF mailbox (mbox family, messages between ^A^A^A^A lines), so
        # that no "From " line of the body needs the >From quoting mbox would add.
        body = raw.replace(b"\r\n", b"\n")
        if not body.endswith(b"\n"):
            body += b"\n"
        if b"\x01\x01\x01\x01\n" in body:
            out["defects"].append("message contains an MMDF separator line")
        mbox = os.path.join(tmp, "mbox")
        with open(mbox, "wb") as f:
            f.write(b"\x01\x01\x01\x01\n" + body + b"\x01\x01\x01\x01\n")
        rc = os.path.join(tmp, "muttrc")
        with open(rc, "w") as f:
            f.write("""set mbox_type=mmdf
set folder="{d}"
set spoolfile="{d}/mbox"
set record=/dev/null
set postponed="{d}/postponed"
set tmpdir="{d}"
set header_cache=""
set message_cachedir=""
set mailcap_path="/dev/null"
set implicit_autoview=no
set sendmail="/bin/false"
set pager_stop
set pager_index_lines=0
set pager_context=0
set markers=no
set wait_key=no
set move=no
set mark_old=no
set read_only
set help=no
set beep=no
set charset=utf-8
set sort=mailbox-order
set crypt_use_gpgme=no
set crypt_autosign=no
set crypt_verify_sig=no
set ascii_chars=yes
set attach_format="#%n %t%T%m/%M [%d]"
ignore *
unignore from: to: cc: subject: date: mime-version: content-type: content-id: content-location: content-base: content-description: content-disposition: content-transfer-encoding:
""".format(d=tmp))
        env = dict(os.environ, HOME=tmp, LANG="C.UTF-8", LC_ALL="C.UTF-8", TERM="screen",
                   MAILCAPS="/dev/null", EDITOR="/bin/false", VISUAL="/bin/false")
        env.pop("TMUX", None)
        cmd = "exec neomutt -n -F %s -R -f %s" % (rc, mbox)
        subprocess.run(["tmux", "-L", tm.sock, "-f", "/dev/null", "new-session", "-d",
                        "-s", "r", "-x", str(WIDTH), "-y", str(HEIGHT), cmd],
                       env=env, check=True, timeout=10,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

        # Index: one message, status bar "Msgs:1".
        tm.wait(lambda ls: any("Msgs:1" in l for l in ls), "the index")
        top = read_edit_type(tm)

        # Pager, page by page. Its status bar's percentage lags one page behind in
        # this NeoMutt, so the end is found by <next-page> no longer moving ($pager_stop
        # then says "Bottom of message is shown.").
        tm.keys("Enter")
        lines = tm.wait(lambda ls: pager_status(ls), "the pager")
        pages = [[l.rstrip() for l in lines[:-2]]]
        if pager_status(lines) != "all":
            for _ in range(MAX_PAGES):
                prev = lines
                tm.keys("Space")
                lines = tm.wait(lambda ls: pager_status(ls) and (ls[:-2] != prev[:-2] or "Bottom of message" in ls[-1]),
                                "the next page", settle=0.1)
                if lines[:-2] == prev[:-2]:
                    break
                pages.append([l.rstrip() for l in lines[:-2]])
            else:
                out["defects"].append("pager: more than %d pages, rest not read" % MAX_PAGES)
        text = "\n".join(l for p in pages for l in p)
        text = re.sub(r"\n{3,}", "\n\n", text).strip("\n")
        out["shown"] = text

        # Attachment menu, widened so that long Content-Type prompts fit.
        tm.run("resize-window", "-t", "r", "-x", str(WIDE), "-y", str(TALL))
        tm.keys("v")
        lines = tm.wait(lambda ls: any(ATT_LINE.match(l) for l in ls)
                        and len(ls) >= TALL - 1, "the attachment menu")
        entries = [m for m in (ATT_LINE.match(l) for l in lines) if m]
        if len(entries) >= TALL - 2:
            out["defects"].append("attachment menu: more than %d entries, rest not read" % (TALL - 2))
        entries = entries[:MAX_PARTS]
        # Part paths (IMAP numbering) from the tree: depth from the marker's column.
        top_ctype, top_params = split_params(top)
        nodes = [{"path": "0", "parent": None, "ctype": top_ctype, "params": top_params, "raw": top}]
        if top_ctype.startswith("multipart/"):
            stack = ["0"]        # stack[d] = path of the parent at depth d
            counts = {}
            for i, m in enumerate(entries):
                tree = m.group(2)
                mk = re.search(r"[|`]->", tree)
                depth = 0 if mk is None else 1 + mk.start() // 2
                parent = stack[depth] if depth < len(stack) else stack[-1]
                counts[parent] = counts.get(parent, 0) + 1
                p = str(counts[parent]) if parent == "0" else "%s.%d" % (parent, counts[parent])
                del stack[depth + 1:]
                stack.append(p)
                if i > 0:
                    tm.keys("j")
                raw_ct = read_edit_type(tm)
                ct, params = split_params(raw_ct)
                nodes.append({"path": p, "parent": parent, "ctype": ct, "params": params, "raw": raw_ct,
                              "name": (m.group(4).strip() if m.group(4).strip() not in ("", "<no description>") else None)})
        listed = pager_attachments(text, nodes)
        shown_as = pager_blocks(text, nodes)
        for n in nodes:
            if len(n["raw"]) >= WIDE - len(PROMPT) - 2:
                out["defects"].append("part %s: Content-Type prompt may be cut at %d columns" % (n["path"], WIDE))
            cid = param(n["params"], "content-id")
            out["parts"].append({"part": n["path"], "content_type": n["ctype"],
                                 "content_id": cid, "content_location": None, "resolved": None,
                                 "neomutt_content_type": n["raw"],
                                 "attachment": n["path"] in listed})
            if not n["ctype"].startswith("multipart/") and n["path"] != "0":
                # the attachment menu's %d: the description, else the file name
                out["parts"][-1]["name"] = n.get("name")
                o = opens(n, shown_as.get(n["path"]))
                if o:
                    out["parts"][-1]["opens"] = o
            if n["ctype"] == "message/external-body":
                out["extbody"].append({"part": n["path"],
                                       "access_type": param(n["params"], "access-type"),
                                       "url": param(n["params"], "url")})
            if n["ctype"] == "multipart/related":
                # NeoMutt shows every part of a multipart/related in turn: no root.
                out["related"].append({"part": n["path"], "type": param(n["params"], "type"),
                                       "root": None})
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
