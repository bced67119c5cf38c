#!/usr/bin/env bash
# Issue #6's run on a machine with several GPUs (nvidia-h200-x2/-x4/-x8), in two device calls of
# under 10 minutes each (the device tool's limit):
#   bash scripts/gpu-multi.sh DIR check     # correctness: the GPU suite with ranks over every GPU
#   bash scripts/gpu-multi.sh DIR compare   # Colibri against NCCL at all GPUs, footprint, processes
# DIR from `bash scripts/gpu-bundle.sh DIR` (plus colibri-bench.jar in DIR/lib for the doctor).
# Logs go to $OUT (the device tool) or DIR; a summary on stdout. NVLink multicast stays off
# (NCCL_NVLS_ENABLE=0; Colibri never creates multicast objects).
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -uo pipefail
dir=${1:?usage: gpu-multi.sh DIR check|compare}
part=${2:?usage: gpu-multi.sh DIR check|compare}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT:-$dir}
export COLIBRI_KERNEL_DIR=$(cd "$dir" && pwd)
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
ng=$(nvidia-smi -L | wc -l)
nvidia-smi topo -m >"$out/topo.txt" 2>&1
echo "GPUs: $ng"; head -n $((ng + 1)) "$out/topo.txt"
status=0
case $part in
  check)
    # The native suite's AllGpus instantiations spread ranks round robin over every GPU (threads
    # 2-8, processes 2/4/8 incl. registered buffers, graphs), then the Java gpu tests and the
    # 2/4-rank tables of gpu-check.sh.
    timeout 560 bash "$here/gpu-check.sh" "$dir" >"$out/check-summary.txt" 2>&1 || status=1
    grep -E 'PASSED|FAILED|tests (successful|failed)|^== ' "$out/check-summary.txt"
    ;;
  compare)
    # One rank per GPU for both libraries, short set up to 256 MiB (graph mode for every type),
    # then rank processes with registered buffers at every GPU, then footprint.
    COMPARE_SET=short timeout 400 bash "$here/gpu-compare.sh" "$dir" >"$out/compare-summary.txt" 2>&1 || status=1
    grep -E '^!!|^== |^ +(8|8192|65536|262144|67108864|268435456) ' "$out/compare-summary.txt" | head -80
    timeout 60 "$dir/colibri_device_bench" --processes --register --graph --ranks "$ng" --max 268435456 \
      >"$out/procs-register-n$ng-graph.txt" 2>&1 || status=1
    grep -E '^ +(8|65536|67108864|268435456) ' "$out/procs-register-n$ng-graph.txt"
    timeout 100 bash "$here/gpu-footprint.sh" "$dir" >/dev/null 2>&1 || status=1
    grep -E 'footprint' "$out/footprint.txt" | head -10
    if [[ -f $dir/lib/colibri-bench.jar && -f $dir/jre.txz ]]; then
      tar xJf "$dir/jre.txz" -C /tmp && /tmp/jre/bin/java -jar "$dir/lib/colibri-bench.jar" doctor >"$out/doctor.txt" 2>&1
      tail -1 "$out/doctor.txt"
    fi
    (cd "$out" && tar czf compare.tgz compare && rm -rf compare) 2>/dev/null
    ;;
  *) echo "part must be check or compare" >&2; exit 2 ;;
esac
exit $status
