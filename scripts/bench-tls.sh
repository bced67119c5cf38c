#!/usr/bin/env bash
# What COLIBRI_TLS costs on the socket transport: colibri_host_bench (ranks as threads, host
# all-reduce over loopback TCP) with COLIBRI_TLS=off, bootstrap and all, in turn, `rounds` times
# each; certificates are made for the run with the openssl command. Prints the medians across
# rounds (init, time per call, bus bandwidth) and writes every run's CSV lines to
# results/tls/<date>-tls-socket.csv (override with OUT_DIR; its columns are its own, not the perf
# tool's, so it stays out of results/host/).
#   bash scripts/bench-tls.sh [--ranks 2] [--rounds 3] [--max 67108864]
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$COLIBRI_ROOT"
ranks=2; rounds=3; max=$((64 << 20))
while [[ $# -gt 0 ]]; do
  case $1 in
    --ranks) ranks=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --max) max=$2; shift 2 ;;
    *) echo "usage: $0 [--ranks N] [--rounds N] [--max BYTES]" >&2; exit 2 ;;
  esac
done
ensure_build_tools
ensure_tools openssl:openssl
cmake -S src -B build/native -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/native -j "$(nproc)" --target colibri_host_bench >/dev/null
pki=$(mktemp -d)
trap 'rm -rf "$pki"' EXIT
ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
openssl req -x509 $ec -keyout "$pki/ca.key" -out "$pki/ca.pem" -days 2 -subj /CN=bench-ca \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null
openssl req $ec -keyout "$pki/rank.key" -out "$pki/rank.csr" -subj /CN=bench-rank 2>/dev/null
openssl x509 -req -in "$pki/rank.csr" -CA "$pki/ca.pem" -CAkey "$pki/ca.key" -CAcreateserial \
  -out "$pki/rank.pem" -days 2 2>/dev/null
export COLIBRI_TLS_CERT=$pki/rank.pem COLIBRI_TLS_KEY=$pki/rank.key COLIBRI_TLS_CA=$pki/ca.pem
out=${OUT_DIR:-results/tls}
mkdir -p "$out"
csv=$out/$(date +%Y-%m-%d)-tls-socket.csv
echo "round,tls,coll,ranks,bytes,us_per_call,busbw_GBps,init_median_us" >"$csv"
for ((r = 1; r <= rounds; r++)); do
  for mode in off bootstrap all; do
    log "round $r: COLIBRI_TLS=$mode"
    run=$(COLIBRI_TLS=$mode build/native/colibri_host_bench "$ranks" socket 4096 "$max" 20 50)
    init=$(sed -n 's/.*init median \([0-9]*\) us.*/\1/p' <<<"$run")
    grep -v '^#' <<<"$run" | tail -n +2 | sed "s/^/$r,/; s/\$/,$init/" >>"$csv"
  done
done
python3 - "$csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
modes = ["off", "bootstrap", "all"]
med = lambda xs: statistics.median(xs)
print("init of the slowest rank, median over rounds (us): " +
      ", ".join(f"{m} {med([float(r['init_median_us']) for r in rows if r['tls'] == m and r['bytes'] == rows[0]['bytes']]):.0f}" for m in modes))
print(f"{'bytes':>10} " + " ".join(f"{m + ' us':>14} {m + ' GB/s':>14}" for m in modes) + "   all/off time")
for b in sorted({int(r["bytes"]) for r in rows}):
    t = {m: med([float(r["us_per_call"]) for r in rows if r["tls"] == m and int(r["bytes"]) == b]) for m in modes}
    g = {m: med([float(r["busbw_GBps"]) for r in rows if r["tls"] == m and int(r["bytes"]) == b]) for m in modes}
    print(f"{b:>10} " + " ".join(f"{t[m]:>14.1f} {g[m]:>14.3f}" for m in modes) + f"   {t['all'] / t['off']:.2f}")
PY
log "wrote $csv"
