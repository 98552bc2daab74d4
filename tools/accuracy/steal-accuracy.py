#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Host steals against ground truth (issue 21): each steal scenario of trainsim
runs under `steptrace run --json`, and each rank's measured share of the step
is compared with the truth's, with whether the verdict names the cause. The
seven healthy scenarios run too: no cause may be named there.

usage (root): tools/accuracy/steal-accuracy.py BUILD_DIR [--runs N] > table.md
"""
import json
import os
import subprocess
import sys
import tempfile

# scenario -> (finding cause, truth step field, tracer step field, what is compared)
STEALS = {
    "throttled": ("cpu_throttling", "throttled_ns", "throttled_wait_ns",
                  "main thread's quota waits vs the cgroup's throttled time"),
    "memory-pressure": ("loader_reclaim", "loader_memstall_ns", "loader_reclaim_ns",
                        "loaders' reclaim vs their memory PSI (some)"),
    "softirq": ("interrupts", "softirq_ns", "softirq_ns", "softirq time in the main thread's slices"),
}
HEALTHY = ["compute-bound", "data-bound", "dma-bound", "collective-bound", "straggler", "host-bound", "contention"]


def run(build, scenario):
    with tempfile.TemporaryDirectory(prefix="steptrace-steal.") as d:
        os.mkdir(os.path.join(d, "dev"))
        rep, truth = os.path.join(d, "r.json"), os.path.join(d, "t.json")
        cmd = [os.path.join(build, "user/steptrace"), "run", "--json", rep,
               "--accel-dev", os.path.join(d, "dev/neuron0"), "--accel-dev", os.path.join(d, "dev/neuron1"), "--",
               os.path.join(build, "tools/trainsim/trainsim"), "--scenario", scenario, "--dev-dir",
               os.path.join(d, "dev"), "--truth", truth]
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=300)
        with open(rep) as f:
            r = json.load(f)["job"]
        with open(truth) as f:
            t = json.load(f)
    return r, t


def shares(job, truth, tfield, rfield):
    out = []
    for tr in sorted(truth["ranks"], key=lambda x: x["rank"]):
        ts = tr["steps"][1:]
        td = sum(s["end_ns"] - s["start_ns"] for s in ts)
        tv = sum(s.get(tfield, 0) for s in ts)
        rr = [x for x in job["ranks"] if x["pid"] == tr["pid"]]
        rs = [s for x in rr for s in x["steps"] if s["index"] >= job["skipped_warmup_steps"]]
        rd = sum(s["duration_ns"] for s in rs)
        rv = sum(s.get(rfield, 0) for s in rs)
        out.append((tr["rank"], 100 * tv / td if td else 0, 100 * rv / rd if rd else float("nan")))
    return out


def main():
    build = sys.argv[1]
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 1
    print("| scenario | run | rank | compared | truth % of step | steptrace % of step | error pp | named in the verdict |")
    print("|---|---|---|---|---|---|---|---|")
    for sc, (cause, tf, rf, what) in STEALS.items():
        for k in range(runs):
            job, truth = run(build, sc)
            causes = [f["cause"] for f in job["host_steals"]["findings"]]
            in_headline = any(f["cause"] == cause and f["text"] in job["verdict"]["headline"]
                              for f in job["host_steals"]["findings"])
            for rank, t, r in shares(job, truth, tf, rf):
                print(f"| {sc} | {k + 1} | {rank} | {what} | {t:.1f} | {r:.1f} | {r - t:+.1f} | "
                      f"{'yes' if in_headline else ('evidence only' if cause in causes else 'no')} |")
    print()
    print("| healthy scenario | verdict | steals named | largest steal of a rank, % of step |")
    print("|---|---|---|---|")
    for sc in HEALTHY:
        job, _ = run(build, sc)
        worst = 0.0
        for r in job["host_steals"]["ranks"]:
            if r["step_ns"] > 0:
                worst = max(worst, 100 * max(r["throttled_wait_ns"], r["loader_reclaim_ns"], r["reclaim_ns"],
                                             r["irq_ns"] + r["softirq_ns"]) / r["step_ns"])
        named = ", ".join(f["cause"] for f in job["host_steals"]["findings"]) or "none"
        print(f"| {sc} | {job['verdict']['category']} | {named} | {worst:.2f} |")


if __name__ == "__main__":
    sys.exit(main())
