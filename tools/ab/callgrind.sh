#!/usr/bin/env bash
# Instruction counts per message of two release builds of the `benchmarks` binary, under
# valgrind's callgrind: unlike time, they do not drift with whatever else the machine runs, so
# a change of a few percent in per-message cost shows on a busy machine.
#
#   tools/ab/callgrind.sh /tmp/A /tmp/B [workload] [rounds]
#   tools/ab/callgrind.sh /tmp/A - [workload]      (one build's counts alone)
#
# Workloads (both ends run under callgrind, each in its own process):
#   udp              `udp-client` -> `udp-server` (NetworkConnection { UDP() }): N datagrams of
#                    SIZE bytes (default 1200) in `batch` blocks of BATCH (default 64; 0: plain
#                    sends), paced at RATE Mbit/s (default 8: the receiver keeps up under
#                    callgrind, so what is counted is the cost of each datagram, not of drops)
#   quic-datagrams   `quic-client` echoing N datagrams of SIZE bytes (default 1150) off
#                    `quic-server` (RFC 9221 datagrams over one connection)
#   http3            the `http3-client` role making N GETs of `/SIZE` (default 1024),
#                    CONCURRENCY (default 100) in flight on one connection, from `braid serve
#                    --alpn h3` (the `braid` binary beside each `benchmarks` binary given; N
#                    defaults to 2000 here); per message is per request, both ends
#   tlv              the `framed-client` role sending N TLV messages of SIZE value bytes
#                    (default 1024) over TLS to `framed-server` (`--framer tlv`; FRAMER=coder
#                    or tlv-tcp for the others), as tools/ab/framed.sh does
#
# Each build runs the workload twice, with N and with 2N messages (N: default 4000), and the
# difference of the two instruction counts, divided by the N messages it adds, is the cost per
# message: start-up, handshakes and tear-down cancel out. Per message, the client's count is
# per message sent, the server's per message it received (udp) or echoed. The builds take
# turns (A B, then B A); with more than one round, the medians are compared.
#
# quic-datagrams also reports the client's QUIC packets (sent and received) per message over
# the same difference, both ends' instructions per such packet, and each run's own count per
# delivered datagram (the N run's and the 2N run's, start-up included): how many packets carry
# a message varies from run to run (ACKs, pacing, resends when a loaded machine drops some), and
# the per-message counts move with it, so read them together.
#
# Environment: N, SIZE, BATCH, RATE as above; KEEP=DIR keeps the callgrind files (for
# `callgrind_annotate DIR/<label>-<side>-2N.out`); VALGRIND (default valgrind).
#
# Each binary runs as a copy without its debug information (`objcopy --strip-debug`): valgrind
# 3.19 gives up on the DWARF 5 this toolchain writes, and the symbol table, which the copy
# keeps, names every function for callgrind_annotate. Each runs with
# tools/ab/valgrind-sigsuspend.c preloaded (built here with cc), without which valgrind 3.19
# crashes on libdispatch's main thread.
set -euo pipefail
a=$1 b=$2 workload=${3:-udp} rounds=${4:-1}
n=${N:-4000} batch=${BATCH:-64} rate=${RATE:-8} valgrind=${VALGRIND:-valgrind}
here=$(cd "$(dirname "$0")/../.." && pwd)
fixtures=$here/Tests/BraidTests/Fixtures
case $workload in
udp) size=${SIZE:-1200} ;;
quic-datagrams) size=${SIZE:-1150} ;;
http3) size=${SIZE:-1024} n=${N:-2000} ;;
tlv) size=${SIZE:-1024} ;;
*) echo "unknown workload $workload (udp, quic-datagrams, http3, tlv)" >&2; exit 2 ;;
esac
out=$(mktemp -d)
results=$out/results.tsv
server_pid=""
cleanup() {
  # The server runs under valgrind as the background job's child: both are signalled, so a
  # failed run leaves no server behind.
  [ -n "$server_pid" ] && { pkill -TERM -P "$server_pid" 2>/dev/null; kill -TERM "$server_pid" 2>/dev/null; } || true
  rm -rf "$out"
}
trap cleanup EXIT
: >"$results"
[ -n "${KEEP:-}" ] && mkdir -p "$KEEP"
cc -shared -fPIC -O2 -o "$out/sigsuspend.so" "$here/tools/ab/valgrind-sigsuspend.c"
objcopy --strip-debug "$a" "$out/A.bin"
[ "$b" = - ] || objcopy --strip-debug "$b" "$out/B.bin"
if [ "$workload" = http3 ]; then
  # The server is the `braid` command beside each `benchmarks` binary.
  objcopy --strip-debug "$(dirname "$a")/braid" "$out/A.bin.braid"
  [ "$b" = - ] || objcopy --strip-debug "$(dirname "$b")/braid" "$out/B.bin.braid"
