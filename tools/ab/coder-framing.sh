#!/usr/bin/env bash
# Interleaved A/B of two release builds of the `benchmarks` binary on the `throughput`
# scenario's in-process Coder rows (`benchmarks role coder-framing`: JSONEncoder+JSONDecoder
# alone, and Coder's framing + JSON, on the same values, one thread, no transport). The
# builds take turns round by round (A B, then B A, ...).
#
#   tools/ab/coder-framing.sh /tmp/A /tmp/B [rounds] [slices]
#
# Per run, one line: us per message for JSON alone and for framing + JSON, and their ratio
# (the row's target is at most 1.1x). At the end, each build's median ratio and its range.
set -euo pipefail
a=$1 b=$2 rounds=${3:-10} slices=${4:-10}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for round in $(seq 1 "$rounds"); do
  if (( round % 2 )); then order="A B"; else order="B A"; fi
  for label in $order; do
    bin=$a; [[ $label == B ]] && bin=$b
    line=$("$bin" role coder-framing --slices "$slices" | tail -1)
    echo "$label $line" | tee -a "$out"
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
ratios = {"A": [], "B": []}
for line in open(sys.argv[1]):
    label, data = line.split(" ", 1)
    row = json.loads(data)
    ratios[label].append(row["framed"] / row["json"])
for label, values in ratios.items():
    print(f"{label}: framing + JSON over JSON alone, median {statistics.median(values):.3f}x "
          f"(min {min(values):.3f}x, max {max(values):.3f}x, {len(values)} rounds)")
print(f"B/A of the medians: {statistics.median(ratios['B']) / statistics.median(ratios['A']):.3f}")
PY
