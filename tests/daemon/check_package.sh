#!/usr/bin/env bash
# Packaging checks: the .deb builds with CPack, holds what it should, installs with
# dpkg into a scratch root (the machine's own dpkg database is not touched), the
# systemd unit passes `systemd-analyze verify` (skipped cleanly without systemd),
# the alert rules pass promtool, the dashboard is valid JSON, the man page renders.
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d /tmp/steptrace-pkg-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cd "$build"
[ -x user/steptrace ] || fail "build steptrace first (ninja)"
cpack -G DEB -B "$work/out" >"$work/cpack.log" 2>&1 || { cat "$work/cpack.log"; fail "cpack"; }
deb=$(ls "$work"/out/steptrace_*.deb | head -1)
[ -f "$deb" ] || fail "no .deb produced"
echo "built $deb"

contents=$(dpkg-deb --contents "$deb")
for f in ./usr/sbin/steptrace ./usr/lib/systemd/system/steptrace.service ./etc/steptrace/steptrace.toml \
         ./usr/share/man/man8/steptrace.8 ./usr/share/steptrace/steptrace-dashboard.json \
         ./usr/share/steptrace/steptrace-alerts.yml ./usr/share/steptrace/steptrace-rules.yml; do
  grep -q " $f\$" <<<"$contents" || fail "$f missing from the package"
done
dpkg-deb --field "$deb" Package | grep -qx steptrace || fail "package name"
dpkg-deb --field "$deb" Depends | grep -q libbpf || fail "Depends lacks libbpf (shlibdeps)"
# (no grep -q after a pipe: under pipefail its early exit is the writer's SIGPIPE)
dpkg-deb --ctrl-tarfile "$deb" | tar -t | grep conffiles >/dev/null || fail "no conffiles"
dpkg-deb --info "$deb" conffiles | grep -qx /etc/steptrace/steptrace.toml || fail "config is not a conffile"
[ "$(dpkg-deb --contents "$deb" | awk '$6=="./etc/steptrace/steptrace.toml"{print $1}')" = "-rw-r--r--" ] || fail "config mode"

# Maintainer scripts: present and executable; they reload systemd's view of the
# units but never enable, start or restart the daemon (no surprise on install).
ctrl="$work/ctrl"
mkdir -p "$ctrl"
dpkg-deb --control "$deb" "$ctrl"
for f in postinst prerm postrm; do
  [ -x "$ctrl/$f" ] || fail "$f missing from the package or not executable"
  sh -n "$ctrl/$f" || fail "$f: shell syntax"
done
grep -q 'systemctl daemon-reload' "$ctrl/postinst" || fail "postinst does not run systemctl daemon-reload"
grep -q 'systemctl daemon-reload' "$ctrl/postrm" || fail "postrm does not run systemctl daemon-reload"
if grep -hv '^[[:space:]]*#' "$ctrl/postinst" "$ctrl/prerm" "$ctrl/postrm" |
   grep -E 'systemctl[^|;&]*[[:space:]](enable|start|restart|try-restart|reload-or-restart|preset)|deb-systemd-(helper|invoke)' >/dev/null; then
  fail "a maintainer script enables or starts the service"
fi
# Run them as systemd would see them, in a private mount namespace where /run
# says systemd is running and `systemctl` only logs what it is asked.
if unshare -m true 2>/dev/null; then
  mkdir -p "$work/fakebin"
  printf '#!/bin/sh\necho "$*" >> "%s/systemctl.log"\n' "$work" >"$work/fakebin/systemctl"
  chmod +x "$work/fakebin/systemctl"
  unshare -m sh -c 'mount -t tmpfs none /run && mkdir -p /run/systemd/system &&
    PATH="$1:$PATH" sh "$2/postinst" configure && PATH="$1:$PATH" sh "$2/prerm" upgrade &&
    PATH="$1:$PATH" sh "$2/postrm" upgrade' sh "$work/fakebin" "$ctrl" || fail "maintainer scripts failed"
  [ "$(cat "$work/systemctl.log")" = "$(printf 'daemon-reload\ndaemon-reload')" ] ||
    fail "maintainer scripts asked systemctl for: $(tr '\n' ',' <"$work/systemctl.log")"
  echo "maintainer scripts: daemon-reload only"
else
  echo "unshare -m not permitted: maintainer scripts checked by reading only"
fi

# Install with dpkg into a scratch root (dependencies are checked against the host, not the root).
root="$work/root"
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
touch "$root/var/lib/dpkg/status" "$root/var/lib/dpkg/available"
dpkg --root="$root" --force-depends --force-not-root --force-script-chrootless --log=/dev/null -i "$deb" \
  >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i"; }
