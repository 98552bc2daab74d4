#!/usr/bin/env bash
# Bounded libFuzzer run over the capture reader (CI): FUZZ_SECONDS (default 30).
#   fuzz_capture.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
exec "$src/tools/fuzz/run.sh" "${FUZZ_SECONDS:-30}" "$build/fuzz"
