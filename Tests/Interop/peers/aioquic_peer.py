#!/usr/bin/env python3
"""aioquic peer for Braid's interop tests: one server and one client speaking two ALPNs.

Protocols
---------
``perf`` (after draft-banks-quic-performance): on every client-opened bidirectional stream
the client sends the response size it wants as an 8-byte big-endian unsigned integer, then
optionally upload bytes, then FIN. The server checks and discards the upload, and after the
FIN answers with exactly that many bytes and FIN.

``echo``: every client-opened bidirectional stream is echoed byte for byte, FIN included,
and every DATAGRAM frame (RFC 9221) is echoed.

Payload byte ``i`` of every response, upload and echo stream is ``pattern(i)`` below, and
receivers check every byte. With ``--zeros`` the server's perf responses are zero bytes
instead, as other perf servers send them. Echo datagrams carry a 4-byte big-endian sequence number
followed by ``pattern(0)``, ``pattern(1)``, ...

Server
------
    aioquic_peer.py server --host 127.0.0.1 --port 0 --cert server.pem --key server-key.pem
                           [--retry] [--alpn perf,echo] [--max-datagram-frame-size 65535]
                           [--idle-timeout S] [--log-key-updates] [--zeros] [-v]

Prints ``listening <port>`` as its first stdout line, then one JSON line per connection that
ends, and runs until SIGTERM/SIGINT. Session tickets (kept in memory, each usable once) and
0-RTT are enabled. In the JSON line ``error_code``/``reason``/``frame_type`` are what ended
the connection: with ``closed_by: "peer"`` they are the peer's CONNECTION_CLOSE
(``application_close`` tells 0x1d from 0x1c); ``"local"`` means aioquic closed it over a
protocol or TLS error it detected; ``"idle_timeout"`` has ``error_code: null``.
``early_data`` is whether the server accepted 0-RTT; ``early_data_received`` whether stream
data actually arrived before the handshake completed.

Client
------
    aioquic_peer.py client --host H --port P --alpn perf|echo [--ca FILE | --insecure]
                           [--sni NAME] [--session-file F] [--key-update]
                           [--close-code N [--close-reason R]] [--timeout 30] [-v]
      perf: --download N [--upload N] [--streams K]
      echo: --streams K --bytes B [--datagrams M --datagram-size S]

Prints one JSON object (also on failure, with ``ok: false`` and ``error``) and exits 0 only
if every byte and every echo checked out. Exit status: 1 a check failed (or an internal
error), 2 usage, 3 timeout, 4 connection failed or was closed by the peer.

``bytes_sent``/``bytes_received`` count stream payload (not the 8-byte perf header, not
datagrams); ``seconds`` runs from the first request to the last stream's FIN;
``goodput_gbit_s`` is (bytes_sent + bytes_received) * 8 / seconds / 1e9. Datagrams go
after the streams; the ones not echoed within ``--datagram-wait`` seconds are resent, up to
``--datagram-retries`` times, and all M must come back intact.

With ``--session-file`` the client loads a ticket if the file exists and sends its requests
before the handshake completes, so they go as 0-RTT; at the end it saves the newest ticket it
received, with whether the server sent a Retry (a pickled dict). Against a server that sent
Retry last time it holds the requests until the Retry has arrived, because aioquic loses
0-RTT data sent before a Retry; an unexpected Retry makes it re-send the requests on new
streams.

``--key-update`` starts a key update once half of the expected bytes have arrived, then
confirms with a PING that the server answered under the new keys; ``key_update`` reports it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import pickle
import signal
import socket
import ssl
import sys
import traceback
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable

from aioquic.asyncio import QuicConnectionProtocol, connect
from aioquic.asyncio.server import QuicServer
from aioquic.quic import events
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.logger import QuicLogger, QuicLoggerTrace
from aioquic.quic.packet import QuicErrorCode, QuicFrameType
from aioquic.tls import SessionTicket

# --- payload pattern -------------------------------------------------------------------

PERIOD = 65521
# pattern(i) = ((i % 65521) * 2654435761 >> 7) & 0xff; in Python `*` binds tighter than `>>`.
# The table runs one chunk past the period so any <= 64 KiB slice is a plain bytes slice.
_TABLE = bytes(((i % PERIOD) * 2654435761 >> 7) & 0xFF for i in range(PERIOD + 65536))


def pattern(offset: int, length: int) -> bytes:
    """Pattern bytes for transfer offsets [offset, offset + length)."""
    start = offset % PERIOD
    if length <= 65536:
        return _TABLE[start : start + length]
    cycle = _TABLE[start : start + PERIOD]  # one period starting at `start`
    whole, rest = divmod(length, PERIOD)
    return cycle * whole + cycle[:rest]


def first_mismatch(data: bytes, offset: int) -> int | None:
    """Transfer offset of the first byte of `data` (at `offset`) that breaks the pattern."""
    expected = pattern(offset, len(data))
    if data == expected:
        return None
    return offset + next(i for i in range(len(data)) if data[i] != expected[i])


# --- shared helpers ----------------------------------------------------------------------

UDP_BUFFER = 4 * 1024 * 1024  # loopback bursts of datagrams overflow the default 208 KiB
ERROR_CHECK_FAILED = 0x1  # application error code a client closes with after a failed check
STREAM_ERROR_BAD_REQUEST = 0x1  # RESET_STREAM code for a malformed or oversized perf request


def emit(obj: dict[str, Any]) -> None:
    print(json.dumps(obj), flush=True)


def warn(message: str) -> None:
    print(f"aioquic_peer: {message}", file=sys.stderr, flush=True)


def describe_close(event: events.ConnectionTerminated) -> str:
    code = event.error_code
    if event.frame_type is None:
        kind = f"application error {code}"
    elif 0x100 <= code <= 0x1FF:
        kind = f"CRYPTO_ERROR (TLS alert {code - 0x100})"
    else:
        try:
            kind = QuicErrorCode(code).name
        except ValueError:
            kind = f"transport error 0x{code:x}"
        kind += f", frame type 0x{event.frame_type:x}"
    reason = f' "{event.reason_phrase}"' if event.reason_phrase else ""
    return f"{kind} (code {code}){reason}"


def is_idle_timeout(event: events.ConnectionTerminated) -> bool:
    # aioquic's own marker for an idle timeout (QuicConnection.handle_timer).
    return (
        event.error_code == QuicErrorCode.INTERNAL_ERROR
        and event.frame_type == QuicFrameType.PADDING
        and event.reason_phrase == "Idle timeout"
    )


class LocalErrorTap(logging.Handler):
    """Remembers which connections aioquic closed itself because of a protocol error.

    aioquic reports a close it sent and one it received with the same ConnectionTerminated
    event; the only public trace of the former is the warning it logs on the "quic" logger,
    prefixed with "[<original destination CID hex>]". Messages still go to stderr.
    """

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.cids: set[str] = set()
        self._stderr = logging.StreamHandler(sys.stderr)
        self._stderr.setFormatter(logging.Formatter("aioquic: %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.levelno >= logging.WARNING and message.startswith("[") and "]" in message:
            self.cids.add(message[1 : message.index("]")])
        self._stderr.emit(record)

    def closed_locally(self, quic: QuicConnection) -> bool:
        cid = quic.original_destination_connection_id.hex()
        found = cid in self.cids
        self.cids.discard(cid)  # asked once, when the connection has ended
        return found


LOCAL_ERRORS = LocalErrorTap()


class KeyUpdateLogger(QuicLogger):
    """A qlog sink that keeps only 1-RTT key updates, by original destination CID.

    aioquic exposes key phase changes only through its qlog "key_updated" events.
    """

    def __init__(self) -> None:
        super().__init__()
        self.updates: dict[bytes, list[str]] = {}

    def start_trace(self, is_client: bool, odcid: bytes) -> QuicLoggerTrace:
        sink = self.updates.setdefault(odcid, [])
        return _KeyUpdateTrace(is_client=is_client, odcid=odcid, sink=sink)

    def end_trace(self, trace: QuicLoggerTrace) -> None:
        pass  # keep no traces

    def take(self, odcid: bytes) -> list[str]:
        """Triggers ("local_update"/"remote_update") of this connection's send-key updates."""
        return self.updates.pop(odcid, [])


