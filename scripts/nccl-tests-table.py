#!/usr/bin/env python3
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
"""nccl-tests logs (scripts/gpu-nccl.sh: NAME-nN-MODE.txt) as one CSV and a Markdown summary.

  python3 scripts/nccl-tests-table.py LOGDIR OUTDIR

OUTDIR/nccl-tests.csv: per log, its rows at the sizes below (test, ranks, mode, bytes, count, type,
op, root, then time in us, algbw and busbw in GB/s and #wrong, out of place and in place); the
logs themselves, every row, stay outside the repository.
OUTDIR/nccl-tests.md: per log, the rows at 8 B, 64 KiB, 1 MiB, 64 MiB and 256 MiB, the sum of
#wrong over every row, and the "Out of bounds values" line.
"""
import csv
import os
import re
import sys

SHOWN = [8, 65536, 1 << 20, 64 << 20, 256 << 20]


def rows_of(path):
    rows = []
    with open(path, errors="replace") as f:
        for line in f:
            p = line.split()
            if len(p) >= 13 and p[0].isdigit() and p[1].isdigit():
                rows.append(p[:13])
    return rows


def main():
    logdir, outdir = sys.argv[1], sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    out = []
    md = ["| test | ranks | mode | rows | #wrong (all rows) | out of bounds | " +
          " | ".join(f"{b} B: µs / busbw GB/s" for b in SHOWN) + " |",
          "|---|---|---|---|---|---|" + "---|" * len(SHOWN)]
    for name in sorted(os.listdir(logdir)):
        m = re.fullmatch(r"(\w+)-n(\d+)-(eager|graph)\.txt", name)
        if not m:
            continue
        test, ranks, mode = m.group(1), int(m.group(2)), m.group(3)
        path = os.path.join(logdir, name)
        rows = rows_of(path)
        wrong = 0
        by_size = {}
        for p in rows:
            size = int(p[0])
            w = sum(int(x) for x in (p[8], p[12]) if x.isdigit())
            wrong += w
            by_size[size] = p
            if size in SHOWN:
                out.append([test, ranks, mode] + p)
        bounds = ""
        with open(path, errors="replace") as f:
            for line in f:
                if "Out of bounds" in line:
                    bounds = line.split(":", 1)[1].strip()
        cells = []
        for b in SHOWN:
            p = by_size.get(b)
            cells.append(f"{p[5]} / {p[7]}" if p else "")
        md.append(f"| {test} | {ranks} | {mode} | {len(rows)} | {wrong} | {bounds} | " + " | ".join(cells) + " |")
    with open(os.path.join(outdir, "nccl-tests.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["test", "ranks", "mode", "bytes", "count", "type", "op", "root", "oop_us", "oop_algbw", "oop_busbw",
                    "oop_wrong", "ip_us", "ip_algbw", "ip_busbw", "ip_wrong"])
        w.writerows(out)
    with open(os.path.join(outdir, "nccl-tests.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
