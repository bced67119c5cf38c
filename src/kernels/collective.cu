// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Device collectives inside a node: one kernel per call on the caller's stream, synchronized with
// peers through flags in device memory (no host round trip, so the call is asynchronous and can be
// captured in a CUDA graph). See ClbDevCallArgs in kernel_abi.h.
//  clb_dev_staged: wait until every rank finished reading the slots of this parity (two calls
//          ago), write the input into this rank's slot of every rank's staging, tell every rank
//          "posted[me] = seq"; wait until every rank posted seq, combine the slots of this rank's
//          own staging in rank order into the output, tell every rank "done[me] = seq". Every
//          wait polls local memory and every transfer is a write: no round trip over the link.
//  clb_dev_direct: write this call's send/recv addresses (windows: where each rank's send buffer
//          lies, windowSources) into every rank's flag block, tell
//          every rank "posted[me] = seq", wait for everyone's; read the peers' buffers directly (allReduce two-shot:
//          reduce this rank's segment from every send buffer into its own output, "mid", then copy the other segments
//          from their owners' outputs); "done[me] = seq", and the kernel ends only when every rank is done, so no
//          buffer is reused while a peer still reads it.
// The blocks of one kernel wait for each other (through the announcements), so the host launches
// no more blocks than can be resident at once for every rank sharing the GPU.
// A wait that outlasts warnNs names the call and the ranks it waits for in mapped host memory
// (the watchdog logs it); one that outlasts timeoutNs marks the error word (device and mapped
// host) and returns, so a dead peer ends in an error the host sees at once
// (clbCommGetAsyncError) instead of a hung GPU.
#include "kernels/reduce_device.cuh"

// The image's contract, as a kernel name the host looks up at load (src/device/kernels.cc):
// an image built for another contract (a stale COLIBRI_KERNEL_DIR) is refused by name instead of
// faulting in a kernel. (A name, not a __constant__: functions are what the host already finds.)
#define CLB_ABI_KERNEL_(v) clb_kernel_abi_v##v
#define CLB_ABI_KERNEL(v) CLB_ABI_KERNEL_(v)
extern "C" __global__ void CLB_ABI_KERNEL(CLB_KERNEL_ABI_VERSION)() {}

namespace {

__device__ __forceinline__ unsigned long long globalTimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// This rank's calls and error as its kernels read them (ClbDevCallArgs::counters).
__device__ __forceinline__ unsigned long long* selfWords(const ClbDevCallArgs& a) {
  return reinterpret_cast<unsigned long long*>(a.counters + 4);
}

// What a stuck wait tells the host (ClbDevHostStatus): which ranks it still waits for, then the
// call; at the timeout also the error word, last, so the host that sees it sees the rest.
__device__ void noteRank(const ClbDevCallArgs& a, int p, unsigned long long seq, bool timedOut) {
  reinterpret_cast<volatile unsigned int*>(timedOut ? a.host->timedOutFor : a.host->waitingFor)[p] = (unsigned int)seq;
}
__device__ void publishWait(const ClbDevCallArgs& a, unsigned long long seq, bool timedOut) {
  volatile ClbDevHostStatus* h = a.host;
  __threadfence_system();
  if (!timedOut) {
    h->stuckColl = (unsigned int)a.coll;
    __threadfence_system();  // the host reads the call first, then (after a fence) its collective
    h->stuckCall = seq;
    return;
  }
  // The flag block's word with a plain store (it only ever goes from 0 to nonzero): the flags may
  // be in host memory, where some PCIe hosts have no atomics.
  // This rank's own word is in device memory: one atomic settles a race with a disagreement seen
  // at the same time (publishDisagreement), which then keeps its kind.
  if (atomicCAS(reinterpret_cast<unsigned int*>(selfWords(a)) + 2, 0u, (unsigned int)CLB_DEV_ERR_TIMEOUT) ==
      CLB_DEV_ERR_DISAGREE)
    return;
  *reinterpret_cast<volatile unsigned int*>(&a.flags[a.rank]->error) = CLB_DEV_ERR_TIMEOUT;
  __threadfence_system();
  h->errorColl = (unsigned int)a.coll;
  h->errorCall = seq;
  h->errorKind = CLB_DEV_ERR_TIMEOUT;
  __threadfence_system();
  h->error = 1u;
}

// ---- the agreement check (ClbDevFlags::callLine) ----

__device__ __forceinline__ void storeLine(char* p, unsigned long long v, unsigned int flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"((unsigned int)v), "r"(flag),
               "r"((unsigned int)(v >> 32)), "r"(flag)
               : "memory");
}

// One thread: `sig` as this rank's call line for call `seq` in every rank's flag block (its own
// call's description, or a line no call has, which fails the peers' kernels of that call at once).
__device__ __forceinline__ void writeCallLines(const ClbDevCallArgs& a, unsigned long long seq,
                                               unsigned long long sig) {
  for (int p = 0; p < a.nranks; p++)
    storeLine(reinterpret_cast<char*>(a.flags[p]->callLine[seq & 1][a.rank]), sig, CLB_DEV_LINE_FLAG(seq));
}

// Call `seq`, captured where other ranks of this process share the GPU, was replayed without
// clbGraphLaunch: the first thread to see it fails the communicator (one atomic on this rank's
// error word), tells the host, and writes a call line no call has (CLB_DEV_SIG_REPLAY) into
// every rank's flags, so that each peer's kernels of this call fail at once too, naming it.
__device__ void refuseReplay(const ClbDevCallArgs& a, unsigned long long seq) {
  if (atomicCAS(reinterpret_cast<unsigned int*>(selfWords(a)) + 2, 0u, (unsigned int)CLB_DEV_ERR_REPLAY) != 0u) return;
  writeCallLines(a, seq, CLB_DEV_SIG_REPLAY);
  *reinterpret_cast<volatile unsigned int*>(&a.flags[a.rank]->error) = CLB_DEV_ERR_REPLAY;
  volatile ClbDevHostStatus* h = a.host;
  h->errorColl = (unsigned int)a.coll;
  h->errorCall = seq;
  h->errorKind = CLB_DEV_ERR_REPLAY;
  __threadfence_system();
  h->error = 1u;
}

