#!/usr/bin/env bash
# packaging/kubernetes/*.yaml validate against the Kubernetes OpenAPI schemas
# and the prometheus-operator CRD schemas (tests/kubernetes/validate.mjs, with
# kubernetes-models from npm at the versions in tests/kubernetes/package-lock.json),
# and steptrace's rules (no privileged, capabilities dropped, no job/pid label).
# Then broken copies must fail: a DaemonSet with privileged: true, one without
# its selector, one with a wrong field type, a ServiceMonitor with a wrong
# field type (so the check can fail).
#   k8s_manifests.sh SOURCE_DIR BUILD_DIR
# node_modules is installed with `npm ci --prefer-offline` into BUILD_DIR; with
# no network that needs the npm cache tools/setup-deps.sh fills.
set -euo pipefail
src=$1 build=$2
command -v node >/dev/null && command -v npm >/dev/null || { echo "node/npm missing"; exit 1; }
work=$build/k8s-validate
mkdir -p "$work"
cp "$src/tests/kubernetes/package.json" "$src/tests/kubernetes/package-lock.json" "$src/tests/kubernetes/validate.mjs" "$work/"
if ! cmp -s "$work/package-lock.json" "$work/node_modules/.steptrace-lock" 2>/dev/null; then
  (cd "$work" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error)
  cp "$work/package-lock.json" "$work/node_modules/.steptrace-lock"
fi
node "$work/validate.mjs" "$src"/packaging/kubernetes/*.yaml

# The check must catch what it is for.
ds=$src/packaging/kubernetes/daemonset.yaml
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
sed 's/privileged: false/privileged: true/' "$ds" > "$t/privileged.yaml"
python3 - "$ds" "$t" <<'PY'
import sys, re
text = open(sys.argv[1]).read()
# No selector: drop the DaemonSet's spec.selector block (3 lines).
no_sel = re.sub(r"\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: steptrace\n", "\n", text, count=1)
assert no_sel != text
open(sys.argv[2] + "/no-selector.yaml", "w").write(no_sel)
# A wrong type: containerPort as a string that is not a number.
bad = text.replace("containerPort: 19464", "containerPort: metrics-port")
assert bad != text
open(sys.argv[2] + "/wrong-type.yaml", "w").write(bad)
PY
# A CRD kind too: ServiceMonitor endpoints as a string, not a list.
sed 's/^  endpoints:$/  endpoints: metrics/; /^    - port: metrics$/,$d' "$src/packaging/kubernetes/servicemonitor.yaml" \
  > "$t/crd-wrong-type.yaml"
for broken in privileged no-selector wrong-type crd-wrong-type; do
  if node "$work/validate.mjs" "$t/$broken.yaml" > "$t/$broken.log" 2>&1; then
    cat "$t/$broken.log"
    echo "FAIL: the $broken DaemonSet passed"
    exit 1
  fi
  echo "rejected as it should be ($broken): $(grep -v ': ok$' "$t/$broken.log" | head -1)"
done
# Belt and braces on the shipped files themselves.
! grep -rnE "privileged: true|^\s+(job|pid): " "$src"/packaging/kubernetes/ || { echo "FAIL: privileged or a job/pid label"; exit 1; }
echo "kubernetes manifests: ok"
