#!/usr/bin/env bash
# Fuzz the capture reader with libFuzzer.
#   tools/fuzz/run.sh [SECONDS] [BUILD_DIR]
# Builds build-dir/fuzz_capture with clang++ (-fsanitize=fuzzer,address,undefined)
# from the reader's sources, then runs it for SECONDS (default 60) over a copy of
# tests/corpus/capture (the committed corpus is only read). Exit status non-zero
# when the fuzzer finds a crash, a leak or a sanitizer error; the reproducer is
# left in BUILD_DIR/artifacts/.
set -euo pipefail
secs=${1:-60}
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${2:-/tmp/steptrace-fuzz}
cxx=${CXX_FUZZ:-}
if [ -z "$cxx" ]; then
  for c in clang++ clang++-16 clang++-15 clang++-14; do
    if command -v "$c" >/dev/null; then cxx=$c; break; fi
  done
fi
[ -n "$cxx" ] || { echo "fuzz: clang++ not found" >&2; exit 1; }
mkdir -p "$out/artifacts" "$out/corpus"
bin=$out/fuzz_capture
srcs=("$root/tools/fuzz/fuzz_capture.cpp" "$root/user/capture/capture_file.cpp" "$root/user/decode/decoder.cpp"
      "$root/user/util/sys_root.cpp" "$root/user/util/log.cpp" "$root/user/capture/drop_stats.cpp")
newest=0
for s in "${srcs[@]}" "$root"/user/capture/*.h "$root"/user/decode/*.h "$root"/bpf/steptrace_abi.h; do
  m=$(stat -c %Y "$s"); [ "$m" -gt "$newest" ] && newest=$m
done
if [ ! -x "$bin" ] || [ "$(stat -c %Y "$bin")" -lt "$newest" ]; then
  echo "fuzz: building $bin with $cxx"
  "$cxx" -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$root/user" -I"$root/bpf" "${srcs[@]}" -o "$bin.tmp" $(pkg-config --libs fmt zlib)
  mv "$bin.tmp" "$bin"
fi
cp -f "$root"/tests/corpus/capture/* "$out/corpus/"
cd "$out"
# -rss_limit_mb guards the reader's allocations; -max_len covers the real captures.
"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=262144 -print_final_stats=1 \
  -artifact_prefix="$out/artifacts/" "$out/corpus"
