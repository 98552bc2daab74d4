#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Soak benchmark (issue 15): does a long steptrace session stay bounded?

trainsim runs for --minutes under `steptrace attach -p` and under
`steptrace top -- ...` (in a pseudo-terminal), one mode per run (--mode
attach,top runs them one after the other). The tracer's RSS and CPU time are
sampled from /proc every --sample-s (default 1 s). Reported per mode:

  rss_slope_mib_per_hour  least-squares slope of RSS after the first
                          --settle-s seconds
  rss_floor_slope_...     the same over each minute's lowest RSS (what the
                          session keeps; the window's fill and fold make RSS
                          swing within a minute) (target < 1 MiB/hour)
  cpu_per_step_ratio      tracer CPU per training step in the last 10 % of
                          the run over the first 10 % (after settling;
                          target <= 1.1), steps counted from trainsim's truth

Needs root (loads the BPF programs). Not a unit test: it takes
2 x --minutes and wants a quiet machine.

  sudo tools/bench/soak.py --build-dir build-release [--minutes 20] [--mode attach,top] [--out soak.json]
"""
import argparse
import json
import os
import pty
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def proc_sample(pid):
    """(rss_bytes, cpu_seconds) of pid, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return rss, (int(fields[11]) + int(fields[12])) / tick
    except (OSError, StopIteration, IndexError, ValueError):
        return None


