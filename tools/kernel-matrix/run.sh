#!/usr/bin/env bash
# tools/kernel-matrix/run.sh - boot Debian's packaged kernels under qemu (software
# emulation) in a throwaway initramfs and run steptrace's portability checks there:
# `steptrace check`, the [root] integration tests, and the mock Neuron driver test
# (tools/mock-neuron: /dev/neuron0 found by its /proc/devices major, no --accel-dev).
#
# Usage: tools/kernel-matrix/run.sh [6.1|6.12|all|<kernel release>]...   (default: 6.1)
#   6.1  -> what linux-image-amd64 points at       (bookworm, e.g. 6.1.0-57-amd64)
#   6.12 -> what linux-image-6.12-amd64 points at  (bookworm-security backport)
#   <kernel release> -> linux-image-<release> and linux-headers-<release>
#
# Environment:
#   BUILD_DIR  a steptrace build with user/steptrace and tests/steptrace_tests, used as is
#              (default: a Release build made/updated here in $KM_WORK/build)
#   KM_CACHE   downloaded .debs and unpacked kernels/headers, kept between runs
#              (default: $XDG_CACHE_HOME/steptrace-kmatrix, else /var/cache/steptrace-kmatrix)
#   KM_WORK    per-run files: module builds, initramfs, disk image, logs (default /tmp/steptrace-kmatrix)
#   KM_TESTS   Catch2 test spec run in the guest (default "[root]~[drops]~[steps]~[lifecycle]~[hostile]~[record]~[containers]~[hangs]~[changes]~[python]" (the guest has no python3): the ring-overflow
#              tests rely on host speed (under software emulation the consumer keeps up), and the
#              step-marker test's on-CPU tolerance (±4 ms) does not hold under TCG; the lifecycle
#              and hostile-name tests drive bash launchers and trainsim (so do the hang and change
#              tests), the record tests st-pingpong,
#              none of which the busybox guest has; the container tests need a mounted cgroup
#              hierarchy, unshare/mount and trainsim's FUSE device, which it has not either)
#   KM_SPLIT   1 (default): each test case in its own process; 0: the whole spec in one process
#   KM_TCG_THREAD  single (default) or multi: qemu's TCG threading (multi once oopsed 6.12)
#   KM_MODULE_BTF=1  give the mock neuron.ko BTF where the headers allow it (needs pahole: dwarves)
#   SMP (2, or a full -smp spec), MEM (MiB, 2048), TIMEOUT (seconds per boot, 900),
#   SKIP_APT=1 (never apt-get install on the host)
#
# Prints "RESULT: PASS <release>" or "RESULT: FAIL <release>" per kernel; exits non-zero
# if any kernel failed. Nothing is installed as a host kernel: kernel and header .debs are
# fetched with `apt-get download` and unpacked with `dpkg-deb -x` (installing the 6.12
# headers package would pull in a 6.12 host kernel).
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
here=$top/tools/kernel-matrix
KM_CACHE=${KM_CACHE:-${XDG_CACHE_HOME:+$XDG_CACHE_HOME/steptrace-kmatrix}}
KM_CACHE=${KM_CACHE:-/var/cache/steptrace-kmatrix}
KM_WORK=${KM_WORK:-/tmp/steptrace-kmatrix}
KM_TESTS=${KM_TESTS:-[root]~[drops]~[steps]~[lifecycle]~[hostile]~[record]~[containers]~[hangs]~[changes]~[python]}
KM_SPLIT=${KM_SPLIT:-1}
# multi-threaded TCG once oopsed 6.12 ("Oops: int3" in __schedule while a static key was being
# live-patched): single-threaded TCG is the safe default on 2-core CI hosts.
KM_TCG_THREAD=${KM_TCG_THREAD:-single}
SMP=${SMP:-2}
MEM=${MEM:-2048}
TIMEOUT=${TIMEOUT:-900}
export DEBIAN_FRONTEND=noninteractive

now() { date +%s.%N; }
dt() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
say() { echo "[kmatrix] $*"; }
die() { echo "[kmatrix] error: $*" >&2; exit 2; }
T0=$(now)

[ "$(id -u)" = 0 ] || die "run as root (apt-get, and the guest tests need a root-built initramfs)"
mkdir -p "$KM_CACHE/debs" "$KM_CACHE/k" "$KM_CACHE/hdr" "$KM_WORK/logs"

