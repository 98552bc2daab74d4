#!/usr/bin/env bash
# Regenerates vmlinux/<arch>/vmlinux.h from a kernel's BTF.
#
# The build never reads the build host's BTF: CO-RE relocates field offsets at
# load time, so one committed header works on every kernel we target. Run this
# only to pick up new kernel types, then rebuild and run the [root] tests.
#
# usage: tools/gen-vmlinux.sh [BTF_FILE] [ARCH]
#   BTF_FILE  defaults to /sys/kernel/btf/vmlinux (or a vmlinux ELF with .BTF)
#   ARCH      kernel arch name, defaults to x86
set -euo pipefail
btf=${1:-/sys/kernel/btf/vmlinux}
arch=${2:-x86}
top=$(cd "$(dirname "$0")/.." && pwd)
out="$top/vmlinux/$arch/vmlinux.h"
[ -r "$btf" ] || { echo "gen-vmlinux: cannot read BTF at $btf" >&2; exit 1; }
command -v bpftool >/dev/null || { echo "gen-vmlinux: bpftool not found (apt-get install bpftool)" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
tmp=$(mktemp)
bpftool btf dump file "$btf" format c > "$tmp"
mv "$tmp" "$out"
echo "wrote $out from $btf ($(uname -r) if this is the running kernel's BTF)"
