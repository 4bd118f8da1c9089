#!/usr/bin/env python3
"""aioquic HTTP/3 peer for Braid's interop tests: a server and a client (ALPN h3).

Server
------
    aioquic_h3_peer.py server --host 127.0.0.1 --port 0 --cert server.pem --key server-key.pem

Prints ``listening <port>`` as its first stdout line and runs until SIGTERM/SIGINT. ``GET /N``
answers 200 with N bytes, byte ``i`` being ``pattern(i)`` below; any other path answers 404.
A request body is read and counted; the response carries it in ``x-request-bytes``. Session
tickets it issues are kept in memory, so a client can resume and send 0-RTT requests.

Client
------
    aioquic_h3_peer.py client --host H --port P --path /N [--ca FILE] [--sni NAME]
                              [--method GET|POST] [--upload N] [--requests K] [--timeout 30]
                              [--session-file FILE]

Sends the request (with ``--upload N``, N pattern bytes as its body; with ``--requests K``, K of
them at once on the one connection) and prints one JSON object: ``status`` and ``bytes`` (of
the first response; ``statuses`` and ``sizes`` list every response's), ``sha256`` of the first
body, ``pattern`` (whether every byte of it matched ``pattern(i)``), ``identical`` (whether
every body equals the first), ``body_base64`` (the first body, when at most 64 KiB) and ``ok``.
Exits 0 only if every response arrived; 3 on timeout, 4 if the connection failed.

With ``--session-file``, a ticket found in FILE resumes the connection and the requests are
sent at once, as 0-RTT data; the ticket the server sends is saved there for the next run. The
report then also says ``resumed`` and ``early_data_accepted`` (from the handshake).
"""

import argparse
import asyncio
import base64
import hashlib
import json
import os
import pickle
import signal
import sys
from typing import Optional

from aioquic.asyncio import QuicConnectionProtocol, connect, serve
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, H3Event, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, HandshakeCompleted, QuicEvent


def pattern(count: int, start: int = 0) -> bytes:
    """Bytes ``start ..< start + count`` of the pattern (byte i is i * 7 + (i >> 10), mod 256)."""
    return bytes(((i * 7) + (i >> 10)) & 0xFF for i in range(start, start + count))


