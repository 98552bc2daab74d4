#!/usr/bin/env bash
# `steptrace report --json` on a real capture validates against
# docs/schema/steptrace-report.schema.json (python3-jsonschema), and a broken
# document does not (so the check can fail).
#   json_schema.sh STEPTRACE_BIN SOURCE_DIR
set -euo pipefail
bin=$1 src=$2
py=python3
/usr/bin/python3 -c 'import jsonschema' 2>/dev/null && py=/usr/bin/python3
$py -c 'import jsonschema' || { echo "python3-jsonschema missing (tools/setup-deps.sh)"; exit 1; }
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
"$bin" report "$src/tests/corpus/capture/ok-straggler.cap" --json "$t/report.json" > "$t/text"
"$bin" report "$src/tests/corpus/capture/ok-straggler.cap" --json - > "$t/stdout.json"
$py - "$src/docs/schema/steptrace-report.schema.json" "$t/report.json" "$t/stdout.json" <<'PY'
import copy, json, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
v = jsonschema.Draft202012Validator(schema)
for path in sys.argv[2:]:
    doc = json.load(open(path))
    errs = sorted(v.iter_errors(doc), key=lambda e: list(e.path))
    for e in errs:
        print(f"{path}: {list(e.path)}: {e.message}")
    assert not errs, f"{path} does not match the schema"
    assert doc["job"]["ranks"], "no ranks in the real report"
    assert sum(len(r["steps"]) for r in doc["job"]["ranks"]) > 0
    assert any(w["helps"] for w in doc["job"]["what_if"]), "no what-if fix in the straggler's report"
# A capture that ended early names how (record --max-size, a full disk).
d = copy.deepcopy(doc); d["capture_end"] = "write_error: No space left on device"; d["incomplete"] = True
assert v.is_valid(d), "capture_end rejected"
# Broken documents must be rejected.
bad = []
d = copy.deepcopy(doc); d["capture_end"] = 5; bad.append(d)
d = copy.deepcopy(doc); del d["job"]["verdict"]["category"]; bad.append(d)
d = copy.deepcopy(doc); d["job"]["ranks"][0]["steps"][0]["categories"]["device_execute"] = -1; bad.append(d)
d = copy.deepcopy(doc); d["job"]["verdict"]["category"] = "gpu_bound"; bad.append(d)
d = copy.deepcopy(doc); d["schema"] = "steptrace.summary/2"; bad.append(d)
d = copy.deepcopy(doc); d["job"]["what_if"][0]["helps"] = "yes"; bad.append(d)
d = copy.deepcopy(doc); d["job"]["what_if"][0]["category"] = "gpu_bound"; bad.append(d)
for i, d in enumerate(bad):
    assert not v.is_valid(d), f"broken document {i} passed validation"
print("schema ok:", len(sys.argv) - 2, "documents valid,", len(bad), "broken ones rejected")
PY
