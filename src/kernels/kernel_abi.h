// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The contract between the host core and the device kernels, shared by both sides. Kernels are
// built once per compute capability into a cubin (plus a PTX fallback) and loaded by the driver
// at run time (src/device/kernels.cc): nothing here links against the CUDA runtime.
#pragma once

#include <stddef.h>

#define CLB_KERNEL_ABI_VERSION 14
// Inputs one reduction kernel launch can combine (ranks on one node beyond that take more passes).
#define CLB_MAX_KERNEL_SRCS 16

// Kernel parameter block of clb_reduce_<type>: dst[i] = srcs[0][i] op ... op srcs[k-1][i], left
// to right, in the accumulation type (float32 for float16/bfloat16), rounded once; with
// `divide` set and op == avg the result is divided by nranks before rounding (the ring's last
// step, and the direct path). Same numbers as the host loops in src/base/dtype.cc, bit for bit.
struct ClbReduceArgs {
  void* dst;
  const void* srcs[CLB_MAX_KERNEL_SRCS];
  int k;
  int op;      // clbRedOp_t
  int nranks;  // for avg
  int divide;  // 1: apply avg's division
  unsigned long long n;
};

// Kernel parameter block of clb_scale_<type> (PreMulSum, src/device/scale.cc): dst[i] = src[i] x
// the scalar for i < n, in the accumulation type (float32 for float16/bfloat16), rounded once,
// integers wrapping: the host loop's bits (scaleInto in src/base/dtype.cc). The scalar is one
// element read from `scalar` when the kernel runs (device memory or mapped pinned host memory: a
// replayed graph reads the value of the moment), or, with `scalar` NULL, the element in the first
// bytes of `value`. dst may equal src.
struct ClbScaleArgs {
  void* dst;
  const void* src;
  const void* scalar;
  unsigned long long value;
  unsigned long long n;
};

// ---- device collectives inside a node (src/kernels/collective.cu) ----
// Ranks (threads or processes, on one GPU or several) see each other's flag blocks (and staging
// and LL buffers) through CUDA IPC, in one process directly, or, where some GPUs have no peer
// access, in pinned host memory every rank maps. One kernel per call on the caller's stream,
// three ways (Device::run in src/device/device.cc picks one; ll.cc, direct.cc and
// staged.cc beside it launch them):
//  ll:     push the input, 8 bytes and the call number in each 16-byte line, into this rank's
//          slot of every rank's LL buffer (`staging` points at the LL buffers then), and read
//          the lines that land in this rank's own, polling them until they carry this call;
//  staged: write the input into this rank's slot of every rank's staging (pushed: remote
//          writes need no round trip), announce it, combine the slots of this rank's own
//          staging in rank order into the output, announce that reading is done;
//  direct: hand this call's buffer addresses to every rank (or, across processes, take the mapped
//          addresses of the peers' registered buffers from the host), wait until every rank
//          posted, read the peers' buffers themselves (no copy in), wait until every rank
//          finished reading;
//  copies: (GPUs without peer access, flags and staging in host memory) the copy engines move
//          the bulk: this rank's input is copied into its slot of its own staging, the peers'
//          slots out of theirs, and small one-block kernels in between wait and announce
//          (clb_dev_hostcopy, one phase per launch; src/device/hostcopy.cc). No kernel on this
//          path touches host memory with an atomic (some PCIe hosts lack those).
#define CLB_MAX_DEVICE_RANKS 16

