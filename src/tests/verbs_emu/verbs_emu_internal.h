// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The verbs emulator's objects, shared by the control path (verbs_emu.cc: devices, PDs, MRs,
// CQs, the QP state machine, posting and polling) and the data path (verbs_emu_nic.cc: the
// per-context "NIC" thread, the wire, requester and responder). Every emulated verbs object
// starts with the real ibv_* structure, so the pointers handed out are the real types with their
// public fields filled (qp_num, lkey, rkey, context...), and the context's ops carry the
// emulator's post_send/post_recv/poll_cq/req_notify_cq like a provider's would.
//
// Locking: one mutex per context (Ctx::mu) guards its QPs, MRs, PDs and the NIC state; a CQ has
// its own mutex (Cq::mu) so that pollCq never waits for the NIC thread. Order: Ctx::mu, then
// Cq::mu / Channel::mu / Ctx::asyncMu. Socket I/O happens on the NIC thread only.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "tests/verbs_emu/verbs_emu.h"

namespace clb {
namespace verbs {
namespace emu {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kMaxNode = 0xBFFF;     // node numbers are valid unicast LIDs: 1..0xBFFF
constexpr uint32_t kPsnMask = 0xFFFFFF;   // PSNs and QP numbers are 24-bit
constexpr size_t kSegment = 64 * 1024;    // payload of one emulated packet (one PSN)
constexpr uint64_t kWindowSegments = 64;  // unacknowledged packets per QP
constexpr int kGidTableLen = 16;
constexpr int kMaxQpWr = 16384;
constexpr int kMaxSge = 30;
constexpr uint32_t kMaxInline = 256;
constexpr int kMaxCqe = 1 << 22;
constexpr int kMaxRdAtom = 16;
constexpr uint32_t kMaxMsgSize = 1u << 31;
constexpr uint64_t kGuidPrefix = 0x02c011b100000000ull;  // locally administered EUI-64

struct Ctx;
struct Pd;
struct Cq;

struct Pd {
  ibv_pd ibv;
  Ctx* ctx = nullptr;
  int refs = 0;  // MRs and QPs
};

struct Mr {
  ibv_mr ibv;
  Pd* pd = nullptr;
  uint64_t iova = 0;  // the address range peers and SGEs use
  uint64_t length = 0;
  char* host = nullptr;  // where iova maps in this process (nullptr for a device region)
  bool device = false;   // an unmappable dma-buf: reached through the DeviceCopy, by iova
  int access = 0;
  void* mapBase = nullptr;  // dma-buf regions: the mapping to undo
  size_t mapLen = 0;
};

struct Channel {
  ibv_comp_channel ibv;
  Ctx* ctx = nullptr;
  int writeFd = -1;  // ibv.fd is the read end
  std::mutex mu;
  std::deque<Cq*> events;
};

// SQ/RQ slots are freed when the application polls the completion (as mlx5 does), so that a QP
// that never polls fills up exactly as on hardware. Shared with the CQEs: a QP reset starts a new
// one, so completions of its previous life free nothing.
struct Slots {
  std::atomic<uint64_t> sqReleased{0};  // send WRs posted before this sequence are free
  std::atomic<uint64_t> rqReleased{0};  // receive WRs freed
};

struct Cqe {
  ibv_wc wc;
  std::shared_ptr<Slots> slots;
  bool send = false;
  uint64_t seq = 0;
};

struct Cq {
  ibv_cq ibv;
  Ctx* ctx = nullptr;
  Channel* channel = nullptr;
  int qpRefs = 0;  // under Ctx::mu
  std::mutex mu;
  std::deque<Cqe> q;
  int depth = 0;
  bool overrun = false;
  bool armed = false;
};

struct SendWqe {
  uint64_t seq = 0;  // posting order (slot accounting)
  uint64_t wrId = 0;
  ibv_wr_opcode op = IBV_WR_RDMA_WRITE;
  bool signaled = false;
  bool isInline = false;
  std::vector<ibv_sge> sges;
  std::vector<char> inlineData;
  uint64_t remoteAddr = 0;
  uint32_t rkey = 0;
  uint32_t imm = 0;  // __be32, passed through untouched
  uint64_t len = 0;
  uint64_t firstSerial = 0;  // packet serials [firstSerial, firstSerial + nseg)
  uint64_t nseg = 1;
  bool checked = false;  // local SGEs validated (on first transmission)
};

struct RecvWqe {
  uint64_t wrId = 0;
  uint64_t seq = 0;
  std::vector<ibv_sge> sges;
  uint64_t capacity = 0;
};

struct Qp {
  ibv_qp ibv;
  Ctx* ctx = nullptr;
  Pd* pd = nullptr;
  Cq* scq = nullptr;
  Cq* rcq = nullptr;
  ibv_qp_cap cap{};
  bool sigAll = false;
  ibv_qp_state state = IBV_QPS_RESET;

  // Attributes from ibv_modify_qp.
  uint8_t port = 0;
  uint16_t pkeyIndex = 0;
  unsigned access = 0;
  ibv_mtu pmtu = IBV_MTU_1024;
  uint32_t destQpn = 0;
  uint32_t rqPsn = 0, sqPsn = 0;
  ibv_ah_attr ah{};
  uint8_t minRnrTimer = 0, timeout = 0, retryCnt = 0, rnrRetry = 0, maxRdAtomic = 0, maxDestRdAtomic = 0;

  std::shared_ptr<Slots> slots = std::make_shared<Slots>();
  uint64_t sqPosted = 0, rqPosted = 0;

