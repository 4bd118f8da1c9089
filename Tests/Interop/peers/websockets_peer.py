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
makes the server ping with ``from-python`` and wait for the pong, then send ``pong-ok``. Runs
until SIGTERM.

Client
------
    websockets_peer.py client --url ws://127.0.0.1:PORT/path [--ca ca.pem] [--subprotocol chat]

Against an echo server: text, binary messages of several sizes, a fragmented message, a ping
(waits for its pong), then a close with 1001 "done". Prints one JSON line: ``ok``,
``subprotocol``, ``echoes_ok``, ``fragmented_ok``, ``pong_ok``, ``close_code`` and
``close_reason`` (what the server's close frame carried), ``error``.

Hostile
-------
    websockets_peer.py hostile --host 127.0.0.1 --port P --case CASE [--ca ca.pem]

Upgrades by hand over a raw socket (TLS with ``--ca``), sends one frame that breaks RFC 6455
(CASE: unmasked, reserved-bit, reserved-opcode, invalid-utf8, oversize, fragmented-ping,
long-ping, bad-close-code, one-byte-close), and prints ``close_code``: the code of the close
frame the server answered with (null if none came).
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


# MARK: server

async def serve(args):
    from websockets.asyncio.server import serve as ws_serve
    from websockets.exceptions import ConnectionClosed

    async def handler(ws):
        request = ws.request
        report(event="open", path=request.path, subprotocol=ws.subprotocol, x_braid=request.headers.get("X-Braid"))
        pong = False
        try:
            async for message in ws:
                if message == "fragments":
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
        report(event="closed", code=received.code if received else None, reason=received.reason if received else None, pong=pong)

    context = None
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
    subprotocols = args.subprotocols.split(",") if args.subprotocols else None
    async with ws_serve(handler, "127.0.0.1", args.port, ssl=context, subprotocols=subprotocols, max_size=args.max_size,
                        ping_interval=None) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        print(f"listening {port}", flush=True)
        await asyncio.Future()


# MARK: client

async def client(args):
    from websockets.asyncio.client import connect

    context = None
    if args.url.startswith("wss:"):
        context = ssl.create_default_context(cafile=args.ca)
        context.check_hostname = False
    result = dict(ok=False, subprotocol=None, echoes_ok=False, fragmented_ok=False, pong_ok=False, close_code=None, close_reason=None, error=None)
    try:
        subprotocols = [args.subprotocol] if args.subprotocol else None
        async with connect(args.url, ssl=context, subprotocols=subprotocols, max_size=None, open_timeout=30, close_timeout=30,
                           ping_interval=None) as ws:
            result["subprotocol"] = ws.subprotocol
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
}


def hostile(args):
    sock = socket.create_connection((args.host, args.port), timeout=30)
    if args.ca:
        context = ssl.create_default_context(cafile=args.ca)
        context.check_hostname = False
        sock = context.wrap_socket(sock, server_hostname="localhost")
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall((f"GET / HTTP/1.1\r\nHost: {args.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
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
    c = sub.add_parser("client")
    c.add_argument("--url", required=True)
    c.add_argument("--ca")
    c.add_argument("--subprotocol")
    h = sub.add_parser("hostile")
    h.add_argument("--host", default="127.0.0.1")
    h.add_argument("--port", type=int, required=True)
    h.add_argument("--case", required=True, choices=sorted(CASES))
    h.add_argument("--ca")
    args = parser.parse_args()
    if args.mode == "server":
        try:
            asyncio.run(serve(args))
        except KeyboardInterrupt:
            pass
    elif args.mode == "client":
        asyncio.run(client(args))
    else:
        hostile(args)


if __name__ == "__main__":
    sys.exit(main())
