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
srcs=("$root/tools/fuzz/fuzz_report.cpp" "$u/session/replay.cpp" "$u/capture/capture_file.cpp"
      "$u/decode/decoder.cpp" "$u/decode/neuron_cmd.cpp" "$u/decode/rdma_verb.cpp"
      "$u/attribution/fabric_setup.cpp" "$u/attribution/job_analysis.cpp" "$u/attribution/verdict.cpp"
      "$u/attribution/step_attribution.cpp" "$u/attribution/cross_rank.cpp" "$u/attribution/device_signal_pass.cpp"
      "$u/steps/anchors.cpp" "$u/steps/ranks.cpp" "$u/steps/step_builder.cpp" "$u/signals/signals_data.cpp"
      "$u/timeline/timeline_store.cpp" "$u/timeline/thread_table.cpp" "$u/report/collector_stats.cpp"
      "$u/report/summary.cpp" "$u/export/report_stats.cpp" "$u/export/text_report.cpp"
      "$u/export/perfetto.cpp" "$u/export/html_report.cpp" "$u/signals/counters.cpp"
      "$u/signals/device_signals.cpp" "$u/signals/signals_json.cpp" "$u/util/sys_root.cpp" "$u/util/log.cpp"
      "$u/capture/drop_stats.cpp" "$u/util/text.cpp")
flags=(-std=c++20 -g -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
       -I"$u" -I"$root/bpf")
# One object per source, rebuilt when it or any header is newer (2 jobs: CI machines are small).
newest_h=$(stat -c %Y "$u"/*/*.h "$root/bpf/steptrace_abi.h" "$root/bpf/arch_x86.h" | sort -n | tail -1)
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
