#!/usr/bin/env python3
# What vLLM's VLLM_USE_NCCL_SYMM_MEM path does with a libnccl.so.2, through ctypes as vLLM's own
# NCCL wrapper does, with PyTorch's streams and CUDA graphs: ncclMemAlloc, a window over it
# (ncclCommWindowRegister, NCCL_WIN_COLL_SYMMETRIC), all-reduces on the window eager and captured
# in a torch.cuda.CUDAGraph, replayed with new inputs and checked element by element; the
# window's deregistration and a suspend refused while a graph that reads through it lives, and
# accepted once it is gone; a suspend/resume cycle (ncclCommSuspend, ncclCommMemStats, a refused call, the next
# all-reduce right); with --latency, the time of one all-reduce on window buffers against
# unregistered ones (torch.empty), 20 per graph, 8 B to 1 MiB.
#   python3 torch-nccl-windows.py --lib DIR/libnccl.so.2 --ranks N [--latency] [--csv FILE]
# Rank processes on GPU 0 (run them under the MPS daemon); exit code 0 when every check held.
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
import argparse
import ctypes
import json
import os
import subprocess
import sys
import time

NCCL_FLOAT32, NCCL_SUM = 7, 0
NCCL_WIN_COLL_SYMMETRIC, NCCL_SUSPEND_MEM = 0x01, 0x01
NCCL_INVALID_USAGE = 5
STAT_SUSPEND, STAT_SUSPENDED = 0, 1


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def load(path):
    lib = ctypes.CDLL(path)
    lib.ncclGetLastError.restype = ctypes.c_char_p
    lib.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, UniqueId, ctypes.c_int]
    lib.ncclMemAlloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    lib.ncclMemFree.argtypes = [ctypes.c_void_p]
    lib.ncclCommWindowRegister.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                           ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
    lib.ncclCommWindowDeregister.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                  ctypes.c_void_p, ctypes.c_void_p]
    lib.ncclCommSuspend.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.ncclCommResume.argtypes = [ctypes.c_void_p]
    lib.ncclCommMemStats.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_uint64)]
    lib.ncclCommDestroy.argtypes = [ctypes.c_void_p]
    return lib


