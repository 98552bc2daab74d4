#!/usr/bin/env bash
# Configure and build into BUILD_DIR (default build/). Extra args go to cmake.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}
cmake -S "$top" -B "$build" -G Ninja "$@" >/dev/null
ninja -C "$build"
