#!/usr/bin/env python3
"""Plain UDP peer for Braid's custom-framer-over-UDP tests (Python's ``socket`` only).

Framing (the tests' ``DatagramTestFramer``): a message is ``0xF7``, its type (one byte), its
length (two bytes, big endian), then its content; a datagram holds whole messages.

Server
------
    framed_udp_peer.py server --expect N [--timeout 30]

Binds 127.0.0.1 on a port the system chooses and prints ``listening <port>``. Waits for a
first datagram (the client's greeting), then sends to its sender, one datagram each:

1. message type 1 "one";
2. bytes without the 0xF7 mark (a datagram the framer rejects);
3. a header announcing 10 bytes followed by only 4 (a message cut short by its datagram's
   end, which must not take bytes of the next datagram);
4. two messages in one datagram: type 2 "two", type 3 "three";
5. message type 4 "four".

Then reads ``--expect`` more datagrams and prints one JSON line: ``ok``, ``greeting`` and
``datagrams`` (each datagram received after the greeting, as hex, in order).
"""
import argparse
import json
import socket
import sys


def message(kind: int, content: bytes) -> bytes:
    return bytes([0xF7, kind]) + len(content).to_bytes(2, "big") + content


def server(arguments) -> int:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(arguments.timeout)
    print(f"listening {sock.getsockname()[1]}", flush=True)
    report = {"ok": False, "greeting": None, "datagrams": []}
    try:
        greeting, client = sock.recvfrom(65535)
        report["greeting"] = greeting.hex()
        for datagram in (
            message(1, b"one"),
            b"no framing mark here",
            bytes([0xF7, 9, 0, 10]) + b"cut!",
            message(2, b"two") + message(3, b"three"),
            message(4, b"four"),
        ):
            sock.sendto(datagram, client)
        for _ in range(arguments.expect):
            datagram, _ = sock.recvfrom(65535)
            report["datagrams"].append(datagram.hex())
        report["ok"] = True
    except OSError as error:
        report["error"] = str(error)
    print(json.dumps(report), flush=True)
    return 0 if report["ok"] else 1


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["server"])
    parser.add_argument("--expect", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=30)
    return server(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
