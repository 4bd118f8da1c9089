#!/usr/bin/env bash
# Interleaved A/B of two release builds of the `benchmarks` binary on Braid's TLS-over-TCP stack
# (or TCP), over loopback, driving the stream roles of Benchmarks/Harness/StreamRoles.swift the
# way the `cpu`, `throughput` and `establishment` scenarios do. The builds take turns round by
# round (A B, then B A, ...: this shared machine's speed drifts by up to half between runs; only
# interleaved rounds compare), and each round also runs the raw GnuTLS pair (with A's binary) so
# the ratios to raw that the targets name come from the same minute.
#
#   swift build -c release --product benchmarks && cp .build/release/benchmarks /tmp/A
#   ... change, rebuild, cp .build/release/benchmarks /tmp/B
#   tools/ab/tls-streams.sh /tmp/A /tmp/B [rounds]
#
# Environment: KIND=tls|tcp (default tls); TESTS="bulk handshake idle" (default: all three);
# BYTES (bulk, default 1000000000); HANDSHAKES (sequential handshakes, default 200);
# IDLE (idle connections, default 1000); LOOPS (the Braid listener's server loops in the idle
# test, default 1); RAW=0 skips the raw rows (with KIND=tcp there is a raw row for bulk only:
# the raw handshake and accept-rate rows are TLS).
#
# Per run, one line:
#   bulk:      goodput (server bytes over the client's send-and-wait time, the handshake
#              excluded) and client / server / total CPU per byte (`perf stat` task-clock of each
#              process, start-up included, as the suite's RawTransfer)
#   handshake: ready p50 and first-byte p50 of HANDSHAKES sequential connections (TCP_NODELAY)
#   idle:      connections per second opening IDLE connections 16 at a time, resident KiB per
#              idle connection on each side (RSS growth; the kernel's socket buffers are not
#              in it), and the server's CPU per connection while they opened
# At the end, the median of each metric per build, B/A, and Braid over raw.
set -euo pipefail
a=$1 b=$2 rounds=${3:-3}
kind=${KIND:-tls} tests=${TESTS:-bulk handshake idle}
bytes=${BYTES:-1000000000} handshakes=${HANDSHAKES:-200} idle=${IDLE:-1000} raw=${RAW:-1} loops=${LOOPS:-1}
here=$(cd "$(dirname "$0")/../.." && pwd)
fixtures=$here/Tests/BraidTests/Fixtures
tls_server=(--cert "$fixtures/server.pem" --key "$fixtures/server-key.pem")
out=$(mktemp -d)
results=$out/results.tsv
children=()
cleanup() {
  for pid in "${children[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  rm -rf "$out"
}
trap cleanup EXIT
: >"$results"

# Starts a server role in the background (under `perf stat` when $1 is a file name, else bare),
# waits for `listening <port>`; sets $server_pid (the role's own pid) and $port.
start_server() { # perf-file-or-"" binary role args...
  local perffile=$1 bin=$2; shift 2
  : >"$out/server.out"
  if [ -n "$perffile" ]; then
    perf stat -e task-clock -x, -o "$perffile" -- "$bin" role "$@" >"$out/server.out" 2>"$out/server.err" &
  else
    "$bin" role "$@" >"$out/server.out" 2>"$out/server.err" &
  fi
  local launched=$!
  children+=("$launched")
  for _ in $(seq 1 400); do
    port=$(sed -n 's/^listening \([0-9]*\)$/\1/p' "$out/server.out" | head -1)
    [ -n "$port" ] && break
    sleep 0.05
  done
  [ -n "$port" ] || { echo "server $* did not start: $(tail -c 400 "$out/server.err")" >&2; exit 1; }
  server_pid=$launched
  if [ -n "$perffile" ]; then server_pid=$(pgrep -P "$launched" | head -1); fi
  server_launched=$launched
}

stop_server() { # waits for the launched process; SIGTERM first unless $1 = wait
  [ "${1:-}" = wait ] || kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_launched" 2>/dev/null || true
}

task_clock_ms() { awk -F, '$3 == "task-clock" { print $1 }' "$1"; }
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

record() { # build test metric value
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$results"
}

