// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Point-to-point on device memory (ClbP2pArgs in kernel_abi.h): one block per operation of a
// batch. A send writes each chunk of its buffer, in lines, into the peer's inbox slot once the
// peer consumed what was there; a receive polls its own inbox for the chunk's flag, copies (or
// reduces) it out and credits the sender. The last block out moves the per-pair chunk counts on
// and counts the launch as completed. Included by all_kernels.cu after collective.cu, whose line
// helpers (storeLine, loadBytes8, storeBytes8) it uses.

namespace {

// Lines a thread moves at once (loads in flight before their stores, or polls in flight).
constexpr int kLinesAtOnce = 4;

// The 8 bytes `in` combined into the 8 bytes `mine` element by element (dst = in op dst, the host
// batch's order); an average's last step divides.
template <typename S>
__device__ unsigned long long reduceIntoLine(unsigned long long in, unsigned long long mine, int op, int divideBy) {
  using C = clbk::Conv<S>;
  using A = typename C::A;
  constexpr int E = 8 / sizeof(S);
  union U {
    unsigned long long raw;
    S e[E];
  };
  U a, b, out;
  a.raw = in;
  b.raw = mine;
#pragma unroll
  for (int j = 0; j < E; j++) {
    A acc = clbk::combine<A>(C::load(a.e[j]), C::load(b.e[j]), op);
    if (op == clbk::kAvg && divideBy > 0) acc = static_cast<A>(acc / static_cast<A>(divideBy));
    out.e[j] = C::store(acc);
  }
  return out.raw;
}

__device__ unsigned long long reduceIntoLineTyped(int type, unsigned long long in, unsigned long long mine, int op,
                                                  int divideBy) {
  switch (type) {
    case 0: return reduceIntoLine<int8_t>(in, mine, op, divideBy);
    case 1: return reduceIntoLine<uint8_t>(in, mine, op, divideBy);
    case 2: return reduceIntoLine<int32_t>(in, mine, op, divideBy);
    case 3: return reduceIntoLine<uint32_t>(in, mine, op, divideBy);
    case 4: return reduceIntoLine<int64_t>(in, mine, op, divideBy);
    case 5: return reduceIntoLine<uint64_t>(in, mine, op, divideBy);
    case 6: return reduceIntoLine<__half>(in, mine, op, divideBy);
    case 7: return reduceIntoLine<__nv_bfloat16>(in, mine, op, divideBy);
    case 8: return reduceIntoLine<float>(in, mine, op, divideBy);
    default: return reduceIntoLine<double>(in, mine, op, divideBy);
  }
}

// A wait that outlasts the timeout marks the error (device and mapped host) and gives up; so does
// a wait of a launch whose rank already failed (another block met a mismatch, or timed out).
template <class Args>
__device__ bool p2pTimedOut(const Args& a, unsigned long long& start) {
  if (*reinterpret_cast<volatile unsigned int*>(&a.state->error) != 0) return true;
  const unsigned long long t = globalTimer();
  if (start == 0) start = t;
  if (t - start <= a.timeoutNs) return false;
  atomicExch(&a.state->error, 1u);
  __threadfence_system();
  *reinterpret_cast<volatile unsigned int*>(a.hostError) = CLB_P2P_ERROR_TIMEOUT;
  return true;
}

// A line's second flag word: its chunk's flag mixed with the signature of the message's call
// (ClbP2pOp::sig: its kind, count, type, op, root, number), so that a receive that meets a send of
// another call sees the chunk arrive with the wrong word and fails at once, instead of taking the
// bytes or waiting for lines that never come. An in-place send marks the slot's first line with
// its signature mixed with kInPlaceMark: a receive in lines fails on it, one in place checks it.
constexpr unsigned long long kInPlaceMark = 0x5EC0DA7A1A7E11EDull;
__device__ __forceinline__ unsigned int signedFlag(unsigned int flag, unsigned long long sig) {
  return flag ^ (unsigned int)((sig * 0x9E3779B97F4A7C15ull) >> 32);
}

__device__ __forceinline__ void storeSignedLine(char* p, unsigned long long v, unsigned int flag, unsigned int sized) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"((unsigned int)v), "r"(flag),
               "r"((unsigned int)(v >> 32)), "r"(sized)
               : "memory");
}

// An operation met its peer's of another call: the error marked as a timeout's is, with its own code.
template <class Args>
__device__ void p2pMismatch(const Args& a) {
  atomicExch(&a.state->error, 1u);
  __threadfence_system();
  *reinterpret_cast<volatile unsigned int*>(a.hostError) = CLB_P2P_ERROR_MISMATCH;
}

