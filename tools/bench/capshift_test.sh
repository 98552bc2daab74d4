#!/usr/bin/env bash
# capshift on a real capture: the same recording as another host's clock would
# have stamped it (CLOCK_MONOTONIC 2.5 s ahead and 40 ppm fast) must report
# the same job - the same ranks and steps, each step moved by exactly the
# planted offset and drift, the same time per category - under another boot
# id, its wall times (clock anchors, t0) where they were.
#   capshift_test.sh STEPTRACE_BIN CAPSHIFT_BIN FIXTURE
set -euo pipefail
steptrace=$1 capshift=$2 fixture=$3
offset_ns=2500000000 ppm=40
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT

# Bad arguments exit 2, an unreadable input 1, and neither leaves an output.
rc=0; "$capshift" "$fixture" "$t/x.cap" --ppm 1 2> "$t/err" || rc=$?
[ "$rc" = 2 ] || { echo "missing --offset-ns: exit $rc, want 2"; exit 1; }
rc=0; "$capshift" "$fixture" "$t/x.cap" --offset-ns 1 --ppm 1 --frobnicate 2> "$t/err" || rc=$?
[ "$rc" = 2 ] || { echo "unknown option: exit $rc, want 2"; exit 1; }
rc=0; "$capshift" "$t/none.cap" "$t/x.cap" --offset-ns 1 --ppm 1 2> "$t/err" || rc=$?
[ "$rc" = 1 ] || { echo "missing input: exit $rc, want 1"; exit 1; }
[ "$(wc -l < "$t/err")" = 1 ] || { echo "missing input: want one line of error"; cat "$t/err"; exit 1; }
[ ! -e "$t/x.cap" ] && [ ! -e "$t/x.cap.tmp" ] || { echo "a failed run left an output"; exit 1; }

"$steptrace" report "$fixture" --json "$t/a.json" > "$t/a.txt"
"$capshift" "$fixture" "$t/b.cap" --offset-ns "$offset_ns" --ppm "$ppm" > "$t/shift.json"
echo "capshift: $(cat "$t/shift.json")"
"$steptrace" report "$t/b.cap" --json "$t/b.json" > "$t/b.txt"

python3 - "$t/a.json" "$t/b.json" "$t/shift.json" "$offset_ns" "$ppm" "$fixture" "$t/b.cap" <<'PY'
import json, struct, sys
a, b, shift = (json.load(open(p)) for p in sys.argv[1:4])
offset, ppm, fixture = int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
def trailer(path):  # the last section: "STTR" | u32 len | JSON
    d = open(path, "rb").read()
    at = d.rfind(b"STTR")
    (n,) = struct.unpack_from("<I", d, at + 4)
    return json.loads(d[at + 8 : at + 8 + n])
ta, tb = trailer(fixture), trailer(sys.argv[7])
t0 = shift["t0_ns"]
def moved(t):
    return t + offset + round((t - t0) * ppm * 1e-6)
failures = []
def check(ok, what):
    if not ok:
        failures.append(what)

check(ta["records"] == tb["records"] == shift["records"],
      f"records in the file: {ta['records']} before, {tb['records']} after, capshift wrote {shift['records']}")
check(a["records"] == b["records"], f"records analysed: {a['records']} before, {b['records']} after")
# Counters as this build writes them: arrays padded to its kinds, losses and
# "end" present (an older capture's trailer lacks them: none, complete).
def counters(t):
    pad = lambda v: v + [0] * (32 - len(v))
    losses = {k: v for k, v in t.get("losses", {}).items() if v}
    return pad(t["emitted"]), pad(t["dropped"]), losses, t.get("end", "complete")
check(counters(ta) == counters(tb), f"trailer counters: {counters(ta)} before, {counters(tb)} after")
check(tb["window_end_ns"] == moved(ta["window_end_ns"]), f"trailer window_end_ns {tb['window_end_ns']}, want {moved(ta['window_end_ns'])}")
check(shift["short_records"] == 0, f"{shift['short_records']} records too short in a good capture")
ra, rb = a["job"]["ranks"], b["job"]["ranks"]
check(len(ra) == len(rb) and len(ra) > 0, f"ranks: {len(ra)} before, {len(rb)} after")
worst_step = worst_share = 0.0
steps = 0
for x, y in zip(ra, rb):
    r = x["rank"]
    check(x["rank"] == y["rank"] and x["pid"] == y["pid"], f"rank {r}: another rank or pid after the shift")
    check(len(x["steps"]) == len(y["steps"]) and x["steps_total"] == y["steps_total"],
          f"rank {r}: {len(x['steps'])}/{x['steps_total']} steps before, {len(y['steps'])}/{y['steps_total']} after")
    for s, u in zip(x["steps"], y["steps"]):
        steps += 1
        for k in ("start_ns", "end_ns"):
            err = abs(u[k] - moved(s[k]))
            worst_step = max(worst_step, err)
            check(err <= 1000, f"rank {r} step {s['index']} {k}: {u[k]}, want {moved(s[k])} (off by {err} ns)")
    for cat, v in x["totals"].items():
        w = y["totals"][cat]
        rel = abs(w - v) / max(v, w) if max(v, w) else 0.0
        worst_share = max(worst_share, rel)
        check(rel <= 0.001, f"rank {r} {cat}: {v} ns before, {w} ns after ({rel:.4%})")
check(steps > 0, "no steps in the fixture's report")

sa, sb = a["source"], b["source"]
if sa["boot_id"]:
    check(sb["boot_id"] != sa["boot_id"], f"boot_id unchanged: {sb['boot_id']!r}")
else:  # an unknown boot is never taken to share a clock: it stays unknown
    check(sb["boot_id"] == "", f"boot_id {sb['boot_id']!r} made up for a capture without one")
check(b["window"]["start_ns"] == moved(a["window"]["start_ns"]),
      f"window start {b['window']['start_ns']}, want {moved(a['window']['start_ns'])}")
check(sb["t0_wall_clock"] == sa["t0_wall_clock"],
      f"t0 on the wall clock moved: {sa['t0_wall_clock']} -> {sb['t0_wall_clock']} (the wall clock was right)")
ca, cb = sa["clock"], sb["clock"]
if ca["anchors"]:
    check(cb["anchors"] == ca["anchors"], f"clock anchors: {ca['anchors']} before, {cb['anchors']} after")
    for end in ("first", "last"):
        check(abs(cb[end]["mono_ns"] - moved(ca[end]["mono_ns"])) <= 1,
              f"{end} anchor mono {cb[end]['mono_ns']}, want {moved(ca[end]['mono_ns'])}")
        check(cb[end]["real_ns"] == ca[end]["real_ns"], f"{end} anchor wall time moved: {ca[end]['real_ns']} -> {cb[end]['real_ns']}")
    check(len(cb["wall_clock_steps"]) == len(ca["wall_clock_steps"]), "a 40 ppm drift read as a wall-clock step")
    anchors = f"{ca['anchors']} clock anchors moved, wall times kept"
else:
    anchors = f"note: {fixture} holds no clock notes (recorded before clock anchors): anchor assertions skipped"
for f in failures:
    print("FAIL:", f)
print(f"{len(ra)} ranks, {steps} steps: worst step time error {worst_step:.0f} ns, "
      f"worst category total change {worst_share:.5%}; boot_id {sa['boot_id']!r} -> {sb['boot_id']!r}; {anchors}")
sys.exit(1 if failures else 0)
PY
