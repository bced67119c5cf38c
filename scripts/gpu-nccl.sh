#!/usr/bin/env bash
# The NCCL drop-in on one GPU host, with what it is given (no network there):
#   bash scripts/gpu-nccl.sh DIR [PART...]
# DIR comes from `PACK_SH=none bash scripts/gpu-bundle.sh DIR`: DIR/nccl/lib holds Colibri's
# libnccl.so.2 as it ships (beside libcolibri.so.0 and the kernel images), DIR/nccl/include its
# nccl.h, DIR/nccl-tests nccl-tests' source. PARTs (default: torch tests):
#   torch  PyTorch, unmodified, through LD_PRELOAD (scripts/torch-nccl-check.py): 1 rank with its
#          bundled NCCL and with Colibri's (no MPS: the memory and init figures), then 2 and 4 rank
#          processes on GPU 0 with Colibri's under the MPS daemon (NCCL refuses two ranks on one GPU).
#   windows  scripts/torch-nccl-windows.py at NPROCS rank processes (default "2 4") under MPS:
#          windows on ncclMemAlloc memory, all-reduces eager and in graphs checked, deregistration
#          under a live graph refused, suspend/resume, and window against unregistered latency.
#   tests  nccl-tests built here against Colibri's nccl.h and libnccl.so.2 (MPI=1), each binary
#          with -c 1 (every result checked) from 8 B to 256 MiB, NPROCS rank processes (default
#          "2 4") on GPU 0 under MPS, eager and with -G (CUDA graphs) (MODES, default "eager graph"),
#          TESTS (default all nine), sizes MIN_BYTES..MAX_BYTES (default 8..256M), NCCL_DEBUG as
#          TEST_NCCL_DEBUG (default VERSION), TEST_LOG_LINES of each log's warnings shown;
#          REGISTER="0 2" runs each also with nccl-tests' -R 2 (its buffers in symmetric windows,
#          ncclCommWindowRegister; 1: ncclCommRegister), the logs named -R2.
# nccl-tests includes nccl_device.h (NCCL's device API, which Colibri refuses) when nccl.h says
# 2.28 or later. The build first takes NVIDIA's nccl_device.h from the host's NCCL package for
# those never-run paths, keeping Colibri's nccl.h for everything else (its include guard set so
# that NVIDIA's nccl.h is not read) with the version macros of the host's NCCL (later 2.28
# releases' paths need their own nccl_device.h); where that does not compile, it builds at NCCL's 2.27 API
# level instead (the tests then call send/recv where 2.28 has ncclAlltoAll / ncclGather /
# ncclScatter). The log says which (nccl-tests-build.txt).
# Logs go to DIR/nccl-logs and into $OUT/gpu-nccl-logs.tgz when $OUT is set. Exits non-zero if a
# check failed.
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -uo pipefail
dir=$(cd "${1:?usage: gpu-nccl.sh DIR [PART...]}" && pwd)
shift
parts=${*:-torch tests}
lib=$dir/nccl/lib
out=$dir/nccl-logs
rm -rf "$out" && mkdir -p "$out"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
status=0
# Under MPS every client keeps the driver's default of 8 hardware queues, whatever the caller
# exported: 4 clients with CUDA_DEVICE_MAX_CONNECTIONS=32 fail at their first CUDA call ("out of
# memory" from torch.cuda.set_device on the H100; docs/troubleshooting.md).
mps_on() {
  export CUDA_DEVICE_MAX_CONNECTIONS=8 CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
  mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
  nvidia-cuda-mps-control -d
}
mps_off() { echo quit | nvidia-cuda-mps-control; sleep 1; }
trap 'exit 143' TERM
trap 'mps_off >/dev/null 2>&1; [[ -n ${OUT:-} ]] && tar -C "$dir" -czf "$OUT/gpu-nccl-logs.tgz" nccl-logs' EXIT
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1

