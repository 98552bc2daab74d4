#!/usr/bin/env bash
# Regenerates the golden analysis outputs of the recorded captures in
# tests/fixtures (run after an intended change to the analysis; review the diff).
# With --record, first re-records the captures from trainsim (needs root).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}
fx=$top/tests/fixtures
if [ "${1:-}" = "--record" ]; then
  d=$(mktemp -d /tmp/steptrace-fx.XXXXXX)
  mkdir "$d/dev"
  rm -f "$fx/straggler.cap"
  "$build/user/steptrace" record -o "$fx/straggler.cap" --accel-dev "$d/dev/neuron0" --accel-dev "$d/dev/neuron1" \
    --rdma-dev "$d/dev/uverbs0" -- \
    "$build/tools/trainsim/trainsim" --scenario straggler --steps 12 --dev-dir "$d/dev" >/dev/null
  chmod 0644 "$fx/straggler.cap"
  rm -rf "$d"
fi
"$build/user/steptrace" report "$fx/straggler.cap" --json - | python3 -c '
import json, sys
job = json.load(sys.stdin)["job"]
# The report adds what the session knows of each rank (its identity, why its
# steps came from their source); the golden holds the analysis alone.
for r in job["ranks"]:
    r.pop("identity", None)
    r.pop("step_source_reason", None)
print(json.dumps(job, indent=1, sort_keys=True))' > "$fx/straggler.golden.json"
echo "updated $fx/straggler.golden.json"
