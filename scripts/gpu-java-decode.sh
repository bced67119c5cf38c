#!/usr/bin/env bash
# The Java tensor-parallel decoder (decode --device gpu, docs/end-to-end.md) on a GPU host, with a
# bundle made here by `bash scripts/jmh-bundle.sh DIR` (no build, no network, no Java there):
#   bash scripts/gpu-java-decode.sh DIR
# Phases (PHASES, default all of them, in this order):
#   tests      colibri-bench's gpu-tagged JUnit tests (the GPU decoder against the CPU reference:
#              float32 tokens and logits, bfloat16 logits, prefill in passes), GpuTestLauncher
#   tp1        TP=1 with NCCL (the system's libnccl.so.2), Colibri and no collectives, float32 and
#              bfloat16, eager and graph
#   check      --check (TP=N's tokens equal TP=1's in float32) at TP=2, 4 and 8, graph
#   sweep      Colibri at TP=2, 4 and 8, both types, eager and graph, rank threads
#   share      no collectives at TP=2, 4 and 8, both types, graph: against sweep, the collectives'
#              share of a step
#   processes  Colibri at TP=2, 4 and 8 as rank processes (one JVM each) under the MPS daemon at
#              its default settings, bfloat16 graph, and --check at TP=4 float32; with
#              CUDA_DEVICE_MAX_CONNECTIONS=8 (the driver's default; the other phases' 32 is
#              more than MPS gives several clients)
#   multi      only with 2 or more GPUs: rank r on GPU r % count (--spread), TP=2 .. count, NCCL
#              against Colibri, threads and processes, bfloat16, eager and graph
# Every decode row goes into one CSV (decode.csv); draw it here with
#   java -jar colibri-bench/target/colibri-bench.jar chart --out charts H200=decode.csv
# Model: MODEL (default llama8b: Llama-3-8B's layer shape) with LAYERS (default 2) layers, batch
# BATCH (default 16), a prompt of PROMPT tokens (default 32) in one pass, NEW (default 32) new tokens.
# Logs and decode.csv go to $OUT/java-decode when OUT is set (the device tool), else DIR/java-decode.
# Exit code 0 when every run did what it should.
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -uo pipefail
dir=$(cd "${1:?usage: gpu-java-decode.sh DIR}" && pwd)
out=${OUT:-$dir}/java-decode
mkdir -p "$out"
csv=$out/decode.csv
[[ -f $dir/lib/colibri-jmh.jar ]] || { echo "gpu-java-decode: $dir/lib/colibri-jmh.jar is missing: make DIR with scripts/jmh-bundle.sh" >&2; exit 2; }
if [[ ! -x /tmp/jre/bin/java ]]; then
  tar xJf "$dir/jre.txz" -C /tmp || { echo "gpu-java-decode: cannot unpack $dir/jre.txz" >&2; exit 2; }
fi
java=/tmp/jre/bin/java
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32} NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mps=0
mps_on() { mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY; nvidia-cuda-mps-control -d && mps=1; }
mps_off() { ((mps)) && { echo quit | nvidia-cuda-mps-control >/dev/null 2>&1; sleep 1; mps=0; }; }
trap mps_off EXIT
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
model="--model ${MODEL:-llama8b} --layers ${LAYERS:-2} --batch ${BATCH:-16} --prompt ${PROMPT:-32} --new ${NEW:-32}"
status=0
n=0
decode() {  # decode ARGS...: one run of the decode command; its log, its outcome on one line
  n=$((n + 1))
  local log=$out/run$n.log
  echo "decode $model $*" >"$log"
  timeout "${RUN_TIMEOUT:-300}" "$java" -cp "$dir/lib/*" io.colibri.bench.Main decode --device gpu $model \
    --csv "$csv" "$@" >>"$log" 2>&1
  local rc=$?
  ((rc != 0)) && status=1
  printf '%-70s rc %d  %s\n' "$*" $rc "$(grep -E '^  +[0-9]' "$log" | tail -1 | tr -s ' ')"
  ((rc != 0)) && tail -3 "$log"
  return 0
}
for phase in ${PHASES:-tests tp1 check sweep share processes multi}; do
  echo "== $phase"
  case $phase in
  tests)
    if [[ -d $dir/test ]]; then
      timeout 400 "$java" -cp "$dir/lib/*:$dir/test/*" io.colibri.bench.GpuTestLauncher >"$out/gpu-tests.log" 2>&1 || status=1
      grep -E '^(SUCCESSFUL|FAILED|ABORTED|SKIPPED) |tests (successful|failed|found)' "$out/gpu-tests.log"
    else
      echo "no $dir/test: the bundle has no test classes (scripts/jmh-bundle.sh makes them)"
    fi ;;
  tp1)
    for lib in nccl colibri none; do
      for t in float32 bfloat16; do
        decode --tp 1 --library $lib --dtype $t
        decode --tp 1 --library $lib --dtype $t --graph
      done
    done ;;
  check)
    for tp in 2 4 8; do decode --tp $tp --graph --check; done ;;
  sweep)
    for tp in 2 4 8; do
      for t in float32 bfloat16; do
        decode --tp $tp --dtype $t
        decode --tp $tp --dtype $t --graph
      done
    done ;;
  share)
    for tp in 2 4 8; do
      for t in float32 bfloat16; do decode --tp $tp --dtype $t --graph --library none; done
    done ;;
  processes)
    # Under MPS at most 8 hardware queues a process: with 32, the third JVM's context failed
    # (cudaSetDevice: out of memory, the server's CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED;
    # docs/troubleshooting.md).
    threads_connections=$CUDA_DEVICE_MAX_CONNECTIONS
    export CUDA_DEVICE_MAX_CONNECTIONS=8
    mps_on
    for tp in 2 4 8; do decode --tp $tp --dtype bfloat16 --graph --processes; done
    decode --tp 4 --graph --check --processes
    mps_off
    export CUDA_DEVICE_MAX_CONNECTIONS=$threads_connections ;;
  multi)
    if ((gpus < 2)); then
      echo "one GPU: nothing to spread"
      continue
    fi
    for ((tp = 2; tp <= gpus && tp <= 8; tp *= 2)); do
      for lib in nccl colibri; do
        for mode in "" --graph; do
          decode --tp $tp --spread --library $lib --dtype bfloat16 $mode
          decode --tp $tp --spread --library $lib --dtype bfloat16 $mode --processes
        done
      done
      decode --tp $tp --spread --graph --check
    done ;;
  *) echo "gpu-java-decode: unknown phase $phase (tests tp1 check sweep share processes multi)" >&2; status=1 ;;
  esac
done
rows=0
[[ -f $csv ]] && rows=$(($(wc -l <"$csv") - 1))
echo "rows: $rows in $csv"
exit $status
