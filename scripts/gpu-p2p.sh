#!/usr/bin/env bash
# Point-to-point on one GPU, run on a GPU host with what it is given (no build, no network there):
#   bash scripts/gpu-p2p.sh DIR [REPEATS]
# DIR comes from `PACK_SH=none bash scripts/gpu-bundle.sh DIR` (the native tests, the device
# benchmark and the kernel images). Runs the native DevicePeer suite (rank threads and rank
# processes, graphs, allocations between calls, through host memory) without the MPS daemon, its
# rank-process tests under compute-sanitizer memcheck, then the suite REPEATS times (default 2)
# under the MPS daemon and once more there with every message in lines, then the rank-process tables under MPS: sendRecv with 2 ranks and allToAll
# with 4, eager and graph, 8 B to 64 MiB, with and without registered buffers (and the registered
# allReduce beside them, the direct path's reference), allToAllv with 4, sendRecv as threads, and
# what a split costs against an init (colibri_host_bench, rank threads), and send/recv between
# rank processes over the verbs emulator with and without GPU memory for the channels. Under MPS every
# client keeps the driver's default of 8 hardware queues: with 32 each, a fifth client's context
# (4 rank processes and the test's parent) failed with CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED.
# Logs go to DIR/p2p-logs, and into $OUT/gpu-p2p-logs.tgz when $OUT is set (the device tool
# brings back few files). Exits non-zero if a suite or a table failed.
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -uo pipefail
dir=$(cd "${1:?usage: gpu-p2p.sh DIR [REPEATS]}" && pwd)
repeats=${2:-2}
out=$dir/p2p-logs
rm -rf "$out" && mkdir -p "$out"
# The MPS daemon stopped and the logs packed however the run ends (a device tool's time limit too).
trap 'echo quit | nvidia-cuda-mps-control >/dev/null 2>&1; [[ -n ${OUT:-} ]] && tar czf "$OUT/gpu-p2p-logs.tgz" -C "$out" .' EXIT
export COLIBRI_KERNEL_DIR=$dir
export CUDA_DEVICE_MAX_CONNECTIONS=32
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
status=0
suite() {  # suite NAME: the DevicePeer tests into $out/NAME.log, one line of outcome
  timeout 300 "$dir/colibri_tests" --gtest_filter='DevicePeer*' >"$out/$1.log" 2>&1 || status=1
  echo "$1: $(grep -E '^\[  (PASSED|FAILED) +\]' "$out/$1.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \] DevicePeer|^\[       OK \] DevicePeer' "$out/$1.log" | sed 's/^/  /'
}
suite peer-suite-nomps
if command -v compute-sanitizer >/dev/null; then
  timeout 300 compute-sanitizer --target-processes all --tool memcheck --error-exitcode 9 \
    "$dir/colibri_tests" --gtest_filter='DevicePeer.Processes*' >"$out/peer-sanitizer.log" 2>&1 || status=1
  echo "peer-sanitizer: $(grep -E '^\[  (PASSED|FAILED) +\] [0-9]+ tests|ERROR SUMMARY' "$out/peer-sanitizer.log" | sort | uniq -c | tr '\n' ' ')"
fi
export CUDA_DEVICE_MAX_CONNECTIONS=8
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d
for ((k = 1; k <= repeats; k++)); do suite "peer-suite-mps-$k"; done
# Every message in lines (rank threads too: their lanes), under MPS.
COLIBRI_DEVICE_P2P_IN_PLACE=off suite peer-suite-mps-lines
bench() {  # bench NAME ARGS...: a table into $out/NAME.txt, its key rows shown
  local name=$1
  shift
  timeout 240 "$dir/colibri_device_bench" --min 8 --max $((64 << 20)) "$@" >"$out/$name.txt" 2>&1 || status=1
  echo "== $name"
  grep -E '^# (sendRecv|allToAll|allToAllv|allReduce|Colibri|init|device)|^ +(8|4096|8192|32768|65536|1048576|16777216|67108864) ' "$out/$name.txt"
}
for mode in "" --graph; do
  bench "sendrecv-n2-processes${mode:+-graph}" --ranks 2 --processes --coll sendrecv $mode
  bench "alltoall-n4-processes${mode:+-graph}" --ranks 4 --processes --coll alltoall $mode
  bench "alltoallv-n4-processes${mode:+-graph}" --ranks 4 --processes --coll alltoallv $mode
  bench "sendrecv-n2-threads${mode:+-graph}" --ranks 2 --coll sendrecv $mode
  # Registered buffers: large messages between processes move in place; the all-reduce's direct
  # path between processes (also registered) is the bandwidth reference.
  bench "sendrecv-n2-processes-register${mode:+-graph}" --ranks 2 --processes --register --coll sendrecv $mode
  bench "alltoall-n4-processes-register${mode:+-graph}" --ranks 4 --processes --register --coll alltoall $mode
  bench "allreduce-n2-processes-register${mode:+-graph}" --ranks 2 --processes --register --coll allreduce $mode
done
# What a split costs against an init on this machine (colibri_host_bench: rank threads, shm).
for n in 2 4; do
  timeout 120 "$dir/colibri_host_bench" $n shm 4096 4096 1 50 >"$out/split-n$n.txt" 2>&1 || status=1
  echo "== split-n$n: $(grep -E '^# ranks' "$out/split-n$n.txt" | tr '\n' ' ')"
done
# Between "hosts" (rank processes over the verbs emulator, COLIBRI_DEVICE_P2P=off): send/recv
# through channels in GPU memory (GPUDirect RDMA) and through host memory. The emulator moves
# packets over Unix sockets, so these say how the two paths compare here, not what a NIC does.
for gm in auto host; do
  LD_LIBRARY_PATH=$dir/verbs-emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} COLIBRI_PLUGIN_DIR=$dir COLIBRI_TRANSPORT=verbs \
    COLIBRI_DEVICE_P2P=off COLIBRI_VERBS_GPU_MEMORY=$gm timeout 120 "$dir/colibri_device_bench" --min 8 --max $((4 << 20)) \
    --ranks 2 --processes --coll sendrecv >"$out/sendrecv-n2-verbs-emu-$gm.txt" 2>&1 || status=1
  echo "== sendrecv-n2-verbs-emu-$gm"
  grep -E '^# (sendRecv|Colibri|device)|^ +(8|65536|1048576|4194304) ' "$out/sendrecv-n2-verbs-emu-$gm.txt"
done
exit $status
