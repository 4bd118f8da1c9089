# Shared by the A/B scripts that drive a server role and a client role of the `benchmarks`
# binary (framed.sh, udp.sh, http3-requests.sh, quic-datagrams.sh): the scratch directory and cleanup, starting the server role
# under `perf stat`, reading task-clock, taking turns, and the medians at the end. Source it;
# it defines functions and sets $out and $results.
#
#   ab_start_server BIN ROLE-ARGS...   starts `BIN role ROLE-ARGS...` under perf stat (task-clock
#                                      in $out/server.perf), waits for `listening <port>`, sets
#                                      $port and $server_pid
#   ab_start_command COMMAND...        the same for any server command (`braid serve ...`)
#   ab_finish_server                   waits for the server role to exit
#   ab_task_ms FILE                    task-clock milliseconds from a perf stat file
#   ab_record LABEL METRIC VALUE       one result row
#   ab_record_rate LABEL UNIT KEY      the rate and CPU per item rows of a client's JSON report
#   ab_interleave ROUNDS A B           calls `run A A-binary`, `run B B-binary`, then the other
#                                      way round, ROUNDS times (the script defines `run`)
#   ab_summary METRIC...               the median of each metric per build, and B/A
out=$(mktemp -d)
results=$out/results.tsv
server_pid=""
ab_cleanup() {
  [ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null || true
  rm -rf "$out"
}
trap ab_cleanup EXIT
: >"$results"

ab_start_server() {
  local bin=$1; shift
  ab_start_command "$bin" role "$@"
}

ab_start_command() {
  port=""
  : >"$out/server.out"
  perf stat -e task-clock -x, -o "$out/server.perf" -- "$@" >"$out/server.out" 2>"$out/server.err" &
  server_pid=$!
  for _ in $(seq 1 400); do
    port=$(sed -n 's/^listening \([0-9]*\)$/\1/p' "$out/server.out" | head -1)
    [ -n "$port" ] && break
    sleep 0.05
  done
  [ -n "$port" ] || { echo "server did not start: $(tail -c 400 "$out/server.err")" >&2; exit 1; }
}

ab_finish_server() {
  wait "$server_pid" || true
  server_pid=""
}

ab_task_ms() { awk -F, '$3 == "task-clock" { print $1 }' "$1"; }

ab_record() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$results"; }

# ab_record_rate LABEL UNIT COUNT-KEY: reads COUNT-KEY and "seconds" from the client's last JSON
# line ($out/client.out) and both task-clocks; prints and records UNIT/s and the CPU per UNIT
# of the client, the server and both, in microseconds.
ab_record_rate() {
  local label=$1 unit=$2 key=$3 count seconds client_ms server_ms rate c s both
  read -r count seconds < <(python3 -c 'import json, sys; r = json.loads([l for l in open(sys.argv[1]) if l.startswith("{")][-1]); print(r[sys.argv[2]], r["seconds"])' "$out/client.out" "$key")
  client_ms=$(ab_task_ms "$out/client.perf") server_ms=$(ab_task_ms "$out/server.perf")
  rate=$(python3 -c "print($count / $seconds)") c=$(python3 -c "print($client_ms * 1e3 / $count)") s=$(python3 -c "print($server_ms * 1e3 / $count)")
  both=$(python3 -c "print($c + $s)")
  printf '%s: %.0f %s/s, cpu client %.2f server %.2f both %.2f us/%s\n' "$label" "$rate" "$unit" "$c" "$s" "$both" "$unit"
  ab_record "$label" "$unit/s" "$rate"
  ab_record "$label" "cpu client us" "$c"
  ab_record "$label" "cpu server us" "$s"
  ab_record "$label" "cpu both us" "$both"
}

ab_interleave() {
  local rounds=$1 a=$2 b=$3
  for round in $(seq 1 "$rounds"); do
    if [ $((round % 2)) = 1 ]; then run A "$a"; run B "$b"; else run B "$b"; run A "$a"; fi
  done
}

ab_summary() {
  python3 - "$results" "$@" <<'PY'
import collections, statistics, sys
values = collections.defaultdict(list)
for line in open(sys.argv[1]):
    label, metric, value = line.rstrip("\n").split("\t")
    values[(label, metric)].append(float(value))
for metric in sys.argv[2:]:
    a, b = statistics.median(values[("A", metric)]), statistics.median(values[("B", metric)])
    print(f"{metric:21} A {a:12.2f}  B {b:12.2f}  B/A {b / a:.3f}")
PY
}
