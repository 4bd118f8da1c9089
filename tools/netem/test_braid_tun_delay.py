"""Behavioural tests for braid_tun_delay.py (TUN-based IP delay between namespaces).

The tool is started as a subprocess; a TCP+UDP echo server runs inside the
server namespace and probe clients run inside the client namespace, both via
``ip netns exec``. Only lower bounds on delays are asserted.

Needs root, iproute2 and /dev/net/tun. Where namespaces or TUN devices cannot
be created the tests FAIL (they do not skip): the benchmarks rely on them.

Run from the repository root:
    python3 -m unittest discover -s tools/netem -p 'test_*.py'
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import unittest

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "braid_tun_delay.py")
DELAY_MS = 10
RTT_S = 2 * DELAY_MS / 1000.0
START_TIMEOUT_S = 15.0

# Echo server for the server namespace: TCP and UDP on ephemeral ports,
# prints "ports <tcp> <udp>" once listening.
SERVER_SCRIPT = r"""
import socket, sys, threading
tcp = socket.socket()
tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
tcp.bind(("0.0.0.0", 0))
tcp.listen(16)
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind(("0.0.0.0", 0))
def udp_loop():
    while True:
        data, addr = udp.recvfrom(65535)
        udp.sendto(data, addr)
def handle(conn):
    with conn:
        while True:
            data = conn.recv(65536)
            if not data:
                return
            conn.sendall(data)
threading.Thread(target=udp_loop, daemon=True).start()
print("ports", tcp.getsockname()[1], udp.getsockname()[1], flush=True)
while True:
    conn, _ = tcp.accept()
    threading.Thread(target=handle, args=(conn,), daemon=True).start()
"""

# Probe for the client namespace. argv: mode server_ip tcp_port udp_port.
# Prints one JSON object.
CLIENT_SCRIPT = r"""
import json, os, socket, sys, time
mode, ip, tcp_port, udp_port = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
out = {}
if mode == "connect":
    samples = []
    for _ in range(3):
        t0 = time.monotonic()
        s = socket.create_connection((ip, tcp_port), timeout=5)
        samples.append(time.monotonic() - t0)
        s.close()
    out["connect_s"] = samples
elif mode == "udp":
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.settimeout(5)
    samples, intact = [], True
    for i in range(3):
        payload = os.urandom(1200)
        t0 = time.monotonic()
        u.sendto(payload, (ip, udp_port))
        data = u.recv(65535)
        samples.append(time.monotonic() - t0)
        intact = intact and data == payload
    out["udp_rtt_s"] = samples
    out["udp_intact"] = intact
elif mode == "tcp_echo":
    payload = os.urandom(300_000)
    s = socket.create_connection((ip, tcp_port), timeout=10)
    t0 = time.monotonic()
    s.sendall(payload[:100])
    first = b""
    while len(first) < 100:
        chunk = s.recv(100 - len(first))
        if not chunk:
            break
        first += chunk
    out["echo_rtt_s"] = time.monotonic() - t0
    s.sendall(payload[100:])
    s.shutdown(socket.SHUT_WR)
    rest = bytearray()
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        rest += chunk
    out["tcp_intact"] = first + bytes(rest) == payload
    out["tcp_len"] = len(first) + len(rest)
elif mode == "loopback":
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen()
    c = socket.create_connection(ls.getsockname(), timeout=5)
    a, _ = ls.accept()
    c.sendall(b"lo-ping")
    out["loopback_ok"] = a.recv(100) == b"lo-ping"
