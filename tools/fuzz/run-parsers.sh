#!/usr/bin/env bash
# Bounded libFuzzer runs over every parser of external text (issue 8):
#   proc_devices  /proc/devices (the neuron char major)      util/sys_root.cpp
#   cgroup_procs  cgroup.procs pid lists                      util/sys_root.cpp
#   cap_eff       /proc/self/status CapEff                    loader/preflight.cpp
#   lockdown      /sys/kernel/security/lockdown               loader/preflight.cpp
#   kallsyms      /proc/kallsyms lines (kprobe tiers)         loader/kernel_text.cpp
#   tp_format     tracefs events/*/format (neuron:* layouts)  loader/kernel_text.cpp
#   maps          /proc/PID/maps (runtime-library discovery)  session/probe_libs.cpp
#   identity      /proc/PID/cgroup + environ (container, pod)  util/proc_identity.cpp
#   cli           the command line (parse_options)            cli/options.cpp
# (The capture-file reader has its own run: tools/fuzz/run.sh.)
#
#   tools/fuzz/run-parsers.sh [OUT_DIR] [TARGET...]
# FUZZ_SECONDS per target (default 5). Builds OUT_DIR/fuzz_<target> with clang++
# -fsanitize=fuzzer,address,undefined when a source is newer, runs it over a copy of
# tests/corpus/<target>/ (the committed corpus is only read), and exits non-zero on
# the first crash, leak, sanitizer error or broken invariant (reproducer in
# OUT_DIR/artifacts/). New corpus entries stay in OUT_DIR/corpus/<target>.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-/tmp/steptrace-fuzz-parsers}
shift || true
secs=${FUZZ_SECONDS:-5}
cxx=${CXX_FUZZ:-}
if [ -z "$cxx" ]; then
  for c in clang++ clang++-16 clang++-15 clang++-14; do
    if command -v "$c" >/dev/null; then cxx=$c; break; fi
  done
fi
[ -n "$cxx" ] || { echo "fuzz: clang++ not found" >&2; exit 1; }
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(proc_devices cgroup_procs cap_eff lockdown kallsyms tp_format maps identity cli)
u=$root/user
declare -A srcs=(
  [proc_devices]="$u/util/sys_root.cpp $u/util/log.cpp"
  [cgroup_procs]="$u/util/sys_root.cpp $u/util/log.cpp"
  [cap_eff]="$u/loader/preflight.cpp $u/loader/tiers.cpp $u/util/sys_root.cpp $u/util/log.cpp"
  [lockdown]="$u/loader/preflight.cpp $u/loader/tiers.cpp $u/util/sys_root.cpp $u/util/log.cpp"
  [kallsyms]="$u/loader/kernel_text.cpp"
  [tp_format]="$u/loader/kernel_text.cpp"
  [maps]="$u/session/probe_libs.cpp"
  [identity]="$u/util/proc_identity.cpp $u/util/sys_root.cpp $u/util/text.cpp $u/util/log.cpp"
  [cli]="$u/cli/options.cpp $u/util/text.cpp"
)
mkdir -p "$out/artifacts"
rc=0
for t in "${targets[@]}"; do
  [ -n "${srcs[$t]:-}" ] || { echo "fuzz: unknown target $t" >&2; exit 2; }
  bin=$out/fuzz_$t
  # shellcheck disable=SC2086
  newest=$(stat -c %Y "$root/tools/fuzz/fuzz_text.cpp" ${srcs[$t]} "$u"/*/*.h "$root/bpf/steptrace_abi.h" | sort -n | tail -1)
  if [ ! -x "$bin" ] || [ "$(stat -c %Y "$bin")" -lt "$newest" ]; then
    echo "fuzz: building $bin"
    # shellcheck disable=SC2086
    "$cxx" -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
      -Wall -Wextra -Werror -Wno-missing-field-initializers -DFUZZ_$t -I"$u" -I"$root/bpf" \
      "$root/tools/fuzz/fuzz_text.cpp" ${srcs[$t]} -o "$bin.tmp" $(pkg-config --libs fmt) ||
      { echo "fuzz: build of $t failed" >&2; exit 1; }
    mv "$bin.tmp" "$bin"
  fi
  mkdir -p "$out/corpus/$t"
  cp -f "$root/tests/corpus/$t"/* "$out/corpus/$t/"
  echo "fuzz: $t for ${secs}s"
  if ! (cd "$out" && "$bin" -max_total_time="$secs" -timeout=5 -rss_limit_mb=2048 -max_len=8192 \
      -print_final_stats=1 -artifact_prefix="$out/artifacts/$t-" "$out/corpus/$t" >"$out/$t.log" 2>&1); then
    echo "fuzz: $t FAILED (log $out/$t.log, reproducer in $out/artifacts/)"; tail -40 "$out/$t.log"; rc=1
  else
    grep -E '^stat::number_of_executed_units|^stat::new_units_added' "$out/$t.log" | tr '\n' ' ' | sed "s/^/fuzz: $t ok: /"; echo
  fi
done
exit $rc
