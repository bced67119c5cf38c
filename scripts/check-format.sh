#!/usr/bin/env bash
# The C++ and CUDA sources under src/ are as clang-format (.clang-format at the root) writes them.
#   bash scripts/check-format.sh         exit 0 when every file is, 1 naming those that are not
#   bash scripts/check-format.sh --fix   rewrites them in place
# Installs clang-format with apt-get when run as root on Debian/Ubuntu (scripts/common.sh). The
# check pins the major version the tree was formatted with, since versions format differently.
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$COLIBRI_ROOT"
ensure_tools clang-format:clang-format
want=14
have=$(clang-format --version | sed -n 's/.*version \([0-9]*\).*/\1/p')
if [[ $have != "$want" ]]; then
  echo "check-format: clang-format $have here; the tree is formatted with clang-format $want (Debian 12's), whose output" \
    "differs from other versions': install version $want to check or fix" >&2
  exit 2
fi
mapfile -t files < <(git ls-files 'src/*.cc' 'src/*.h' 'src/*.cu' 'src/*.cuh')
if [[ ${1:-} == --fix ]]; then
  clang-format -i "${files[@]}"
  exit 0
fi
# One run over every file; its warnings start with the file's name ("src/x.cc:12:3: error: ...").
mapfile -t bad < <(clang-format --dry-run --Werror "${files[@]}" 2>&1 | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error:.*/\1/p' | sort -u)
if ((${#bad[@]})); then
  echo "check-format: ${#bad[@]} file(s) are not as clang-format writes them (bash scripts/check-format.sh --fix):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "check-format: ${#files[@]} files as clang-format $want writes them"
