#!/usr/bin/env python3
"""A stand-in for the signer a container mail stack runs after mimeref-milter
(OpenDKIM, rspamd), for tests/mta/recipes.rs: a milter that changes nothing,
accepts every message, and appends to FILE one JSON line per message with the
header fields and the body it was handed. What it saw shows whether Postfix called
it after mimeref-milter: a signer signs what it is handed.

    recorder.py FILE

It listens on a loopback port the system picks and prints that port first: a port
picked beforehand could be taken by another test's Postfix before this slower
start binds it.

Standard library only, so it runs on the system Python. It negotiates no protocol
flags: the MTA sends every stage and waits for each reply.
"""

import json
import socket
import socketserver
import struct
import sys
import threading

LOCK = threading.Lock()


class Milter(socketserver.BaseRequestHandler):
    def read(self, n):
        data = b''
        while len(data) < n:
            more = self.request.recv(n - len(data))
            if not more:
                raise EOFError
            data += more
        return data

    def reply(self, cmd, data=b''):
        self.request.sendall(struct.pack('!L', len(data) + 1) + cmd + data)

    def handle(self):
        headers, body = [], b''
        try:
            while True:
                size = struct.unpack('!L', self.read(4))[0]
                packet = self.read(size)
                cmd, data = packet[:1], packet[1:]
                if cmd == b'O':
                    # Version 6, no actions, no protocol flags.
                    self.reply(b'O', struct.pack('!LLL', 6, 0, 0))
                elif cmd in (b'D', b'K'):
                    pass  # macros and QUIT_NC get no reply
                elif cmd == b'A':
                    headers, body = [], b''
                elif cmd == b'Q':
                    return
                elif cmd == b'L':
                    name, value = data.split(b'\0')[:2]
                    headers.append([name.decode('latin-1'), value.decode('latin-1')])
                    self.reply(b'c')
                elif cmd == b'B':
                    body += data
                    self.reply(b'c')
                elif cmd == b'E':
                    body += data
                    line = json.dumps({'headers': headers, 'body': body.decode('latin-1')})
                    with LOCK, open(sys.argv[1], 'a') as f:
                        f.write(line + '\n')
                    headers, body = [], b''
                    self.reply(b'a')
                else:
                    self.reply(b'c')
        except (EOFError, OSError):
            return


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


if __name__ == '__main__':
    with Server(('127.0.0.1', 0), Milter) as s:
        print(s.server_address[1], flush=True)
        s.serve_forever()
