#!/usr/bin/env python3
"""An echo pair on Python's ``websockets`` package (PyPI), the benchmark suite's WebSocket
baseline beside Braid's ``WebSocket { TLS() }``.

Server
------
    websockets_echo.py server --port 0 [--cert server.pem --key server-key.pem]

Prints ``listening <port>`` first, echoes every binary message, and after the first
connection ends prints ``{"messages": N}`` (messages echoed) and exits.

Client
------
    websockets_echo.py client --url wss://localhost:PORT/ [--ca ca.pem] --messages N --size S
                              [--window W]

Sends N binary messages of S bytes, at most W (default 512) awaiting their echo, checks that
every echo is the message sent, closes, and prints ``{"messages": N, "seconds": T}``: the
time from the first send to the last echo, the handshake excluded. Exits 1 if an echo differs.

Both ends turn compression (permessage-deflate, which Braid does not offer) and keepalive
pings off, so the two pairs do the same work.
"""

import argparse
import asyncio
import json
import ssl
import sys
import time


def report(**fields):
    print(json.dumps(fields), flush=True)


async def serve(args):
    from websockets.asyncio.server import serve as ws_serve
    from websockets.exceptions import ConnectionClosed

    context = None
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
    done = asyncio.get_running_loop().create_future()
    counted = {"messages": 0}

    async def handler(ws):
        try:
            async for message in ws:
                await ws.send(message)
                counted["messages"] += 1
        except ConnectionClosed:
            pass
        if not done.done():
            done.set_result(None)

    async with ws_serve(handler, "127.0.0.1", args.port, ssl=context, compression=None, ping_interval=None,
                        max_size=None) as server:
        port = server.sockets[0].getsockname()[1]
        print(f"listening {port}", flush=True)
        await done
    report(messages=counted["messages"])


async def client(args):
    from websockets.asyncio.client import connect

    context = None
    if args.url.startswith("wss:"):
        context = ssl.create_default_context(cafile=args.ca)
    payload = bytes((i * 2654435761 >> 7) & 0xFF for i in range(args.size))
    async with connect(args.url, ssl=context, compression=None, ping_interval=None, max_size=None,
                       server_hostname="localhost" if context else None) as ws:
        window = asyncio.Semaphore(args.window)
        start = time.perf_counter()

        async def send_all():
            for _ in range(args.messages):
                await window.acquire()
                await ws.send(payload)

        sender = asyncio.create_task(send_all())
        for _ in range(args.messages):
            echo = await ws.recv()
            window.release()
            if echo != payload:
                report(error="an echo differs from the message sent")
                sys.exit(1)
        await sender
        seconds = time.perf_counter() - start
    report(messages=args.messages, seconds=seconds)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("role", choices=["server", "client"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--url")
    parser.add_argument("--ca")
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--window", type=int, default=512)
    args = parser.parse_args()
    asyncio.run(serve(args) if args.role == "server" else client(args))


if __name__ == "__main__":
    main()
