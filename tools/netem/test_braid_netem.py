"""Behavioural tests for braid_netem.py.

Each test runs the relay as a subprocess in front of a UDP echo server living
in a thread and checks what actually comes out of it.

Run from the repository root:
    python3 -m unittest discover -s tools/netem -p 'test_*.py'
"""

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

RELAY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "braid_netem.py")
HEADER = struct.Struct("!I")  # sequence number at the start of every payload


def payload(seq: int, size: int = 100) -> bytes:
    body = bytes((seq * 7 + i) & 0xFF for i in range(size - HEADER.size))
    return HEADER.pack(seq) + body


def seq_of(data: bytes) -> int:
    return HEADER.unpack_from(data)[0]


def make_udp_socket(family=socket.AF_INET, host="127.0.0.1") -> socket.socket:
    s = socket.socket(family, socket.SOCK_DGRAM)
    for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
        try:
            s.setsockopt(socket.SOL_SOCKET, opt, 4 * 1024 * 1024)
        except OSError:
            pass
    s.bind((host, 0))
    return s


class EchoServer:
    """Echoes every datagram back to its sender and records what it saw."""

    def __init__(self, echo: bool = True):
        self.sock = make_udp_socket()
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.echo = echo
        self.lock = threading.Lock()
        self.received = []  # (payload, source address) in arrival order
        self._stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self._stop:
            try:
                data, addr = self.sock.recvfrom(65535)
            except socket.timeout:
                continue
            except OSError:
                if self._stop:
                    return
                continue
            with self.lock:
                self.received.append((data, addr))
            if self.echo:
                self.sock.sendto(data, addr)

    def count(self) -> int:
        with self.lock:
            return len(self.received)

    def seqs(self) -> list:
        with self.lock:
            return [seq_of(d) for d, _ in self.received]

    def wait_quiet(self, quiet: float = 0.3, limit: float = 10.0) -> None:
        """Wait until no new datagram has arrived for `quiet` seconds."""
        deadline = time.monotonic() + limit
        last, since = -1, time.monotonic()
        while time.monotonic() < deadline:
            n = self.count()
            if n != last:
                last, since = n, time.monotonic()
            elif time.monotonic() - since >= quiet:
                return
            time.sleep(0.02)

    def close(self):
        self._stop = True
        self.thread.join(timeout=2)
        self.sock.close()


class Relay:
    """The relay subprocess; stop() returns the stats it wrote."""

    def __init__(self, upstream_port: int, *args: str, listen: str = "127.0.0.1:0"):
        fd, self.stats_path = tempfile.mkstemp(prefix="netem-stats-", suffix=".json")
        os.close(fd)
        cmd = [sys.executable, RELAY, "--listen", listen,
               "--upstream", f"127.0.0.1:{upstream_port}", "--stats", self.stats_path, *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("listening "):
            self.proc.kill()
            raise RuntimeError(f"relay failed to start: {line!r} {self.proc.stderr.read()}")
        self.port = int(line.split()[1])

    def stop(self) -> dict:
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=10)
        assert self.proc.returncode == 0, err
        assert out == "", f"unexpected stdout: {out!r}"
        with open(self.stats_path, encoding="utf-8") as f:
            stats = json.load(f)
        os.unlink(self.stats_path)
        assert json.loads(err) == stats, "stderr JSON differs from stats file"
        return stats

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
        if os.path.exists(self.stats_path):
            os.unlink(self.stats_path)


class RelayTestCase(unittest.TestCase):
    def setUp(self):
        self.server = EchoServer()
        self.addCleanup(self.server.close)
        self.client = make_udp_socket()
        self.addCleanup(self.client.close)

    def start_relay(self, *args, **kw) -> Relay:
        relay = Relay(self.server.port, *args, **kw)
        self.addCleanup(relay.kill)
        self.relay_addr = ("127.0.0.1", relay.port)
        return relay

    def send(self, data: bytes, sock=None):
        (sock or self.client).sendto(data, self.relay_addr)

    def recv_all(self, expected: int, sock=None, timeout: float = 3.0, quiet: float = 0.3):
        """Collect datagrams until `expected` arrived or nothing came for `quiet` s."""
        sock = sock or self.client
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < expected and time.monotonic() < deadline:
            sock.settimeout(quiet)
            try:
                got.append(sock.recvfrom(65535)[0])
            except socket.timeout:
                break
        return got

    def send_one_way(self, relay_args, n, size=100):
        """Send n sequenced datagrams; return (seqs seen by server, stats)."""
        relay = self.start_relay("--direction", "to-server", *relay_args)
        for i in range(n):
            self.send(payload(i, size))
            if i % 200 == 199:
                time.sleep(0.002)  # keep well inside socket buffers
        self.server.wait_quiet()
        stats = relay.stop()
        seqs = self.server.seqs()
        self.assertEqual(stats["to-server"]["packets_received"], n)
        self.assertEqual(stats["to-server"]["packets_forwarded"], len(seqs))
        return seqs, stats