bulk() { # label binary
  local label=$1 bin=$2 server_role=stream-server client_role=stream-client
  local client_flags=(--kind "$kind" --bytes "$bytes" --payload 65536 --ca "$fixtures/ca.pem")
  local server_flags=(--kind "$kind" --port 0 --connections 1)
  if [ "$label" = raw ]; then
    server_role=raw-server client_role=raw-client server_flags=(--kind "$kind" --port 0)
    [ "$kind" = tls ] && client_flags+=(--sni localhost)
  fi
  [ "$kind" = tls ] && server_flags+=("${tls_server[@]}")
  start_server "$out/bulk-server.perf" "$bin" "$server_role" "${server_flags[@]}"
  perf stat -e task-clock -x, -o "$out/bulk-client.perf" -- \
    "$bin" role "$client_role" --port "$port" "${client_flags[@]}" >"$out/client.out" 2>"$out/client.err" \
    || { echo "$label bulk client failed: $(tail -c 400 "$out/client.err")" >&2; exit 1; }
  stop_server wait
  python3 - "$label" "$out" "$(task_clock_ms "$out/bulk-client.perf")" "$(task_clock_ms "$out/bulk-server.perf")" "$results" <<'PY'
import json, sys
label, out, client_ms, server_ms, results = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
def last_json(path):
    return json.loads([l for l in open(path) if l.startswith("{")][-1])
client, server = last_json(f"{out}/client.out"), last_json(f"{out}/server.out")
received = server["bytes"]
gbit = received * 8 / client["seconds"] / 1e9
c, s = client_ms * 1e6 / received, server_ms * 1e6 / received
print(f"{label} bulk: {gbit:.2f} Gbit/s, cpu client {c:.3f} server {s:.3f} total {c + s:.3f} ns/B", flush=True)
with open(results, "a") as f:
    for metric, value in [("goodput Gbit/s", gbit), ("cpu client ns/B", c), ("cpu server ns/B", s), ("cpu total ns/B", c + s)]:
        f.write(f"{label}\tbulk\t{metric}\t{value}\n")
PY
}

handshake() { # label binary
  local label=$1 bin=$2
  if [ "$label" = raw ]; then
    start_server "" "$bin" raw-handshake-server --kind tls --port 0 "${tls_server[@]}"
    "$bin" role raw-handshake-client --kind tls --port "$port" --sni localhost --ca "$fixtures/ca.pem" --count "$handshakes" \
      >"$out/client.out" 2>"$out/client.err" || { echo "raw handshake client failed: $(tail -c 400 "$out/client.err")" >&2; exit 1; }
  else
    start_server "" "$bin" stream-server --kind "$kind" --port 0 --mode echo --nodelay 1 "${tls_server[@]}"
    "$bin" role stream-handshakes --kind "$kind" --port "$port" --ca "$fixtures/ca.pem" --count "$handshakes" \
      >"$out/client.out" 2>"$out/client.err" || { echo "$label handshake client failed: $(tail -c 400 "$out/client.err")" >&2; exit 1; }
  fi
  stop_server
  python3 - "$label" "$out" "$results" <<'PY'
import json, statistics, sys
label, out, results = sys.argv[1:4]
report = json.loads([l for l in open(f"{out}/client.out") if l.startswith("{")][-1])
ready = statistics.median(report["ready_ns"]) / 1e6
first = statistics.median(report["first_byte_ns"]) / 1e6
print(f"{label} handshake: ready p50 {ready:.3f} ms, first byte p50 {first:.3f} ms", flush=True)
with open(results, "a") as f:
    f.write(f"{label}\thandshake\tready p50 ms\t{ready}\n{label}\thandshake\tfirst byte p50 ms\t{first}\n")
PY
}

idle_run() { # label binary
  local label=$1 bin=$2
  if [ "$label" = raw ]; then
    # The raw rate: 16 client threads connecting, handshaking and closing in turn, 16 server threads.
    start_server "" "$bin" raw-handshake-server --kind tls --port 0 --threads 16 "${tls_server[@]}"
    local before_ticks; before_ticks=$(cpu_ticks "$server_pid")
    perf stat -e task-clock -x, -o "$out/idle-client.perf" -- "$bin" role raw-handshake-client --kind tls --port "$port" \
      --sni localhost --ca "$fixtures/ca.pem" --count "$idle" --concurrency 16 >"$out/client.out" 2>"$out/client.err" \
      || { echo "raw rate client failed: $(tail -c 400 "$out/client.err")" >&2; exit 1; }
    local after_ticks; after_ticks=$(cpu_ticks "$server_pid")
    stop_server
    python3 - "$label" "$out" "$results" "$idle" "$((after_ticks - before_ticks))" "$(getconf CLK_TCK)" "$(task_clock_ms "$out/idle-client.perf")" <<'PY'
import json, sys
label, out, results = sys.argv[1:4]
count, ticks, hz, client_ms = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7])
report = json.loads([l for l in open(f"{out}/client.out") if l.startswith("{")][-1])
rate = count / report["seconds"]
server_us = ticks / hz * 1e6 / count
client_us = client_ms * 1e3 / count
print(f"{label} idle: {rate:.0f} conn/s, cpu per connection client {client_us:.0f} us (start-up included) server {server_us:.0f} us", flush=True)
with open(results, "a") as f:
    f.write(f"{label}\tidle\tconn/s\t{rate}\n{label}\tidle\tserver cpu us/conn\t{server_us}\n{label}\tidle\tclient cpu us/conn\t{client_us}\n")
