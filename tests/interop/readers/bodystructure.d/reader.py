#!/usr/bin/python3
"""Interop readers "bodystructure-dovecot" and "bodystructure-office365": the names an
IMAP server hands a client in BODYSTRUCTURE, as a client that shows them as they come
sees them: the disposition's `filename`, else the type's `name`, RFC 2047 encoded-words
decoded, and no RFC 2231 decoding of its own (a `filename*` or `name*0*` parameter is
another parameter to it). Such clients are the ones the RFC 2047 twin of a name is
written for: Roundcube before 1.4 (roundcube/roundcubemail#6729, a name shown as
`UTF-8''%E3%82%82…`, and #6783 "Don't trust BODYSTRUCTURE"), PHP imap-extension tools
(osTicket/osTicket-1.7#738, ddeboer/imap#427), and clients on Office 365's IMAP
(jstedfast/MailKit#514).

- dovecot: the message delivered to the private Dovecot (lib/imapserver.py) and its
  BODYSTRUCTURE fetched: Dovecot joins RFC 2231 continuations into one `name*` and passes
  8-bit octets on as they are. `opens`: the server's own parse of a message/rfc822 part
  (its ENVELOPE: a field, or none), the size of an application/octet-stream one.
- office365: Office 365 cannot run here; its BODYSTRUCTURE parameters are modelled from
  the message's own header fields: passed on as written (RFC 3501 §7.4.2; Exchange's own
  names are RFC 2047 encoded-words in quoted strings, stalwart#3247), except that a
  parameter given only as RFC 2231 continuations comes back as the plain parameter with
  its first section alone (jstedfast/MailKit#514: outlook.office365.com returned
  `("filename" "hawwers_mutual (inv 1).64-197-1846172.2017.05.19.12.02.51.653.x.")` for a
  longer continued name; MailKit's maintainer names the continuations as the cause). A
  single `name*=` is passed on as it is (no source says otherwise). `opens` is not
  modelled (no source).

Names are reported for every leaf (null when the client finds none). No `attachment`,
`images` or `refs`. Usage: reader.py dovecot|office365 FILE.eml. Reader contract:
tests/interop/README.md."""
import email
import email.policy
import os
import sys

lib = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib")
sys.path.insert(0, lib)
import mimeparams  # noqa: E402
import readerlib  # noqa: E402


def literal_name(disposition, type_params):
    """The client's rule on (name, value) pairs as the server returns them."""
    for pairs, key in ((disposition or [], "filename"), (type_params or [], "name")):
        v = next((v for n, v in pairs if n.lower() == key), None)
        if v:
            return readerlib.decode_encoded_words(v)
    return None


def dovecot(path, out):
    import imapclient
    import imapserver
    with open(path, "rb") as f:
        data = f.read()
    addr = imapserver.connect("dovecot")
    out["version"] = addr["version"] + " BODYSTRUCTURE names, shown as returned"
    user = imapserver.deliver("dovecot", addr, data)
    m = imapserver.login("dovecot", addr, user)
    try:
        typ, _ = m.select("INBOX", readonly=True)
        if typ != "OK":
            raise RuntimeError("SELECT INBOX: %s" % typ)
        bs = imapclient.attr(imapclient.fetch(m, "1", "BODYSTRUCTURE"), "BODYSTRUCTURE")
    finally:
        try:
            m.logout()
        except Exception:
            pass
    for n in imapclient.walk(bs):
        p = {"part": n["path"], "content_type": n["content_type"], "content_id": None,
             "content_location": None, "resolved": None}
        if not n["content_type"].startswith("multipart/"):
            d = n.get("disposition")
            p["name"] = literal_name(d[2] if d else None, n["param_list"])
            if n["content_type"] in ("message/rfc822", "message/global"):
                p["opens"] = "message" if any(x is not None for x in n.get("envelope") or []) else "empty"
            elif n["content_type"] == "application/octet-stream":
                p["opens"] = "file" if n.get("size") else "empty"
        out["parts"].append(p)


def office365_params(params):
    """[(name, value, was_token)] as written -> [(name, value)] as the model returns them."""
    plain = {n for n, _, _ in params if "*" not in n}
    out, first = [], {}
    for n, v, _ in params:
        if "*" not in n:
            out.append((n, v))
            continue
        base, _, rest = n.partition("*")
        sec = rest.rstrip("*")
        if sec.isdigit():
            # continuations: the plain parameter with the first section only
            if base not in plain and sec == "0" and base not in first:
                first[base] = v
                out.append((base, v))
        else:
            out.append((n, v))
    return out


def office365(path, out):
    out["version"] = ("Office 365 IMAP BODYSTRUCTURE names, modelled (jstedfast/MailKit#514; "
                      "not run), shown as returned")
    with open(path, "rb") as f:
        msg = email.message_from_bytes(f.read(), policy=email.policy.compat32)

    def field(part, name):
        for k, v in part.raw_items():
            if k.lower() == name.lower():
                return v.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        return None

    def walk(part, path):
        ct = part.get_content_type()
        p = {"part": path, "content_type": ct, "content_id": None, "content_location": None,
             "resolved": None}
        out["parts"].append(p)
        if part.get_content_maintype() == "multipart":
            for i, k in enumerate(part.get_payload() or [], 1):
                if isinstance(k, email.message.Message):
                    walk(k, readerlib.child_path(path, i))
            return
        disp, dparams = mimeparams.parse(field(part, "Content-Disposition"))
        _, tparams = mimeparams.parse(field(part, "Content-Type"))
        p["name"] = literal_name(office365_params(dparams) if disp else None, office365_params(tparams))

    walk(msg, "0")


def main():
    mode, path = sys.argv[1], sys.argv[2]
    out = readerlib.new("bodystructure-" + mode, "")
    try:
        (dovecot if mode == "dovecot" else office365)(path, out)
    except (OSError, RuntimeError) as e:
        if mode == "dovecot":
            raise
        out["ok"] = False
        out["error"] = "%s: %s" % (type(e).__name__, e)
    readerlib.emit(out)


if __name__ == "__main__":
    try:
        main()
    except (OSError, RuntimeError, ValueError) as e:
        print("bodystructure reader: %s" % e, file=sys.stderr)
        sys.exit(2)
