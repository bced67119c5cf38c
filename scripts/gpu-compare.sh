#!/usr/bin/env bash
# Colibri against NCCL on the GPUs of this host, same benchmark, same buffers, same timing:
#   bash scripts/gpu-compare.sh DIR [MAX_BYTES]
# DIR as for scripts/gpu-check.sh (colibri_device_bench and the kernel images; NCCL is the
# host's libnccl.so.2, loaded at run time). One rank per GPU for both; float32 and bfloat16,
# eager and CUDA graph mode, 8 B .. MAX_BYTES (default 256 MiB); then in-place allReduce, Colibri's
# device paths side by side (COLIBRI_DEVICE_PATH), and several ranks on GPU 0 alone.
# Tables go to $OUT (the device tool) or DIR, one file per run, plus a summary on stdout.
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -uo pipefail
dir=${1:?usage: gpu-compare.sh DIR [MAX_BYTES]}
max=${2:-268435456}
out=${OUT:-$dir}/compare
mkdir -p "$out"
export COLIBRI_KERNEL_DIR=$(cd "$dir" && pwd)
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
bench=$dir/colibri_device_bench
ng=$(nvidia-smi -L | wc -l)
status=0
run() {  # run NAME ARGS...: one table, its key rows echoed
  local name=$1; shift
  local rc=0
  timeout 300 "$@" >"$out/$name.txt" 2>&1 || rc=$?
  if ((rc)); then status=1; echo "!! $name failed (rc $rc)"; tail -3 "$out/$name.txt"; fi
  echo "== $name"; grep -E '^# (colibri_device_bench|.*footprint|Colibri.s own)|^# [a-zA-Z]+$|^ +(8|8192|65536|262144|1048576|67108864|268435456) ' "$out/$name.txt"
}
# COMPARE_SET=short: float32 eager and graph, bfloat16 and in-place allReduce in graph mode only.
short=${COMPARE_SET:-full}
for dtype in float32 bfloat16; do
  for mode in "" --graph; do
    [[ $short == short && $dtype == bfloat16 && -z $mode ]] && continue
    tag=$dtype${mode:+-graph}
    run "colibri-n$ng-$tag" "$bench" --ranks "$ng" --max "$max" --dtype "$dtype" $mode
    run "nccl-n$ng-$tag" "$bench" --nccl --ranks "$ng" --max "$max" --dtype "$dtype" $mode
  done
done
for mode in "" --graph; do
  [[ $short == short && -z $mode ]] && continue
  run "colibri-n$ng-inplace${mode:+-graph}" "$bench" --ranks "$ng" --max "$max" --inplace --coll allreduce $mode
  run "nccl-n$ng-inplace${mode:+-graph}" "$bench" --nccl --ranks "$ng" --max "$max" --inplace --coll allreduce $mode
done
[[ $short == short ]] && exit $status
for path in ll staged direct; do
  COLIBRI_DEVICE_PATH=$path run "colibri-n$ng-path-$path-graph" "$bench" --ranks "$ng" --max 16777216 --graph
done
# Several ranks on one GPU in one process (NCCL refuses this), eager and graph mode.
for mode in "" --graph; do
  CUDA_VISIBLE_DEVICES=0 run "colibri-gpu0-n4${mode:+-graph}" "$bench" --ranks 4 --max 67108864 $mode
done
exit $status
