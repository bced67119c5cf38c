// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Colibri's nccl.h (src/nccl/nccl.h) against NCCL 2.28's binary interface: every enumerator's
// value, ncclUniqueId's size, ncclConfig_t's field offsets and size and what
// NCCL_CONFIG_INITIALIZER sets, ncclSimInfo_t, the version macros, and the values of ncclMaxRedOp
// and NCCL_CONFIG_UNDEF_INT. A program built against NVIDIA's 2.28 header passes these structs
// and numbers to libnccl.so.2 as they are, so each is checked here by number, not by name.
// tests/nccl_header_c.c compiles the header as C (C99) in the same build.
#include <gtest/gtest.h>

#include <climits>
#include <cstddef>

#include "nccl/nccl.h"

namespace {

TEST(NcclAbi, ResultsTypesAndOperationsHaveNcclsValues) {
  const int results[] = {ncclSuccess,       ncclUnhandledCudaError, ncclSystemError,
                         ncclInternalError, ncclInvalidArgument,    ncclInvalidUsage,
                         ncclRemoteError,   ncclInProgress,         ncclNumResults};
  for (int i = 0; i < 9; i++) EXPECT_EQ(results[i], i) << "ncclResult_t enumerator " << i;
  EXPECT_EQ(ncclInt8, 0);
  EXPECT_EQ(ncclChar, 0);
  EXPECT_EQ(ncclUint8, 1);
  EXPECT_EQ(ncclInt32, 2);
  EXPECT_EQ(ncclInt, 2);
  EXPECT_EQ(ncclUint32, 3);
  EXPECT_EQ(ncclInt64, 4);
  EXPECT_EQ(ncclUint64, 5);
  EXPECT_EQ(ncclFloat16, 6);
  EXPECT_EQ(ncclHalf, 6);
  EXPECT_EQ(ncclFloat32, 7);
  EXPECT_EQ(ncclFloat, 7);
  EXPECT_EQ(ncclFloat64, 8);
  EXPECT_EQ(ncclDouble, 8);
  EXPECT_EQ(ncclBfloat16, 9);
  EXPECT_EQ(ncclFloat8e4m3, 10);
  EXPECT_EQ(ncclFloat8e5m2, 11);
  EXPECT_EQ(ncclNumTypes, 12);
  EXPECT_EQ(ncclSum, 0);
  EXPECT_EQ(ncclProd, 1);
  EXPECT_EQ(ncclMax, 2);
  EXPECT_EQ(ncclMin, 3);
  EXPECT_EQ(ncclAvg, 4);
  EXPECT_EQ(ncclNumOps, 5);
  EXPECT_EQ((long long)ncclMaxRedOp, 2147483647LL);
  EXPECT_EQ(sizeof(ncclRedOp_t), 4u);
  EXPECT_EQ(sizeof(ncclDataType_t), 4u);
  EXPECT_EQ(sizeof(ncclResult_t), 4u);
  EXPECT_EQ(ncclScalarDevice, 0);
  EXPECT_EQ(ncclScalarHostImmediate, 1);
}

TEST(NcclAbi, UniqueIdIs128BytesAndVersionIs2_28) {
  EXPECT_EQ(sizeof(ncclUniqueId), 128u);
  EXPECT_EQ(alignof(ncclUniqueId), 1u);
  EXPECT_EQ(NCCL_VERSION(2, 8, 4), 2804);    // up to 2.8: three digits for minor and patch
  EXPECT_EQ(NCCL_VERSION(2, 28, 9), 22809);  // later: four
  EXPECT_EQ(NCCL_VERSION(2, 28, 3), 22803);
  EXPECT_EQ(NCCL_VERSION_CODE, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH));
  EXPECT_EQ(NCCL_SPLIT_NOCOLOR, -1);
  EXPECT_EQ(NCCL_CONFIG_UNDEF_INT, INT_MIN);
  EXPECT_EQ(NCCL_WIN_REQUIRED_ALIGNMENT, 4096);
}