class ServerProtocol(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.h3: Optional[H3Connection] = None
        self.requests: dict[int, dict] = {}

    def quic_event_received(self, event: QuicEvent) -> None:
        if self.h3 is None:
            self.h3 = H3Connection(self._quic)
        for h3_event in self.h3.handle_event(event):
            self.h3_event_received(h3_event)

    def h3_event_received(self, event: H3Event) -> None:
        if isinstance(event, HeadersReceived):
            headers = dict(event.headers)
            self.requests[event.stream_id] = {"path": headers.get(b":path", b"").decode(), "received": 0}
            if event.stream_ended:
                self.respond(event.stream_id)
        elif isinstance(event, DataReceived):
            request = self.requests.get(event.stream_id)
            if request is None:
                return
            request["received"] += len(event.data)
            if event.stream_ended:
                self.respond(event.stream_id)

    def respond(self, stream_id: int) -> None:
        request = self.requests.pop(stream_id)
        path = request["path"].lstrip("/")
        extra = [(b"x-request-bytes", str(request["received"]).encode())]
        if path.isdigit():
            size = int(path)
            self.h3.send_headers(stream_id, [(b":status", b"200"), (b"content-length", str(size).encode())] + extra)
            offset = 0
            while offset < size:
                chunk = min(65536, size - offset)
                self.h3.send_data(stream_id, pattern(chunk, offset), end_stream=offset + chunk == size)
                offset += chunk
            if size == 0:
                self.h3.send_data(stream_id, b"", end_stream=True)
        else:
            self.h3.send_headers(stream_id, [(b":status", b"404"), (b"content-length", b"0")] + extra)
            self.h3.send_data(stream_id, b"", end_stream=True)
        self.transmit()


async def run_server(args: argparse.Namespace) -> int:
    configuration = QuicConfiguration(alpn_protocols=H3_ALPN, is_client=False, max_datagram_frame_size=65536)
    configuration.load_cert_chain(args.cert, args.key)
    tickets: dict = {}
    server = await serve(
        args.host, args.port, configuration=configuration, create_protocol=ServerProtocol,
        session_ticket_handler=lambda ticket: tickets.__setitem__(ticket.ticket, ticket),
        session_ticket_fetcher=lambda label: tickets.pop(label, None),
    )
    port = server._transport.get_extra_info("sockname")[1]
    print(f"listening {port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    server.close()
    return 0


class ClientProtocol(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.done: asyncio.Future = asyncio.get_running_loop().create_future()
        self.expected = 1
        self.status: dict[int, int] = {}
        self.body: dict[int, bytearray] = {}
        self.ended: set[int] = set()
        self.handshake: Optional[HandshakeCompleted] = None

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, HandshakeCompleted):
            self.handshake = event
        if isinstance(event, ConnectionTerminated) and not self.done.done():
            self.done.set_exception(ConnectionError(f"connection closed: {event.error_code:#x} {event.reason_phrase}"))
        for h3_event in self.h3.handle_event(event):
            stream = getattr(h3_event, "stream_id", None)
            if isinstance(h3_event, HeadersReceived):
                self.status[stream] = int(dict(h3_event.headers).get(b":status", b"0"))
            elif isinstance(h3_event, DataReceived):
                self.body.setdefault(stream, bytearray()).extend(h3_event.data)
            if getattr(h3_event, "stream_ended", False):
                self.ended.add(stream)
                if len(self.ended) == self.expected and not self.done.done():
                    self.done.set_result(None)


async def run_client(args: argparse.Namespace) -> int:
    configuration = QuicConfiguration(alpn_protocols=H3_ALPN, is_client=True, server_name=args.sni or args.host)
    if args.ca:
        configuration.load_verify_locations(args.ca)
    if args.session_file and os.path.exists(args.session_file):
        with open(args.session_file, "rb") as file:
            configuration.session_ticket = pickle.load(file)

    saved: list = []

    def save_ticket(ticket) -> None:
        saved.append(ticket)
        if args.session_file:
            with open(args.session_file, "wb") as file:
                pickle.dump(ticket, file)

    try:
        # Resuming, the requests go at once (0-RTT) instead of after the handshake.
        early = configuration.session_ticket is not None
        async with connect(
            args.host, args.port, configuration=configuration, create_protocol=ClientProtocol,
            session_ticket_handler=save_ticket, wait_connected=not early,
        ) as client:
            client.expected = args.requests
            upload = pattern(args.upload) if args.upload else b""
            headers = [
                (b":method", args.method.encode()), (b":scheme", b"https"),
                (b":authority", f"{args.sni or args.host}:{args.port}".encode()), (b":path", args.path.encode()),
            ]
            if upload:
                headers.append((b"content-length", str(len(upload)).encode()))
            streams = []
            for _ in range(args.requests):
                stream_id = client._quic.get_next_available_stream_id()
                streams.append(stream_id)
                client.h3.send_headers(stream_id, headers, end_stream=not upload)
                if upload:
                    client.h3.send_data(stream_id, upload, end_stream=True)
            client.transmit()
            await asyncio.wait_for(client.done, timeout=args.timeout)
            bodies = [bytes(client.body.get(stream, b"")) for stream in streams]
            first = bodies[0]
            report = {
                "ok": True, "status": client.status.get(streams[0]), "bytes": len(first),
                "statuses": [client.status.get(stream) for stream in streams], "sizes": [len(body) for body in bodies],
                "sha256": hashlib.sha256(first).hexdigest(), "pattern": first == pattern(len(first)),
                "identical": all(body == first for body in bodies),
            }
            if client.handshake is not None:
                report["resumed"] = client.handshake.session_resumed
                report["early_data_accepted"] = client.handshake.early_data_accepted
            if args.session_file:
                # The server's ticket may follow the responses: wait briefly for it.
                for _ in range(100):
                    if saved:
                        break
                    await asyncio.sleep(0.01)
            if len(first) <= 65536:
                report["body_base64"] = base64.b64encode(first).decode()
            print(json.dumps(report), flush=True)
            return 0
    except asyncio.TimeoutError:
        print(json.dumps({"ok": False, "error": "timeout"}), flush=True)
        return 3
    except (ConnectionError, OSError) as error:
        print(json.dumps({"ok": False, "error": str(error)}), flush=True)
        return 4


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    server = sub.add_parser("server")
    server.add_argument("--host", default="127.0.0.1")
    server.add_argument("--port", type=int, default=0)
    server.add_argument("--cert", required=True)
    server.add_argument("--key", required=True)
    client = sub.add_parser("client")
    client.add_argument("--host", default="127.0.0.1")
    client.add_argument("--port", type=int, required=True)
    client.add_argument("--path", default="/")
    client.add_argument("--method", default="GET")
    client.add_argument("--upload", type=int, default=0)
    client.add_argument("--requests", type=int, default=1)
    client.add_argument("--ca")
    client.add_argument("--sni")
    client.add_argument("--timeout", type=float, default=30)
    client.add_argument("--session-file")
    args = parser.parse_args(argv)
    return asyncio.run(run_server(args) if args.mode == "server" else run_client(args))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
