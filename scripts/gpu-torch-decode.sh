#!/usr/bin/env bash
# The tensor-parallel decoder of scripts/torch-tp-decode.py under PyTorch, unmodified, over
# Colibri's libnccl.so.2 (LD_PRELOAD), rank processes sharing GPU 0 under the MPS daemon at its
# default settings, on a GPU host with a bundle made here by `PACK_SH=none bash scripts/gpu-bundle.sh DIR`:
#   bash scripts/gpu-torch-decode.sh DIR
# 1. TP=1 with PyTorch's own NCCL and with Colibri's (no MPS): time per token and memory.
# 2. Before (BEFORE=1): TP=4 with COLIBRI_DEVICE_GATE=off, eager, once (a hang is reported after
#    DEADLINE seconds, default 120).
# 3. TP=2, 4 and 8 (TPS, default "2 4 8"), eager and with --graph: RUNS runs each (default 3; RUNS4,
#    default 20, for TP=4 eager), each a hang or not; then --check (TP=N tokens equal to TP=1 in
#    float32) at TP=4. TP1=0 skips step 1, CHECK=0 the check (a run split over several calls).
# Model size: LAYERS (default 4) Llama-8B-shaped layers, batch 16, bfloat16.
# Logs go to DIR/torch-decode-logs and into $OUT/torch-decode-logs.tgz when $OUT is set.
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -uo pipefail
dir=$(cd "${1:?usage: gpu-torch-decode.sh DIR}" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lib=$dir/nccl/lib
out=$dir/torch-decode-logs
rm -rf "$out" && mkdir -p "$out"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log NCCL_NVLS_ENABLE=0
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
mps_on() { nvidia-cuda-mps-control -d; }
mps_off() { echo quit | nvidia-cuda-mps-control >/dev/null 2>&1; sleep 1; }
trap 'mps_off; [[ -n ${OUT:-} ]] && tar -C "$dir" -czf "$OUT/torch-decode-logs.tgz" torch-decode-logs' EXIT
decode="python3 $here/torch-tp-decode.py --layers ${LAYERS:-4} --deadline ${DEADLINE:-120}"
status=0
run() {  # run NAME ARGS...: one launch; prints its outcome
  local name=$1
  shift
  "$@" >"$out/$name.log" 2>&1
  local rc=$?
  local what=ok
  ((rc == 3)) && what=HANG
  ((rc != 0 && rc != 3)) && what="FAIL ($rc)"
  echo "$name: $what; $(grep -m1 '^figures' "$out/$name.log")"
  return $rc
}
if [[ ${TP1:-1} != 0 ]]; then
  run tp1-nvidia $decode --tp 1 || status=1
  run tp1-colibri env LD_PRELOAD="$lib/libnccl.so.2" $decode --tp 1 || status=1
fi
mps_on
if [[ ${BEFORE:-1} != 0 ]]; then
  run before-tp4-gate-off env COLIBRI_DEVICE_GATE=off LD_PRELOAD="$lib/libnccl.so.2" $decode --tp 4
  mps_off
  mps_on
fi
for tp in ${TPS:-2 4 8}; do
  for mode in eager graph; do
    runs=${RUNS:-3}
    [[ $tp == 4 && $mode == eager ]] && runs=${RUNS4:-20}
    hangs=0 fails=0
    for ((i = 1; i <= runs; i++)); do
      run "tp$tp-$mode-$i" env LD_PRELOAD="$lib/libnccl.so.2" $decode --tp $tp $([[ $mode == graph ]] && echo --graph) \
        >>"$out/outcomes.txt"
      rc=$?
      ((rc == 3)) && hangs=$((hangs + 1))
      ((rc != 0 && rc != 3)) && fails=$((fails + 1))
      if ((rc != 0)); then mps_off; mps_on; fi  # MPS may refuse clients after a fault
    done
    echo "TP=$tp $mode: $runs runs, $hangs hangs, $fails failures; $(grep -m1 "^tp$tp-$mode-1:" "$out/outcomes.txt")"
    ((hangs + fails)) && status=1
  done
done
if [[ ${CHECK:-1} != 0 ]]; then
  run check-tp4 env LD_PRELOAD="$lib/libnccl.so.2" $decode --tp 4 --check || status=1
  grep -h '^ok\|^FAIL' "$out/check-tp4.log"
fi
exit $status
