#!/usr/bin/env python3
# Where a PyTorch process's device memory goes, step by step, with whichever libnccl.so.2 it
# loads (its own, or Colibri's through LD_PRELOAD): one rank, one GPU, the device-wide used memory
# (torch.cuda.mem_get_info) after each step, so that what the NCCL library adds is told apart
# from what PyTorch's own first kernels and allocations add.
#   python3 scripts/torch-memory-steps.py [--eager]
# Prints one line "step: used MiB (+delta)" per step and a final "steps {...}" JSON line.
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
import argparse
import json
import os
import socket

import torch
import torch.distributed as dist

ap = argparse.ArgumentParser()
ap.add_argument("--eager", action="store_true", help="init_process_group with device_id (an eager init)")
args = ap.parse_args()
dev = torch.device("cuda", 0)
torch.cuda.set_device(dev)
steps = {}
last = [None]


def note(name):
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info(dev)
    used = (total - free) / 2**20
    delta = 0.0 if last[0] is None else used - last[0]
    last[0] = used
    steps[name] = round(delta, 1)
    print(f"{name}: {used:.1f} MiB used (+{delta:.1f})", flush=True)


note("context")
x = torch.ones(1, device=dev)
note("first tensor (torch.ones)")
y = x * 2 + 1
note("second kernel (x * 2 + 1)")
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
kw = {"device_id": dev} if args.eager else {}
dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1, **kw)
note("init_process_group")
dist.all_reduce(x)
note("first all_reduce (1 float)")
dist.all_reduce(x)
note("second all_reduce")
z = torch.ones(1 << 20, device=dev)
dist.all_reduce(z)
note("all_reduce of 4 MiB")
dist.all_gather_into_tensor(torch.empty(1 << 20, device=dev), z)
note("all_gather of 4 MiB")
dist.destroy_process_group()
note("destroy_process_group")
print("steps " + json.dumps({"library": os.environ.get("LD_PRELOAD", "") or "pytorch's bundled nccl", **steps}))
