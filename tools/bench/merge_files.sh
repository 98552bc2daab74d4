#!/usr/bin/env bash
# The merge at fleet scale, over capture files (issue 18): `steptrace report`
# of N nodes' captures, its wall time and peak memory, for each N asked.
#   1. records a real two-node job: trainsim's straggler scenario, 2 ranks as 2
#      simulated nodes joined by a veth link (tc tbf), rank 1 (node 1) with
#      slow loaders, one recorder per node, SECONDS long;
#   2. capfleet makes N nodes of COPIES ranks each from it (each node on a
#      clock and addresses of its own, a ring of links; see capfleet.cpp);
#   3. `steptrace report node0.cap ... node<N-1>.cap --json`: its wall time,
#      CPU and peak RSS; the culprit must be a straggler
#      rank on an odd node, cause data loading; every host but the first
#      must be fitted by the network, and each host's clock must put the
#      same instant where node 0's does, within the stated bound.
# Needs root (it records). Prints one JSON line per N and writes them all to
# OUT (default: merge-files.json in the work directory). Not in CI: a few
# minutes of recording and gigabytes of captures at 64 nodes.
# With --source NODE0.cap NODE1.cap it starts from that recording instead
# (no root needed; the bench-tools test does so with a committed one).
#   merge_files.sh BUILD_DIR [--seconds 180] [--copies 16] [--nodes "8 64"] [--work DIR] [--out FILE]
#                  [--source NODE0.cap NODE1.cap]
set -euo pipefail
build=$(cd "$1" && pwd)
shift
secs=180 copies=16 nodes_list="8 64" work= out= given0= given1=
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) secs=$2; shift 2 ;;
    --copies) copies=$2; shift 2 ;;
    --nodes) nodes_list=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --source) given0=$2 given1=$3; shift 3 ;;
    *) echo "merge_files.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
bin=$build/user/steptrace sim=$build/tools/trainsim/trainsim fleet=$build/tools/bench/capfleet
here=$(cd "$(dirname "$0")" && pwd)
[ -n "$work" ] || work=$(mktemp -d /tmp/st-merge-files.XXXXXX)
mkdir -p "$work"
[ -n "$out" ] || out=$work/merge-files.json
src=$work/source
src0=$src/node0.cap src1=$src/node1.cap
[ -z "$given0" ] || src0=$given0 src1=$given1
simpid= veth_ns=() node_flags=()
. "$here/../../tests/scripts/trainsim_ranks.sh"
cleanup() {
  [ -n "$simpid" ] && kill "$simpid" 2>/dev/null && wait "$simpid" 2>/dev/null
  remove_veth_nodes
}
trap cleanup EXIT

# Runs a command; writes its wall seconds, user and system CPU seconds and
# peak RSS (KiB) to FILE (as /usr/bin/time -f '%e %U %S %M' would; the
# command is the only child the wrapper waits for).
measured() {  # FILE CMD...
  /usr/bin/python3 -c '
import resource, subprocess, sys, time
t = time.monotonic()
rc = subprocess.call(sys.argv[2:])
wall = time.monotonic() - t
u = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "w").write(f"{wall:.2f} {u.ru_utime:.2f} {u.ru_stime:.2f} {u.ru_maxrss}\n")
sys.exit(rc)' "$@"
}

if [ ! -s "$src1" ]; then
  rm -rf "$src"
  mkdir -p "$src/dev"
  make_veth_nodes 2000
  "$sim" --scenario straggler --ranks 2 --nnodes 2 --straggler-rank 1 --duration $((secs + 10)) \
    --dev-dir "$src/dev" "${node_flags[@]}" --truth "$src/truth.json" > "$src/sim.log" 2>&1 &
  simpid=$!
  wait_trainsim_ranks "$simpid" 2 || { echo "trainsim's 2 ranks did not start"; cat "$src/sim.log"; exit 1; }
  flags=()
  for f in "$src"/dev/neuron* "$src"/dev/uverbs*; do
    case $f in *.nds) ;; *uverbs*) flags+=(--rdma-dev "$f") ;; *) flags+=(--accel-dev "$f") ;; esac
  done
  "$bin" record -o "$src/node0.cap" -d "$secs" "${flags[@]}" -p "${pids[0]}" > "$src/rec0.log" 2>&1 &
  r0=$!
  rc=0
  "$bin" record -o "$src/node1.cap" -d "$secs" "${flags[@]}" -p "${pids[1]}" > "$src/rec1.log" 2>&1 || rc=$?
  wait $r0 || rc=$?
  [ $rc = 0 ] || { echo "a recorder failed ($rc)"; cat "$src/rec0.log" "$src/rec1.log"; exit 1; }
  wait "$simpid" || true
  simpid=
  remove_veth_nodes
