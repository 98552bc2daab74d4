#!/usr/bin/env bash
# `steptrace diff` as a CI gate, on real recordings of trainsim
# (compute-bound, 2 ranks): a run against itself and against a second run of
# the same job shows no significant change and exits 0 under
# --fail-if-slower 5; a run whose device compute was raised by 10 % of the
# step (a planted regression) is reported slower, in device_execute, and
# exits 1. Needs root (it records).
#   diff_gate.sh STEPTRACE_BIN TRAINSIM_BIN
set -euo pipefail
bin=$1 sim=$2
t=$(mktemp -d /tmp/st-diff.XXXXXX); trap 'rm -rf "$t"' EXIT
py=/usr/bin/python3

record() {  # NAME COMPUTE_MS
  mkdir -p "$t/$1.dev"
  "$bin" record -o "$t/$1.cap" --accel-dev "$t/$1.dev/neuron0" --accel-dev "$t/$1.dev/neuron1" \
    --rdma-dev "$t/$1.dev/uverbs0" -- "$sim" --scenario compute-bound --ranks 2 --steps 40 \
    --compute-ms "$2" --dev-dir "$t/$1.dev" --truth "$t/$1.truth.json" > "$t/$1.log" 2>&1
}
record base 40
record again 40
# The planted regression: 10 % of base's mean step more device compute.
"$bin" report "$t/base.cap" --json "$t/base.json" > /dev/null
slow_ms=$($py -c '
import json, sys
job = json.load(open(sys.argv[1]))["job"]
d = [s["duration_ns"] for r in job["ranks"] for s in r["steps"] if s["index"] >= job["skipped_warmup_steps"]]
print(40 + 0.1 * sum(d) / len(d) / 1e6)' "$t/base.json")
echo "planted: --compute-ms $slow_ms (base 40)"
record slow "$slow_ms"

echo "== base vs base (the JSON report against its own capture)"
"$bin" diff "$t/base.json" "$t/base.cap" --fail-if-slower 5 | tee "$t/self.txt"
grep -q "no significant change" "$t/self.txt"

echo "== base vs another run of the same job"
"$bin" diff "$t/base.cap" "$t/again.cap" --fail-if-slower 5 | tee "$t/again.txt"

echo "== base vs slow"
rc=0
"$bin" diff "$t/base.cap" "$t/slow.cap" --fail-if-slower 5 --json "$t/diff.json" > "$t/slow.txt" || rc=$?
cat "$t/slow.txt"
[ "$rc" = 1 ] || { echo "expected exit 1 from the gate, got $rc"; exit 1; }
grep -q "SLOWER" "$t/slow.txt"
$py - "$t/diff.json" "$t/base.truth.json" "$t/slow.truth.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
pct = d["step_change_pct"]
# The job's own clocks: how much longer its steps really were (the planted
# compute overlaps some of what the ranks did before, so it is not exactly 10 %).
def mean_step(path):
    t = json.load(open(path))
    d = [s["end_ns"] - s["start_ns"] for r in t["ranks"] for s in r["steps"][1:]]
    return sum(d) / len(d)
true_pct = 100 * (mean_step(sys.argv[3]) / mean_step(sys.argv[2]) - 1)
print(f"step change: traced {pct:+.1f} %, by trainsim's truth {true_pct:+.1f} %")
assert abs(pct - true_pct) <= 1.5, f"traced {pct:.1f} % vs true {true_pct:.1f} %"
assert true_pct > 5, f"the planted slowdown took only {true_pct:.1f} %"
cats = d["all_ranks"]["categories"]
moved = max(cats, key=lambda c: abs(cats[c]["delta_ms"]) if cats[c]["significant"] else 0)
assert moved == "device_execute" and cats[moved]["significant"], f"largest change in {moved}"
for r in d["ranks"]:
    assert r["categories"]["device_execute"]["significant"], f"rank {r['rank']}: device_execute not significant"
print(f"ok: {pct:+.1f} % (true {true_pct:+.1f} %, planted 10 % of the step as compute), device_execute on every rank")
PY
# A missing run is trouble (2), not a verdict.
rc=0
"$bin" diff "$t/base.cap" "$t/none.cap" > /dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || { echo "a missing run exited $rc, not 2"; exit 1; }
