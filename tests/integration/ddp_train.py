#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A small CPU-only PyTorch DDP training job for steptrace's automatic steps.

Two ranks (torch.multiprocessing.spawn) join a gloo process group over
loopback TCP; each trains a small MLP with DistributedDataParallel on batches
from a DataLoader whose worker processes read sample files from disk. No
marker, no accelerator: steptrace must find the steps on its own.

Each rank writes what really happened (CLOCK_MONOTONIC, the clock BPF uses)
to <out>/rank<N>.json: the process id and, per step, when the loop asked for
the batch (start) and when optimizer.step() returned (end).

usage: ddp_train.py --out DIR [--steps N] [--workers W]
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
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset

SAMPLE_BYTES = 64 * 1024
FEATURES = 1024


class FileDataset(Dataset):
    """Reads one file per sample (like an image folder) and decodes it."""

    def __init__(self, root, n):
        self.paths = [os.path.join(root, f"sample{i:05d}.bin") for i in range(n)]

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb") as f:
            raw = f.read()
        x = torch.frombuffer(bytearray(raw[: FEATURES * 4]), dtype=torch.float32).clone()
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
    model = DDP(
        torch.nn.Sequential(
            torch.nn.Linear(FEATURES, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
            torch.nn.Linear(1024, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = FileDataset(args.data, args.steps * args.batch)
    loader = DataLoader(data, batch_size=args.batch, num_workers=args.workers, shuffle=False)
    steps = []
    it = iter(loader)
    for _ in range(args.steps):
        start = time.monotonic_ns()
        x, y = next(it)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()  # DDP all-reduces the gradients over gloo here
        opt.step()
        steps.append({"start_ns": start, "end_ns": time.monotonic_ns()})
    with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "pid": os.getpid(), "steps": steps}, f)
    dist.destroy_process_group()


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
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ddp-data.") as d:
        args.data = d
        make_data(d, args.steps * args.batch)
        mp.spawn(run_rank, args=(args.ranks, free_port(), args), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
