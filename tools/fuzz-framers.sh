#!/bin/sh
# Fuzzes the TLV decoder and the Coder decode path with libFuzzer and the address sanitizer
# for a bounded time (default 60 s): builds Sources/BraidFramers with the harness
# (Tests/BraidTests/Framers/FramersFuzzInput.swift, tools/fuzz/FramersFuzzMain.swift) using
# swiftc directly, then runs it from the committed corpus. New inputs go to a scratch
# directory (.build/fuzz/framers-corpus); copy interesting ones into
# Tests/BraidTests/Fixtures/fuzz-framers, where the test suite replays them.
#
# Usage: tools/fuzz-framers.sh [seconds]
set -eu
seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/.build/fuzz"
mkdir -p "$out/framers-corpus" "$out/framers-artifacts"
swiftc -sanitize=fuzzer,address -parse-as-library -g -Onone \
    "$root"/Sources/BraidFramers/*.swift \
    "$root/Tests/BraidTests/Framers/FramersFuzzInput.swift" \
    "$root/tools/fuzz/FramersFuzzMain.swift" \
    -o "$out/framers-fuzz"
exec "$out/framers-fuzz" -max_total_time="$seconds" -max_len=8192 -timeout=10 \
    -artifact_prefix="$out/framers-artifacts/" \
    "$out/framers-corpus" "$root/Tests/BraidTests/Fixtures/fuzz-framers"
