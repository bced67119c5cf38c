/* Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 *
 * Colibri's nccl.h compiles as C (C99, -Wall -Wextra -Werror) and its initializers work there
 * (tests/nccl_abi_test.cc checks the values). Built with the tests; nothing to run. */
#include "nccl/nccl.h"

int colibriNcclHeaderCompilesAsC(void);
int colibriNcclHeaderCompilesAsC(void) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  ncclUniqueId id;
  id.internal[0] = 0;
  return (int)config.size + (int)sim.size + id.internal[0] + (int)sizeof(ncclComm_t) + ncclMaxRedOp % 2;
}
