#!/usr/bin/env bash
# linux-arm64 (aarch64): cross-builds the native library, the NCCL drop-in, the verbs plugin and the
# native tests with Debian's cross toolchain (src/cmake/linux-arm64.cmake) into build/arm64, then
# runs a bounded part of the native suite under qemu-aarch64 (user mode): the host collectives and
# their data types, the bootstrap, split and shrink, point-to-point and all-to-all, the shm
# segments' ownership and the drop-in's host tests, over shm, socket, socket+TLS and the verbs
# stand-in, with rank threads and rank processes (the kernel runs aarch64 programs through qemu:
# binfmt_misc, registered here as root); the shared-memory and process tests once more with 64 KiB
# pages. scripts/test.sh calls it.
#   bash scripts/test-arm64.sh          COLIBRI_ARM64_FILTER / COLIBRI_ARM64_NCCL_FILTER: other tests
# Emulation keeps x86-64's stronger memory order, so it cannot show a missing acquire or release
# (docs/platforms.md says how those were checked); it shows the build, the layouts, the arithmetic
# and the logic on aarch64. Tests that bound how soon something shows and read
# COLIBRI_TEST_SLOWDOWN stretch their bounds by 10 here. Installs what it needs
# (g++-aarch64-linux-gnu, qemu-user and its binfmt entry, the aarch64 libc) with apt-get as root.
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$COLIBRI_ROOT"

# qemu-user-binfmt is only a recommendation of qemu-user, which ensure_tools leaves out: named.
ensure_tools cmake:cmake make:make openssl:openssl aarch64-linux-gnu-g++:g++-aarch64-linux-gnu \
  aarch64-linux-gnu-readelf:binutils-aarch64-linux-gnu qemu-aarch64:qemu-user \
  /usr/lib/binfmt.d/qemu-aarch64.conf:qemu-user-binfmt /usr/aarch64-linux-gnu/include/stdio.h:libc6-dev-arm64-cross \
  /usr/src/googletest/CMakeLists.txt:googletest
jobs=$(nproc 2>/dev/null || echo 2)
sysroot=/usr/aarch64-linux-gnu
toolchain=$COLIBRI_ROOT/src/cmake/linux-arm64.cmake
prefix=$COLIBRI_ROOT/build/arm64-prefix

# GoogleTest for aarch64, from Debian's sources (the packaged libraries are x86-64's).
if [[ ! -f $prefix/lib/libgtest.a ]]; then
  log "arm64: GoogleTest from /usr/src/googletest"
  cmake -S /usr/src/googletest -B build/arm64-gtest -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib -DBUILD_GMOCK=OFF >/dev/null
  cmake --build build/arm64-gtest -j "$jobs" >/dev/null
  cmake --install build/arm64-gtest >/dev/null
fi

log "arm64: cmake -S src -B build/arm64 (src/cmake/linux-arm64.cmake)"
cmake -S src -B build/arm64 -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DCMAKE_BUILD_TYPE=Release \
  -DCOLIBRI_ARM64_PREFIX="$prefix" -DCOLIBRI_KERNEL_IMAGES=OFF >/dev/null
cmake --build build/arm64 -j "$jobs" --target colibri_package colibri_tests colibri_nccl_tests colibri_test_libs
for lib in libcolibri.so.0 libnccl.so.2 libcolibri_verbs.so; do
  [[ -f build/arm64/$lib ]] || die "build/arm64/$lib was not built"
  machine=$(aarch64-linux-gnu-readelf -h "build/arm64/$lib" | sed -n 's/^ *Machine: *//p')
  [[ $machine == AArch64 ]] || die "build/arm64/$lib is not an aarch64 library (its machine: $machine)"
done
bash scripts/check-glibc.sh build/arm64/libcolibri.so.0 build/arm64/libnccl.so.2 build/arm64/libcolibri_verbs.so

export QEMU_LD_PREFIX=$sysroot   # the aarch64 libraries, for programs started through binfmt_misc
export COLIBRI_TEST_SLOWDOWN=10  # about 10 x slower than native: the bounds of tests that read it

