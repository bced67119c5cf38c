#!/usr/bin/env python3
# Converts colibri_device_bench tables (text) into the CSV the chart command reads:
#   python3 scripts/device-bench-csv.py BENCH.txt > BENCH.csv
# Columns: collective,ranks,size_bytes,time_us,algbw_gbps,busbw_gbps (as scripts/bench-vs-mpi.sh).
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
import re
import sys

if len(sys.argv) != 2:
    sys.exit("usage: device-bench-csv.py BENCH.txt")
ranks, coll = None, None
print("collective,ranks,size_bytes,time_us,algbw_gbps,busbw_gbps")
with open(sys.argv[1]) as f:
    for line in f:
        m = re.match(r"# colibri_device_bench: .*?(\d+) ranks as (?:threads|processes)", line)
        if m:
            ranks = int(m.group(1))
            continue
        m = re.match(r"# (allReduce|allGather|reduceScatter|broadcast|sendRecv|allToAll|allToAllv)$", line.strip())
        if m:
            coll = m.group(1)
            continue
        cols = line.split()
        if coll and ranks and len(cols) == 5 and cols[0].isdigit():
            size, _count, t, alg, bus = cols
            print(f"{coll},{ranks},{size},{t},{alg},{bus}")
if ranks is None:
    sys.exit(f"{sys.argv[1]}: no colibri_device_bench header line: is this a colibri_device_bench table?")