torch_run() {  # torch_run NAME ARGS...: the check's log into $out/NAME.log, its outcome shown
  local name=$1
  shift
  "$@" >"$out/$name.log" 2>&1 || status=1
  echo "== $name: $(grep -c ': ok ' "$out/$name.log") ok, $(grep -c ': FAIL' "$out/$name.log") failed;" \
    "$(grep -m1 '^launcher' "$out/$name.log")"
  grep -E ': FAIL|figures|colibri' "$out/$name.log" | sort | uniq | head -20 | sed 's/^/  /'
}

if [[ " $parts " == *" torch "* ]]; then
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())' | tee "$out/torch.txt"
  check="python3 $here/torch-nccl-check.py --timeout ${TORCH_TIMEOUT:-300}"
  torch_run torch-nvidia-n1 $check --nprocs 1
  torch_run torch-colibri-n1 env NCCL_DEBUG=VERSION LD_PRELOAD="$lib/libnccl.so.2" $check --nprocs 1
  mps_on
  for n in 2 4; do
    torch_run "torch-colibri-n$n-mps" env NCCL_DEBUG=VERSION LD_PRELOAD="$lib/libnccl.so.2" $check --nprocs $n
  done
  mps_off
fi

if [[ " $parts " == *" windows "* ]]; then
  # vLLM's symmetric-memory path (ncclMemAlloc, windows, all-reduces in CUDA graphs) through ctypes,
  # with PyTorch's streams and graphs, on Colibri's libnccl.so.2; the latency table to windows.csv.
  mps_on
  echo "ranks,bytes,buffers,us_rank0,us_max" >"$out/windows.csv"
  for n in ${NPROCS:-2 4}; do
    timeout ${TEST_TIMEOUT:-300} python3 "$here/torch-nccl-windows.py" --lib "$lib/libnccl.so.2" --ranks $n --latency \
      --csv "$out/windows.csv" >"$out/windows-n$n.txt" 2>&1 || status=1
    echo "== windows, $n rank processes: $(tail -1 "$out/windows-n$n.txt")"
    grep -E 'FAILED|rank [0-9]+:|Traceback|Error' "$out/windows-n$n.txt" | head -${TEST_LOG_LINES:-8} | sed 's/^/  /'
  done
  cat "$out/windows.csv"
  mps_off
fi
if [[ " $parts " == *" tests "* ]]; then
  nt=/tmp/nccl-tests home=/tmp/nccl-home
  rm -rf $nt $home && cp -r "$dir/nccl-tests" $nt && mkdir -p $home/include $home/lib
  # libcolibri.so.0 beside the link too: the linker resolves libnccl.so.2's $ORIGIN from there.
  ln -sf "$lib/libnccl.so.2" $home/lib/libnccl.so && ln -sf "$lib/libcolibri.so.0" $home/lib/libcolibri.so.0
  mpi=/usr/lib/x86_64-linux-gnu/openmpi
  gencode="-gencode=arch=compute_90,code=sm_90"
  build() {  # build FLAGS...: nccl-tests' binaries, or non-zero
    make -C $nt -j16 MPI=1 MPI_HOME=$mpi NCCL_HOME=$home "$@" >>"$out/nccl-tests-build.log" 2>&1
  }
  # The host's nccl_device.h matches its own NCCL version (2.28.3 on the H200 host): the version
  # macros are lowered to it, or nccl-tests compiles device-API paths (2.28.7's) that header lacks.
  sysver() { awk -v k="$1" '$1 == "#define" && $2 == k {print $3}' /usr/include/nccl.h 2>/dev/null; }
  minor=$(sysver NCCL_MINOR) patch=$(sysver NCCL_PATCH)
  cat >$home/include/nccl.h <<EOF
