#!/usr/bin/env python3
"""aioquic HTTP/3 peer for Braid's interop tests: a server and a client (ALPN h3).

Server
------
    aioquic_h3_peer.py server --host 127.0.0.1 --port 0 --cert server.pem --key server-key.pem

Prints ``listening <port>`` as its first stdout line and runs until SIGTERM/SIGINT. ``GET /N``
answers 200 with N bytes, byte ``i`` being ``pattern(i)`` below; any other path answers 404.
A request body is read and counted; the response carries it in ``x-request-bytes``. Session
tickets it issues are kept in memory, so a client can resume and send 0-RTT requests.

With ``--goaway-after K``, each connection sends GOAWAY when its K-th request arrives, naming
that request's stream as the first it will not process, and refuses it and every later request
with H3_REQUEST_REJECTED (RESET_STREAM and STOP_SENDING); the K - 1 before it are answered. At
exit (SIGTERM) it prints ``{"goaways": G, "rejected": R, "answered": A}``.

Load client
-----------
    aioquic_h3_peer.py load --host H --port P --path /N --requests N --concurrency C
                            [--ca FILE] [--sni NAME] [--timeout 60]

Sends N GET requests, C at a time, as a client that follows RFC 9114's GOAWAY rules: after a
GOAWAY it sends new requests on a new connection, and a request the server did not process
(its stream at or past the GOAWAY's ID, or reset with H3_REQUEST_REJECTED) is sent again on a
new connection, at most 4 times in all. Prints ``{"ok", "completed", "lost", "retried",
"goaways", "connections", "pattern"}``: ``lost`` counts requests that failed otherwise (a
request the server took and never answered), ``pattern`` whether every body was N pattern
bytes. Exits 0 only if every request completed.

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
import contextlib
import hashlib
import json
import os
import pickle
import signal
import sys
from typing import Optional

from aioquic.asyncio import QuicConnectionProtocol, connect, serve
from aioquic.buffer import Buffer, BufferReadError, encode_uint_var
from aioquic.h3.connection import H3_ALPN, FrameType, H3Connection, encode_frame
from aioquic.h3.events import DataReceived, H3Event, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, HandshakeCompleted, QuicEvent, StreamDataReceived, StreamReset

H3_NO_ERROR = 0x100
H3_REQUEST_REJECTED = 0x10B


PATTERN_BLOCK = bytes((i * 7) & 0xFF for i in range(1024))
PATTERN_SHIFTS = [bytes((byte + shift) & 0xFF for byte in range(256)) for shift in range(256)]


def pattern(count: int, start: int = 0) -> bytes:
    """Bytes ``start ..< start + count`` of the pattern (byte i is i * 7 + (i >> 10), mod 256).

    Built a 1 KiB block at a time (block k is the first block with k added to every byte):
    byte by byte, 10 MB took seconds of CPU, which on a loaded machine delayed a request by
    as long as the rest of its test."""
    first, end = start >> 10, (start + count + 1023) >> 10
    blocks = b"".join(PATTERN_BLOCK.translate(PATTERN_SHIFTS[block & 0xFF]) for block in range(first, end))
    offset = start - (first << 10)
    return blocks[offset:offset + count]


class ServerCounts:
    """What ``--goaway-after`` did, over every connection."""

    goaway_after: Optional[int] = None
    goaways = 0
    rejected = 0
    answered = 0


class ServerProtocol(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.h3: Optional[H3Connection] = None
        self.requests: dict[int, dict] = {}
        self.taken = 0
        # The first request stream this connection will not process, once GOAWAY is sent.
        self.goaway_id: Optional[int] = None

    def reject(self, stream_id: int) -> None:
        ServerCounts.rejected += 1
        self._quic.stop_stream(stream_id, H3_REQUEST_REJECTED)
        self._quic.reset_stream(stream_id, H3_REQUEST_REJECTED)
        self.transmit()

    def quic_event_received(self, event: QuicEvent) -> None:
        if self.h3 is None:
            self.h3 = H3Connection(self._quic)
        for h3_event in self.h3.handle_event(event):
            self.h3_event_received(h3_event)

    def h3_event_received(self, event: H3Event) -> None:
        if self.goaway_id is not None and getattr(event, "stream_id", -1) >= self.goaway_id:
            if isinstance(event, HeadersReceived):
                self.reject(event.stream_id)
            return
        if isinstance(event, HeadersReceived):
            self.taken += 1
            if ServerCounts.goaway_after is not None and self.taken == ServerCounts.goaway_after:
                # This request's stream is the first not processed, so at least one request of
                # each connection is refused, however the client's requests interleave.
                self.goaway_id = event.stream_id
                ServerCounts.goaways += 1
                self._quic.send_stream_data(
                    self.h3._local_control_stream_id, encode_frame(FrameType.GOAWAY, encode_uint_var(self.goaway_id)))
                # Requests past the GOAWAY that already arrived are refused too.
                for stream_id in list(self.requests):
                    if stream_id >= self.goaway_id:
                        del self.requests[stream_id]
                        self.reject(stream_id)
                self.reject(event.stream_id)
                return
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
        ServerCounts.answered += 1
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
    ServerCounts.goaway_after = args.goaway_after
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
    if args.goaway_after is not None:
        print(json.dumps({"goaways": ServerCounts.goaways, "rejected": ServerCounts.rejected, "answered": ServerCounts.answered}), flush=True)
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


class Rejected(Exception):
    """The server did not process the request: it may go again on a new connection."""


class ControlStreamReader:
    """Finds GOAWAY frames on the server's control stream, which aioquic's H3Connection reads
    but discards: the stream's bytes are parsed here as well (type, then frames)."""

    def __init__(self) -> None:
        self.buffers: dict[int, bytearray] = {}
        self.not_control: set[int] = set()
        self.control: set[int] = set()

    def goaways(self, stream_id: int, data: bytes) -> list[int]:
        if stream_id % 4 != 3 or stream_id in self.not_control:
            return []
        buffer = self.buffers.setdefault(stream_id, bytearray())
        buffer.extend(data)
        found = []
        reader = Buffer(data=bytes(buffer))
        try:
            if stream_id not in self.control:
                if reader.pull_uint_var() != 0:
                    self.not_control.add(stream_id)
                    del self.buffers[stream_id]
                    return []
                self.control.add(stream_id)
                del buffer[:reader.tell()]
                reader = Buffer(data=bytes(buffer))
            while True:
                start = reader.tell()
                frame_type = reader.pull_uint_var()
                length = reader.pull_uint_var()
                payload = reader.pull_bytes(length)
                if frame_type == FrameType.GOAWAY:
                    found.append(Buffer(data=payload).pull_uint_var())
                del buffer[:reader.tell()]
                reader = Buffer(data=bytes(buffer))
        except BufferReadError:
            pass
        return found