// One thread: this rank's description of call `seq` into its call line in every rank's flag block.
// Every kernel of a call does this first, before any wait, so that a peer waiting in any path (one
// whose count took it to another path, say) finds it.
__device__ __forceinline__ void postCallLine(const ClbDevCallArgs& a, unsigned long long seq) {
  writeCallLines(a, seq, a.sig);
}

// Rank p's call line for call `seq` in this rank's flag block: 0 not written yet, 1 the same
// description as this rank's, 2 another one (in *theirs).
__device__ __forceinline__ int peerCall(const ClbDevCallArgs& a, int p, unsigned long long seq,
                                        unsigned long long* theirs) {
  const unsigned int* at = a.flags[a.rank]->callLine[seq & 1][p];
  unsigned int x, f1, y, f2;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(x), "=r"(f1), "=r"(y), "=r"(f2)
               : "l"(at)
               : "memory");
  const unsigned int flag = CLB_DEV_LINE_FLAG(seq);
  if (f1 != flag || f2 != flag) return 0;
  *theirs = (unsigned long long)x | ((unsigned long long)y << 32);
  return *theirs == a.sig ? 1 : 2;
}

// Rank p made another call than this rank's call `seq`: the first thread of this rank to see a
// disagreement (one atomic on this rank's own error word, in device memory) tells the host both
// descriptions, and marks the communicator failed so that every later call ends at once.
__device__ __forceinline__ void publishDisagreement(const ClbDevCallArgs& a, unsigned long long seq, int p,
                                                    unsigned long long theirs) {
  if (atomicCAS(reinterpret_cast<unsigned int*>(selfWords(a)) + 2, 0u, (unsigned int)CLB_DEV_ERR_DISAGREE) != 0u)
    return;
  *reinterpret_cast<volatile unsigned int*>(&a.flags[a.rank]->error) = CLB_DEV_ERR_DISAGREE;
  volatile ClbDevHostStatus* h = a.host;
  h->errorColl = (unsigned int)a.coll;
  h->errorCall = seq;
  h->errorKind = CLB_DEV_ERR_DISAGREE;
  h->errorRank = p;
  h->errorSig = a.sig;
  h->errorPeerSig = theirs;
  __threadfence_system();
  h->error = 1u;
}

// An LL wait's slow path for rank p's line: true when this call must end now, because this rank
// already failed the communicator or rank p's call line shows another call (the one rank looked
// at: a loop over every rank here gave the LL kernel a stack frame on sm_90).
__device__ __forceinline__ bool peerFailed(const ClbDevCallArgs& a, int p, unsigned long long seq) {
  if (reinterpret_cast<volatile unsigned int*>(selfWords(a))[2]) return true;
  unsigned long long theirs;
  if (peerCall(a, p, seq, &theirs) != 2) return false;
  publishDisagreement(a, seq, p, theirs);
  return true;
}

// A wait's slow path: true when this call must end now, because another thread of this rank
// already failed the communicator, or a peer's call line for this call shows another call.
__device__ __forceinline__ bool callFailed(const ClbDevCallArgs& a, unsigned long long seq) {
  if (reinterpret_cast<volatile unsigned int*>(selfWords(a))[2]) return true;
  for (int p = 0; p < a.nranks; p++) {
    unsigned long long theirs;
    if (peerCall(a, p, seq, &theirs) == 2) {
      publishDisagreement(a, seq, p, theirs);
      return true;
    }
  }
  return false;
}

// How long one thread has waited: started at its first slow check, warned once past warnNs.
struct WaitClock {
  unsigned long long start = 0;
  bool warned = false;
  // 0: go on waiting; 1: past the warning threshold for the first time; 2: timed out.
  __device__ int check(const ClbDevCallArgs& a) {
    const unsigned long long t = globalTimer();
    if (start == 0) start = t;
    const unsigned long long waited = t - start;
    if (waited > a.timeoutNs) return 2;
    if (!warned && a.warnNs && waited > a.warnNs) {
      warned = true;
      return 1;
    }
    return 0;
  }
};

// Waits for rank p's call line of call `seq`; false when it shows another call, or on timeout.
__device__ __forceinline__ bool callLineAgrees(const ClbDevCallArgs& a, int p, unsigned long long seq,
                                               WaitClock& clock) {
  unsigned long long theirs;
  for (int spins = 0;; spins++) {
    const int c = peerCall(a, p, seq, &theirs);
    if (c == 1) return true;
    if (c == 2) {
      publishDisagreement(a, seq, p, theirs);
      return false;
    }
    if (spins >= 32) __nanosleep(64);  // a late peer: fewer loads (of host memory, on some paths)
    if ((spins & 1023) == 1023) {
      if (callFailed(a, seq)) return false;
      if (const int t = clock.check(a)) {
        noteRank(a, p, seq, t == 2);
        publishWait(a, seq, t == 2);
        if (t == 2) return false;
      }
    }
  }
}