struct ClbDevFlags {
  unsigned long long posted[CLB_MAX_DEVICE_RANKS];  // [p]: last call rank p pushed its data / addresses for
  unsigned long long mid[CLB_MAX_DEVICE_RANKS];     // [p]: last call whose first phase rank p finished (two-shot)
  unsigned long long done[CLB_MAX_DEVICE_RANKS];    // [p]: last call rank p finished reading
  unsigned int blocks[4];  // block counters (first/second announcement x parity), where the flags are in device memory
  // calls and error side by side, 16-byte aligned, right after the block counters: a kernel reads
  // both with one load at ClbDevCallArgs::counters + 16 (see there).
  unsigned long long calls;  // calls this rank completed
  unsigned int error;        // nonzero (CLB_DEV_ERR_*): this rank's communicator failed
  // clbGraphLaunch's permit: set on the stream before a graph it launches and cleared after it
  // (device/graph_launch.cc); a captured kernel of ranks sharing a GPU in one process
  // (ClbDevCallArgs::replayGuard) that starts while it is 0 was replayed without that entry point.
  // Read with `calls` and `error` (ClbDevCallArgs::counters + 28 where the flags are in host memory).
  unsigned int replayPermit;
  unsigned long long send[2][CLB_MAX_DEVICE_RANKS];  // direct: [call parity][p] rank p's buffers,
  unsigned long long recv[2][CLB_MAX_DEVICE_RANKS];  // written here by rank p (windows: its
                                                     // window's ID + 1 or 0, and its offset there)
  // copies (clb_dev_hostcopy): [p] the progress (hcProgress) of the last round rank p copied into
  // its staging, and of the last round whose peers' staging rank p finished copying out.
  unsigned long long hcPosted[CLB_MAX_DEVICE_RANKS];
  unsigned long long hcRead[CLB_MAX_DEVICE_RANKS];
  // [call parity][p]: rank p's description of its call (ClbDevCallArgs::sig) as one 16-byte line
  // {sig low, flag, sig high, flag}, flag = CLB_DEV_LINE_FLAG(call), written with one vector store
  // like an LL line, so that a reader that sees the call's flag in both words has the whole
  // description without a fence. Every path's kernel writes its line into every rank's block when
  // its call starts; a rank compares every peer's line with its own description (the agreement
  // check: ranks that make different calls fail at once instead of moving data their arguments do
  // not define). A line of call s is rewritten at call s + 2, which a rank cannot start before
  // every rank finished call s.
  unsigned int callLine[2][CLB_MAX_DEVICE_RANKS][4];
};

// The flag of call `seq`'s lines (LL data and call lines): never 0, the value of lines no call has
// written yet (after 2^32 - 1 calls seq would wrap to it).
#define CLB_DEV_LINE_FLAG(seq) ((unsigned int)((seq) % 0xFFFFFFFFull) + 1u)

// A call's description as the kernels compare it across ranks (ClbDevCallArgs::sig), packed so
// that the host can name what a peer called: bits 0-2 the collective (CLB_DEV_*), 3-7 the type,
// 8-13 the reduction as the caller named it (clbRedOp_t, a PreMulSum of any scalar as clbNumOps;
// 0 for calls without one), 14-21 the root (device ranks are at most CLB_MAX_DEVICE_RANKS; for
// calls without one 0, or CLB_DEV_SIG_BARRIER for a barrier, an allReduce of one int32), 22-63 the
// count (elements per rank as the call takes it, modulo 2^42: exact for any count a GPU's memory
// holds).
#define CLB_DEV_SIG_BARRIER 0xFF
// ... and a windowed call's (ClbDevCallArgs::window) root, so that a rank that takes another path
// for the same call (registrations that differ) fails the call instead of reading what no one wrote.
#define CLB_DEV_SIG_WINDOW 0xFE
#define CLB_DEV_SIG_WINDOW_BARRIER 0xFD
// The call line of a rank whose replay was refused (CLB_DEV_ERR_REPLAY): collective 7, which no
// call has.
#define CLB_DEV_SIG_REPLAY 0x7ull
// The call line of a rank whose gate (clb_dev_gate) timed out: collective 6, which no call has, so
// that a peer arriving later fails at once instead of waiting out a timeout of its own.
#define CLB_DEV_SIG_GAVEUP 0x6ull
// The call line of a rank whose communicator failed (a refusal of its own, an error, a peer's
// failure) for the first device call it will never make: once its kernels finished every call it
// launched, it says which call that is, and each peer's host writes this line for it into its own
// flag block (DeviceShared::tellPeersOfFailure, hearPeersFailures). Collective 5, which no call
// has, so that the peers' kernels of that call end at once instead of waiting until their timeout.
#define CLB_DEV_SIG_FAILED 0x5ull
#define CLB_DEV_SIG(coll, type, op, root, count)                                        \
  ((unsigned long long)((coll)&0x7) | ((unsigned long long)((type)&0x1F) << 3) |        \
   ((unsigned long long)((op)&0x3F) << 8) | ((unsigned long long)((root)&0xFF) << 14) | \
   ((unsigned long long)(count) << 22))