fi
a=$out/A.bin
[ "$b" = - ] || b=$out/B.bin

grind() { # output-file command...
  local file=$1; shift
  LD_PRELOAD=$out/sigsuspend.so "$valgrind" --tool=callgrind --callgrind-out-file="$file" --dump-instr=no --collect-jumps=no -q -- "$@"
}

instructions() { # callgrind file -> total instructions
  awk '/^(summary|totals):/ { print $2; exit }' "$1"
}

start_server() { # file command...
  local file=$1; shift
  : >"$out/server.out"
  grind "$file" "$@" >"$out/server.out" 2>"$out/server.err" &
  server_pid=$!
  port=""
  # valgrind reads the binary's debug information first: give it time.
  for _ in $(seq 1 1200); do
    port=$(sed -n 's/^listening \([0-9]*\)$/\1/p' "$out/server.out" | head -1)
    [ -n "$port" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$port" ] || { echo "server did not start: $(tail -c 600 "$out/server.err")" >&2; exit 1; }
}

finish_server() {
  wait "$server_pid" || true
  server_pid=""
}

last_json() { # file key -> value
  python3 -c 'import json, sys; r = json.loads([l for l in open(sys.argv[1]) if l.startswith("{")][-1]); print(r[sys.argv[2]])' "$1" "$2"
}

once() { # label binary count -> "client-Ir server-Ir client-messages server-messages"
  local label=$1 bin=$2 count=$3 tag=$4
  local cfile=$out/$label-client-$tag.out sfile=$out/$label-server-$tag.out sent received
  case $workload in
  udp)
    start_server "$sfile" "$bin" role udp-server --port 0
    grind "$cfile" "$bin" role udp-client --port "$port" --bytes $((count * size)) --payload "$size" \
      --batch "$batch" --rate "$rate" >"$out/client.out" 2>"$out/client.err" \
      || { echo "$label client failed: $(tail -c 600 "$out/client.err")" >&2; exit 1; }
    finish_server
    sent=$count
    received=$(last_json "$out/server.out" messages)
    ;;
  quic-datagrams)
    start_server "$sfile" "$bin" role quic-server --port 0 --connections 1 --cert "$fixtures/server.pem" --key "$fixtures/server-key.pem"
    grind "$cfile" "$bin" role quic-client --alpn echo --streams 0 --datagrams "$count" --datagram-size "$size" \
      --port "$port" --ca "$fixtures/ca.pem" >"$out/client.out" 2>"$out/client.err" \
      || { echo "$label client failed: $(tail -c 600 "$out/client.err")" >&2; exit 1; }
    finish_server
    sent=$count
    received=$(last_json "$out/client.out" datagrams_received)
    packets=$(python3 -c 'import json, sys; r = json.loads([l for l in open(sys.argv[1]) if l.startswith("{")][-1])["statistics"]; print(r["packets_sent"] + r["packets_received"])' "$out/client.out")
    ;;
  http3)
    start_server "$sfile" "$bin.braid" serve --alpn h3 --host 127.0.0.1 --port 0 --cert "$fixtures/server.pem" --key "$fixtures/server-key.pem"
    grind "$cfile" "$bin" role http3-client --port "$port" --ca "$fixtures/ca.pem" --path "/$size" --requests "$count" \
      --concurrency "${CONCURRENCY:-100}" >"$out/client.out" 2>"$out/client.err" \
      || { echo "$label client failed: $(tail -c 600 "$out/client.err")" >&2; exit 1; }
    # SIGTERM to valgrind (the background job's child): the server shuts down gracefully and
    # exits, and callgrind writes its counts.
    pkill -TERM -P "$server_pid" 2>/dev/null || true
    finish_server
    sent=$count
    received=$(last_json "$out/client.out" requests)
    ;;
  tlv)
    start_server "$sfile" "$bin" role framed-server --framer "${FRAMER:-tlv}" --messages "$count" \
      --cert "$fixtures/server.pem" --key "$fixtures/server-key.pem"
    grind "$cfile" "$bin" role framed-client --framer "${FRAMER:-tlv}" --messages "$count" --size "$size" \
      --port "$port" --ca "$fixtures/ca.pem" >"$out/client.out" 2>"$out/client.err" \
      || { echo "$label client failed: $(tail -c 600 "$out/client.err")" >&2; exit 1; }
    finish_server
    sent=$count
    received=$(last_json "$out/server.out" messages)
    ;;
  esac
  [ -n "${KEEP:-}" ] && cp "$cfile" "$sfile" "$KEEP/"
  echo "$(instructions "$cfile") $(instructions "$sfile") $sent $received ${packets:-0}"
}

