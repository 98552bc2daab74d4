#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A small CPU-only PyTorch DDP training job for steptrace's automatic steps.

Two ranks (torch.multiprocessing.spawn) join a gloo process group over
loopback TCP; each trains a small MLP with DistributedDataParallel on batches
from a DataLoader whose worker processes read sample files from disk. No
marker, no accelerator: steptrace must find the steps on its own.

Each rank writes what really happened (CLOCK_MONOTONIC, the clock BPF uses)
to <out>/rank<N>.json: the process id and, per step, when the loop asked for
the batch (start), when optimizer.step() returned (end), how long it waited
for the batch (data_ns; data_cpu_ns of it the main thread's own CPU time, data_delay_ns
its runqueue wait)
and how long DDP's collectives ran in the step (coll_ns: each gradient
bucket's all-reduce from when DDP handed it to the communication hook to when
it completed, and DDP's synchronisation before the forward's compute, which
holds the broadcast of the rebuilt buckets in the second iteration; spans
merged).

usage: ddp_train.py --out DIR [--steps N] [--workers W] [--batch B] [--hidden H]
                    [--slow-rank R [--slow-ms M]] [--decode-ms D]
"""
import argparse
import json
import os
import socket
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset

SAMPLE_BYTES = 64 * 1024
FEATURES = 1024


class FileDataset(Dataset):
    """Reads one file per sample (like an image folder) and decodes it."""

    def __init__(self, root, n, slow_s=0.0, decode_s=0.0):
        self.paths = [os.path.join(root, f"sample{i:05d}.bin") for i in range(n)]
        self.slow_s = slow_s  # each read takes this much longer: slow storage
        self.decode_s = decode_s  # each sample costs this much more CPU to decode

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb") as f:
            raw = f.read()
        if self.slow_s:
            time.sleep(self.slow_s)
        x = torch.frombuffer(bytearray(raw[: FEATURES * 4]), dtype=torch.float32).clone()
        # Decoding (a JPEG, say) in Python: CPU time, measured on the
        # worker's own clock so a busy host lengthens it but never shortens it.
        if self.decode_s:
            until = time.thread_time() + self.decode_s
            while time.thread_time() < until:
                pass
        x = torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0).clamp(-1, 1)
        return x, i % 10


def make_data(root, n):
    for i in range(n):
        with open(os.path.join(root, f"sample{i:05d}.bin"), "wb") as f:
            f.write(os.urandom(SAMPLE_BYTES))


def run_rank(rank, world, port, args):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    h = args.hidden
    model = DDP(
        torch.nn.Sequential(
            torch.nn.Linear(FEATURES, h), torch.nn.ReLU(), torch.nn.Linear(h, h), torch.nn.ReLU(),
            torch.nn.Linear(h, 10)))
    # The job's own timer of its collective: each bucket's all-reduce from
    # when DDP hands it over to when it completes.
    coll_spans = []

    def timed_allreduce(state, bucket):
        t0 = time.monotonic_ns()
        fut = default_hooks.allreduce_hook(None, bucket)

        def done(f):
            coll_spans.append((t0, time.monotonic_ns()))
            return f.value()

        return fut.then(done)

    model.register_comm_hook(None, timed_allreduce)
    # DDP's own collective before the forward: in the second iteration it
    # broadcasts its rebuilt bucket order (reducer._rebuild_buckets), and a
    # rank waits there for a late peer (one run: 155 ms of a 255 ms step,
    # outside every bucket's all-reduce). The forward's compute is
    # _run_ddp_forward; what model(x) spends before it is timed as collective
    # (microseconds of bookkeeping in the other iterations).
    compute_start = []
    run_forward = model._run_ddp_forward

    def timed_forward(*a, **kw):
        compute_start.append(time.monotonic_ns())
        return run_forward(*a, **kw)

    model._run_ddp_forward = timed_forward
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = FileDataset(
        args.data,
        args.steps * args.batch,
        args.slow_ms / 1e3 if rank == args.slow_rank else 0.0,
        args.decode_ms / 1e3,
    )
    loader = DataLoader(data, batch_size=args.batch, num_workers=args.workers, shuffle=False)
    steps = []
    it = iter(loader)
    for _ in range(args.steps):
        start = time.monotonic_ns()
        wait0 = run_delay_ns()
        cpu0 = time.thread_time_ns()
        x, y = next(it)
        got = time.monotonic_ns()
        # Runqueue wait inside next(it): the main thread was ready and the
        # batch there, but no CPU was free (cpu_contention to the tracer).
        data_delay = run_delay_ns() - wait0
        # The main thread's own CPU inside next(it) (the DataLoader's
        # bookkeeping, unpickling the batch, mapping its tensors): host time
        # to the kernel, not a wait for the loaders.
        data_cpu = time.thread_time_ns() - cpu0
        opt.zero_grad()
        compute_start.clear()
        ddp_forward = time.monotonic_ns()
        out = model(x)
        coll_spans.append((ddp_forward, compute_start[0]))
        loss = torch.nn.functional.cross_entropy(out, y)
        fwd = time.monotonic_ns()
        loss.backward()  # DDP all-reduces the gradients over gloo here
        bwd = time.monotonic_ns()
        opt.step()
        end = time.monotonic_ns()
        steps.append({"start_ns": start, "end_ns": end, "data_ns": got - start, "data_cpu_ns": data_cpu,
                      # Diagnostics only (the test prints them): from the batch to the loss, and the backward.
                      "fwd_ns": fwd - got, "bwd_ns": bwd - fwd,
                      "data_delay_ns": data_delay,
                      "run_delay_ns": run_delay_ns() - wait0,
                      "coll_ns": merged_overlap(coll_spans, start, end)})
        coll_spans.clear()
    with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "pid": os.getpid(), "steps": steps}, f)
    # Leave together: a rank whose loaders are still busy (a planted slow
    # storage) otherwise reached the teardown after its peer had gone, and
    # hung in it.
    del it
    dist.barrier()
    dist.destroy_process_group()


def run_delay_ns():
    """The calling thread's time spent runnable but waiting for a CPU, so far
    (schedstat's second field): a runqueue wait is cpu_contention to the
    tracer, whatever the job's own timer was timing around it."""
    with open("/proc/thread-self/schedstat") as f:
        return int(f.read().split()[1])


def merged_overlap(spans, lo, hi):
    """Time in [lo, hi) covered by any of the spans."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in spans if e > lo and s < hi):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--slow-rank", type=int, default=-1, help="this rank's storage is slow (a planted straggler)")
    ap.add_argument("--slow-ms", type=float, default=20, help="extra time per sample read on --slow-rank")
    ap.add_argument("--decode-ms", type=float, default=0, help="CPU time each sample's decode costs its worker")
    ap.add_argument("--hidden", type=int, default=1024, help="width of the hidden layers (gradient bytes ~ 4*h*(1034+h))")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ddp-data.") as d:
        args.data = d
        make_data(d, args.steps * args.batch)
        mp.spawn(run_rank, args=(args.ranks, free_port(), args), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
