#!/usr/bin/env python3
"""Deterministic UDP network emulator (relay) for Braid interop tests and benchmarks.

Clients send datagrams to the --listen address; the relay forwards them to the
--upstream server and relays the server's replies back, applying impairments
in each direction:

    to-server   client -> relay -> server
    to-client   server -> relay -> client

Usage:

    python3 tools/netem/braid_netem.py --listen 127.0.0.1:0 --upstream 127.0.0.1:4433 \\
        [--delay-ms D] [--jitter-ms J] [--rate-mbit R] [--queue-ms Q] \\
        [--loss P] [--burst-loss P] [--burst-length L] \\
        [--reorder P] [--reorder-ms M] [--corrupt P] \\
        [--blackhole START:DURATION ...] [--direction to-server|to-client|both] \\
        [--seed N] [--stats FILE]

On start the relay prints exactly one line, ``listening <port>``, to stdout and
then runs until SIGTERM/SIGINT. On exit it writes per-direction counters as
JSON to --stats (if given) and to stderr.

Every distinct client address gets its own upstream socket (its own ephemeral
port), so the server sees one 4-tuple per client address, and a client that
changes port (QUIC connection migration) appears to the server as a new path.

Per-packet pipeline in each direction, in this order:

1. blackhole    drop while inside a --blackhole window (seconds measured from
                the first packet the relay saw, in either direction)
2. burst loss   Gilbert-Elliott chain: every packet in the bad state is lost
3. random loss  independent loss with probability --loss
4. bottleneck   serialization at --rate-mbit with a drop-tail queue of
                --queue-ms (sizes are UDP payload bytes)
5. delay        --delay-ms plus uniform 0..--jitter-ms, clamped so that the
                direction stays FIFO (jitter never reorders)
6. reorder      with probability --reorder the packet is held --reorder-ms
                longer and does not hold back later packets
7. corrupt      with probability --corrupt flip one random payload bit

--direction narrows loss, burst loss, reorder, corrupt and blackhole; delay,
jitter and rate always apply to both directions.

Determinism: each direction has its own random.Random (seeded with seed*2 for
to-server and seed*2+1 for to-client) and draws the same fixed number of
values for every packet, whatever is enabled or dropped. Decision k of a
direction therefore depends only on the seed and k (and the packet length for
the corrupted bit), so the same packet sequence yields the same decisions.
Only the time-based features (blackhole, queue overflow) depend on timing.
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import selectors
import signal
import socket
import sys
import time

SOCKET_BUFFER_BYTES = 4 * 1024 * 1024
MAX_DATAGRAM = 65535
# Upper bound on datagrams read from one socket per wakeup. Reading stops
# earlier when the socket is empty; the cap only keeps a continuously busy
# socket from starving scheduled departures and the other sockets.
MAX_BATCH = 4096

DIRECTIONS = ("to-server", "to-client")


# --------------------------------------------------------------------------
# Configuration


def parse_hostport(text: str) -> tuple[str, int]:
    """Split ``host:port`` or ``[v6-literal]:port``."""
    if text.startswith("["):
        host, sep, port = text[1:].partition("]:")
        if not sep:
            raise ValueError(f"expected [HOST]:PORT, got {text!r}")
    else:
        host, sep, port = text.rpartition(":")
        if not sep or not host:
            raise ValueError(f"expected HOST:PORT, got {text!r}")
    port_num = int(port)
    if not 0 <= port_num <= 65535:
        raise ValueError(f"port out of range in {text!r}")
    return host, port_num


def resolve(text: str, passive: bool = False):
    """Return (family, sockaddr) of the first UDP address for HOST:PORT."""
    host, port = parse_hostport(text)
    flags = socket.AI_PASSIVE if passive else 0
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM, flags=flags)
    family, _, _, _, sockaddr = infos[0]
    return family, sockaddr


def parse_blackhole(text: str) -> tuple[float, float]:
    start, sep, duration = text.partition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected START:DURATION, got {text!r}")
    try:
        s, d = float(start), float(duration)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected START:DURATION, got {text!r}") from None
    if s < 0 or d < 0:
        raise argparse.ArgumentTypeError("blackhole START and DURATION must be >= 0")
    return s, s + d


def probability(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"probability must be in [0, 1], got {text}")
    return value


def non_negative(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="Deterministic UDP network emulator relay.",
        epilog="Prints 'listening <port>' on stdout once ready.",
    )
    p.add_argument("--listen", required=True, help="HOST:PORT clients send to (port 0 = any)")
    p.add_argument("--upstream", required=True, help="HOST:PORT of the server")
    p.add_argument("--delay-ms", type=non_negative, default=0.0, help="one-way delay (RTT = 2x)")
    p.add_argument("--jitter-ms", type=non_negative, default=0.0,
                   help="extra uniform 0..J ms delay; never reorders")
    p.add_argument("--rate-mbit", type=non_negative, default=0.0,
                   help="per-direction bottleneck rate in Mbit/s (0 = unlimited)")
    p.add_argument("--queue-ms", type=non_negative, default=50.0,
                   help="drop-tail bottleneck queue limit, in ms of queueing at --rate-mbit")
    p.add_argument("--loss", type=probability, default=0.0, help="independent loss probability")
    p.add_argument("--burst-loss", type=probability, default=0.0,
                   help="Gilbert-Elliott long-run loss rate")
    p.add_argument("--burst-length", type=float, default=5.0,
                   help="mean loss-burst length in packets (>= 1)")
    p.add_argument("--reorder", type=probability, default=0.0,
                   help="probability a packet is held back --reorder-ms")
    p.add_argument("--reorder-ms", type=non_negative, default=10.0)
    p.add_argument("--corrupt", type=probability, default=0.0,
                   help="probability of flipping one payload bit")
    p.add_argument("--blackhole", type=parse_blackhole, action="append", default=[],
                   metavar="START:DURATION",
                   help="drop everything for DURATION s starting START s after the first packet "
                        "(repeatable)")
    p.add_argument("--direction", choices=("to-server", "to-client", "both"), default="both",
                   help="directions for loss/burst/reorder/corrupt/blackhole")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--stats", metavar="FILE", help="write JSON counters here on exit")
    return p


def parse_args(argv=None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    for name in ("listen", "upstream"):
        try:
            parse_hostport(getattr(args, name))
        except ValueError as e:
            parser.error(f"--{name}: {e}")
    if args.burst_length < 1:
        parser.error("--burst-length must be >= 1")
    if args.burst_loss > 0:
        # p(good->bad) = P*r/(1-P) with r = 1/L must be a probability.
        max_p = args.burst_length / (args.burst_length + 1)
        if args.burst_loss > max_p:
            parser.error(f"--burst-loss must be <= L/(L+1) = {max_p:.4f} for --burst-length "
                         f"{args.burst_length}")
    if args.rate_mbit > 0 and args.queue_ms <= 0:
        parser.error("--queue-ms must be > 0 with --rate-mbit")
    return args


class Impairments:
    """Static per-direction settings, in seconds and probabilities."""

    def __init__(self, args: argparse.Namespace, direction: str):
        narrowed = args.direction in ("both", direction)
        self.delay = args.delay_ms / 1000.0
        self.jitter = args.jitter_ms / 1000.0
        self.rate_bps = args.rate_mbit * 1e6
        self.queue_limit = args.queue_ms / 1000.0
        self.loss = args.loss if narrowed else 0.0
        self.reorder = args.reorder if narrowed else 0.0
        self.reorder_delay = args.reorder_ms / 1000.0
        self.corrupt = args.corrupt if narrowed else 0.0
        self.blackholes = list(args.blackhole) if narrowed else []
        burst = args.burst_loss if narrowed else 0.0
        # Gilbert-Elliott: runs in the bad state are geometric with mean
        # 1/r, and the stationary bad fraction is p/(p+r); solve for P and L.
        self.p_bad_to_good = 1.0 / args.burst_length
        if burst > 0:
            self.p_good_to_bad = min(1.0, burst * self.p_bad_to_good / (1.0 - burst))
        else:
            self.p_good_to_bad = 0.0


# --------------------------------------------------------------------------
# Runtime state


class Stats:
    __slots__ = (
        "packets_received", "bytes_received", "packets_forwarded", "bytes_forwarded",
        "dropped_random", "dropped_burst", "dropped_queue", "dropped_blackhole",
        "corrupted", "reordered", "send_errors", "pending_at_exit",
    )

    def __init__(self):
        for name in self.__slots__:
            setattr(self, name, 0)

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.__slots__}


class Direction:
    def __init__(self, name: str, imp: Impairments, seed: int):
        self.name = name
        self.imp = imp
        self.rng = random.Random(seed)
        self.stats = Stats()
        self.bad_state = False      # Gilbert-Elliott state
        self.link_free_at = 0.0     # when the bottleneck finishes its last packet
        self.last_delivery = 0.0    # FIFO floor for non-reordered packets


class Flow:
    """One client address and the upstream socket dedicated to it."""

    __slots__ = ("client_addr", "sock")

    def __init__(self, client_addr, sock: socket.socket):
        self.client_addr = client_addr
        self.sock = sock


def tune_socket(sock: socket.socket) -> None:
    for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, SOCKET_BUFFER_BYTES)
        except OSError:
            pass
    sock.setblocking(False)


class Relay:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        listen_family, listen_addr = resolve(args.listen, passive=True)
        self.upstream_family, self.upstream_addr = resolve(args.upstream)

        self.listen_sock = socket.socket(listen_family, socket.SOCK_DGRAM)
        tune_socket(self.listen_sock)
        self.listen_sock.bind(listen_addr)

        self.dirs = {
            "to-server": Direction("to-server", Impairments(args, "to-server"), args.seed * 2),
            "to-client": Direction("to-client", Impairments(args, "to-client"), args.seed * 2 + 1),
        }
        self.flows: dict = {}
        self.heap: list = []
        self.heap_seq = 0
        self.first_packet_at = None
        self.icmp_errors = 0
        self.recv_errors = 0
        self.stopping = False

        self.sel = selectors.DefaultSelector()
        self.sel.register(self.listen_sock, selectors.EVENT_READ, None)

        # Signals only set a flag; the wakeup socket makes select() return.
        self.wake_r, self.wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self.wake_w.setblocking(False)
        signal.set_wakeup_fd(self.wake_w.fileno(), warn_on_full_buffer=False)
        self.sel.register(self.wake_r, selectors.EVENT_READ, "wake")
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)

    @property
    def port(self) -> int:
        return self.listen_sock.getsockname()[1]

    def _on_signal(self, signum, frame):
        self.stopping = True

    # ---- event loop

    def run(self) -> None:
        heap = self.heap
        select = self.sel.select
        while not self.stopping:
            timeout = None
            if heap:
                timeout = max(0.0, heap[0][0] - time.monotonic())
            for key, _ in select(timeout):
                data = key.data
                if data is None:
                    self._drain_clients()
                elif data == "wake":
                    try:
                        while self.wake_r.recv(512):
                            pass
                    except BlockingIOError:
                        pass
                else:
                    self._drain_upstream(data)
            if heap:
                self._send_due()

    def _drain_clients(self) -> None:
        sock = self.listen_sock
        flows = self.flows
        to_server = self.dirs["to-server"]
        for _ in range(MAX_BATCH):
            try:
                data, addr = sock.recvfrom(MAX_DATAGRAM)
            except BlockingIOError:
                return
            except ConnectionRefusedError:
                self.icmp_errors += 1
                continue
            except OSError:
                self.recv_errors += 1
                return
            flow = flows.get(addr)
            if flow is None:
                flow = self._new_flow(addr)
            self._ingress(to_server, data, flow.sock, None)

    def _drain_upstream(self, flow: Flow) -> None:
        sock = flow.sock
        to_client = self.dirs["to-client"]
        listen = self.listen_sock
        addr = flow.client_addr
        for _ in range(MAX_BATCH):
            try:
                data = sock.recv(MAX_DATAGRAM)
            except BlockingIOError:
                return
            except ConnectionRefusedError:
                # ICMP port unreachable from the server side (e.g. server not up yet).
                self.icmp_errors += 1
                continue
            except OSError:
                self.recv_errors += 1
                return
            self._ingress(to_client, data, listen, addr)

    def _new_flow(self, addr) -> Flow:
        sock = socket.socket(self.upstream_family, socket.SOCK_DGRAM)
        tune_socket(sock)
        # connect() picks a fresh ephemeral port, filters out anything not
        # from the server and lets us use the cheaper send()/recv().
        sock.connect(self.upstream_addr)
        flow = Flow(addr, sock)
        self.flows[addr] = flow
        self.sel.register(sock, selectors.EVENT_READ, flow)
        return flow

    # ---- impairment pipeline

    def _ingress(self, d: Direction, data: bytes, sock: socket.socket, addr) -> None:
        now = time.monotonic()
        if self.first_packet_at is None:
            self.first_packet_at = now
        st = d.stats
        imp = d.imp
        st.packets_received += 1
        st.bytes_received += len(data)

        # A fixed number of draws per packet keeps decision k a function of
        # (seed, k) only, independent of which features are on or what was
        # dropped earlier.
        rnd = d.rng.random
        u_burst = rnd()
        u_loss = rnd()
        u_jitter = rnd()
        u_reorder = rnd()
        u_corrupt = rnd()
        u_bit = rnd()

        # The Gilbert-Elliott chain advances on every packet.
        if d.bad_state:
            if u_burst < imp.p_bad_to_good:
                d.bad_state = False
        elif u_burst < imp.p_good_to_bad:
            d.bad_state = True

        if imp.blackholes:
            t = now - self.first_packet_at
            for start, end in imp.blackholes:
                if start <= t < end:
                    st.dropped_blackhole += 1
                    return
        if d.bad_state:
            st.dropped_burst += 1
            return
        if u_loss < imp.loss:
            st.dropped_random += 1
            return

        depart = now
        if imp.rate_bps > 0:
            if d.link_free_at - now > imp.queue_limit:
                st.dropped_queue += 1
                return
            depart = max(now, d.link_free_at) + len(data) * 8 / imp.rate_bps
            d.link_free_at = depart

        deliver = depart + imp.delay + u_jitter * imp.jitter
        if deliver < d.last_delivery:
            deliver = d.last_delivery
        if u_reorder < imp.reorder:
            # Held back without raising the FIFO floor, so later packets pass it.
            deliver += imp.reorder_delay
            st.reordered += 1
        else:
            d.last_delivery = deliver

        if u_corrupt < imp.corrupt and data:
            buf = bytearray(data)
            bit = min(int(u_bit * len(buf) * 8), len(buf) * 8 - 1)
            buf[bit >> 3] ^= 1 << (bit & 7)
            data = buf
            st.corrupted += 1

        if deliver <= now and not self.heap:
            self._send(d, data, sock, addr)
        else:
            self.heap_seq += 1
            heapq.heappush(self.heap, (deliver, self.heap_seq, d, data, sock, addr))

    def _send_due(self) -> None:
        heap = self.heap
        now = time.monotonic()
        while heap and heap[0][0] <= now:
            _, _, d, data, sock, addr = heapq.heappop(heap)
            self._send(d, data, sock, addr)

    def _send(self, d: Direction, data, sock: socket.socket, addr) -> None:
        try:
            if addr is None:
                sock.send(data)
            else:
                sock.sendto(data, addr)
        except ConnectionRefusedError:
            self.icmp_errors += 1
            d.stats.send_errors += 1
            return
        except OSError:
            # Full send buffer or transient error: the packet is lost.
            d.stats.send_errors += 1
            return
        d.stats.packets_forwarded += 1
        d.stats.bytes_forwarded += len(data)

    # ---- shutdown

    def stats(self) -> dict:
        for entry in self.heap:
            entry[2].stats.pending_at_exit += 1
        self.heap.clear()
        out = {name: self.dirs[name].stats.as_dict() for name in DIRECTIONS}
        out["clients"] = len(self.flows)
        out["icmp_errors"] = self.icmp_errors
        out["recv_errors"] = self.recv_errors
        return out

    def close(self) -> None:
        signal.set_wakeup_fd(-1)
        self.sel.close()
        for flow in self.flows.values():
            flow.sock.close()
        self.listen_sock.close()
        self.wake_r.close()
        self.wake_w.close()


def main(argv=None) -> int:
    args = parse_args(argv)
    relay = Relay(args)
    print(f"listening {relay.port}", flush=True)
    try:
        relay.run()
    finally:
        text = json.dumps(relay.stats(), indent=2, sort_keys=True)
        relay.close()
        if args.stats:
            with open(args.stats, "w", encoding="utf-8") as f:
                f.write(text + "\n")
        print(text, file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
