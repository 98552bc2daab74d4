#!/usr/bin/env bash
# Fuzz what `steptrace report FILE` does with a capture: the reader, replay,
# analysis and every sink (text, JSON summary, Perfetto, HTML), with libFuzzer.
#   tools/fuzz/run-report.sh [SECONDS] [OUT_DIR]
# Builds OUT_DIR/fuzz_report with clang++ (-fsanitize=fuzzer,address,undefined)
# when a source is newer, then runs it for SECONDS (default 60) over a copy of
# tests/corpus/report, tests/corpus/capture and tests/fixtures/straggler.cap
# (the committed corpus is only read; new entries stay in OUT_DIR/corpus).
# Exit status non-zero on a crash, a leak, a sanitizer error, an uncaught
# exception or a broken invariant; the reproducer is left in OUT_DIR/artifacts/.
set -euo pipefail
secs=${1:-60}
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${2:-/tmp/steptrace-fuzz-report}
cxx=${CXX_FUZZ:-}
if [ -z "$cxx" ]; then
  for c in clang++ clang++-16 clang++-15 clang++-14; do
    if command -v "$c" >/dev/null; then cxx=$c; break; fi
  done
fi
[ -n "$cxx" ] || { echo "fuzz: clang++ not found" >&2; exit 1; }
mkdir -p "$out/artifacts" "$out/corpus" "$out/obj"
bin=$out/fuzz_report
u=$root/user
# The analysis library's own source list (what CMake builds as steptrace_analysis).
srcs=("$root/tools/fuzz/fuzz_report.cpp")
while read -r f; do
  case $f in ''|'#'*) continue ;; esac
  srcs+=("$u/$f")
done < "$u/analysis-sources.txt"
flags=(-std=c++20 -g -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
       -I"$u" -I"$root/bpf")
# One object per source, rebuilt when it or any header is newer (2 jobs: CI machines are small).
newest_h=$(stat -c %Y "$u"/*/*.h "$root/bpf/steptrace_abi.h" | sort -n | tail -1)
objs=()
for s in "${srcs[@]}"; do
  o=$out/obj/$(echo "${s#"$root"/}" | tr / _).o
  objs+=("$o")
  if [ ! -f "$o" ] || [ "$(stat -c %Y "$o")" -lt "$(stat -c %Y "$s")" ] || [ "$(stat -c %Y "$o")" -lt "$newest_h" ]; then
    echo "fuzz: $cxx ${s#"$root"/}"
    "$cxx" "${flags[@]}" -c "$s" -o "$o" &
    while [ "$(jobs -rp | wc -l)" -ge 2 ]; do wait -n; done
  fi
done
wait
"$cxx" -fsanitize=fuzzer,address,undefined "${objs[@]}" -o "$bin" $(pkg-config --libs fmt zlib)
cp -f "$root"/tests/corpus/report/* "$root"/tests/corpus/capture/* "$root"/tests/fixtures/straggler.cap "$out/corpus/"
cd "$out"
# -max_len covers the largest seed (straggler-nosched.raw, ~80 KB); -rss_limit_mb
# guards the reader's and the analysis' allocations.
"$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -max_len=131072 -print_final_stats=1 \
  -artifact_prefix="$out/artifacts/" "$out/corpus"