// Thread 0 of the block waits until word >= v for every rank's word; false on timeout. `seq` is
// the call, for what the host is told about a wait that takes long.
__device__ bool waitAll(const ClbDevCallArgs& a, unsigned long long* words, unsigned long long v,
                        unsigned long long seq) {
  WaitClock clock;
  unsigned int spins = 0;
  for (int p = 0; p < a.nranks; p++) {
    volatile unsigned long long* w = words + p;
    while (*w < v) {
      if ((++spins & 63) == 0 && callFailed(a, seq)) return false;
      if (const int c = clock.check(a)) {
        for (int q = p; q < a.nranks; q++)
          if (reinterpret_cast<volatile unsigned long long*>(words)[q] < v) noteRank(a, q, seq, c == 2);
        publishWait(a, seq, c == 2);
        if (c == 2) return false;
      }
      __nanosleep(64);
    }
  }
  __threadfence();
  return true;
}

// This call's number (calls completed so far + 1: stream order, the previous call is finished),
// or 0 when a wait of an earlier call on this rank timed out: the communicator is dead, and this
// call (a graph replayed after it, say) ends at once instead of waiting out another timeout. Its
// output is undefined, as clbCommGetAsyncError says. One load for both (kernel_abi.h).
__device__ __forceinline__ unsigned long long callNumber(const ClbDevCallArgs& a) {
  unsigned long long calls, error;
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(calls), "=l"(error) : "l"(selfWords(a)) : "memory");
  if ((unsigned int)error) return 0;
  // The permit (ClbDevFlags::replayPermit, the word after `error`) of a guarded capture.
  if (a.replayGuard && (error >> 32) == 0) {
    refuseReplay(a, calls + 1);
    return 0;
  }
  return calls + 1;
}

// Counts call `seq` as completed on this rank: in its flag block (what its host reads at
// destroy) and in its own words (selfWords) where those are a copy (the flags in host memory).
__device__ __forceinline__ void countCall(const ClbDevCallArgs& a, unsigned long long seq) {
  // Both, unconditionally (the same word twice where the flags are in device memory): a branch
  // here gave the LL kernel a stack frame on sm_120.
  *reinterpret_cast<volatile unsigned long long*>(&a.flags[a.rank]->calls) = seq;
  *reinterpret_cast<volatile unsigned long long*>(selfWords(a)) = seq;
}

// callNumber read once per block, by thread 0, and shared with the block: where the flags live
// in host memory (GPUs without peer access) a load by every thread was one PCIe read per thread,
// about 4 ms per MiB-sized round of the copies path's combine on the H200.
// `kept` (in shared memory) holds it for after a call that would spill a register kept across it.
__device__ __forceinline__ unsigned long long blockCallNumber(const ClbDevCallArgs& a, unsigned long long& kept) {
  if (threadIdx.x == 0) kept = callNumber(a);
  __syncthreads();
  return kept;
}

// Last block out announces `seq` in word [rank] of every rank's flag block (field at `fieldOff`),
// and with `finish` counts the call as completed.
__device__ void announce(const ClbDevCallArgs& a, unsigned long long seq, int counter, size_t fieldOff, bool finish) {
  __syncthreads();
  if (threadIdx.x != 0) return;
  __threadfence_system();
  if (atomicAdd(&a.counters[counter], 1u) != gridDim.x - 1) return;
  a.counters[counter] = 0;
  __threadfence_system();
  for (int p = 0; p < a.nranks; p++) {
    auto* words = reinterpret_cast<volatile unsigned long long*>(reinterpret_cast<char*>(a.flags[p]) + fieldOff);
    words[a.rank] = seq;
  }
  if (finish) countCall(a, seq);
  __threadfence_system();
}

template <typename S>
__device__ __forceinline__ void reduceFrom(const ClbDevCallArgs& a, void* dst, const char* const* srcs,
                                           unsigned long long offset, unsigned long long n, unsigned long long tid,
                                           unsigned long long stride) {
  const clbk::ReduceRange<S> r{static_cast<S*>(dst), srcs, offset, n, a.nranks, a.op, a.nranks, a.op == clbk::kAvg};
  clbk::reduceRange<S>(r, tid, stride);
}

// dst = srcs[0..nranks)[offset..] combined in rank order, n elements of a.type. `srcs` is in
// shared memory (clbk::ReduceRange says why).
__device__ __noinline__ void reduceTyped(const ClbDevCallArgs& a, void* dst, const char* const* srcs,
                                         unsigned long long offset, unsigned long long n, unsigned long long tid,
                                         unsigned long long stride) {
  switch (a.type) {
    case 0: reduceFrom<int8_t>(a, dst, srcs, offset, n, tid, stride); break;
    case 1: reduceFrom<uint8_t>(a, dst, srcs, offset, n, tid, stride); break;
    case 2: reduceFrom<int32_t>(a, dst, srcs, offset, n, tid, stride); break;
    case 3: reduceFrom<uint32_t>(a, dst, srcs, offset, n, tid, stride); break;
    case 4: reduceFrom<int64_t>(a, dst, srcs, offset, n, tid, stride); break;
    case 5: reduceFrom<uint64_t>(a, dst, srcs, offset, n, tid, stride); break;
    case 6: reduceFrom<__half>(a, dst, srcs, offset, n, tid, stride); break;
    case 7: reduceFrom<__nv_bfloat16>(a, dst, srcs, offset, n, tid, stride); break;
    case 8: reduceFrom<float>(a, dst, srcs, offset, n, tid, stride); break;
    case 9: reduceFrom<double>(a, dst, srcs, offset, n, tid, stride); break;
  }
}

// Every block: announce (last block out) in `field`, then wait for every rank's word >= seq.
// With `agree`, threads 1..n meanwhile read the ranks' call lines (callLineAgrees), so that a
// rank that made another call is seen by the same block barrier, at no extra latency.
__device__ bool barrier(const ClbDevCallArgs& a, unsigned long long seq, int counter, size_t field,
                        unsigned long long* myWords, bool agree = false) {
  announce(a, seq, counter, field, false);
  __shared__ int ok;
  bool bad = false;
  if (threadIdx.x == 0) {
    ok = waitAll(a, myWords, seq, seq);
  } else if (agree && threadIdx.x <= a.nranks) {
    WaitClock clock;
    bad = !callLineAgrees(a, threadIdx.x - 1, seq, clock);
  }
  return !__syncthreads_or(bad) && ok;
}

