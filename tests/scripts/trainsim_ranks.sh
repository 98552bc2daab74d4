# Sourced by the multi-node tests: trainsim's rank processes, in RANK order.
# The ranks are the launcher's children whose environment names its run
# (their loader workers carry the same variables but are the ranks' children).
trainsim_rank_pids() {  # LAUNCHER_PID
  local sim=$1 p
  for p in $(cat /proc/"$sim"/task/*/children 2>/dev/null); do
    tr '\0' '\n' < /proc/"$p"/environ 2>/dev/null | grep -qx "TORCHELASTIC_RUN_ID=trainsim-$sim" || continue
    echo "$(tr '\0' '\n' < /proc/"$p"/environ | sed -n 's/^RANK=//p') $p"
  done | sort -n | awk '{print $2}'
}

# Waits up to 30 s for N ranks of LAUNCHER_PID; sets the array `pids`.
wait_trainsim_ranks() {  # LAUNCHER_PID N
  pids=()
  for _ in $(seq 300); do
    mapfile -t pids < <(trainsim_rank_pids "$1")
    [ "${#pids[@]}" -ge "$2" ] && return 0
    sleep 0.1
  done
  return 1
}

# Records a 2 x 2 job's two simulated nodes apart, as two hosts would: node
# N's ranks (pids[2N], pids[2N+1]) into DIR/nodeN.cap for SECONDS, with the
# simulated devices under DIR/dev and any further recorder flags. Returns 1,
# with the recorders' output, when one fails.
record_two_nodes() {  # STEPTRACE_BIN DIR SECONDS [FLAGS...]
  local bin=$1 dir=$2 secs=$3 f rc=0 r0 r1
  shift 3
  local flags=("$@")
  for f in "$dir"/dev/neuron* "$dir"/dev/uverbs*; do
    case $f in *.nds) ;; *uverbs*) flags+=(--rdma-dev "$f") ;; *) flags+=(--accel-dev "$f") ;; esac
  done
  "$bin" record -o "$dir/node0.cap" -d "$secs" "${flags[@]}" -p "${pids[0]},${pids[1]}" > "$dir/rec0.log" 2>&1 &
  r0=$!
  "$bin" record -o "$dir/node1.cap" -d "$secs" "${flags[@]}" -p "${pids[2]},${pids[3]}" > "$dir/rec1.log" 2>&1 &
  r1=$!
  wait $r0 || rc=$?
  wait $r1 || rc=$?
  [ $rc = 0 ] || { echo "a recorder failed ($rc)"; cat "$dir/rec0.log" "$dir/rec1.log"; return 1; }
}

# Two simulated nodes joined by a real link: network namespaces
# stnode{0,1}-PID joined by a veth pair whose both ends tc's tbf limits to
# MBIT Mbit/s, for trainsim --node-netns. Sets `veth_ns` (for
# remove_veth_nodes, which a caller's EXIT trap runs) and `node_flags`
# (trainsim's flags). A failed step fails the caller (set -e).
make_veth_nodes() {  # MBIT
  local i
  veth_ns=("stnode0-$$" "stnode1-$$")
  ip netns add "${veth_ns[0]}"
  ip netns add "${veth_ns[1]}"
  ip link add "stv0-$$" type veth peer name "stv1-$$"
  for i in 0 1; do
    ip link set "stv$i-$$" netns "${veth_ns[$i]}"
    ip -n "${veth_ns[$i]}" addr add "10.213.0.$((i + 1))/24" dev "stv$i-$$"
    ip -n "${veth_ns[$i]}" link set lo up
    ip -n "${veth_ns[$i]}" link set "stv$i-$$" up
    ip netns exec "${veth_ns[$i]}" tc qdisc add dev "stv$i-$$" root tbf rate "${1}mbit" burst 256kb latency 100ms
  done
  node_flags=(--node-netns "${veth_ns[0]},${veth_ns[1]}" --node-addrs 10.213.0.1,10.213.0.2)
}

remove_veth_nodes() {
  local n
  for n in "${veth_ns[@]}"; do ip netns del "$n" 2>/dev/null || true; done
  [ "${#veth_ns[@]}" = 0 ] || ip link del "stv0-$$" 2>/dev/null || true  # if never moved into its namespace
  veth_ns=()
}

# Bytes node 0 sent over the veth link.
veth_tx_bytes() {
  ip -n "${veth_ns[0]}" -s -j link show "stv0-$$" |
    /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["stats64"]["tx"]["bytes"])'
}
