#!/usr/bin/env python3
"""A hostile QUIC client on aioquic: it breaks the server's limits on purpose and reports how
the server closed the connection.

    hostile_peer.py --host H --port P --alpn ALPN (--ca FILE | --insecure) [--sni NAME]
                    (--violate streams|stream-data|connection-data|stream-state|final-size
                     | --flood N [--sockets 16] [--rate R]
                     | --starve N [--size BYTES] [--window BYTES] [--hold SECONDS]
                     | --gaps N [--connections K] [--hold SECONDS])
                    [--timeout 10] [-v]

``--flood N`` sends the first flight (a real ClientHello in a decryptable Initial) of N new
connections, each with fresh connection IDs, round-robin from ``--sockets`` UDP sockets (so
from as many ports), and never answers: every handshake the server starts stays half-open
until the server gives up on it. It reads the server's datagrams until every connection has
had one (a Retry or the server's first flight), within ``--timeout``, then prints one JSON
object (``flood``, ``datagrams`` sent, ``replies`` and ``retries`` among the server's
datagrams read, ``unanswered`` connections) and exits 0. With
``--rate R`` it sends one real ClientHello to a fresh connection ID per Initial, encrypted
here with that ID's keys (far faster than a new aioquic connection each), R a second (0: as
fast as it goes), and also reports ``seconds`` and the ``rate`` reached.

``--starve N`` completes a handshake (ALPN ``perf`` or ``echo``), opens N bidirectional
streams, and asks for ``--size`` bytes on each (perf: the 8-byte big-endian size and FIN;
echo: that many zero bytes, no FIN, so the server's echoes pile up), advertising windows of
``--window`` bytes (stream and connection) and never raising them: the server can deliver
at most one window, and everything else it is willing to queue stays queued. It prints
``{"starving": N, ...}`` once the requests are acknowledged, keeps the connection alive
(acknowledging, granting nothing) for ``--hold`` seconds or until SIGTERM, then prints
``{"starve": N, "received": BYTES, ...}`` and exits 0 (4: the handshake failed).

``--gaps N`` opens ``--connections`` connections (1 by default, one after another), and on
each N bidirectional streams, and sends on every stream all of the server's stream window but
its first byte (offsets 1 to the window, each stream's share of the connection window when
that is smaller), and never the first: the server's QUIC stack can hand none of it to the
application and keeps it all in its reassembly buffers. It prints
``{"holding": K, ...}`` once the bytes are acknowledged (or after ``--timeout``), keeps the
connections alive for ``--hold`` seconds or until SIGTERM, then prints
``{"gaps": N, "connections": K, "closed_by_peer": C, "reasons": [...], "failed": F}`` (C
connections the server closed, with their reason phrases; F handshakes that failed, a full
server refusing them) and exits 0.

After the handshake the client overrides aioquic's own record of the server's limits (private
attributes of ``QuicConnection``: aioquic never sends past a limit it knows), then:

``streams``
    opens one bidirectional stream more than the server's MAX_STREAMS allows, one byte on
    each (RFC 9000 §4.6: STREAM_LIMIT_ERROR, 0x4);
``stream-data``
    sends 1,000 bytes past the server's initial window of one stream (§4.1:
    FLOW_CONTROL_ERROR, 0x3);
``connection-data``
    sends on several streams, each within its own window, more than the connection's window
    (§4.1: FLOW_CONTROL_ERROR, 0x3);
``stream-state``
    sends a STREAM frame on stream 3, the server's own unidirectional stream, which it never
    opened and could not receive on anyway (§19.8: STREAM_STATE_ERROR, 0x5);
``final-size``
    sends 100 bytes on a stream, waits for their acknowledgement, then resets the stream
    declaring a final size of 10 (§4.5: FINAL_SIZE_ERROR, 0x6).

No stream gets a FIN, so the server has no reason to grant more credit; point it at a server
whose application does not read (or reads slowly), or credit may come back before the excess.

Prints one JSON object: ``limits`` (what the server advertised), ``closed_by`` (``"peer"``:
the server's CONNECTION_CLOSE; ``"idle_timeout"``; ``"local"``: aioquic closed it itself;
``"timeout"``: nothing within --timeout), ``error_code``, ``frame_type`` (null for an
application close), ``reason``, ``close_ms`` (from the violating write to the close's
arrival) and ``pto_ms`` (the client's probe timeout then, for comparison).

Exit status: 0 the server closed the connection, 1 it did not (or an internal error), 2 usage,
4 the handshake failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import socket
import ssl
import sys
import time
from typing import Any

from aioquic.asyncio import QuicConnectionProtocol, connect
from aioquic.buffer import Buffer
from aioquic.quic import events
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.crypto import CryptoPair
from aioquic.quic.packet import pull_quic_header
from aioquic.quic.stream import QuicStream

UNLIMITED = 1 << 60

# aioquic hands a received CONNECTION_CLOSE and one it sends itself to the application as the
# same ConnectionTerminated event; wrapping the frame handler tells them apart.
_received_close = QuicConnection._handle_connection_close_frame


def _note_received_close(self: QuicConnection, context: Any, frame_type: int, buf: Any) -> None:
    self.hostile_close_received_at = time.monotonic()  # type: ignore[attr-defined]
    _received_close(self, context, frame_type, buf)


QuicConnection._handle_connection_close_frame = _note_received_close  # type: ignore[method-assign]


class HostileClient(QuicConnectionProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.terminated: asyncio.Future[events.ConnectionTerminated] = asyncio.get_running_loop().create_future()

    def quic_event_received(self, event: events.QuicEvent) -> None:
        if isinstance(event, events.ConnectionTerminated) and not self.terminated.done():
            self.terminated.set_result(event)


def advertised_limits(quic: QuicConnection) -> dict[str, int]:
    return {
        "streams": quic._remote_max_streams_bidi,
        "stream_window": quic._remote_max_stream_data_bidi_remote,
        "connection_window": quic._remote_max_data,
    }


async def prepare(client: QuicConnectionProtocol, mode: str, timeout: float) -> Any:
    """What a violation needs in place first: for final-size, 100 acknowledged bytes."""
    if mode != "final-size":
        return None
    quic = client._quic
    stream_id = quic.get_next_available_stream_id()
    quic.send_stream_data(stream_id, bytes(100))
    client.transmit()
    sender = quic._streams[stream_id].sender
    deadline = time.monotonic() + timeout
    while sender._buffer_start < 100:
        if time.monotonic() > deadline:
            raise SystemExit("final-size: the server did not acknowledge the first 100 bytes")
        await asyncio.sleep(0.005)
    return stream_id


def violate(quic: QuicConnection, mode: str, limits: dict[str, int], prepared: Any) -> None:
    """Queues frames that break `limits`; the caller transmits them."""
    if mode == "streams":
        quic._remote_max_streams_bidi = UNLIMITED
        for _ in range(limits["streams"] + 1):
            quic.send_stream_data(quic.get_next_available_stream_id(), b"x")
    elif mode == "stream-data":
        quic._remote_max_stream_data_bidi_remote = UNLIMITED
        quic._remote_max_data = UNLIMITED
        quic.send_stream_data(quic.get_next_available_stream_id(), bytes(limits["stream_window"] + 1000))
    elif mode == "connection-data":
        window = limits["stream_window"]
        needed = limits["connection_window"] // window + 1
        if needed > limits["streams"] or window == 0:
            raise SystemExit(
                f"connection-data needs {needed} streams of {window} bytes to pass the connection window of "
                f"{limits['connection_window']}, and the server allows {limits['streams']}: lower its windows"
            )
        quic._remote_max_data = UNLIMITED
        for _ in range(needed):
            quic.send_stream_data(quic.get_next_available_stream_id(), bytes(window))
    elif mode == "stream-state":
        # aioquic refuses to send on a peer's stream; the stream is slipped into its tables.
        stream = QuicStream(stream_id=3, max_stream_data_remote=UNLIMITED, readable=False)
        quic._streams[3] = stream
        quic._streams_queue.append(stream)
        stream.sender.write(b"x")
    elif mode == "final-size":
        quic.reset_stream(prepared, 0)
        quic._streams[prepared].sender.highest_offset = 10  # the RESET_STREAM's final size
    else:
        raise SystemExit(f"unknown violation {mode}")


async def run(args: argparse.Namespace) -> int:
    configuration = QuicConfiguration(is_client=True, alpn_protocols=[args.alpn], server_name=args.sni or args.host)
    configuration.idle_timeout = args.timeout + 5
    if args.insecure:
        configuration.verify_mode = ssl.CERT_NONE
    else:
        configuration.load_verify_locations(args.ca)
    report: dict[str, Any] = {"violate": args.violate}
    try:
        async with connect(args.host, args.port, configuration=configuration, create_protocol=HostileClient) as client:
            assert isinstance(client, HostileClient)
            quic = client._quic
            limits = advertised_limits(quic)
            report["limits"] = limits
            prepared = await prepare(client, args.violate, args.timeout)
            violate(quic, args.violate, limits, prepared)
            report["pto_ms"] = round(quic._loss.get_probe_timeout() * 1000, 3)
            sent_at = time.monotonic()
            client.transmit()
            try:
                event = await asyncio.wait_for(asyncio.shield(client.terminated), args.timeout)
            except asyncio.TimeoutError:
                report.update(closed_by="timeout", error_code=None, frame_type=None, reason=None)
                print(json.dumps(report), flush=True)
                return 1
            received_at = getattr(quic, "hostile_close_received_at", None)
            if received_at is not None:
                closed_by = "peer"
            elif event.reason_phrase == "Idle timeout":
                closed_by = "idle_timeout"
            else:
                closed_by = "local"
            report.update(
                closed_by=closed_by,
                error_code=event.error_code,
                frame_type=event.frame_type,
                reason=event.reason_phrase,
                close_ms=None if received_at is None else round((received_at - sent_at) * 1000, 3),
            )
    except ConnectionError as error:
        report.update(closed_by="handshake_failed", error=str(error))
        print(json.dumps(report), flush=True)
        return 4
    print(json.dumps(report), flush=True)
    return 0 if report["closed_by"] == "peer" else 1


async def starve(args: argparse.Namespace) -> int:
    configuration = QuicConfiguration(is_client=True, alpn_protocols=[args.alpn], server_name=args.sni or args.host)
    # The server sends nothing once every stream is starved, so the connection is idle while
    # it is held: it must outlast the hold.
    configuration.idle_timeout = max(60, args.hold + 60)
    configuration.max_data = args.window
    configuration.max_stream_data = args.window
    if args.insecure:
        configuration.verify_mode = ssl.CERT_NONE
    else:
        configuration.load_verify_locations(args.ca)
    received = 0
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)

    class Starver(HostileClient):
        def quic_event_received(self, event: events.QuicEvent) -> None:
            nonlocal received
            if isinstance(event, events.StreamDataReceived):
                received += len(event.data)
            super().quic_event_received(event)

    try:
        async with connect(args.host, args.port, configuration=configuration, create_protocol=Starver) as client:
            quic = client._quic
            # aioquic raises its windows as it receives (it hands everything to the application
            # at once); a client that never reads grants nothing, so neither do these.
            quic._write_connection_limits = lambda builder, space: None  # type: ignore[method-assign]
            quic._write_stream_limits = lambda builder, space, stream: None  # type: ignore[method-assign]
            streams = []
            for _ in range(args.starve):
                stream_id = quic.get_next_available_stream_id()
                if args.alpn == "perf":
                    quic.send_stream_data(stream_id, args.size.to_bytes(8, "big"), end_stream=True)
                else:
                    quic.send_stream_data(stream_id, bytes(args.size))
                streams.append(stream_id)
            client.transmit()
            deadline = time.monotonic() + args.timeout
            # Every request has reached the server once some of its bytes are acknowledged.
            while any(s in quic._streams and quic._streams[s].sender._buffer_start == 0 for s in streams):
                if time.monotonic() > deadline or client.terminated.done():
                    break
                await asyncio.sleep(0.01)
            print(json.dumps({"starving": args.starve, "size": args.size, "window": args.window}), flush=True)
            try:
                await asyncio.wait_for(stop.wait(), args.hold)
            except asyncio.TimeoutError:
                pass
            report = {"starve": args.starve, "received": received, "terminated": client.terminated.done()}
    except ConnectionError as error:
        print(json.dumps({"starve": args.starve, "closed_by": "handshake_failed", "error": str(error)}), flush=True)
        return 4
    print(json.dumps(report), flush=True)
    return 0


class FloodSockets:
    """The flooding client's UDP sockets (so as many source ports), non-blocking, and the
    count of the server's datagrams read back on them (``replies``, and ``retries`` among
    them)."""

    def __init__(self, count: int) -> None:
        self.sockets = []
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.bind(("127.0.0.1", 0))
            sock.setblocking(False)
            self.sockets.append(sock)
        self.replies = 0
        self.retries = 0
        # Connection IDs (the flood's source IDs) no reply has been addressed to yet.
        self.unanswered: set[bytes] = set()

    def __getitem__(self, index: int) -> socket.socket:
        return self.sockets[index % len(self.sockets)]

    def drain(self) -> None:
        for sock in self.sockets:
            while True:
                try:
                    data = sock.recv(65536)
                except (BlockingIOError, ConnectionRefusedError):
                    break
                self.replies += 1
                # A Retry: long header, type bits 0b11 (RFC 9000 §17.2.5).
                if data and data[0] & 0xF0 == 0xF0:
                    self.retries += 1
                # A long header's destination connection ID: its length at byte 5, then the ID.
                if len(data) > 6 and data[0] & 0x80:
                    self.unanswered.discard(data[6 : 6 + data[5]])

    def finish(self, timeout: float = 0.2) -> None:
        """Reads what the server still sends: until every connection in ``unanswered`` has had
        a reply, within ``timeout`` (for 0.2 s when none is awaited), then closes the sockets."""
        awaited = bool(self.unanswered)
        deadline = time.monotonic() + (timeout if awaited else 0.2)
        while time.monotonic() < deadline and (self.unanswered or not awaited):
            self.drain()
            time.sleep(0.01)
        for sock in self.sockets:
            sock.close()


def flood(args: argparse.Namespace) -> int:
    configuration = QuicConfiguration(is_client=True, alpn_protocols=[args.alpn], server_name=args.sni or args.host)
    address = (args.host, args.port)
    sockets = FloodSockets(args.sockets)
    datagrams = 0
    for index in range(args.flood):
        quic = QuicConnection(configuration=configuration)
        quic.connect(address, now=time.time())
        sockets.unanswered.add(quic.host_cid)
        for data, _ in quic.datagrams_to_send(now=time.time()):
            sockets[index].sendto(data, address)
            datagrams += 1
        if index % 32 == 31:
            sockets.drain()
    # Until the server has answered each one (Retry, or its first flight), however long a
    # loaded machine makes it take, within --timeout.
    sockets.finish(args.timeout)
    print(json.dumps({"flood": args.flood, "datagrams": datagrams, "replies": sockets.replies, "retries": sockets.retries,
                      "unanswered": len(sockets.unanswered)}), flush=True)
    return 0


def initial_template(args: argparse.Namespace) -> tuple[bytes, bytes, int]:
    """One real client first flight, decrypted: its source connection ID, the plaintext of its
    Initial (the ClientHello in a CRYPTO frame, padded) and the QUIC version."""
    configuration = QuicConfiguration(is_client=True, alpn_protocols=[args.alpn], server_name=args.sni or args.host)
    quic = QuicConnection(configuration=configuration)
    quic.connect((args.host, args.port), now=time.time())
    datagram = next(data for data, _ in quic.datagrams_to_send(now=time.time()))
    buf = Buffer(data=datagram)
    header = pull_quic_header(buf, host_cid_length=8)
    server_side = CryptoPair()
    server_side.setup_initial(cid=header.destination_cid, is_client=False, version=header.version)
    _, payload, _ = server_side.decrypt_packet(datagram[: header.packet_length], buf.tell(), 0)
    return header.source_cid, payload, header.version


def fast_flood(args: argparse.Namespace) -> int:
    """`--flood N --rate R`: the same real ClientHello (decryptable, complete) in N Initials,
    each to a fresh destination connection ID (so each is a new connection to the server),
    encrypted here with the ID's Initial keys instead of a new aioquic connection each
    (thousands of times faster), paced at R per second (0: as fast as possible)."""
    source, payload, version = initial_template(args)
    # PADDING frames (zero bytes) so every datagram is 1,200 bytes, as RFC 9000 §14.1 requires
    # of a client's Initial (aioquic pads its datagram after the packet instead).
    header_size = 1 + 4 + 1 + 8 + 1 + len(source) + 1 + 2 + 2
    payload += bytes(max(0, 1200 - header_size - len(payload) - 16))
    address = (args.host, args.port)
    sockets = FloodSockets(args.sockets)
    sent = dropped = 0
    start = time.monotonic()
    for index in range(args.flood):
        if args.rate > 0:
            ahead = start + index / args.rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        destination = os.urandom(8)
        # Long header, Initial, 2-byte packet number; token length 0; a 2-byte length field.
        length = 2 + len(payload) + 16
        header = (bytes([0xC1]) + version.to_bytes(4, "big") + bytes([len(destination)]) + destination
                  + bytes([len(source)]) + source + b"\x00" + (0x4000 | length).to_bytes(2, "big") + b"\x00\x00")
        pair = CryptoPair()
        pair.setup_initial(cid=destination, is_client=True, version=version)
        try:
            sockets[index].sendto(pair.encrypt_packet(header, payload, 0), address)
            sent += 1
        except BlockingIOError:
            dropped += 1
        if index % 256 == 255:
            sockets.drain()
    seconds = time.monotonic() - start
    sockets.finish()
    print(json.dumps({"flood": args.flood, "datagrams": sent, "dropped_locally": dropped, "seconds": seconds,
                      "rate": sent / seconds if seconds > 0 else 0, "replies": sockets.replies, "retries": sockets.retries}), flush=True)
    return 0


async def gaps(args: argparse.Namespace) -> int:
    configuration = QuicConfiguration(is_client=True, alpn_protocols=[args.alpn], server_name=args.sni or args.host)
    configuration.idle_timeout = 60
    if args.insecure:
        configuration.verify_mode = ssl.CERT_NONE
    else:
        configuration.load_verify_locations(args.ca)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    clients: list[HostileClient] = []
    contexts = []
    failed = 0
    senders = []
    for _ in range(args.connections):
        context = connect(args.host, args.port, configuration=configuration, create_protocol=HostileClient)
        try:
            client = await asyncio.wait_for(context.__aenter__(), args.timeout)
        except (ConnectionError, asyncio.TimeoutError):
            failed += 1
            continue
        contexts.append(context)
        assert isinstance(client, HostileClient)
        clients.append(client)
        quic = client._quic
        limits = advertised_limits(quic)
        share = min(limits["stream_window"], limits["connection_window"] // max(1, args.gaps))
        for _ in range(min(args.gaps, limits["streams"])):
            stream_id = quic.get_next_available_stream_id()
            quic.send_stream_data(stream_id, bytes(share))
            sender = quic._streams[stream_id].sender
            # The first byte never goes: everything after it stays out of order.
            sender._pending.subtract(0, 1)
            senders.append(sender)
        client.transmit()
    deadline = time.monotonic() + args.timeout
    while any(len(sender._acked) == 0 for sender in senders) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    acknowledged = sum(1 for sender in senders if len(sender._acked) > 0)
    print(json.dumps({"holding": len(clients), "streams": len(senders), "acknowledged": acknowledged}), flush=True)
    try:
        await asyncio.wait_for(stop.wait(), args.hold)
    except asyncio.TimeoutError:
        pass
    # A received CONNECTION_CLOSE is reported by aioquic only once its draining period ends;
    # the frame's arrival and reason are known at once.
    closed = [c._quic for c in clients if getattr(c._quic, "hostile_close_received_at", None) is not None]
    report = {
        "gaps": args.gaps,
        "connections": len(clients),
        "closed_by_peer": len(closed),
        "reasons": sorted({quic._close_event.reason_phrase for quic in closed if quic._close_event is not None}),
        "failed": failed,
    }
    for client in clients:
        client.close()
    print(json.dumps(report), flush=True)
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--alpn", required=True)
    parser.add_argument("--sni")
    trust = parser.add_mutually_exclusive_group(required=True)
    trust.add_argument("--ca")
    trust.add_argument("--insecure", action="store_true")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--violate", choices=["streams", "stream-data", "connection-data", "stream-state", "final-size"])
    mode.add_argument("--flood", type=int, metavar="N")
    mode.add_argument("--starve", type=int, metavar="N")
    mode.add_argument("--gaps", type=int, metavar="N")
    parser.add_argument("--connections", type=int, default=1, help="--gaps: connections")
    parser.add_argument("--size", type=int, default=1 << 30)
    parser.add_argument("--window", type=int, default=65536)
    parser.add_argument("--hold", type=float, default=30)
    parser.add_argument("--sockets", type=int, default=16)
    parser.add_argument("--rate", type=float, help="--flood: the fast generator, at this many Initials per second (0: unpaced)")
    parser.add_argument("--timeout", type=float, default=10)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, stream=sys.stderr)
    if args.flood is not None:
        return fast_flood(args) if args.rate is not None else flood(args)
    if args.starve is not None:
        return asyncio.run(starve(args))
    if args.gaps is not None:
        return asyncio.run(gaps(args))
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
