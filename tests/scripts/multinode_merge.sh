#!/usr/bin/env bash
# One job across two (simulated) nodes, recorded by one steptrace per node
# and merged: trainsim's straggler scenario with 4 ranks as 2 nodes x 2
# (--nnodes 2: each rank carries torchrun's RANK/GROUP_RANK/WORLD_SIZE...),
# rank 3 on node 1 preprocessing its batches 12x slower. Each recorder sees
# only its node's ranks (-p). The merged report must name node 1, rank 3,
# data loading, with the other ranks' collective wait; node 0's report alone
# must say its ranks wait on a rank on another host. Then node 1's capture
# is moved onto another clock (capshift: +2.5 s and +40 ppm, a new boot id,
# its wall clock 3 ms off) as if recorded on another machine: the merge must
# recover the offset and the drift from the anchors, then undo the wall
# clock's error from the TCP bytes the two nodes exchanged, within its
# stated bound (far below a millisecond), and name the same rank. Without stream positions
# (an older capture) it keeps the anchors and says why.
# With VETH_MBIT=N each node's ranks run in their own network namespace
# (trainsim --node-netns), the two joined by a veth pair whose both ends
# are rate-limited to N Mbit/s by tc's tbf: the ring's hops between nodes
# cross that link, and the clock fit uses the bytes that crossed it.
# Needs root (it records).
#   [VETH_MBIT=N] multinode_merge.sh STEPTRACE_BIN TRAINSIM_BIN CAPSHIFT_BIN
set -euo pipefail
bin=$1 sim=$2 capshift=$3
t=$(mktemp -d /tmp/st-multinode.XXXXXX)
simpid=
veth_ns=()
. "$(dirname "$0")/trainsim_ranks.sh"
cleanup() {
  [ -n "$simpid" ] && kill "$simpid" 2>/dev/null && wait "$simpid" 2>/dev/null
  remove_veth_nodes
  rm -rf "$t"
}
trap cleanup EXIT
node_flags=()
[ -z "${VETH_MBIT:-}" ] || make_veth_nodes "$VETH_MBIT"
py=/usr/bin/python3
schema=$(cd "$(dirname "$0")/../.." && pwd)/docs/schema/steptrace-job.schema.json
mkdir -p "$t/dev"

"$sim" --scenario straggler --ranks 4 --nnodes 2 --duration 30 --dev-dir "$t/dev" "${node_flags[@]}" \
  --truth "$t/truth.json" > "$t/sim.log" 2>&1 &
simpid=$!

wait_trainsim_ranks "$simpid" 4 || true
[ "${#pids[@]}" = 4 ] || { echo "expected 4 ranks of launcher $simpid, found ${#pids[@]}"; cat "$t/sim.log"; exit 1; }
echo "ranks: ${pids[*]}"
record_two_nodes "$bin" "$t" 15 || exit 1
wait "$simpid" || true
simpid=
if [ -n "${VETH_MBIT:-}" ]; then
  # The ring's bytes between the nodes really crossed the veth pair.
  crossed=$(veth_tx_bytes)
  echo "node 0 sent $crossed bytes over the veth link (tbf ${VETH_MBIT} Mbit/s)"
  [ "$crossed" -gt 10000000 ] || { echo "the ring did not cross the veth link"; exit 1; }
fi

"$bin" report "$t/node0.cap" "$t/node1.cap" --json "$t/job.json" --perfetto "$t/job-trace.json" | tee "$t/job.txt"
"$bin" report "$t/node0.cap" --json "$t/node0.json" > "$t/node0.txt"
"$bin" report "$t/node1.cap" --json "$t/node1.json" > /dev/null
echo "== node 0 alone:"; grep -A3 "^Verdict\|VERDICT" "$t/node0.txt" | head -8 || true

$py - "$t/job.json" "$t/node0.json" "$t/truth.json" "$schema" <<'PY'
import json, sys
import jsonschema
job = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator(json.load(open(sys.argv[4]))).validate(job)
node0 = json.load(open(sys.argv[2]))
truth = json.load(open(sys.argv[3]))
c = job["culprit"]
assert c is not None, f"no culprit named: {job['headline']}"
print(f"culprit: rank {c['rank']} node {c['node']} cause {c['cause']} ({c['cause_detail']}), "
      f"held back {c['steps_held_back']} of {job['paired_steps']} steps, {c['mean_late_ns']/1e6:.1f} ms late; "
      f"others wait {c['victim_wait_ns_per_step']/1e6:.1f} ms/step")
