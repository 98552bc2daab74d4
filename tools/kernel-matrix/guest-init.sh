#!/bin/busybox sh
# /init of the kernel-matrix guest (tools/kernel-matrix/run.sh copies it into the initramfs).
# Runs as PID 1 under busybox: mounts, loads modules, runs steptrace's checks, prints
# "RESULT: PASS|FAIL <release>" and powers off.
/bin/busybox --install -s /bin
export PATH=/bin HOME=/root
export ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1   # for a sanitizer BUILD_DIR
export STEPTRACE_KMATRIX_GUEST=1   # tests that may break a shared host (unmount tracefs) run only here
. /etc/kmatrix.conf
REL=$(uname -r)
fail=0
say() { echo "GUEST: $*"; }
bad() { echo "GUEST: FAIL: $*"; fail=1; }
up() { cut -d' ' -f1 /proc/uptime; }

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tracefs tracefs /sys/kernel/tracing
mount -t debugfs debugfs /sys/kernel/debug
mount -t bpf bpf /sys/fs/bpf
ip link set lo up
say "kernel $REL up at $(up)s, $(grep -c ^processor /proc/cpuinfo) cpu, $(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo) MiB"
[ -r /sys/kernel/btf/vmlinux ] || bad "no /sys/kernel/btf/vmlinux"

