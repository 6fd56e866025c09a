#!/usr/bin/env python3
"""The MTA side of milter conversations, through the PyPI `miltertest` library (a
milter client independent of indymilter, OpenDKIM's miltertest and the MTAs), for
tests/milter/milter_protocol.rs. Each MTA is modelled on its source: how it
negotiates, how it hands over header values and the body, and how it writes the
milter's changes into the message it delivers.

    mta.py SCENARIO --port PORT --message FILE [--message FILE2]
           [--sender ADDRESS] [--recipient ADDRESS]

prints one JSON object: the replies to each stage and, for every message that was
accepted, the message the MTA would deliver (latin-1 text, CRLF line ends). Any
protocol error, unexpected reply or a milter that does not answer within the
timeout ends it with exit status 1 and the reason on standard error.
"""

import argparse
import json
import socket
import struct
import sys

from miltertest import client, codec, constants as c

TIMEOUT = 10

# Header values and bodies are octets: the library's text codec (UTF-8) would
# refuse 8-bit header fields and bodies, so carry every octet as one latin-1 char.
codec.codectypes['buf'] = (lambda v: v.encode('latin-1'), lambda d: (d.decode('latin-1'), b''))


def _decode_str(data):
    r = data.split(b'\0', 1)
    if len(r) != 2:
        raise codec.MilterNotEnough('short string')
    return (r[0].decode('latin-1'), r[1])


codec.codectypes['str'] = (lambda v: f'{v}\0'.encode('latin-1'), _decode_str)


class Fail(Exception):
    pass


def parse(message):
    """(fields, body): fields as (name, value after the colon with CRLF folds)."""
    message = message.replace('\r\n', '\n').replace('\n', '\r\n')
    head, _, body = message.partition('\r\n\r\n')
    fields = []
    for line in head.split('\r\n'):
        if line[:1] in (' ', '\t') and fields:
            name, value = fields[-1]
            fields[-1] = (name, value + '\r\n' + line)
        else:
            name, _, value = line.partition(':')
            fields.append((name, value))
    return fields, body


# ---------------------------------------------------------------------------
# The MTAs. `offer` is what the MTA offers at negotiation (version, actions,
# protocol); `value` turns a field's value into what the MTA sends; `body` what it
# sends as the body; `deliver` applies the end-of-message replies.

class Postfix:
    """Postfix (src/milter/milter8.c, cleanup_milter.c) and Sendmail behave alike
    here (tests/mta/QUIRKS.md): with SMFIP_HDR_LEADSPC values travel with their
    leading white space and are written right after the colon; without it exactly
    one space after the colon is dropped on the way in and 'Name: ' is written on
    the way out. Folds reach the milter as LF; added fields go last."""

    def __init__(self, version=6, actions=c.SMFI_V6_ACTS, protocol=c.SMFI_V6_PROT):
        self.offer = (version, actions, protocol)
        self.leadspc = False

    def value(self, value):
        if not self.leadspc and value.startswith(' '):
            value = value[1:]
        return value.replace('\r\n', '\n')

    def envelope(self, address):
        return address

    def body(self, fields, body, message):
        return body

    def deliver(self, fields, body, replies):
        sep = ':' if self.leadspc else ': '
        heading = [(n, f'{n}:{v}') for n, v in fields]
        for cmd, args in replies:
            if cmd == c.SMFIR_CHGHEADER:
                at = [i for i, (n, _) in enumerate(heading) if n.lower() == args['name'].lower()]
                index = args['index']
                value = args['value'].replace('\r\n', '\n').replace('\n', '\r\n')
                if index < 1 or index > len(at):
                    if value:
                        heading.append((args['name'], args['name'] + sep + value))
                elif value:
                    heading[at[index - 1]] = (args['name'], args['name'] + sep + value)
                else:
                    del heading[at[index - 1]]
            elif cmd == c.SMFIR_ADDHEADER:
                value = args['value'].replace('\r\n', '\n').replace('\n', '\r\n')
                heading.append((args['name'], args['name'] + sep + value))
            elif cmd == c.SMFIR_REPLBODY:
                body = replaced_body(replies)
            elif cmd not in (c.SMFIR_ACCEPT, c.SMFIR_CONTINUE):
                raise Fail(f'{cmd} not modelled')
        return ''.join(f + '\r\n' for _, f in heading) + '\r\n' + body


