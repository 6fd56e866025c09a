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


# ------------------------------------------------------------------ names, forwarded messages
# What a person sees of an attachment (tests/interop/README.md, `name` and `opens`): the
# name the reader shows for it, and for a message/rfc822 part (or the file a change makes
# of it) what the reader offers: the message, a file, an empty or an undecodable one.

OPENS_TYPES = ("message/rfc822", "message/global", "application/octet-stream")


def opens_of_message(fields, body):
    """A forwarded message as the reader parsed it: header `fields` (names) and body
    (bytes or text). No header field at all means the reader parsed something that is
    not the message (the base64 text of an encoded one): undecodable, or empty."""
    if fields:
        return "message"
    return "undecodable" if (body or "").strip() else "empty"


def opens_of_file(data):
    """A part offered as a file, its decoded content `data` (None: it did not decode)."""
    if data is None:
        return "undecodable"
    return "file" if data.strip() else "empty"


def set_names(out, names, opens=None):
    """Add `name` to every `parts` entry (names: path -> the name shown, None for none;
    a part not in `names` gets null) and `opens` where given (path -> value)."""
    opens = opens or {}
    for p in out["parts"]:
        if p["content_type"].startswith("multipart/"):
            continue
        p["name"] = names.get(p["part"])
        if p["part"] in opens:
            p["opens"] = opens[p["part"]]


# Thunderbird for Android (K-9 Mail) reads an attachment's name with MimeParameterDecoder
# (thunderbird/thunderbird-android mail/common/.../internet/MimeParameterDecoder.kt); for
# a message it read through BODYSTRUCTURE, RealImapFolder first writes the server's
# parameters back into header text (a value that is not a token quoted). Re-stated here for
# the IMAP readers; the mime4j reader carries the same rule in Java.

TOKEN_CHARS = re.compile(r"[!#$%&'*+\-.0-9A-Z^_`a-z{|}~]+\Z")
ENCODED_WORD = re.compile(r"=\?([^?]+)\?([bBqQ])\?([^?]*)\?=")


def decode_encoded_words(s):
    """DecoderUtil.decodeEncodedWords: each encoded-word decoded, the white space between
    two of them dropped; one that does not decode stays as it is."""
    out, last, prev = [], 0, False
    for m in ENCODED_WORD.finditer(s):
        between = s[last:m.start()]
        if not (prev and not between.strip()):
            out.append(between)
        try:
            cs = m.group(1).split("*")[0]
            if m.group(2) in "bB":
                import base64
                data = base64.b64decode(m.group(3) + "=" * (-len(m.group(3)) % 4))
            else:
                data = urllib.parse.unquote_to_bytes(m.group(3).replace("_", " ").replace("=", "%"))
            out.append(data.decode(cs))
            prev = True
        except Exception:
            out.append(m.group(0))
            prev = False
        last = m.end()
    out.append(s[last:])
    return "".join(out)


def k9_parameters(pairs):
    """MimeParameterDecoder.decode on parameters given as (name, value, was_token): a name
    given twice is dropped; RFC 2231 sections (name*, name*0, name*0*, name*1*, ...) are
    combined when they run 0..n and decoded in their charset, and win over a plain
    parameter of that name; a plain value is RFC 2047 decoded."""
    basic, dup = {}, set()
    for n, v, tok in pairs:
        n = n.lower()
        if n in basic:
            del basic[n]
            dup.add(n)
        elif n not in dup:
            basic[n] = (v, tok)
    sections, single = {}, {}
    for n, (v, tok) in basic.items():
        ext = n.endswith("*")
        bits = n.split("*")
        idx = -1
        ok = not (ext and not tok) and (len(bits) == 2 or (len(bits) == 3 and bits[2] == ""))
        if ok:
            if len(bits) == 2 and ext:
                idx = None
            elif bits[1] == "0":
                idx = 0
            elif bits[1].startswith("0") or not bits[1].isdigit():
                ok = False
            else:
                idx = int(bits[1])
        if not ok:
            single[n] = v
            continue
        sections.setdefault(bits[0], []).append((idx, n, v, ext))
    out = {}
    for base, secs in sections.items():
        secs.sort(key=lambda x: -1 if x[0] is None else x[0])
        kinds = []  # (kind, text or bytes, charset)
        for idx, n, v, ext in secs:
            if ext and (idx is None or idx == 0):
                q = v.split("'", 2)
                if len(q) == 3 and q[0] and _charset_ok(q[0]):
                    kinds.append(("initial", urllib.parse.unquote_to_bytes(q[2]), q[0]))
                elif len(q) == 3:
                    kinds.append(("regular", q[2], None))
                else:
                    kinds = None
                    break
            elif ext:
                kinds.append(("extended", urllib.parse.unquote_to_bytes(v), None))
            else:
                kinds.append(("regular", v, None))
        idxs = [x[0] for x in secs]
        valid = kinds is not None and (
            (len(secs) == 1 and idxs[0] in (None, 0)) or
            (idxs == list(range(len(secs))) and not (kinds[0][0] != "initial"
                                                    and any(k[0] == "extended" for k in kinds))))
        if not valid:
            for idx, n, v, ext in secs:
                out[n] = v
            continue
        if kinds[0][0] == "initial":
            cs, buf, text = kinds[0][2], b"", ""
            for kind, data, _ in kinds:
                if kind in ("initial", "extended"):
                    buf += data
                else:
                    text += buf.decode(cs, "replace") + data
                    buf = b""
            out[base] = text + buf.decode(cs, "replace")
        else:
            out[base] = "".join(d for _, d, _ in kinds)
    for n, v in single.items():
        if n not in out:
            out[n] = decode_encoded_words(v)
    return out


def _charset_ok(cs):
    import codecs
    try:
        codecs.lookup(cs)
        return True
    except LookupError:
        return False


def k9_name(disposition_pairs, type_pairs, media_type):
    """AttachmentInfoExtractor's name: the disposition's filename, else the type's name,
    else "noname" with the type's extension; the pairs as RealImapFolder writes them back
    (name, value) - a value that is not a token was quoted."""
    def dec(pairs):
        return k9_parameters([(n, v, bool(TOKEN_CHARS.match(v))) for n, v in pairs])
    name = dec(disposition_pairs).get("filename") if disposition_pairs is not None else None
    if name is None:
        name = dec(type_pairs).get("name")
    if name is None:
        ext = {"application/pdf": "pdf", "image/png": "png", "image/gif": "gif", "image/jpeg": "jpg",
               "text/plain": "txt", "text/html": "html", "message/rfc822": "eml",
               "text/csv": "csv"}.get(media_type)
        name = "noname" + ("." + ext if ext else "")
    return name
