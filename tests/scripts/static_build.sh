#!/usr/bin/env bash
# The static build (tools/build-static.sh) gives one self-contained binary
# that loads the BPF programs, traces a job and serves /metrics.
# usage: static_build.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
"$src/tools/build-static.sh" "$build" > "$build.log" 2>&1 || { tail -40 "$build.log"; exit 1; }
bin=$build/user/steptrace
file "$bin" | grep -q "statically linked" || { echo "not static: $(file "$bin")"; exit 1; }
if ldd "$bin" 2>/dev/null | grep -q "=>"; then echo "has shared dependencies"; ldd "$bin"; exit 1; fi
t=$(mktemp -d)
trap 'rm -rf "$t"; [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null || true' EXIT
"$bin" run --json "$t/r.json" -- /bin/sh -c 'for i in 1 2 3; do sleep 0.05; done' > /dev/null
python3 -c "import json,sys; j=json.load(open('$t/r.json')); sys.exit(0 if j['records'] > 0 else 1)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" daemon --listen "127.0.0.1:$port" --dump-dir "$t/dumps" --control-socket "$t/run/control.sock" \
  > "$t/daemon.log" 2>&1 &
pid=$!
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/metrics" > "$t/m" 2>/dev/null && break; sleep 0.2; done
grep -q '^steptrace_build_info' "$t/m" || { echo "no metrics"; cat "$t/daemon.log"; exit 1; }
"$bin" ctl --socket "$t/run/control.sock" dump static-build > "$t/ctl.out" || { echo "ctl dump failed"; cat "$t/daemon.log"; exit 1; }
[ -f "$(cat "$t/ctl.out")" ] || { echo "no capture from ctl dump"; exit 1; }
echo "static binary: $(stat -c %s "$bin") bytes, traced a job, served /metrics and wrote a capture on ctl dump"