// Two-shot allReduce's second half, after this rank reduced its segment: "mid" from every rank,
// then the other segments copied from their owners' outputs. What it needs is read again from
// the parameters and shared memory (`recv`), not kept in registers across reduceTyped's call,
// where they would spill into a stack frame (clbk::ReduceRange says why that matters).
__device__ __forceinline__ bool twoShotGather(const ClbDevCallArgs& a, unsigned long long seq, char* const* recv) {
  if (!barrier(a, seq, (int)(seq & 1), offsetof(ClbDevFlags, mid), a.flags[a.rank]->mid)) return false;
  const int n = a.nranks, r = a.rank;
  const unsigned long long tid = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  const unsigned long long esz = a.elemSize;
  const unsigned long long seg = ((a.count + n - 1) / n + 15) / 16 * 16;
  char* out = recv[r];
  for (int i = 1; i < n; i++) {
    const int q = (r + i) % n;
    const unsigned long long qb = min(a.count, seg * q), qe = min(a.count, seg * (q + 1));
    clbk::copyRange(out + qb * esz, recv[q] + qb * esz, (qe - qb) * esz, tid, stride);
  }
  return true;
}

// The direct kernel's start with windows (ClbDevCallArgs::window): where this rank's send buffer
// is in no window, its blocks first copy it into this rank's LL buffer; block 0 posts the window
// (or 0) into every rank's flag block, the last block out says "posted", and every block waits for
// every rank's (comparing call lines). Then the sources are the same for every rank, as every rank
// reads the same posts: all in one window, read there in place; none, every rank's copy; some, the
// ranks still in their windows copy too, and one more barrier ("mid"). Fills send[0..n) (shared).
__device__ bool windowSources(const ClbDevCallArgs& a, unsigned long long seq, const char** send) {
  const int n = a.nranks, r = a.rank, par = (int)(seq & 1);
  ClbDevFlags* me = a.flags[r];
  const unsigned long long tid = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  char* copy = a.staging[r] + par * a.half;
  if (!a.windowId) clbk::copyRange(copy, a.in, a.inBytes, tid, stride);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    postCallLine(a, seq);
    for (int p = 0; p < n; p++) {
      reinterpret_cast<volatile unsigned long long*>(a.flags[p]->send[par])[r] = a.windowId;
      reinterpret_cast<volatile unsigned long long*>(a.flags[p]->recv[par])[r] = a.windowOff;
    }
  }
  if (!barrier(a, seq, par, offsetof(ClbDevFlags, posted), me->posted, true)) return false;
  __shared__ int how;  // 0: every rank's copy; 1: every rank's window; 2: some in windows
  if (threadIdx.x == 0) {
    const volatile unsigned long long* ids = me->send[par];
    const volatile unsigned long long* offs = me->recv[par];
    const unsigned long long first = ids[0];
    bool same = true, any = false;
    for (int p = 0; p < n; p++) {
      same = same && ids[p] == first;
      any = any || ids[p] != 0;
    }
    how = same && first ? 1 : any ? 2 : 0;
    for (int p = 0; p < n; p++)
      send[p] = how != 1 ? a.staging[p] + par * a.half
                : p == r ? static_cast<const char*>(a.in)
                         : a.peerIn[p] + offs[p];
  }
  __syncthreads();
  if (how != 2) return true;
  if (a.windowId) clbk::copyRange(copy, a.in, a.inBytes, tid, stride);
  return barrier(a, seq, par, offsetof(ClbDevFlags, mid), me->mid);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(512) clb_dev_staged(const ClbDevCallArgs a) {
  __shared__ unsigned long long seqKept;  // seq for after reduceTyped's call (below)
  const unsigned long long seq = blockCallNumber(a, seqKept);
  if (seq == 0) return;
  const size_t half = (seq & 1) * a.half;
  const int n = a.nranks, r = a.rank;
  ClbDevFlags* me = a.flags[r];
  __shared__ int ok;
  // In shared memory, not in registers or a local array, so that the kernel has no stack frame
  // (clbk::ReduceRange says why): this rank's staging rank by rank, and seq for after
  // reduceTyped's call (a register kept across the call spills).
  __shared__ const char* slots[CLB_MAX_DEVICE_RANKS];
  if (threadIdx.x < n) slots[threadIdx.x] = a.staging[r] + half + threadIdx.x * a.slot;
  if (blockIdx.x == 0 && threadIdx.x == 0) postCallLine(a, seq);
  // Every rank finished reading the slots this call fills (the same parity, two calls ago).
  if (threadIdx.x == 0) ok = waitAll(a, me->done, seq >= 2 ? seq - 2 : 0, seq);
  __syncthreads();
  if (!ok) return;
  const unsigned long long tid = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  if (a.inBytes)
    for (int i = 0; i < n; i++) {
      const int p = (r + i) % n;  // start with self, then the next ranks: spreads the links' load
      if (a.coll == CLB_DEV_REDUCE && p != a.root) continue;  // a reduce's inputs go to its root only
      const char* src = static_cast<const char*>(a.in) + (a.inSlices > 1 ? p * a.inStride : 0);
      clbk::copyRange(a.staging[p] + half + r * a.slot, src, a.inBytes, tid, stride);
    }
  // ... and compare every rank's call line: a rank that made another call is seen here, before
  // anything is combined (the slots hold what its arguments sent, within their bounds).
  if (!barrier(a, seq, (int)(seq & 1), offsetof(ClbDevFlags, posted), me->posted, true)) return;
  if (a.mode == 0) {
    if (a.out) reduceTyped(a, a.out, slots, 0, a.count, tid, stride);  // (a reduce's other ranks have none)
  } else if (a.mode == 1) {
    for (int p = 0; p < n; p++)
      clbk::copyRange(static_cast<char*>(a.out) + p * a.outStride, slots[p], a.count, tid, stride);
  } else {
    clbk::copyRange(a.out, slots[a.root], a.count, tid, stride);
  }
  announce(a, seqKept, 2 + (int)(seqKept & 1), offsetof(ClbDevFlags, done), true);
}