def slope_per_hour(points):
    """Least-squares slope of (t_s, y) in y units per hour."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mt = sum(t for t, _ in points) / n
    my = sum(y for _, y in points) / n
    den = sum((t - mt) ** 2 for t, _ in points)
    if den == 0:
        return 0.0
    return sum((t - mt) * (y - my) for t, y in points) / den * 3600.0


def steps_between(truth, t0_ns, t1_ns):
    n = 0
    for r in truth.get("ranks", []):
        for s in r.get("steps", []):
            if t0_ns <= s["start_ns"] < t1_ns:
                n += 1
    return n


def find_tracer(root_pid, name="steptrace"):
    """The steptrace process: root_pid itself, or its child (top under a pty)."""
    deadline = time.time() + 10
    while time.time() < deadline:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    st = f.read()
                comm = st.split("(", 1)[1].rsplit(")", 1)[0]
                ppid = int(st.rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if comm == name and (int(entry) == root_pid or ppid == root_pid):
                return int(entry)
        time.sleep(0.1)
    return root_pid


def run_mode(mode, args, build):
    steptrace = os.path.join(build, "user", "steptrace")
    trainsim = os.path.join(build, "tools", "trainsim", "trainsim")
    work = tempfile.mkdtemp(prefix="steptrace-soak.")
    dev = os.path.join(work, "dev")
    os.mkdir(dev)
    truth_path = os.path.join(work, "truth.json")
    seconds = int(args.minutes * 60)
    job = [trainsim, "--scenario", args.scenario, "--ranks", "2", "--dev-dir", dev, "--truth", truth_path,
           "--duration", str(seconds)]
    devs = ["--accel-dev", f"{dev}/neuron0", "--accel-dev", f"{dev}/neuron1"]
    samples = []
    t_start = time.monotonic()
    job_proc = None
    master = None
    if mode == "attach":
        # The job waits a second under a shell that execs it (same pid): the attach sees it from its first step.
        job_proc = subprocess.Popen(["/bin/sh", "-c", 'sleep 1; exec "$@"', "sh"] + job,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        tracer = subprocess.Popen([steptrace, "attach", "-p", str(job_proc.pid), "-d", str(seconds + 5)] + devs +
                                  ["--json", os.path.join(work, "report.json")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        tracer_pid = tracer.pid
    else:
        pid, master = pty.fork()
        if pid == 0:
            os.environ["TERM"] = "xterm"
            os.execv(steptrace, [steptrace, "top"] + devs + ["--"] + job)
        tracer = None
        tracer_pid = find_tracer(pid)
        top_pid = pid
    last = 0.0
    while True:
        now = time.monotonic()
        if master is not None:
            # Keep the terminal drained so top never blocks on a full pty.
            try:
                import select
                while select.select([master], [], [], 0)[0]:
                    if not os.read(master, 65536):
                        break
            except OSError:
                pass
        if now - last >= args.sample_s:
            last = now
            s = proc_sample(tracer_pid)
            if s is None:
                break
            samples.append({"t_s": round(now - t_start, 1), "mono_ns": time.monotonic_ns(), "rss_bytes": s[0],
                            "cpu_s": s[1]})
        if tracer is not None and tracer.poll() is not None:
            break
        if now - t_start > seconds + 60:
            break
        time.sleep(0.5)
    if tracer is not None:
        tracer.wait()
    if job_proc is not None:
        job_proc.wait()
    if mode == "top":
        # top ends with the job; a q is harmless if it already has.
        try:
            os.write(master, b"q")
        except OSError:
            pass
        try:
            os.waitpid(top_pid, 0)
        except ChildProcessError:
            pass
    truth = {}
    try:
        with open(truth_path) as f:
            truth = json.load(f)
    except (OSError, ValueError):
        pass
    shutil.rmtree(work, ignore_errors=True)
    settled = [s for s in samples if s["t_s"] >= args.settle_s]
    out = {"mode": mode, "samples": samples, "minutes": args.minutes, "scenario": args.scenario}
    if len(settled) >= 4:
        out["rss_slope_mib_per_hour"] = slope_per_hour([(s["t_s"], s["rss_bytes"] / 1048576.0) for s in settled])
        # RSS swings with the window (it fills, folds, its copy is freed): the
        # floor of each minute is the memory the session keeps.
        floors = {}
        for s in settled:
            m = int(s["t_s"] // 60)
            floors[m] = min(floors.get(m, (0, 1 << 62)), (s["t_s"], s["rss_bytes"]), key=lambda x: x[1])
        out["rss_floor_slope_mib_per_hour"] = slope_per_hour([(t, b / 1048576.0) for t, b in floors.values()])
        out["rss_max_mib"] = max(s["rss_bytes"] for s in settled) / 1048576.0
        out["rss_first_mib"] = settled[0]["rss_bytes"] / 1048576.0
        out["rss_last_mib"] = settled[-1]["rss_bytes"] / 1048576.0
        k = max(1, len(settled) // 10)
        first, last_ = settled[: k + 1], settled[-(k + 1):]

        def per_step(win):
            cpu = win[-1]["cpu_s"] - win[0]["cpu_s"]
            steps = steps_between(truth, win[0]["mono_ns"], win[-1]["mono_ns"]) if truth else 0
            return cpu / steps if steps else None, steps, cpu

        a, sa, ca = per_step(first)
        b, sb, cb = per_step(last_)
        out["cpu_first"] = {"cpu_s": ca, "steps": sa, "cpu_ms_per_step": a * 1e3 if a else None}
        out["cpu_last"] = {"cpu_s": cb, "steps": sb, "cpu_ms_per_step": b * 1e3 if b else None}
        out["cpu_per_step_ratio"] = b / a if a and b else None
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--minutes", type=float, default=20)
    ap.add_argument("--mode", default="attach,top")
    ap.add_argument("--scenario", default="compute-bound")
    ap.add_argument("--settle-s", type=float, default=300,
                    help="samples before this are the start-up growth (the first windows, --keep-steps filling)")
    ap.add_argument("--sample-s", type=float, default=1)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("soak.py: needs root (loads BPF programs)", file=sys.stderr)
        return 2
    results = []
    for mode in args.mode.split(","):
        r = run_mode(mode, args, os.path.abspath(args.build_dir))
        results.append(r)
        print(f"{mode}: RSS {r.get('rss_first_mib', 0):.1f} -> {r.get('rss_last_mib', 0):.1f} MiB (max "
              f"{r.get('rss_max_mib', 0):.1f}), slope {r.get('rss_slope_mib_per_hour', float('nan')):.2f} MiB/hour, of the "
              f"per-minute floor {r.get('rss_floor_slope_mib_per_hour', float('nan')):.2f} MiB/hour; CPU per step last/first "
              f"{r.get('cpu_per_step_ratio') or float('nan'):.3f} "
              f"({(r.get('cpu_first') or {}).get('cpu_ms_per_step')} -> {(r.get('cpu_last') or {}).get('cpu_ms_per_step')} ms)",
              flush=True)
    doc = {"load_before": os.getloadavg(), "results": results}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
