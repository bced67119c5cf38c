// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Ranks as threads for the native tests: one communicator per thread, a body per rank.
#pragma once

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"

namespace clbtest {

// Creates nranks communicators, each from clbConfigInit changed by configure(rank, cfg), and runs
// body(rank, comm) on every rank that initialized; returns each rank's init error ("" when it
// succeeded; never empty on failure).
inline std::vector<std::string> runThreadRanks(int nranks, const std::function<void(int, clbConfig_t*)>& configure,
                                               const std::function<void(int, clbComm_t)>& body) {
  clbUniqueId id;
  if (clbGetUniqueId(&id) != clbSuccess) return std::vector<std::string>(nranks, clbGetLastError());
  std::vector<std::thread> ts;
  std::vector<std::string> errors(nranks);
  for (int r = 0; r < nranks; r++) {
    ts.emplace_back([&, r] {
      clbConfig_t cfg;
      clbConfigInit(&cfg);
      configure(r, &cfg);
      clbComm_t comm = nullptr;
      if (clbCommInitRank(&comm, &id, r, nranks, &cfg) != clbSuccess) {
        errors[r] = clbGetLastError();
        if (errors[r].empty()) errors[r] = "(failed without a message)";
        return;
      }
      body(r, comm);
      clbCommDestroy(comm);
    });
  }
  for (auto& t : ts) t.join();
  return errors;
}

}  // namespace clbtest
