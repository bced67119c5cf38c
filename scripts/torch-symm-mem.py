#!/usr/bin/env python3
# PyTorch's own symmetric memory (torch.distributed._symmetric_memory) with its NCCL backend, on
# whatever libnccl.so.2 PyTorch loads (run it with LD_PRELOAD=.../libnccl.so.2 for Colibri's):
# what a stack that uses PyTorch's API rather than NCCL's calls gets. Each rank process, step by
# step, prints "STEP <name>: ok <detail>" or "STEP <name>: FAILED <exception>" and goes on where it
# can: the backend set (NCCL; --backend default leaves PyTorch's own, over CUDA IPC), a symmetric
# tensor (symm_mem.empty), its rendezvous over the default group, an all_reduce of it through the
# process group (every element checked), and, where PyTorch offers them for this backend, its
# symmetric-memory all-reduce ops.
#   python3 torch-symm-mem.py --ranks N [--backend NCCL|default]   (rank processes on GPU 0: under MPS)
# Exit code 0 when every rank got through the rendezvous and the checked all_reduce.
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
import argparse
import os
import socket
import subprocess
import sys


def child(rank, world, port, backend):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", 0))
    ok = {}

    def step(name, fn):
        try:
            detail = fn()
            print(f"rank {rank}: STEP {name}: ok {detail if detail is not None else ''}", flush=True)
            ok[name] = True
            return True
        except Exception as e:  # the probe records what each step does, whatever it raises
            text = " ".join(str(e).split())[:400]
            print(f"rank {rank}: STEP {name}: FAILED {type(e).__name__}: {text}", flush=True)
            ok[name] = False
            return False

    print(f"rank {rank}: torch {torch.__version__}, NCCL {torch.cuda.nccl.version()}", flush=True)
    import torch.distributed._symmetric_memory as symm_mem

    state = {}
    if backend != "default":
        step(f"set_backend({backend})", lambda: symm_mem.set_backend(backend) or symm_mem.get_backend("cuda"))
    n = 1 << 16

    def make():
        state["t"] = symm_mem.empty(n, dtype=torch.float32, device="cuda")
        return f"{n} float32 at {state['t'].data_ptr():#x}"

    step("symm_mem.empty", make)
    group = dist.group.WORLD

    def rendezvous():
        state["h"] = symm_mem.rendezvous(state["t"], group=group)
        return f"rank {state['h'].rank} of {state['h'].world_size}"

    if "t" in state:
        step("rendezvous", rendezvous)

    def all_reduce():
        t = state["t"]
        t.copy_((torch.arange(n, device="cuda") % 977 + 1000 * (rank + 1)).float())
        dist.all_reduce(t)
        torch.cuda.synchronize()
        want = sum((torch.arange(n) % 977 + 1000 * (p + 1)).float() for p in range(world))
        bad = (t.cpu() != want).nonzero()
        if len(bad):
            i = int(bad[0])
            raise RuntimeError(f"element {i}: got {float(t[i])} want {float(want[i])}")
        return f"{n} elements right"

    if "t" in state:
        step("dist.all_reduce on the symmetric tensor", all_reduce)
    for op in ("one_shot_all_reduce", "two_shot_all_reduce_", "multimem_all_reduce_"):
        if "h" not in state or not hasattr(torch.ops.symm_mem, op):
            continue

        def run(op=op):
            t = state["t"]
            t.fill_(rank + 1)
            name = group.group_name
            out = getattr(torch.ops.symm_mem, op)(t, "sum", name)
            torch.cuda.synchronize()
            got = (out if out is not None else t)[:8].tolist()
            return f"first elements {got}"

        step(f"torch.ops.symm_mem.{op}", run)
    dist.destroy_process_group()
    return 0 if ok.get("rendezvous") and ok.get("dist.all_reduce on the symmetric tensor") else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--child", type=int)
    ap.add_argument("--port", type=int)
    ap.add_argument("--backend", default="NCCL",
                    help="symmetric memory's backend: NCCL (default), or default: PyTorch's own (CUDA IPC)")
    a = ap.parse_args()
    if a.child is not None:
        sys.exit(child(a.child, a.ranks, a.port, a.backend))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, __file__, "--ranks", str(a.ranks), "--child", str(r), "--port",
                               str(port), "--backend", a.backend], env=dict(os.environ)) for r in range(a.ranks)]
    codes = [p.wait() for p in procs]
    print(f"{a.ranks} ranks: exit codes {codes}")
    sys.exit(0 if all(c == 0 for c in codes) else 1)


if __name__ == "__main__":
    main()
