#!/usr/bin/env bash
# The fleet view of one job across nodes: trainsim's straggler scenario as 2
# simulated nodes x 2 ranks (rank 3 on node 1 preprocesses 12x slower), each
# node's ranks in their own cgroup, one steptrace daemon per node scoped to
# its cgroup (as one daemon per pod under Kubernetes), and a real Prometheus
# scraping both with the shipped recording rules and alerts. The culprit rule
# must name node 1 / rank 3 and the alert must be pending or firing for it;
# no single daemon can (each sees only its node's ranks). Needs root.
#   fleet_prometheus.sh STEPTRACE_BIN TRAINSIM_BIN PROMETHEUS_BIN SOURCE_DIR
set -euo pipefail
bin=$1 sim=$2 prom=$3 src=$4
t=$(mktemp -d /tmp/st-fleet.XXXXXX)
py=/usr/bin/python3
pids_to_kill=()
cleanup() {
  for p in "${pids_to_kill[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids_to_kill[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$t"
}
trap cleanup EXIT

# trainsim --node-cgroups puts each node's ranks (and their loaders, from
# their fork on) in <cgroup2 mount>/trainsim-<its pid>/node<N>/rank<R>, and
# removes the groups when it ends.
mkdir -p "$t/dev"
"$sim" --scenario straggler --ranks 4 --nnodes 2 --node-cgroups --duration 70 --dev-dir "$t/dev" \
  --truth "$t/truth.json" > "$t/sim.log" 2>&1 &
simpid=$!
pids_to_kill+=("$simpid")
. "$(dirname "$0")/trainsim_ranks.sh"
wait_trainsim_ranks "$simpid" 4 || true
[ "${#pids[@]}" = 4 ] || { echo "expected 4 ranks, found ${#pids[@]}"; cat "$t/sim.log"; exit 1; }
cg_node() { sed -n "s/^trainsim: node $1's ranks in //p" "$t/sim.log"; }
cg0=$(cg_node 0) cg1=$(cg_node 1)
[ -d "$cg0" ] && [ -d "$cg1" ] || { echo "no node cgroups"; cat "$t/sim.log"; exit 1; }
name=trainsim-$simpid
for i in 0 1 2 3; do
  grep -q "^0::/$name/node$((i / 2))/rank$i\$" /proc/"${pids[$i]}"/cgroup ||
    { echo "rank $i is not in its node's cgroup:"; cat /proc/"${pids[$i]}"/cgroup; exit 1; }
done
echo "ranks ${pids[*]}: 0,1 in $cg0, 2,3 in $cg1"

free_port() { $py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
devs=()
for f in "$t"/dev/neuron* "$t"/dev/uverbs*; do
  case $f in *uverbs*) devs+=(--rdma-dev "$f") ;; *) devs+=(--accel-dev "$f") ;; esac
done
ports=()
for n in 0 1; do
  port=$(free_port)
  ports+=("$port")
  mkdir -p "$t/d$n"
  # Node 0's scope as a cgroup directory, node 1's as /proc/PID/cgroup reads it: both forms.
  scope=$([ $n = 0 ] && echo "$cg0" || echo "/$name/node1")
  "$bin" daemon --config /dev/null --cgroup "$scope" --host "sim-node$n" --listen "127.0.0.1:$port" \
    --control-socket none --dump-dir "$t/d$n" --no-auto-dump --window 3 --scan-ms 250 --max-cpu 100 \
    "${devs[@]}" > "$t/daemon$n.log" 2>&1 &
  pids_to_kill+=("$!")
done
prom_port=$(free_port)
cat > "$t/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $src/packaging/prometheus/steptrace-rules.yml
  - $src/packaging/prometheus/steptrace-alerts.yml
scrape_configs:
  - job_name: steptrace
    static_configs:
      - targets: ['127.0.0.1:${ports[0]}', '127.0.0.1:${ports[1]}']
YML
"$prom" --config.file="$t/prometheus.yml" --storage.tsdb.path="$t/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" > "$t/prometheus.log" 2>&1 &
pids_to_kill+=("$!")

# 40 s of the job: a dozen 3 s windows per daemon, scraped every second.
sleep 40
kill -0 "$simpid" || { echo "trainsim ended early"; cat "$t/sim.log"; exit 1; }
$py - "$prom_port" <<'PY' || { tail -20 "$t"/daemon*.log "$t/prometheus.log"; exit 1; }
import json, sys, urllib.parse, urllib.request
port = sys.argv[1]
def get(path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        j = json.load(r)
    assert j["status"] == "success", j
    return j["data"]
def query(q):
    return get("/api/v1/query?query=" + urllib.parse.quote(q))["result"]
up = query('up{job="steptrace"}')
assert len(up) == 2 and all(s["value"][1] == "1" for s in up), up
waits = query("steptrace:rank_collective_wait:ratio_rate5m")
for s in sorted(waits, key=lambda s: s["metric"]["rank"]):
    m = s["metric"]
    print(f"steptrace:rank_collective_wait:ratio_rate5m{{training_job={m['training_job']},node={m.get('node')},"
          f"rank={m['rank']}}} = {float(s['value'][1]):.3f}")
assert sorted((s["metric"].get("node"), s["metric"]["rank"]) for s in waits) == \
    [("0", "0"), ("0", "1"), ("1", "2"), ("1", "3")], waits
# Lateness against the earliest rank of its own node: node 1's planted
# straggler arrives after its node peer; node 0's ranks arrive together.
late = {(s["metric"].get("node"), s["metric"]["rank"]): float(s["value"][1])
        for s in query("steptrace:rank_arrival_lateness:ratio_rate5m")}
print("steptrace:rank_arrival_lateness:ratio_rate5m", {f"{n}/{r}": round(v, 3) for (n, r), v in sorted(late.items())})
assert sorted(late) == [("0", "0"), ("0", "1"), ("1", "2"), ("1", "3")], late
assert late[("1", "3")] > 2 * max(late[("1", "2")], 0.005), late
nodes = query("sort_desc(steptrace:node_collective_wait:ratio_rate5m)")
print("nodes ranked by wait:", [(s["metric"]["node"], round(float(s["value"][1]), 3)) for s in nodes])
culprit = query("steptrace:job_culprit_rank")
print("steptrace:job_culprit_rank:", [(s["metric"], s["value"][1]) for s in culprit])
assert len(culprit) == 1, culprit
assert (culprit[0]["metric"]["node"], culprit[0]["metric"]["rank"]) == ("1", "3"), culprit
alerts = [a for a in get("/api/v1/alerts")["alerts"] if a["labels"]["alertname"] == "SteptraceJobHeldBackByRank"]
print("SteptraceJobHeldBackByRank:", [(a["state"], a["labels"].get("node"), a["labels"].get("rank")) for a in alerts])
assert [(a["labels"].get("node"), a["labels"].get("rank")) for a in alerts] == [("1", "3")], alerts
assert alerts[0]["state"] in ("pending", "firing"), alerts
PY
# Each daemon alone: only its own node's ranks.
for n in 0 1; do
  ranks=$($py -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
      "http://127.0.0.1:${ports[$n]}/metrics" | grep '^steptrace_straggler_steps_total' \
    | sed -n 's/.*rank="\([0-9]*\)".*/\1/p' | sort -u | tr '\n' ' ')
  echo "daemon of node $n exports ranks: $ranks"
  [ "$ranks" = "$([ $n = 0 ] && echo '0 1 ' || echo '2 3 ')" ] || { echo "daemon $n saw other ranks"; exit 1; }
done
echo "fleet prometheus: OK"
