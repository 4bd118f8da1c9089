#!/usr/bin/env python3
"""WebSocket peer for Braid's interop tests, on the ``websockets`` package (PyPI).

Server
------
    websockets_peer.py server --port 0 [--cert server.pem --key server-key.pem]
                              [--subprotocols chat,other] [--max-size N]

Prints ``listening <port>`` first. Keepalive pings are off (on both sides), so every ping a test
sees is one it asked for. Each connection prints a JSON line on its upgrade
(``event: "open"``: ``path`` with the query, ``subprotocol``, ``x_braid``: that request
header) and one when it ends (``event: "closed"``: ``code`` and ``reason`` of the client's
close, ``pong``: whether the ping sent on "ping-me" was answered). Text and binary messages are
echoed; the text ``fragments`` is answered with a text message in three fragments; ``ping-me``
makes the server ping with ``from-python`` and wait for the pong, then send ``pong-ok``;
``many N`` makes it send N copies of one compressible text. Runs until SIGTERM.

permessage-deflate is websockets' default (it accepts an offer with 12-bit windows);
``--no-compression`` turns it off, and ``--server-no-context-takeover``,
``--client-no-context-takeover``, ``--server-max-window-bits N``, ``--client-max-window-bits N``
set what it accepts with. The "open" line also carries ``offer`` and ``extensions`` (the
request's and the response's ``Sec-WebSocket-Extensions``); the "closed" line ``wire_bytes``
(bytes read from the socket) and ``message_bytes`` (the messages' bytes, inflated).

Client
------
    websockets_peer.py client --url ws://127.0.0.1:PORT/path [--ca ca.pem] [--subprotocol chat]

Against an echo server: text, binary messages of several sizes, a fragmented message, a ping
(waits for its pong), then a close with 1001 "done". Prints one JSON line: ``ok``,
``subprotocol``, ``echoes_ok``, ``fragmented_ok``, ``pong_ok``, ``close_code`` and
``close_reason`` (what the server's close frame carried), ``error``.

With ``--many N`` it also sends N copies of one compressible text and a compressible 1 MiB
text, checking each echo (``many_ok``), and reports ``extensions`` (the response's
``Sec-WebSocket-Extensions``), ``wire_bytes`` and ``message_bytes`` (read from the socket, and
the messages' bytes inflated). It offers permessage-deflate as websockets does by default
unless ``--no-compression``; the deflate flags above shape its offer.

Hostile
-------
    websockets_peer.py hostile --host 127.0.0.1 --port P --case CASE [--ca ca.pem]

Upgrades by hand over a raw socket (TLS with ``--ca``), sends one frame that breaks RFC 6455
(CASE: unmasked, reserved-bit, reserved-opcode, invalid-utf8, oversize, fragmented-ping,
long-ping, bad-close-code, one-byte-close, utf8-split-across-fragments, continuation-first,
message-inside-message; with permessage-deflate offered: deflate-bomb, deflate-corrupt,
deflate-rsv1-continuation, deflate-rsv1-ping), and prints ``close_code``: the code of the close
frame the server answered with (null if none came).

    websockets_peer.py bad-upgrade --host 127.0.0.1 --port P --case CASE [--ca ca.pem]

Sends a malformed upgrade request (CASE: version-12, no-key, short-key, post, no-upgrade,
no-host, header-without-colon) and prints ``status``: the status code the server answered with
(null if it closed without one).
"""

import argparse
import asyncio
import base64
import json
import os
import socket
import ssl
import struct
import sys


def report(**fields):
    print(json.dumps(fields), flush=True)


# MARK: compression

COMPRESSIBLE = ("The quick brown fox jumps over the lazy dog; κόσμε. " * 40).strip()


def counting(base):
    """A connection class that counts the bytes read from its socket."""
    class Counting(base):
        wire_bytes = 0

        def data_received(self, data):
            self.wire_bytes += len(data)
            super().data_received(data)
    return Counting


