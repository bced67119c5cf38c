#!/usr/bin/env bash
# Init at scale: measured on this machine (colibri_host_bench, ranks as threads, socket and shm,
# 2 .. 512 ranks: init, split and shrink of the slowest rank, medians of three), then predicted by
# colibri_boot_sim: the same sizes with all ranks sharing this machine's cores (to check the model
# against the measurement), and fleets of up to 65 536 ranks with a core and a link per rank.
#   scripts/init-scaling.sh [out-dir=results/host/init-scaling-$(date +%F)] [max-ranks=512]
# The fleet model's parameters: 10 us one-way latency, 100 and 25 Gb/s per rank, 2 us of CPU per
# message; the shared-machine check's: 15 us, 40 Gb/s (loopback), 40 us per message (fitted to
# the measured 2 .. 128 socket ranks of 2026-12-05). Edit them below; boot_sim.cc says what each is.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/host/init-scaling-$(date +%F)}
max=${2:-512}
mkdir -p "$out"
cmake -S src -B build/native -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/native -j "$(nproc)" --target colibri_host_bench colibri_boot_sim >/dev/null

sizes=()
for n in 2 8 32 64 128 256 512 1024; do ((n <= max)) && sizes+=("$n"); done
csv="$out/measured.csv"
echo "transport,ranks,init_median_us,init_min_us,split_median_us,shrink_median_us" >"$csv"
for n in "${sizes[@]}"; do
  for t in socket shm; do
    run=$(build/native/colibri_host_bench "$n" "$t" 8 4 1 3 2>&1)
    init=$(sed -n 's/.*init median \([0-9]*\) us, min \([0-9]*\) us.*/\1,\2/p' <<<"$run")
    split=$(sed -n 's/.*clbCommSplit into one communicator median \([0-9]*\) us.*/\1/p' <<<"$run")
    shrink=$(sed -n 's/.*clbCommShrink to [0-9]* ranks median \([0-9]*\) us.*/\1/p' <<<"$run")
    echo "$t,$n,$init,$split,${shrink:-}" | tee -a "$csv"
  done
done

list=$(IFS=,; echo "${sizes[*]}")
build/native/colibri_boot_sim --cores "$(nproc)" --exchanges socket --latency-us 15 --gbps 40 --msg-us 40 \
  --ranks "$list" >"$out/model-this-machine-socket.csv"
build/native/colibri_boot_sim --cores "$(nproc)" --exchanges shm --latency-us 15 --gbps 40 --msg-us 40 \
  --ranks "$list" >"$out/model-this-machine-shm.csv"
fleet=2,8,32,128,512,1024,8192,65536
for gbps in 100 25; do
  for table in root tree; do
    build/native/colibri_boot_sim --latency-us 10 --gbps "$gbps" --msg-us 2 --table "$table" --ranks "$fleet" \
      >"$out/fleet-${gbps}gbps-table-$table.csv"
  done
done
echo "wrote $out"
