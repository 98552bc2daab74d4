#!/usr/bin/env bash
# `steptrace top` in a real terminal (tmux, 100x40): frames refresh with the
# step rate, a bar per rank and the verdict; q quits, Ctrl-C quits; both stop
# the job (which exits on its own), leave the alternate screen, restore echo
# and print the final report. Needs root.
#   top_tmux.sh STEPTRACE_BIN TRAINSIM_BIN
set -euo pipefail
bin=$1 sim=$2
command -v tmux >/dev/null || { echo "tmux missing"; exit 1; }
t=$(mktemp -d)
sock="steptrace-top-$$"
tm() { tmux -L "$sock" "$@"; }
cleanup() { tm kill-server 2>/dev/null || true; rm -rf "$t"; }
trap cleanup EXIT

fail() {  # REASON FILE...
  echo "$1"; shift; cat "$@"; exit 1
}

wait_for() {  # PATTERN SECONDS -> 0 when the pane shows PATTERN
  local pat=$1 secs=$2 i
  for ((i = 0; i < secs * 5; i++)); do
    tm capture-pane -p -t top > "$t/pane" 2>/dev/null || true
    grep -qE "$pat" "$t/pane" && return 0
    sleep 0.2
  done
  echo "timed out waiting for /$pat/; pane:"; cat "$t/pane"; return 1
}

start() {  # KEY: how to quit; the job runs much longer than the test
  mkdir -p "$t/dev-$1"
  tm new-session -d -s top -x 100 -y 40 \
    "stty sane; $bin top --accel-dev $t/dev-$1/neuron0 -- $sim --scenario straggler --dev-dir $t/dev-$1 -d 60 --steps 1000000 \
     2>$t/stderr-$1; echo TOP-EXIT=\$?; stty -a | grep -o ' echo ' | head -1 | sed 's/^/TTY:/'; echo TTY-CHECKED; sleep 120"
}

for key in q C-c; do
  start "$key"
  wait_for 'steps/s' 20
  # Wait until both ranks have steps and bars, then check a later frame differs (it refreshes).
  wait_for '^ +1 +[0-9]+ +[0-9]+ +[0-9.]+  [DLMCHX.]{20,}' 30
  first=$(grep -o 'steptrace top - [0-9]* s' "$t/pane") || fail "no frame header" "$t/pane"
  # A later frame replaces it (a loaded CI host may take a few seconds per frame).
  for ((i = 0; i < 50; i++)); do
    sleep 0.2
    tm capture-pane -p -t top > "$t/pane"
    second=$(grep -o 'steptrace top - [0-9]* s' "$t/pane" || true)
    [ -n "$second" ] && [ "$first" != "$second" ] && break
  done
  [ -n "$second" ] && [ "$first" != "$second" ] || { echo "frame did not refresh: $first"; cat "$t/pane"; exit 1; }
  grep -q '^verdict: ' "$t/pane" || fail "no verdict line" "$t/pane"
  grep -q 'dropped 0' "$t/pane" || fail "events dropped" "$t/pane"
  [ "$(tm display -p -t top '#{alternate_on}')" = 1 ] || { echo "top is not on the alternate screen"; exit 1; }
  # Columns, not bytes: the frame may hold multi-byte characters.
  LC_ALL=C.UTF-8 python3 -c 'import sys; sys.exit(any(len(l.rstrip("\n")) > 100 for l in open(sys.argv[1], encoding="utf-8")))' "$t/pane" ||
    fail "a line wider than 100 columns" "$t/pane"
  tm send-keys -t top "$key"
  # Wait for the line after the terminal check: TOP-EXIT shows before stty has run.
  wait_for 'TTY-CHECKED' 40
  # top exits with the job's status: trainsim got the stop (SIGTERM for q,
  # the forwarded SIGINT for Ctrl-C), stopped its ranks and exited 130
  # itself; 137 would mean it had to be SIGKILLed.
  grep -q 'TOP-EXIT=130' "$t/pane" || { echo "top did not exit with the job's status 130:"; cat "$t/pane" "$t/stderr-$key"; exit 1; }
  grep -q '^TTY: echo' "$t/pane" || { echo "terminal echo not restored"; cat "$t/pane"; exit 1; }
  [ "$(tm display -p -t top '#{alternate_on}')" = 0 ] || { echo "alternate screen not left"; exit 1; }
  # The final report went to the normal screen after the live view.
  tm capture-pane -p -S -200 -t top > "$t/history"
  grep -q '^VERDICT: ' "$t/history" || { echo "no final report"; cat "$t/history"; exit 1; }
  grep -q 'Events and overhead' "$t/history" || fail "no events section in the final report" "$t/history"
  ! grep -q 'steptrace top - ' "$t/history" || { echo "live frames left on the normal screen"; exit 1; }
  tm kill-session -t top
  echo "top ok with $key"
done
