#!/usr/bin/env python3
"""Fixed-delay IP link between two network namespaces, relayed through TUN devices.

braid_netem.py only relays UDP to one upstream address. This tool delays *any*
IP traffic (TCP, UDP, ICMP, ...) so benchmarks can also time TCP connects and
TCP+TLS handshakes at a given RTT on machines without tc/netem.

Layout:

    [client ns]  btun0 10.77.0.1/24           [server ns]  btun0 10.77.0.2/24
                   |                                         |
                   +---- this relay: read, wait D, write ----+

Every IP packet leaving one namespace's TUN device is written into the other
namespace's TUN device --delay-ms later (one way; RTT = 2 x delay). Each
direction stays FIFO. Nothing is dropped on purpose.

Usage (as root):

    python3 tools/netem/braid_tun_delay.py --delay-ms 10 \\
        [--client-ns braid-client --server-ns braid-server] \\
        [--client-ip 10.77.0.1 --server-ip 10.77.0.2] [--tun-name btun0] [--mtu 1500]

Once both namespaces are up the tool prints exactly one line

    ready <client-ns> <client-ip> <server-ns> <server-ip>

to stdout and relays until SIGTERM/SIGINT. It then deletes both namespaces
(also after errors) and exits 0, writing packet counters as JSON to stderr.

Run programs inside the namespaces with ``ip netns exec``:

    ip netns exec braid-server python3 -m http.server --bind 10.77.0.2 8000
    ip netns exec braid-client curl http://10.77.0.2:8000/

``lo`` is up in both namespaces, so 127.0.0.1 also works inside each one.
Namespaces left over from a crashed run are deleted and recreated.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import fcntl
import heapq
import ipaddress
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import time

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
IFNAMSIZ = 16

READ_SIZE = 65536
# Upper bound on packets read from one TUN per wakeup. Reading normally stops
# earlier because the device is empty; the cap only keeps a flooding direction
# from starving the other direction and the due departures.
MAX_BATCH = 1024
TXQUEUELEN = 1000


class SetupError(Exception):
    pass


# --------------------------------------------------------------------------
# Namespaces and TUN devices


def run_ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip", *args], stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and proc.returncode != 0:
        raise SetupError(f"'ip {' '.join(args)}' failed (exit {proc.returncode}): "
                         f"{proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def netns_exists(name: str) -> bool:
    return os.path.exists(os.path.join("/var/run/netns", name))


def delete_netns(name: str) -> None:
    if netns_exists(name):
        run_ip("netns", "delete", name, check=False)


def create_netns(name: str) -> None:
    if netns_exists(name):
        print(f"braid_tun_delay: deleting leftover namespace {name}", file=sys.stderr)
        run_ip("netns", "delete", name)
    run_ip("netns", "add", name)
    run_ip("-n", name, "link", "set", "lo", "up")


class _Libc:
    _lib = None

    @classmethod
    def setns(cls, fd: int, nstype: int) -> None:
        if cls._lib is None:
            lib = ctypes.CDLL(None, use_errno=True)
            lib.setns.argtypes = (ctypes.c_int, ctypes.c_int)
            lib.setns.restype = ctypes.c_int
            cls._lib = lib
        if cls._lib.setns(fd, nstype) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns: {os.strerror(err)}")


def open_tun_in_netns(ns_name: str, tun_name: str) -> int:
    """Create TUN device ``tun_name`` inside namespace ``ns_name``; return its fd.

    setns() switches only the calling thread. The device is created in the
    thread's namespace at TUNSETIFF time and stays there; the fd remains
    usable after switching back.
    """
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        target = os.open(os.path.join("/var/run/netns", ns_name), os.O_RDONLY | os.O_CLOEXEC)
        try:
            _Libc.setns(target, CLONE_NEWNET)
        finally:
            os.close(target)
        try:
            fd = os.open("/dev/net/tun", os.O_RDWR | os.O_CLOEXEC)
            try:
                ifr = struct.pack(f"{IFNAMSIZ}sH22x", tun_name.encode(), IFF_TUN | IFF_NO_PI)
                fcntl.ioctl(fd, TUNSETIFF, ifr)
            except BaseException:
                os.close(fd)
                raise
        finally:
            # Must succeed, or the rest of the relay would run in the wrong namespace.
            _Libc.setns(home, CLONE_NEWNET)
    finally:
        os.close(home)
    os.set_blocking(fd, False)
    return fd


def setup_side(ns: str, tun_name: str, ip: str, mtu: int) -> int:
    try:
        fd = open_tun_in_netns(ns, tun_name)
    except OSError as exc:
        raise SetupError(f"cannot create TUN device {tun_name} in namespace {ns}: {exc}") from exc
    try:
        run_ip("-n", ns, "link", "set", "dev", tun_name, "mtu", str(mtu),
               "txqueuelen", str(TXQUEUELEN))
        # No IPv6 link-local address: keeps router solicitations/MLD off the link.
        run_ip("-n", ns, "link", "set", "dev", tun_name, "addrgenmode", "none", check=False)
        run_ip("-n", ns, "addr", "add", f"{ip}/24", "dev", tun_name)
        run_ip("-n", ns, "link", "set", "dev", tun_name, "up")
    except BaseException:
        os.close(fd)
        raise
    return fd


# --------------------------------------------------------------------------
# Relay


class Relay:
    def __init__(self, client_fd: int, server_fd: int, delay_s: float):
        self.delay = delay_s
        # fd -> (destination fd, direction name)
        self.routes = {client_fd: (server_fd, "to-server"),
                       server_fd: (client_fd, "to-client")}
        self.stats = {d: {"packets": 0, "bytes": 0, "write_errors": 0, "max_queued": 0}
                      for d in ("to-server", "to-client")}
        self.queued = {"to-server": 0, "to-client": 0}
        self.heap: list = []  # (due, seq, dst_fd, direction, packet)
        self.seq = 0
        self.stop = False

    def _on_signal(self, signum, frame):
        self.stop = True

    def _write(self, dst: int, direction: str, packet: bytes) -> None:
        try:
            os.write(dst, packet)
        except OSError as exc:
            # A TUN write only fails for malformed packets or a vanished
            # device; count it and keep relaying.
            self.stats[direction]["write_errors"] += 1
            if self.stats[direction]["write_errors"] <= 5:
                print(f"braid_tun_delay: {direction} write failed: {exc}", file=sys.stderr)
        st = self.stats[direction]
        st["packets"] += 1
        st["bytes"] += len(packet)

    def _drain(self, src: int) -> None:
        dst, direction = self.routes[src]
        read = os.read
        for _ in range(MAX_BATCH):
            try:
                packet = read(src, READ_SIZE)
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                raise
            if not packet:
                return
            if self.delay <= 0 and not self.queued[direction]:
                self._write(dst, direction, packet)
                continue
            self.seq += 1
            heapq.heappush(self.heap, (time.monotonic() + self.delay, self.seq, dst, direction, packet))
            q = self.queued[direction] = self.queued[direction] + 1
            if q > self.stats[direction]["max_queued"]:
                self.stats[direction]["max_queued"] = q

    def _flush_due(self) -> None:
        heap = self.heap
        now = time.monotonic()
        while heap and heap[0][0] <= now:
            _, _, dst, direction, packet = heapq.heappop(heap)
            self.queued[direction] -= 1
            self._write(dst, direction, packet)

    def run(self) -> None:
        wake_r, wake_w = socket.socketpair()
        wake_r.setblocking(False)
        wake_w.setblocking(False)
        old_wakeup = signal.set_wakeup_fd(wake_w.fileno(), warn_on_full_buffer=False)
        old_handlers = {sig: signal.signal(sig, self._on_signal)
                        for sig in (signal.SIGTERM, signal.SIGINT)}
        sel = selectors.DefaultSelector()
        try:
            for fd in self.routes:
                sel.register(fd, selectors.EVENT_READ)
            sel.register(wake_r, selectors.EVENT_READ)
            while not self.stop:
                if self.heap:
                    timeout = max(0.0, self.heap[0][0] - time.monotonic())
                else:
                    timeout = None
                events = sel.select(timeout)
                for key, _ in events:
                    if key.fileobj is wake_r:
                        try:
                            while wake_r.recv(4096):
                                pass
                        except BlockingIOError:
                            pass
                    else:
                        self._drain(key.fd)
                self._flush_due()
        finally:
            sel.close()
            signal.set_wakeup_fd(old_wakeup)
            for sig, handler in old_handlers.items():
                signal.signal(sig, handler)
            wake_r.close()
            wake_w.close()


# --------------------------------------------------------------------------
# Command line


def non_negative(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def ipv4(text: str) -> str:
    try:
        return str(ipaddress.IPv4Address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an IPv4 address: {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="Delay all IP traffic between two network namespaces via TUN devices.",
        epilog="Prints 'ready <client-ns> <client-ip> <server-ns> <server-ip>' once up.",
    )
    p.add_argument("--delay-ms", type=non_negative, default=0.0,
                   help="one-way delay in each direction (RTT = 2x)")
    p.add_argument("--client-ns", default="braid-client")
    p.add_argument("--server-ns", default="braid-server")
    p.add_argument("--client-ip", type=ipv4, default="10.77.0.1")
    p.add_argument("--server-ip", type=ipv4, default="10.77.0.2")
    p.add_argument("--tun-name", default="btun0", help="TUN device name in both namespaces")
    p.add_argument("--mtu", type=int, default=1500)
    return p


def parse_args(argv=None) -> argparse.Namespace:
    p = build_parser()
    args = p.parse_args(argv)
    if args.client_ns == args.server_ns:
        p.error("--client-ns and --server-ns must differ")
    for ns in (args.client_ns, args.server_ns):
        if not ns or "/" in ns or ns in (".", ".."):
            p.error(f"invalid namespace name {ns!r}")
    if args.client_ip == args.server_ip:
        p.error("--client-ip and --server-ip must differ")
    net = ipaddress.IPv4Network(f"{args.client_ip}/24", strict=False)
    if ipaddress.IPv4Address(args.server_ip) not in net:
        p.error(f"--server-ip must be in the client's /24 ({net})")
    if not 0 < len(args.tun_name.encode()) < IFNAMSIZ or "/" in args.tun_name:
        p.error(f"invalid TUN device name {args.tun_name!r}")
    if not 68 <= args.mtu <= 65535:
        p.error("--mtu must be in [68, 65535]")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    names = (args.client_ns, args.server_ns)
    fds: list[int] = []
    relay = None
    # Until the relay installs its own handlers, turn SIGTERM into an
    # exception so that a kill during setup still cleans up.
    def early_stop(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, early_stop)
    rc = 0
    try:
        for ns in names:
            create_netns(ns)
        fds.append(setup_side(args.client_ns, args.tun_name, args.client_ip, args.mtu))
        fds.append(setup_side(args.server_ns, args.tun_name, args.server_ip, args.mtu))
        relay = Relay(fds[0], fds[1], args.delay_ms / 1000.0)
        print(f"ready {args.client_ns} {args.client_ip} {args.server_ns} {args.server_ip}",
              flush=True)
        relay.run()
    except KeyboardInterrupt:
        pass
    except SetupError as exc:
        print(f"braid_tun_delay: {exc}", file=sys.stderr)
        rc = 1
    except Exception as exc:  # noqa: BLE001 - report, clean up, exit non-zero
        print(f"braid_tun_delay: error: {exc!r}", file=sys.stderr)
        rc = 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # Close the TUN fds first: the devices (and their references to the
        # namespaces) go away with them.
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass
        for ns in names:
            delete_netns(ns)
        if relay is not None:
            print(json.dumps({"delay_ms": args.delay_ms, **relay.stats}), file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