PY
    return
  fi
  local server_flags=(--kind "$kind" --port 0 --mode idle --loops "$loops")
  [ "$kind" = tls ] && server_flags+=("${tls_server[@]}")
  start_server "" "$bin" stream-server "${server_flags[@]}"
  sleep 0.2
  local server_before ticks_before
  server_before=$(rss_kib "$server_pid") ticks_before=$(cpu_ticks "$server_pid")
  : >"$out/client.out"
  perf stat -e task-clock -x, -o "$out/idle-client.perf" -- "$bin" role stream-idle-connections --kind "$kind" --port "$port" \
    --ca "$fixtures/ca.pem" --count "$idle" --concurrency 16 --hold 1 >"$out/client.out" 2>"$out/client.err" &
  local client=$!
  children+=("$client")
  for _ in $(seq 1 2400); do
    grep -q '^holding' "$out/client.out" && break
    kill -0 "$client" 2>/dev/null || break
    sleep 0.05
  done
  grep -q '^holding' "$out/client.out" || { echo "$label idle client failed: $(tail -c 400 "$out/client.err")" >&2; exit 1; }
  local server_after ticks_after
  server_after=$(rss_kib "$server_pid") ticks_after=$(cpu_ticks "$server_pid")
  wait "$client" || { echo "$label idle client failed: $(tail -c 400 "$out/client.err")" >&2; exit 1; }
  stop_server
  python3 - "$label" "$out" "$results" "$idle" "$server_before" "$server_after" "$((ticks_after - ticks_before))" "$(getconf CLK_TCK)" \
    "$(task_clock_ms "$out/idle-client.perf")" <<'PY'
import json, sys
label, out, results = sys.argv[1:4]
count, server_before, server_after, ticks, hz, client_ms = (int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]),
                                                            int(sys.argv[7]), int(sys.argv[8]), float(sys.argv[9]))
report = json.loads([l for l in open(f"{out}/client.out") if l.startswith("{")][-1])
rate = count / report["seconds"]
client_kib = (report["rss_after"] - report["rss_before"]) / 1024 / count
server_kib = (server_after - server_before) / count
server_us = ticks / hz * 1e6 / count
client_us = client_ms * 1e3 / count
print(f"{label} idle: {rate:.0f} conn/s, KiB per idle connection server {server_kib:.1f} client {client_kib:.1f}, "
      f"cpu per connection client {client_us:.0f} us (start-up and hold included) server {server_us:.0f} us", flush=True)
with open(results, "a") as f:
    for metric, value in [("conn/s", rate), ("server KiB/conn", server_kib), ("client KiB/conn", client_kib),
                          ("server cpu us/conn", server_us), ("client cpu us/conn", client_us)]:
        f.write(f"{label}\tidle\t{metric}\t{value}\n")
PY
}

for round in $(seq 1 "$rounds"); do
  order="A B"; [ $((round % 2)) = 0 ] && order="B A"
  for test in $tests; do
    for side in $order; do
      bin=$a; [ "$side" = B ] && bin=$b
      case $test in
        bulk) bulk "$side" "$bin" ;;
        handshake) handshake "$side" "$bin" ;;
        idle) idle_run "$side" "$bin" ;;
      esac
    done
    if [ "$raw" = 1 ]; then
      case $test in
        bulk) bulk raw "$a" ;;
        handshake) [ "$kind" = tls ] && handshake raw "$a" ;;
        idle) [ "$kind" = tls ] && idle_run raw "$a" ;;
      esac
    fi
  done
done

python3 - "$results" "$rounds" <<'PY'
import statistics, sys
from collections import defaultdict
rows = defaultdict(list)
for line in open(sys.argv[1]):
    label, test, metric, value = line.rstrip("\n").split("\t")
    rows[(test, metric, label)].append(float(value))
metrics = []
for test, metric, _ in rows:
    if (test, metric) not in metrics: metrics.append((test, metric))
print(f"\nmedians over {sys.argv[2]} rounds:")
print(f"{'test':10} {'metric':22} {'A':>9} {'B':>9} {'B/A':>7} {'raw':>9} {'A/raw':>7} {'B/raw':>7}")
def cell(v): return f"{v:9.3f}" if v is not None else f"{'':9}"
def ratio(x, y): return f"{x / y:7.2f}" if x is not None and y else f"{'':7}"
for test, metric in metrics:
    a, b, r = (statistics.median(rows[(test, metric, l)]) if rows.get((test, metric, l)) else None for l in ("A", "B", "raw"))
    print(f"{test:10} {metric:22} {cell(a)} {cell(b)} {ratio(b, a)} {cell(r)} {ratio(a, r)} {ratio(b, r)}")
PY
