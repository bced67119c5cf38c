#!/usr/bin/env python3
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
"""PyTorch's "nccl" process group, unmodified, checked call by call against references computed here.

Runs N rank processes on one GPU (cuda:0 unless --device), each a torch.distributed rank over the
libnccl.so.2 the process loads: NVIDIA's (PyTorch's own) or Colibri's when started with
LD_PRELOAD=<colibri's libnccl.so.2> (PyTorch's libtorch_cuda.so finds its bundled NCCL through
DT_RPATH, so LD_LIBRARY_PATH does not replace it). NVIDIA's NCCL refuses two ranks on one GPU:
run it with --nprocs 1 for the memory and init figures. Several rank processes sharing a GPU run
concurrently only under the MPS daemon (scripts/gpu-nccl.sh starts it).

  python3 scripts/torch-nccl-check.py --nprocs 4 [--quick]

Every result is compared element by element with a reference computed on the CPU in float64; the
first mismatches are printed. Each rank prints one line per check ("ok ..." / "FAIL ...") and a
line "figures {...}" (device memory by torch.cuda.mem_get_info before init, after init, after the
first collective; the time of init_process_group and of the first collective). The launcher exits
0 only when every rank passed every check.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args):
    ports = [free_port(), free_port()]
    procs = []
    for r in range(args.nprocs):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(args.nprocs), CHECK_PORTS=f"{ports[0]},{ports[1]}")
        procs.append(subprocess.Popen([sys.executable, __file__, "--rank-process"] + sys.argv[1:], env=env))
    deadline = time.time() + args.timeout
    rcs = [None] * len(procs)
    while None in rcs and time.time() < deadline:
        for i, p in enumerate(procs):
            if rcs[i] is None:
                rcs[i] = p.poll()
        if any(rc not in (None, 0) for rc in rcs):
            time.sleep(5)  # the others are likely to fail too: give them a moment to say why
            break
        time.sleep(0.2)
    for i, p in enumerate(procs):
        if p.poll() is None:
            print(f"launcher: rank {i} still running after {args.timeout} s or after another rank failed: killed",
                  flush=True)
            p.kill()
        rcs[i] = p.wait()
    bad = [i for i, rc in enumerate(rcs) if rc != 0]
    print(f"launcher: {args.nprocs} ranks, exit codes {rcs}: {'PASS' if not bad else 'FAIL'}", flush=True)
    return 0 if not bad else 1


class Checker:
    def __init__(self, rank, world, torch):
        self.rank, self.world, self.torch = rank, world, torch
        self.failures = 0
        self.passed = 0

    def compare(self, name, got, want, rtol=0.0, atol=0.0):
        torch = self.torch
        g = got.detach().to("cpu", torch.float64).flatten()
        w = want.to(torch.float64).flatten()
        if g.numel() != w.numel():
            return self.fail(name, f"{g.numel()} elements, want {w.numel()}")
        bad = (g - w).abs() > (atol + rtol * w.abs())
        bad |= torch.isnan(g) != torch.isnan(w)
        n = int(bad.sum())
        if n:
            idx = bad.nonzero().flatten()[:4].tolist()
            what = ", ".join(f"[{i}] {g[i].item()} want {w[i].item()}" for i in idx)
            return self.fail(name, f"{n} of {g.numel()} elements wrong, first: {what}")
        self.passed += 1
        print(f"rank {self.rank}: ok {name}", flush=True)
        return True

    def fail(self, name, why):
        self.failures += 1
        print(f"rank {self.rank}: FAIL {name}: {why}", flush=True)
        return False


def tolerance(torch, dtype, ranks):
    # Inputs are small integers: sums and maxima are exact in every type used here; an average
    # rounds once in the element type (bfloat16 keeps 8 significant bits, float16 11).
    if dtype == torch.bfloat16:
        return 1.0 / 128, 1.0 / 64
    if dtype == torch.float16:
        return 1.0 / 1024, 1.0 / 512
    return 1e-6, 1e-6


def rank_main(args):
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    ports = [int(p) for p in os.environ["CHECK_PORTS"].split(",")]
    dev = torch.device(f"cuda:{args.device}")
    torch.cuda.set_device(dev)
    torch.zeros(1, device=dev)  # the CUDA context exists before the first reading
    torch.cuda.synchronize()
    c = Checker(rank, world, torch)
    figures = {"library": os.environ.get("LD_PRELOAD", "") or "pytorch's bundled nccl", "ranks": world}

    def mib(x):
        return round(x / 2**20, 1)

    # Rank r's input: element i is ((i * 7 + r * 13) % 17) - 8 (+ salt), small integers exact in
    # every floating type, different on every rank and at every index.
    def data(r, n, dtype, salt=0):
        i = torch.arange(n, dtype=torch.int64)
        return (((i * 7 + r * 13 + salt) % 17) - 8).to(dtype)

    counts = [1, 7, 4099, 1_000_003] if args.quick else [1, 7, 4099, 1_000_003, 16 * 2**20 + 5]

    free0 = torch.cuda.mem_get_info(dev)[0]
    t0 = time.perf_counter()
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{ports[0]}", rank=rank, world_size=world)
    figures["init_ms"] = round((time.perf_counter() - t0) * 1e3, 1)
    figures["after_init_mib"] = mib(free0 - torch.cuda.mem_get_info(dev)[0])
    x = torch.ones(1, device=dev)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    dist.all_reduce(x)
    torch.cuda.synchronize()
    figures["first_allreduce_ms"] = round((time.perf_counter() - t0) * 1e3, 1)
    figures["after_first_call_mib"] = mib(free0 - torch.cuda.mem_get_info(dev)[0])
    c.compare("first all_reduce", x, torch.full((1,), float(world)))
    print(f"rank {rank}: figures {json.dumps(figures)}", flush=True)

    dtypes = [torch.float32, torch.bfloat16, torch.float16]
    ops = [("sum", dist.ReduceOp.SUM), ("avg", dist.ReduceOp.AVG), ("max", dist.ReduceOp.MAX)]

    def reference(n, dtype, opname, salt=0):
        ins = [data(r, n, torch.float64, salt) for r in range(world)]
        if opname == "sum":
            return sum(ins)
        if opname == "avg":
            return sum(ins) / world
        return torch.stack(ins).max(0).values

    # all_reduce: every type x operation x count, out of place is not in torch's API (in place).
    for dtype in dtypes:
        for opname, op in ops:
            for n in counts:
                t = data(rank, n, dtype).to(dev)
                dist.all_reduce(t, op=op)
                rtol, atol = tolerance(torch, dtype, world) if opname == "avg" else (0, 0)
                c.compare(f"all_reduce {opname} {str(dtype)[6:]} n={n}", t, reference(n, dtype, opname), rtol, atol)

    for n in counts:
        src = data(rank, n, torch.float32).to(dev)
        out = torch.empty(n * world, device=dev)
        dist.all_gather_into_tensor(out, src)
        c.compare(f"all_gather_into_tensor n={n}", out, torch.cat([data(r, n, torch.float64) for r in range(world)]))

    for dtype in [torch.float32, torch.bfloat16]:
        for opname, op in ops[:2]:
            for n in counts:
                src = data(rank, n * world, dtype).to(dev)
                out = torch.empty(n, dtype=dtype, device=dev)
                dist.reduce_scatter_tensor(out, src, op=op)
                full = reference(n * world, dtype, opname)
                rtol, atol = tolerance(torch, dtype, world) if opname == "avg" else (0, 0)
                c.compare(f"reduce_scatter_tensor {opname} {str(dtype)[6:]} n={n}", out, full[rank * n:(rank + 1) * n],
                          rtol, atol)

    for root in sorted({0, world - 1}):
        for n in counts:
            t = data(rank, n, torch.float32, salt=root).to(dev)
            dist.broadcast(t, src=root)
            c.compare(f"broadcast root={root} n={n}", t, data(root, n, torch.float64, salt=root))

    for n in counts:
        root = world - 1
        t = data(rank, n, torch.float32).to(dev)
        dist.reduce(t, dst=root, op=dist.ReduceOp.SUM)
        if rank == root:
            c.compare(f"reduce sum root={root} n={n}", t, reference(n, torch.float32, "sum"))
        else:  # NCCL leaves a non-root's buffer as it was (its send buffer, in place)
            c.compare(f"reduce sum root={root} n={n} (non-root buffer unchanged)", t, data(rank, n, torch.float64))

    if world > 1:
        # A pipeline: rank 0 sends, each rank receives from its left and sends on to its right.
        for n in counts:
            t = torch.empty(n, device=dev)
            if rank == 0:
                t = data(0, n, torch.float32, salt=5).to(dev)
                dist.send(t, dst=1)
            else:
                dist.recv(t, src=rank - 1)
                c.compare(f"send/recv pipeline n={n}", t, data(0, n, torch.float64, salt=5))
                if rank + 1 < world:
                    dist.send(t, dst=rank + 1)
        # batch_isend_irecv: a ring both ways at once (sends posted before receives on every rank).
        for n in counts:
            right, left = (rank + 1) % world, (rank - 1) % world
            out_r = data(rank, n, torch.float32, salt=1).to(dev)
            out_l = data(rank, n, torch.float32, salt=2).to(dev)
            in_l, in_r = torch.empty(n, device=dev), torch.empty(n, device=dev)
            ops_ = [dist.P2POp(dist.isend, out_r, right), dist.P2POp(dist.isend, out_l, left),
                    dist.P2POp(dist.irecv, in_l, left), dist.P2POp(dist.irecv, in_r, right)]
            for w in dist.batch_isend_irecv(ops_):
                w.wait()
            c.compare(f"batch_isend_irecv ring from left n={n}", in_l, data(left, n, torch.float64, salt=1))
            c.compare(f"batch_isend_irecv ring from right n={n}", in_r, data(right, n, torch.float64, salt=2))

    # all_to_all_single, even: count elements to each peer.
    for n in counts[:4]:
        src = data(rank, n * world, torch.float32).to(dev)
        out = torch.empty(n * world, device=dev)
        dist.all_to_all_single(out, src)
        want = torch.cat([data(p, n * world, torch.float64)[rank * n:(rank + 1) * n] for p in range(world)])
        c.compare(f"all_to_all_single even n={n}", out, want)

    # all_to_all_single, uneven: rank r sends (r + 2p) % 5 * k elements to peer p (some of them 0).
    for k in [1, 3001]:
        def split(r, p):
            return (r + 2 * p) % 5 * k
        ins = [data(r, sum(split(r, p) for p in range(world)), torch.float32, salt=3) for r in range(world)]
        send_splits = [split(rank, p) for p in range(world)]
        recv_splits = [split(p, rank) for p in range(world)]
        out = torch.empty(sum(recv_splits), device=dev)
        dist.all_to_all_single(out, ins[rank].to(dev), recv_splits, send_splits)
        want = []
        for p in range(world):
            off = sum(split(p, q) for q in range(rank))
            want.append(ins[p][off:off + split(p, rank)].to(torch.float64))
        c.compare(f"all_to_all_single uneven k={k}", out, torch.cat(want))

    # new_group: the even ranks and the odd ranks, each group reducing at the same time.
    groups = [dist.new_group([r for r in range(world) if r % 2 == g]) for g in range(2 if world > 1 else 1)]
    mine = [r for r in range(world) if r % 2 == rank % 2]
    for n in counts[:4]:
        t = data(rank, n, torch.float32).to(dev)
        dist.all_reduce(t, group=groups[rank % 2])
        c.compare(f"new_group (ranks {mine}) all_reduce n={n}", t, sum(data(r, n, torch.float64) for r in mine))

    dist.barrier()
    c.passed += 1
    print(f"rank {rank}: ok barrier", flush=True)

    # CUDA graph: all_reduce captured once, replayed with new data each time.
    n = 1 << 16
    static = torch.zeros(n, device=dev)
    s = torch.cuda.Stream(dev)
    s.wait_stream(torch.cuda.current_stream(dev))
    with torch.cuda.stream(s):
        for _ in range(2):  # warm up outside the capture, as torch.cuda.graph asks
            dist.all_reduce(static)
    torch.cuda.current_stream(dev).wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        dist.all_reduce(static)
    for replay in range(3):
        static.copy_(data(rank, n, torch.float32, salt=10 + replay).to(dev))
        g.replay()
        torch.cuda.synchronize()
        c.compare(f"cuda graph all_reduce replay {replay}", static,
                  sum(data(r, n, torch.float64, salt=10 + replay) for r in range(world)))
    del g

    dist.destroy_process_group()

    # Eager init with device_id (the communicator is made in init_process_group), and split_group.
    free1 = torch.cuda.mem_get_info(dev)[0]
    t0 = time.perf_counter()
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{ports[1]}", rank=rank, world_size=world,
                            device_id=dev)
    figures["init_device_id_ms"] = round((time.perf_counter() - t0) * 1e3, 1)
    figures["after_init_device_id_mib"] = mib(free1 - torch.cuda.mem_get_info(dev)[0])
    for n in counts[:4]:
        t = data(rank, n, torch.float32).to(dev)
        dist.all_reduce(t)
        c.compare(f"device_id all_reduce n={n}", t, reference(n, torch.float32, "sum"))
    # new_group of a parent bound to its device: PyTorch makes it with ncclCommSplit. (PyTorch's
    # split_group crashed the process on this host with its own NCCL as with Colibri's.)
    halves = [[r for r in range(world) if r < (world + 1) // 2], [r for r in range(world) if r >= (world + 1) // 2]]
    subs = [dist.new_group(h) for h in halves if h]
    mine = next(h for h in halves if rank in h)
    sub = subs[0] if rank in halves[0] else subs[1]
    for n in counts[:4]:
        t = data(rank, n, torch.float32).to(dev)
        dist.all_reduce(t, group=sub)
        c.compare(f"split new_group (ranks {mine}) all_reduce n={n}", t, sum(data(r, n, torch.float64) for r in mine))
        out = torch.empty(n * len(mine), device=dev)
        dist.all_gather_into_tensor(out, data(rank, n, torch.float32).to(dev), group=sub)
        c.compare(f"split new_group (ranks {mine}) all_gather n={n}", out,
                  torch.cat([data(r, n, torch.float64) for r in mine]))
    dist.barrier()
    dist.destroy_process_group()

    print(f"rank {rank}: figures {json.dumps(figures)}", flush=True)
    print(f"rank {rank}: {c.passed} checks passed, {c.failures} failed", flush=True)
    return 0 if c.failures == 0 else 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nprocs", type=int, default=2)
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="leave out the 64 MiB count")
    p.add_argument("--timeout", type=float, default=420, help="seconds before the launcher kills the ranks")
    p.add_argument("--rank-process", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.rank_process:
        try:
            return rank_main(args)
        except Exception as e:  # noqa: BLE001 - any failure of a rank is reported as one
            import traceback
            traceback.print_exc()
            print(f"rank {os.environ.get('RANK')}: FAIL with {type(e).__name__}: {e}", flush=True)
            return 1
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
