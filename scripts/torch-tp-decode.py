#!/usr/bin/env python3
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
"""A tensor-parallel Llama-shaped decoder under torch.distributed, as an inference server runs one.

Starts --tp rank processes (all on cuda:0 when there is one GPU; rank r on GPU r % count with
--spread), each a torch.distributed rank over the libnccl.so.2 the process loads: NVIDIA's
(PyTorch's own) or Colibri's when started with LD_PRELOAD=<colibri's libnccl.so.2>. Several rank
processes on one GPU run concurrently only under the MPS daemon (NVIDIA's NCCL refuses two ranks
on one GPU: use it with --tp 1).

  python3 scripts/torch-tp-decode.py --tp 4 [--layers 8] [--dtype bfloat16] [--graph] [--check]

The model: Llama-shaped layers (RMSNorm, rotary embedding, grouped-query attention over a static
KV cache, SiLU-gated MLP) with weights drawn from fixed seeds in blocks of 1/8 of each matrix, so
that every TP size (1, 2, 4, 8) holds the same model: Q/K/V and gate/up are split by columns
(heads), O and down by rows, each followed by an all-reduce of the hidden state; the vocabulary
head is split by columns and its logits all-gathered. Greedy decoding of --new tokens after a
prompt of --prompt tokens (fed one per step, as decode steps). With --graph, the decode step is
captured once in a CUDA graph (collectives included) and replayed.

Each rank prints a line "result {...}" (tokens, the time per decode step, memory); the launcher
prints one summary line "summary {...}" and exits 0 when every rank finished and agreed. --check
runs TP=1 first and then TP=N, both in float32, and requires the same tokens and logits within
--tolerance. A rank that does not finish within --deadline seconds is a hang: the launcher kills
every rank and exits 3.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

BLOCKS = 8  # weights are drawn in blocks of 1/BLOCKS of a matrix: TP sizes dividing 8 hold the same model


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tp", type=int, default=2)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--intermediate", type=int, default=14336)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--context", type=int, default=256, help="KV cache length per sequence")
    p.add_argument("--prompt", type=int, default=16)
    p.add_argument("--new", type=int, default=32, help="tokens generated after the prompt")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="bfloat16")
    p.add_argument("--graph", action="store_true", help="replay the decode step as a captured CUDA graph")
    p.add_argument("--check", action="store_true", help="TP=1 then TP=N in float32: same tokens, logits close")
    p.add_argument("--tolerance", type=float, default=1e-4, help="--check: largest logit difference allowed")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--backend", default=None, help="torch.distributed backend (default nccl on cuda, gloo on cpu)")
    p.add_argument("--spread", action="store_true", help="rank r on GPU r % count (default: every rank on GPU 0)")
    p.add_argument("--deadline", type=float, default=600, help="seconds before the launcher calls it a hang")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--rank-process", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--dump", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.tp < 1 or BLOCKS % a.tp:
        p.error(f"--tp {a.tp}: use 1, 2, 4 or 8 (weights come in {BLOCKS} blocks)")
    for name, v in (("hidden", a.hidden), ("heads", a.heads), ("kv-heads", a.kv_heads),
                    ("intermediate", a.intermediate), ("vocab", a.vocab)):
        if v % BLOCKS:
            p.error(f"--{name} {v}: must be a multiple of {BLOCKS}")
    if a.hidden % a.heads or a.heads % a.kv_heads:
        p.error("--hidden must be a multiple of --heads, and --heads of --kv-heads")
    if a.prompt < 1 or a.new < 1 or a.prompt + a.new > a.context:
        p.error("need 1 <= --prompt, 1 <= --new and --prompt + --new <= --context")
    if a.device == "cpu" and a.graph:
        p.error("--graph needs --device cuda")
    return a


# ---------------------------------------------------------------- the launcher


def launch(a, tp, dtype, dump=None, ref=None):
    """Runs one world of `tp` rank processes; returns (exit code, the ranks' results). `dump`: where
    rank 0 keeps its logits; `ref`: logits every rank compares its own with."""
    port = free_port()
    out = tempfile.mkdtemp(prefix="tp-decode-")
    procs = []
    argv = [x for x in sys.argv[1:] if x != "--check"]
    for r in range(tp):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(tp), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   TP_DECODE_OUT=os.path.join(out, f"rank{r}.json"))
        if ref:
            env["TP_DECODE_REF"] = ref
        cmd = [sys.executable, os.path.abspath(__file__), "--rank-process"] + argv + ["--tp", str(tp), "--dtype", dtype]
        if dump:
            cmd += ["--dump", dump]
        procs.append(subprocess.Popen(cmd, env=env))
    deadline = time.time() + a.deadline
    codes = [None] * tp
    while any(c is None for c in codes):
        for r, pr in enumerate(procs):
            if codes[r] is None:
                codes[r] = pr.poll()
        if any(c not in (None, 0) for c in codes):
            break  # one rank failed: the others would wait for it
        if time.time() > deadline:
            stuck = [r for r, c in enumerate(codes) if c is None]
            print(f"HANG: ranks {stuck} of {tp} did not finish within {a.deadline:.0f} s", flush=True)
            for pr in procs:
                pr.kill()
            return 3, []
        time.sleep(0.05)
    if any(c != 0 for c in codes):
        time.sleep(2)  # let the others report their side
        for pr in procs:
            if pr.poll() is None:
                pr.kill()
        print(f"FAIL: rank exit codes {[pr.poll() for pr in procs]}", flush=True)
        return 1, []
    results = []
    for r in range(tp):
        with open(os.path.join(out, f"rank{r}.json")) as f:
            results.append(json.load(f))
    return 0, results


def main():
    a = parse()
    if a.rank_process:
        return rank_main(a)
    runs = [(1, "float32"), (a.tp, "float32")] if a.check else [(a.tp, a.dtype)]
    dump = tempfile.mktemp(prefix="tp-decode-ref-", suffix=".pt") if a.check else None
    summary = {}
    for i, (tp, dtype) in enumerate(runs):
        code, results = launch(a, tp, dtype, dump if a.check and i == 0 else None, dump if a.check and i == 1 else None)
        if code:
            return code
        tokens = results[0]["tokens"]
        if any(r["tokens"] != tokens for r in results):
            print("FAIL: the ranks generated different tokens", flush=True)
            return 1
        summary[f"tp{tp}"] = {k: results[0][k] for k in ("step_ms", "tokens_per_s", "first_step_ms", "init_ms")}
        summary[f"tp{tp}"]["memory"] = [r["memory"] for r in results]
        summary[f"tp{tp}"]["tokens"] = tokens
    if a.check:
        os.unlink(dump)
        same = summary[f"tp{a.tp}"]["tokens"] == summary["tp1"]["tokens"]
        diff = max(r["max_logit_diff"] for r in results)
        summary["check"] = {"tokens_equal": same, "max_logit_diff": diff, "tolerance": a.tolerance}
        print("summary " + json.dumps(summary), flush=True)
        print(figures(summary), flush=True)
        if not same or diff > a.tolerance:
            print(f"FAIL: TP={a.tp} against TP=1: tokens equal {same}, largest logit difference {diff:.3g}", flush=True)
            return 1
        print(f"ok: TP={a.tp} equals TP=1 (tokens identical, logits within {diff:.3g})", flush=True)
        return 0
    print("summary " + json.dumps(summary), flush=True)
    print(figures(summary), flush=True)
    return 0


def figures(summary):
    """One line for a reader: time per decode step, tokens/s, init, per TP size run."""
    parts = []
    for k, v in summary.items():
        if k.startswith("tp"):
            parts.append(f"{k}: {v['step_ms']:.2f} ms/step, {v['tokens_per_s']:.0f} tok/s, init {v['init_ms']:.0f} ms, "
                         f"first step {v['first_step_ms']:.0f} ms")
    return "figures " + "; ".join(parts)


# ---------------------------------------------------------------- one rank


def rank_main(a):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    rank, tp = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dtype = torch.float32 if a.dtype == "float32" else torch.bfloat16
    if a.device == "cuda":
        gpus = torch.cuda.device_count()
        dev = torch.device("cuda", rank % gpus if a.spread else 0)
        torch.cuda.set_device(dev)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    else:
        dev = torch.device("cpu")
    backend = a.backend or ("nccl" if a.device == "cuda" else "gloo")

    def used():
        if a.device != "cuda":
            return 0
        free, total = torch.cuda.mem_get_info()
        return total - free

    memory = {"before_init": used()}
    t0 = time.time()
    kw = {"device_id": dev} if a.device == "cuda" else {}
    from datetime import timedelta
    dist.init_process_group(backend, rank=rank, world_size=tp, timeout=timedelta(seconds=a.deadline), **kw)
    init_ms = (time.time() - t0) * 1000
    memory["after_init"] = used()
    H, NH, KV, I, V, L = a.hidden, a.heads, a.kv_heads, a.intermediate, a.vocab, a.layers
    D = H // NH
    B, C = a.batch, a.context

    # Weights: block b of matrix `name` in layer l is drawn from its own seed, the same for every TP.
    def blocks(l, name, rows, cols, by_cols, scale):
        """This rank's shard: by_cols splits the output (columns), else the input (rows)."""
        per = BLOCKS // tp
        parts = []
        for b in range(rank * per, (rank + 1) * per):
            g = torch.Generator(device="cpu").manual_seed(a.seed * 1000003 + l * 1009 + hash_name(name) * 31 + b)
            shape = (rows, cols // BLOCKS) if by_cols else (rows // BLOCKS, cols)
            parts.append(torch.randn(shape, generator=g, dtype=torch.float32) * scale)
        w = torch.cat(parts, dim=1 if by_cols else 0)
        return w.to(device=dev, dtype=dtype)

    def full(l, name, rows, cols, scale):
        g = torch.Generator(device="cpu").manual_seed(a.seed * 1000003 + l * 1009 + hash_name(name) * 31 + 999)
        return (torch.randn((rows, cols), generator=g, dtype=torch.float32) * scale).to(device=dev, dtype=dtype)

    s = H ** -0.5
    layers = []
    for l in range(L):
        layers.append({
            # Column-parallel: this rank's heads (blocks of NH/8 query heads, KV/8 KV heads).
            "q": blocks(l, "q", H, NH * D, True, s), "k": blocks(l, "k", H, KV * D, True, s),
            "v": blocks(l, "v", H, KV * D, True, s),
            "o": blocks(l, "o", NH * D, H, False, (NH * D) ** -0.5),  # row-parallel
            "gate": blocks(l, "gate", H, I, True, s), "up": blocks(l, "up", H, I, True, s),
            "down": blocks(l, "down", I, H, False, I ** -0.5),  # row-parallel
            "n1": torch.ones(H, device=dev, dtype=dtype), "n2": torch.ones(H, device=dev, dtype=dtype),
        })
    embed = full(L, "embed", V, H, 1.0)
    head = blocks(L, "head", H, V, True, s)  # vocabulary-parallel
    norm = torch.ones(H, device=dev, dtype=dtype)
    nh, nkv = NH // tp, KV // tp
    kcache = [torch.zeros(B, nkv, C, D, device=dev, dtype=dtype) for _ in range(L)]
    vcache = [torch.zeros(B, nkv, C, D, device=dev, dtype=dtype) for _ in range(L)]
    inv = 1.0 / (10000 ** (torch.arange(0, D, 2, device=dev, dtype=torch.float32) / D))
    ang = torch.arange(C, device=dev, dtype=torch.float32)[:, None] * inv[None, :]
    cos_t, sin_t = ang.cos().to(dtype), ang.sin().to(dtype)
    memory["model"] = used()

    # Static inputs of the step (a graph replays over them): the tokens and the position.
    tok = torch.zeros(B, dtype=torch.long, device=dev)
    pos = torch.zeros(1, dtype=torch.long, device=dev)
    idx = torch.arange(C, device=dev)
    gathered = [torch.empty(B, V // tp, device=dev, dtype=dtype) for _ in range(tp)]

    def rms(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(dtype) * w

    def rope(x):  # x: (B, heads, 1, D)
        c, sn = cos_t[pos].view(1, 1, 1, -1), sin_t[pos].view(1, 1, 1, -1)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * c - x2 * sn, x1 * sn + x2 * c), dim=-1).flatten(-2)

    def step():
        x = embed[tok]  # (B, H)
        mask = (idx <= pos).view(1, 1, 1, C)
        for l, w in enumerate(layers):
            h = rms(x, w["n1"])
            q = rope((h @ w["q"]).view(B, nh, 1, D))
            k = rope((h @ w["k"]).view(B, nkv, 1, D))
            v = (h @ w["v"]).view(B, nkv, 1, D)
            kcache[l].index_copy_(2, pos, k)
            vcache[l].index_copy_(2, pos, v)
            kk = kcache[l].repeat_interleave(nh // nkv, dim=1)
            vv = vcache[l].repeat_interleave(nh // nkv, dim=1)
            att = F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask)
            o = att.reshape(B, nh * D) @ w["o"]
            dist.all_reduce(o)
            x = x + o
            h = rms(x, w["n2"])
            m = F.silu(h @ w["gate"]) * (h @ w["up"])
            dn = m @ w["down"]
            dist.all_reduce(dn)
            x = x + dn
        part = (rms(x, norm) @ head).contiguous()
        dist.all_gather(gathered, part)
        return torch.cat(gathered, dim=1)

    prompt = torch.Generator(device="cpu").manual_seed(a.seed)
    prompt_tokens = torch.randint(0, V, (a.prompt, B), generator=prompt).to(dev)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)

    # Prompt, one token per step (eager; the first step sets every collective up).
    t0 = time.time()
    for p in range(a.prompt):
        tok.copy_(prompt_tokens[p])
        pos.fill_(p)
        logits = step()
        if p == 0:
            sync()
            first_step_ms = (time.time() - t0) * 1000
            memory["after_first_step"] = used()
    sync()
    graph = None
    if a.graph:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm up on a side stream, as capture wants
            step()
        torch.cuda.current_stream().wait_stream(side)
        # The warm-up wrote position a.prompt - 1 again with the same token: harmless.
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_logits = step()
        sync()
    tokens, times, ref_logits = [], [], []
    nxt = logits.float().argmax(dim=-1)
    for n in range(a.new):
        tok.copy_(nxt)
        pos.fill_(a.prompt + n)
        sync()
        t = time.time()
        if graph is not None:
            graph.replay()
            logits = static_logits
        else:
            logits = step()
        sync()
        times.append((time.time() - t) * 1000)
        nxt = logits.float().argmax(dim=-1)
        tokens.append(nxt.tolist())
        ref_logits.append(logits.float().cpu())
    memory["peak_after_decode"] = used()
    # --check: the TP=1 run keeps its logits (--dump), the TP=N run compares with them.
    max_diff = 0.0
    if a.dump and rank == 0:
        torch.save(ref_logits, a.dump)
    ref_path = os.environ.get("TP_DECODE_REF")
    if ref_path:
        ref = torch.load(ref_path)
        max_diff = max(float((x - y).abs().max()) for x, y in zip(ref_logits, ref))
    times.sort()
    step_ms = times[len(times) // 2]
    result = {"rank": rank, "tp": tp, "tokens": tokens, "step_ms": step_ms, "tokens_per_s": B / step_ms * 1000,
              "first_step_ms": first_step_ms, "init_ms": init_ms, "memory": memory, "max_logit_diff": max_diff,
              "graph": a.graph, "dtype": a.dtype}
    with open(os.environ["TP_DECODE_OUT"], "w") as f:
        json.dump(result, f)
    print("result " + json.dumps({k: v for k, v in result.items() if k != "tokens"}), flush=True)
    dist.destroy_process_group()
    return 0


def hash_name(name):
    return sum((i + 1) * ord(c) for i, c in enumerate(name))


if __name__ == "__main__":
    sys.exit(main())