__device__ __forceinline__ unsigned long long volatileLoad(const unsigned long long* p) {
  return *reinterpret_cast<const volatile unsigned long long*>(p);
}

// On the slow path of a wait for number `need` of a peer's sends (theirSends) or receives, as the
// peer's box for this rank (`box`) counts them: true once the peer said it ended (its
// communicator failed: ClbP2pBox::ended) short of `need`, which then never comes; the error is
// marked as a timeout's is, with its own code and the peer's rank. Before the peer's end is said,
// its counts may still grow. The waits call it out of line (peerEndedShort, or inside pollSlowPath
// below): inlined into them, it made ptxas spill more of the kernels' registers
// (kernel_frames.cmake keeps their stack frames).
__device__ __forceinline__ bool peerEndedShortHere(ClbP2pState* st, unsigned int* hostError, const ClbP2pBox* box,
                                                   bool theirSends, unsigned long long need, int peer) {
  if (volatileLoad(&box->ended) == 0) return false;
  __threadfence();
  if (need <= volatileLoad(theirSends ? &box->endSent : &box->endReceived)) return false;
  atomicExch(&st->error, 1u);
  reinterpret_cast<volatile unsigned int*>(hostError)[1] = (unsigned int)peer;
  __threadfence_system();
  *reinterpret_cast<volatile unsigned int*>(hostError) = CLB_P2P_ERROR_PEER_ENDED;
  return true;
}
// The check out of line, for thread 0's waits.
__device__ __noinline__ bool peerEndedShort(ClbP2pState* st, unsigned int* hostError, const ClbP2pBox* box,
                                            bool theirSends, unsigned long long need, int peer) {
  return peerEndedShortHere(st, hostError, box, theirSends, need, peer);
}

// The same for operation o's peer.
template <bool kTheirSends, class Args>
__device__ __forceinline__ bool p2pPeerEnded(const Args& a, const ClbP2pOp& o, unsigned long long need) {
  return peerEndedShort(a.state, a.hostError, o.remote, kTheirSends, need, o.peer);
}

// The receive in lines a block polls for: its peer's box for this rank and the last number of its
// message (a send is launched whole, so the peer's end covers all of its numbers or none of its
// last one's), in shared memory, so that pollLines's slow path reads them instead of every thread
// carrying them through the poll (the point-to-point kernels keep no stack frame).
struct Polled {
  const ClbP2pBox* box;
  unsigned long long need;
  int peer;
};
__shared__ Polled tPolled;

// pollLines's slow path, out of line (what it needs comes by value or from shared memory, so the
// poll's registers stay the poll's): `start` (0 at a wait's first look) as p2pTimedOut keeps it,
// or 0 once the wait gives up: the launch failed (another block), the timeout passed, or the
// sender ended short of the polled message (tPolled).
__device__ __noinline__ unsigned long long pollSlowPath(ClbP2pState* st, unsigned int* hostError,
                                                        unsigned long long timeoutNs, unsigned long long start) {
  if (*reinterpret_cast<volatile unsigned int*>(&st->error) != 0) return 0;
  const unsigned long long t = globalTimer();
  if (start == 0) start = t;
  if (t - start <= timeoutNs)
    return peerEndedShortHere(st, hostError, tPolled.box, true, tPolled.need, tPolled.peer) ? 0 : start;
  atomicExch(&st->error, 1u);
  __threadfence_system();
  *reinterpret_cast<volatile unsigned int*>(hostError) = CLB_P2P_ERROR_TIMEOUT;
  return 0;
}