dpkg --root="$root" -s steptrace | grep -q "Status: install ok installed" || fail "not installed"
[ ! -e "$root/etc/systemd/system/multi-user.target.wants/steptrace.service" ] || fail "install enabled the unit"
[ -x "$root/usr/sbin/steptrace" ] || fail "binary not installed"
"$root/usr/sbin/steptrace" daemon --help | grep -q -- "--max-cpu" || fail "installed binary has no daemon"
# One version everywhere: the package, the binary and the installed man page.
ver=$(dpkg-deb --field "$deb" Version)
"$root/usr/sbin/steptrace" --version | grep -qF "$ver" || fail "steptrace --version is not the package version $ver"
zcat -f "$root"/usr/share/man/man8/steptrace.8* | head -1 | grep -qF "steptrace $ver" || fail "man page version is not $ver"
# The shipped config is valid for the daemon: --config with an unknown key fails, the default doesn't.
echo 'bogus_key = 1' >"$work/bad.toml"
if "$root/usr/sbin/steptrace" daemon --config "$work/bad.toml" --listen 127.0.0.1:1 2>"$work/bad.err"; then
  fail "bad config accepted"
fi
grep -q "unknown key 'bogus_key'" "$work/bad.err" || fail "bad config message: $(cat "$work/bad.err")"
dpkg --root="$root" --force-not-root --force-script-chrootless --log=/dev/null -P steptrace >/dev/null 2>&1 || fail "dpkg -P"
[ ! -e "$root/usr/sbin/steptrace" ] || fail "purge left the binary"

# systemd unit.
if command -v systemd-analyze >/dev/null 2>&1; then
  unit="$work/unit/steptrace.service"
  mkdir -p "$work/unit"
  # Point ExecStart at a binary that exists here; everything else verbatim.
  sed "s|/usr/sbin/steptrace|$build/user/steptrace|" "$src/packaging/systemd/steptrace.service" >"$unit"
  out=$(SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=no "$unit" 2>&1 || true)
  # Only complaints about this unit count (the host's other units are not ours).
  bad=$(grep -i "steptrace.service" <<<"$out" | grep -v "Failed to .*bus\|connect" || true)
  [ -z "$bad" ] || fail "systemd-analyze verify: $bad"
  echo "systemd-analyze verify: ok"
  # The hardening that the budget and the control socket rely on.
  for k in 'ExecStartPre=+/usr/sbin/sysctl -w kernel.bpf_stats_enabled=1' 'RuntimeDirectory=steptrace' \
           'RuntimeDirectoryMode=0700' 'IPAddressAllow=localhost' 'IPAddressDeny=any' 'SystemCallFilter=@system-service'; do
    grep -qxF "$k" "$unit" || fail "unit lacks $k"
  done
  if sec=$(systemd-analyze security --offline=yes "$unit" 2>/dev/null); then
    echo "systemd-analyze security: $(tail -1 <<<"$sec")"
  fi
else
  echo "systemd-analyze not present: unit check skipped"
fi

if command -v promtool >/dev/null 2>&1; then
  promtool check rules "$src/packaging/prometheus/steptrace-alerts.yml" \
    "$src/packaging/prometheus/steptrace-rules.yml" >/dev/null || fail "promtool"
fi
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["panels"] and d["title"]' \
  "$src/packaging/grafana/steptrace-dashboard.json" || fail "dashboard JSON"
if command -v groff >/dev/null 2>&1; then
  w=$(groff -man -Tutf8 -ww -z "$src/packaging/steptrace.8.in" 2>&1 || true)
  [ -z "$w" ] || fail "man page warnings: $w"
  [ "$(groff -man -Tutf8 "$src/packaging/steptrace.8.in" 2>/dev/null | wc -l)" -gt 100 ] || fail "man page does not render"
fi
grep -q '^\.SH OVERHEAD' "$src/packaging/steptrace.8.in" || fail "man page has no OVERHEAD section"
# The container recipe and the DaemonSet are at least well-formed.
grep -q '^FROM ' "$src/packaging/Dockerfile" && grep -q '^ENTRYPOINT \[' "$src/packaging/Dockerfile" || fail "Dockerfile"
python3 - "$src/packaging/kubernetes/daemonset.yaml" <<'PY' || fail "DaemonSet manifest"
import sys
try:
    import yaml
except ImportError:
    sys.exit(0)
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
ds = [d for d in docs if d["kind"] == "DaemonSet"][0]
spec = ds["spec"]["template"]["spec"]
assert spec["hostPID"] is True
assert spec["containers"][0]["securityContext"]["privileged"] is False  # capabilities only (tests/scripts/k8s_manifests.sh)
assert any(v["hostPath"]["path"] == "/sys/kernel" for v in spec["volumes"])
PY
echo "package checks passed"