assert (c["rank"], c["node"]) == (3, 1), c
assert c["cause"] == "data_loading", c
assert c["cause_detail"] == "the loaders' CPU preprocessing", c
assert sorted(c["victims"]) == [0, 1, 2], c
assert job["paired_steps"] >= 40, job["paired_steps"]
assert c["steps_held_back"] >= 0.6 * job["paired_steps"], c
assert [r["rank"] for r in job["ranks"]] == [0, 1, 2, 3]
assert [r["node"] for r in job["ranks"]] == [0, 0, 1, 1]
assert all(r["rank_from_launcher"] for r in job["ranks"])
assert job["world_size"] == 4 and job["job_id"].startswith("trainsim-"), job["job_id"]
assert [h["clock"]["method"] for h in job["hosts"]] == ["wall_clock_anchors", "same_boot"], job["hosts"]
# The truth: the straggler's loader really is what its steps waited for.
t3 = [r for r in truth["ranks"] if r["rank"] == 3][0]
assert t3.get("node", 1) == 1
# The others' wait is real: within the victims' traced steps, most of the
# collective time, and at least half of the straggler's lateness.
assert c["victim_wait_ns_per_step"] >= 0.5 * c["mean_late_ns"], c
v = node0["job"]["verdict"]
print("node 0 alone:", v["headline"])
assert v["headline"].startswith("the ranks here wait on a rank on another host"), v["headline"]
assert any("WORLD_SIZE 4" in e for e in v["evidence"]), v["evidence"]
PY
echo "== node 1 moved onto another clock: +2.5 s, +40 ppm, its wall clock 3 ms ahead"
"$capshift" "$t/node1.cap" "$t/node1-shifted.cap" --offset-ns 2500000000 --ppm 40 --wall-error-ns 3000000 \
  > "$t/shift.json"
"$bin" report "$t/node0.cap" "$t/node1-shifted.cap" --json "$t/job-shifted.json" \
  --perfetto "$t/job-shifted-trace.json" | tee "$t/job-shifted.txt"
$py - "$t/job.json" "$t/job-shifted.json" "$schema" "$t/shift.json" <<'PY'
import json, sys
import jsonschema
same = json.load(open(sys.argv[1]))
moved = json.load(open(sys.argv[2]))
jsonschema.Draft202012Validator(json.load(open(sys.argv[3]))).validate(moved)
t0 = json.load(open(sys.argv[4]))["t0_ns"]
h0, h1 = same["hosts"][1]["clock"], moved["hosts"][1]["clock"]
assert h1["method"] == "network", h1
assert h1["anchors"] >= 2, h1
net = h1["network"]
assert net["peer"] == 0 and net["exchanges_to"] >= 20 and net["exchanges_from"] >= 20, net
assert moved["alignment"]["network_aligned"], moved["alignment"]

# Integers throughout: job times are wall-clock ns (~1.8e18), where a float's
# step is 256 ns, more than the bound under test (as steptrace's own
# to_job_ns, only the drift term is computed in floating point).
def job_time(c, mono):
    j = mono + c["offset_ns"] + round((mono - c["mono_origin_ns"]) * c["drift_ppm"] * 1e-6)
    n = c.get("network") or {}
    if "peer" in n:
        j += n["offset_ns"] + round((j - n["origin_ns"]) * n["drift_ppm"] * 1e-6)
    return j

# The same instants on both clocks: node 1's original monotonic time t, and
# t' where the planted clock read it. Aligned, both must land on the same
# job time, within the stated bound (the wall clock's planted 3 ms undone).
bound = moved["alignment"]["bound_ns"]
errs = []
for s in (0, 5, 10, 14):
    t = h0["mono_origin_ns"] + s * 1_000_000_000
    t_moved = t + 2_500_000_000 + round((t - t0) * 40e-6)
    errs.append(job_time(h1, t_moved) - job_time(h0, t))
worst = max(abs(e) for e in errs)
print(f"the same instants aligned within {worst:.0f} ns over the recording (stated bound +-{bound} ns, "
      f"{net['exchanges_to']} + {net['exchanges_from']} exchanges, wall clock corrected by {net['offset_ns']} ns); "
      f"drift {h1['drift_ppm']:+.3f} ppm (anchors{', the wall clock STEPPED' if h1['wall_clock_stepped'] else ''}) "
      f"{net['drift_ppm']:+.3f} ppm (network) against {h0['drift_ppm']:+.3f} ppm unshifted "
      f"(planted: the monotonic clock 40 ppm fast)")
# The bound is the send call and transit of the quickest exchanges near each
# end of the recording (the segments' arrivals, tcp:tcp_probe, take the
# receiver's wake-up out of it): 4.8-8.2 us measured on this VM, loopback and
# veth alike (docs/multi-node.md). Asserted: the issue's 100 us target, with
# a dozen times that for a loaded machine's quickest exchange.
assert 0 < bound <= 100_000, bound
assert worst <= bound + 100, (errs, bound)
# The drift, relative to the unshifted capture's own slew (NTP may be
# slewing this host's clock): by the anchors alone, unless the wall clock
# was stepped during the recording (this VM's was once, in CI: the anchors
# then keep the first offset, drift 0, and the network fit alone finds the
# 40 ppm - it did, -40.03); with the network's residual on top, always.
if not h1["wall_clock_stepped"]:
    assert abs(h1["drift_ppm"] - h0["drift_ppm"] + 40) <= 5, (h1["drift_ppm"], h0["drift_ppm"])