# --- in-tree modules: virtio disk + ext4, a real block device for the O_DIRECT test
for m in $(grep -v '^#' /mods/order); do insmod /mods/$m || say "insmod $m failed"; done
for i in 1 2 3 4 5 6 7 8 9 10; do [ -b /dev/vda ] && break; sleep 0.2; done
[ -b /dev/vda ] || { ls /sys/bus/pci/devices/*/ /sys/bus/virtio/devices/ 2>&1 | head; cat /proc/partitions; }
if [ -b /dev/vda ] && mount -t ext4 /dev/vda /var/tmp; then
  say "/var/tmp is ext2 on /dev/vda (virtio-blk)"
else
  say "no virtio disk: block tests will fail (O_DIRECT needs a real block device)"
fi

# --- the mock Neuron driver: the same names a real node shows
if insmod /mods/neuron.ko; then
  major=$(awk '$2 == "neuron" { print $1 }' /proc/devices)
  say "neuron.ko loaded: /proc/devices major ${major:-none}, $(ls /dev/neuron* 2>/dev/null | tr '\n' ' ')"
  [ -n "$major" ] || bad "no 'neuron' in /proc/devices"
  [ -c /dev/neuron0 ] || bad "no /dev/neuron0 char device"
  [ -e /sys/class/neuron_device/neuron0 ] || bad "no /sys/class/neuron_device/neuron0"
  ev=/sys/kernel/tracing/events/neuron
  for spec in "dma_queue_copy_start device_index eng_id qid tx_desc_count rx_desc_count" \
    "dma_ack_completed device_index eng_id qid count" \
    "ioctl_mem_copyin device_index mc buffer offset size" \
    "ioctl_mem_copyout device_index mc buffer offset size" \
    "ioctl_mem_copy device_index src dst" "ioctl_mem_alloc device_index mc" \
    "dma_queue_init device_index eng_id qid tx_desc_count rx_desc_count tx_mc rx_mc rxc_mc port" \
    "dma_queue_release device_index eng_id qid"; do
    set -- $spec; e=$1; shift
    [ -r $ev/$e/format ] || { bad "no tracepoint neuron:$e"; continue; }
    for f in "$@"; do grep -qE "field:[^;]* $f;" $ev/$e/format || bad "neuron:$e has no field $f"; done
  done
  say "tracepoints: $(ls $ev 2>/dev/null | grep -vE '^(enable|filter)$' | tr '\n' ' ')"
  # the driver itself fires them where the real one does (checked with ftrace, no steptrace)
  echo 1 >$ev/enable; : >/sys/kernel/tracing/trace
  neuron_client /dev/neuron0 /tmp/expect.ftrace || bad "neuron_client failed without the tracer"
  echo 0 >$ev/enable
  for want in "dma_queue_copy_start 16" "dma_ack_completed 4" "ioctl_mem_copyin 2" "ioctl_mem_copyout 1" \
    "ioctl_mem_copy 1" "ioctl_mem_alloc 4"; do
    set -- $want
    n=$(grep -c " $1:" /sys/kernel/tracing/trace)
    [ "$n" = "$2" ] || bad "ftrace saw neuron:$1 $n times, expected $2"
  done
  say "neuron:* tracepoints fire as expected under ftrace"
else
  bad "insmod neuron.ko failed"
fi

# --- steptrace check: the preflight table
say "---- steptrace check"
steptrace check; rc=$?
[ $rc = 0 ] || bad "steptrace check exited $rc"

# --- the [root] integration tests, one process per test case: a crash in one
#     (seen on 6.1) must not hide the results of the others
say "---- steptrace_tests \"$KM_TESTS\" (started at $(up)s)"
if [ "$KM_SPLIT" = 1 ]; then
  "$STT" --list-test-names-only "$KM_TESTS" | grep -v '^$' >/tmp/tests.txt
else
  echo "$KM_TESTS" >/tmp/tests.txt   # one process for the whole spec (KM_SPLIT=0)
fi
npass=0; nfail=0
while read -r name; do
  spec=$name
  [ "$KM_SPLIT" = 1 ] && spec=$(echo "$name" | sed 's/[],[\\]/\\&/g')   # Catch2 test-spec escaping
  t0=$(up)
  (cd /var/tmp && "$STT" --use-colour no "$spec") </dev/null >/tmp/test.out 2>&1; rc=$?
  if [ $rc = 0 ]; then
    npass=$((npass + 1)); echo "GUEST test: PASS ($(awk -v a=$t0 -v b=$(up) 'BEGIN{printf "%.1f", b-a}')s) $name"
  else
    nfail=$((nfail + 1)); echo "GUEST test: FAIL (exit $rc) $name"
    grep -vE '^(~+|-+|\.+|=+|Filters:.*|steptrace_tests is a Catch.*|Run with -\? for options|)$' /tmp/test.out |
      sed 's/^/GUEST test:   /'
  fi
done </tmp/tests.txt
[ $nfail = 0 ] && [ $npass -gt 0 ] || bad "steptrace_tests: $npass passed, $nfail failed"
say "tests done at $(up)s: $npass passed, $nfail failed"

# --- the mock-driver test: the path a real node takes (major from /proc/devices, no --accel-dev),
#     once per accel tier: the kprobe on ncdev_ioctl where kprobes exist, then the syscall hook
#     (--no-kprobes); both must count the same ioctls and see the 23 neuron:* tracepoint events
#     (16 dma_queue_copy_start, 4 dma_ack_completed, 2 ioctl_mem_copyin, 1 ioctl_mem_copyout).
tiers="sys_enter"
[ -d /sys/bus/event_source/devices/kprobe ] && tiers="kprobe sys_enter"
for tier in $tiers; do
  flag=""; [ "$tier" = sys_enter ] && flag="--no-kprobes"
  say "---- steptrace run $flag --json - -- neuron_client (accel tier: $tier)"
  steptrace run $flag --json - -- neuron_client /dev/neuron0 /tmp/expect >/tmp/run.json 2>/tmp/run.err; rc=$?
  sed 's/^/GUEST steptrace: /' /tmp/run.err
  [ $rc = 0 ] || bad "steptrace run $flag exited $rc"
  grep -A12 '"attach_tiers"' /tmp/run.json | sed -n '1,/}/p' | sed 's/^/GUEST json: /'
  neuron_check /tmp/run.json /tmp/expect "$tier" 23 || { bad "mock-driver ioctl accounting ($tier tier)"; sed 's/^/GUEST json: /' /tmp/run.json | grep -A400 accel_ioctls | head -80; }
done

# --- the EFA control path on a real char device: the mock module's uverbs0 is found by the
#     "infiniband_verbs" major (no --rdma-dev); its ioctl and write(2) calls are named and counted,
#     decoys on /dev/null and a pipe are not. This also puts the uverbs decoding through this
#     kernel's verifier (it is pruned when no uverbs device exists).
uv=$(ls /dev/uverbs0 /dev/infiniband/uverbs0 2>/dev/null | head -1)
if [ -z "$uv" ]; then
  bad "no uverbs0 node from the mock module ($(awk '$2 == "infiniband_verbs"' /proc/devices))"
else
  say "---- steptrace run --json - -- uverbs_client $uv"
  steptrace run --json - -- uverbs_client "$uv" /tmp/expect.efa >/tmp/run.json 2>/tmp/run.err; rc=$?
  sed 's/^/GUEST steptrace: /' /tmp/run.err
  [ $rc = 0 ] || bad "steptrace run (uverbs_client) exited $rc"
  neuron_check --efa /tmp/run.json /tmp/expect.efa || bad "EFA control path accounting"
fi

# --- the cost of the syscall hook on a non-target syscall loop, per tier (issue 7, B2-like;
#     software emulation: the ratio matters, not the numbers)
if [ -d /sys/bus/event_source/devices/kprobe ]; then
  # busybox builtins only (no fork): each iteration is an open/dup/close of /dev/null
  loop() { t0=$(up); i=0; while [ $i -lt 20000 ]; do i=$((i + 1)); : </dev/null; done; awk -v a=$t0 -v b=$(up) 'BEGIN { printf "%d", (b - a) * 1000 }'; }
  base=$(loop)
  for c in "accel" "sched,accel,net"; do
    steptrace run --collectors "$c" --json /tmp/cost.json -- sleep 600 >/dev/null 2>&1 & sp=$!
    sleep 3
    ms=$(loop); kill -INT $sp; wait $sp
    say "syscall tax, collectors $c: unrelated loop $ms ms vs $base ms untraced ($(grep -o '"syscalls": "[^"]*"' /tmp/cost.json))"
  done
fi

dmesg | grep -iE 'neuron|ext4|BUG|WARNING|Oops|taint' | sed 's/^/GUEST dmesg: /' | head -20
say "done at $(up)s"
if [ $fail = 0 ]; then echo "RESULT: PASS $REL"; else echo "RESULT: FAIL $REL"; fi
sync
poweroff -f