def deflate_extensions(args, server):
    """The extension factories for ``args`` (None: websockets' default compression)."""
    from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory, ServerPerMessageDeflateFactory
    if args.no_compression:
        return []
    custom = (args.server_no_context_takeover or args.client_no_context_takeover or args.server_max_window_bits
              or args.client_max_window_bits)
    if not custom:
        return None
    if server:
        return [ServerPerMessageDeflateFactory(
            server_no_context_takeover=args.server_no_context_takeover, client_no_context_takeover=args.client_no_context_takeover,
            server_max_window_bits=args.server_max_window_bits, client_max_window_bits=args.client_max_window_bits)]
    return [ClientPerMessageDeflateFactory(
        server_no_context_takeover=args.server_no_context_takeover, client_no_context_takeover=args.client_no_context_takeover,
        server_max_window_bits=args.server_max_window_bits, client_max_window_bits=args.client_max_window_bits or True)]


def add_deflate_arguments(parser):
    parser.add_argument("--no-compression", action="store_true")
    parser.add_argument("--server-no-context-takeover", action="store_true")
    parser.add_argument("--client-no-context-takeover", action="store_true")
    parser.add_argument("--server-max-window-bits", type=int)
    parser.add_argument("--client-max-window-bits", type=int)


# MARK: server

async def serve(args):
    from websockets.asyncio.server import ServerConnection, serve as ws_serve
    from websockets.exceptions import ConnectionClosed

    async def handler(ws):
        request = ws.request
        report(event="open", path=request.path, subprotocol=ws.subprotocol, x_braid=request.headers.get("X-Braid"),
               offer=request.headers.get("Sec-WebSocket-Extensions"), extensions=ws.response.headers.get("Sec-WebSocket-Extensions"))
        pong = False
        message_bytes = 0
        try:
            async for message in ws:
                message_bytes += len(message.encode() if isinstance(message, str) else message)
                if isinstance(message, str) and message.startswith("many "):
                    for _ in range(int(message[5:])):
                        await ws.send(COMPRESSIBLE)
                elif message == "fragments":
                    await ws.send(["frag", "men", "ted"])
                elif message == "ping-me":
                    waiter = await ws.ping(b"from-python")
                    await asyncio.wait_for(waiter, 30)
                    pong = True
                    await ws.send("pong-ok")
                else:
                    await ws.send(message)
        except ConnectionClosed:
            pass
        received = ws.protocol.close_rcvd
        report(event="closed", code=received.code if received else None, reason=received.reason if received else None, pong=pong,
               wire_bytes=ws.wire_bytes, message_bytes=message_bytes)

    context = None
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
    subprotocols = args.subprotocols.split(",") if args.subprotocols else None
    extensions = deflate_extensions(args, server=True)
    options = dict(compression=None, extensions=extensions) if extensions is not None else {}
    async with ws_serve(handler, "127.0.0.1", args.port, ssl=context, subprotocols=subprotocols, max_size=args.max_size,
                        ping_interval=None, create_connection=counting(ServerConnection), **options) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        print(f"listening {port}", flush=True)
        await asyncio.Future()


# MARK: client

