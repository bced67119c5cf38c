#!/usr/bin/env bash
# The JMH benchmarks, Colibri against NCCL, on a GPU host with what it is given (no build, no
# network, no Java there): DIR comes from `bash scripts/jmh-bundle.sh DIR` on the build machine.
#   bash scripts/jmh-gpu.sh DIR                 probe, then the default set (about 4 minutes on one
#                                               or two H200s)
#   bash scripts/jmh-gpu.sh DIR JMH-ARGS...     probe, then one JMH run with these arguments (the
#                                               benchmarks' own defaults: 1 fork, 3 x 0.5 s warm-up
#                                               and measurement), e.g.
#     bash scripts/jmh-gpu.sh DIR 'NcclCollectives|ColibriCollectives' -p collective=allReduce \
#       -p bytes=8,64K,1M,16M,256M -p dtype=bfloat16 -p mode=eager,graph
# The probe prints the Java, CUDA runtime, driver and NCCL versions and the GPUs, and checks one
# allReduce per library. Results: jmh-*.json (JMH's -rf json), jmh.log (probe and JMH output) and
# summary.txt (Colibri and NCCL side by side, io.colibri.bench.jmh.Compare) in $OUT when set (the
# device tool), else in DIR/results. Exit code 0 when everything ran.
# Environment: JMH_OPTS replaces the default set's iteration options (-f 1 -wi 3 -w 300ms -i 3 -r 500ms),
# CUDA_VISIBLE_DEVICES picks the GPUs, NCCL_DEBUG (default WARN) NCCL's log level; NCCL_NVLS_ENABLE
# is 0 unless set (NVLink multicast off, as the device tool's hosts require).
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -uo pipefail
dir=${1:?usage: jmh-gpu.sh DIR [JMH-ARGS...]}
shift
out=${OUT:-$dir/results}
mkdir -p "$out"
log=$out/jmh.log
jar=$dir/lib/colibri-jmh.jar
[[ -f $jar ]] || { echo "jmh-gpu: $jar is missing: make DIR with scripts/jmh-bundle.sh" >&2; exit 2; }
if [[ ! -x /tmp/jre/bin/java ]]; then
  tar xJf "$dir/jre.txz" -C /tmp || { echo "jmh-gpu: cannot unpack $dir/jre.txz" >&2; exit 2; }
fi
java=/tmp/jre/bin/java

# The presets load libcudart.so.13 and libnccl.so.2 by name: add the usual CUDA folders at the end
# of the search path in case the runtime is not in the loader's cache.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/targets/x86_64-linux/lib; do
  [[ -d $d ]] && LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d
done
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32}  # Colibri: >8 ranks per GPU
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
# NVLink multicast (NVLS) stays off: on shared hosts it can take the GPUs out of service.
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
# A Colibri rank whose peer never comes fails after 30 s instead of 60 (only failures are affected).
export COLIBRI_TIMEOUT_MS=${COLIBRI_TIMEOUT_MS:-30000}
# JMH's forked JVMs get the launcher's JVM options: JavaCPP's cache in /tmp.
jvm=(-Dorg.bytedeco.javacpp.cachedir=/tmp/javacpp-cache)
read -ra iters <<<"${JMH_OPTS:--f 1 -wi 3 -w 300ms -i 3 -r 500ms}"

: >"$log"
{
  echo "# jmh-gpu: $(date -u +%FT%TZ) on $(hostname); NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE CUDA_DEVICE_MAX_CONNECTIONS=$CUDA_DEVICE_MAX_CONNECTIONS"
  nvidia-smi --query-gpu=index,name,compute_cap,driver_version,memory.total --format=csv 2>&1
  ls -l /usr/lib/x86_64-linux-gnu/libnccl.so* 2>&1 | sed 's/^/# /'
} | tee -a "$log"

timeout --kill-after=10 60 "$java" "${jvm[@]}" -cp "$jar" io.colibri.bench.jmh.Probe 2>&1 | tee -a "$log"
probe=${PIPESTATUS[0]}
[[ $probe -eq 124 ]] && echo "# jmh-gpu: the probe did not finish in 60 s" | tee -a "$log"
status=$probe

# run NAME SECONDS JMH-ARGS...: one JMH run, results in $out/jmh-NAME.json
run() {
  local name=$1 limit=$2
  shift 2
  echo "# jmh-gpu: run $name: $*" | tee -a "$log"
  timeout --kill-after=15 "$limit" "$java" "${jvm[@]}" -jar "$jar" "$@" \
    -rf json -rff "$out/jmh-$name.json" 2>&1 | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  if [[ $rc -ne 0 ]]; then
    echo "# jmh-gpu: run $name ended with exit code $rc$([[ $rc -eq 124 ]] && echo " (timed out after $limit s)")" | tee -a "$log"
    status=1
  fi
}

if [[ $# -gt 0 ]]; then
  run custom 500 "$@"
elif [[ $probe -eq 2 ]]; then
  echo "# jmh-gpu: no CUDA here (see the probe): only the call-overhead benchmarks" | tee -a "$log"
  run overhead 120 'CallOverhead' "${iters[@]}"
else
  # 6 + 24 + 6 + 6 + 4 forks of about 4-5 s each (JVM start, CUDA contexts, NCCL init, 2.4 s of
  # iterations); the time limits keep the whole script under 10 minutes even when runs hang.
  # Sizes: each rank's message for allReduce/broadcast, all ranks' data for the others.
  sizes=8,1048576,67108864
  run overhead 80 'CallOverhead' "${iters[@]}"
  run collectives 220 '(Colibri|Nccl)Collectives' -p collective=allReduce,allGather,reduceScatter,broadcast \
    -p bytes=$sizes -p dtype=float32 -p mode=eager -p gpus=0 -p ranksPerGpu=1 "${iters[@]}"
  run bf16 70 '(Colibri|Nccl)Collectives' -p collective=allReduce -p bytes=$sizes -p dtype=bfloat16 \
    -p mode=eager -p gpus=0 -p ranksPerGpu=1 "${iters[@]}"
  run graph 70 '(Colibri|Nccl)Collectives' -p collective=allReduce -p bytes=$sizes -p dtype=float32 \
    -p mode=graph -p gpus=0 -p ranksPerGpu=1 "${iters[@]}"
  # Several ranks per GPU, every rank's call issued in turn from the one benchmark thread: the
  # launch meeting would wait in rank 0's call for the others (a thread cannot be in two calls at
  # once), so this run turns it off (docs/device.md; groups, issue #16, will lift this).
  COLIBRI_DEVICE_MEET=off run ranks 60 'ColibriCollectives' -p collective=allReduce -p bytes=8,1048576 \
    -p dtype=float32 -p mode=eager -p gpus=0 -p ranksPerGpu=2,4 "${iters[@]}"
fi

# Colibri and NCCL side by side, from the JSON files
"$java" "${jvm[@]}" -cp "$jar" io.colibri.bench.jmh.Compare "$out"/jmh-*.json 2>&1 | tee "$out/summary.txt"

failures=$(grep -c '<failure>' "$log")
if [[ $failures -gt 0 ]]; then
  echo "# jmh-gpu: $failures benchmark(s) failed: look for <failure> in $log" | tee -a "$log"
  status=1
fi
echo "# jmh-gpu: done, exit code $status; files in $out:" | tee -a "$log"
ls -l "$out" | tee -a "$log"
exit $status
