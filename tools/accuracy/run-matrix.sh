#!/usr/bin/env bash
# Runs the scenario matrix (scenarios x ranks x loader workers) under
# steptrace and writes the accuracy table to docs/accuracy.md. Needs root.
# usage: tools/accuracy/run-matrix.sh [BUILD_DIR]
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top/build}
out=$top/docs/accuracy.md
tmp=$(mktemp)
"$build/tools/accuracy/accuracy-matrix" --trainsim "$build/tools/trainsim/trainsim" --markdown \
  --ranks 2 --ranks 4 --loaders 0 --loaders 1 --loaders 4 2>/dev/null > "$tmp"
{
  echo "# Accuracy against ground truth"
  echo
  echo "steptrace run on every trainsim scenario, compared with the simulator's ground truth"
  echo "(tools/accuracy: verdict vs the truth's largest category, step counts, mean per-step"
  echo "duration error, mean per-step |share error| per category in percentage points, straggler"
  echo "rank). Steps after the first (warm-up) are counted."
  echo
  echo "Produced by \`sudo tools/accuracy/run-matrix.sh\` on $(uname -r), $(nproc) vCPU, $(date -u +%Y-%m-%d)."
  echo
  cat "$tmp"
} > "$out"
rm -f "$tmp"
echo "wrote $out"
