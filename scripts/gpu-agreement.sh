#!/usr/bin/env bash
# The device agreement check (docs/device.md, "Ranks that make different calls") on a GPU host,
# with what it is given (no build, no network there):
#   bash scripts/gpu-agreement.sh NEW [OLD]
# NEW (and OLD, a bundle of the code before the check with src/tests/cuda_agreement_test.cc
# added) come from `PACK_SH=none bash scripts/gpu-bundle.sh DIR`. Runs the DeviceAgreement suite
# with NEW (and with OLD, where it must fail: that is the test failing before the fix; OLD_FILTER
# picks its cases), then
# colibri_device_bench for allReduce and broadcast from 8 B to 4 MiB with 2 ranks, NEW and OLD
# alternating (ROUNDS times, default 2): threads in graph mode and eager, and 2 rank processes
# under the MPS daemon in graph mode (LL, then the staged kernel across processes), and the same
# with COLIBRI_DEVICE_P2P=off (LL in host memory, then the copies). Logs go to NEW/agreement-logs
# and into $OUT/agreement-logs.tgz when $OUT is set (the device tool).
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -uo pipefail
new=$(cd "${1:?usage: gpu-agreement.sh NEW [OLD]}" && pwd)
old=${2:+$(cd "$2" && pwd)}
out=$new/agreement-logs
rm -rf "$out" && mkdir -p "$out"
trap 'echo quit | nvidia-cuda-mps-control >/dev/null 2>&1; [[ -n ${OUT:-} ]] && tar czf "$OUT/agreement-logs.tgz" -C "$out" .' EXIT
rounds=${ROUNDS:-2}
status=0
export CUDA_DEVICE_MAX_CONNECTIONS=32
suite() {  # suite NAME DIR FILTER
  COLIBRI_KERNEL_DIR=$2 timeout 400 "$2/colibri_tests" --gtest_filter="$3" >"$out/suite-$1.log" 2>&1
  local rc=$?
  echo "suite $1: rc $rc; $(grep -E '^\[  (PASSED|FAILED) +\] [0-9]+ tests' "$out/suite-$1.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \] Paths' "$out/suite-$1.log" | sed 's/^/  /'
  return $rc
}
suite new "$new" 'Paths/DeviceAgreement.*' || status=1
# Before: the cases where ranks silently moved data their arguments did not define, and one that
# ended at the timeout (every count case does; each takes the whole 30 s).
[[ -n $old ]] && suite old "$old" "${OLD_FILTER:-Paths/DeviceAgreement.*auto_*:Paths/DeviceAgreement.*staged_op*:Paths/DeviceAgreement.*viahost_op*}"
bench() {  # bench NAME DIR ARGS...
  local name=$1 dir=$2
  shift 2
  COLIBRI_KERNEL_DIR=$dir timeout 120 "$dir/colibri_device_bench" --ranks 2 --min 8 --max 4194304 "$@" \
    >"$out/$name.txt" 2>&1 || status=1
}
for ((i = 1; i <= rounds; i++)); do
  for v in new ${old:+old}; do
    dir=$new; [[ $v == old ]] && dir=$old
    bench "r$i-$v-threads-graph-allreduce" "$dir" --graph --coll allreduce
    bench "r$i-$v-threads-graph-broadcast" "$dir" --graph --coll broadcast
    bench "r$i-$v-threads-eager-allreduce" "$dir" --coll allreduce
  done
done
export CUDA_DEVICE_MAX_CONNECTIONS=8 CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d
for ((i = 1; i <= rounds; i++)); do
  for v in new ${old:+old}; do
    dir=$new; [[ $v == old ]] && dir=$old
    bench "r$i-$v-procs-graph-allreduce" "$dir" --processes --graph --coll allreduce
    COLIBRI_DEVICE_P2P=off bench "r$i-$v-procs-viahost-graph-allreduce" "$dir" --processes --graph --coll allreduce
  done
done
for f in "$out"/r1-*.txt; do
  echo "== $(basename "$f")"
  grep -E '^ +(8|1024|65536|1048576|4194304) ' "$f" | head -5
done
exit $status
