// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Device collectives inside a node: two kernels per call on the caller's stream, synchronized with
// peers through flags in device memory (no host round trip, so the call is asynchronous and can be
// captured in a CUDA graph). See ClbDevCallArgs in kernel_abi.h.
//  post:   wait until every rank finished reading this rank's staging of the same parity (two
//          calls ago), copy the input in, then tell every rank "posted[me] = seq".
//  gather: wait until every rank posted seq, combine their staged data in rank order into the
//          output, then tell every rank "done[me] = seq".
// A wait that outlasts timeoutNs marks the error word (device and mapped host) and returns, so a
// dead peer ends in an error on the host's next call instead of a hung GPU.
#include "kernels/reduce_device.cuh"

namespace {

__device__ __forceinline__ unsigned long long globalTimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Thread 0 of the block waits until word >= v for every rank's word; false on timeout.
__device__ bool waitAll(const ClbDevCallArgs& a, unsigned long long* words, unsigned long long v) {
  const unsigned long long deadline = globalTimer() + a.timeoutNs;
  for (int p = 0; p < a.nranks; p++) {
    volatile unsigned long long* w = words + p;
    while (*w < v) {
      if (globalTimer() > deadline) {
        atomicExch(&a.flags[a.rank]->error, 1u);
        *(volatile unsigned int*)a.hostError = 1u;
        return false;
      }
      __nanosleep(256);
    }
  }
  __threadfence();
  return true;
}

// This call's number: calls completed so far + 1 (stream order: the previous gather is finished).
__device__ __forceinline__ unsigned long long callNumber(const ClbDevCallArgs& a) {
  return *reinterpret_cast<volatile unsigned long long*>(&a.flags[a.rank]->calls) + 1;
}

// Last block out announces `seq` in word [rank] of every rank's flag block (field at `fieldOff`),
// and with `finish` counts the call as completed.
__device__ void announce(const ClbDevCallArgs& a, unsigned long long seq, int counter, size_t fieldOff, bool finish) {
  __syncthreads();
  if (threadIdx.x != 0) return;
  __threadfence_system();
  ClbDevFlags* me = a.flags[a.rank];
  if (atomicAdd(&me->blocks[counter], 1u) != gridDim.x - 1) return;
  me->blocks[counter] = 0;
  __threadfence_system();
  for (int p = 0; p < a.nranks; p++) {
    auto* words = reinterpret_cast<volatile unsigned long long*>(reinterpret_cast<char*>(a.flags[p]) + fieldOff);
    words[a.rank] = seq;
  }
  if (finish) *reinterpret_cast<volatile unsigned long long*>(&me->calls) = seq;
  __threadfence_system();
}

template <typename S>
__device__ void reduceStaged(const ClbDevCallArgs& a, size_t half, unsigned long long tid, unsigned long long stride) {
  ClbReduceArgs r;
  r.dst = a.out;
  for (int p = 0; p < a.nranks; p++) r.srcs[p] = a.staging[p] + half + a.srcOffset;
  r.k = a.nranks;
  r.op = a.op;
  r.nranks = a.nranks;
  r.divide = 1;
  r.n = a.count;
  clbk::reduceRange<S>(r, tid, stride);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(512) clb_dev_post(const ClbDevCallArgs a) {
  const unsigned long long seq = callNumber(a);
  const size_t half = (seq & 1) * a.half;
  __shared__ int ok;
  if (threadIdx.x == 0) ok = waitAll(a, a.flags[a.rank]->done, seq >= 2 ? seq - 2 : 0);
  __syncthreads();
  if (!ok) return;
  const unsigned long long tid = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (int i = 0; i < a.inSlices; i++)
    clbk::copyRange(a.staging[a.rank] + half + i * a.inBytes, static_cast<const char*>(a.in) + i * a.inStride,
                    a.inBytes, tid, stride);
  announce(a, seq, (int)(seq & 1), offsetof(ClbDevFlags, posted), false);
}

extern "C" __global__ void __launch_bounds__(512) clb_dev_gather(const ClbDevCallArgs a) {
  const unsigned long long seq = callNumber(a);
  const size_t half = (seq & 1) * a.half;
  __shared__ int ok;
  if (threadIdx.x == 0) ok = waitAll(a, a.flags[a.rank]->posted, seq);
  __syncthreads();
  if (!ok) return;
  const unsigned long long tid = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  if (a.mode == 0) {
    switch (a.type) {
      case 0: reduceStaged<int8_t>(a, half, tid, stride); break;
      case 1: reduceStaged<uint8_t>(a, half, tid, stride); break;
      case 2: reduceStaged<int32_t>(a, half, tid, stride); break;
      case 3: reduceStaged<uint32_t>(a, half, tid, stride); break;
      case 4: reduceStaged<int64_t>(a, half, tid, stride); break;
      case 5: reduceStaged<uint64_t>(a, half, tid, stride); break;
      case 6: reduceStaged<__half>(a, half, tid, stride); break;
      case 7: reduceStaged<__nv_bfloat16>(a, half, tid, stride); break;
      case 8: reduceStaged<float>(a, half, tid, stride); break;
      case 9: reduceStaged<double>(a, half, tid, stride); break;
    }
  } else if (a.mode == 1) {
    for (int p = 0; p < a.nranks; p++)
      clbk::copyRange(static_cast<char*>(a.out) + p * a.outStride, a.staging[p] + half, a.count, tid, stride);
  } else {
    clbk::copyRange(a.out, a.staging[a.root] + half, a.count, tid, stride);
  }
  announce(a, seq, 2 + (int)(seq & 1), offsetof(ClbDevFlags, done), true);
}
