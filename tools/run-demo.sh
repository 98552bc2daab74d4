#!/usr/bin/env bash
# Sets up, builds and runs steptrace on its built-in demo: the trainsim
# training-host simulator (fake Neuron device and runtime, data loaders,
# ranks and collectives), and prints the report.
set -euo pipefail
# Root is needed (apt-get, BPF): from a root shell as it is, else through sudo.
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "$0: run as root" >&2; exit 1; }
  exec sudo --preserve-env=BUILD_DIR,STEPTRACE_ALL_TESTS "$0" "$@"
fi
top=$(cd "$(dirname "$0")/.." && pwd)
# Only what the demo needs: the build and trainsim, no test suite (run-tests.sh installs that).
"$top/tools/setup-deps.sh" --demo
"$top/tools/build.sh" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF
build=${BUILD_DIR:-$top/build}
scenario=${1:-straggler}
dev_dir=$(mktemp -d /tmp/steptrace-demo.XXXXXX)
trap 'rmdir "$dev_dir" 2>/dev/null || true' EXIT
# The demo scenarios run two ranks; rank r drives neuron<r>; both set up their
# EFA endpoint through the fake adapter's uverbs0.
"$build/user/steptrace" run --accel-dev "$dev_dir/neuron0" --accel-dev "$dev_dir/neuron1" \
  --rdma-dev "$dev_dir/uverbs0" -- \
  "$build/tools/trainsim/trainsim" --scenario "$scenario" --dev-dir "$dev_dir"