extern "C" __global__ void __launch_bounds__(512) clb_dev_direct(const ClbDevCallArgs a) {
  // seq for after reduceTyped's calls, in shared memory: a register kept across a call may spill
  // (a stack frame; clbk::ReduceRange says why that matters). Read once per block: every thread
  // of the block must take the same way, as the shared words thread 0 fills below are read by all,
  // and a disagreement another block sees can fail the communicator while this one starts.
  __shared__ unsigned long long seqKept;
  const unsigned long long seq = blockCallNumber(a, seqKept);
  if (seq == 0) return;
  const int par = (int)(seq & 1);
  ClbDevFlags* me = a.flags[a.rank];
  const int n = a.nranks, r = a.rank;
  __shared__ int ok;
  __shared__ const char* send[CLB_MAX_DEVICE_RANKS];
  __shared__ char* recv[CLB_MAX_DEVICE_RANKS];
  if (a.window) {
    if (!windowSources(a, seq, send)) return;
    if (threadIdx.x == 0) recv[r] = static_cast<char*>(a.out);  // the only output read below
  } else if (blockIdx.x == 0 && threadIdx.x == 0) {             // hand this call's buffers to every rank, then say so
    postCallLine(a, seq);
    for (int p = 0; p < n && !a.given; p++) {
      reinterpret_cast<volatile unsigned long long*>(a.flags[p]->send[par])[r] =
          reinterpret_cast<unsigned long long>(a.in);
      reinterpret_cast<volatile unsigned long long*>(a.flags[p]->recv[par])[r] =
          reinterpret_cast<unsigned long long>(a.out);
    }
    __threadfence_system();
    for (int p = 0; p < n; p++) reinterpret_cast<volatile unsigned long long*>(a.flags[p]->posted)[r] = seq;
  }
  bool bad = false;
  if (a.window) {
    if (threadIdx.x == 0) ok = 1;  // windowSources waited, and compared the call lines
  } else if (threadIdx.x == 0) {
    ok = waitAll(a, me->posted, seq, seq);
    if (ok && a.given)
      for (int p = 0; p < n; p++) {  // registered buffers, mapped here by the host
        send[p] = a.peerIn[p];
        recv[p] = a.peerOut[p];
      }
    else if (ok)
      for (int p = 0; p < n; p++) {  // local reads: every rank wrote its addresses here
        send[p] = reinterpret_cast<const char*>(reinterpret_cast<volatile unsigned long long*>(me->send[par])[p]);
        recv[p] = reinterpret_cast<char*>(reinterpret_cast<volatile unsigned long long*>(me->recv[par])[p]);
      }
  } else if (threadIdx.x <= n) {  // meanwhile every rank's call line (barrier() says why here)
    WaitClock clock;
    bad = !callLineAgrees(a, threadIdx.x - 1, seq, clock);
  }
  // A rank that made another call is seen before any peer's buffer is read by a count that
  // buffer may not have.
  if (__syncthreads_or(bad) || !ok) return;
  const unsigned long long tid = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  const unsigned long long esz = a.elemSize;
  char* out = recv[r];
  bool twoShot = a.twoShot;  // one-shot reads all of every send buffer: not while its owner overwrites it
  for (int p = 0; p < n && a.coll == CLB_DEV_ALLREDUCE && !a.window; p++) twoShot = twoShot || send[p] == recv[p];
  switch (a.coll) {
    case CLB_DEV_ALLREDUCE:
      if (twoShot) {
        // Segments of whole 16-element groups (16-byte aligned for every type); the last may be short.
        const unsigned long long seg = ((a.count + n - 1) / n + 15) / 16 * 16;
        const unsigned long long b = min(a.count, seg * r), e = min(a.count, seg * (r + 1));
        reduceTyped(a, out + b * esz, send, b * esz, e - b, tid, stride);
        if (!twoShotGather(a, seqKept, recv)) return;
      } else {
        reduceTyped(a, out, send, 0, a.count, tid, stride);
      }
      break;
    case CLB_DEV_REDUCESCATTER:
      reduceTyped(a, out, send, (unsigned long long)r * a.count * esz, a.count, tid, stride);
      break;
    case CLB_DEV_ALLGATHER:
      for (int i = 0; i < n; i++) {
        const int q = (r + i) % n;
        char* dst = out + (unsigned long long)q * a.count * esz;
        if (dst != send[q]) clbk::copyRange(dst, send[q], a.count * esz, tid, stride);
      }
      break;
    case CLB_DEV_BROADCAST:
      if (out != send[a.root]) clbk::copyRange(out, send[a.root], a.count * esz, tid, stride);
      break;
    case CLB_DEV_REDUCE:
      // One-shot at the root (in place too: each element is read from every buffer before it is
      // written, and no other rank reads the root's); the others only say they are done.
      if (out) reduceTyped(a, out, send, 0, a.count, tid, stride);
      break;
  }
  // Done reading; the kernel (so the caller's stream) goes on only when every rank is.
  const unsigned long long last = seqKept;
  announce(a, last, 2 + (int)(last & 1), offsetof(ClbDevFlags, done), false);
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    ClbDevFlags* mine = a.flags[a.rank];
    if (waitAll(a, mine->done, last, last)) countCall(a, last);
  }
}