print(json.dumps(out), flush=True)
"""


def netns_list() -> list:
    try:
        proc = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    except FileNotFoundError:
        return []
    return [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]


def check_prerequisites():
    problems = []
    if os.geteuid() != 0:
        problems.append("not running as root")
    if shutil.which("ip") is None:
        problems.append("'ip' (iproute2) not found")
    if not os.path.exists("/dev/net/tun"):
        problems.append("/dev/net/tun missing")
    if problems:
        raise AssertionError("braid_tun_delay needs network namespaces and TUN devices: "
                             + "; ".join(problems))


def start_tool(client_ns, server_ns, delay_ms=DELAY_MS):
    """Start the tool; return (proc, ready_line). Raises AssertionError with stderr."""
    check_prerequisites()
    proc = subprocess.Popen(
        [sys.executable, TOOL, "--delay-ms", str(delay_ms),
         "--client-ns", client_ns, "--server-ns", server_ns],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()  # the tool either prints "ready" or exits
    if not line.startswith("ready "):
        try:
            proc.wait(timeout=START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        err = proc.stderr.read()
        raise AssertionError(
            "braid_tun_delay could not set up namespaces/TUN devices on this machine "
            f"(exit {proc.returncode}, stdout {line!r}):\n{err}")
    return proc, line.strip()


def stop_tool(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    err = proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    return proc.returncode, err


def force_delete(*names):
    present = netns_list()
    for name in names:
        if name in present:
            subprocess.run(["ip", "netns", "delete", name], capture_output=True)


class TunDelayTest(unittest.TestCase):
    client_ns = f"braidt-c{os.getpid()}"
    server_ns = f"braidt-s{os.getpid()}"
    server_ip = "10.77.0.2"

    @classmethod
    def setUpClass(cls):
        cls.tool = None
        cls.server = None
        try:
            cls.tool, cls.ready = start_tool(cls.client_ns, cls.server_ns)
            cls.server = subprocess.Popen(
                ["ip", "netns", "exec", cls.server_ns, sys.executable, "-c", SERVER_SCRIPT],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True)
            line = cls.server.stdout.readline().split()
            if len(line) != 3 or line[0] != "ports":
                raise AssertionError(f"echo server in {cls.server_ns} did not start: "
                                     f"{cls.server.stderr.read() if cls.server.poll() is not None else line}")
            cls.tcp_port, cls.udp_port = int(line[1]), int(line[2])
        except BaseException:
            cls._cleanup()
            raise

    @classmethod
    def _cleanup(cls):
        if cls.server is not None:
            cls.server.kill()
            cls.server.wait()
            cls.server.stdout.close()
            cls.server.stderr.close()
        if cls.tool is not None:
            stop_tool(cls.tool)
        force_delete(cls.client_ns, cls.server_ns)

    @classmethod
    def tearDownClass(cls):
        cls._cleanup()

    def probe(self, mode):
        proc = subprocess.run(
            ["ip", "netns", "exec", self.client_ns, sys.executable, "-c", CLIENT_SCRIPT,
             mode, self.server_ip, str(self.tcp_port), str(self.udp_port)],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
        self.assertEqual(proc.returncode, 0, f"probe {mode} failed:\n{proc.stderr}")
        return json.loads(proc.stdout)

    def test_ready_line(self):
        self.assertEqual(
            self.ready, f"ready {self.client_ns} 10.77.0.1 {self.server_ns} {self.server_ip}")
        names = netns_list()
        self.assertIn(self.client_ns, names)
        self.assertIn(self.server_ns, names)

    def test_tcp_connect_takes_one_rtt(self):
        for sample in self.probe("connect")["connect_s"]:
            self.assertGreaterEqual(sample, RTT_S, f"TCP connect took {sample * 1e3:.2f} ms")

    def test_udp_echo_round_trip(self):
        out = self.probe("udp")
        self.assertTrue(out["udp_intact"], "UDP payload did not echo intact")
        for sample in out["udp_rtt_s"]:
            self.assertGreaterEqual(sample, RTT_S, f"UDP RTT was {sample * 1e3:.2f} ms")

    def test_tcp_echo_intact(self):
        out = self.probe("tcp_echo")
        self.assertEqual(out["tcp_len"], 300_000)
        self.assertTrue(out["tcp_intact"], "TCP bytes did not echo intact")
        self.assertGreaterEqual(out["echo_rtt_s"], RTT_S)

    def test_loopback_inside_namespace(self):
        self.assertTrue(self.probe("loopback")["loopback_ok"])


class TunDelayLifecycleTest(unittest.TestCase):
    def test_replaces_leftovers_and_cleans_up_on_sigterm(self):
        client_ns = f"braidt-lc{os.getpid()}"
        server_ns = f"braidt-ls{os.getpid()}"
        check_prerequisites()
        # Simulate a crashed earlier run that left a namespace behind.
        subprocess.run(["ip", "netns", "add", client_ns], capture_output=True)
        proc = None
        try:
            proc, ready = start_tool(client_ns, server_ns, delay_ms=1)
            self.assertTrue(ready.startswith(f"ready {client_ns} "))
            names = netns_list()
            self.assertIn(client_ns, names)
            self.assertIn(server_ns, names)
            links = subprocess.run(["ip", "-n", client_ns, "-o", "link", "show", "btun0"],
                                   capture_output=True, text=True)
            self.assertIn("btun0", links.stdout, links.stderr)
            self.assertIn("mtu 1500", links.stdout)
            rc, err = stop_tool(proc)
            proc = None
            self.assertEqual(rc, 0, err)
            names = netns_list()
            self.assertNotIn(client_ns, names, "client namespace left behind after SIGTERM")
            self.assertNotIn(server_ns, names, "server namespace left behind after SIGTERM")
        finally:
            if proc is not None:
                stop_tool(proc)
            force_delete(client_ns, server_ns)


if __name__ == "__main__":
    unittest.main()
