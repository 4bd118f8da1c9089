#!/usr/bin/env python3
"""Braid's hostile-peer suite, long form: `braid serve` (a release build) against the hostile
clients of Tests/Interop/peers/hostile_peer.py, each scenario with its bound checked on the
server's resident memory (RSS) and on what legitimate clients see. Run it with
tools/run-hostile-suite.sh, which builds what it needs; the short form runs in the test suite
(HostilePeerTests, ServerLimitsTests, ViolationTests), on the listener's live counters.

Scenarios (the hostile-peer targets):

flood       decryptable Initials (one real ClientHello, a fresh connection ID each) at --rate
            per second for --seconds: the server's RSS stays under 256 MiB, an echo client run
            during the flood succeeds, and 15 s after the flood RSS is back within 10% of the
            baseline (the flood's half-open handshakes end at the 10 s handshake timeout).
abandoned   --rounds rounds of 2,000 Initials as fast as they go, 12 s apart (past the
            handshake timeout), with automatic Retry off so each round fills the half-open
            table: no RSS growth after the second round (each later round's peak within 10% of
            the second's).
starve      ten clients at once, each opening 100 perf streams that ask for 1 GB and never
            granting credit: the server's RSS grows by at most the connection send budget
            (16 MiB) plus 4 MiB per client.
killed      a perf download killed (SIGKILL) mid-transfer: the next client is served.
rapid-reset the "rapid reset" attack on `braid serve --alpn h3`: --attackers clients at once,
            each opening HTTP/3 requests and resetting them once taken
            (Tests/Interop/peers/aioquic_h3_hostile.py --mode rapid-reset), reconnecting as
            soon as they are closed, for --seconds: every attacking connection is closed with
            H3_EXCESSIVE_LOAD before 1,000 resets, the server's RSS grows by less than 64 MiB,
            and `braid get` is served during the attack.

Prints one line per check and a JSON summary; exits 1 if any bound is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "Tests", "BraidTests", "Fixtures")
PEER = os.path.join(ROOT, "Tests", "Interop", "peers", "hostile_peer.py")
H3_PEER = os.path.join(ROOT, "Tests", "Interop", "peers", "aioquic_h3_hostile.py")
H3_EXCESSIVE_LOAD = 0x107
MIB = 1024 * 1024


def rss(pid: int) -> int:
    """Resident memory of `pid`, in bytes."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


