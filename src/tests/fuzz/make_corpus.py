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
