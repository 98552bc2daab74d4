#!/usr/bin/env bash
# Installs what steptrace needs to build and test on Debian 12 / Ubuntu 24.04,
# and mounts the kernel filesystems tracing uses. Idempotent; run as root.
#   setup-deps.sh         build + every test's tools (tools/run-tests.sh)
#   setup-deps.sh --demo  build + the demo only (tools/run-demo.sh: no test suite)
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  echo "setup-deps: run as root (apt-get and mounts)" >&2
  exit 1
fi
demo=0
[ "${1:-}" = --demo ] && demo=1
# steptrace, trainsim (FUSE device) and the daemon (HTTP, TOML).
pkgs=(build-essential cmake ninja-build pkg-config clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev
      nlohmann-json3-dev libcli11-dev libfmt-dev libfuse3-dev fuse3 libcpp-httplib-dev libtoml11-dev)
if [ $demo = 0 ]; then
# the test suite: Catch2, promtool (metrics and rules), python3
pkgs+=(catch2 python3 prometheus)
# report-output tests: JSON Schema validator, headless Chromium (HTML), tmux (top), libFuzzer runtime
pkgs+=(python3-jsonschema chromium tmux libclang-rt-dev)
# automatic steps on a CPU-only PyTorch DDP job (gloo, DataLoader workers)
pkgs+=(python3-torch)
# ... and its link-limited shape: a network namespace whose loopback is rate-limited (tc tbf)
pkgs+=(iproute2)
# packaging checks: YAML in check_package.sh; node + npm for the Kubernetes
# manifest schema check (Debian's, unless a node with npm is there already)
pkgs+=(python3-yaml)
command -v npm >/dev/null 2>&1 || pkgs+=(nodejs npm)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# tracefs (classic tracepoints) and bpffs: mount them if the host did not.
if [ ! -d /sys/kernel/tracing/events ]; then
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || echo "setup-deps: could not mount tracefs" >&2
fi
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf 2>/dev/null || true
# The npm packages of tests/kubernetes/package-lock.json into npm's cache:
# tests/scripts/k8s_manifests.sh then installs them without the network.
top=$(cd "$(dirname "$0")/.." && pwd)
if [ $demo = 0 ] && command -v npm >/dev/null 2>&1 && [ -f "$top/tests/kubernetes/package-lock.json" ]; then
  t=$(mktemp -d)
  cp "$top/tests/kubernetes/package.json" "$top/tests/kubernetes/package-lock.json" "$t/"
  (cd "$t" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
    echo "setup-deps: npm ci for the Kubernetes manifest check failed" >&2
  rm -rf "$t"
fi