class Server:
    """`braid serve` on a system-chosen port of 127.0.0.1, with extra arguments."""

    def __init__(self, braid: str, *extra: str) -> None:
        self.process = subprocess.Popen(
            [braid, "serve", "--host", "127.0.0.1", "--port", "0", "--cert", f"{FIXTURES}/server.pem",
             "--key", f"{FIXTURES}/server-key.pem", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.process.stdout.readline()
        if not line.startswith("listening "):
            raise RuntimeError(f"braid serve did not start: {line!r}")
        self.port = int(line.split()[1])

    @property
    def rss(self) -> int:
        return rss(self.process.pid)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Suite:
    def __init__(self, braid: str, python: str) -> None:
        self.braid = braid
        self.python = python
        self.results: list[dict] = []

    def check(self, scenario: str, what: str, ok: bool, measured: str) -> None:
        print(f"{'ok    ' if ok else 'MISSED'} {scenario:10} {what}: {measured}", flush=True)
        self.results.append({"scenario": scenario, "check": what, "ok": ok, "measured": measured})

    def peer(self, server: Server, *args: str, timeout: float = 120) -> dict:
        done = subprocess.run(
            [self.python, PEER, "--host", "127.0.0.1", "--port", str(server.port), "--ca", f"{FIXTURES}/ca.pem",
             "--sni", "localhost", *args], capture_output=True, text=True, timeout=timeout)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if not lines:
            raise RuntimeError(f"hostile_peer.py {' '.join(args)} printed nothing: {done.stderr[-400:]}")
        return json.loads(lines[-1])

    def client(self, server: Server, *args: str, timeout: float = 60) -> bool:
        done = subprocess.run(
            [self.braid, "client", "--host", "127.0.0.1", "--port", str(server.port), "--ca", f"{FIXTURES}/ca.pem",
             "--sni", "localhost", *args], capture_output=True, text=True, timeout=timeout)
        return done.returncode == 0

    def echo(self, server: Server) -> bool:
        return self.client(server, "--alpn", "echo", "--bytes", "100000", "--timeout", "20")

    def flood(self, rate: float, seconds: float) -> None:
        server = Server(self.braid)
        try:
            self.echo(server)
            time.sleep(1)
            baseline = server.rss
            peak = baseline
            stop = threading.Event()

            def sample() -> None:
                nonlocal peak
                while not stop.is_set():
                    peak = max(peak, server.rss)
                    time.sleep(0.1)

            sampler = threading.Thread(target=sample)
            sampler.start()
            # Two flooding processes (one Python process makes about 10,000 a second here).
            flooders = [subprocess.Popen(
                [self.python, PEER, "--host", "127.0.0.1", "--port", str(server.port), "--ca", f"{FIXTURES}/ca.pem",
                 "--sni", "localhost", "--alpn", "perf", "--flood", str(int(rate * seconds / 2)), "--rate", str(rate / 2)],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) for _ in range(2)]
            time.sleep(min(1.0, seconds / 2))
            served = self.echo(server)
            reports = []
            for flooder in flooders:
                out, _ = flooder.communicate(timeout=seconds * 10 + 60)
                reports.append(json.loads([line for line in out.splitlines() if line.startswith("{")][-1]))
            report = {"datagrams": sum(r["datagrams"] for r in reports), "seconds": max(r["seconds"] for r in reports),
                      "retries": sum(r["retries"] for r in reports)}
            report["rate"] = report["datagrams"] / report["seconds"]
            stop.set()
            sampler.join()
            time.sleep(15)
            after = server.rss
            self.check("flood", "Initials sent, rate reached", report["rate"] >= 0.9 * rate,
                       f"{report['datagrams']} in {report['seconds']:.1f} s, {report['rate']:.0f}/s "
                       f"({report['retries']} Retry packets back)")
            self.check("flood", "RSS during the flood < 256 MiB", peak < 256 * MIB,
                       f"peak {peak / MIB:.1f} MiB (baseline {baseline / MIB:.1f} MiB)")
            self.check("flood", "a legitimate client is served during the flood", served, "echo ok" if served else "echo failed")
            self.check("flood", "RSS 15 s after within 10% of the baseline", after <= baseline * 1.1,
                       f"{after / MIB:.1f} MiB ({after / baseline:.2f}x)")
        finally:
            server.stop()

    def abandoned(self, rounds: int) -> None:
        server = Server(self.braid, "--retry-threshold", "1000000")
        try:
            peaks = []
            for _ in range(rounds):
                self.peer(server, "--alpn", "perf", "--flood", "2000", "--rate", "0")
                peaks.append(server.rss)
                time.sleep(12)
            grown = [peak / peaks[1] for peak in peaks[2:]] if rounds > 2 else []
            self.check("abandoned", "no RSS growth after the second round (each later peak within 10%)",
                       all(ratio <= 1.1 for ratio in grown),
                       "peaks " + ", ".join(f"{peak / MIB:.1f}" for peak in peaks) + " MiB")
            served = self.echo(server)
            self.check("abandoned", "a client is served after the rounds", served, "echo ok" if served else "echo failed")
        finally:
            server.stop()

    def starve(self, clients: int) -> None:
        server = Server(self.braid)
        try:
            self.echo(server)
            time.sleep(1)
            baseline = server.rss
            starving = [subprocess.Popen(
                [self.python, PEER, "--host", "127.0.0.1", "--port", str(server.port), "--ca", f"{FIXTURES}/ca.pem",
                 "--sni", "localhost", "--alpn", "perf", "--starve", "100", "--hold", "10"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) for _ in range(clients)]
            time.sleep(8)
            held = server.rss
            served = self.echo(server)
            for process in starving:
                process.communicate(timeout=60)
            bound = clients * (16 + 4) * MIB
            self.check("starve", f"RSS growth with {clients} starving clients <= {clients} x (16 + 4) MiB",
                       held - baseline <= bound, f"{(held - baseline) / MIB:.1f} MiB ({(held - baseline) / clients / MIB:.1f} per client)")
            self.check("starve", "a legitimate client is served meanwhile", served, "echo ok" if served else "echo failed")
        finally:
            server.stop()

    def killed(self) -> None:
        server = Server(self.braid)
        try:
            download = subprocess.Popen(
                [self.braid, "client", "--host", "127.0.0.1", "--port", str(server.port), "--ca", f"{FIXTURES}/ca.pem",
                 "--sni", "localhost", "--alpn", "perf", "--download", "10000000000"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.5)
            download.kill()
            download.wait()
            served = self.echo(server)
            self.check("killed", "the next client is served after a client killed mid-download", served,
                       "echo ok" if served else "echo failed")
        finally:
            server.stop()


    def rapid_reset(self, attackers: int, seconds: float) -> None:
        root = tempfile.mkdtemp(prefix="braid-h3-root-")
        server = Server(self.braid, "--alpn", "h3", "--root", root)
        try:
            def get() -> bool:
                done = subprocess.run(
                    [self.braid, "get", f"https://localhost:{server.port}/1000", "--ca", f"{FIXTURES}/ca.pem", "--output", os.devnull,
                     "--timeout", "20"], capture_output=True, text=True, timeout=60)
                return done.returncode == 0

            get()
            time.sleep(1)
            baseline = server.rss
            peak = baseline
            reports: list[dict] = []
            stop = threading.Event()
            lock = threading.Lock()

            def attack() -> None:
                while not stop.is_set():
                    done = subprocess.run(
                        [self.python, H3_PEER, "client", "--mode", "rapid-reset", "--port", str(server.port), "--ca", f"{FIXTURES}/ca.pem",
                         "--sni", "localhost", "--count", "100000", "--timeout", "30"], capture_output=True, text=True, timeout=120)
                    lines = [line for line in done.stdout.splitlines() if line.startswith("{") and "closed" in line]
                    with lock:
                        reports.append(json.loads(lines[-1]) if lines else {"closed": None, "resets": None})

            threads = [threading.Thread(target=attack) for _ in range(attackers)]
            for thread in threads:
                thread.start()
            deadline = time.monotonic() + seconds
            served = None
            while time.monotonic() < deadline:
                peak = max(peak, server.rss)
                if served is None and time.monotonic() > deadline - seconds / 2:
                    served = get()
                time.sleep(0.1)
            stop.set()
            for thread in threads:
                thread.join()
            peak = max(peak, server.rss)
            closed = [report for report in reports if report.get("closed") == H3_EXCESSIVE_LOAD and (report.get("resets") or 0) < 1000]
            resets = sum(report.get("resets") or 0 for report in reports)
            self.check("rapid-reset", "each attacking connection closed with H3_EXCESSIVE_LOAD before 1,000 resets",
                       bool(reports) and len(closed) == len(reports),
                       f"{len(closed)} of {len(reports)} connections, {resets} resets in all ({resets / seconds:.0f}/s)")
            self.check("rapid-reset", "RSS growth during the attack < 64 MiB", peak - baseline < 64 * MIB,
                       f"peak {peak / MIB:.1f} MiB (baseline {baseline / MIB:.1f} MiB)")
            self.check("rapid-reset", "a legitimate client is served during the attack", bool(served), "get ok" if served else "get failed")
        finally:
            server.stop()
            shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--braid", default=os.path.join(ROOT, ".build", "release", "braid"))
    parser.add_argument("--python", default=os.path.join(ROOT, ".build-python", "bin", "python3"))
    parser.add_argument("--rate", type=float, default=20000, help="flood: Initials per second")
    parser.add_argument("--seconds", type=float, default=5, help="flood: how long")
    parser.add_argument("--rounds", type=int, default=5, help="abandoned: rounds")
    parser.add_argument("--attackers", type=int, default=4, help="rapid-reset: attacking clients at once")
    parser.add_argument("--only", help="comma-separated scenarios (flood, abandoned, starve, killed, rapid-reset)")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args(argv)
    suite = Suite(args.braid, args.python)
    chosen = set(args.only.split(",")) if args.only else {"flood", "abandoned", "starve", "killed", "rapid-reset"}
    if "flood" in chosen:
        suite.flood(args.rate, args.seconds)
    if "abandoned" in chosen:
        suite.abandoned(args.rounds)
    if "starve" in chosen:
        suite.starve(10)
    if "killed" in chosen:
        suite.killed()
    if "rapid-reset" in chosen:
        suite.rapid_reset(args.attackers, max(args.seconds, 10))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(suite.results, out, indent=1)
    missed = [result for result in suite.results if not result["ok"]]
    print(f"{len(suite.results) - len(missed)} of {len(suite.results)} checks met", flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
