#!/usr/bin/env bash
# GPUs without peer access (issue 18), forced on one GPU with COLIBRI_DEVICE_P2P=off, run on a GPU
# host with what it is given (no build, no network there):
#   bash scripts/gpu-copies.sh DIR
# DIR comes from `PACK_SH=none bash scripts/gpu-bundle.sh DIR`. Runs the device suites with the
# path forced (the viahost placements: threads 1-8, processes 2-8, graphs of threads and of
# processes), then colibri_device_bench under the MPS daemon: the four collectives with 2 and with 4
# rank processes in graph mode from 8 B to 256 MiB, allReduce eager, with 3 processes and with 2
# threads; every table names the pinned copy rate measured in the same run (the ceiling). Logs
# go to DIR/copies-logs and into $OUT/gpu-copies-logs.tgz when $OUT is set. SIZES_MAX (bytes,
# default 256 MiB) bounds the tables. Exits non-zero if a suite or a table failed.
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -uo pipefail
dir=$(cd "${1:?usage: gpu-copies.sh DIR}" && pwd)
out=$dir/copies-logs
rm -rf "$out" && mkdir -p "$out"
trap 'echo quit | nvidia-cuda-mps-control >/dev/null 2>&1; [[ -n ${OUT:-} ]] && tar czf "$OUT/gpu-copies-logs.tgz" -C "$out" .' EXIT
export COLIBRI_KERNEL_DIR=$dir
max=${SIZES_MAX:-$((256 << 20))}
status=0
start=$(date +%s)
CUDA_DEVICE_MAX_CONNECTIONS=32 timeout 300 "$dir/colibri_tests" \
  --gtest_filter='OneGpu/*viahost*:OneGpu/DeviceProcessGraphs.*' >"$out/suite-viahost.log" 2>&1 || status=1
echo "[$(( $(date +%s) - start )) s] suite-viahost: $(grep -E '^\[  (PASSED|FAILED) +\] [0-9]+ tests' "$out/suite-viahost.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \] OneGpu' "$out/suite-viahost.log" | sed 's/^/  /'
# Under MPS every client keeps the driver's default of 8 hardware queues (gpu-p2p.sh says why).
export CUDA_DEVICE_MAX_CONNECTIONS=8 CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d
bench() {  # bench NAME ARGS...: a table into $out/NAME.txt, its key rows shown
  local name=$1
  shift
  COLIBRI_DEVICE_P2P=off timeout 120 "$dir/colibri_device_bench" --min 8 --max "$max" "$@" >"$out/$name.txt" 2>&1 || status=1
  echo "[$(( $(date +%s) - start )) s] == $name"
  grep -E "^# (pinned|Colibri)|^ +(8|65536|131072|262144|1048576|16777216|67108864|268435456) " "$out/$name.txt"
}
for c in allreduce allgather reducescatter broadcast; do bench "$c-n2-processes-graph" --ranks 2 --processes --coll $c --graph; done
bench allreduce-n2-processes --ranks 2 --processes --coll allreduce
bench allreduce-n3-processes-graph --ranks 3 --processes --coll allreduce --graph
bench allreduce-n4-processes-graph --ranks 4 --processes --coll allreduce --graph
for c in allgather reducescatter broadcast; do bench "$c-n4-processes-graph" --ranks 4 --processes --coll $c --graph; done
bench allreduce-n2-threads-graph --ranks 2 --coll allreduce --graph
exit $status
