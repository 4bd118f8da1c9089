#!/usr/bin/env python3
"""A QUIC client on aioquic's sans-I/O connection, for the fleet tests: it records every
connection ID a server gives it and decodes the server ID in each, written from the
specifications (draft-ietf-quic-load-balancers-21 and Katran's connection-ID versions), not
from Braid's encoder.

    fleet_client.py --host H --port P --ca FILE [--sni NAME] [--alpn echo]
                    --format quic-lb --server-id-length N --nonce-length N [--key HEX]
                  | --format katran
                    [--migrations N] [--after-retry COMMAND] [--timeout 30]

It completes a handshake, echoes a message on a stream, then ``--migrations`` times moves to a
new local port and the next connection ID (a NAT rebinding and a deliberate migration at
once), echoing again each time, so the server issues new IDs. With ``--after-retry`` it runs
COMMAND (a shell command: ``ip route replace ...``) once a Retry has arrived and before it
answers, so the rest of the handshake reaches another host.

Prints one JSON object: ``ids`` (every server-issued connection ID in hex, in the order
received: the Retry's, the handshake's, then NEW_CONNECTION_ID's), ``server_ids`` (the server
ID decoded from each, hex), ``retry`` (whether a Retry arrived), ``echoes`` (echoes that
came back intact) and ``error`` (null on success). Exit status 0 only if the handshake
completed and every echo came back.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import subprocess
import sys
import time

from aioquic.quic import events
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes


def aes_ecb_encrypt(key: bytes, block: bytes) -> bytes:
    encryptor = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return encryptor.update(block) + encryptor.finalize()


def aes_ecb_decrypt(key: bytes, block: bytes) -> bytes:
    decryptor = Cipher(algorithms.AES(key), modes.ECB()).decryptor()
    return decryptor.update(block) + decryptor.finalize()


def expand(length: int, rotation_pass: int, half: bytes) -> bytes:
    """The draft's expand(length, pass, input): the half as the leading octets, zeros, then
    the plaintext length and the pass number as the last two octets."""
    return half + bytes(14 - len(half)) + bytes([length, rotation_pass])


def quic_lb_decrypt(plaintext_length: int, ciphertext: bytes, key: bytes) -> bytes:
    """Server ID || nonce from the ciphertext after the first octet: one AES block when it is
    16 octets, else the draft's four-pass Feistel network run backwards."""
    if plaintext_length == 16:
        return aes_ecb_decrypt(key, ciphertext)
    half_length = (plaintext_length + 1) // 2
    odd = plaintext_length % 2 == 1

    def clear_last(half: bytes) -> bytes:
        return half[:-1] + bytes([half[-1] & 0xF0]) if odd else half

    def clear_first(half: bytes) -> bytes:
        return bytes([half[0] & 0x0F]) + half[1:] if odd else half

    def mask(rotation_pass: int, half: bytes) -> bytes:
        return aes_ecb_encrypt(key, expand(plaintext_length, rotation_pass, half))[:half_length]

    def xor(a: bytes, b: bytes) -> bytes:
        return bytes(x ^ y for x, y in zip(a, b))

    left_2 = clear_last(ciphertext[:half_length])
    right_2 = clear_first(ciphertext[plaintext_length - half_length:])
    left_1 = clear_last(xor(left_2, mask(4, right_2)))
    right_1 = clear_first(xor(right_2, mask(3, left_1)))
    left_0 = clear_last(xor(left_1, mask(2, right_1)))
    right_0 = clear_first(xor(right_1, mask(1, left_0)))
    if odd:
        return left_0[:-1] + bytes([left_0[-1] | right_0[0]]) + right_0[1:]
    return left_0 + right_0


# The draft's test vectors (server ID, nonce, connection ID, key); --self-test decodes them.
DRAFT_VECTORS = [
    ("ed793a", "ee080dbf", "0720b1d07b359d3c"),
    ("ed793a51d49b8f5fab65", "ee080dbf48", "2fcc381bc74cb4fbad2823a3d1f8fed2"),
    ("ed793a51d49b8f5f", "ee080dbf48c0d1e5", "504dd2d05a7b0de9b2b9907afb5ecf8cc3"),
    ("ed793a51d49b8f5fab", "ee080dbf48c0d1e55d", "125779c9cc86beb3a3a4a3ca96fce4bfe0cdbc"),
]
DRAFT_KEY = "8f95f09245765f80256934e50c66207f"


def self_test() -> int:
    for server_id, nonce, cid in DRAFT_VECTORS:
        length = len(server_id) // 2 + len(nonce) // 2
        plaintext = quic_lb_decrypt(length, bytes.fromhex(cid)[1:], bytes.fromhex(DRAFT_KEY))
        if plaintext.hex() != server_id + nonce:
            print("vector %s: decoded %s, expected %s" % (cid, plaintext.hex(), server_id + nonce))
            return 1
    print("ok: %d vectors" % len(DRAFT_VECTORS))
    return 0