/* Colibri's nccl.h at the API level of the host's nccl_device.h (2.$minor.$patch). */
#include "$dir/nccl/include/nccl.h"
#undef NCCL_MINOR
#define NCCL_MINOR $minor
#undef NCCL_PATCH
#define NCCL_PATCH $patch
#undef NCCL_VERSION_CODE
#define NCCL_VERSION_CODE NCCL_VERSION(2, $minor, $patch)
EOF
  if [[ -f /usr/include/nccl_device.h && ${minor:-0} -ge 28 ]] && build NVCC_GENCODE="$gencode -DNCCL_H_"; then
    echo "nccl-tests built at NCCL's 2.$minor.$patch API level (Colibri's nccl.h, NVIDIA's nccl_device.h for the device API's paths, never run)" | tee "$out/nccl-tests-build.txt"
  else
    make -C $nt clean >/dev/null 2>&1
    cat >$home/include/nccl.h <<EOF
/* Colibri's nccl.h at NCCL's 2.27 API level: nccl-tests then needs no nccl_device.h. */
#include "$dir/nccl/include/nccl.h"
#undef NCCL_MINOR
#define NCCL_MINOR 27
#undef NCCL_VERSION_CODE
#define NCCL_VERSION_CODE NCCL_VERSION(2, 27, 7)
EOF
    if build NVCC_GENCODE="$gencode"; then
      echo "nccl-tests built at NCCL's 2.27 API level (Colibri's nccl.h, version macros lowered)" | tee "$out/nccl-tests-build.txt"
    else
      echo "nccl-tests did not build: see nccl-tests-build.log" | tee "$out/nccl-tests-build.txt"
      tail -30 "$out/nccl-tests-build.log"
      exit 1
    fi
  fi
  ldd $nt/build/all_reduce_perf | grep -E 'nccl|colibri' | sed 's/^/  without LD_LIBRARY_PATH: /'
  LD_LIBRARY_PATH=$lib ldd $nt/build/all_reduce_perf | grep -E 'nccl|colibri' | sed 's/^/  with it: /'
  mps_on
  for n in ${NPROCS:-2 4}; do
    for mode in ${MODES:-eager graph}; do
      for t in ${TESTS:-all_reduce all_gather reduce_scatter broadcast reduce sendrecv alltoall gather scatter}; do
       for reg in ${REGISTER:-0}; do
        name=$t-n$n-$mode
        flag=""
        [[ $mode == graph ]] && flag="-G 1"
        [[ $reg != 0 ]] && flag="$flag -R $reg" name=$name-R$reg
        timeout ${TEST_TIMEOUT:-300} mpirun --allow-run-as-root --bind-to none -np $n -x LD_LIBRARY_PATH="$lib" -x NCCL_TESTS_DEVICE=0 \
          -x NCCL_DEBUG=${TEST_NCCL_DEBUG:-VERSION} -x CUDA_MPS_PIPE_DIRECTORY -x NCCL_NVLS_ENABLE \
          $nt/build/${t}_perf -b ${MIN_BYTES:-8} -e ${MAX_BYTES:-256M} -f 2 -c 1 $flag >"$out/$name.txt" 2>&1 || status=1
        # Rows: size count type redop root, then time algbw busbw #wrong out of place and in place.
        rows=$(awk 'NF >= 13 && $1 ~ /^[0-9]+$/ {n++} END {print n + 0}' "$out/$name.txt")
        wrong=$(awk 'NF >= 13 && $1 ~ /^[0-9]+$/ {w += $9 + $13} END {print w + 0}' "$out/$name.txt")
        echo "== $name: $rows rows, #wrong $wrong; $(grep -E 'Out of bounds|Avg bus' "$out/$name.txt" | tr -s ' ' | tr '\n' ';')" \
          "$(grep -c 'colibri' "$out/$name.txt") colibri version lines"
        grep -E 'FAIL|error|Error|NCCL failure|wrong|WARN' "$out/$name.txt" | head -${TEST_LOG_LINES:-5} | sed 's/^/  /'
       done
      done
    done
  done
  mps_off
fi
echo "status $status"
exit $status
