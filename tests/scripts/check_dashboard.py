#!/usr/bin/env python3
# packaging/grafana/steptrace-dashboard.json loads through file provisioning
# (no __inputs, every panel and query on the ${datasource} variable) and keys
# its queries on training_job, never on Prometheus's own `job` or on a pid.
#   check_dashboard.py DASHBOARD.json
import json
import re
import sys

path = sys.argv[1]
d = json.load(open(path))
errors = []
if "__inputs" in d or "${DS_" in json.dumps(d):
    errors.append("uses __inputs / ${DS_...}: file provisioning cannot resolve it")
variables = {v["name"]: v for v in d.get("templating", {}).get("list", [])}
ds = variables.get("datasource")
if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
    errors.append("no datasource variable of type datasource/prometheus")
for name in ("host", "training_job", "rank", "pod"):
    v = variables.get(name)
    if not v:
        errors.append(f"no variable {name}")
        continue
    if v.get("datasource", {}).get("uid") != "${datasource}":
        errors.append(f"variable {name} does not query ${{datasource}}")
    q = v.get("query", {})
    q = q.get("query", "") if isinstance(q, dict) else q
    if name != "host" and "steptrace_rank_info" not in q:
        errors.append(f"variable {name}: query {q!r} does not read steptrace_rank_info")
    # pod is not exported yet: an empty variable must still match everything.
    if not v.get("includeAll") or v.get("allValue") != ".*":
        errors.append(f"variable {name}: needs includeAll with allValue .* (tolerates an empty list)")
if variables.get("pod") and "label_values(steptrace_rank_info" not in json.dumps(variables["pod"]["query"]):
    errors.append("variable pod must be label_values(steptrace_rank_info..., pod)")

job_label = re.compile(r"(?<![A-Za-z0-9_])job\s*(=|!=|=~|!~)")
by_job = re.compile(r"(by|without|on|ignoring)\s*\(([^)]*)\)")
panels = d.get("panels", [])
if not panels:
    errors.append("no panels")
for p in panels:
    title = p.get("title", "?")
    if p.get("datasource", {}).get("uid") != "${datasource}":
        errors.append(f"panel {title!r}: datasource is not ${{datasource}}")
    targets = p.get("targets", [])
    if not targets:
        errors.append(f"panel {title!r}: no queries")
    for t in targets:
        expr = t.get("expr", "")
        if t.get("datasource", {}).get("uid") != "${datasource}":
            errors.append(f"panel {title!r} query {t.get('refId')}: datasource is not ${{datasource}}")
        if job_label.search(expr) or "$job" in expr:
            errors.append(f"panel {title!r}: selects on job= (the scrape job): {expr}")
        for _, labels in by_job.findall(expr):
            names = [x.strip() for x in labels.split(",")]
            if "job" in names or "pid" in names:
                errors.append(f"panel {title!r}: groups by job/pid: {expr}")
        if "pid" in expr or "{{job}}" in t.get("legendFormat", "") or "{{pid}}" in t.get("legendFormat", ""):
            errors.append(f"panel {title!r}: refers to pid or job: {expr}")
        if "training_job" in expr and "rank" in expr and 'pod=~"$pod"' not in expr:
            errors.append(f"panel {title!r}: per-rank query without pod=~\"$pod\": {expr}")
        if re.search(r"_percent\b", expr):
            errors.append(f"panel {title!r}: a _percent metric (now _ratio): {expr}")

for e in errors:
    print(f"{path}: {e}")
print(f"{path}: {len(panels)} panels, {len(variables)} variables, {len(errors)} problems")
sys.exit(1 if errors else 0)
