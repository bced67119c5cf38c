#!/usr/bin/env bash
# Host path against Open MPI, side by side in one run on this machine: the four collectives,
# float32 sum, 2 and 4 local processes, 1 KiB .. 64 MiB. Installs Debian's Open MPI if missing
# (a benchmark dependency, never a test one), builds the perf tool and a small MPI program with
# the same timing, and prints the ratios (Colibri / Open MPI) of busbw at >= 1 MiB and of time
# at <= 8 KiB. CSVs go to results/host/ (override with OUT_DIR).
#   bash scripts/bench-vs-mpi.sh [--ranks "2 4"] [--min 1K] [--max 64M]
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$COLIBRI_ROOT"
ranks="2 4"; min=1024; max=$((64 << 20))
while [[ $# -gt 0 ]]; do
  case $1 in
    --ranks) ranks=$2; shift 2 ;;
    --min) min=$2; shift 2 ;;
    --max) max=$2; shift 2 ;;
    *) echo "usage: $0 [--ranks \"2 4\"] [--min BYTES] [--max BYTES]" >&2; exit 2 ;;
  esac
done
ensure_build_tools
ensure_tools mpicc:libopenmpi-dev mpirun:openmpi-bin
out=${OUT_DIR:-results/host}
mkdir -p "$out" build
[[ -f colibri-bench/target/colibri-bench.jar ]] || mvn -B -ntp -q install -DskipTests
mpicc -O2 -o build/mpi_coll_bench colibri-bench/src/main/c/mpi_coll_bench.c
stamp=$(date +%Y-%m-%d)
for n in $ranks; do
  log "ranks $n: Open MPI"
  mpirun --allow-run-as-root --oversubscribe -np "$n" build/mpi_coll_bench "$min" "$max" 20 5 >"$out/$stamp-mpi-n$n.csv"
  log "ranks $n: Colibri"
  java -jar colibri-bench/target/colibri-bench.jar --ranks "$n" -b "$min" -e "$max" -n 20 -w 5 --no-check \
    --csv "$out/$stamp-colibri-n$n.csv" >/dev/null
  echo "# ranks $n: Colibri / Open MPI  (busbw ratio: higher is better for Colibri; time ratio: lower is better)"
  printf '# %-14s %10s %12s %12s %10s\n' collective size colibri_us mpi_us ratio
  awk -F, 'NR==FNR { if (FNR > 1) { t[$1","$3] = $4; b[$1","$3] = $6 } next }
           FNR > 1 && ($1","$3) in t {
             size = $3; ct = $8; cb = $10; mt = t[$1","$3]; mb = b[$1","$3];
             if (size <= 8192) printf "  %-14s %10d %12.2f %12.2f %9.2fx time\n", $1, size, ct, mt, ct / mt;
             else if (size >= 1048576) printf "  %-14s %10d %12.2f %12.2f %9.2fx busbw\n", $1, size, ct, mt, (mt > 0 ? cb / mb : 0);
           }' "$out/$stamp-mpi-n$n.csv" "$out/$stamp-colibri-n$n.csv"
done