// The copies path's progress word for round `round` (0-based) of call `seq`: grows with both, so
// that every wait is "every rank's word >= this".
#define CLB_HC_ROUND_BITS 24

// What this rank's kernels tell its host without a synchronization: a word block in mapped pinned
// host memory, written with plain stores only (no atomics to host memory, which some PCIe hosts
// lack) and read by clbCommGetAsyncError and the watchdog (src/device/watchdog.cc).
struct ClbDevHostStatus {
  unsigned int error;            // nonzero: a wait timed out or a peer made another call (errorKind; written last)
  unsigned int errorColl;        // ... in this collective (CLB_DEV_*)
  unsigned long long errorCall;  // ... of this call number
  unsigned long long stuckCall;  // the latest call with a wait past the warning threshold
  unsigned int stuckColl;
  unsigned int errorKind;  // what `error` means: CLB_DEV_ERR_*
  // [p] == low 32 bits of a call number: that call waited for rank p past the warning threshold;
  // and until its timeout (a rank that came between the two is only in waitingFor).
  unsigned int waitingFor[CLB_MAX_DEVICE_RANKS];
  unsigned int timedOutFor[CLB_MAX_DEVICE_RANKS];
  // CLB_DEV_ERR_DISAGREE: the first peer seen to make another call, its description and this
  // rank's (ClbDevCallArgs::sig), written before `error`.
  int errorRank;
  unsigned int pad;
  unsigned long long errorSig, errorPeerSig;
  // The host's: where it copies this rank's count of completed calls (ClbDevFlags::calls) with an
  // asynchronous copy, to read it without a synchronization (DeviceShared::tellPeersOfFailure).
  // No kernel writes it.
  unsigned long long hostCalls;
};

// ClbDevHostStatus::errorKind. The device error word (ClbDevFlags::error, and this rank's copy
// beside its call count) holds the same value, so that later calls end at once either way.
// CLB_DEV_ERR_REPLAY: a captured call of ranks sharing a GPU in one process ran in a graph launched
// without clbGraphLaunch; its call line then holds CLB_DEV_SIG_REPLAY, so that every peer fails too.
// CLB_DEV_ERR_PEER is the host's, in the error word only (no kernel writes it, and the host status
// stays as the kernels left it): the communicator was aborted, here or by a peer, a peer died (its
// notice came), or a failed rank cannot tell how far its calls go, so this rank's kernels of it end
// at once instead of waiting (DeviceShared::stopIfAbandoned, device/stop.h).
enum { CLB_DEV_ERR_TIMEOUT = 1, CLB_DEV_ERR_DISAGREE = 2, CLB_DEV_ERR_REPLAY = 3, CLB_DEV_ERR_PEER = 4 };

static_assert(offsetof(ClbDevFlags, calls) % 16 == 0 &&
                  offsetof(ClbDevFlags, error) == offsetof(ClbDevFlags, calls) + 8,
              "calls and error are read with one 16-byte load");
static_assert(offsetof(ClbDevFlags, calls) == offsetof(ClbDevFlags, blocks) + 16,
              "calls and error follow the block counters: kernels find them at counters + 16");
static_assert(offsetof(ClbDevFlags, callLine) % 16 == 0, "call lines are written and read as one 16-byte vector");

// Collectives as the kernels number them. A reduce runs as an all-reduce whose result only the
// root writes (`out` is NULL elsewhere, and says so to the kernels): every rank still hears from
// every rank in every call
// (what lets LL and staging slots be reused), staged inputs go to the root's staging only, and
// direct has the root read every rank's send buffer.
enum {
  CLB_DEV_ALLREDUCE = 0,
  CLB_DEV_ALLGATHER = 1,
  CLB_DEV_REDUCESCATTER = 2,
  CLB_DEV_BROADCAST = 3,
  CLB_DEV_REDUCE = 4
};