// Thread's lines i, i + step, ... (N of them, those below `lines`) of a slot: polled together
// until every one carries `flag`, their data into v. Returns N, or -1 (with *failed set) when a
// line carries another call's signature (the error marked), another thread of the block failed,
// the timeout passed, or the sender ended short of the message (tPolled): a line past the sender's
// end never comes.
template <int N, class Args>
__device__ __forceinline__ int pollLines(const Args& a, const char* from, unsigned long long i, unsigned long long step,
                                         unsigned long long lines, unsigned int flag, unsigned int sized,
                                         unsigned long long* v, int* failed, unsigned long long& start) {
  unsigned int pending = 0;  // bit u: line i + u * step still to come
#pragma unroll
  for (int u = 0; u < N; u++)
    if (i + u * step < lines) pending |= 1u << u;
  for (int spins = 0; pending; spins++) {
    unsigned int x[N], f1[N], y[N], f2[N];
#pragma unroll
    for (int u = 0; u < N; u++)
      if (pending & (1u << u))
        asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(x[u]), "=r"(f1[u]), "=r"(y[u]), "=r"(f2[u])
                     : "l"(from + (i + u * step) * 16)
                     : "memory");
    bool mismatch = false;
#pragma unroll
    for (int u = 0; u < N; u++) {
      if (!(pending & (1u << u)) || f1[u] != flag) continue;
      mismatch = mismatch || f2[u] != sized;
      pending &= ~(1u << u);
      v[u] = (unsigned long long)x[u] | ((unsigned long long)y[u] << 32);
    }
    if (mismatch) {
      p2pMismatch(a);
      *failed = 1;
      return -1;
    }
    if (pending && (spins & 1023) == 1023 &&
        (*reinterpret_cast<volatile int*>(failed) ||
         (start = pollSlowPath(a.state, a.hostError, a.timeoutNs, start)) == 0)) {
      *failed = 1;
      return -1;
    }
  }
  return N;
}

// Thread 0 of one of operation j's `blocks` blocks, once its part is written: true for the last
// block out (it completes the operation; the count goes back to 0 for the next launch), false for
// the others, which mark themselves failed = 2 (through, but not the one to complete it).
__device__ __forceinline__ bool lastBlockOut(ClbP2pState* st, int j, int blocks, int* failed) {
  __threadfence();
  if (atomicAdd(&st->opBlocks[j], 1u) != (unsigned)blocks - 1) {
    *failed = 2;
    return false;
  }
  st->opBlocks[j] = 0;
  return true;
}

// Thread 0 waits until the count at w (a peer's kernel or another block moves it on; every count
// here only grows) reaches v; false on timeout, or (o not null) once o's peer ended short of
// number `need` of its receives (looked at every 64th round: the box may be another GPU's).
template <class Args>
__device__ __forceinline__ bool waitReached(const Args& a, const unsigned long long* w, unsigned long long v,
                                            const ClbP2pOp* o, unsigned long long need) {
  unsigned long long start = 0;
  for (unsigned spins = 1; volatileLoad(w) < v; spins++) {
    if (p2pTimedOut(a, start) || (o && spins % 64 == 0 && p2pPeerEnded<false>(a, *o, need))) return false;
    __nanosleep(32);
  }
  return true;
}

// This block's stripe (block `sub` of `blocks`) of `bytes` from src to dst: 16-byte words, four
// loads in flight per thread before their stores, the tail byte by byte by the last block.
__device__ void copyStripe(char* dst, const char* src, unsigned long long bytes, int sub, int blocks) {
  const unsigned long long words = bytes / 16, per = (words + blocks - 1) / blocks;
  const unsigned long long w0 = per * sub, w1 = w0 + per < words ? w0 + per : words;
  const bool aligned = ((uintptr_t)src % 16 == 0) && ((uintptr_t)dst % 16 == 0);
  if (aligned) {
    uint4* d4 = reinterpret_cast<uint4*>(dst);
    const uint4* s4 = reinterpret_cast<const uint4*>(src);
    const unsigned long long step = blockDim.x;
    unsigned long long w = w0 + threadIdx.x;
    for (; w + 3 * step < w1; w += 4 * step) {
      const uint4 v0 = __ldcg(s4 + w), v1 = __ldcg(s4 + w + step), v2 = __ldcg(s4 + w + 2 * step),
                  v3 = __ldcg(s4 + w + 3 * step);
      d4[w] = v0;
      d4[w + step] = v1;
      d4[w + 2 * step] = v2;
      d4[w + 3 * step] = v3;
    }
    for (; w < w1; w += step) d4[w] = __ldcg(s4 + w);
  } else {
    for (unsigned long long w = w0 + threadIdx.x; w < w1; w += blockDim.x)
      for (int b = 0; b < 16; b++) dst[w * 16 + b] = src[w * 16 + b];
  }
  if (sub == blocks - 1)
    for (unsigned long long b = words * 16 + threadIdx.x; b < bytes; b += blockDim.x) dst[b] = src[b];
}

}  // namespace

