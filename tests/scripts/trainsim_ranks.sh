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