  // Requester: packet serials (64-bit, from 0 at RTS; the wire carries (sqPsn + serial) & mask).
  std::deque<SendWqe> sq;   // posted and not completed, in order
  uint64_t nextSerial = 0;  // first serial of the next WR posted
  uint64_t una = 0;         // oldest unacknowledged
  uint64_t sendPos = 0;     // next to (re)transmit
  uint64_t sentHigh = 0;    // one past the highest transmitted
  int retriesLeft = 0, rnrLeft = 0;
  Clock::time_point deadline{};
  bool rnrWaiting = false;
  Clock::time_point rnrUntil{};

  // Responder.
  uint32_t ePsn = 0;  // expected PSN
  std::deque<RecvWqe> rq;
  bool recvInProgress = false;  // a multi-packet SEND is filling rq.front()
  bool nakSeqSent = false;

  int dropCount = 0;  // injected: next N request packets lost (-1: all)
  QpStats stats;
};

// A packet on its way out: header and payload. The bytes are left uninitialized by the
// allocation (new char[]): whoever builds the packet writes all `len` of them.
struct Packet {
  std::unique_ptr<char[]> bytes;
  size_t len = 0;
  explicit Packet(size_t n) : bytes(new char[n]), len(n) {}
};

struct OutConn {
  int fd = -1;
  std::deque<Packet> q;
  size_t off = 0;  // bytes of q.front() already written
};

struct InConn {
  int fd = -1;
  std::vector<char> hdr;  // a WireHdr (verbs_emu_nic.cc) being read
  size_t hdrGot = 0;
  std::vector<char> payload;  // kSegment bytes, allocated once at accept and reused per packet
  size_t payLen = 0;          // the current packet's payload length (<= kSegment)
  size_t payGot = 0;
};

struct Ctx {
  ibv_context ibv;
  Config cfg;
  uint32_t node = 0;
  uint64_t guid = 0;  // host order
  ibv_gid gids[kGidTableLen];
  ibv_gid_type gidTypes[kGidTableLen];
  int gidCount = 0;

  std::mutex mu;
  bool portUp = true;
  std::map<uint32_t, Qp*> qps;
  std::map<uint32_t, Mr*> mrByLkey, mrByRkey;
  std::set<Pd*> pds;
  std::set<Cq*> cqs;
  std::set<Channel*> channels;
  uint32_t qpCounter = 0;
  uint32_t keyCounter = 0;
  uint64_t sentPackets = 0;  // for dropEvery
  bool overrunPending = false;

  // NIC thread and wire.
  int listenFd = -1;
  int wakeFd = -1;
  std::atomic<bool> stop{false};
  std::thread nic;
  std::map<uint32_t, OutConn> out;  // by destination node
  std::vector<InConn> in;

  // Asynchronous events: ibv.async_fd is the read end of a pipe, one byte per event.
  std::mutex asyncMu;
  std::deque<ibv_async_event> asyncQ;
  int asyncWriteFd = -1;
};

// A work completion of `q` with everything but the status-specific fields (byte_len, wc_flags,
// imm_data) filled. vendor_err: 0 on success, 0xf9 for a flushed WR (IBV_WC_WR_FLUSH_ERR), and
// 0x80 + status for any other error.
inline ibv_wc baseWc(const Qp* q, uint64_t wrId, ibv_wc_status st, ibv_wc_opcode op) {
  ibv_wc wc;
  memset(&wc, 0, sizeof wc);
  wc.wr_id = wrId;
  wc.status = st;
  wc.opcode = op;
  wc.qp_num = q->ibv.qp_num;
  if (st == IBV_WC_WR_FLUSH_ERR)
    wc.vendor_err = 0xf9;
  else if (st != IBV_WC_SUCCESS)
    wc.vendor_err = 0x80u + (unsigned)st;
  return wc;
}

// Control-path helpers the NIC uses (verbs_emu.cc).
void pushCqe(Cq* cq, const ibv_wc& wc, const std::shared_ptr<Slots>& slots, bool send, uint64_t seq);
void qpError(Qp* qp, ibv_wc_status firstStatus);  // moves to ERR and flushes (caller holds ctx->mu)
void raiseAsync(Ctx* ctx, const ibv_async_event& ev);
void wakeNic(Ctx* ctx);
ibv_wc_opcode sendWcOpcode(ibv_wr_opcode op);
Clock::duration ackTimeout(const Ctx* ctx, uint8_t timeout);  // zero: infinite
Clock::duration rnrDelay(uint8_t timer);
uint32_t gidNode(const ibv_gid& gid);  // 0: not an emulated node's GID
uint32_t routeNode(const Qp* qp);      // destination node from the QP's address vector
void buildNodeAddresses(Ctx* ctx);     // LID, GUID and GID table from ctx->node

// The region's bytes [off, off + n) (off relative to its iova), copied out to / in from host
// memory: memcpy for a mapped region, the DeviceCopy for a device region. 0 or an errno value
// (the DeviceCopy's, or EFAULT when none is set any more); callers turn it into the completion
// error a protection fault would give.
int mrRead(const Mr* m, uint64_t off, void* out, size_t n);
int mrWrite(Mr* m, uint64_t off, const void* data, size_t n);

// Data path (verbs_emu_nic.cc).
int startNic(Ctx* ctx);  // binds the node's socket (claims the node number) and starts the thread
void stopNic(Ctx* ctx);

}  // namespace emu
}  // namespace verbs
}  // namespace clb
