#!/usr/bin/env bash
# Sets up, builds (with AddressSanitizer + UBSan) and runs every test: unit
# tests and the [root] integration tests that load the real BPF programs.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/tools/setup-deps.sh"
export BUILD_DIR=${BUILD_DIR:-$top/build-test}
"$top/tools/build.sh" -DSTEPTRACE_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
# libbpf keeps a few process-lifetime allocations: leaks are not what these tests judge.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$BUILD_DIR"
ctest --output-on-failure -j2 --timeout 300