async def client(args):
    from websockets.asyncio.client import ClientConnection, connect

    context = None
    if args.url.startswith("wss:"):
        context = ssl.create_default_context(cafile=args.ca)
        context.check_hostname = False
    result = dict(ok=False, subprotocol=None, echoes_ok=False, fragmented_ok=False, pong_ok=False, close_code=None, close_reason=None, error=None,
                  extensions=None, many_ok=None, wire_bytes=None, message_bytes=None)
    try:
        subprotocols = [args.subprotocol] if args.subprotocol else None
        extensions = deflate_extensions(args, server=False)
        options = dict(compression=None, extensions=extensions) if extensions is not None else {}
        async with connect(args.url, ssl=context, subprotocols=subprotocols, max_size=None, open_timeout=90, close_timeout=90,
                           ping_interval=None, create_connection=counting(ClientConnection), **options) as ws:
            result["subprotocol"] = ws.subprotocol
            result["extensions"] = ws.response.headers.get("Sec-WebSocket-Extensions")
            if args.many:
                before = ws.wire_bytes
                message_bytes = 0
                many = True
                for _ in range(args.many):
                    await ws.send(COMPRESSIBLE)
                    echo = await asyncio.wait_for(ws.recv(), 30)
                    many &= echo == COMPRESSIBLE
                    message_bytes += len(echo.encode())
                big = (COMPRESSIBLE + "\n") * ((1 << 20) // (len(COMPRESSIBLE.encode()) + 1))
                await ws.send(big)
                echo = await asyncio.wait_for(ws.recv(), 60)
                many &= echo == big
                message_bytes += len(echo.encode())
                result["many_ok"] = many
                result["wire_bytes"] = ws.wire_bytes - before
                result["message_bytes"] = message_bytes
            echoes = True
            for message in ["hello", "κόσμε", ""]:
                await ws.send(message)
                echoes &= (await asyncio.wait_for(ws.recv(), 30)) == message
            for size in [0, 1, 125, 126, 65535, 65536, 1 << 20]:
                data = bytes((i * 31) & 0xFF for i in range(size))
                await ws.send(data)
                echoes &= (await asyncio.wait_for(ws.recv(), 30)) == data
            result["echoes_ok"] = echoes
            await ws.send(["frag", "men", "ted"])
            result["fragmented_ok"] = (await asyncio.wait_for(ws.recv(), 30)) == "fragmented"
            waiter = await ws.ping(b"from-python")
            await asyncio.wait_for(waiter, 30)
            result["pong_ok"] = True
            await ws.close(1001, "done")
            received = ws.protocol.close_rcvd
            result["close_code"] = received.code if received else None
            result["close_reason"] = received.reason if received else None
            result["ok"] = True
    except Exception as error:  # reported, not raised: the test reads the line
        result["error"] = f"{type(error).__name__}: {error}"
    report(**result)


# MARK: hostile

def frame(opcode, payload, fin=True, rsv=0, masked=True, length=None):
    length = len(payload) if length is None else length
    head = bytes([(0x80 if fin else 0) | (rsv << 4) | opcode])
    mask_bit = 0x80 if masked else 0
    if length <= 125:
        head += bytes([mask_bit | length])
    elif length <= 0xFFFF:
        head += bytes([mask_bit | 126]) + struct.pack("!H", length)
    else:
        head += bytes([mask_bit | 127]) + struct.pack("!Q", length)
    if not masked:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


CASES = {
    "unmasked": lambda: frame(0x2, b"hi", masked=False),
    "reserved-bit": lambda: frame(0x2, b"hi", rsv=4),
    "reserved-opcode": lambda: frame(0x3, b""),
    "invalid-utf8": lambda: frame(0x1, b"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80edited"),
    "oversize": lambda: frame(0x2, b"", length=1 << 20)[:14],
    "fragmented-ping": lambda: frame(0x9, b"x", fin=False),
    "long-ping": lambda: frame(0x9, b"x" * 126),
    "bad-close-code": lambda: frame(0x8, struct.pack("!H", 1005)),
    "one-byte-close": lambda: frame(0x8, b"\x03"),
    # "κ" is CE BA: the first fragment ends inside it, the second completes it, then a surrogate.
    "utf8-split-across-fragments": lambda: frame(0x1, b"\xce", fin=False) + frame(0x9, b"p") + frame(0x0, b"\xba\xed\xa0\x80"),
    "continuation-first": lambda: frame(0x0, b"x"),
    "message-inside-message": lambda: frame(0x1, b"a", fin=False) + frame(0x2, b"b"),
    "deflate-bomb": lambda: frame(0x2, deflate(bytes(1 << 20)), rsv=4),
    "deflate-corrupt": lambda: frame(0x2, b"\xff\xff\x00", rsv=4),
    "deflate-rsv1-continuation": lambda: frame(0x1, deflate(b"hello")[:2], fin=False, rsv=4) + frame(0x0, deflate(b"hello")[2:], rsv=4),
    "deflate-rsv1-ping": lambda: frame(0x9, b"x", rsv=4),
}


def deflate(data):
    """``data`` as one permessage-deflate message: raw deflate, sync-flushed, tail dropped."""
    import zlib
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    out = compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)
    assert out.endswith(b"\x00\x00\xff\xff")
    return out[:-4]


