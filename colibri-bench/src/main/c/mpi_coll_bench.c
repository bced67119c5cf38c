/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 *
 * The Open MPI side of scripts/bench-vs-mpi.sh: the four collectives on float32 host buffers,
 * timed exactly as Colibri's perf tool times them (every rank starts after a barrier, runs
 * -n iterations, the slowest rank's time / iterations), sizes as nccl-tests (allGather and
 * reduceScatter: the whole buffer of all ranks). Prints CSV:
 *   collective,ranks,size_bytes,time_us,algbw_gbps,busbw_gbps
 * Usage: mpirun -np N mpi_coll_bench MIN_BYTES MAX_BYTES [ITERS] [WARMUP]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  long long minBytes = argc > 1 ? atoll(argv[1]) : 1024, maxBytes = argc > 2 ? atoll(argv[2]) : 64 << 20;
  int iters = argc > 3 ? atoi(argv[3]) : 20, warmup = argc > 4 ? atoi(argv[4]) : 5;
  size_t cap = (size_t)maxBytes * n;
  float* send = malloc(cap);
  float* recv = malloc(cap);
  for (size_t i = 0; i < cap / 4; i++) send[i] = (float)(rank + i % 7);
  const char* names[] = {"allReduce", "allGather", "reduceScatter", "broadcast"};
  if (rank == 0) printf("collective,ranks,size_bytes,time_us,algbw_gbps,busbw_gbps\n");
  for (int c = 0; c < 4; c++) {
    double factor = c == 0 ? 2.0 * (n - 1) / n : c == 3 ? 1.0 : (double)(n - 1) / n;
    for (long long bytes = minBytes; bytes <= maxBytes; bytes *= 2) {
      int count = (int)((c == 1 || c == 2) ? bytes / 4 / n : bytes / 4);
      if (count == 0) continue;
      int* counts = NULL;
      if (c == 2) {
        counts = malloc(sizeof(int) * n);
        for (int p = 0; p < n; p++) counts[p] = count;
      }
      double t = 0;
      for (int phase = 0; phase < 2; phase++) {
        int k = phase == 0 ? warmup : iters;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < k; i++) {
          switch (c) {
            case 0: MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
            case 1: MPI_Allgather(send, count, MPI_FLOAT, recv, count, MPI_FLOAT, MPI_COMM_WORLD); break;
            case 2: MPI_Reduce_scatter(send, recv, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
            case 3: MPI_Bcast(rank == 0 ? send : recv, count, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
          }
        }
        t = (MPI_Wtime() - t0) / k;
      }
      double tmax = 0;
      MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      long long size = (c == 1 || c == 2) ? (long long)count * 4 * n : (long long)count * 4;
      if (rank == 0) {
        double algbw = size / tmax / 1e9;
        printf("%s,%d,%lld,%.3f,%.6f,%.6f\n", names[c], n, size, tmax * 1e6, algbw, algbw * factor);
      }
      free(counts);
    }
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