# ------------------------------------------------------------------ host tools
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
[ -x /bin/busybox ] && /bin/busybox --list 2>/dev/null | grep -qx insmod || need+=(busybox-static)
command -v cpio >/dev/null || need+=(cpio)
command -v mke2fs >/dev/null || need+=(e2fsprogs)
command -v xz >/dev/null || need+=(xz-utils)
command -v depmod >/dev/null || need+=(kmod)
command -v make >/dev/null || need+=(make)
if [ ${#need[@]} -gt 0 ]; then
  [ "${SKIP_APT:-0}" = 1 ] && die "missing host packages: ${need[*]} (SKIP_APT=1)"
  say "installing ${need[*]}"
  apt-get install -y -qq --no-install-recommends "${need[@]}" >"$KM_WORK/logs/apt.log" 2>&1 ||
    die "apt-get install failed (see $KM_WORK/logs/apt.log)"
fi
# busybox-static conflicts with busybox; either gives a static /bin/busybox on Debian 12
file -L /bin/busybox 2>/dev/null | grep -q 'statically linked' || ldd /bin/busybox 2>&1 | grep -q 'not a dynamic' ||
  die "/bin/busybox is not static: install busybox-static"

# ------------------------------------------------------------------ which kernels
resolve() { apt-cache depends "$1" 2>/dev/null | sed -n 's/^ *Depends: linux-image-\([^ ]*\)$/\1/p' | head -1; }
KVERS=()
for a in "${@:-6.1}"; do
  case $a in
    6.1) KVERS+=("$(resolve linux-image-amd64)") ;;
    6.12) KVERS+=("$(resolve linux-image-6.12-amd64)") ;;
    all) KVERS+=("$(resolve linux-image-amd64)" "$(resolve linux-image-6.12-amd64)") ;;
    -h | --help) sed -n "2,/^set -euo/p" "$0" | sed "$ d"; exit 0 ;;
    *) KVERS+=("$a") ;;
  esac
done
for kv in "${KVERS[@]}"; do [ -n "$kv" ] || die "could not resolve a kernel package (apt-get update?)"; done
say "kernels: ${KVERS[*]}"

# ------------------------------------------------------------------ kernel image + headers (download, unpack)
fetch() { # $1 = package name -> path of its .deb in the cache
  local f
  f=$(ls "$KM_CACHE/debs/$1"_*.deb 2>/dev/null | tail -1 || true)
  if [ -z "$f" ]; then
    (cd "$KM_CACHE/debs" && apt-get -o APT::Sandbox::User=root download "$1" >>"$KM_WORK/logs/download.log" 2>&1) ||
      die "apt-get download $1 failed (see $KM_WORK/logs/download.log)"
    f=$(ls "$KM_CACHE/debs/$1"_*.deb | tail -1)
  fi
  echo "$f"
}
for kv in "${KVERS[@]}"; do
  if [ ! -e "$KM_CACHE/k/$kv/boot/vmlinuz-$kv" ]; then
    say "$kv: fetching and unpacking linux-image-$kv"
    rm -rf "$KM_CACHE/k/$kv"
    rm -rf "$KM_CACHE/k/$kv.tmp"
    dpkg-deb -x "$(fetch "linux-image-$kv")" "$KM_CACHE/k/$kv.tmp"
    mv "$KM_CACHE/k/$kv.tmp" "$KM_CACHE/k/$kv"
  fi
  # the .deb ships no modules.dep (its postinst makes it)
  [ -e "$KM_CACHE/k/$kv/lib/modules/$kv/modules.dep" ] || depmod -b "$KM_CACHE/k/$kv" "$kv"
  hr=$KM_CACHE/hdr/$kv
  if [ ! -e "$hr/usr/src/linux-headers-$kv/Makefile" ]; then
    say "$kv: fetching and unpacking linux-headers-$kv (+ -common, linux-kbuild)"
    rm -rf "$hr" "$hr.tmp"
    h=$(fetch "linux-headers-$kv")
    dpkg-deb -x "$h" "$hr.tmp"
    for d in $(dpkg-deb -f "$h" Depends | tr ',' '\n' | grep -oE 'linux-(headers-[^ ]+-common|kbuild-[^ ]+)'); do
      dpkg-deb -x "$(fetch "$d")" "$hr.tmp"
    done
    # the arch headers include the -common tree by absolute path: point it into the cache
    sed -i "s#^include /usr/src/#include $hr/usr/src/#" "$hr.tmp/usr/src/linux-headers-$kv/Makefile"
    mv "$hr.tmp" "$hr"
  fi
done
T1=$(now); say "kernels and headers ready: $(dt "$T0" "$T1")s"

