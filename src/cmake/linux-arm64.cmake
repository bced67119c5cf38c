# CMake toolchain file: libcolibri and its tests for linux-arm64 (aarch64), cross-built on an
# x86-64 Debian or Ubuntu host with its cross toolchain (apt-get install g++-aarch64-linux-gnu
# qemu-user). scripts/test-arm64.sh uses it; by hand:
#   cmake -S src -B build/arm64 -DCMAKE_TOOLCHAIN_FILE=src/cmake/linux-arm64.cmake
# The kernel images (cubin, PTX) do not depend on the host's architecture: an x86-64 build makes
# them. cuda.h and infiniband/verbs.h give types only (nothing links libcuda or libibverbs), so the
# build host's copies serve. Test binaries run under qemu-aarch64 (user mode) with the cross
# sysroot, through CMAKE_CROSSCOMPILING_EMULATOR (ctest and the tests' discovery use it).
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(COLIBRI_ARM64_SYSROOT /usr/aarch64-linux-gnu CACHE PATH "the aarch64 libraries (libc6-dev-arm64-cross)")
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Libraries and packages (GoogleTest built for aarch64: COLIBRI_ARM64_PREFIX) from the aarch64
# side only; headers from both (cuda.h, verbs.h); programs (nvcc, cmake's helpers) from the host.
set(CMAKE_FIND_ROOT_PATH ${COLIBRI_ARM64_SYSROOT} ${COLIBRI_ARM64_PREFIX})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L ${COLIBRI_ARM64_SYSROOT})