// The call number is read on the device (this rank's `calls` + 1), not passed in: a call captured
// in a CUDA graph and replayed is a new call each time.
struct ClbDevCallArgs {
  // Per rank: its staging (two halves of `half` bytes, call number parity picks one; a half holds
  // one slot of `slot` bytes per rank, where that rank pushes its data), its flags.
  char* staging[CLB_MAX_DEVICE_RANKS];
  unsigned long long half, slot;
  ClbDevFlags* flags[CLB_MAX_DEVICE_RANKS];
  ClbDevHostStatus* host;     // mapped pinned host memory: the host sees a timeout without a sync
  unsigned long long warnNs;  // a wait this long says so in host->stuckCall / waitingFor (0: never)
  // staged: inBytes pushed to every rank (inSlices == nranks: slice p, inStride apart, to rank p).
  // direct: `in` is the whole send buffer (NULL on a broadcast's non-root ranks).
  const void* in;
  unsigned long long inBytes, inStride;
  int inSlices;
  void* out;  // destination (staged mode 1: rank p's block at out + p * outStride)
  unsigned long long outStride;
  unsigned long long timeoutNs;
  int rank, nranks;
  // staged: what to do with the staged inputs
  int mode;  // 0 reduce (every slot), 1 gather (concatenate the slots), 2 copy the root's slot
  int type, op, root;
  unsigned long long count;  // staged mode 0: elements combined; 1 and 2: bytes copied per rank.
                             // direct: elements per rank's send buffer (allGather, broadcast,
                             // allReduce) or per rank's result (reduceScatter)
  // direct
  int coll;     // CLB_DEV_*
  int twoShot;  // allReduce: reduce one segment per rank, then copy the others' (in place allowed)
  int elemSize;
  // direct, ranks in several processes: every rank's buffers as mapped in this process (registered
  // buffers, CUDA IPC), given by the host instead of handed over through the flag blocks.
  int given;
  const char* peerIn[CLB_MAX_DEVICE_RANKS];
  char* peerOut[CLB_MAX_DEVICE_RANKS];
  // direct, ranks in several processes, a call of the LL sizes where the communicator holds
  // registrations (`window` 1): each rank posts where its send buffer (`inBytes` bytes) lies,
  // `windowId` (its registration's ID + 1) at `windowOff`, or 0 where it is in none (or an
  // allReduce in place) and its kernel copied it into its own LL buffer (staging[rank], the half of
  // the call's parity; `half` bytes each). Where every rank posted the same window, each reads the
  // peers' buffers there (peerIn[p]: rank p's range of that registration as mapped here), else
  // every rank's copy (the ranks still in their windows copy theirs first). The copies are raw
  // bytes, not lines: only where LL never runs (COLIBRI_DEVICE_PATH=direct), so no LL reader
  // takes them for lines.
  int window;
  unsigned long long windowId, windowOff;
  // This rank's block counters (4 words, only its own kernels touch them), followed by its
  // `calls` and `error` as its own kernels read them at the start of every call (16 bytes at
  // counters + 16): its flag block's `blocks` where the flags are in device memory, else 32 bytes
  // of device memory, so that no kernel needs an atomic on host memory and none reads its call
  // number there (that copy kept by the kernels alongside the flag block's; a read of host
  // memory by every thread of a launch cost about 12 us per call on the H200). (A pointer of its
  // own gave the LL kernel a stack frame on sm_120.)
  unsigned int* counters;
  // copies (clb_dev_hostcopy): which step this launch is (CLB_HC_*) and of which round of the
  // call; the combine step (clb_dev_hostcopy_combine) reads rank p's part from peerIn[p] (the
  // device scratch the peers' staging was copied into, or this rank's own input) into `out`.
  int phase;
  int round;
  // This call's description (CLB_DEV_SIG), the same on every rank that makes the same call; each
  // rank's kernels write it into their call lines (ClbDevFlags::callLine) and compare the peers'.
  unsigned long long sig;
  // 1: a call captured in a CUDA graph where other ranks of this process share the GPU: it runs
  // only inside a launch through clbGraphLaunch (ClbDevFlags::replayPermit).
  int replayGuard;
};

// clb_dev_hostcopy's steps, each a launch between the copies (hostcopy.cc). A call's rounds
// alternate between the two halves of every rank's staging; its copies out of the peers' staging
// run on a second stream, so that round j + 1's copy in overlaps round j's copies out.
enum {
  CLB_HC_GATE =
      0,  // (caller's stream) every rank finished reading this rank's half: the round two before, or the previous call
  CLB_HC_POSTED = 1,  // (caller's stream) tell every rank this round's input is in this rank's half
  CLB_HC_WAIT = 2,    // (second stream) wait until every rank posted this round
  CLB_HC_COMBINE =
      3,            // (second stream) out = peerIn[0] op ... op peerIn[n-1] (count elements): clb_dev_hostcopy_combine
  CLB_HC_READ = 4,  // (second stream) tell every rank this one copied this round out of every half
  CLB_HC_DONE = 5   // (caller's stream, after every round) tell every rank the call is done here, and count it
};