# ------------------------------------------------------------------ steptrace (release build)
if [ -z "${BUILD_DIR:-}" ]; then
  BUILD_DIR=$KM_WORK/build
  say "building steptrace (Release) in $BUILD_DIR"
  cmake -S "$top" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTEPTRACE_TRAINSIM=OFF \
    -DBUILD_TESTING=ON >"$KM_WORK/logs/cmake.log" 2>&1 || die "cmake failed (see $KM_WORK/logs/cmake.log)"
  ninja -C "$BUILD_DIR" steptrace steptrace_tests >"$KM_WORK/logs/ninja.log" 2>&1 ||
    die "build failed (see $KM_WORK/logs/ninja.log)"
fi
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
ST=$BUILD_DIR/user/steptrace
STT=$BUILD_DIR/tests/steptrace_tests
[ -x "$ST" ] && [ -x "$STT" ] || die "no $ST or $STT (set BUILD_DIR to a built tree)"
# The guest helpers: static, so they need nothing from the initramfs.
B=$KM_WORK/bin
mkdir -p "$B"
[ "$B/neuron_client" -nt "$here/neuron_client.c" ] && [ "$B/neuron_client" -nt "$top/bpf/neuron_uapi.h" ] ||
  gcc -O2 -Wall -Wextra -static -I"$top/bpf" -o "$B/neuron_client" "$here/neuron_client.c"
[ "$B/uverbs_client" -nt "$here/uverbs_client.c" ] && [ "$B/uverbs_client" -nt "$top/bpf/rdma_uapi.h" ] ||
  gcc -O2 -Wall -Wextra -static -I"$top/bpf" -o "$B/uverbs_client" "$here/uverbs_client.c"
[ "$B/neuron_check" -nt "$here/neuron_check.cpp" ] ||
  g++ -std=c++17 -O2 -Wall -Wextra -static -o "$B/neuron_check" "$here/neuron_check.cpp"
T2=$(now); say "steptrace and guest helpers ready: $(dt "$T1" "$T2")s"

# ------------------------------------------------------------------ mock neuron.ko per kernel
rc=0
declare -A MODOK
for kv in "${KVERS[@]}"; do
  md=$KM_WORK/mod-$kv
  rm -rf "$md"; mkdir -p "$md"
  cp "$top"/tools/mock-neuron/{Kbuild,*.c,*.h} "$top/bpf/neuron_uapi.h" "$md/"
  # No module BTF by default, like a DKMS build of the real driver on a node without pahole
  # (6.12's headers ship a vmlinux, so kbuild would otherwise run pahole). KM_MODULE_BTF=1 keeps it.
  btf=(CONFIG_DEBUG_INFO_BTF_MODULES=)
  [ "${KM_MODULE_BTF:-0}" = 1 ] && btf=()
  if make -C "$KM_CACHE/hdr/$kv/usr/src/linux-headers-$kv" M="$md" "${btf[@]}" modules \
    >"$KM_WORK/logs/kbuild-$kv.log" 2>&1; then
    MODOK[$kv]=1
    grep -E 'warning|error' "$KM_WORK/logs/kbuild-$kv.log" | sed "s/^/[$kv] kbuild: /" || true
  else
    say "$kv: mock neuron.ko build FAILED:"; tail -20 "$KM_WORK/logs/kbuild-$kv.log"; MODOK[$kv]=0; rc=1
  fi
done
T3=$(now); say "mock neuron.ko built: $(dt "$T2" "$T3")s"

# ------------------------------------------------------------------ initramfs per kernel
modcat() { case $1 in *.xz) xz -dc "$1" ;; *.zst) zstd -qdc "$1" ;; *) cat "$1" ;; esac; }
moddeps() { # $1 = modules tree, $2 = module name -> its file and its dependencies, load order (deps first)
  awk -v m="$2" -F': *' '{ n = $1; sub(/.*\//, "", n); sub(/\.ko.*/, "", n); gsub(/-/, "_", n) }
    n == m { k = split($2, d, " "); for (i = k; i >= 1; i--) print d[i]; print $1; exit }' "$1/modules.dep"
}
copy_with_libs() { # $1 = root, $2 = binary: copy it at the same path, with every library ldd names
  local r=$1 f=$2 l
  mkdir -p "$r$(dirname "$f")"; cp -L "$f" "$r$f"
  for l in $(ldd "$f" 2>/dev/null | grep -oE '/[^ ]+' || true); do
    [ -e "$r$l" ] && continue
    mkdir -p "$r$(dirname "$l")"; cp -L "$l" "$r$l"
  done
}

