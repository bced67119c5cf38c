#!/usr/bin/env bash
# The native code's layers point down only: a file may include its own layer's headers and those
# of the layers below it, never one above (docs/architecture.md, "Layers"). From the bottom:
#
#   0 include    the public C ABI (colibri/colibri.h, colibri/net_plugin.h)
#   1 base       errors, logging, config, dtypes, clocks: nothing of a communicator
#   2 platform   the CUDA driver table;  kernels: the device code and its argument ABI
#   3 bootstrap  sockets, TLS, crypto, the handshake, the bootstrap, unique ids, the agreement
#   4 algo, transport (with transport/verbs)   the algorithms and the transports under them
#   5 device     the device runtime and its paths
#   6 core       the communicator, the call dispatch, groups, split: the C entry points
#   7 nccl, tools        a library and programs built on the whole
#   8 tests              the tests, which may reach into any layer
#
# Also: CLB_HAVE_CUDA (whether this build has the device runtime) is tested only in the device
# runtime, platform, core's C entry points listed below, and tests.
#
# There are no exceptions, and there must be none: the algorithms and transports see the
# communicator as a clb::CommContext (bootstrap/comm_context.h), the device runtime as a
# clb::DeviceCommContext (device/device_context.h); what a layer needs from one above goes through
# an interface of its own (a virtual function of its context, as markFailed and hostCollective
# are), never through an include that points up.
#   bash scripts/check-layers.sh            exit 0 clean, 1 with every violation listed
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../src"

layer() {  # layer PATH: the layer of a file or an include path, or nothing when outside the tree
  case $1 in
  colibri/* | include/*) echo 0 ;;
  base/*) echo 1 ;;
  platform/* | kernels/*) echo 2 ;;
  bootstrap/*) echo 3 ;;
  algo/* | transport/*) echo 4 ;;
  device/*) echo 5 ;;
  core/*) echo 6 ;;
  nccl/* | tools/*) echo 7 ;;
  tests/*) echo 8 ;;
  esac
}

fail=0
while IFS= read -r f; do
  own=$(layer "$f")
  [[ -z $own ]] && continue
  while IFS= read -r inc; do
    to=$(layer "$inc")
    [[ -z $to ]] && continue  # a system or third-party header
    ((to <= own)) && continue
    echo "check-layers: $f (layer $own) includes $inc (layer $to): a layer includes only its own and those below"
    fail=1
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(find . -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' -o -name '*.inc' \) | sed 's|^\./||' | sort)

while IFS= read -r f; do
  case $f in device/* | platform/* | tests/* | kernels/*) continue ;; esac
  # Outside the device runtime, code calls its entry points (device/runtime.h, which every build
  # has: without CUDA they say so) instead of testing the build.
  echo "check-layers: $f tests CLB_HAVE_CUDA: only the device runtime does (call into device/runtime.h instead)"
  fail=1
done < <(grep -rl "CLB_HAVE_CUDA" --include='*.h' --include='*.cc' --include='*.cu' --include='*.cuh' . | sed 's|^\./||' | sort)

if ((fail == 0)); then
  echo "check-layers: every include points down"
fi
exit $fail
