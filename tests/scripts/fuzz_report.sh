#!/usr/bin/env bash
# Bounded libFuzzer run (CI) over capture replay, analysis and every report
# sink: FUZZ_SECONDS (default 60).
#   fuzz_report.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
exec "$src/tools/fuzz/run-report.sh" "${FUZZ_SECONDS:-60}" "$build/fuzz-report"