// ---- point-to-point on device memory, ranks on one GPU (src/kernels/p2p.cu) ----
// Per pair and direction the receiver owns an inbox in its GPU's memory, which the sender's
// kernels write: CLB_P2P_SLOTS slots of CLB_P2P_CHUNK payload bytes in 16-byte lines (8 data bytes,
// the flag, and the flag mixed with the message's call signature: ClbP2pOp::sig). Chunks are numbered per pair and
// direction from 1, on the device (a graph replayed numbers on); number k uses slot
// k % CLB_P2P_SLOTS (flag k), and its sender writes it once the receiver is through with number
// k - CLB_P2P_SLOTS of that slot (credit[slot] >= k - CLB_P2P_SLOTS), so no order of the two ranks'
// kernels overwrites what is unread, every slot's numbers complete in order, and a large message
// keeps that many chunks in flight. A message the host marks inPlace (over 16 KiB and
// not part of a reduce; both ranks of the pair decide alike) is one "chunk" number that moves in
// place instead: the receiver says it is ready (and, in one process, its buffer's address) in the
// sender's box, the sender's blocks copy into it and say so in the receiver's box; the receiver
// also publishes its call signature there, which the sender compares before it copies, and the
// sender marks the slot's first line with its own (signed as in place), which the receiver
// compares while it waits, so that neither side moves a byte for a call that is not its peer's
// (nor waits for one: a receive in lines meeting a send in place fails at that line). Between
// processes the address comes from the host instead (peerDst: the receiver's registered buffer as
// mapped in the sender's process), and only registered receives move in place. Every operation of a batch in one
// launch (one block per operation, several for a large send or copy), so that a batch's sends and
// receives to many peers move side by side (a message of several chunks in lines takes up to 8
// blocks, its lanes, each moving a share of every chunk's lines); the batch's local copies (a send to itself, a root's
// own block) are operations of the same launch. Batches of up to CLB_P2P_SMALL_OPS operations
// launch clb_dev_p2p_small(_bulk), whose parameters are that much smaller (a launch copies them);
// batches with a message of several lanes launch the _bulk kernels, the others the lean ones.
#define CLB_P2P_CHUNK (32u * 1024u)
#define CLB_P2P_SLOTS 2
#define CLB_P2P_MAX_OPS 128
#define CLB_P2P_SMALL_OPS 8
// What a launch writes into its rank's mapped error word (ClbP2pArgs::hostError).
#define CLB_P2P_ERROR_TIMEOUT 1u  // a wait outlasted the timeout
// A send or receive met its peer's operation of another call, count or type (the signatures differ).
#define CLB_P2P_ERROR_MISMATCH 2u
// A wait for a message or a credit of a peer whose communicator failed: past the counts the peer's
// launches reach (ClbP2pBox::ended), so it never comes.
#define CLB_P2P_ERROR_PEER_ENDED 3u

// This rank's box for one peer (in this rank's GPU memory; the peer's kernels write `credit` and
// `lines`, this rank's the rest).
struct ClbP2pBox {
  unsigned long long sent;      // numbers this rank sent to the peer
  unsigned long long received;  // numbers this rank received from the peer
  // Once this rank's communicator failed (PeerDevice::tellPeersOfEnd, this rank's host): the
  // counts its launches with the peer reach (sent, received), then ended = 1. It launches nothing
  // after, so the peer's kernels, which read these on the slow path of their waits, give up a wait
  // for a number past them (CLB_P2P_ERROR_PEER_ENDED) instead of waiting until the timeout.
  unsigned long long endSent, endReceived, ended;
  unsigned long long credit[CLB_P2P_SLOTS];  // [slot]: the last number of this rank's the peer is through with there
  // In place (a large message, number k, slot k % CLB_P2P_SLOTS): the peer, receiving from this
  // rank, writes its buffer's address and then k into want; this rank, receiving from the peer,
  // finds k in done once the peer's blocks copied into its buffer.
  void* wantAddr[CLB_P2P_SLOTS];
  unsigned long long want[CLB_P2P_SLOTS];
  unsigned long long wantSig[CLB_P2P_SLOTS];  // [slot]: that receive's signature (ClbP2pOp::sig)
  unsigned long long done[CLB_P2P_SLOTS];
  // [slot]: the last number this rank received from the peer there (its own kernels): an
  // in-place receive publishes its address only once the one before in its slot is through.
  unsigned long long rxDone[CLB_P2P_SLOTS];
  // [slot]: the lanes (blocks) of this rank's receive through the chunk there; the last one out
  // credits it and sets this back to 0.
  unsigned int lanes[CLB_P2P_SLOTS];
  // [slot]: the peer's chunks to this rank, in lines (16-byte vector stores and loads: aligned).
  alignas(16) char lines[CLB_P2P_SLOTS][2 * CLB_P2P_CHUNK];
};
static_assert(offsetof(ClbP2pBox, lines) % 16 == 0, "the lines are read and written 16 bytes at a time");