for kv in "${KVERS[@]}"; do
  r=$KM_WORK/root-$kv
  rm -rf "$r"
  mkdir -p "$r"/{bin,dev,proc,sys,tmp,var/tmp,mods,etc,root}
  cp /bin/busybox "$r/bin/busybox"
  cp "$here/guest-init.sh" "$r/init"; chmod +x "$r/init"
  copy_with_libs "$r" "$ST"
  copy_with_libs "$r" "$STT"   # at its build path: the tests call the CLI by STEPTRACE_BIN
  # the step-marker demo the [steps] test launches by its build path (MARKER_DEMO), with its library
  [ -x "$BUILD_DIR/tools/marker/marker-demo" ] && copy_with_libs "$r" "$BUILD_DIR/tools/marker/marker-demo"
  ln -s "$ST" "$r/bin/steptrace"
  cp "$B/neuron_client" "$B/uverbs_client" "$B/neuron_check" "$r/bin/"
  # bpftool: the SIGKILL fault test lists programs, links and maps with it
  command -v bpftool >/dev/null && copy_with_libs "$r" "$(readlink -f "$(command -v bpftool)")" &&
    ln -sf "$(readlink -f "$(command -v bpftool)")" "$r/bin/bpftool"
  echo "root:x:0:0:root:/root:/bin/sh" >"$r/etc/passwd"
  echo "root:x:0:" >"$r/etc/group"
  # in-tree modules: virtio disk + ext4 for the block tests (O_DIRECT needs a real disk)
  kt=$KM_CACHE/k/$kv/lib/modules/$kv
  : >"$r/mods/order"
  for m in virtio_pci virtio_blk crc32c_generic ext4; do   # ext4 needs the crc32c shash
    deps=$(moddeps "$kt" "$m")
    [ -n "$deps" ] || { echo "# $m: built in or absent" >>"$r/mods/order"; continue; }
    for d in $deps; do
      n=$(basename "$d"); n=${n%.xz}; n=${n%.zst}
      grep -qx "$n" "$r/mods/order" && continue
      modcat "$kt/$d" >"$r/mods/$n"; echo "$n" >>"$r/mods/order"   # busybox insmod cannot read .ko.xz
    done
  done
  [ "${MODOK[$kv]}" = 1 ] && cp "$KM_WORK/mod-$kv/neuron.ko" "$r/mods/neuron.ko"
  cat >"$r/etc/kmatrix.conf" <<EOF
KM_TESTS='$KM_TESTS'
KM_SPLIT='$KM_SPLIT'
STT='$STT'
EOF
  (cd "$r" && find . | cpio -o -H newc --quiet) >"$KM_WORK/initrd-$kv.cpio"
  say "$kv: initramfs $(du -h "$KM_WORK/initrd-$kv.cpio" | cut -f1), modules: $(grep -v '^#' "$r/mods/order" | tr '\n' ' ')"
done
T4=$(now); say "initramfs built: $(dt "$T3" "$T4")s"

# ------------------------------------------------------------------ boot each kernel
# /dev/kvm on CI machines is a paravirtual nested KVM that cannot boot stock kernels: TCG.
for kv in "${KVERS[@]}"; do
  log=$KM_WORK/logs/boot-$kv.log
  disk=$KM_WORK/disk-$kv.img
  rm -f "$disk"; truncate -s 128M "$disk"; mke2fs -q -F -t ext2 "$disk"
  say "$kv: booting (TCG, $SMP vCPU, ${MEM} MiB, limit ${TIMEOUT}s); log $log"
  s=$(now)
  set +e
  timeout "$TIMEOUT" qemu-system-x86_64 -accel "tcg,thread=$KM_TCG_THREAD" -cpu max -smp "$SMP" -m "$MEM" \
    -nographic -no-reboot -nic none \
    -drive "file=$disk,if=virtio,format=raw,cache=unsafe" \
    -kernel "$KM_CACHE/k/$kv/boot/vmlinuz-$kv" -initrd "$KM_WORK/initrd-$kv.cpio" \
    -append "console=ttyS0 panic=-1 quiet loglevel=3" </dev/null 2>&1 | tr -d '\r' | tee "$log" |
    grep --line-buffered -vE '^\s*$' | sed -u "s/^/[$kv] /"
  qrc=${PIPESTATUS[0]}
  set -e
  e=$(now)
  [ "$qrc" = 124 ] && say "$kv: TIMEOUT after ${TIMEOUT}s"
  if grep -q "^RESULT: PASS $kv" "$log" && [ "${MODOK[$kv]}" = 1 ]; then
    say "$kv: boot + tests + poweroff: $(dt "$s" "$e")s => PASS"
  else
    grep -q "^RESULT: " "$log" || echo "RESULT: FAIL $kv"
    say "$kv: boot + tests + poweroff: $(dt "$s" "$e")s => FAIL (log: $log)"
    rc=1
  fi
done
say "total: $(dt "$T0" "$(now)")s"
exit $rc