assert abs(h1["drift_ppm"] + net["drift_ppm"] - h0["drift_ppm"] + 40) <= 5, (h1["drift_ppm"], net["drift_ppm"])
c0, c1 = same["culprit"], moved["culprit"]
assert c1 is not None and (c1["rank"], c1["node"], c1["cause"]) == (c0["rank"], c0["node"], c0["cause"]), c1
assert abs(moved["paired_steps"] - same["paired_steps"]) <= 1, (moved["paired_steps"], same["paired_steps"])
PY
echo "== the merged traces: every host's ranks on one time line"
$py - "$t/job.json" "$t/job-trace.json" "$t/job-shifted.json" "$t/job-shifted-trace.json" <<'PY'
import json, statistics, sys
def step_ends(job_path, trace_path):
    job, trace = json.load(open(job_path)), json.load(open(trace_path))
    ev = trace["traceEvents"]
    names = [e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "process_name"]
    assert any(n.startswith("host 0 (") for n in names) and any(n.startswith("host 1 (") for n in names), names
    ends = {}
    for r in job["ranks"]:
        pid = r["pid"] + r["host"] * (1 << 22)
        ends[r["rank"]] = sorted(e["ts"] + e["dur"] for e in ev
                                 if e.get("cat") == "step" and e.get("ph") == "X" and e["pid"] == pid)
        assert len(ends[r["rank"]]) >= 40, (r, len(ends[r["rank"]]))
    return ends
def gap_us(a, b):
    # Each step end of rank a against the nearest of rank b: the median gap.
    out = []
    for x in a:
        out.append(min((y - x for y in b), key=abs))
    return statistics.median(out)
exact, moved = step_ends(sys.argv[1], sys.argv[2]), step_ends(sys.argv[3], sys.argv[4])
bound_us = json.load(open(sys.argv[3]))["alignment"]["bound_ns"] / 1e3
g_exact, g_moved = gap_us(exact[0], exact[2]), gap_us(moved[0], moved[2])
print(f"rank 2 (node 1) ends its steps {g_exact:+.1f} us after rank 0 (node 0) on one clock, "
      f"{g_moved:+.1f} us with node 1 moved onto another clock and aligned (bound +-{bound_us:.1f} us)")
assert abs(g_moved - g_exact) <= bound_us + 20, (g_exact, g_moved, bound_us)
PY
echo "== the same, with no stream positions (as an older steptrace recorded it): the anchors alone, and why"
"$capshift" "$t/node1.cap" "$t/node1-old.cap" --offset-ns 2500000000 --ppm 40 --wall-error-ns 3000000 \
  --drop-stream-positions > /dev/null
"$bin" report "$t/node0.cap" "$t/node1-old.cap" --json "$t/job-old.json" | grep -A3 "^Clocks"
$py - "$t/job-old.json" <<'PY'
import json, sys
job = json.load(open(sys.argv[1]))
h1 = job["hosts"][1]["clock"]
assert h1["method"] == "wall_clock_anchors", h1
assert "no TCP stream positions" in (h1["network"]["why_not"] or ""), h1
assert not job["alignment"]["network_aligned"], job["alignment"]
assert job["alignment"]["bound_ns"] == job["alignment"]["reading_bound_ns"], job["alignment"]
assert job["culprit"] is not None and job["culprit"]["rank"] == 3, job["culprit"]
PY
echo "== steps 40-79 of rank 0, from node 0 and the moved node 1: one span of the job clock"
"$bin" report "$t/node0.cap" "$t/node1-shifted.cap" --steps 40-79 --json "$t/job-cut.json" | grep "^Verdict"
$py - "$t/job-shifted.json" "$t/job-cut.json" <<'PY'
import json, sys
whole, cut = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
# Every rank's steps in the span on both hosts: about 40 paired (less the
# cut replay's own warm-up step and a step the span's edges split).
print(f"paired steps: {cut['paired_steps']} in steps 40-79 of rank 0, {whole['paired_steps']} in the whole recording")
assert 34 <= cut["paired_steps"] <= 41, cut["paired_steps"]
assert cut["culprit"] is not None and (cut["culprit"]["rank"], cut["culprit"]["node"]) == (3, 1), cut["culprit"]
assert cut["hosts"][1]["clock"]["method"] == "network", cut["hosts"][1]["clock"]
PY
echo "multinode merge: OK"
