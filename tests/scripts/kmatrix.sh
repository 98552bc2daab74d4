#!/usr/bin/env bash
# ctest wrapper for the qemu kernel matrix (label kmatrix): boots Debian's 6.1 and
# 6.12 kernels with this build tree's steptrace and steptrace_tests and runs the
# [root] portability tests, the fault tests and the mock-driver test in each.
#   kmatrix.sh SOURCE_DIR BUILD_DIR [KERNELS...]   (KMATRIX_KERNELS, default "6.1 6.12")
# Exit 77 (skipped) when not root: it needs apt-get and a root-built initramfs.
set -euo pipefail
src=$1 build=$2
shift 2
[ "$(id -u)" = 0 ] || { echo "SKIPPED: the kernel matrix needs root"; exit 77; }
# shellcheck disable=SC2086
[ $# -gt 0 ] || set -- ${KMATRIX_KERNELS:-6.1 6.12}
export BUILD_DIR=$build
exec "$src/tools/kernel-matrix/run.sh" "$@"