def child(args):
    import torch

    torch.cuda.set_device(0)
    torch.zeros(1, device="cuda")  # the context, before the communicator
    lib = load(args.lib)
    uid = UniqueId()
    ctypes.memmove(ctypes.addressof(uid), bytes.fromhex(args.id), ctypes.sizeof(uid))
    comm = ctypes.c_void_p()
    r, n = args.child, args.ranks
    failures = []

    def ok(rc, what):
        if rc != 0:
            raise RuntimeError(f"rank {r}: {what} returned {rc}: {lib.ncclGetLastError(comm).decode()}")

    ok(lib.ncclCommInitRank(ctypes.byref(comm), n, uid, r), "ncclCommInitRank")

    class View:  # a tensor over memory that torch did not allocate
        def __init__(self, ptr, count):
            self.__cuda_array_interface__ = {"shape": (count,), "typestr": "<f4", "data": (ptr, False),
                                             "version": 3, "strides": None}

    max_count = 1 << 18  # 1 MiB of float32
    base = ctypes.c_void_p()
    ok(lib.ncclMemAlloc(ctypes.byref(base), 2 * max_count * 4), "ncclMemAlloc")
    win = ctypes.c_void_p()
    ok(lib.ncclCommWindowRegister(comm, base, 2 * max_count * 4, ctypes.byref(win), NCCL_WIN_COLL_SYMMETRIC),
       "ncclCommWindowRegister")
    wsend = torch.as_tensor(View(base.value, max_count), device="cuda")
    wrecv = torch.as_tensor(View(base.value + max_count * 4, max_count), device="cuda")

    def allreduce(send, recv, count, stream=None):
        s = stream if stream is not None else torch.cuda.current_stream()
        ok(lib.ncclAllReduce(ctypes.c_void_p(send.data_ptr()), ctypes.c_void_p(recv.data_ptr()), count,
                             NCCL_FLOAT32, NCCL_SUM, comm, ctypes.c_void_p(s.cuda_stream)), f"ncclAllReduce({count})")

    def inputs(count, salt, rank):
        return ((rank + 1) * 1000 + torch.arange(count, dtype=torch.int64) % 977 + salt).to(torch.float32)

    def check(recv, count, salt, what):
        want = sum(inputs(count, salt, p) for p in range(n))
        got = recv[:count].cpu()
        bad = (got != want).nonzero()
        if len(bad):
            i = int(bad[0])
            failures.append(f"rank {r}: {what}: element {i} of {count}: got {float(got[i])} want {float(want[i])}")

    counts = [2, 1000, 70001, max_count]
    # 1. Eager, on the window.
    for salt, count in enumerate(counts):
        wsend[:count].copy_(inputs(count, salt, r))
        wrecv.fill_(-1)
        allreduce(wsend, wrecv, count)
        torch.cuda.synchronize()
        check(wrecv, count, salt, f"eager all-reduce of {count} on the window")
    # 1b. Suspend and resume (before any capture: the window deregistered first, registered again).
    ok(lib.ncclCommWindowDeregister(comm, win), "ncclCommWindowDeregister (before the suspend)")
    held = ctypes.c_uint64()
    ok(lib.ncclCommMemStats(comm, STAT_SUSPEND, ctypes.byref(held)), "ncclCommMemStats")
    before = held.value
    ok(lib.ncclCommSuspend(comm, NCCL_SUSPEND_MEM), "ncclCommSuspend")
    ok(lib.ncclCommMemStats(comm, STAT_SUSPEND, ctypes.byref(held)), "ncclCommMemStats")
    suspended_bytes = held.value
    flag = ctypes.c_uint64()
    ok(lib.ncclCommMemStats(comm, STAT_SUSPENDED, ctypes.byref(flag)), "ncclCommMemStats")
    t = torch.ones(1000, device="cuda")
    rc = lib.ncclAllReduce(ctypes.c_void_p(t.data_ptr()), ctypes.c_void_p(t.data_ptr()), 1000, NCCL_FLOAT32,
                           NCCL_SUM, comm, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    if rc == 0 or suspended_bytes != 0 or flag.value != 1:
        failures.append(f"rank {r}: suspended: a call returned {rc}, {suspended_bytes} bytes held, flag {flag.value}")
    ok(lib.ncclCommResume(comm), "ncclCommResume")
    send, recv = torch.empty(70001, device="cuda"), torch.empty(70001, device="cuda")
    send.copy_(inputs(70001, 7, r))
    allreduce(send, recv, 70001)
    torch.cuda.synchronize()
    check(recv, 70001, 7, "all-reduce after the resume")
    ok(lib.ncclCommWindowRegister(comm, base, 2 * max_count * 4, ctypes.byref(win), NCCL_WIN_COLL_SYMMETRIC),
       "ncclCommWindowRegister (after the resume)")
    for count in counts[:3]:  # what a capture needs set up is set up eagerly again
        allreduce(wsend, wrecv, count)
    torch.cuda.synchronize()
    # 2. Captured in a CUDA graph (one all-reduce per size, each on its own part of the window),
    # replayed with new inputs.
    offs, at = [], 0
    for count in counts[:3]:
        offs.append(at)
        at += (count + 255) // 256 * 256
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for off, count in zip(offs, counts[:3]):
            allreduce(wsend[off:], wrecv[off:], count, torch.cuda.current_stream())
    for rep in range(5):
        for i, (off, count) in enumerate(zip(offs, counts[:3])):
            wsend[off:off + count].copy_(inputs(count, 100 + 10 * rep + i, r))
        wrecv.fill_(-1)
        torch.cuda.synchronize()
        graph.replay()
        torch.cuda.synchronize()
        for i, (off, count) in enumerate(zip(offs, counts[:3])):
            check(wrecv[off:], count, 100 + 10 * rep + i, f"replay {rep}, all-reduce of {count}")
    # 3. The window's deregistration while the graph lives: refused on every rank; so is a suspend
    # (the graph's replays use the communicator's device memory), saying so.
    rc = lib.ncclCommWindowDeregister(comm, win)
    msg = lib.ncclGetLastError(comm).decode()
    if rc != NCCL_INVALID_USAGE:
        failures.append(f"rank {r}: deregistering a window a live graph reads: {rc} ({msg})")
    rc = lib.ncclCommSuspend(comm, NCCL_SUSPEND_MEM)
    msg = lib.ncclGetLastError(comm).decode()
    if rc != NCCL_INVALID_USAGE or "captured in CUDA graphs that still exist" not in msg:
        failures.append(f"rank {r}: a suspend while a graph lives: {rc} ({msg})")
    graph.replay()  # still right
    torch.cuda.synchronize()
    check(wrecv[offs[2]:], counts[2], 100 + 10 * 4 + 2, "replay after the refused deregistration")
    graph.reset()
    del graph
    tries = 0
    while True:  # the driver drops the graph's hold soon after; every rank sees the same outcome
        rc = lib.ncclCommWindowDeregister(comm, win)
        tries += 1
        if rc != NCCL_INVALID_USAGE or tries >= 250:
            break
        time.sleep(0.02)
    if rc != 0:
        failures.append(f"rank {r}: deregistering after the graph was destroyed: {rc} "
                        f"({lib.ncclGetLastError(comm).decode()})")
    # 4. With the graph and the window gone the suspend goes through, and the resume after it.
    ok(lib.ncclCommSuspend(comm, NCCL_SUSPEND_MEM), "ncclCommSuspend (the graph destroyed)")
    ok(lib.ncclCommResume(comm), "ncclCommResume (after the graph)")
    out = {"rank": r, "failures": failures, "held_before_suspend": before, "held_suspended": suspended_bytes,
           "deregister_tries": tries}
    # 5. Latency: window against unregistered buffers, 20 all-reduces per graph.
    if args.latency:
        ok(lib.ncclCommWindowRegister(comm, base, 2 * max_count * 4, ctypes.byref(win), NCCL_WIN_COLL_SYMMETRIC),
           "ncclCommWindowRegister (again)")
        plain_send, plain_recv = torch.zeros(max_count, device="cuda"), torch.zeros(max_count, device="cuda")
        rows = []
        for size in [8, 64, 512, 4096, 32768, 262144, 1 << 20]:
            count = size // 4 if size >= 4 else 1
            count = max(count, 2)
            for kind, (s_, r_) in (("window", (wsend, wrecv)), ("unregistered", (plain_send, plain_recv))):
                st = torch.cuda.Stream()
                st.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(st):
                    allreduce(s_, r_, count, st)  # warm-up: set-up outside the capture
                torch.cuda.synchronize()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, stream=st):
                    for _ in range(20):
                        allreduce(s_, r_, count, torch.cuda.current_stream())
                for _ in range(5):
                    g.replay()
                torch.cuda.synchronize()
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                for _ in range(50):
                    g.replay()
                e1.record()
                torch.cuda.synchronize()
                rows.append({"bytes": count * 4, "buffers": kind, "us": e0.elapsed_time(e1) * 1000 / (50 * 20)})
                g.reset()
                del g
        out["latency"] = rows
        for _ in range(250):
            if lib.ncclCommWindowDeregister(comm, win) != NCCL_INVALID_USAGE:
                break
            time.sleep(0.02)
    ok(lib.ncclCommDestroy(comm), "ncclCommDestroy")
    lib.ncclMemFree(base)
    print("RESULT " + json.dumps(out), flush=True)
    return 1 if failures else 0