run() { # label binary
  local label=$1 bin=$2
  read -r c1 s1 sent1 got1 p1 < <(once "$label" "$bin" "$n" N)
  read -r c2 s2 sent2 got2 p2 < <(once "$label" "$bin" $((2 * n)) 2N)
  python3 - "$label" "$results" "$c1" "$s1" "$sent1" "$got1" "$c2" "$s2" "$sent2" "$got2" "$p1" "$p2" <<'PY'
import sys
label, results = sys.argv[1:3]
c1, s1, sent1, got1, c2, s2, sent2, got2, p1, p2 = map(float, sys.argv[3:])
if got2 <= got1:
    sys.exit(f"{label}: the larger run delivered no more messages ({got2:.0f} against {got1:.0f})")
client = (c2 - c1) / (sent2 - sent1)
server = (s2 - s1) / (got2 - got1)
rows = [("client Ir/msg", client), ("server Ir/msg", server), ("both Ir/msg", client + server),
        ("delivered %", 100 * got2 / sent2)]
if p2 > 0:
    rows += [("client pkts/msg", (p2 - p1) / (sent2 - sent1)), ("both Ir/pkt", (c2 + s2 - c1 - s1) / (p2 - p1)),
             ("both Ir/msg N", (c1 + s1) / got1), ("both Ir/msg 2N", (c2 + s2) / got2)]
print(f"{label}: " + ", ".join(f"{m} {v:.0f}" if "Ir" in m else f"{m} {v:.2f}" for m, v in rows), flush=True)
with open(results, "a") as f:
    for metric, value in rows:
        f.write(f"{label}\t{metric}\t{value}\n")
PY
}

echo "callgrind, $workload: N=$n and 2N messages of $size bytes$([ "$workload" = udp ] && echo ", batch $batch, $rate Mbit/s")"
if [ "$b" = - ]; then
  run A "$a"
  exit 0
fi
for round in $(seq 1 "$rounds"); do
  if [ $((round % 2)) = 1 ]; then run A "$a"; run B "$b"; else run B "$b"; run A "$a"; fi
done
python3 - "$results" <<'PY'
import collections, statistics, sys
values = collections.defaultdict(list)
for line in open(sys.argv[1]):
    label, metric, value = line.rstrip("\n").split("\t")
    values[(label, metric)].append(float(value))
for metric in ["client Ir/msg", "server Ir/msg", "both Ir/msg", "delivered %", "client pkts/msg", "both Ir/pkt", "both Ir/msg N",
               "both Ir/msg 2N"]:
    if not values[("A", metric)]:
        continue
    a, b = statistics.median(values[("A", metric)]), statistics.median(values[("B", metric)])
    print(f"{metric:15} A {a:10.0f}  B {b:10.0f}  B/A {b / a:.3f}" if "Ir" in metric else f"{metric:15} A {a:10.2f}  B {b:10.2f}")
PY