class Stalwart:
    """Stalwart's milter client (crates/smtp/src/inbound/milter: client.rs,
    message.rs). It offers protocol 6, actions 0xff (no SMFIF_SETSYMLIST) and the
    protocol flags 0x42 (no SMFIP_HDR_LEADSPC); it sends every header value trimmed
    of white space at both ends (folds inside stay CRLF) and empty when it is not
    UTF-8, and the whole message, heading included, as the body. It writes a
    changed or added value after 'Name:' when the value starts with white space and
    after 'Name: ' otherwise, adds fields at the top, and puts a replaced body after
    its own copy of the heading. MAIL and RCPT carry the envelope addresses in lower
    case (message.rs: `address_lcase`)."""

    def __init__(self):
        self.offer = (6, 0xff, 0x42)
        self.leadspc = False

    def value(self, value):
        try:
            value.encode('latin-1').decode('utf-8')
        except UnicodeDecodeError:
            return ''
        return value.strip(' \t\r\n')

    def envelope(self, address):
        return address.lower()

    def body(self, fields, body, message):
        return message

    def deliver(self, fields, body, replies):
        changes = []
        rewrite = False
        new_body = None
        for cmd, args in replies:
            if cmd == c.SMFIR_ADDHEADER:
                changes.append((0, args['name'], args['value'], False))
            elif cmd == c.SMFIR_CHGHEADER:
                value = args['value']
                if not value or any(n.lower() == args['name'].lower() for n, _ in fields):
                    changes.append((args['index'], args['name'], value, True))
                    rewrite = True
                else:
                    changes.append((0, args['name'], value, False))
            elif cmd == c.SMFIR_REPLBODY:
                new_body = replaced_body(replies)
            elif cmd not in (c.SMFIR_ACCEPT, c.SMFIR_CONTINUE):
                raise Fail(f'{cmd} not modelled')
        raw_headers = ''.join(f'{n}:{v}\r\n' for n, v in fields) + '\r\n'
        out_body = body if new_body is None else new_body
        if not changes:
            return raw_headers + out_body
        if not rewrite:
            added = ''
            for _, name, value, _ in changes:
                added += f'{name}: {value}' + ('' if value.endswith('\n') else '\r\n')
            return added + raw_headers + out_body
        headers = [(n, v + '\r\n') for n, v in fields]
        for index, name, value, is_change in changes:
            if is_change:
                count = 0
                for pos, (n, _) in enumerate(headers):
                    if n.lower() == name.lower():
                        count += 1
                        if count == index:
                            if value:
                                headers[pos] = (n, value)
                            else:
                                del headers[pos]
                            break
            else:
                headers.insert(0, (name, value))
        out = ''
        for n, v in headers:
            out += n + (':' if v[:1] in (' ', '\t', '\r', '\n') else ': ') + v
            if not v.endswith('\n'):
                out += '\r\n'
        return out + '\r\n' + out_body


class GoMilter(Postfix):
    """go-milter's client with NewDefaultClient's options (client.go): protocol 6,
    actions add header, add recipient, change body, change from, change header;
    protocol mask 0 (no LEADSPC, no "no reply"). How values are written back is up
    to the MTA that embeds it: modelled as Postfix without LEADSPC."""

    def __init__(self):
        super().__init__(6, 0x01 | 0x04 | 0x02 | 0x40 | 0x10, 0)


def replaced_body(replies):
    return ''.join(a['buf'] for cmd, a in replies if cmd == c.SMFIR_REPLBODY)


# ---------------------------------------------------------------------------

