#!/usr/bin/env bash
# steptrace's CPU while attached to a sleeping process, from its threads'
# schedstat (ns), after a settle time (the device scans back off after 30 s).
#   tools/bench/idle_cost.sh [--build-dir DIR] [--settle S] [--seconds S] [-- steptrace options]
# Prints the share of one core and the consumer's context switches. Needs root.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$top/build settle=35 secs=10
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=$2; shift 2 ;;
    --settle) settle=$2; shift 2 ;;
    --seconds) secs=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "idle_cost: unknown argument $1" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d /tmp/steptrace-idle.XXXXXX)
sleep 100000 & target=$!
"$build/user/steptrace" attach -p "$target" -d $((settle + secs + 5)) --json "$work/report.json" "$@" \
  >"$work/out.txt" 2>&1 & st=$!
trap 'kill $st $target 2>/dev/null || true; rm -rf "$work"' EXIT
cpu() { local s=0 t; for t in /proc/$st/task/*/schedstat; do s=$((s + $(cut -d' ' -f1 "$t"))); done; echo $s; }
switches() { grep -h voluntary_ctxt_switches /proc/$st/task/*/status | awk '{s += $2} END {print s}'; }
sleep "$settle"
kill -0 $st 2>/dev/null || { echo "idle_cost: steptrace ended early:" >&2; cat "$work/out.txt" >&2; exit 1; }
c0=$(cpu) w0=$(switches)
sleep "$secs"
c1=$(cpu) w1=$(switches)
awk -v c=$((c1 - c0)) -v s="$secs" -v w=$((w1 - w0)) \
  'BEGIN { printf "idle: %.4f %% of a core over %d s, %d context switches (%.1f wake-ups/s)\n", c / (s * 1e7), s, w, w / s }'
