#!/usr/bin/env bash
# Ranks sharing one GPU (processes under the MPS daemon at its default settings, and threads of
# one process; docs/device.md, "Every rank sharing a GPU ... shares its SMs"), on a GPU host, with
# a bundle made here by `PACK_SH=none bash scripts/gpu-bundle.sh DIR`:
#   bash scripts/gpu-shared.sh DIR
# 1. Before: decode-shaped cases of DeviceSharedGpu (src/tests/cuda_shared_gpu_test.cc) with
#    COLIBRI_DEVICE_GATE=off (4 processes eager and graph, 4 threads eager), where the early
#    ranks' wide kernels may sit on every SM (BEFORE_FILTER picks them; BEFORE=0 skips this
#    part). A held-up rank fails its case at the 20 s timeout.
# 2. After: every case with the gate (the default), CLB_TEST_REPEAT passes of 4 steps each
#    (REPEAT, default 5: 20 steps per case), every element checked.
# 3. What the gate costs: colibri_device_bench in graph mode from 8 B to 4 MiB, 2 and 4 rank
#    processes (allReduce, allGather) and 4 rank threads (allReduce), gate on (auto) and off,
#    alternating ROUNDS times (default 2).
# 4. What a 1 ms device wait takes from a whole-SM kernel on another stream (--wait-cost), gate
#    off and on.
# PARTS (default "before after bench wait") picks the parts; BEFORE=0 drops part 1.
# The MPS daemon is restarted between the parts (after a timeout it may refuse new clients).
# Logs go to DIR/shared-logs and into $OUT/shared-logs.tgz when $OUT is set (the device tool).
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -uo pipefail
dir=$(cd "${1:?usage: gpu-shared.sh DIR}" && pwd)
out=$dir/shared-logs
rm -rf "$out" && mkdir -p "$out"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
mps_start() { nvidia-cuda-mps-control -d; }
mps_stop() { echo quit | nvidia-cuda-mps-control >/dev/null 2>&1; sleep 1; }
trap 'mps_stop; cp -r $CUDA_MPS_LOG_DIRECTORY "$out/mps-log" 2>/dev/null; [[ -n ${OUT:-} ]] && tar czf "$OUT/shared-logs.tgz" -C "$out" .' EXIT
export COLIBRI_KERNEL_DIR=$dir
# The driver's default of 8 hardware queues per process (MPS clients; rank threads sharing queues,
# as applications run): colibri_tests and colibri_device_bench would set 32 when it is unset.
export CUDA_DEVICE_MAX_CONNECTIONS=8
status=0
parts=" ${PARTS:-before after bench wait} "
has() { [[ $parts == *" $1 "* ]]; }
suite() {  # suite NAME FILTER SECONDS [VAR=VALUE...]
  local name=$1 filter=$2 secs=$3
  shift 3
  env "$@" timeout "$secs" "$dir/colibri_tests" --gtest_filter="$filter" >"$out/suite-$name.log" 2>&1
  local rc=$?
  echo "suite $name: rc $rc; $(grep -E '^\[  (PASSED|FAILED) +\] [0-9]+ tests' "$out/suite-$name.log" | tr '\n' ' ')"
  grep -E '^\[ +(OK|FAILED) +\] SharedGpu' "$out/suite-$name.log" | sed 's/^/  /'
  return $rc
}
if [[ ${BEFORE:-1} != 0 ]] && has before; then
  mps_start
  if suite before "${BEFORE_FILTER:-SharedGpu/DeviceSharedGpu.*/4ranks_eager_decode:SharedGpu/DeviceSharedGpu.*/4ranks_graph_decode:SharedGpu/DeviceSharedGpu.*/4threads_eager_decode}" \
    "${BEFORE_SECS:-240}" COLIBRI_DEVICE_GATE=off COLIBRI_LOG_LEVEL=info; then
    echo "before: NOT REPRODUCED (every case passed without the gate)"
  else
    echo "before: reproduced (cases failed without the gate, above)"
  fi
  mps_stop
fi
if has after; then
  mps_start
  suite after 'SharedGpu/DeviceSharedGpu.*:DeviceSharedGpuThreads.*' "${AFTER_SECS:-420}" CLB_TEST_REPEAT="${REPEAT:-5}" || status=1
  mps_stop
fi
mps_start
bench() {  # bench NAME ARGS...
  local name=$1
  shift
  timeout 120 "$dir/colibri_device_bench" --min 8 --max 4194304 --graph "$@" >"$out/$name.txt" 2>&1 || status=1
}
has bench || ROUNDS=0
for ((i = 1; i <= ${ROUNDS:-2}; i++)); do
  for g in auto off; do
    for n in 2 4; do
      COLIBRI_DEVICE_GATE=$g bench "r$i-gate-$g-${n}procs-allreduce" --processes --ranks $n --coll allreduce
      COLIBRI_DEVICE_GATE=$g bench "r$i-gate-$g-${n}procs-allgather" --processes --ranks $n --coll allgather
    done
    COLIBRI_DEVICE_GATE=$g bench "r$i-gate-$g-4threads-allreduce" --ranks 4 --coll allreduce
  done
done
# 4. What a 1 ms device wait takes from a whole-SM kernel on another stream (docs/device.md):
#    ungated (a rank alone on its GPU) and gated.
for g in $(has wait && echo off auto); do
  COLIBRI_DEVICE_GATE=$g timeout 120 "$dir/colibri_device_bench" --wait-cost 1000 >"$out/wait-cost-gate-$g.txt" 2>&1 || status=1
  cat "$out/wait-cost-gate-$g.txt"
done
for f in $(has bench && echo "$out"/r1-*.txt); do
  echo "== $(basename "$f")"
  grep -E '^ +(8|65536|262144|1048576|4194304) ' "$f" | head -5
done
exit $status