// ---- LL ("low latency"): data and flag travel together ----
// A line is 16 bytes written with one vector store: {data lo, flag, data hi, flag}. Each aligned
// 8-byte half arrives whole, so a reader that sees the call's number in both flag words also
// sees the 8 data bytes: no fence, no counter, no separate announcement. A rank writes its
// data into its slot of every rank's LL buffer (the half of the call's parity) and reads the
// lines other ranks wrote into its own buffer, polling local memory. Slots are reused two calls
// later; by then every reader has finished (a rank cannot start call s+2 before it has heard
// from every rank in call s+1, and each rank finished call s before it spoke in s+1).
namespace {

// Waits for rank p's line at `off` in this rank's slots (`mine`) to carry `flag`; false on
// timeout. A wait that takes long names every rank whose line is still missing.
__device__ __forceinline__ bool loadLine(const ClbDevCallArgs& a, const char* mine, int p, unsigned long long off,
                                         unsigned int flag, unsigned long long seq, unsigned long long* v,
                                         WaitClock& clock, bool everyRankWrites = true) {
  const char* at = mine + p * a.slot + off;
  unsigned int x, f1, y, f2;
  for (int spins = 0;; spins++) {
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(x), "=r"(f1), "=r"(y), "=r"(f2)
                 : "l"(at)
                 : "memory");
    if (f1 == flag && f2 == flag) break;
    if ((spins & 1023) == 1023) {
      if (peerFailed(a, p, seq)) return false;
      if (const int c = clock.check(a)) {
        for (int q = everyRankWrites ? 0 : p; q < (everyRankWrites ? a.nranks : p + 1); q++) {
          const volatile unsigned int* line = reinterpret_cast<const volatile unsigned int*>(mine + q * a.slot + off);
          if (line[1] != flag || line[3] != flag) noteRank(a, q, seq, c == 2);
        }
        publishWait(a, seq, c == 2);
        if (c == 2) return false;
      }
    }
  }
  *v = (unsigned long long)x | ((unsigned long long)y << 32);
  return true;
}

// The LL threads that read the call lines, rank p's by thread checkersAt() + p: the first warp
// past the data lines where the launch has it, so that the lines are read side by side with the
// data, else threads 0..n-1 once their data lines are in. Measured on the H200 (2 ranks, 8 B, graph
// mode): threads 0..n-1 after their data lines added a memory round trip, 0.4-0.6 us of 4;
// threads right after the data lines, in the data's warp, 0.3 us (the warp's two branches
// take turns), 1.5 us where the flags are in host memory; a warp of their own, nothing measurable.
__device__ __forceinline__ unsigned long long checkersAt(unsigned long long lines, int n, unsigned long long stride) {
  const unsigned long long warp = (lines + 31) / 32 * 32;
  return warp + n <= stride ? warp : 0;
}

// Bytes [8i, 8i+8) of src, fewer at the end (zeros past `bytes`); any alignment.
__device__ __forceinline__ unsigned long long loadBytes8(const char* src, unsigned long long i,
                                                         unsigned long long bytes) {
  const unsigned long long off = i * 8;
  if (off + 8 <= bytes && ((uintptr_t)(src + off) & 7) == 0)
    return __ldcg(reinterpret_cast<const unsigned long long*>(src + off));
  unsigned long long v = 0;
  for (unsigned long long b = 0; b < 8 && off + b < bytes; b++)
    v |= (unsigned long long)(unsigned char)__ldcg(src + off + b) << (8 * b);
  return v;
}

__device__ __forceinline__ void storeBytes8(char* dst, unsigned long long i, unsigned long long bytes,
                                            unsigned long long v) {
  const unsigned long long off = i * 8;
  if (off + 8 <= bytes && ((uintptr_t)(dst + off) & 7) == 0) {
    *reinterpret_cast<unsigned long long*>(dst + off) = v;
    return;
  }
  for (unsigned long long b = 0; b < 8 && off + b < bytes; b++) dst[off + b] = (char)(v >> (8 * b));
}

// LL's reduction, one rank's 8 bytes at a time as their lines arrive (no array of every rank's
// lines: a stack frame, see clbk::ReduceRange): the same numbers as clbk::reduceRange (rank order,
// accumulation type, one rounding, avg divided at the end). The accumulator of 8 bytes of any
// type fits in 16 (float16's four floats are the most).
template <typename S>
__device__ __forceinline__ uint4 foldLine(uint4 accRaw, unsigned long long v, int op, bool first) {
  using C = clbk::Conv<S>;
  using A = typename C::A;
  constexpr int E = 8 / sizeof(S);
  static_assert(sizeof(A) * E <= 16, "accumulator");
  union Acc {
    uint4 raw;
    A e[E];
  } acc;
  union In {
    unsigned long long raw;
    S e[E];
  } in;
  acc.raw = accRaw;
  in.raw = v;
#pragma unroll
  for (int j = 0; j < E; j++) acc.e[j] = first ? C::load(in.e[j]) : clbk::combine<A>(acc.e[j], C::load(in.e[j]), op);
  return acc.raw;
}

template <typename S>
__device__ __forceinline__ unsigned long long finishLine(uint4 accRaw, int op, int nranks) {
  using C = clbk::Conv<S>;
  using A = typename C::A;
  constexpr int E = 8 / sizeof(S);
  union Acc {
    uint4 raw;
    A e[E];
  } acc;
  union Out {
    unsigned long long raw;
    S e[E];
  } out;
  acc.raw = accRaw;
#pragma unroll
  for (int j = 0; j < E; j++) {
    A x = acc.e[j];
    if (op == clbk::kAvg) x = static_cast<A>(x / static_cast<A>(nranks));
    out.e[j] = C::store(x);
  }
  return out.raw;
}

