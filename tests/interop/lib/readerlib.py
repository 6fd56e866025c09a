"""What the Python readers share: from the parts a library returns, build the
`parts`, `related` and `refs` fields of the reader contract (tests/interop/README.md)
with urllib.parse.urljoin, the join a Python reader would use."""
import json
import re
import sys
import urllib.parse

ATTR = re.compile(r"""\b(?:src|href|background)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>"']+))""", re.I)
CSSURL = re.compile(r"""url\(\s*(?:"([^"]*)"|'([^']*)'|([^)\s]*))\s*\)""", re.I)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
ENTITIES = {"&amp;": "&", "&quot;": '"', "&#39;": "'", "&lt;": "<", "&gt;": ">"}


def html_refs(text):
    out = []
    for rx in (ATTR, CSSURL):
        for m in rx.finditer(text):
            v = next(g for g in m.groups() if g is not None)
            v = re.sub(r"&(amp|quot|#39|lt|gt);", lambda e: ENTITIES[e.group(0)], v).strip()
            if v:
                out.append(v)
    return out


def child_path(parent, i):
    return str(i) if parent == "0" else "%s.%d" % (parent, i)


def finish(out, nodes):
    """nodes: dicts in tree order with path, parent (path or None), content_type,
    content_id, content_location (as the library returns them), html (decoded text of a
    text/html part or None), type / start (multipart/related parameters)."""
    by = {n["path"]: n for n in nodes}

    def base_of(n):
        p = n["parent"]
        while p is not None:
            cl = by[p]["content_location"]
            if cl is not None and SCHEME.match(cl.strip()):
                return by[p]["_resolved"]
            p = by[p]["parent"]
        return "thismessage:/"

    for n in nodes:  # tree order: parents first
        cl = n["content_location"]
        n["_resolved"] = None
        if cl is not None:
            try:
                n["_resolved"] = urllib.parse.urljoin(base_of(n), cl.strip())
            except Exception:
                n["_resolved"] = None
        out["parts"].append({"part": n["path"], "content_type": n["content_type"],
                             "content_id": n["content_id"], "content_location": cl,
                             "resolved": n["_resolved"]})
    for n in nodes:
        if n["content_type"] != "multipart/related":
            continue
        kids = [k["path"] for k in nodes if k["parent"] == n["path"]]
        root = kids[0] if kids else None
        if n.get("start"):
            s = n["start"].strip().strip("<>")
            root = next((k for k in kids if (by[k]["content_id"] or "").strip().strip("<>") == s), None)
        out["related"].append({"part": n["path"], "type": n.get("type"), "root": root})
    cids = {}
    for n in nodes:
        if n["content_id"] is not None:
            cids.setdefault(n["content_id"].strip().strip("<>"), n["path"])
    for n in nodes:
        if n.get("html") is None:
            continue
        for ref in html_refs(n["html"]):
            if ref[:4].lower() == "cid:":
                x = ref[4:]
                to = cids.get(x) or cids.get(urllib.parse.unquote(x))
            else:
                target = urllib.parse.urljoin(n["_resolved"] or "thismessage:/", ref)
                to = next((k["path"] for k in nodes if k["_resolved"] is not None
                           and k["_resolved"] == target), None)
            out["refs"].append({"from": n["path"], "ref": ref, "to": to})


def new(reader, version):
    return {"reader": reader, "version": version, "ok": True, "error": None,
            "extbody": [], "parts": [], "related": [], "refs": [], "defects": []}


def emit(out):
    json.dump(out, sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")


# ------------------------------------------------------------------ images, attachments
# What a person sees of each part (tests/interop/README.md, "Each entry of `parts` also
# carries ..."): the readers add `attachment` / `appended` to their `parts` entries and an
# `images` list, each by its own program's rule; the helpers below are the shared pieces.

TAG = re.compile(r"""<([A-Za-z][A-Za-z0-9-]*)((?:[^>"']|"[^"]*"|'[^']*')*)>""")
TAGATTR = re.compile(r"""\b(src|href|background)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>"']+))""", re.I)


def _unent(v):
    return re.sub(r"&(amp|quot|#39|lt|gt);", lambda e: ENTITIES[e.group(0)], v).strip()


def image_refs(text):
    """The references of an HTML text that a renderer loads as images: `src` of `<img>`
    and `<input type=image>`, any `background` attribute, and CSS `url(...)`, decoded as
    html_refs() decodes them (so each is also one of html_refs()), in document order for
    the attributes, then the CSS ones."""
    out = []
    for t in TAG.finditer(text):
        tag = t.group(1).lower()
        for m in TAGATTR.finditer(t.group(2)):
            name = m.group(1).lower()
            v = _unent(next(g for g in m.groups()[1:] if g is not None))
            if not v:
                continue
            if name == "background" or (name == "src" and (tag == "img" or (
                    tag == "input" and re.search(r"""\btype\s*=\s*["']?image\b""", t.group(2), re.I)))):
                out.append(v)
    for m in CSSURL.finditer(text):
        v = _unent(next(g for g in m.groups() if g is not None))
        if v:
            out.append(v)
    return out


def refs_to(out):
    """(from, ref) -> the part the contract's rule gives (out["refs"], first of each)."""
    d = {}
    for r in out["refs"]:
        d.setdefault((r["from"], r["ref"]), r["to"])
    return d


def set_attachments(out, listed, appended=(), null=False):
    """Mark every `parts` entry: attachment true for the paths in `listed`, else false
    (null for all when the reader has no attachment list); appended true for `appended`."""
    listed, appended = set(listed), set(appended)
    for p in out["parts"]:
        p["attachment"] = None if null else p["part"] in listed
        if p["part"] in appended:
            p["appended"] = True