class _KeyUpdateTrace(QuicLoggerTrace):
    def __init__(self, *, is_client: bool, odcid: bytes, sink: list[str]) -> None:
        super().__init__(is_client=is_client, odcid=odcid)
        self._send_key = "client_1rtt_secret" if is_client else "server_1rtt_secret"
        self._sink = sink

    def log_event(self, *, category: str, event: str, data: dict) -> None:
        if (
            event == "key_updated"
            and data.get("key_type") == self._send_key
            and data.get("trigger") in ("local_update", "remote_update")
        ):
            self._sink.append(data["trigger"])


def is_retry(datagram: bytes) -> bool:
    """Whether a datagram is a QUIC v1 or v2 Retry packet (long header, Retry type)."""
    if len(datagram) < 5 or not datagram[0] & 0x80:
        return False
    version = int.from_bytes(datagram[1:5], "big")
    kind = (datagram[0] & 0x30) >> 4
    return (version == 0x00000001 and kind == 3) or (version == 0x6B3343CF and kind == 0)


def enlarge_buffers(transport: asyncio.BaseTransport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None:
        for option in (socket.SO_RCVBUF, socket.SO_SNDBUF):
            try:
                sock.setsockopt(socket.SOL_SOCKET, option, UDP_BUFFER)
            except OSError:
                pass


# --- server ------------------------------------------------------------------------------


@dataclass
class ServerOptions:
    max_response: int
    key_updates: KeyUpdateLogger | None
    zeros: bool = False


@dataclass
class PerfRequest:
    header: bytearray = field(default_factory=bytearray)
    uploaded: int = 0


class TicketStore:
    """In-memory session tickets; each is handed out once (the usual 0-RTT replay guard)."""

    def __init__(self) -> None:
        self._tickets: dict[bytes, SessionTicket] = {}

    def add(self, ticket: SessionTicket) -> None:
        self._tickets[ticket.ticket] = ticket

    def pop(self, label: bytes) -> SessionTicket | None:
        return self._tickets.pop(label, None)


class ServerConnection(QuicConnectionProtocol):
    def __init__(
        self, quic: QuicConnection, stream_handler: Any = None, *, options: ServerOptions
    ) -> None:
        super().__init__(quic, stream_handler)
        self.options = options
        self.alpn: str | None = None
        self.handshake_done = False
        self.early_data = False
        self.early_data_received = False
        self.session_resumed = False
        self.streams_ok = 0
        self.streams_failed = 0
        self.bytes_received = 0
        self.bytes_sent = 0
        self.datagrams_echoed = 0
        self.upload_bytes = 0
        self.upload_intact = True
        self.requests: dict[int, PerfRequest] = {}

    def quic_event_received(self, event: events.QuicEvent) -> None:
        try:
            self._handle(event)
        except Exception as error:  # keep the server alive; fail only this connection
            warn(f"server handler error: {error!r}")
            self._quic.close(
                error_code=QuicErrorCode.INTERNAL_ERROR, reason_phrase="aioquic_peer error"
            )

    def _handle(self, event: events.QuicEvent) -> None:
        if isinstance(event, events.ProtocolNegotiated):
            self.alpn = event.alpn_protocol
        elif isinstance(event, events.HandshakeCompleted):
            self.handshake_done = True
            self.alpn = event.alpn_protocol
            self.early_data = event.early_data_accepted
            self.session_resumed = event.session_resumed
        elif isinstance(event, events.StreamDataReceived):
            if not self.handshake_done:
                self.early_data_received = True  # only 0-RTT packets can carry it this early
            self.bytes_received += len(event.data)
            if event.stream_id % 4 != 0:
                return  # only client-initiated bidirectional streams carry requests
            if self.alpn == "perf":
                self._perf_data(event.stream_id, event.data, event.end_stream)
            elif self.alpn == "echo":
                self._quic.send_stream_data(event.stream_id, event.data, event.end_stream)
                self.bytes_sent += len(event.data)
                if event.end_stream:
                    self.streams_ok += 1
        elif isinstance(event, events.DatagramFrameReceived):
            if self.alpn == "echo":
                self._quic.send_datagram_frame(event.data)
                self.datagrams_echoed += 1
        elif isinstance(event, events.StreamReset):
            self.streams_failed += 1
            self.requests.pop(event.stream_id, None)
            if self.alpn == "echo" and event.stream_id % 4 == 0:
                self._quic.reset_stream(event.stream_id, event.error_code)  # mirror it
        elif isinstance(event, events.ConnectionTerminated):
            self._report(event)

    def _perf_data(self, stream_id: int, data: bytes, fin: bool) -> None:
        request = self.requests.setdefault(stream_id, PerfRequest())
        missing = 8 - len(request.header)
        if missing > 0:
            request.header += data[:missing]
            data = data[missing:]
        if data:
            if first_mismatch(data, request.uploaded) is not None:
                self.upload_intact = False
            request.uploaded += len(data)
            self.upload_bytes += len(data)
        if not fin:
            return
        del self.requests[stream_id]
        size = int.from_bytes(request.header, "big")
        if len(request.header) < 8 or size > self.options.max_response:
            self.streams_failed += 1
            self._quic.reset_stream(stream_id, STREAM_ERROR_BAD_REQUEST)
            return
        # Queued whole: aioquic has no "writable" signal, so a response costs its size in memory.
        body = bytes(size) if self.options.zeros else pattern(0, size)
        self._quic.send_stream_data(stream_id, body, end_stream=True)
        self.bytes_sent += size
        self.streams_ok += 1

    def _report(self, event: events.ConnectionTerminated) -> None:
        if is_idle_timeout(event):
            closed_by = "idle_timeout"
        elif LOCAL_ERRORS.closed_locally(self._quic):
            closed_by = "local"
        else:
            closed_by = "peer"
        peer = self._quic.get_peer_address()
        line: dict[str, Any] = {
            "event": "closed",
            "alpn": self.alpn,
            "error_code": None if closed_by == "idle_timeout" else event.error_code,
            "reason": "idle timeout" if closed_by == "idle_timeout" else event.reason_phrase,
            "frame_type": event.frame_type,
            "application_close": closed_by == "peer" and event.frame_type is None,
            "closed_by": closed_by,
            "streams_ok": self.streams_ok,
            "streams_failed": self.streams_failed,
            "upload_intact": self.upload_intact if self.upload_bytes else None,
            "upload_bytes": self.upload_bytes,
            "early_data": self.early_data,
            "early_data_received": self.early_data_received,
            "session_resumed": self.session_resumed,
            "bytes_received": self.bytes_received,
            "bytes_sent": self.bytes_sent,
            "datagrams_echoed": self.datagrams_echoed,
            "peer": format_address(peer) if peer else None,
        }
        if self.options.key_updates is not None:
            triggers = self.options.key_updates.take(self._quic.original_destination_connection_id)
            line["key_updates_local"] = triggers.count("local_update")
            line["key_updates_remote"] = triggers.count("remote_update")
        emit(line)


def format_address(address: Any) -> str:
    host = str(address[0])
    return f"[{host}]:{address[1]}" if ":" in host else f"{host}:{address[1]}"


def bind_udp(host: str, port: int) -> socket.socket:
    family, _, _, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_DGRAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        if family == socket.AF_INET6 and host in ("::", ""):
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        for option in (socket.SO_RCVBUF, socket.SO_SNDBUF):
            sock.setsockopt(socket.SOL_SOCKET, option, UDP_BUFFER)
        sock.bind(address)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


async def run_server(args: argparse.Namespace) -> int:
    configuration = QuicConfiguration(
        is_client=False,
        alpn_protocols=[name for name in args.alpn.split(",") if name],
        max_datagram_frame_size=args.max_datagram_frame_size or None,
        max_datagram_size=args.max_datagram_size,
        idle_timeout=args.idle_timeout,
    )
    configuration.load_cert_chain(args.cert, args.key)
    key_updates = KeyUpdateLogger() if args.log_key_updates else None
    configuration.quic_logger = key_updates
    options = ServerOptions(max_response=args.max_response, key_updates=key_updates, zeros=args.zeros)
    tickets = TicketStore()

    loop = asyncio.get_running_loop()
    sock = bind_udp(args.host, args.port)
    # QuicServer rather than serve(): serve() binds its own socket and does not say which
    # port it got; this way the socket (and its buffer sizes) are ours.
    _, server = await loop.create_datagram_endpoint(
        lambda: QuicServer(
            configuration=configuration,
            create_protocol=partial(ServerConnection, options=options),
            session_ticket_fetcher=tickets.pop,
            session_ticket_handler=tickets.add,
            retry=args.retry,
        ),
        sock=sock,
    )
    print(f"listening {sock.getsockname()[1]}", flush=True)

    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    server.close()  # sends CONNECTION_CLOSE to connections still open
    return 0


# --- client ------------------------------------------------------------------------------


class CheckFailed(Exception):
    """Received data, an echo or the negotiated protocol was not what was expected."""


class PeerClosed(Exception):
    """The connection ended before the client was done."""


def _quiet(future: asyncio.Future[Any]) -> None:
    # Futures that may fail without anyone awaiting them any more.
    future.add_done_callback(lambda f: f.cancelled() or f.exception())


class ClientConnection(QuicConnectionProtocol):
    """Client machinery shared by both protocols; subclasses do the application part."""

    def __init__(
        self, quic: QuicConnection, stream_handler: Any = None, *, args: argparse.Namespace
    ) -> None:
        super().__init__(quic, stream_handler)
        loop = asyncio.get_running_loop()
        self.args = args
        self.handshake: asyncio.Future[events.HandshakeCompleted] = loop.create_future()
        self.transfer: asyncio.Future[None] = loop.create_future()
        self.first_datagram: asyncio.Future[None] = loop.create_future()
        # failed with PeerClosed when the connection ends early
        self.waiters: list[asyncio.Future[Any]] = [
            self.handshake, self.transfer, self.first_datagram
        ]
        for future in self.waiters:
            _quiet(future)
        self.udp_datagrams_received = 0
        self.saw_retry = False
        self.resent_after_retry = False
        self.abandoned: set[int] = set()  # streams whose requests were lost to a Retry
        self.terminated: events.ConnectionTerminated | None = None
        self.closing = False
        self.bytes_sent = 0
        self.bytes_received = 0
        self.expected_bytes = 0  # stream payload the client expects back
        self.stream_size = 0  # ... on each stream
        self.received: dict[int, int] = {}  # open streams: bytes received so far
        self.streams_ok = 0
        self.key_update_requested = False
        self.started_at: float | None = None
        self.finished_at: float | None = None

    # transport hooks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        enlarge_buffers(transport)

    def datagram_received(self, data: bytes | str, addr: Any) -> None:
        self.udp_datagrams_received += 1
        retry = self.udp_datagrams_received == 1 and is_retry(bytes(data))
        super().datagram_received(data, addr)
        if retry:
            self.saw_retry = True
            if self.started_at is not None and not self.transfer.done():
                # aioquic (1.7.2) rebuilds its packet spaces on a Retry, so the 0-RTT
                # packets sent before it are never declared lost and their stream data is
                # never resent. Ask again on new streams, in 0-RTT after the new Initial;
                # anything that still arrives on the old ones is ignored.
                self.abandoned.update(self.received)
                self.bytes_sent = 0
                self.resent_after_retry = True
                self.start()
        if not self.first_datagram.done():
            self.first_datagram.set_result(None)  # after aioquic has acted on it

    # events

    def quic_event_received(self, event: events.QuicEvent) -> None:
        if isinstance(event, events.HandshakeCompleted):
            if not self.handshake.done():
                self.handshake.set_result(event)
        elif isinstance(event, events.StreamDataReceived):
            if event.stream_id in self.abandoned:
                return
            self.bytes_received += len(event.data)
            self.on_stream_data(event.stream_id, event.data, event.end_stream)
            self.maybe_update_keys()
        elif isinstance(event, events.DatagramFrameReceived):
            self.on_datagram(event.data)
        elif isinstance(event, events.StreamReset):
            self.fail(f"stream {event.stream_id} reset by the server (code {event.error_code})")
        elif isinstance(event, events.StopSendingReceived):
            self.fail(f"server sent STOP_SENDING on stream {event.stream_id}")
        elif isinstance(event, events.ConnectionTerminated):
            self.terminated = event
            if not self.closing:
                error = PeerClosed(self.describe_termination(event))
                for waiter in self.waiters:
                    if not waiter.done():
                        waiter.set_exception(error)

    def describe_termination(self, event: events.ConnectionTerminated) -> str:
        if is_idle_timeout(event):
            return "connection idle timeout"
        if LOCAL_ERRORS.closed_locally(self._quic):
            return f"aioquic closed the connection: {describe_close(event)}"
        return f"connection closed by the server: {describe_close(event)}"

    def fail(self, message: str) -> None:
        if not self.transfer.done():
            self.transfer.set_exception(CheckFailed(message))

    def maybe_update_keys(self) -> None:
        """With --key-update, start one once half of the expected bytes are in."""
        if (
            self.args.key_update
            and not self.key_update_requested
            and self.started_at is not None
            and self.bytes_received * 2 >= self.expected_bytes
        ):
            self.key_update_requested = True
            self.request_key_update()  # aioquic defers it until the handshake is confirmed

    def transfer_finished(self) -> None:
        if not self.transfer.done():
            self.finished_at = self._loop.time()
            self.transfer.set_result(None)

    # application part

    def start(self) -> None:
        """Sends the requests (perf) or payloads (echo) on new streams."""
        raise NotImplementedError

    def on_datagram(self, data: bytes) -> None:
        self.fail("unexpected DATAGRAM frame from the server")

    async def after_streams(self) -> None:
        pass

    def result(self) -> dict[str, Any]:
        return {}

    # stream bookkeeping shared by perf and echo: every stream expects `size` pattern bytes

    def open_streams(self, count: int, expected: int, send: Callable[[int], None]) -> None:
        """Opens `count` streams, each expecting `expected` pattern bytes back.

        `send` writes a stream's request; aioquic creates the stream on that first write,
        and only then moves on to the next stream ID.
        """
        self.expected_bytes = count * expected
        self.received = {}
        self.stream_size = expected
        for _ in range(count):
            stream_id = self._quic.get_next_available_stream_id()
            self.received[stream_id] = 0
            send(stream_id)
        if count == 0:
            self.transfer_finished()
        self.transmit()

    def on_stream_data(self, stream_id: int, data: bytes, fin: bool) -> None:
        offset = self.received.get(stream_id)
        if offset is None:
            self.fail(f"data on unexpected stream {stream_id}")
            return
        bad = first_mismatch(data, offset) if data else None
        if bad is not None:
            self.fail(f"stream {stream_id}: wrong byte at offset {bad}")
            return
        offset += len(data)
        if offset > self.stream_size:
            self.fail(f"stream {stream_id}: more than {self.stream_size} bytes")
            return
        self.received[stream_id] = offset
        if fin:
            if offset != self.stream_size:
                self.fail(f"stream {stream_id}: FIN after {offset} of {self.stream_size} bytes")
                return
            del self.received[stream_id]
            self.streams_ok += 1
            if not self.received:
                self.transfer_finished()


class PerfClient(ClientConnection):
    def start(self) -> None:
        args = self.args
        header = args.download.to_bytes(8, "big")
        upload = pattern(0, args.upload)

        def send(stream_id: int) -> None:
            self._quic.send_stream_data(stream_id, header)
            self._quic.send_stream_data(stream_id, upload, end_stream=True)
            self.bytes_sent += len(upload)

        self.open_streams(args.streams, args.download, send)


class EchoClient(ClientConnection):
    def __init__(self, *pargs: Any, **kwargs: Any) -> None:
        super().__init__(*pargs, **kwargs)
        self.datagrams_sent = 0
        self.datagrams_retransmitted = 0
        self.datagrams_echoed: set[int] = set()
        self.datagrams_all: asyncio.Future[None] = self._loop.create_future()
        _quiet(self.datagrams_all)
        self.waiters.append(self.datagrams_all)
        self.datagram_body = pattern(0, max(self.args.datagram_size - 4, 0))

    def start(self) -> None:
        payload = pattern(0, self.args.bytes)

        def send(stream_id: int) -> None:
            self._quic.send_stream_data(stream_id, payload, end_stream=True)
            self.bytes_sent += len(payload)

        self.open_streams(self.args.streams, self.args.bytes, send)

    def on_datagram(self, data: bytes) -> None:
        sequence = int.from_bytes(data[:4], "big")
        if (
            len(data) != self.args.datagram_size
            or sequence >= self.args.datagrams
            or data[4:] != self.datagram_body
        ):
            if not self.datagrams_all.done():
                self.datagrams_all.set_exception(
                    CheckFailed(f"echoed datagram {sequence} ({len(data)} bytes) is corrupt")
                )
            return
        self.datagrams_echoed.add(sequence)
        if len(self.datagrams_echoed) == self.args.datagrams and not self.datagrams_all.done():
            self.datagrams_all.set_result(None)

    async def after_streams(self) -> None:
        """Send the datagrams; resend the ones not echoed in time (loss is allowed)."""
        count = self.args.datagrams
        if count == 0:
            return
        missing = list(range(count))
        for attempt in range(1 + self.args.datagram_retries):
            for sequence in missing:
                self._quic.send_datagram_frame(sequence.to_bytes(4, "big") + self.datagram_body)
            self.datagrams_sent += len(missing)
            if attempt:
                self.datagrams_retransmitted += len(missing)
            self.transmit()
            try:
                await asyncio.wait_for(asyncio.shield(self.datagrams_all), self.args.datagram_wait)
            except asyncio.TimeoutError:
                pass
            if self.datagrams_all.done():
                self.datagrams_all.result()  # raises CheckFailed/PeerClosed
                return
            missing = [s for s in range(count) if s not in self.datagrams_echoed]
        raise CheckFailed(
            f"{len(missing)} of {count} datagrams never echoed after "
            f"{self.args.datagram_retries} resends"
        )

    def result(self) -> dict[str, Any]:
        return {
            "datagrams_sent": self.datagrams_sent,
            "datagrams_received": len(self.datagrams_echoed),
            "datagrams_retransmitted": self.datagrams_retransmitted,
        }


@dataclass
class ClientRun:
    """One client run; keeps what is known so far so a timeout can still report it."""

    args: argparse.Namespace
    stage: str = "starting"
    connection: ClientConnection | None = None
    handshake_ms: float | None = None
    early_data: bool = False
    early_data_attempted: bool = False
    session_resumed: bool = False
    alpn: str | None = None
    key_update: bool = False
    key_updates_remote: int = 0
    expect_retry: bool = False
    ticket: SessionTicket | None = None
    ticket_event: asyncio.Event = field(default_factory=asyncio.Event)

    def on_ticket(self, ticket: SessionTicket) -> None:
        self.ticket = ticket
        self.ticket_event.set()

    def configuration(self) -> QuicConfiguration:
        args = self.args
        configuration = QuicConfiguration(
            is_client=True,
            alpn_protocols=[args.alpn],
            server_name=args.sni or args.host,
            max_datagram_frame_size=65535,
            max_datagram_size=args.max_datagram_size,
            idle_timeout=args.idle_timeout,
        )
        if args.insecure:
            configuration.verify_mode = ssl.CERT_NONE
        elif args.ca:
            configuration.load_verify_locations(cafile=args.ca)
        if args.key_update:
            configuration.quic_logger = KeyUpdateLogger()
        if args.session_file and os.path.exists(args.session_file):
            try:
                with open(args.session_file, "rb") as file:
                    saved = pickle.load(file)
                ticket = saved["ticket"]
                if not isinstance(ticket, SessionTicket):
                    raise TypeError(type(ticket).__name__)
                configuration.session_ticket = ticket
                self.expect_retry = bool(saved.get("retry"))
                # aioquic only sends 0-RTT for a valid ticket of the same server name that
                # allows early data (QuicConnection._initialize).
                self.early_data_attempted = (
                    ticket.is_valid
                    and ticket.server_name == configuration.server_name
                    and ticket.max_early_data_size is not None
                )
            except Exception as error:
                warn(f"ignoring session file {args.session_file}: {error!r}")
        return configuration

    async def run(self) -> None:
        args = self.args
        configuration = self.configuration()
        protocol_class = PerfClient if args.alpn == "perf" else EchoClient

        def create_protocol(quic: QuicConnection, stream_handler: Any = None) -> ClientConnection:
            self.connection = protocol_class(quic, stream_handler, args=args)
            return self.connection

        self.stage = "resolving the server address"
        started = asyncio.get_running_loop().time()
        async with connect(
            args.host,
            args.port,
            configuration=configuration,
            create_protocol=create_protocol,
            session_ticket_handler=self.on_ticket,
            wait_connected=False,  # lets the requests go out as 0-RTT
        ) as connection:
            assert isinstance(connection, ClientConnection)
            try:
                await self.exchange(connection, configuration, started)
            except CheckFailed as error:
                connection.closing = True
                connection.close(ERROR_CHECK_FAILED, str(error)[:200])
                raise
            self.stage = "closing"
            connection.closing = True
            connection.close(args.close_code, args.close_reason)

    async def exchange(
        self, connection: ClientConnection, configuration: QuicConfiguration, started: float
    ) -> None:
        args = self.args
        loop = asyncio.get_running_loop()
        if self.early_data_attempted:
            if self.expect_retry:
                # 0-RTT sent before a Retry is lost (see ClientConnection), so send the
                # ClientHello alone and the requests after the server's first answer.
                connection.transmit()
                self.stage = "waiting for the server's Retry"
                await connection.first_datagram
            connection.started_at = loop.time()
            connection.start()  # before the handshake: sent in 0-RTT packets
            connection.maybe_update_keys()
        connection.transmit()
        self.stage = "waiting for the handshake"
        handshake = await connection.handshake
        self.handshake_ms = (loop.time() - started) * 1000
        self.early_data = handshake.early_data_accepted
        self.session_resumed = handshake.session_resumed
        self.alpn = handshake.alpn_protocol
        if self.alpn != args.alpn:
            raise CheckFailed(f"server negotiated ALPN {self.alpn!r}, not {args.alpn!r}")
        if connection.started_at is None:
            connection.started_at = loop.time()
            connection.start()
            connection.maybe_update_keys()

        self.stage = "transferring"
        await connection.transfer
        self.stage = "exchanging datagrams"
        await connection.after_streams()
        if args.key_update:
            self.stage = "confirming the key update"
            await self.confirm_key_update(connection, configuration)
        if args.session_file and self.ticket is None:
            self.stage = "waiting for a session ticket"
            try:
                await asyncio.wait_for(self.ticket_event.wait(), 1.0)
            except asyncio.TimeoutError:
                warn("the server sent no session ticket")

    async def confirm_key_update(
        self, connection: ClientConnection, configuration: QuicConfiguration
    ) -> None:
        # A PING sent now goes out under the new keys; once aioquic has switched it can
        # only decrypt packets of the new phase, so an acknowledged PING means the server
        # followed the update.
        try:
            await asyncio.wait_for(connection.ping(), 5.0)
        except asyncio.TimeoutError:
            raise CheckFailed("a PING sent after the key update was not acknowledged in 5 s")
        logger = configuration.quic_logger
        assert isinstance(logger, KeyUpdateLogger)
        triggers = logger.take(connection._quic.original_destination_connection_id)
        self.key_update = "local_update" in triggers
        self.key_updates_remote = triggers.count("remote_update")
        if not self.key_update:
            raise CheckFailed("key update requested but never took effect")

    def report(self, error: str | None) -> dict[str, Any]:
        connection = self.connection
        seconds = 0.0
        if connection and connection.started_at is not None and connection.finished_at:
            seconds = connection.finished_at - connection.started_at
        sent = connection.bytes_sent if connection else 0
        received = connection.bytes_received if connection else 0
        result: dict[str, Any] = {
            "alpn": self.alpn,
            "handshake_ms": round(self.handshake_ms, 3) if self.handshake_ms is not None else None,
            "bytes_sent": sent,
            "bytes_received": received,
            "seconds": round(seconds, 6),
            "goodput_gbit_s": round((sent + received) * 8 / seconds / 1e9, 6) if seconds else 0.0,
            "streams_ok": connection.streams_ok if connection else 0,
            "datagrams_sent": 0,
            "datagrams_received": 0,
            "early_data": self.early_data,
            "early_data_attempted": self.early_data_attempted,
            "session_resumed": self.session_resumed,
            "key_update": self.key_update,
            "key_updates_remote": self.key_updates_remote,
            "retry": connection.saw_retry if connection else False,
            "requests_resent_after_retry": connection.resent_after_retry if connection else False,
            "ticket_saved": False,
        }
        if connection:
            result.update(connection.result())
        result["ok"] = error is None
        if error is not None:
            result["error"] = error
        return result

    def save_ticket(self) -> bool:
        path = self.args.session_file
        if not path or self.ticket is None:
            return False
        temporary = f"{path}.tmp{os.getpid()}"
        retry = self.connection.saw_retry if self.connection else False
        with open(temporary, "wb") as file:
            pickle.dump({"ticket": self.ticket, "retry": retry}, file)
        os.replace(temporary, path)
        return True


async def run_client(args: argparse.Namespace) -> int:
    run = ClientRun(args)
    status, error = 0, None
    try:
        await asyncio.wait_for(run.run(), args.timeout)
    except asyncio.TimeoutError:
        status, error = 3, f"timed out after {args.timeout:g} s while {run.stage}"
        connection = run.connection
        if connection is None or connection.udp_datagrams_received == 0:
            error += f" (no UDP datagram came back from {args.host}:{args.port})"
        elif connection.expected_bytes:
            error += f" ({connection.bytes_received} of {connection.expected_bytes} bytes received)"
    except CheckFailed as failure:
        status, error = 1, f"check failed: {failure}"
    except (PeerClosed, ConnectionError, OSError) as failure:
        status, error = 4, f"{failure or type(failure).__name__} (while {run.stage})"
    except Exception as failure:  # a bug here or in aioquic: still report, then explain
        traceback.print_exc()
        status, error = 1, f"internal error while {run.stage}: {failure!r}"
    result = run.report(error)
    try:
        result["ticket_saved"] = run.save_ticket()
    except OSError as failure:
        warn(f"could not save the session ticket: {failure}")
    emit(result)
    if error is not None:
        warn(error)
    return status


# --- command line ------------------------------------------------------------------------


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    def common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--host", default="127.0.0.1")
        sub.add_argument("--idle-timeout", type=float, default=30.0, help="seconds")
        sub.add_argument(
            "--max-datagram-size", type=int, default=1200,
            help="largest UDP payload aioquic sends (it does no PMTU discovery)",
        )
        sub.add_argument("-v", "--verbose", action="store_true", help="aioquic logs on stderr")

    server = commands.add_parser("server", help="serve perf and echo")
    common(server)
    server.add_argument("--port", type=int, default=0)
    server.add_argument("--cert", required=True)
    server.add_argument("--key", required=True)
    server.add_argument("--retry", action="store_true", help="validate addresses with Retry")
    server.add_argument("--alpn", default="perf,echo", help="comma-separated ALPNs")
    server.add_argument(
        "--max-datagram-frame-size", type=int, default=65535,
        help="transport parameter; 0 disables DATAGRAM frames",
    )
    server.add_argument(
        "--max-response", type=int, default=1 << 31,
        help="largest perf response served (responses are buffered whole)",
    )
    server.add_argument(
        "--zeros", action="store_true",
        help="perf responses are zero bytes, as other perf servers send, instead of the pattern",
    )
    server.add_argument(
        "--log-key-updates", action="store_true",
        help="add key update counts to each JSON line (costs some throughput)",
    )

    client = commands.add_parser("client", help="run one perf or echo exchange")
    common(client)
    client.add_argument("--port", type=int, required=True)
    client.add_argument("--alpn", choices=("perf", "echo"), required=True)
    trust = client.add_mutually_exclusive_group()
    trust.add_argument("--ca", help="PEM file of trusted CAs")
    trust.add_argument("--insecure", action="store_true", help="skip certificate checks")
    client.add_argument("--sni", help="server name to send and verify (default: --host)")
    client.add_argument("--streams", type=int, default=1)
    client.add_argument("--download", type=int, default=0, help="perf: bytes per stream")
    client.add_argument("--upload", type=int, default=0, help="perf: bytes per stream")
    client.add_argument("--bytes", type=int, default=1000, help="echo: bytes per stream")
    client.add_argument("--datagrams", type=int, default=0, help="echo: datagrams to send")
    client.add_argument("--datagram-size", type=int, default=1000)
    client.add_argument("--datagram-retries", type=int, default=5)
    client.add_argument("--datagram-wait", type=float, default=1.0, help="seconds per round")
    client.add_argument("--session-file")
    client.add_argument("--key-update", action="store_true")
    client.add_argument("--close-code", type=int, default=0)
    client.add_argument("--close-reason", default="")
    client.add_argument("--timeout", type=float, default=30.0)

    args = parser.parse_args(argv)
    if args.command == "client":
        if min(args.streams, args.download, args.upload, args.bytes, args.datagrams) < 0:
            parser.error("counts and sizes must not be negative")
        # aioquic puts a DATAGRAM frame in a single packet and never splits it; one that
        # does not fit (short header up to 1+20+4, AEAD tag 16, frame header 3) would wedge
        # its datagram queue for good.
        limit = args.max_datagram_size - 44
        if args.datagrams and not 4 <= args.datagram_size <= limit:
            parser.error(f"--datagram-size must be 4 to {limit} (--max-datagram-size - 44)")
    return args


def main(argv: list[str]) -> int:
    args = parse_arguments(argv)
    quic_logger = logging.getLogger("quic")
    quic_logger.addHandler(LOCAL_ERRORS)
    quic_logger.propagate = False
    if args.verbose:
        quic_logger.setLevel(logging.INFO)
        LOCAL_ERRORS.setLevel(logging.INFO)
    try:
        return asyncio.run(run_server(args) if args.command == "server" else run_client(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
