#!/usr/bin/env python3
# Writes the seed corpus of colibri_abi_fuzz (abi_fuzz.cc) into corpus/: one small valid program per
# call of the C ABI and of the drop-in, a group, an end without a start, and the regression inputs
# named after what they once found. The bytes follow abi_fuzz.cc's Reader: rerun this script after
# changing how the target reads its input.
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
import os

KINDS = ["AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "Gather", "Scatter", "AllToAll",
         "AllToAllv", "Send", "Recv"]
EDGE_2_62_MINUS_16 = 1  # index of 2^62 - 16 in number()'s edges


def small(v):  # small(): a first byte < 224, then the value
    return [0, v]


def num(v):  # number(): case 1 (v < 48)
    assert v < 48
    return [1, v]


def edge(i):  # number(): case 5, edges[i]
    return [5, i]


def call(kind, type_=2, op=0, count=num(8), v=None, send=[1], recv=[2], nccl=False):
    b = [KINDS.index(kind), 0] + small(type_) + small(op) + small(0) + count
    if kind == "AllToAllv":
        b += v + [0]
    b += send + recv
    if nccl and kind == "Broadcast":
        b += [1]
    return b


def write(name, data):
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", name), "wb") as f:
        f.write(bytes(data))


for k in KINDS:
    extra = {"v": num(4) + num(2) + num(4) + num(1)} if k == "AllToAllv" else {}
    write("clb-" + k.lower(), [0] + call(k, **extra))
    if k != "AllToAllv":
        write("nccl-" + k.lower(), [3] + call(k, type_=7, nccl=True))
write("clb-allgather-in-place", [0] + call("AllGather", send=[1], recv=[3]))
write("clb-allreduce-overlap", [0] + call("AllReduce", send=[1], recv=[4, 8, 0]))
write("clb-group-send-recv", [5, 1] + call("Send") + call("Recv"))
write("nccl-group-send-recv", [6, 1] + call("Send", nccl=True) + call("Recv", nccl=True))
write("group-end-without-start", [7])
# clbAllToAllv with a send displacement of 2^62 - 16 int32 elements: (2^62 - 16) x 4 bytes is
# 2^64 - 64, so the block's address wraps to 64 bytes before the buffer (at the arena's start:
# on the guard page). Refused once p2p.cc checks an address plus its offset.
write("regression-alltoallv-send-displacement-wraps",
      [0] + call("AllToAllv", v=num(4) + edge(EDGE_2_62_MINUS_16) + num(4) + num(0), send=[1], recv=[5, 0, 128]))
write("regression-alltoallv-recv-displacement-wraps",
      [0] + call("AllToAllv", v=num(4) + num(0) + num(4) + edge(EDGE_2_62_MINUS_16), send=[5, 0, 128], recv=[1]))

# Two ranks (a first byte of 0xf0 or above; abi_fuzz.cc's drawPair and pairStep): calls on which the
# ranks agree, and calls where rank 1 differs in one argument.
TWO_KINDS = KINDS[:9] + ["Send"]  # Send: rank `root` sends, the other receives
NO_CHANGE = [1]


def change(what, *values):  # rank 1 differs: 0 count, 1 type, 2 op, 3 root, 4 call, 5 an all-to-all-v count
    return [0, what] + list(values)


def two(kind, nccl=False, type_=8, op=0, root=0, count=16, alltoallv=None, in_place=False, differ=NO_CHANGE,
        place=6):
    b = [int(nccl), TWO_KINDS.index(kind), type_, op, root] + ([0] if count == 0 else [1, count])
    if kind == "AllToAllv":
        b += alltoallv
    return b + [int(in_place)] + differ + [place, 0, 0, 0, 0]


# counts[0][0], [0][1], [1][0], [1][1] (a selector byte, then the count), the order, then per rank
# its first send and recv offsets and a gap after each block
V = [1, 5, 1, 3, 1, 4, 1, 6] + [2] + [0, 1, 2, 0, 1, 1] * 2
for k in TWO_KINDS:
    extra = {"alltoallv": V} if k == "AllToAllv" else {}
    write("two-clb-" + k.lower(), [0xf0] + two(k, root=1, **extra))
write("two-nccl-allreduce-bfloat16-avg", [0xf0] + two("AllReduce", nccl=True, type_=7, op=4))
write("two-nccl-broadcast-in-place", [0xf0] + two("Broadcast", nccl=True, in_place=True, root=1))
write("two-clb-allreduce-counts-differ", [0xf0] + two("AllReduce", differ=change(0, 1, 20)))
write("two-clb-allgather-types-differ", [0xf0] + two("AllGather", differ=change(1, 2)))
write("two-clb-reduce-roots-differ", [0xf0] + two("Reduce", differ=change(3, 2)))
write("two-clb-gather-root-out-of-range", [0xf0] + two("Gather", differ=change(3, 3)))
write("two-nccl-send-both-receive", [0xf0] + two("Send", nccl=True, root=1, differ=change(3, 1)))
write("two-clb-alltoallv-self-block-differs", [0xf0] + two("AllToAllv", alltoallv=V, differ=change(5, 1, 0, 9)))