#define CLB_LINE_TYPED(CALL)            \
  switch (type) {                       \
    case 0: return CALL(int8_t);        \
    case 1: return CALL(uint8_t);       \
    case 2: return CALL(int32_t);       \
    case 3: return CALL(uint32_t);      \
    case 4: return CALL(int64_t);       \
    case 5: return CALL(uint64_t);      \
    case 6: return CALL(__half);        \
    case 7: return CALL(__nv_bfloat16); \
    case 8: return CALL(float);         \
    default: return CALL(double);       \
  }

__device__ uint4 foldLineTyped(int type, uint4 acc, unsigned long long v, int op, bool first){
#define CLB_FOLD(S) foldLine<S>(acc, v, op, first)
    CLB_LINE_TYPED(CLB_FOLD)
#undef CLB_FOLD
}

__device__ unsigned long long finishLineTyped(int type, uint4 acc, int op, int nranks) {
#define CLB_FINISH(S) finishLine<S>(acc, op, nranks)
  CLB_LINE_TYPED(CLB_FINISH)
#undef CLB_FINISH
}
#undef CLB_LINE_TYPED

}  // namespace

// Broadcast through LL lines: the root writes its lines into its slot of every rank; the other
// ranks write only their call lines, which every rank reads, so that each rank still hears from
// every rank in every call, which is what lets slots be reused two calls later (a root that heard
// from nobody could run two calls ahead and overwrite lines not yet read).
__device__ void llBroadcast(const ClbDevCallArgs& a, unsigned long long seq, unsigned int flag, size_t half,
                            unsigned long long lines, unsigned long long tid, unsigned long long stride) {
  const int n = a.nranks, r = a.rank, root = a.root;
  const unsigned long long bytes = a.count * (unsigned long long)a.elemSize;
  if (r == root)
    for (unsigned long long i = tid; i < lines; i += stride)
      for (int k = 0; k < n; k++) {
        const int p = (r + k) % n;
        storeLine(a.staging[p] + half + root * a.slot + i * 16, loadBytes8(static_cast<const char*>(a.in), i, bytes),
                  flag);
      }
  const char* mine = a.staging[r] + half;
  WaitClock clock;
  unsigned long long v;
  for (unsigned long long i = tid; i < lines; i += stride) {
    if (!loadLine(a, mine, root, i * 16, flag, seq, &v, clock, false)) return;
    storeBytes8(static_cast<char*>(a.out), i, bytes, v);
  }
  const unsigned long long at = checkersAt(lines, n, stride);  // every rank's call line
  if (tid >= at && tid < at + n) callLineAgrees(a, (int)(tid - at), seq, clock);
}

// allReduce, allGather, reduceScatter, reduce (an allReduce only the root writes out; and
// broadcast, above) through LL lines. `count` elements
// per destination.
// (Two blocks per SM asked for: with the bound alone ptxas gave this kernel an 8-byte stack frame
// on sm_120 at 40 registers; with it, 48 there and no frame, the other images unchanged.)
extern "C" __global__ void __launch_bounds__(512, 2) clb_dev_ll(const ClbDevCallArgs a) {
  // Every thread reads the call number (reading it once per block, as the staged and copies
  // kernels do, gave this kernel a stack frame on sm_100).
  const unsigned long long seq = callNumber(a);
  if (seq == 0) return;
  // Never 0, the value of lines no call has written yet (after 2^32 - 1 calls seq would wrap to it).
  const unsigned int flag = CLB_DEV_LINE_FLAG(seq);
  const size_t half = (seq & 1) * a.half;
  const int n = a.nranks, r = a.rank;
  const unsigned long long bytes = a.count * (unsigned long long)a.elemSize;
  const unsigned long long lines = (bytes + 7) / 8;
  const unsigned long long tid = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  const char* in = static_cast<const char*>(a.in);
  char* out = static_cast<char*>(a.out);
  if (tid == 0) postCallLine(a, seq);
  if (a.coll == CLB_DEV_BROADCAST) llBroadcast(a, seq, flag, half, lines, tid, stride);
  // Send: this rank's lines into its slot of every rank (reduceScatter: rank p's slice to rank p).
  for (unsigned long long i = tid; i < lines && a.coll != CLB_DEV_BROADCAST; i += stride)
    for (int k = 0; k < n; k++) {
      const int p = (r + k) % n;
      const char* src = in + (a.coll == CLB_DEV_REDUCESCATTER ? p * bytes : 0);
      storeLine(a.staging[p] + half + r * a.slot + i * 16, loadBytes8(src, i, bytes), flag);
    }
  // Receive: every rank's line i from this rank's own buffer, then combine or place it; past the
  // data, every rank's call line (a rank that made another call fails the call here).
  const char* mine = a.staging[r] + half;
  WaitClock clock;
  bool ok = true;
  for (unsigned long long i = tid; i < lines && ok && a.coll != CLB_DEV_BROADCAST; i += stride) {
    uint4 acc = make_uint4(0, 0, 0, 0);
    for (int p = 0; p < n && ok; p++) {
      unsigned long long v;
      ok = loadLine(a, mine, p, i * 16, flag, seq, &v, clock);
      if (!ok) break;
      if (a.coll == CLB_DEV_ALLGATHER)
        storeBytes8(out + p * bytes, i, bytes, v);
      else
        acc = foldLineTyped(a.type, acc, v, a.op, p == 0);
    }
    if (ok && a.coll != CLB_DEV_ALLGATHER && out)  // (a reduce's other ranks have no out)
      storeBytes8(out, i, bytes, finishLineTyped(a.type, acc, a.op, n));
  }
  // Every rank's call line, by the threads checkersAt() names (a rank that made another call fails
  // the call here).
  const unsigned long long at = checkersAt(lines, n, stride);
  if (ok && tid >= at && tid < at + n && a.coll != CLB_DEV_BROADCAST)
    ok = callLineAgrees(a, (int)(tid - at), seq, clock);
  // The last block out counts the call as completed and tells the peers this rank is done.
  __syncthreads();
  if (threadIdx.x == 0) {
    if (atomicAdd(&a.counters[2 + (int)(seq & 1)], 1u) == gridDim.x - 1) {
      a.counters[2 + (int)(seq & 1)] = 0;
      for (int p = 0; p < n; p++) reinterpret_cast<volatile unsigned long long*>(a.flags[p]->done)[r] = seq;
      countCall(a, seq);
    }
  }
}

