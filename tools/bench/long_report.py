#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Long-capture report benchmark (issue 15): `steptrace report` on captures
of the same job at 1x, 4x and 16x length (capgen tiles a recorded capture).

For each length: wall time, peak RSS (wait4), records; then time per copy
relative to 1x (target: within 1.2x, linear) and peak RSS relative to 1x
(target: 16x within 1.5x). Runs without root. Every length is measured
--repeat times, interleaved, and the best time kept (a noisy machine only
ever adds time).

  tools/bench/long_report.py --build-dir build-release [--base-copies 250] [--repeat 3] [--out FILE.json]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def measure(cmd):
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.execv(cmd[0], cmd)
    _, status, ru = os.wait4(pid, 0)
    wall = time.monotonic() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {os.waitstatus_to_exitcode(status)}")
    return wall, ru.ru_maxrss * 1024, ru.ru_utime + ru.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--capture", default="", help="input capture (default tests/fixtures/straggler.cap)")
    ap.add_argument("--base-copies", type=int, default=250)
    ap.add_argument("--factors", default="1,4,16")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--window", default="", help="--window for report (default: steptrace's)")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    build = os.path.abspath(args.build_dir)
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    src = args.capture or os.path.join(top, "tests", "fixtures", "straggler.cap")
    steptrace = os.path.join(build, "user", "steptrace")
    capgen = os.path.join(build, "tools", "bench", "capgen")
    factors = [int(f) for f in args.factors.split(",")]
    work = tempfile.mkdtemp(prefix="steptrace-longreport.")
    caps = {}
    for f in factors:
        path = os.path.join(work, f"x{f}.cap")
        out = subprocess.run([capgen, src, path, str(args.base_copies * f)], check=True, capture_output=True, text=True)
        caps[f] = (path, json.loads(out.stdout))
    runs = {f: [] for f in factors}
    for _ in range(args.repeat):
        for f in factors:
            cmd = [steptrace, "report", caps[f][0], "--json", os.path.join(work, "report.json"), "--force"]
            if args.window:
                cmd += ["--window", args.window]
            runs[f].append(measure(cmd))
    base = None
    rows = []
    for f in factors:
        wall = min(r[0] for r in runs[f])
        rss = max(r[1] for r in runs[f])
        cpu = min(r[2] for r in runs[f])
        row = {"factor": f, "copies": args.base_copies * f, "records": caps[f][1]["records"],
               "trace_s": caps[f][1]["trace_s"], "best_wall_s": wall, "best_cpu_s": cpu, "peak_rss_bytes": rss}
        if base is None:
            base = row
        row["time_per_length_vs_1x"] = (cpu / f) / base["best_cpu_s"] if base["best_cpu_s"] else None
        row["peak_rss_vs_1x"] = rss / base["peak_rss_bytes"]
        rows.append(row)
        print(f"{f:>3}x: {row['records']:>10} records, {row['trace_s']:>8.0f} s of trace: {wall:6.2f} s wall, "
              f"{cpu:6.2f} s CPU ({row['time_per_length_vs_1x']:.2f}x per unit length), peak RSS "
              f"{rss / 1048576:6.1f} MiB ({row['peak_rss_vs_1x']:.2f}x)", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"load_after": os.getloadavg(), "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
