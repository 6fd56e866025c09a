"""MIME parameters as a reader that does not use a library's decoding sees them: the
parameter list of a Content-Type or Content-Disposition field body, each name with its
value as written (a quoted string unquoted) and whether it was a token. Shared by the
readers that model a program from its documentation (outlook-model,
imap-names-office365), which apply that program's own rules to these raw values."""
import re

TSPECIALS = '()<>@,;:\\"/[]?='


def unfold(value):
    return None if value is None else re.sub(r"\r?\n(?=[ \t])", "", value)


def parse(body):
    """`type/sub; a=b; c="d e"` -> (value, [(name lower-cased, value, was_token)]); the
    parameters read up to the first syntax error."""
    body = unfold(body or "")
    i = body.find(";")
    value = (body if i < 0 else body[:i]).strip()
    out = []
    while 0 <= i < len(body):
        i += 1
        while i < len(body) and body[i] in " \t":
            i += 1
        j = i
        while j < len(body) and body[j] > " " and body[j] not in TSPECIALS and ord(body[j]) != 127:
            j += 1
        name = body[i:j].lower()
        i = j
        while i < len(body) and body[i] in " \t":
            i += 1
        if not name or i >= len(body) or body[i] != "=":
            break
        i += 1
        while i < len(body) and body[i] in " \t":
            i += 1
        if i < len(body) and body[i] == '"':
            v, i = [], i + 1
            while i < len(body) and body[i] != '"':
                if body[i] == "\\" and i + 1 < len(body):
                    i += 1
                v.append(body[i])
                i += 1
            if i >= len(body):
                break
            i += 1
            out.append((name, "".join(v), False))
        else:
            j = i
            while j < len(body) and body[j] not in "; \t":
                j += 1
            out.append((name, body[i:j], True))
            i = j
        while i < len(body) and body[i] in " \t":
            i += 1
        if i < len(body) and body[i] != ";":
            break
        if i >= len(body):
            break
    return value, out


def plain(params, name):
    """The value of a parameter in RFC 2045 form (not `name*`, `name*0`, ...)."""
    return next((v for n, v, _ in params if n == name), None)