// One rank's bookkeeping of its point-to-point launches (its GPU memory).
struct ClbP2pState {
  unsigned int blocksDone;                     // blocks of the running launch that finished
  unsigned int error;                          // a wait timed out: the launches after it return at once
  unsigned long long launches;                 // launches completed
  unsigned long long opDone[CLB_P2P_MAX_OPS];  // [i]: the launch whose operation i completed
  unsigned int opBlocks[CLB_P2P_MAX_OPS];      // [i]: blocks of operation i that finished (several: a large send)
  // What an announcement (a message without data: ClbP2pOp::sig alone says which call its sender
  // is in) reads and writes: 8 bytes nobody reads.
  unsigned long long sink;
};

enum { CLB_P2P_SEND = 0, CLB_P2P_RECV = 1, CLB_P2P_RECV_REDUCE = 2, CLB_P2P_COPY = 3 };

struct ClbP2pOp {
  int kind;                // CLB_P2P_*
  int peer;                // the peer's rank (what CLB_P2P_ERROR_PEER_ENDED reports)
  int after;               // -1, or the operation of this launch that must complete first
  int divideBy;            // recv-reduce: > 0 on an average's last step
  int type, op;            // recv-reduce: clbDataType_t, clbRedOp_t
  int inPlace;             // 1: moved in place (one number), 0: in chunks of lines
  int firstBlock, blocks;  // the blocks of the launch that run it (in lines: its lanes)
  ClbP2pBox* local;        // this rank's box for the peer
  ClbP2pBox* remote;       // the peer's box for this rank
  const void* src;         // send, copy
  void* dst;               // receive, copy
  // An in-place send to a rank in another process: the receiver's buffer as mapped in this one
  // (NULL: the address the receiver publishes, a rank of this process).
  void* peerDst;
  unsigned long long bytes;
  // The call this operation belongs to, hashed (its kind, count, type, op, root and number among
  // the calls every rank makes: PeerOp's signature), alike on the send and its receive: a receive
  // that meets another fails at once (CLB_P2P_ERROR_MISMATCH) and nothing moves into its buffer.
  unsigned long long sig;
  unsigned long long firstChunk;  // chunks of the launch's earlier operations with the peer, same direction
  unsigned long long advance;     // the last of those operations: all their chunks (the box's count moves on by it)
};

// clb_dev_p2p's parameters (N = CLB_P2P_MAX_OPS) and clb_dev_p2p_small's (N = CLB_P2P_SMALL_OPS).
template <int N>
struct ClbP2pArgsOf {
  ClbP2pState* state;
  // Mapped pinned host memory: [0] CLB_P2P_ERROR_* once a launch failed; [1] with
  // CLB_P2P_ERROR_PEER_ENDED, the rank waited for (written before [0]).
  unsigned int* hostError;
  unsigned long long timeoutNs;
  int nops;
  // 1: no operation waits for another and each pair and direction has one operation, so each
  // moves its own count on and the launch is not counted (opDone, launches untouched).
  int alone;
  ClbP2pOp ops[N];
};
typedef ClbP2pArgsOf<CLB_P2P_MAX_OPS> ClbP2pArgs;
typedef ClbP2pArgsOf<CLB_P2P_SMALL_OPS> ClbP2pArgsSmall;
