// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// clbCommSplit on device buffers: 4 ranks (threads, one GPU) split into rows (color rank / 2)
// and columns (color rank % 2); device all-reduces on both children and on the parent, eager and
// captured into one CUDA graph replayed with new data, each checked element by element against
// sums computed on the host. Skipped without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "colibri/colibri.h"
#include "platform/cuda/driver.h"
#include "tests/cuda_test_util.h"

namespace {

// The value rank p puts at element e in round `round` (small integers: float sums are exact).
float value(int p, size_t e, int round) { return (float)((p + 1) * 100 + (int)(e % 89) + round * 3); }

// Fills `in` for round `round`, then checks `out` against the sum over `members`.
std::string check(const Driver* d, CUdeviceptr out, size_t count, const std::vector<int>& members, int round,
                  const char* what) {
  std::vector<float> got(count);
  CU_OK(d->cuMemcpyDtoH(got.data(), out, count * 4));
  for (size_t e = 0; e < count; e++) {
    float want = 0;
    for (int p : members) want += value(p, e, round);
    if (got[e] != want)
      return std::string(what) + " round " + std::to_string(round) + " element " + std::to_string(e) + ": got " +
             std::to_string(got[e]) + " want " + std::to_string(want);
  }
  return "";
}

std::string splitRank(const clbUniqueId& id, int rank, int n) {
  const Driver* d = nullptr;
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, rank, n, &d, &stream, &comm); !e.empty()) return e;
  clbComm_t row = nullptr, col = nullptr;
  if (clbCommSplit(comm, rank / 2, rank, nullptr, &row) != clbSuccess)
    return std::string("split into rows: ") + clbGetLastError();
  if (clbCommSplit(comm, rank % 2, rank, nullptr, &col) != clbSuccess)
    return std::string("split into columns: ") + clbGetLastError();
  const std::vector<int> rowMembers{rank / 2 * 2, rank / 2 * 2 + 1}, colMembers{rank % 2, rank % 2 + 2},
      all{0, 1, 2, 3};
  const size_t count = 70001;  // 280 KB per rank, beyond the LL path: the direct path
  CUdeviceptr in, outRow, outCol, outAll;
  CU_OK(d->cuMemAlloc(&in, count * 4));
  CU_OK(d->cuMemAlloc(&outRow, count * 4));
  CU_OK(d->cuMemAlloc(&outCol, count * 4));
  CU_OK(d->cuMemAlloc(&outAll, count * 4));
  auto fill = [&](int round) -> std::string {
    std::vector<float> v(count);
    for (size_t e = 0; e < count; e++) v[e] = value(rank, e, round);
    CU_OK(upload(d, in, v.data(), count * 4));
    return "";
  };
  auto enqueue = [&](size_t c) -> std::string {
    if (clbAllReduce((void*)in, (void*)outRow, c, clbFloat32, clbSum, row, stream) != clbSuccess)
      return std::string("row allReduce: ") + clbGetLastError();
    if (clbAllReduce((void*)in, (void*)outCol, c, clbFloat32, clbSum, col, stream) != clbSuccess)
      return std::string("column allReduce: ") + clbGetLastError();
    if (clbAllReduce((void*)in, (void*)outAll, c, clbFloat32, clbSum, comm, stream) != clbSuccess)
      return std::string("parent allReduce: ") + clbGetLastError();
    return "";
  };
  auto checkAll = [&](int round) -> std::string {
    for (auto [out, members, what] :
         {std::make_tuple(outRow, &rowMembers, "row"), std::make_tuple(outCol, &colMembers, "column"),
          std::make_tuple(outAll, &all, "parent")})
      if (std::string e = check(d, out, count, *members, round, what); !e.empty()) return e;
    return "";
  };
  std::string err;
  // Eager, twice.
  for (int round = 0; round < 2 && err.empty(); round++) {
    if (err.empty()) err = fill(round);
    if (err.empty()) err = enqueue(count);
    if (err.empty() && d->cuStreamSynchronize(stream) != CUDA_SUCCESS) err = "stream synchronize failed";
    if (err.empty()) err = checkAll(round);
  }
  // Captured: the three calls in one graph, replayed with new data.
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  if (err.empty()) {
    CU_OK(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    err = enqueue(count);
    CU_OK(d->cuStreamEndCapture(stream, &graph));
    if (err.empty()) CU_OK(d->cuGraphInstantiateWithFlags(&exec, graph, 0));
  }
  for (int round = 2; round < 5 && err.empty(); round++) {
    err = fill(round);
    if (err.empty()) err = replay(exec, stream, {row, col, comm});
    if (err.empty()) CU_OK(d->cuStreamSynchronize(stream));
    if (err.empty()) err = checkAll(round);
  }
  if (exec) d->cuGraphExecDestroy(exec);
  if (graph) d->cuGraphDestroy(graph);
  clbCommDestroy(row);
  clbCommDestroy(col);
  clbCommDestroy(comm);
  for (CUdeviceptr p : {in, outRow, outCol, outAll}) d->cuMemFree(p);
  d->cuStreamDestroy(stream);
  return err;
}

TEST(DeviceSplit, RowsAndColumnsOfFourRanksEagerAndInAGraph) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  runThreads(4, splitRank);
}

}  // namespace