fi
[ -n "$given0" ] || grep -h "records," "$src/rec0.log" "$src/rec1.log"

: > "$out"
for n in $nodes_list; do
  dir=$work/n$n
  rm -rf "$dir"
  gen_start=$(date +%s%N)
  "$fleet" "$src0" "$src1" "$dir" --nodes "$n" --copies "$copies" > "$dir.fleet.log"
  gen_ms=$((($(date +%s%N) - gen_start) / 1000000))
  files=()
  for k in $(seq 0 $((n - 1))); do files+=("$dir/node$k.cap"); done
  bytes=$(du -cb "${files[@]}" | tail -1 | cut -f1)
  sync
  measured "$dir.time" "$bin" report "${files[@]}" --json "$dir/job.json" > "$dir/job.txt"
  /usr/bin/python3 - "$dir/job.json" "$dir/fleet.json" "$dir.time" "$n" "$copies" "$bytes" "$gen_ms" >> "$out" <<'PY'
import json, sys
job, fleet = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
wall, user, sys_s, rss_kib = open(sys.argv[3]).read().split()[-4:]
n, copies, nbytes, gen_s = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]) / 1e3
records = sum(x["records"] for x in fleet["nodes"])
c = job["culprit"]
assert c is not None, job["headline"]
assert c["node"] % 2 == 1 and c["cause"] == "data_loading", c
assert len(job["ranks"]) == n * fleet["ranks_per_node"], len(job["ranks"])
hosts = job["hosts"]
methods = [h["clock"]["method"] for h in hosts]
assert all(m == "network" for m in methods[1:]), methods

# The same instant on node 0's clock (t) and node k's planted one (t'),
# aligned: both job times must agree within the stated bound (as in
# tests/scripts/multinode_merge.sh; integers, the drift term in floating point).
def job_time(c, mono):
    j = mono + c["offset_ns"] + round((mono - c["mono_origin_ns"]) * c["drift_ppm"] * 1e-6)
    net = c.get("network") or {}
    if "peer" in net:
        j += net["offset_ns"] + round((j - net["origin_ns"]) * net["drift_ppm"] * 1e-6)
    return j
h0 = hosts[0]["clock"]
worst = 0
for k, node in enumerate(fleet["nodes"]):
    hk = hosts[k]["clock"]
    span = fleet["nodes"][0]["source_span_ns"]
    for i in range(21):
        t = fleet["nodes"][0]["t0_ns"] + span * i // 20
        tk = t + node["offset_ns"] + round((t - node["t0_ns"]) * node["ppm"] * 1e-6)
        worst = max(worst, abs(job_time(hk, tk) - job_time(h0, t)))
bound = job["alignment"]["bound_ns"]
host_bounds = [h["clock"]["network"]["bound_ns"] for h in hosts[1:]]
assert worst <= bound, (worst, bound)
print(json.dumps({"nodes": n, "ranks": len(job["ranks"]), "records": records, "capture_bytes": nbytes,
                  "generate_s": round(gen_s, 1), "report_wall_s": float(wall), "report_cpu_s": round(float(user) + float(sys_s), 2),
                  "peak_rss_mib": round(int(rss_kib) / 1024, 1), "paired_steps": job["paired_steps"],
                  "culprit": {"rank": c["rank"], "node": c["node"], "cause": c["cause"]},
                  "hosts_fitted_by_network": methods.count("network"), "stated_bound_us": round(bound / 1e3, 1),
                  "largest_host_bound_us": round(max(host_bounds) / 1e3, 1), "worst_alignment_error_us": round(worst / 1e3, 1)}))
PY
  tail -1 "$out"
  [ -n "${KEEP_CAPTURES:-}" ] || rm -f "${files[@]}"
done
/usr/bin/python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
if len(rows) >= 2:
    a, b = rows[0], rows[-1]
    k = b["nodes"] / a["nodes"]
    print(f"{a['nodes']} -> {b['nodes']} nodes ({k:g}x): records {b['records'] / a['records']:.2f}x, "
          f"report wall {b['report_wall_s'] / a['report_wall_s']:.2f}x, CPU {b['report_cpu_s'] / a['report_cpu_s']:.2f}x, "
          f"peak RSS {b['peak_rss_mib'] / a['peak_rss_mib']:.2f}x")
PY