// NCCL 2.29.7's calls exported beside 2.28's: their values and the properties' layout.
TEST(NcclAbi, Nccl2_29sSuspendStatisticsAndPropertiesHaveItsValuesAndLayout) {
  EXPECT_EQ(NCCL_SUSPEND_MEM, 0x01);
  EXPECT_EQ(NCCL_API_MAGIC, 0xcafebeef);
  EXPECT_EQ(NCCL_WIN_STRICT_ORDERING, 0x02);
  EXPECT_EQ((int)ncclStatGpuMemSuspend, 0);
  EXPECT_EQ((int)ncclStatGpuMemSuspended, 1);
  EXPECT_EQ((int)ncclStatGpuMemPersist, 2);
  EXPECT_EQ((int)ncclStatGpuMemTotal, 3);
  EXPECT_EQ((int)NCCL_GIN_TYPE_NONE, 0);
  EXPECT_EQ((int)NCCL_GIN_TYPE_PROXY, 2);
  EXPECT_EQ((int)NCCL_GIN_TYPE_GDAKI, 3);
  EXPECT_EQ(offsetof(ncclCommProperties_t, rank), 16u);
  EXPECT_EQ(offsetof(ncclCommProperties_t, nRanks), 20u);
  EXPECT_EQ(offsetof(ncclCommProperties_t, cudaDev), 24u);
  EXPECT_EQ(offsetof(ncclCommProperties_t, nvmlDev), 28u);
  EXPECT_EQ(offsetof(ncclCommProperties_t, deviceApiSupport), 32u);
  EXPECT_EQ(offsetof(ncclCommProperties_t, multimemSupport), 33u);
  EXPECT_EQ(offsetof(ncclCommProperties_t, ginType), 36u);
  EXPECT_EQ(offsetof(ncclCommProperties_t, nLsaTeams), 40u);
  EXPECT_EQ(offsetof(ncclCommProperties_t, hostRmaSupport), 44u);
  EXPECT_EQ(offsetof(ncclCommProperties_t, railedGinType), 48u);
  EXPECT_EQ(sizeof(ncclCommProperties_t), 56u);
  ncclCommProperties_t p = NCCL_COMM_PROPERTIES_INITIALIZER;
  EXPECT_EQ(p.size, sizeof(ncclCommProperties_t));
  EXPECT_EQ(p.magic, 0xcafebeefu);
  EXPECT_EQ(p.version, (unsigned)NCCL_VERSION_CODE);
}

TEST(NcclAbi, ConfigHasNccl2_28sLayoutAndInitializer) {
  EXPECT_EQ(sizeof(ncclConfig_t), 80u);
  EXPECT_EQ(offsetof(ncclConfig_t, size), 0u);
  EXPECT_EQ(offsetof(ncclConfig_t, magic), 8u);
  EXPECT_EQ(offsetof(ncclConfig_t, version), 12u);
  EXPECT_EQ(offsetof(ncclConfig_t, blocking), 16u);
  EXPECT_EQ(offsetof(ncclConfig_t, cgaClusterSize), 20u);
  EXPECT_EQ(offsetof(ncclConfig_t, minCTAs), 24u);
  EXPECT_EQ(offsetof(ncclConfig_t, maxCTAs), 28u);
  EXPECT_EQ(offsetof(ncclConfig_t, netName), 32u);
  EXPECT_EQ(offsetof(ncclConfig_t, splitShare), 40u);
  EXPECT_EQ(offsetof(ncclConfig_t, trafficClass), 44u);
  EXPECT_EQ(offsetof(ncclConfig_t, commName), 48u);
  EXPECT_EQ(offsetof(ncclConfig_t, collnetEnable), 56u);
  EXPECT_EQ(offsetof(ncclConfig_t, CTAPolicy), 60u);
  EXPECT_EQ(offsetof(ncclConfig_t, shrinkShare), 64u);
  EXPECT_EQ(offsetof(ncclConfig_t, nvlsCTAs), 68u);
  EXPECT_EQ(offsetof(ncclConfig_t, nChannelsPerNetPeer), 72u);
  EXPECT_EQ(offsetof(ncclConfig_t, nvlinkCentricSched), 76u);
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  EXPECT_EQ(c.size, sizeof(ncclConfig_t));
  EXPECT_EQ(c.magic, 0xcafebeefu);
  EXPECT_EQ(c.version, 22809u);
  for (int v : {c.blocking, c.cgaClusterSize, c.minCTAs, c.maxCTAs, c.splitShare, c.trafficClass, c.collnetEnable,
                c.CTAPolicy, c.shrinkShare, c.nvlsCTAs, c.nChannelsPerNetPeer, c.nvlinkCentricSched})
    EXPECT_EQ(v, INT_MIN);
  EXPECT_EQ(c.netName, nullptr);
  EXPECT_EQ(c.commName, nullptr);
}

TEST(NcclAbi, SimInfoHasNccl2_28sLayoutAndInitializer) {
  EXPECT_EQ(sizeof(ncclSimInfo_t), 24u);
  EXPECT_EQ(offsetof(ncclSimInfo_t, estimatedTime), 16u);
  ncclSimInfo_t s = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(s.size, 24u);
  EXPECT_EQ(s.magic, 0x74685283u);
  EXPECT_EQ(s.version, 22809u);
  EXPECT_EQ(s.estimatedTime, -1.0f);
}

}  // namespace
