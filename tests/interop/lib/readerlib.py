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