def parent(args):
    lib = load(args.lib)
    uid = UniqueId()
    if lib.ncclGetUniqueId(ctypes.byref(uid)) != 0:
        print("ncclGetUniqueId failed: " + lib.ncclGetLastError(None).decode(), file=sys.stderr)
        return 2
    hexid = ctypes.string_at(ctypes.addressof(uid), ctypes.sizeof(uid)).hex()  # all 128 bytes, NULs too
    cmd = [sys.executable, os.path.abspath(__file__), "--lib", args.lib, "--ranks", str(args.ranks), "--id", hexid]
    if args.latency:
        cmd.append("--latency")
    procs = [subprocess.Popen(cmd + ["--child", str(r)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(args.ranks)]
    status, results = 0, []
    for r, p in enumerate(procs):
        try:
            text, _ = p.communicate(timeout=args.deadline)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            print(f"rank {r}: no end within {args.deadline} s (a hang)")
            return 3
        for line in text.splitlines():
            if line.startswith("RESULT "):
                results.append(json.loads(line[7:]))
            else:
                print(f"[rank {r}] {line}")
        if p.returncode != 0:
            status = 1
            print(f"rank {r}: exit code {p.returncode}")
    for res in sorted(results, key=lambda x: x["rank"]):
        for f in res["failures"]:
            print("FAILED " + f)
        print(f"rank {res['rank']}: held before the suspend {res['held_before_suspend']} bytes, suspended "
              f"{res['held_suspended']}, deregistration after the graph in {res['deregister_tries']} tries")
    if results and "latency" in results[0]:
        print("bytes,buffers,us_rank0,us_max")
        lines = []
        for i, row in enumerate(results[0]["latency"]):
            worst = max(res["latency"][i]["us"] for res in results)
            lines.append(f"{row['bytes']},{row['buffers']},{row['us']:.2f},{worst:.2f}")
        print("\n".join(lines))
        if args.csv:
            with open(args.csv, "a") as f:
                for line in lines:
                    f.write(f"{args.ranks},{line}\n")
    print(f"{args.ranks} ranks: " + ("ok" if status == 0 and len(results) == args.ranks else "FAILED"))
    return status if len(results) == args.ranks else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--latency", action="store_true")
    ap.add_argument("--csv")
    ap.add_argument("--deadline", type=int, default=240)
    ap.add_argument("--id")
    ap.add_argument("--child", type=int)
    args = ap.parse_args()
    sys.exit(child(args) if args.child is not None else parent(args))


if __name__ == "__main__":
    main()