# Rank processes: the tests start their own binary again, which the kernel runs only where
# binfmt_misc sends aarch64 programs to qemu. Debian's entry (qemu-user-binfmt's file) is
# registered here when missing; that takes root and a kernel that lets binfmt_misc be mounted
# (the entry is kernel-wide: a privileged container registers it for its host). Checked by
# running an aarch64 program directly; without it, this step fails, saying what to do.
register_arm64_binfmt
timeout 120 build/arm64/colibri_nccl_tests --gtest_list_tests >/dev/null 2>&1 \
  || die "arm64: this kernel does not run aarch64 programs through qemu (binfmt_misc), which the tests of rank processes need: as root, mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc and write the line of /usr/lib/binfmt.d/qemu-aarch64.conf into its register file (or run with COLIBRI_SKIP_ARM64=1)"

# TLS: the tests load libssl.so.3 of aarch64, which the cross sysroot lacks: Debian's package,
# unpacked into build/arm64-prefix/ssl (common.sh's unpack_arm64_debs), not installed.
ssl=$prefix/ssl/usr/lib/aarch64-linux-gnu
if [[ ! -f $ssl/libssl.so.3 ]]; then
  log "arm64: libssl3:arm64 for the TLS tests (unpacked into $prefix/ssl)"
  unpack_arm64_debs "$prefix/ssl" libssl3
fi
export COLIBRI_REQUIRE_TLS_TESTS=1  # as on x86-64: a TLS test that cannot run fails
export COLIBRI_PLUGIN_DIR=$COLIBRI_ROOT/build/arm64  # the aarch64 verbs plugin; its stand-in libibverbs and libssl:
export LD_LIBRARY_PATH=$COLIBRI_ROOT/build/arm64/verbs-emu:$ssl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

filter=${COLIBRI_ARM64_FILTER:-'Host/Collectives.*:Collectives.*:Transports/Barrier.*:Host/PreMulSum.*:AllTypesOps/DtypeReduce.*:DtypeSemantics.*:Bootstrap.*:BootstrapTree.*:UniqueId.*:RingOrder.*:Split.*:Transports/SplitOver.*:Transports/ShrinkOver.*:Transports/ShrinkAfterKill.*:Transports/Peer*:Host/PeerMatrix.*:Segments.*:ShmOwnership.*:Transports/AsyncErrorProcesses.*:NcclAbi.*:Sha256.*:HmacSha256.*'}
nccl_filter=${COLIBRI_ARM64_NCCL_FILTER:-'*'}
emu=(qemu-aarch64 -L "$sysroot")
# run BINARY FILTER SECONDS: the tests FILTER selects (at least one) under qemu, within SECONDS.
run() {
  local bin=$1 filter=$2 limit=$3 listed
  listed=$("${emu[@]}" "build/arm64/$bin" --gtest_filter="$filter" --gtest_list_tests | grep -c '^  ' || true)
  ((listed > 0)) || die "arm64: the filter $filter selects no test of $bin"
  log "arm64: $bin under qemu-aarch64, $listed tests, ${QEMU_PAGESIZE:-4096}-byte pages ($filter)"
  timeout -k 10 "$limit" "${emu[@]}" "build/arm64/$bin" --gtest_filter="$filter" --gtest_brief=1 \
    || die "arm64: $bin failed under qemu-aarch64 (exit code $?; 124: past $limit s)"
}
run colibri_tests "$filter" 1200
run colibri_nccl_tests "$nccl_filter" 600
# Many aarch64 kernels (RHEL's, some cloud images) use 64 KiB pages. qemu gives the program (and,
# through the environment, the rank processes it starts) that page size: the shared-memory
# segments, their ownership, point-to-point and the rank processes' failures again.
if [[ -z ${COLIBRI_ARM64_FILTER:-} ]]; then
  QEMU_PAGESIZE=65536 run colibri_tests 'Host/Collectives.*shm*:Segments.*:ShmOwnership.*:Transports/Peer*:Host/PeerMatrix.*:Transports/ShrinkOver.*shm*:Transports/AsyncErrorProcesses.*shm*' 600
fi
log "arm64: passed"
