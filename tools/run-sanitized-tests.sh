#!/usr/bin/env bash
# Builds the test suite with a sanitizer and runs it: `thread` (ThreadSanitizer) or `address`
# (AddressSanitizer, with its leak checker). Each sanitizer builds into its own scratch path
# (.build-tsan, .build-asan), so the normal .build is left alone. The `braid` tool that some
# tests start is the sanitized one next to the test binary, so its reports count too.
#
# Every sanitized process writes its reports to <scratch>/sanitizer-reports/report.<pid>
# (emptied first). The run passes when the suite passes and no process reported anything.
# Suppressions (system-library false positives only, each explained) are in
# tools/tsan-suppressions.txt and tools/lsan-suppressions.txt.
#
# The leak checker is off unless BRAID_LEAK_CHECK=1: on Swift objects it reports false leaks
# (an object held only through an enum case whose tag the compiler keeps in the spare bits of
# the pointer is invisible to it), so its report needs reading, not counting. docs/testing.md says what it last found.
#
# Usage: [BRAID_LEAK_CHECK=1] tools/run-sanitized-tests.sh thread|address [--filter NAME ...]
#   (arguments after the sanitizer go to the test binary, e.g. --filter StreamTests)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"

sanitizer="${1:-}"
case "$sanitizer" in
  thread) scratch=.build-tsan ;;
  address) scratch=.build-asan ;;
  *) echo "usage: $0 thread|address [test binary arguments]" >&2; exit 64 ;;
esac
shift

tools/install-deps.sh
swift build --build-tests --sanitize="$sanitizer" --scratch-path "$scratch"
bin="$(swift build --show-bin-path --sanitize="$sanitizer" --scratch-path "$scratch")"

reports="$root/$scratch/sanitizer-reports"
rm -rf "$reports"
mkdir -p "$reports"
case "$sanitizer" in
  thread)
    # halt_on_error=0: collect every race of the run, not only the first.
    export TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1 log_path=$reports/report suppressions=$root/tools/tsan-suppressions.txt"
    ;;
  address)
    export ASAN_OPTIONS="detect_leaks=${BRAID_LEAK_CHECK:-0} log_path=$reports/report"
    export LSAN_OPTIONS="suppressions=$root/tools/lsan-suppressions.txt print_suppressions=0"
    ;;
esac

status=0
"$bin/BraidPackageTests.xctest" --testing-library swift-testing "$@" || status=$?

# A process that reported nothing may still have written a file (an empty one, or a note).
count=$( (grep -l -E "^(WARNING|ERROR): |^==[0-9]+==ERROR" "$reports"/report.* 2>/dev/null || true) | wc -l)
echo
echo "test binary exit status: $status"
if [ "$count" -gt 0 ]; then
  echo "$count process(es) reported (one file per process, in $reports):"
  grep -h -E "^(WARNING|SUMMARY|ERROR): |^==[0-9]+==ERROR" "$reports"/report.* \
    | sed -E 's/^==[0-9]+==//; s/ \(pid=[0-9]+\)//' | sort | uniq -c | sort -rn | head -40
  exit 1
fi
echo "no sanitizer reports"
exit "$status"