def decode_server_id(cid: bytes, args: argparse.Namespace) -> str:
    if args.format == "katran":
        # The version in the top two bits of the first byte; version 1 (0b01) has a 16-bit
        # server ID in the next 16 bits, versions 2 (0b10) and 3 (0b11) a 24- and a 32-bit one
        # in the bytes after the first.
        version = cid[0] >> 6
        if version == 1:
            server_id = ((cid[0] & 0x3F) << 10) | (cid[1] << 2) | (cid[2] >> 6)
        elif version in (2, 3):
            server_id = int.from_bytes(cid[1:2 + version], "big")
        else:
            return "bad-version-%d" % version
        return "%x" % server_id
    plaintext_length = args.server_id_length + args.nonce_length
    body = cid[1:1 + plaintext_length]
    if len(body) < plaintext_length:
        return "short"
    if args.key:
        body = quic_lb_decrypt(plaintext_length, body, bytes.fromhex(args.key))
    return body[:args.server_id_length].hex()


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--sni", default="localhost")
    parser.add_argument("--alpn", default="echo")
    parser.add_argument("--format", choices=["quic-lb", "katran"], required=True)
    parser.add_argument("--server-id-length", type=int, default=0)
    parser.add_argument("--nonce-length", type=int, default=0)
    parser.add_argument("--key")
    parser.add_argument("--migrations", type=int, default=0)
    parser.add_argument("--after-retry")
    parser.add_argument("--timeout", type=float, default=30)
    args = parser.parse_args()

    configuration = QuicConfiguration(is_client=True, alpn_protocols=[args.alpn], server_name=args.sni)
    configuration.load_verify_locations(args.ca)
    connection = QuicConnection(configuration=configuration)
    address = (args.host, args.port)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    deadline = time.monotonic() + args.timeout
    ids: list[bytes] = []
    report: dict = {"ids": [], "server_ids": [], "retry": False, "echoes": 0, "error": None}
    state = {"handshake": False, "retry_handled": False}
    echoes: dict[int, bytearray] = {}
    finished: set[int] = set()

    def note_ids() -> None:
        # Only IDs the server chose: the Retry's, then (once the server's first packet has
        # set it, giving it sequence number 0) the current one and the spares.
        current = [c.cid for c in connection._peer_cid_available]
        if connection._peer_cid.sequence_number is not None:
            current.insert(0, connection._peer_cid.cid)
        if connection._retry_source_connection_id is not None:
            current.insert(0, connection._retry_source_connection_id)
        for cid in current:
            if cid not in ids:
                ids.append(cid)

    def flush() -> None:
        for data, destination in connection.datagrams_to_send(now=time.time()):
            sock.sendto(data, destination)

    def pump(until) -> None:
        while not until():
            if time.monotonic() > deadline:
                raise TimeoutError("nothing more from the server within %.0f s" % args.timeout)
            timer = connection.get_timer()
            wait = 0.05 if timer is None else max(0.0, min(0.05, timer - time.time()))
            readable, _, _ = select.select([sock], [], [], wait)
            if readable:
                data, source = sock.recvfrom(65536)
                if not state["retry_handled"] and len(data) > 0 and data[0] & 0xF0 == 0xF0:
                    # A long header of type Retry (0b11): a host of the fleet asks the client to
                    # prove its address; the rest of the handshake may go to another host.
                    state["retry_handled"] = True
                    report["retry"] = True
                    if args.after_retry:
                        subprocess.run(args.after_retry, shell=True, check=True)
                connection.receive_datagram(data, source, now=time.time())
            timer = connection.get_timer()
            if timer is not None and timer <= time.time():
                connection.handle_timer(now=time.time())
            while (event := connection.next_event()) is not None:
                if isinstance(event, events.HandshakeCompleted):
                    state["handshake"] = True
                elif isinstance(event, events.StreamDataReceived):
                    echoes.setdefault(event.stream_id, bytearray()).extend(event.data)
                    if event.end_stream:
                        finished.add(event.stream_id)
                elif isinstance(event, events.ConnectionTerminated):
                    raise ConnectionError("closed: error %s, %s" % (event.error_code, event.reason_phrase))
            note_ids()
            flush()

    def echo(label: str) -> None:
        stream = connection.get_next_available_stream_id()
        message = ("fleet %s %d" % (label, stream)).encode()
        connection.send_stream_data(stream, message, end_stream=True)
        flush()
        pump(lambda: stream in finished)
        if bytes(echoes[stream]) != message:
            raise ValueError("echo differs: %r" % bytes(echoes[stream]))
        report["echoes"] += 1

    try:
        connection.connect(address, now=time.time())
        flush()
        pump(lambda: state["handshake"])
        echo("handshake")
        for index in range(args.migrations):
            # Wait until the server has given a spare ID to move to.
            pump(lambda: len(connection._peer_cid_available) > 0)
            sock.close()
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            connection.change_connection_id()
            echo("migration-%d" % index)
        note_ids()
        connection.close()
        flush()
    except Exception as error:  # reported, not raised: the test reads the JSON
        report["error"] = "%s: %s" % (type(error).__name__, error)
    report["ids"] = [cid.hex() for cid in ids]
    report["server_ids"] = [decode_server_id(cid, args) for cid in ids]
    print(json.dumps(report), flush=True)
    return 0 if report["error"] is None else 1


if __name__ == "__main__":
    sys.exit(main())
