#!/usr/bin/env bash
# Changes in step time reported on the steady trainsim scenarios (issue 22):
# each scenario N times (default 10) for 60 steps, traced by `steptrace run`.
# A reported change is checked against trainsim's own clock: the truth's mean
# step time over the 8 steps either side of it. It is "real" when the truth
# moved the same way by at least half as much (the machine itself changed:
# another process took the CPUs), "false" otherwise. Needs root; a quiet
# machine for a false-positive count that means anything.
#   tools/accuracy/change-false-positives.sh BUILD_DIR [N]
set -euo pipefail
build=$1 n=${2:-10}
bin=$build/user/steptrace sim=$build/tools/trainsim/trainsim
printf '%-17s %5s %8s %6s %6s\n' scenario runs reported real false
for sc in compute-bound data-bound dma-bound collective-bound straggler host-bound contention; do
  rep=0 real=0 bad=0
  for i in $(seq 1 "$n"); do
    t=$(mktemp -d /tmp/st-cfp.XXXXXX); mkdir "$t/dev"
    "$bin" run --json "$t/r.json" --accel-dev "$t/dev/neuron0" --accel-dev "$t/dev/neuron1" --rdma-dev "$t/dev/uverbs0" \
      -- "$sim" --scenario "$sc" --ranks 2 --steps 60 --dev-dir "$t/dev" --truth "$t/truth.json" > "$t/out" 2>&1
    read -r a b c < <(/usr/bin/python3 - "$t/r.json" "$t/truth.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); t = json.load(open(sys.argv[2]))
durs = {}
for rk in t["ranks"]:
    for s in rk["steps"]:
        durs.setdefault(rk["pid"], []).append((s["start_ns"], s["end_ns"] - s["start_ns"]))
pid_of = {rk["rank"]: rk["pid"] for rk in r["job"]["ranks"]}
real = bad = 0
for c in r["job"]["changes"]:
    steps = sorted(durs.get(pid_of.get(c["reference_rank"]), []))
    k = next((i for i, (st, _) in enumerate(steps) if st >= c["at_ns"] - 1_000_000), None)
    ok = False
    if k is not None and k >= 8 and k + 8 <= len(steps):
        before = sum(d for _, d in steps[k - 8:k]) / 8 / 1e6
        after = sum(d for _, d in steps[k:k + 8]) / 8 / 1e6
        want = c["after_ms"] - c["before_ms"]
        ok = (after - before) * want > 0 and abs(after - before) >= abs(want) / 2
    if ok: real += 1
    else: bad += 1
    print(("real " if ok else "FALSE ") + c["text"], file=sys.stderr)
print(len(r["job"]["changes"]), real, bad)
PY
)
    rep=$((rep + a)) real=$((real + b)) bad=$((bad + c))
    rm -rf "$t"
  done
  printf '%-17s %5d %8d %6d %6d\n' "$sc" "$n" "$rep" "$real" "$bad"
done
