#!/usr/bin/env bash
# Init at scale: measured on this machine (colibri_host_bench, ranks as threads, socket and shm,
# 2 .. 512 ranks: init, split and shrink of the slowest rank, medians of three), then predicted
# twice:
# - colibri_boot_netsim runs the bootstrap's own code over a simulated network (src/tools/netsim.h):
#   the same sizes with every rank on one node sharing this machine's cores (to check the
#   simulation against the measurement), and fleets of up to NETSIM_MAX ranks (default 4096: every
#   rank holds the table, about n^2 x 304 bytes of this machine's memory) with a core and a link per
#   rank;
# - colibri_boot_sim replays the bootstrap's schedule over a model of the network: the same
#   fleets and past them, to 65 536 ranks.
#   scripts/init-scaling.sh [out-dir=results/host/init-scaling-$(date +%F)] [max-ranks=512]
# Fleet parameters: 10 us one-way latency, 100 and 25 Gb/s per node, all ranks starting at once;
# netsim: the code's CPU time on this machine, 1 us per system call, 2 us per wake-up; boot_sim:
# 2 us of CPU per message. This machine: 15 us between two ranks (loopback and a wake-up), 7 us a
# system call, 10 us a wake-up (fitted to the measured 8 .. 256 socket ranks of 2026-12-07), its
# cores shared; boot_sim's check: 15 us, 40 Gb/s, 40 us per message
# (fitted to the measured 2 .. 128 socket ranks of 2026-12-05). Edit them below; boot_netsim.cc and
# boot_sim.cc say what each is.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/host/init-scaling-$(date +%F)}
max=${2:-512}
mkdir -p "$out"
cmake -S src -B build/native -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/native -j "$(nproc)" --target colibri_host_bench colibri_boot_sim colibri_boot_netsim >/dev/null

sizes=()
for n in 2 8 32 64 128 256 512 1024; do ((n <= max)) && sizes+=("$n"); done
csv="$out/measured.csv"
# A run of 512 ranks leaves tens of thousands of TCP connections in TIME_WAIT for 60 s (its inits,
# splits and shrinks). With that many, every listener's bind() to port 0 scans port buckets full
# of them: over a quarter of the CPU at 512 ranks, single runs up to 1.8 times slower. So a run of
# 128 ranks or more first waits (at most 90 s) until the host has none; timewait says how many
# were left when it started.
timewait() { { cat /proc/net/tcp /proc/net/tcp6 2>/dev/null || true; } | awk '$4 == "06"' | wc -l; }
echo "transport,ranks,init_median_us,init_min_us,split_median_us,shrink_median_us,timewait" >"$csv"
for n in "${sizes[@]}"; do
  for t in socket shm; do
    if ((n >= 128)); then
      for _ in $(seq 45); do (($(timewait) == 0)) && break; sleep 2; done
    fi
    tw=$(timewait)
    run=$(build/native/colibri_host_bench "$n" "$t" 8 4 1 3 2>&1)
    init=$(sed -n 's/.*init median \([0-9]*\) us, min \([0-9]*\) us.*/\1,\2/p' <<<"$run")
    split=$(sed -n 's/.*clbCommSplit into one communicator median \([0-9]*\) us.*/\1/p' <<<"$run")
    shrink=$(sed -n 's/.*clbCommShrink to [0-9]* ranks median \([0-9]*\) us.*/\1/p' <<<"$run")
    echo "$t,$n,$init,$split,${shrink:-},$tw" | tee -a "$csv"
  done
done

list=$(IFS=,; echo "${sizes[*]}")
build/native/colibri_boot_sim --cores "$(nproc)" --exchanges socket --latency-us 15 --gbps 40 --msg-us 40 \
  --ranks "$list" >"$out/model-this-machine-socket.csv"
build/native/colibri_boot_sim --cores "$(nproc)" --exchanges shm --latency-us 15 --gbps 40 --msg-us 40 \
  --ranks "$list" >"$out/model-this-machine-shm.csv"
build/native/colibri_boot_netsim --cores "$(nproc)" --ranks-per-node 1000000 --local-latency-us 15 --syscall-us 7 \
  --wake-us 10 --exchanges socket --ranks "$list" >"$out/netsim-this-machine-socket.csv"
netsim=()
for n in 2 8 32 128 512 1024 2048 4096; do ((n <= ${NETSIM_MAX:-4096})) && netsim+=("$n"); done
for gbps in 100 25; do
  build/native/colibri_boot_netsim --latency-us 10 --gbps "$gbps" --exchanges fleet --ranks "$(IFS=,; echo "${netsim[*]}")" \
    >"$out/netsim-fleet-${gbps}gbps.csv"
done
fleet=2,8,32,128,512,1024,2048,4096,8192,65536
for gbps in 100 25; do
  for table in root tree; do
    build/native/colibri_boot_sim --latency-us 10 --gbps "$gbps" --msg-us 2 --table "$table" --ranks "$fleet" \
      >"$out/fleet-${gbps}gbps-table-$table.csv"
  done
done
# The schedule model with its CPU per message fitted to colibri_boot_netsim's fleets of 1 024 and
# 2 048 ranks (8 us: this machine's CPU running the real code): the prediction past what netsim
# can hold in memory.
build/native/colibri_boot_sim --latency-us 10 --gbps 100 --msg-us 8 --ranks "$fleet" >"$out/fleet-100gbps-fitted.csv"
echo "wrote $out"