BAD_UPGRADES = {
    "version-12": "GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 12\r\n\r\n",
    "no-key": "GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n",
    "short-key": "GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: c2hvcnQ=\r\nSec-WebSocket-Version: 13\r\n\r\n",
    "post": "POST / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n",
    "no-upgrade": "GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n",
    "no-host": "GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n",
    "header-without-colon": "GET / HTTP/1.1\r\nHost: h\r\nUpgrade websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n",
}


def open_socket(args):
    sock = socket.create_connection((args.host, args.port), timeout=90)
    if args.ca:
        context = ssl.create_default_context(cafile=args.ca)
        context.check_hostname = False
        sock = context.wrap_socket(sock, server_hostname="localhost")
    return sock


def bad_upgrade(args):
    sock = open_socket(args)
    sock.sendall(BAD_UPGRADES[args.case].format(key=base64.b64encode(os.urandom(16)).decode()).encode())
    buffer = b""
    try:
        while b"\r\n" not in buffer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            buffer += chunk
    except OSError:
        pass
    parts = buffer.split(b"\r\n", 1)[0].split(b" ")
    report(status=int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else None)


def hostile(args):
    sock = open_socket(args)
    key = base64.b64encode(os.urandom(16)).decode()
    offer = "Sec-WebSocket-Extensions: permessage-deflate\r\n" if args.case.startswith("deflate-") else ""
    sock.sendall((f"GET / HTTP/1.1\r\nHost: {args.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{offer}\r\n").encode())
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(4096)
        if not chunk:
            report(close_code=None, error="no upgrade response")
            return
        buffer += chunk
    head, buffer = buffer.split(b"\r\n\r\n", 1)
    if not head.startswith(b"HTTP/1.1 101"):
        report(close_code=None, error=head.decode(errors="replace"))
        return
    if offer and b"permessage-deflate" not in head.lower():
        report(close_code=None, error="the server did not accept permessage-deflate")
        return
    sock.sendall(CASES[args.case]())
    # Read the server's frames until its close.
    code = None
    try:
        while True:
            while len(buffer) < 2:
                chunk = sock.recv(4096)
                if not chunk:
                    raise EOFError
                buffer += chunk
            opcode, length = buffer[0] & 0x0F, buffer[1] & 0x7F
            start = 2 + (2 if length == 126 else 8 if length == 127 else 0)
            while len(buffer) < start:
                buffer += sock.recv(4096)
            if length == 126:
                length = struct.unpack("!H", buffer[2:4])[0]
            elif length == 127:
                length = struct.unpack("!Q", buffer[2:10])[0]
            while len(buffer) < start + length:
                chunk = sock.recv(4096)
                if not chunk:
                    raise EOFError
                buffer += chunk
            payload, buffer = buffer[start:start + length], buffer[start + length:]
            if opcode == 0x8:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                break
    except (EOFError, OSError):
        pass
    report(close_code=code)


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("server")
    s.add_argument("--port", type=int, default=0)
    s.add_argument("--cert")
    s.add_argument("--key")
    s.add_argument("--subprotocols")
    s.add_argument("--max-size", type=int, default=None)
    add_deflate_arguments(s)
    c = sub.add_parser("client")
    c.add_argument("--url", required=True)
    c.add_argument("--ca")
    c.add_argument("--subprotocol")
    c.add_argument("--many", type=int, default=0)
    add_deflate_arguments(c)
    h = sub.add_parser("hostile")
    h.add_argument("--host", default="127.0.0.1")
    h.add_argument("--port", type=int, required=True)
    h.add_argument("--case", required=True, choices=sorted(CASES))
    h.add_argument("--ca")
    b = sub.add_parser("bad-upgrade")
    b.add_argument("--host", default="127.0.0.1")
    b.add_argument("--port", type=int, required=True)
    b.add_argument("--case", required=True, choices=sorted(BAD_UPGRADES))
    b.add_argument("--ca")
    args = parser.parse_args()
    if args.mode == "server":
        try:
            asyncio.run(serve(args))
        except KeyboardInterrupt:
            pass
    elif args.mode == "client":
        asyncio.run(client(args))
    elif args.mode == "bad-upgrade":
        bad_upgrade(args)
    else:
        hostile(args)


if __name__ == "__main__":
    sys.exit(main())