class Conversation:
    def __init__(self, port, mta, sender='alice@sender.example', recipient='bob@receiver.example'):
        self.sender, self.recipient = sender, recipient
        sock = socket.create_connection(('127.0.0.1', port), timeout=TIMEOUT)
        sock.settimeout(TIMEOUT)
        self.conn = client.MilterConnection(sock)
        self.sock = sock
        self.mta = mta
        self.log = []

    def read_packet(self):
        data = b''
        while len(data) < 4 or len(data) < 4 + struct.unpack('!L', data[:4])[0]:
            more = self.sock.recv(65536)
            if not more:
                raise Fail(f'connection closed after {data!r}')
            data += more
        n = 4 + struct.unpack('!L', data[:4])[0]
        self.conn.buf = data[n:]
        return data[:n]

    def negotiate(self):
        version, actions, protocol = self.mta.offer
        self.sock.sendall(codec.encode_msg(c.SMFIC_OPTNEG, version=version, actions=actions, protocol=protocol))
        packet = self.read_packet()
        if actions & c.SMFIF_SETSYMLIST:
            # Macro lists may follow the three words (the library has no decoder
            # for them): stage (32 bits) and names, NUL-terminated, each.
            if packet[4:5] != c.SMFIC_OPTNEG.encode() or len(packet) < 17:
                raise Fail(f'bad negotiation reply {packet!r}')
            rver, ract, rprot = struct.unpack('!LLL', packet[5:17])
            rest, lists = packet[17:], {}
            while rest:
                stage = struct.unpack('!l', rest[:4])[0]
                names, _, rest = rest[4:].partition(b'\0')
                lists[stage] = names.decode('latin-1')
            r = (c.SMFIC_OPTNEG, {'version': rver, 'actions': ract, 'protocol': rprot, 'macros': lists})
        else:
            # The library's decoder: three words and nothing after them.
            try:
                r = codec.decode_msg(packet)[:2]
            except codec.MilterProtoError as e:
                raise Fail(f'negotiation reply rejected: {e}') from None
        if r[0] != c.SMFIC_OPTNEG:
            raise Fail(f'bad negotiation reply {r}')
        ract, rprot = r[1]['actions'], r[1]['protocol']
        # Strict, as the library's optneg_mta: nothing the MTA did not offer (go-milter
        # takes the milter's masks as they come).
        strict = not isinstance(self.mta, GoMilter)
        if strict and (ract & ~actions or rprot & ~protocol):
            raise Fail(f'negotiation asks for what was not offered: 0x{ract:x}/0x{rprot:x}')
        self.actions, self.protocol = ract, rprot
        self.mta.leadspc = bool(rprot & c.SMFIP_HDR_LEADSPC)
        self.log.append({'negotiated': {'version': r[1]['version'], 'actions': ract, 'protocol': rprot,
                                        'macros': r[1].get('macros', {})}})

    def opt(self, flag):
        return bool(self.protocol & flag)

    def stage(self, what, cmd, skip=None, noreply=None, **args):
        """Sends one command; returns its reply, or 'noreply' when negotiated so."""
        if skip is not None and self.opt(skip):
            return 'skipped'
        self.conn._send(cmd, **args)
        if noreply is not None and self.opt(noreply):
            self.log.append({what: 'noreply'})
            return 'noreply'
        r = self.conn.recv()
        if r is None:
            raise Fail(f'{what}: connection closed')
        self.log.append({what: r[0]})
        return r[0]

    def macros(self, stage, **values):
        self.conn.send_macro(stage, **values)

    def connect(self, addr):
        return self.stage('connect', c.SMFIC_CONNECT, c.SMFIP_NOCONNECT, c.SMFIP_NR_CONN,
                          hostname='client.example', family=c.SMFIA_INET, port=25, address=addr)

    def transaction(self, message, eom_body=False):
        """MAIL .. end of message for one message; returns (replies, delivered)."""
        fields, body = parse(message)
        self.stage('helo', c.SMFIC_HELO, c.SMFIP_NOHELO, c.SMFIP_NR_HELO, helo='client.example')
        mail, rcpt = (f'<{self.mta.envelope(a)}>' for a in (self.sender, self.recipient))
        self.log.append({'envelope': [mail, rcpt]})
        r = self.stage('mail', c.SMFIC_MAIL, c.SMFIP_NOMAIL, c.SMFIP_NR_MAIL, args=[mail])
        if r not in ('skipped', 'noreply', c.SMFIR_CONTINUE):
            return [(r, {})], None
        self.stage('rcpt', c.SMFIC_RCPT, c.SMFIP_NORCPT, c.SMFIP_NR_RCPT, args=[rcpt])
        if self.mta.offer[0] >= 6:
            self.stage('data', c.SMFIC_DATA, c.SMFIP_NODATA, c.SMFIP_NR_DATA)
        for name, value in fields:
            r = self.stage('header', c.SMFIC_HEADER, c.SMFIP_NOHDRS, c.SMFIP_NR_HDR,
                           name=name, value=self.mta.value(value))
            if r not in ('skipped', 'noreply', c.SMFIR_CONTINUE):
                raise Fail(f'header {name}: {r}')
        self.stage('eoh', c.SMFIC_EOH, c.SMFIP_NOEOH, c.SMFIP_NR_EOH)
        sent = self.mta.body(fields, body, message.replace('\r\n', '\n').replace('\n', '\r\n'))
        last = ''
        if eom_body:
            # The last octets go in the end-of-message packet itself.
            sent, last = sent[:-7], sent[-7:]
        for at in range(0, len(sent), c.MILTER_CHUNK_SIZE):
            r = self.stage('body', c.SMFIC_BODY, c.SMFIP_NOBODY, c.SMFIP_NR_BODY,
                           buf=sent[at:at + c.MILTER_CHUNK_SIZE])
            if r not in ('skipped', 'noreply', c.SMFIR_CONTINUE):
                raise Fail(f'body: {r}')
        data = last.encode('latin-1')
        self.sock.sendall(struct.pack('!Lc', len(data) + 1, c.SMFIC_BODYEOB.encode()) + data)
        replies = []
        while True:
            r = self.conn.recv()
            if r is None:
                raise Fail('end of message: connection closed')
            replies.append(r)
            if r[0] in client.DISPOSITION_REPLIES:
                break
        self.log.append({'eom': [[cmd, args] for cmd, args in replies]})
        delivered = None
        if replies[-1][0] in (c.SMFIR_ACCEPT, c.SMFIR_CONTINUE):
            delivered = self.mta.deliver(fields, body, replies)
        return replies, delivered


