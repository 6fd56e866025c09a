"""What an IMAP client gets from the server for one message: the BODYSTRUCTURE, parsed
(RFC 3501 §7.4.2, RFC 9051 §7.5.2), each part's MIME header (BODY.PEEK[n.MIME]) and
the bodies of the text/html parts (BODY.PEEK[n]). Shared by the Dovecot and Cyrus
readers. Standard library only."""
import base64
import binascii
import email.parser
import email.policy
import quopri
import re

TOKEN = re.compile(rb'\s*(?:(\()|(\))|"((?:[^"\\]|\\.)*)"|(NIL)(?=[\s()])|\{(\d+)\}(?:\r\n)?|([^\s()"{]+))', re.I)


def segments(fetch_response):
    """imaplib's FETCH data (bytes, and (prefix, literal) tuples) as a list of
    ('text', bytes) and ('literal', bytes) pieces in order."""
    out = []
    for item in fetch_response:
        if isinstance(item, tuple):
            out.append(("text", item[0]))
            out.append(("literal", item[1]))
        elif item is not None:
            out.append(("text", item))
    return out


def tokens(segs):
    for kind, data in segs:
        if kind == "literal":
            yield ("str", data)
            continue
        i = 0
        while i < len(data):
            m = TOKEN.match(data, i)
            if not m:
                if data[i:].strip() == b"":
                    break
                raise ValueError("cannot parse IMAP response at %r" % data[i:i + 40])
            i = m.end()
            if m.group(1):
                yield ("(", None)
            elif m.group(2):
                yield (")", None)
            elif m.group(3) is not None:
                yield ("str", re.sub(rb"\\(.)", rb"\1", m.group(3)))
            elif m.group(4):
                yield ("nil", None)
            elif m.group(5):
                # the literal follows as the next segment
                continue
            else:
                yield ("atom", m.group(6))


def parse(segs):
    """The whole FETCH response as nested lists of bytes / None."""
    stack = [[]]
    for kind, v in tokens(segs):
        if kind == "(":
            stack.append([])
        elif kind == ")":
            done = stack.pop()
            stack[-1].append(done)
        elif kind == "nil":
            stack[-1].append(None)
        else:
            stack[-1].append(v)
    return stack[0]


def attr(parsed, name):
    """The value after attribute `name` in the first parenthesised FETCH list."""
    for el in parsed:
        if isinstance(el, list):
            for i in range(0, len(el) - 1):
                if isinstance(el[i], bytes) and el[i].upper() == name.upper().encode():
                    return el[i + 1]
    raise ValueError("no %s in the FETCH response" % name)


def s(v):
    return None if v is None else v.decode("utf-8", "surrogateescape")


def params(lst):
    """body-fld-param as a dict, names lower-cased (values as the server sent them)."""
    out = {}
    if isinstance(lst, list):
        for i in range(0, len(lst) - 1, 2):
            if isinstance(lst[i], bytes):
                out.setdefault(s(lst[i]).lower(), s(lst[i + 1]))
    return out


def param_list(lst):
    """body-fld-param as (name, value) pairs in the server's order, values UTF-8 decoded
    (a server passes 8-bit octets on as they are)."""
    out = []
    if isinstance(lst, list):
        for i in range(0, len(lst) - 1, 2):
            if isinstance(lst[i], bytes) and isinstance(lst[i + 1], bytes):
                out.append((lst[i].decode("utf-8", "replace"), lst[i + 1].decode("utf-8", "replace")))
    return out


def walk(bs, path="0", parent=None, nodes=None):
    """Flatten a BODYSTRUCTURE into nodes: path, parent, content_type, params, id,
    location (body-fld-loc of the extension data), encoding, disposition (body-fld-dsp:
    (type lower-cased, params) or None)."""
    if nodes is None:
        nodes = []
    if bs and isinstance(bs[0], list):  # multipart: parts..., subtype, ext
        kids = []
        i = 0
        while i < len(bs) and isinstance(bs[i], list):
            kids.append(bs[i])
            i += 1
        sub = s(bs[i]).lower() if i < len(bs) and bs[i] is not None else ""
        ext = bs[i + 1:]
        n = {"path": path, "parent": parent, "content_type": "multipart/" + sub,
             "params": params(ext[0]) if ext else {}, "id": None,
             "location": s(ext[3]) if len(ext) > 3 and isinstance(ext[3], bytes) else None,
             "encoding": None, "disposition": disposition(ext[1] if len(ext) > 1 else None)}
        nodes.append(n)
        for k, kid in enumerate(kids, 1):
            walk(kid, str(k) if path == "0" else "%s.%d" % (path, k), path, nodes)
        return nodes
    typ = (s(bs[0]) or "").lower()
    sub = (s(bs[1]) or "").lower()
    n = {"path": path, "parent": parent, "content_type": typ + "/" + sub, "params": params(bs[2]),
         "param_list": param_list(bs[2]), "id": s(bs[3]), "encoding": (s(bs[5]) or "").lower(),
         "location": None, "size": int(bs[6]) if len(bs) > 6 and isinstance(bs[6], bytes)
         and bs[6].isdigit() else None}
    nodes.append(n)
    # Like the file readers, the harness does not descend into message/rfc822.
    if typ == "message" and sub == "rfc822":
        ext_at = 10
        # the server's own parse of the forwarded message: its ENVELOPE and body
        n["envelope"] = bs[7] if len(bs) > 7 and isinstance(bs[7], list) else None
    elif typ == "text":
        ext_at = 8
    else:
        ext_at = 7
    ext = bs[ext_at:]
    if len(ext) > 3 and isinstance(ext[3], bytes):
        n["location"] = s(ext[3])
    n["disposition"] = disposition(ext[1] if len(ext) > 1 else None)
    return nodes


def disposition(dsp):
    """body-fld-dsp: ("type" params, [(name, value) in order]) or NIL."""
    if not isinstance(dsp, list) or not dsp or not isinstance(dsp[0], bytes):
        return None
    return (s(dsp[0]).lower(), params(dsp[1]) if len(dsp) > 1 else {},
            param_list(dsp[1]) if len(dsp) > 1 else [])


def decode_body(data, encoding, charset):
    enc = (encoding or "").lower()
    try:
        if enc == "base64":
            data = base64.b64decode(re.sub(rb"[^A-Za-z0-9+/=]", b"", data) + b"===")
        elif enc == "quoted-printable":
            data = quopri.decodestring(data)
    except (binascii.Error, ValueError):
        pass
    try:
        return data.decode(charset or "us-ascii", "replace")
    except LookupError:
        return data.decode("utf-8", "replace")


def mime_header(raw):
    """A fetched MIME header as an email.message.Message (compat32: values as written,
    unfolded by the client only where it asks)."""
    return email.parser.BytesHeaderParser(policy=email.policy.compat32).parsebytes(raw or b"")


def fetch(m, uid, what):
    typ, data = m.uid("FETCH", uid, "(%s)" % what)
    if typ != "OK" or not data or data == [None]:
        raise RuntimeError("UID FETCH %s %s: %s %r" % (uid, what, typ, data))
    return parse(segments(data))
