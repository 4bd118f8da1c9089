#!/usr/bin/env python3
"""TLS-over-TCP peer for Braid's interop tests, on Python's ``ssl`` module (OpenSSL).

Exchange
--------
After the handshake each side sends ``--send`` bytes, then close_notify (and keeps reading),
and reads until the peer's close_notify. Byte ``i`` of what each side sends is
``pattern(i)`` below (the formula of ``aioquic_peer.py`` and Braid's ``PerfPattern``), and
each side checks every byte it receives. Sending and receiving run at once, in one thread
per connection, over a non-blocking socket and memory BIOs.

Server
------
    tls_peer.py server --host 127.0.0.1 --port 0 --cert server.pem --key server-key.pem
                       [--alpn echo,other] [--ca ca.pem [--require-client-cert]] [--send N]

Prints ``listening <port>`` first, then one JSON line per connection that ends, and runs
until SIGTERM/SIGINT. TLS 1.3 session tickets are on (OpenSSL's default: two per connection).
The line: ``event: "closed"``, ``ok`` (handshake done, exchange complete and intact),
``alpn``, ``version``, ``resumed``, ``client_certificate`` (the subject CN, or null),
``bytes_sent``, ``bytes_received``, ``intact``, ``error`` (null, or what failed).

Client
------
    tls_peer.py client --host H --port P --ca ca.pem [--sni localhost] [--alpn echo]
                       [--cert client.pem --key client-key.pem] [--send N] [--expect N]
                       [--connections K] [--timeout 30]

Makes ``--connections`` connections one after the other, each offering the previous one's
session (``SSLSocket.session``) for resumption. Prints one JSON line per connection (the
server's fields, with ``event: "connection"`` and ``index``; ``ok`` also needs exactly
``--expect`` bytes) and exits 0 only if every connection was ``ok``; 1 otherwise, 2 usage.
A failed connection ends the run.
"""

from __future__ import annotations

import argparse
import json
import select
import signal
import socket
import ssl
import sys
import threading
import time
from typing import Any

PERIOD = 65521
# pattern(i) = ((i % 65521) * 2654435761 >> 7) & 0xff. The table runs one chunk past the
# period so any slice of at most CHUNK bytes is a plain bytes slice.
CHUNK = 16384
_TABLE = bytes(((i % PERIOD) * 2654435761 >> 7) & 0xFF for i in range(PERIOD + CHUNK))


def pattern(offset: int, length: int) -> bytes:
    """Pattern bytes for transfer offsets [offset, offset + length), length <= CHUNK."""
    start = offset % PERIOD
    return _TABLE[start : start + length]


def emit(obj: dict[str, Any]) -> None:
    print(json.dumps(obj), flush=True)


def subject_cn(certificate: dict | None) -> str | None:
    if not certificate:
        return None
    for rdn in certificate.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return value
    return None


class Exchange:
    """One connection's send-N-then-close_notify and read-until-close_notify, both at once.

    TLS runs in an ``SSLObject`` over memory BIOs and the socket is driven here, so sending
    close_notify (``unwrap``) leaves the object readable for the rest of the peer's data.
    """

    def __init__(self, raw: socket.socket, tls: ssl.SSLObject, send: int, deadline: float) -> None:
        self.raw = raw
        self.tls = tls
        self.incoming: ssl.MemoryBIO = tls._incoming  # type: ignore[attr-defined]
        self.outgoing: ssl.MemoryBIO = tls._outgoing  # type: ignore[attr-defined]
        self.to_send = send
        self.deadline = deadline
        self.unsent = bytearray()  # ciphertext the socket has not taken yet
        self.sent = 0
        self.received = 0
        self.intact = True
        self.peer_finished = False
        self.close_notify_sent = False

    def _flush(self) -> None:
        self.unsent += self.outgoing.read()
        while self.unsent:
            try:
                count = self.raw.send(self.unsent)
            except BlockingIOError:
                return
            del self.unsent[:count]

    def _wait_and_fill(self, read: bool) -> None:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("timed out")
        readable, _, _ = select.select([self.raw] if read else [], [self.raw] if self.unsent else [], [], min(remaining, 0.5))
        if readable:
            try:
                data = self.raw.recv(262144)
            except BlockingIOError:
                return
            if data:
                self.incoming.write(data)
            else:
                self.incoming.write_eof()

    def handshake(self) -> None:
        while True:
            try:
                self.tls.do_handshake()
                self._flush()
                return
            except ssl.SSLWantReadError:
                self._flush()
                self._wait_and_fill(True)

    def run(self) -> None:
        while not (self.peer_finished and self.close_notify_sent and not self.unsent):
            while not self.peer_finished:
                try:
                    data = self.tls.read(262144)
                except ssl.SSLWantReadError:
                    break
                except ssl.SSLZeroReturnError:
                    data = b""
                if not data:
                    self.peer_finished = True  # close_notify
                    break
                self._check(data)
            while self.sent < self.to_send and len(self.unsent) < 262144:
                self.sent += self.tls.write(pattern(self.sent, min(CHUNK, self.to_send - self.sent)))
                self.unsent += self.outgoing.read()
            if self.sent == self.to_send and not self.close_notify_sent:
                try:
                    self.tls.unwrap()  # sends close_notify
                except ssl.SSLWantReadError:
                    pass  # the peer's close_notify has not come yet: read on
                self.close_notify_sent = True
            self._flush()
            if not (self.peer_finished and self.close_notify_sent and not self.unsent):
                self._wait_and_fill(not self.peer_finished)

    def _check(self, data: bytes) -> None:
        if self.intact:
            position = 0
            while position < len(data):
                piece = data[position : position + CHUNK]
                if piece != pattern(self.received + position, len(piece)):
                    self.intact = False
                    break
                position += len(piece)
        self.received += len(data)