class LoadProtocol(QuicConnectionProtocol):
    """One connection of the load client: a future per request stream."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.control = ControlStreamReader()
        self.pending: dict[int, asyncio.Future] = {}
        self.status: dict[int, int] = {}
        self.body: dict[int, bytearray] = {}
        self.goaway_id: Optional[int] = None
        self.closed = False

    def usable(self) -> bool:
        return not self.closed and self.goaway_id is None

    def goaway_received(self, goaway_id: int) -> None:
        self.goaway_id = goaway_id if self.goaway_id is None else min(goaway_id, self.goaway_id)
        LoadClient.goaways += 1
        for stream_id, future in list(self.pending.items()):
            if stream_id >= self.goaway_id and not future.done():
                future.set_exception(Rejected())

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, StreamDataReceived):
            for goaway_id in self.control.goaways(event.stream_id, event.data):
                self.goaway_received(goaway_id)
        if isinstance(event, StreamReset):
            future = self.pending.get(event.stream_id)
            if future is not None and not future.done():
                future.set_exception(Rejected() if event.error_code == H3_REQUEST_REJECTED
                                     else ConnectionError(f"stream reset {event.error_code:#x}"))
            return
        if isinstance(event, ConnectionTerminated):
            self.closed = True
            for stream_id, future in self.pending.items():
                if future.done():
                    continue
                unprocessed = self.goaway_id is not None and stream_id >= self.goaway_id
                future.set_exception(Rejected() if unprocessed else ConnectionError(
                    f"connection closed ({event.error_code:#x} {event.reason_phrase}) before stream {stream_id} was answered"))
        for h3_event in self.h3.handle_event(event):
            stream_id = getattr(h3_event, "stream_id", None)
            if isinstance(h3_event, HeadersReceived):
                self.status[stream_id] = int(dict(h3_event.headers).get(b":status", b"0"))
            elif isinstance(h3_event, DataReceived):
                self.body.setdefault(stream_id, bytearray()).extend(h3_event.data)
            if getattr(h3_event, "stream_ended", False):
                future = self.pending.get(stream_id)
                if future is not None and not future.done():
                    future.set_result((self.status.get(stream_id), bytes(self.body.pop(stream_id, b""))))

    async def get(self, headers: list) -> tuple:
        stream_id = self._quic.get_next_available_stream_id()
        future = asyncio.get_running_loop().create_future()
        self.pending[stream_id] = future
        self.h3.send_headers(stream_id, headers, end_stream=True)
        self.transmit()
        try:
            return await future
        finally:
            del self.pending[stream_id]


class LoadClient:
    goaways = 0

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.configuration = QuicConfiguration(alpn_protocols=H3_ALPN, is_client=True, server_name=args.sni or args.host)
        if args.ca:
            self.configuration.load_verify_locations(args.ca)
        self.stack = contextlib.AsyncExitStack()
        self.current: Optional[LoadProtocol] = None
        self.opening = asyncio.Lock()
        self.connections = 0
        self.retried = 0

    async def connection(self) -> LoadProtocol:
        async with self.opening:
            if self.current is None or not self.current.usable():
                self.current = await self.stack.enter_async_context(
                    connect(self.args.host, self.args.port, configuration=self.configuration, create_protocol=LoadProtocol))
                self.connections += 1
            return self.current

    async def request(self) -> tuple:
        headers = [
            (b":method", b"GET"), (b":scheme", b"https"),
            (b":authority", f"{self.args.sni or self.args.host}:{self.args.port}".encode()), (b":path", self.args.path.encode()),
        ]
        for attempt in range(4):
            protocol = await self.connection()
            try:
                return await protocol.get(headers)
            except Rejected:
                if attempt == 3:
                    raise
                self.retried += 1
        raise AssertionError("unreachable")


async def run_load(args: argparse.Namespace) -> int:
    client = LoadClient(args)
    expected = pattern(int(args.path.lstrip("/")))
    slots = asyncio.Semaphore(args.concurrency)
    results = {"completed": 0, "lost": 0, "pattern": True}
    errors: list[str] = []

    async def one() -> None:
        async with slots:
            try:
                status, body = await client.request()
            except (Rejected, ConnectionError, OSError) as error:
                results["lost"] += 1
                errors.append(repr(error))
                return
            results["completed"] += 1
            if status != 200 or body != expected:
                results["pattern"] = False

    async with client.stack:
        try:
            await asyncio.wait_for(asyncio.gather(*(one() for _ in range(args.requests))), timeout=args.timeout)
        except asyncio.TimeoutError:
            errors.append("timeout")
        report = dict(results, ok=results["completed"] == args.requests, retried=client.retried,
                      goaways=LoadClient.goaways, connections=client.connections, errors=errors[:5])
        print(json.dumps(report), flush=True)
        return 0 if report["ok"] else 1


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    server = sub.add_parser("server")
    server.add_argument("--host", default="127.0.0.1")
    server.add_argument("--port", type=int, default=0)
    server.add_argument("--cert", required=True)
    server.add_argument("--key", required=True)
    server.add_argument("--goaway-after", type=int)
    load = sub.add_parser("load")
    load.add_argument("--host", default="127.0.0.1")
    load.add_argument("--port", type=int, required=True)
    load.add_argument("--path", default="/1000")
    load.add_argument("--requests", type=int, default=100)
    load.add_argument("--concurrency", type=int, default=10)
    load.add_argument("--ca")
    load.add_argument("--sni")
    load.add_argument("--timeout", type=float, default=60)
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
    runs = {"server": run_server, "client": run_client, "load": run_load}
    return asyncio.run(runs[args.mode](args))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
