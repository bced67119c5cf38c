#!/usr/bin/env bash
# The oldest glibc the shipped libraries load on: fails when a library needs a symbol version of
# glibc newer than COLIBRI_GLIBC_MAX (default 2.34: RHEL 9's; Ubuntu 22.04, NVIDIA's GH200 and DGX
# images, has 2.35), naming the symbols that need it. The build machine's glibc is newer (Debian
# 12: 2.36), so a call that came in later (arc4random, 2.36) or a static runtime that uses one
# (libgcc's unwinder and _dl_find_object, 2.35) would raise the floor without a sign. readelf reads
# any ELF machine, so it checks the x86-64 and the aarch64 libraries alike.
#   bash scripts/check-glibc.sh LIBRARY...
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
max=${COLIBRI_GLIBC_MAX:-2.34}
[[ $# -gt 0 ]] || die "usage: check-glibc.sh LIBRARY..."
newer() { [[ $(printf '%s\n%s\n' "$1" "$2" | sort -V | tail -1) == "$1" && $1 != "$2" ]]; }
status=0
for lib in "$@"; do
  [[ -f $lib ]] || die "check-glibc: $lib does not exist"
  # Every GLIBC_ version the library needs; the named ones as the release that brought them
  # (GLIBC_ABI_DT_RELR: 2.36's packed relocations); GLIBC_PRIVATE or an unknown name fails.
  worst=
  for v in $(readelf -V --wide "$lib" | sed -n 's/.*Name: GLIBC_\([A-Za-z0-9_.]*\) .*/\1/p' | sort -u); do
    case $v in
      [0-9]*) ;;
      ABI_DT_RELR) v=2.36 ;;
      *) echo "check-glibc: $lib needs GLIBC_$v, which no release of glibc promises" >&2; status=1; continue ;;
    esac
    if [[ -z $worst ]] || newer "$v" "$worst"; then worst=$v; fi
  done
  # libstdc++ is linked statically: a NEEDED libstdc++.so.6 would tie the library to the host's.
  if readelf -d "$lib" | grep -q 'NEEDED.*libstdc++'; then
    echo "check-glibc: $lib needs the host's libstdc++.so.6 (it must link libstdc++ statically)" >&2
    status=1
  fi
  if [[ -n $worst ]] && newer "$worst" "$max"; then
    syms=$(readelf --dyn-syms --wide "$lib" | awk '$7 == "UND" && $8 ~ /@GLIBC_/ {print $8}' | sed 's/@*GLIBC_/ /' |
      while read -r s v; do if newer "$v" "$max"; then echo "$s@$v"; fi; done | sort -u | tr '\n' ' ')
    echo "check-glibc: $lib needs glibc $worst, newer than $max (the oldest it must load on): ${syms:-?}" >&2
    status=1
  fi
done
[[ $status == 0 ]] && echo "check-glibc: $# libraries load on glibc $max and later"
exit $status