def describe(tls: ssl.SSLObject | None, exchange: Exchange | None, error: BaseException | None) -> dict[str, Any]:
    line: dict[str, Any] = {
        "alpn": None,
        "version": None,
        "resumed": None,
        "client_certificate": None,
        "bytes_sent": exchange.sent if exchange else 0,
        "bytes_received": exchange.received if exchange else 0,
        "intact": exchange.intact if exchange else None,
        "error": None if error is None else f"{type(error).__name__}: {error}",
    }
    if tls is not None:
        try:
            line["alpn"] = tls.selected_alpn_protocol()
            line["version"] = tls.version()
            line["resumed"] = tls.session_reused
            line["client_certificate"] = subject_cn(tls.getpeercert()) if tls.server_side else None
        except (ValueError, OSError):
            pass
    return line


def start_tls(raw: socket.socket, context: ssl.SSLContext, send: int, timeout: float, **wrap: Any) -> tuple[ssl.SSLObject, Exchange]:
    raw.setblocking(False)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, **wrap)
    tls._incoming, tls._outgoing = incoming, outgoing  # type: ignore[attr-defined]
    return tls, Exchange(raw, tls, send, time.monotonic() + timeout)


# --- server ------------------------------------------------------------------------------


def serve_connection(raw: socket.socket, context: ssl.SSLContext, send: int) -> None:
    tls = None
    exchange = None
    error = None
    try:
        tls, exchange = start_tls(raw, context, send, 60, server_side=True)
        exchange.handshake()
        exchange.run()
    except Exception as caught:  # reported in the JSON line
        error = caught
        if exchange is not None:
            try:
                exchange._flush()  # the alert, if any
            except OSError:
                pass
    line: dict[str, Any] = {"event": "closed"}
    line.update(describe(tls, exchange, error))
    line["ok"] = error is None and exchange is not None and exchange.intact
    emit(line)
    raw.close()


def run_server(args: argparse.Namespace) -> int:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    if args.alpn:
        context.set_alpn_protocols(args.alpn.split(","))
    if args.ca:
        context.load_verify_locations(args.ca)
        context.verify_mode = ssl.CERT_REQUIRED if args.require_client_cert else ssl.CERT_OPTIONAL
    listener = socket.create_server((args.host, args.port))
    print(f"listening {listener.getsockname()[1]}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        raw, _ = listener.accept()
        threading.Thread(target=serve_connection, args=(raw, context, args.send), daemon=True).start()


# --- client ------------------------------------------------------------------------------


def run_client(args: argparse.Namespace) -> int:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(args.ca)
    if args.alpn:
        context.set_alpn_protocols(args.alpn.split(","))
    if args.cert:
        context.load_cert_chain(args.cert, args.key)
    session = None
    for index in range(args.connections):
        raw = None
        tls = None
        exchange = None
        error = None
        try:
            raw = socket.create_connection((args.host, args.port), timeout=args.timeout)
            tls, exchange = start_tls(raw, context, args.send, args.timeout, server_hostname=args.sni, session=session)
            exchange.handshake()
            exchange.run()
            # TLS 1.3 tickets arrive after the handshake; by the peer's close_notify they are in.
            session = tls.session
        except Exception as caught:  # reported in the JSON line
            error = caught
        line: dict[str, Any] = {"event": "connection", "index": index}
        line.update(describe(tls, exchange, error))
        line["ok"] = error is None and exchange is not None and exchange.intact and (
            args.expect is None or exchange.received == args.expect)
        emit(line)
        if raw is not None:
            raw.close()
        if not line["ok"]:
            return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    roles = parser.add_subparsers(dest="role", required=True)
    server = roles.add_parser("server")
    server.add_argument("--host", default="127.0.0.1")
    server.add_argument("--port", type=int, default=0)
    server.add_argument("--cert", required=True)
    server.add_argument("--key", required=True)
    server.add_argument("--alpn")
    server.add_argument("--ca")
    server.add_argument("--require-client-cert", action="store_true")
    server.add_argument("--send", type=int, default=0)
    client = roles.add_parser("client")
    client.add_argument("--host", default="127.0.0.1")
    client.add_argument("--port", type=int, required=True)
    client.add_argument("--ca", required=True)
    client.add_argument("--sni", default="localhost")
    client.add_argument("--alpn")
    client.add_argument("--cert")
    client.add_argument("--key")
    client.add_argument("--send", type=int, default=0)
    client.add_argument("--expect", type=int)
    client.add_argument("--connections", type=int, default=1)
    client.add_argument("--timeout", type=float, default=30)
    args = parser.parse_args()
    if args.role == "server":
        if args.require_client_cert and not args.ca:
            parser.error("--require-client-cert needs --ca")
        return run_server(args)
    return run_client(args)


if __name__ == "__main__":
    sys.exit(main())