// kBulk: messages in lines may have several lanes, and each thread keeps kLinesAtOnce lines in
// flight; otherwise one lane and one line at a time, which keeps the kernel small and its small
// messages fast (on the H200 between two processes, 8 B in a graph: 3.2 us lean, 4.0 us bulk).
template <bool kBulk, class Args>
__device__ __forceinline__ void p2pBody(const Args& a) {
  ClbP2pState* st = a.state;
  int j = 0;  // this block's operation (a large send has several blocks)
  while (j + 1 < a.nops && (unsigned)a.ops[j + 1].firstBlock <= blockIdx.x) j++;
  const ClbP2pOp& o = a.ops[j];
  const int sub = (int)blockIdx.x - o.firstBlock;
  const bool send = o.kind == CLB_P2P_SEND;
  const bool copy = o.kind == CLB_P2P_COPY;
  // The loads every block starts with, issued together: the error word, the launch count, and
  // the pair's count in this direction (nothing changes them while this launch runs but its own
  // last block, or an alone operation's own block at its end).
  __shared__ int failed;
  if (threadIdx.x == 0) failed = *reinterpret_cast<volatile unsigned int*>(&st->error) != 0;
  const unsigned long long launch = a.alone ? 0 : volatileLoad(&st->launches) + 1;
  const unsigned long long counted = copy ? 0 : send ? volatileLoad(&o.local->sent) : volatileLoad(&o.local->received);
  // What a receive in lines polls for (tPolled), set before the barrier below: never read unset.
  if (threadIdx.x == 0 && !send && !copy)
    tPolled = Polled{o.remote, counted + o.firstChunk + (o.bytes + CLB_P2P_CHUNK - 1) / CLB_P2P_CHUNK, o.peer};
  __syncthreads();
  if (failed) return;  // an earlier wait timed out: the communicator is dead
  // The operation this one waits for (a reduce adds its peers in rank order).
  if (o.after >= 0) {
    if (threadIdx.x == 0 && !waitReached(a, &st->opDone[o.after], launch, nullptr, 0)) failed = 1;
    __syncthreads();
    if (failed) return;
    __threadfence();
  }
  if (copy) {
    // A local copy: this block's stripe; only the operation's last block out completes it.
    copyStripe(static_cast<char*>(o.dst), static_cast<const char*>(o.src), o.bytes, sub, o.blocks);
    __syncthreads();
    if (threadIdx.x == 0 && o.blocks > 1) lastBlockOut(st, j, o.blocks, &failed);
  }
  const unsigned long long base = counted + o.firstChunk;
  if (o.inPlace) {
    // One number k for the whole message: the receiver's buffer written in place.
    const unsigned long long k = base + 1;
    const int slot = (int)(k % CLB_P2P_SLOTS);
    const unsigned int flag = (unsigned int)(k % 0xFFFFFFFFull) + 1;
    const unsigned int marked = signedFlag(flag, o.sig ^ kInPlaceMark);
    if (send) {
      if (threadIdx.x == 0) {
        // The slot's first line marked with this send's signature once the receiver is through
        // with the slot's number before (a receive in lines then fails on it at once), then the
        // receiver's readiness awaited, and its signature compared before a byte moves.
        if (k > CLB_P2P_SLOTS && !waitReached(a, &o.local->credit[slot], k - CLB_P2P_SLOTS, &o, k - CLB_P2P_SLOTS))
          failed = 1;
        if (!failed && sub == 0) storeSignedLine(o.remote->lines[slot], 0, flag, marked);
        if (!failed && !waitReached(a, &o.local->want[slot], k, &o, k)) failed = 1;
        __threadfence();
        if (!failed && volatileLoad(&o.local->wantSig[slot]) != o.sig) {
          p2pMismatch(a);
          failed = 1;
        }
      }
      __syncthreads();
      if (failed) return;
      char* dst = o.peerDst ? static_cast<char*>(o.peerDst)
                            : static_cast<char*>(*reinterpret_cast<void* const volatile*>(&o.local->wantAddr[slot]));
      copyStripe(dst, static_cast<const char*>(o.src), o.bytes, sub, o.blocks);
      __syncthreads();
      // The op's last block out says the copy is done, in the receiver's box.
      if (threadIdx.x == 0 && lastBlockOut(st, j, o.blocks, &failed)) {
        __threadfence();  // the other blocks' copies (ordered before their atomics) before done
        *reinterpret_cast<volatile unsigned long long*>(&o.remote->done[slot]) = k;
      }
    } else {
      // The number before in this slot is through (its address may be published again).
      if (threadIdx.x == 0 && k > CLB_P2P_SLOTS &&
          !waitReached(a, &o.local->rxDone[slot], k - CLB_P2P_SLOTS, nullptr, 0))
        failed = 1;
      if (threadIdx.x == 0 && !failed) {
        *reinterpret_cast<volatile unsigned long long*>(&o.remote->wantSig[slot]) = o.sig;
        *reinterpret_cast<void* volatile*>(&o.remote->wantAddr[slot]) = o.dst;
        __threadfence();
        *reinterpret_cast<volatile unsigned long long*>(&o.remote->want[slot]) = k;
        // Done, unless the slot's first line says this number is another call's (a send in place
        // of another signature, or a send in lines).
        unsigned long long start = 0;
        const char* first = o.local->lines[slot];
        for (unsigned spins = 1; !failed && volatileLoad(&o.local->done[slot]) < k; spins++) {
          unsigned int x, f1, y, f2;
          asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                       : "=r"(x), "=r"(f1), "=r"(y), "=r"(f2)
                       : "l"(first)
                       : "memory");
          if (f1 == flag && f2 != marked) {
            p2pMismatch(a);
            failed = 1;
          } else if (p2pTimedOut(a, start) || (spins % 64 == 0 && p2pPeerEnded<true>(a, o, k))) {
            failed = 1;
          } else {
            __nanosleep(32);
          }
        }
        __threadfence();
        if (!failed) {
          *reinterpret_cast<volatile unsigned long long*>(&o.local->rxDone[slot]) = k;
          *reinterpret_cast<volatile unsigned long long*>(&o.remote->credit[slot]) = k;
        }
      }
    }
    __syncthreads();
    if (failed == 1) return;
  }
  // In lines: each of the operation's blocks (its lanes) moves its share [l0, l1) of every chunk's
  // lines; the two ranks may give a message different numbers of lanes (the lines' places do not
  // depend on them), and a receive's last lane out of a chunk credits it.
  const unsigned long long chunks = o.inPlace || copy ? 0 : (o.bytes + CLB_P2P_CHUNK - 1) / CLB_P2P_CHUNK;
  for (unsigned long long c = 0; c < chunks; c++) {
    const unsigned long long k = base + c + 1;
    const int slot = (int)(k % CLB_P2P_SLOTS);
    const unsigned int flag = (unsigned int)(k % 0xFFFFFFFFull) + 1;
    const unsigned int sized = signedFlag(flag, o.sig);
    const unsigned long long off = c * CLB_P2P_CHUNK;
    const unsigned long long bytes = o.bytes - off < CLB_P2P_CHUNK ? o.bytes - off : CLB_P2P_CHUNK;
    const unsigned long long all = (bytes + 7) / 8;
    unsigned long long l0 = 0, lines = all;
    if constexpr (kBulk) {
      l0 = all * sub / o.blocks;
      lines = all * (sub + 1) / o.blocks;
    }
    constexpr int kAtOnce = kBulk ? kLinesAtOnce : 1;
    if (send) {
      // Room: the peer consumed number k - CLB_P2P_SLOTS (the last one of this slot).
      if (threadIdx.x == 0 && k > CLB_P2P_SLOTS &&
          !waitReached(a, &o.local->credit[slot], k - CLB_P2P_SLOTS, &o, k - CLB_P2P_SLOTS))
        failed = 1;
      __syncthreads();
      if (failed) return;
      // kAtOnce lines per thread in flight: their loads are issued before any store (a
      // store's "memory" clobber would otherwise hold each load back until the store before it).
      const char* src = static_cast<const char*>(o.src) + off;
      char* to = o.remote->lines[slot];
      const unsigned long long step = blockDim.x;
      for (unsigned long long i = l0 + threadIdx.x; i < lines; i += kAtOnce * step) {
        unsigned long long v[kAtOnce];
#pragma unroll
        for (int u = 0; u < kAtOnce; u++)
          if (i + u * step < lines) v[u] = loadBytes8(src, i + u * step, bytes);
#pragma unroll
        for (int u = 0; u < kAtOnce; u++)
          if (i + u * step < lines) storeSignedLine(to + (i + u * step) * 16, v[u], flag, sized);
      }
    } else {
      const char* from = o.local->lines[slot];
      char* dst = static_cast<char*>(o.dst) + off;
      unsigned long long start = 0;
      if (o.kind == CLB_P2P_RECV_REDUCE) {
        // A reduce adds each line into the buffer as it arrives, one line at a time.
        for (unsigned long long i = l0 + threadIdx.x; i < lines && !failed; i += blockDim.x) {
          unsigned long long v = 0;
          const int got = pollLines<1>(a, from, i, 0, lines, flag, sized, &v, &failed, start);
          if (got < 0) break;
          storeBytes8(dst, i, bytes, reduceIntoLineTyped(o.type, v, loadBytes8(dst, i, bytes), o.op, o.divideBy));
        }
      } else {
        // kAtOnce lines per thread polled together, as the sender writes them.
        const unsigned long long step = blockDim.x;
        for (unsigned long long i = l0 + threadIdx.x; i < lines && !failed; i += kAtOnce * step) {
          unsigned long long v[kAtOnce];
          if (pollLines<kAtOnce>(a, from, i, step, lines, flag, sized, v, &failed, start) < 0) break;
#pragma unroll
          for (int u = 0; u < kAtOnce; u++)
            if (i + u * step < lines) storeBytes8(dst, i + u * step, bytes, v[u]);
        }
      }
      __syncthreads();
      if (failed) return;
      // Every line of chunk k read (by every lane that has some: a short last chunk leaves lanes
      // without lines, and they take no part): the slot is the sender's again. A lane that
      // finishes the slot's next chunk counts on only after this credit (its lines come after
      // it), so one counter per slot serves every chunk.
      const unsigned long long busy = all < (unsigned long long)o.blocks ? all : (unsigned long long)o.blocks;
      if (threadIdx.x == 0 && l0 < lines) {
        __threadfence();
        if (busy == 1 || atomicAdd(&o.local->lanes[slot], 1u) == (unsigned)busy - 1) {
          if (busy > 1) {
            o.local->lanes[slot] = 0;
            __threadfence();
          }
          *reinterpret_cast<volatile unsigned long long*>(&o.local->rxDone[slot]) = k;
          *reinterpret_cast<volatile unsigned long long*>(&o.remote->credit[slot]) = k;
        }
      }
    }
  }
  if (chunks && o.blocks > 1) {
    // Only the operation's last lane out completes it.
    __syncthreads();
    if (threadIdx.x == 0) lastBlockOut(st, j, o.blocks, &failed);
  }
  __syncthreads();
  if (a.alone) {
    // Every pair and direction has one operation here and nothing waits for another: each moves
    // its own count on once all its blocks are through (no other block reads that count).
    if (threadIdx.x == 0 && failed != 2 && o.advance)
      *reinterpret_cast<volatile unsigned long long*>(send ? &o.local->sent : &o.local->received) = counted + o.advance;
    return;
  }
  __shared__ bool last;
  if (threadIdx.x == 0) {
    __threadfence();
    if (failed != 2) *reinterpret_cast<volatile unsigned long long*>(&st->opDone[j]) = launch;
    // The last block out moves every pair's counts on (each block read them at its start, and the
    // last one out comes after every start) and counts the launch.
    last = atomicAdd(&st->blocksDone, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  // One thread per operation; the host gave each pair and direction's chunks of the launch to one.
  for (int i = threadIdx.x; i < a.nops; i += blockDim.x) {
    const ClbP2pOp& q = a.ops[i];
    if (q.advance == 0) continue;
    if (q.kind == CLB_P2P_SEND)
      q.local->sent += q.advance;
    else
      q.local->received += q.advance;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  st->blocksDone = 0;
  __threadfence();
  *reinterpret_cast<volatile unsigned long long*>(&st->launches) = launch;
}

// At most 64 registers a thread, so that four blocks fit on an SM: every rank's launch on the GPU
// takes its share of the block slots (PeerDevice::setUpRank), and fewer slots would squeeze the
// blocks of large in-place sends (an unrolled line loop at 112 registers made a 4-rank all-to-all
// of 64 MiB 4.5x slower on the H200).
// Four kernels: the parameters of up to CLB_P2P_MAX_OPS or CLB_P2P_SMALL_OPS operations (a launch
// copies them), lean or bulk (p2pBody). An empty batch is the warm-up launch (PeerDevice::setUpRank).
extern "C" __global__ void __launch_bounds__(256, 4) clb_dev_p2p(const ClbP2pArgs a) {
  if (a.nops) p2pBody<false>(a);
}

extern "C" __global__ void __launch_bounds__(256, 4) clb_dev_p2p_small(const ClbP2pArgsSmall a) {
  if (a.nops) p2pBody<false>(a);
}

extern "C" __global__ void __launch_bounds__(256, 4) clb_dev_p2p_bulk(const ClbP2pArgs a) {
  if (a.nops) p2pBody<true>(a);
}

extern "C" __global__ void __launch_bounds__(256, 4) clb_dev_p2p_small_bulk(const ClbP2pArgsSmall a) {
  if (a.nops) p2pBody<true>(a);
}
