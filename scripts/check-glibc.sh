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
  worst=$(readelf -V --wide "$lib" | sed -n 's/.*Name: GLIBC_\([0-9.]*\) .*/\1/p' | sort -V | tail -1)
  if [[ -n $worst ]] && newer "$worst" "$max"; then
    syms=$(readelf --dyn-syms --wide "$lib" | awk '$7 == "UND" && $8 ~ /@GLIBC_/ {print $8}' | sed 's/@*GLIBC_/ /' |
      while read -r s v; do if newer "$v" "$max"; then echo "$s@$v"; fi; done | sort -u | tr '\n' ' ')
    echo "check-glibc: $lib needs glibc $worst, newer than $max (the oldest it must load on): ${syms:-?}" >&2
    status=1
  fi
done
[[ $status == 0 ]] && echo "check-glibc: $# libraries load on glibc $max and later"
exit $status
