#!/usr/bin/env bash
# The device-robustness run (issue #12), on a GPU host with what it is given (no build there):
#   bash scripts/gpu-robust.sh DIR [BASE]
# DIR is a bundle of scripts/gpu-bundle.sh (colibri_tests, colibri_device_bench, kernel images).
# BASE (optional) holds the same three built from the commit before the launch meeting: its
# allocator test must fail (the defect), and its latency is the "before" of the table.
# Steps: start the MPS daemon (rank processes then run concurrently), small-message latency
# before and after (threads 2 and 4, graph and eager; 2 rank processes in graph mode, alternated
# three times), the robustness suite
# (application allocator and synchronizations, 2/4/8 rank threads at the default 8 hardware
# queues, 2/4 rank processes, 8 threads x 20 repetitions, late ranks, a rank that never calls,
# in eager mode and in a replayed graph, warnings before the timeout), then the allocator test of
# BASE. Logs go to $OUT when set (the device tool), else to DIR.
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -uo pipefail
dir=${1:?usage: gpu-robust.sh DIR [BASE]}
base=${2:-}
out=${OUT:-$dir}
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv | tee "$out/gpu.txt"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d && echo "MPS daemon started"
trap 'echo quit | nvidia-cuda-mps-control' EXIT
status=0
suite() {  # NAME KERNEL_DIR BINARY FILTER [timeout]
  local t0=$SECONDS
  COLIBRI_KERNEL_DIR=$(cd "$2" && pwd) timeout "${5:-900}" "$3/colibri_tests" --gtest_filter="$4" >"$out/$1.log" 2>&1
  local rc=$?
  echo "== $1: rc $rc in $((SECONDS - t0)) s"
  grep -E '^\[  (PASSED|FAILED|SKIPPED) +\]|^\[       OK \]|^\[  FAILED  \]|async query|Failure|differs|timed out' "$out/$1.log" | head -40
  return $rc
}
bench() {  # LABEL DIR MEET ARGS...
  local label=$1 d=$2 meet=$3
  shift 3
  echo "## $label $*" >>"$out/latency.txt"
  COLIBRI_DEVICE_MEET=$meet COLIBRI_KERNEL_DIR=$(cd "$d" && pwd) CUDA_DEVICE_MAX_CONNECTIONS=32 timeout 120 \
    "$d/colibri_device_bench" --coll allreduce --min 8 --max 65536 "$@" 2>&1 | grep -E '^ +[0-9]|^# colibri' >>"$out/latency.txt"
}
for round in 1 2 3; do
  for which in after before; do
    d=$dir; [[ $which == before ]] && d=$base
    [[ -z $d ]] && continue
    bench "$which" "$d" on --ranks 2 --graph
    bench "$which" "$d" on --ranks 4 --graph
    bench "$which" "$d" on --ranks 2 --processes --graph
    bench "$which" "$d" on --ranks 2
    bench "$which" "$d" on --ranks 4
    bench "$which" "$d" on --ranks 8
    # What the meeting itself costs in eager mode (the same kernels, no meeting).
    if [[ $which == after ]]; then
      for n in 2 4 8; do bench after-meet-off "$d" off --ranks $n; done
    fi
  done
done
suite robust "$dir" "$dir" '*DeviceAllocator*:DeviceRobustness*' "${ROBUST_TIMEOUT:-380}" || status=1
if [[ -n $base ]]; then  # the defect, before the fix: expected to fail (or hang until the timeout)
  suite before-allocator "$base" "$base" 'OneGpu/DeviceAllocatorThreads.EveryElementRightAndNoHang/0' 90 \
    && echo "!! the allocator test passed on the commit before the fix"
fi
echo "== latency (8 B and 64 KiB rows)"; grep -E '^##|^ +(8|65536) ' "$out/latency.txt"
exit $status