// ---- the gate: a wide kernel launches only once every rank is in the call ----
// Where a rank of another process shares this GPU, a kernel of many blocks that waits for a late
// peer holds SMs that the late peer's own work may need before it can reach the call: a kernel
// that wants whole SMs (a large GEMM's, attention's) finds none free once the waiting ranks'
// blocks sit on every SM, and the late rank never arrives (a TP decode of 4 rank processes under
// MPS hung so). So such a call first runs this one warp, which posts this rank's call line and
// waits for every rank's (comparing them, as the kernels do); the wide kernel follows it on the
// stream and starts when every rank is in the call. While it waits, a rank holds one warp's slot
// on one SM. A disagreement or a timeout here fails the communicator, and the kernel after it
// ends at once (callNumber).
extern "C" __global__ void __launch_bounds__(32) clb_dev_gate(const ClbDevCallArgs a) {
  const unsigned long long seq = callNumber(a);
  if (seq == 0) return;
  if (threadIdx.x == 0) postCallLine(a, seq);
  WaitClock clock;
  for (int p = threadIdx.x; p < a.nranks; p += 32)
    if (!callLineAgrees(a, p, seq, clock)) {
      // Timed out: the line posted above would let a peer that comes later into its kernel, to
      // wait there for data this rank never sends; a line no call has fails it at once instead.
      if (reinterpret_cast<volatile unsigned int*>(selfWords(a))[2] == CLB_DEV_ERR_TIMEOUT)
        writeCallLines(a, seq, CLB_DEV_SIG_GAVEUP);
      return;
    }
}

// ---- copies: GPUs without peer access (flags and staging in host memory) ----
// The copy engines move the data between the caller's buffers and the staging in host memory
// (src/device/hostcopy.cc enqueues them on the caller's stream and a second one); these launches
// order them against the peers. Every step but the combine is one block of 32 threads (the launch bound
// that keeps the kernel without a stack frame) whose thread 0 waits or announces with plain loads
// and stores: nothing here needs an atomic on host memory.
extern "C" __global__ void __launch_bounds__(32) clb_dev_hostcopy(const ClbDevCallArgs a) {
  // The first round's wait: lanes 1..n compare every rank's call line meanwhile (each rank wrote
  // it at its first round's gate, before it posted). The copies out of the peers' staging follow
  // on this stream, so a disagreement seen here fails the communicator, and the steps after it
  // end at once (callNumber).
  if (a.phase == CLB_HC_WAIT && a.round == 0 && threadIdx.x >= 1 && threadIdx.x <= a.nranks) {
    const unsigned long long seq = callNumber(a);
    WaitClock clock;
    if (seq) callLineAgrees(a, threadIdx.x - 1, seq, clock);
    return;
  }
  if (threadIdx.x != 0) return;
  // The same for every step of the call (DONE, the last, counts it), so every round's progress
  // word is known on the device: a graph replayed numbers its calls on.
  const unsigned long long seq = callNumber(a);
  if (seq == 0) return;
  const int n = a.nranks, r = a.rank;
  ClbDevFlags* me = a.flags[r];
  auto progress = [&](int round) { return (seq << CLB_HC_ROUND_BITS) | (unsigned long long)(round + 1); };
  auto tellAll = [&](size_t field, unsigned long long v) {
    __threadfence_system();  // what came before (the copies, in stream order) before the word
    for (int p = 0; p < n; p++)
      reinterpret_cast<volatile unsigned long long*>(reinterpret_cast<char*>(a.flags[p]) + field)[r] = v;
    __threadfence_system();
  };
  switch (a.phase) {
    case CLB_HC_GATE:  // the half this round fills was read: two rounds ago, or in a call before
      if (a.round == 0) postCallLine(a, seq);
      if (a.round < 2)
        waitAll(a, me->done, seq - 1, seq);
      else
        waitAll(a, me->hcRead, progress(a.round - 2), seq);
      break;
    case CLB_HC_POSTED: tellAll(offsetof(ClbDevFlags, hcPosted), progress(a.round)); break;
    case CLB_HC_WAIT: waitAll(a, me->hcPosted, progress(a.round), seq); break;
    case CLB_HC_READ: tellAll(offsetof(ClbDevFlags, hcRead), progress(a.round)); break;
    case CLB_HC_DONE:
      tellAll(offsetof(ClbDevFlags, done), seq);
      countCall(a, seq);
      __threadfence_system();
      break;
  }
}

// The copies path's COMBINE step: out = peerIn[0] op ... op peerIn[n-1], count elements, in rank
// order (a kernel of its own: the steps' waits beside the reduction's call would spill).
extern "C" __global__ void __launch_bounds__(512) clb_dev_hostcopy_combine(const ClbDevCallArgs a) {
  __shared__ unsigned long long seq;
  if (blockCallNumber(a, seq) == 0) return;
  __shared__ const char* srcs[CLB_MAX_DEVICE_RANKS];  // shared memory: no stack frame (clbk::ReduceRange)
  if (threadIdx.x < a.nranks) srcs[threadIdx.x] = a.peerIn[threadIdx.x];
  __syncthreads();
  const unsigned long long tid = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  reduceTyped(a, a.out, srcs, 0, a.count, tid, stride);
}
