#!/usr/bin/env bash
# Footprint and init, Colibri against NCCL, one process per measurement (so the first init is cold):
#   bash scripts/gpu-footprint.sh DIR
# DIR as for scripts/gpu-check.sh. NCCL: one rank (NCCL cannot put two ranks on one GPU).
# Colibri: 1, 2, 4 and 8 ranks on GPU 0. Device memory on GPU 0 (cuMemGetInfo) after init,
# after the first call of each collective, after 64 MiB calls, after trim; Colibri's own count;
# host RSS; init cold and warm. Output to stdout and $OUT/footprint.txt (or DIR).
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -uo pipefail
dir=${1:?usage: gpu-footprint.sh DIR}
out=${OUT:-$dir}
export COLIBRI_KERNEL_DIR=$(cd "$dir" && pwd)
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
status=0
log=$out/footprint.txt
: >"$log"
run() { timeout 120 "$dir/colibri_device_bench" --footprint "$@" >>"$log" 2>&1 || { status=1; echo "!! $* failed" >>"$log"; }; }
run --nccl --ranks 1
for n in 1 2 4 8; do run --ranks "$n"; done
cat "$log"
exit $status