class TestForwarding(RelayTestCase):
    def test_plain_forwarding_intact_and_in_order(self):
        relay = self.start_relay()
        sent = [payload(i, 20 + (i * 37) % 1180) for i in range(200)]
        for p in sent:
            self.send(p)
        got = self.recv_all(200)
        self.assertEqual(got, sent)
        stats = relay.stop()
        for d in ("to-server", "to-client"):
            self.assertEqual(stats[d]["packets_forwarded"], 200)
            self.assertEqual(stats[d]["bytes_forwarded"], sum(map(len, sent)))

    def test_second_client_port_gets_its_own_upstream_port(self):
        relay = self.start_relay()
        other = make_udp_socket()
        self.addCleanup(other.close)
        self.send(b"from-a")
        self.send(b"from-b", sock=other)
        self.assertEqual(self.recv_all(1), [b"from-a"])
        self.assertEqual(self.recv_all(1, sock=other), [b"from-b"])
        # A second datagram from client A reuses A's upstream port.
        self.send(b"from-a-again")
        self.assertEqual(self.recv_all(1), [b"from-a-again"])
        sources = {data: addr for data, addr in self.server.received}
        self.assertNotEqual(sources[b"from-a"][1], sources[b"from-b"][1])
        self.assertEqual(sources[b"from-a"], sources[b"from-a-again"])
        self.assertNotIn(relay.port, (sources[b"from-a"][1], sources[b"from-b"][1]))
        self.assertEqual(relay.stop()["clients"], 2)

    def test_ipv6_listen_literal(self):
        if not socket.has_ipv6:
            self.skipTest("no IPv6")
        try:
            client6 = make_udp_socket(socket.AF_INET6, "::1")
        except OSError:
            self.skipTest("no IPv6 loopback")
        self.addCleanup(client6.close)
        relay = self.start_relay(listen="[::1]:0")
        client6.sendto(b"v6", ("::1", relay.port))
        self.assertEqual(self.recv_all(1, sock=client6), [b"v6"])

    def test_survives_icmp_port_unreachable(self):
        # Upstream port with nothing listening: sends/receives get ECONNREFUSED.
        dead = make_udp_socket()
        dead_port = dead.getsockname()[1]
        dead.close()
        relay = Relay(dead_port)
        self.addCleanup(relay.kill)
        self.relay_addr = ("127.0.0.1", relay.port)
        for i in range(20):
            self.send(payload(i))
            time.sleep(0.005)
        time.sleep(0.1)
        self.assertIsNone(relay.proc.poll(), "relay died")
        stats = relay.stop()
        self.assertEqual(stats["to-server"]["packets_received"], 20)
        self.assertGreater(stats["icmp_errors"], 0)


class TestLoss(RelayTestCase):
    def test_random_loss_rate_and_determinism(self):
        n = 2000
        first, stats = self.send_one_way(["--loss", "0.2", "--seed", "7"], n)
        st = stats["to-server"]
        self.assertEqual(st["dropped_random"], n - len(first))
        self.assertEqual(st["dropped_burst"] + st["dropped_queue"] + st["send_errors"], 0)
        self.assertTrue(0.75 <= st["packets_forwarded"] / n <= 0.85, st)

        # Same seed, same sequence -> exactly the same datagrams dropped.
        self.server.close()
        self.server = EchoServer()
        self.addCleanup(self.server.close)
        second, _ = self.send_one_way(["--loss", "0.2", "--seed", "7"], n)
        self.assertEqual(sorted(first), sorted(second))

        # A different seed gives a different pattern.
        self.server.close()
        self.server = EchoServer()
        self.addCleanup(self.server.close)
        third, _ = self.send_one_way(["--loss", "0.2", "--seed", "8"], n)
        self.assertNotEqual(sorted(first), sorted(third))

    def test_burst_loss_rate_and_runs(self):
        n = 4000
        seqs, stats = self.send_one_way(["--burst-loss", "0.1", "--burst-length", "5"], n)
        self.assertEqual(stats["to-server"]["dropped_burst"], n - len(seqs))
        self.assertEqual(stats["to-server"]["dropped_random"], 0)
        lost = sorted(set(range(n)) - set(seqs))
        self.assertTrue(0.05 <= len(lost) / n <= 0.15, len(lost) / n)
        runs, prev = 0, None
        for s in lost:
            if prev is None or s != prev + 1:
                runs += 1
            prev = s
        self.assertGreater(len(lost) / runs, 2.0)

    def test_random_loss_is_not_bursty(self):
        # Control for the burst test: independent loss has mean run ~1/(1-P).
        n = 4000
        seqs, _ = self.send_one_way(["--loss", "0.1"], n)
        lost = sorted(set(range(n)) - set(seqs))
        runs = sum(1 for i, s in enumerate(lost) if i == 0 or s != lost[i - 1] + 1)
        self.assertLess(len(lost) / runs, 1.5)

    def test_direction_narrows_loss(self):
        relay = self.start_relay("--loss", "1.0", "--direction", "to-client")
        for i in range(50):
            self.send(payload(i))
        self.server.wait_quiet(quiet=0.2)
        self.assertEqual(self.recv_all(1, quiet=0.2), [])
        stats = relay.stop()
        self.assertEqual(self.server.count(), 50)
        self.assertEqual(stats["to-server"]["packets_forwarded"], 50)
        self.assertEqual(stats["to-client"]["dropped_random"], 50)