MTAS = {
    'postfix': lambda: Postfix(),
    # Postfix with milter_protocol = 2 (and Sendmail without LEADSPC): protocol 2's
    # actions and steps, no LEADSPC, no "no reply".
    'postfix-v2': lambda: Postfix(2, c.SMFI_V2_ACTS, c.SMFI_V2_PROT),
    # Protocol 6 without SMFIF_SETSYMLIST, and every step answered.
    'no-symlist': lambda: Postfix(6, c.SMFI_V6_ACTS & ~c.SMFIF_SETSYMLIST, c.SMFIP_HDR_LEADSPC | 0x3ff),
    # Protocol 6 with "no reply" for body chunks (Postfix and Sendmail offer it).
    'noreply-body': lambda: Postfix(6, c.SMFI_V6_ACTS, c.SMFI_V6_PROT),
    # Every step answered, CONNECT included (no SMFIP_NR_CONN offered).
    'replying': lambda: Postfix(6, c.SMFI_V6_ACTS, c.SMFIP_HDR_LEADSPC | 0x7ff),
    'stalwart': lambda: Stalwart(),
    'go-milter': lambda: GoMilter(),
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument('scenario', choices=['message', 'eom-body', 'quit-nc', 'macros', 'macro-first'])
    p.add_argument('--mta', choices=sorted(MTAS), default='postfix')
    p.add_argument('--port', type=int, required=True)
    p.add_argument('--message', action='append', required=True)
    p.add_argument('--sender', default='alice@sender.example')
    p.add_argument('--recipient', default='bob@receiver.example')
    a = p.parse_args()
    messages = [open(f, 'rb').read().decode('latin-1') for f in a.message]
    conv = Conversation(a.port, MTAS[a.mta](), a.sender, a.recipient)
    out = {'delivered': [], 'replies': []}
    try:
        if a.scenario == 'macro-first':
            # A macro packet before the negotiation: no MTA sends one today, but
            # libmilter takes a macro packet in any state (and the negotiation then
            # clears every stage's macros), so a milter must not hang up on it.
            conv.macros(c.SMFIC_CONNECT, **{'j': 'mx.example', '{daemon_name}': 'early'})
        conv.negotiate()
        if a.scenario in ('message', 'eom-body', 'macro-first'):
            conv.macros(c.SMFIC_CONNECT, **{'{client_addr}': '192.0.2.7'})
            conv.connect('192.0.2.7')
            for m in messages:
                replies, delivered = conv.transaction(m, eom_body=a.scenario == 'eom-body')
                out['replies'].append([r[0] for r in replies])
                out['delivered'].append(delivered)
        elif a.scenario == 'quit-nc':
            # One SMTP session from a loopback client (outbound under the default
            # trusted_networks), QUIT_NC, then one from a remote client on the same
            # milter connection, which must start clean.
            for addr, m in zip(['127.0.0.1', '192.0.2.7'], messages):
                conv.macros(c.SMFIC_CONNECT, **{'{client_addr}': addr})
                conv.connect(addr)
                replies, delivered = conv.transaction(m)
                out['replies'].append([r[0] for r in replies])
                out['delivered'].append(delivered)
                conv.conn._send(c.SMFIC_QUIT_NC)
        elif a.scenario == 'macros':
            # Two transactions on one SMTP session: the first authenticated, the
            # second not. The MTA sends the MAIL stage's macro packet each time; the
            # second has no value, so it holds only the stage byte.
            conv.macros(c.SMFIC_CONNECT, **{'{client_addr}': '192.0.2.7'})
            conv.connect('192.0.2.7')
            for auth, m in zip([True, False], messages):
                if auth:
                    conv.macros(c.SMFIC_MAIL, **{'{auth_authen}': 'alice', '{auth_type}': 'PLAIN'})
                else:
                    conv.macros(c.SMFIC_MAIL)
                replies, delivered = conv.transaction(m)
                out['replies'].append([r[0] for r in replies])
                out['delivered'].append(delivered)
        conv.conn._send(c.SMFIC_QUIT)
    except (Fail, client.MilterError, codec.MilterProtoError, OSError) as e:
        print(f'mta.py {a.scenario} --mta {a.mta}: {type(e).__name__}: {e}', file=sys.stderr)
        print(json.dumps(conv.log), file=sys.stderr)
        return 1
    out['log'] = conv.log
    print(json.dumps(out))
    return 0


if __name__ == '__main__':
    sys.exit(main())
