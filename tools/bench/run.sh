#!/usr/bin/env bash
# steptrace overhead benchmark suite (issue 7): one command, a table and JSON.
#
#   sudo tools/bench/run.sh [--quick] [--build-dir DIR] [--out FILE.json] [--md FILE.md]
#                           [--only B1,B7] [--pairs N] [--pairs-b7 N] [--compute-ms 1,10,100]
#
# Without --build-dir it configures and builds a Release tree in
# ${STEPTRACE_BENCH_BUILD:-/tmp/build-bench} first. --quick is the smoke run
# (< 60 s) that CI runs as the ctest test `bench-smoke`: it checks that the
# harness works (records counted, drops exact, reports parsed), not the timing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=""
args=()
while (($#)); do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
if [[ -z "$build" ]]; then
  build=${STEPTRACE_BENCH_BUILD:-/tmp/build-bench}
  cmake -S "$top" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build" --target steptrace bench-load bench-capstat trainsim trainsim-device nrt >/dev/null
fi
if [[ $EUID -ne 0 ]]; then
  echo "run.sh: needs root (loads BPF programs); try: sudo $0 ${args[*]-}" >&2
  exit 2
fi
exec python3 "$here/bench.py" --build-dir "$build" "${args[@]}"