class TestCorruption(RelayTestCase):
    def test_every_datagram_has_exactly_one_flipped_bit(self):
        relay = self.start_relay("--corrupt", "1.0", "--direction", "to-server")
        sent = {i: payload(i, 200) for i in range(100)}
        for p in sent.values():
            self.send(p)
        got = self.recv_all(100)
        self.assertEqual(len(got), 100)
        flipped_positions = set()
        as_int = {i: int.from_bytes(p, "big") for i, p in sent.items()}
        for data in got:
            self.assertEqual(len(data), 200)
            # The flipped bit may be in the sequence header, so look for the
            # sent payload at Hamming distance 1 rather than trusting seq_of().
            value = int.from_bytes(data, "big")
            diffs = [value ^ v for v in as_int.values() if (value ^ v).bit_count() == 1]
            self.assertEqual(len(diffs), 1, "expected exactly one flipped bit")
            flipped_positions.add(diffs[0].bit_length())
        self.assertGreater(len(flipped_positions), 10, "bit position should be random")
        self.assertEqual(relay.stop()["to-server"]["corrupted"], 100)


class TestTiming(RelayTestCase):
    def test_delay_adds_to_rtt(self):
        delay_ms = 40
        self.start_relay("--delay-ms", str(delay_ms))
        for i in range(5):
            start = time.monotonic()
            self.send(payload(i))
            got = self.recv_all(1, timeout=2.0, quiet=1.0)
            rtt = time.monotonic() - start
            self.assertEqual(got, [payload(i)])
            self.assertGreaterEqual(rtt, 2 * delay_ms / 1000.0)

    def test_jitter_keeps_fifo(self):
        self.start_relay("--delay-ms", "2", "--jitter-ms", "30")
        for i in range(300):
            self.send(payload(i))
            if i % 20 == 0:
                time.sleep(0.002)
        got = [seq_of(d) for d in self.recv_all(300)]
        self.assertEqual(got, list(range(300)))

    def test_reordering(self):
        def inversions(seqs):
            return sum(1 for a, b in zip(seqs, seqs[1:]) if b < a)

        seqs, stats = self.send_one_way(["--reorder", "0.3", "--reorder-ms", "10"], 500)
        self.assertEqual(sorted(seqs), list(range(500)))  # held back, not lost
        self.assertGreater(inversions(seqs), 0)
        self.assertGreater(stats["to-server"]["reordered"], 0)

        self.server.close()
        self.server = EchoServer()
        self.addCleanup(self.server.close)
        seqs, stats = self.send_one_way(["--reorder", "0"], 500)
        self.assertEqual(seqs, list(range(500)))
        self.assertEqual(stats["to-server"]["reordered"], 0)

    def test_blackhole_window(self):
        relay = self.start_relay("--blackhole", "0.4:0.4", "--direction", "to-server")
        sent_at = {}
        t0 = time.monotonic()
        i = 0
        while time.monotonic() - t0 < 1.2:
            sent_at[i] = time.monotonic() - t0
            self.send(payload(i))
            i += 1
            time.sleep(0.01)
        self.server.wait_quiet(quiet=0.2)
        got = set(self.server.seqs())
        margin = 0.1  # scheduling slack between client and relay clocks
        before = [s for s, t in sent_at.items() if t < 0.4 - margin]
        inside = [s for s, t in sent_at.items() if 0.4 + margin <= t < 0.8 - margin]
        after = [s for s, t in sent_at.items() if t >= 0.8 + margin]
        self.assertTrue(before and inside and after)
        self.assertTrue(set(before) <= got, "packets before the window were lost")
        self.assertFalse(set(inside) & got, "packets inside the window got through")
        self.assertTrue(set(after) <= got, "packets after the window were lost")
        self.assertGreater(relay.stop()["to-server"]["dropped_blackhole"], 0)

    def test_rate_limit_drops_tail(self):
        # 1 Mbit/s with a 20 ms queue holds ~2.5 kB; a 100 kB burst must overflow,
        # and what gets through cannot arrive faster than the bottleneck rate.
        relay = self.start_relay("--rate-mbit", "1", "--queue-ms", "20", "--direction", "to-server")
        for i in range(100):
            self.send(payload(i, 1000))
        self.server.wait_quiet(quiet=0.2)
        stats = relay.stop()["to-server"]
        got = self.server.count()
        self.assertGreater(stats["dropped_queue"], 50)
        self.assertEqual(stats["dropped_queue"] + got, 100)
        self.assertGreaterEqual(got, 2)


if __name__ == "__main__":
    unittest.main()
