// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The verbs emulator's data path: one "NIC" thread per context (emulated node) and the wire.
//
// Wire and addressing. A node claims its number N (1..0xBFFF) by binding the abstract Unix
// socket "colibri-verbs-emu-v1:N" (EADDRINUSE: try the next number), so numbers are unique among
// all processes of the host (of one network namespace). N is the node's LID on InfiniBand and is
// encoded in its GIDs (fe80::02c0:11b1:0000:N and ::ffff:10.x.y.z with x.y.z = N), so a queue
// pair's address vector (dlid, or dgid for RoCE) names the node to send to, and QP numbers only
// need to be unique within a node, as on hardware. A node sends over a stream connection it opens
// to each destination node; it reads on the connections it accepts. Packets are a fixed header
// and up to 64 KiB of payload; the stream is reliable, so packets are lost only where the model
// says so (injected drops, port down, no such node/QP, a receiver dropping them).
//
// Requester (per QP, in order): each WR is cut into packets of up to 64 KiB, one PSN each
// (24-bit, from the SQ PSN set at RTS). Up to 64 packets are unacknowledged; the local ACK
// timeout (4.096 us * 2^timeout, floored, 0 = infinite) triggers go-back-N retransmission, at most
// retry_cnt times in a row (the counter resets when an ACK makes progress), then
// IBV_WC_RETRY_EXC_ERR. An RNR NAK waits the responder's min_rnr_timer and retransmits, at most
// rnr_retry times (7: forever), then IBV_WC_RNR_RETRY_EXC_ERR. A WR completes (IBV_WC_SUCCESS,
// when signaled) once all its packets are acknowledged, i.e. after the responder placed the data.
// Local SGEs are checked when the WR is first transmitted (IBV_WC_LOC_PROT_ERR).
//
// Responder (per QP): packets are accepted in RTR and RTS only, from the address vector's node
// and QP and with matching GID types (RoCE v1 vs v2), never larger than its own path MTU; the
// expected PSN must match (an earlier PSN is a duplicate: acknowledged, not executed; a later one
// gets one sequence NAK). WRITE checks rkey, PD, REMOTE_WRITE on MR and QP, and bounds (a
// zero-length WRITE touches no memory and is not checked, as on hardware); a failure
// NAKs (the requester gets IBV_WC_REM_ACCESS_ERR) and moves the responder's QP to ERR with an
// IBV_EVENT_QP_ACCESS_ERR. WRITE_WITH_IMM consumes a receive at its last packet
// (IBV_WC_RECV_RDMA_WITH_IMM, byte_len = message length, the immediate untouched); SEND fills the
// receive's SGEs (IBV_WC_RECV). No receive posted: RNR NAK, after which later packets are silently
// dropped until the retry arrives.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "base/error.h"
#include "tests/verbs_emu/verbs_emu_internal.h"

namespace clb {
namespace verbs {
namespace emu {

struct WireHdr {
  uint32_t magic;
  uint16_t version;
  uint8_t type;    // kReq, kAck, kNak
  uint8_t opcode;  // ibv_wr_opcode of a request; NAK code of a NAK
  uint32_t srcNode, dstNode;
  uint32_t srcQpn, dstQpn;
  uint32_t psn;
  uint8_t flags;     // kFirst | kLast | kGrh
  uint8_t gidType;   // of the sender's source GID
  uint8_t rnrTimer;  // RNR NAK: the responder's min_rnr_timer
  uint8_t pad0;
  uint16_t slid, dlid;
  uint32_t pmtuBytes;  // the sender's path MTU
  uint8_t sgid[16], dgid[16];
  uint64_t remoteAddr;  // of this packet's first byte
  uint32_t rkey;
  uint32_t imm;  // __be32 as posted
  uint64_t msgLen;
  uint64_t msgOffset;
  uint32_t payloadLen;
  uint32_t pad1;
};

namespace {

constexpr uint32_t kMagic = 0x45424c43;  // "CLBE"
constexpr uint16_t kWireVersion = 1;
enum : uint8_t { kReq = 1, kAck = 2, kNak = 3 };
enum : uint8_t { kNakSeq = 1, kNakRnr = 2, kNakAccess = 3, kNakInvReq = 4, kNakRemOp = 5 };
enum : uint8_t { kFirst = 1, kLast = 2, kGrh = 4 };

socklen_t nodeAddr(uint32_t node, sockaddr_un* a) {
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "colibri-verbs-emu-v1:%u", node);
  return (socklen_t)(offsetof(sockaddr_un, sun_path) + 1 + n);
}

int connectNode(uint32_t node) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un a;
  socklen_t len = nodeAddr(node, &a);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), len) != 0) {  // no such node: the packet is lost
    close(fd);
    return -1;
  }
  return fd;
}

void flushOut(OutConn& o) {
  while (!o.q.empty()) {
    Packet& b = o.q.front();
    ssize_t n = send(o.fd, b.bytes.get() + o.off, b.len - o.off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
      close(o.fd);  // the node went away: what was queued is lost
      o.fd = -1;
      o.q.clear();
      o.off = 0;
      return;
    }
    o.off += (size_t)n;
    if (o.off == b.len) {
      o.q.pop_front();
      o.off = 0;
    }
  }
}

void enqueue(Ctx* c, uint32_t node, Packet&& buf) {
  OutConn& o = c->out[node];
  if (o.fd < 0) {
    o.fd = connectNode(node);
    if (o.fd < 0) return;
  }
  o.q.push_back(std::move(buf));
  flushOut(o);
}

WireHdr baseHdr(Ctx* c, uint8_t type, uint32_t dstNode) {
  WireHdr h;
  memset(&h, 0, sizeof h);
  h.magic = kMagic;
  h.version = kWireVersion;
  h.type = type;
  h.srcNode = c->node;
  h.dstNode = dstNode;
  return h;
}

void sendResponse(Ctx* c, Qp* q, const WireHdr& req, uint8_t type, uint8_t code, uint32_t psn) {
  WireHdr h = baseHdr(c, type, req.srcNode);
  h.opcode = code;
  h.srcQpn = q->ibv.qp_num;
  h.dstQpn = req.srcQpn;
  h.psn = psn & kPsnMask;
  h.rnrTimer = q->minRnrTimer;
  Packet b(sizeof h);
  memcpy(b.bytes.get(), &h, sizeof h);
  enqueue(c, req.srcNode, std::move(b));
}

Mr* localMr(Ctx* c, Qp* q, const ibv_sge& s, bool write) {
  auto it = c->mrByLkey.find(s.lkey);
  if (it == c->mrByLkey.end()) return nullptr;
  Mr* m = it->second;
  if (m->pd != q->pd) return nullptr;
  if (write && !(m->access & IBV_ACCESS_LOCAL_WRITE)) return nullptr;
  if (s.addr < m->iova || s.length > m->length || s.addr - m->iova > m->length - s.length) return nullptr;
  return m;
}

// ---- requester -----------------------------------------------------------------------------

ibv_wc_status checkLocal(Ctx* c, Qp* q, const SendWqe& w) {
  if (w.len > kMaxMsgSize) return IBV_WC_LOC_LEN_ERR;
  if (w.isInline) return IBV_WC_SUCCESS;
  for (const ibv_sge& s : w.sges)
    if (s.length && !localMr(c, q, s, false)) return IBV_WC_LOC_PROT_ERR;
  return IBV_WC_SUCCESS;
}

// Copies [off, off + len) of the WR's data into `out`; false when a region vanished meanwhile or
// a device region's copy failed (both a local protection error).
bool gather(Ctx* c, Qp* q, const SendWqe& w, uint64_t off, uint64_t len, char* out) {
  if (w.isInline) {
    memcpy(out, w.inlineData.data() + off, len);
    return true;
  }
  for (const ibv_sge& s : w.sges) {
    if (len == 0) break;
    if (off >= s.length) {
      off -= s.length;
      continue;
    }
    Mr* m = localMr(c, q, s, false);
    if (!m) return false;
    uint64_t n = std::min<uint64_t>(s.length - off, len);
    if (mrRead(m, (s.addr - m->iova) + off, out, n) != 0) return false;
    out += n;
    len -= n;
    off = 0;
  }
  return true;
}

void ackUpTo(Ctx* c, Qp* q, uint64_t newUna, Clock::time_point now) {
  if (newUna <= q->una) return;
  q->una = newUna;
  if (q->sendPos < q->una) q->sendPos = q->una;
  q->retriesLeft = q->retryCnt;  // progress: the retry counters start over
  q->rnrLeft = q->rnrRetry;
  q->deadline = now + ackTimeout(c, q->timeout);
  while (!q->sq.empty()) {
    SendWqe& w = q->sq.front();
    if (w.firstSerial + w.nseg > q->una) break;
    if (w.signaled) pushCqe(q->scq, baseWc(q, w.wrId, IBV_WC_SUCCESS, sendWcOpcode(w.op)), q->slots, true, w.seq);
    q->sq.pop_front();
  }
}

void transmit(Ctx* c, Qp* q, Clock::time_point now) {
  while (q->state == IBV_QPS_RTS && !q->rnrWaiting && q->sendPos < q->nextSerial &&
         q->sendPos < q->una + kWindowSegments) {
    SendWqe* w = nullptr;
    for (SendWqe& x : q->sq)
      if (q->sendPos >= x.firstSerial && q->sendPos < x.firstSerial + x.nseg) {
        w = &x;
        break;
      }
    if (!w) return;
    if (!w->checked) {
      ibv_wc_status st = checkLocal(c, q, *w);
      if (st != IBV_WC_SUCCESS) {
        if (q->una < w->firstSerial) return;  // completes in order: after the WRs before it
        qpError(q, st);
        return;
      }
      w->checked = true;
    }
    uint64_t seg = q->sendPos - w->firstSerial;
    uint64_t off = seg * kSegment;
    uint64_t len = w->len > off ? std::min<uint64_t>(kSegment, w->len - off) : 0;
    uint32_t dst = routeNode(q);
    WireHdr h = baseHdr(c, kReq, dst);
    h.opcode = (uint8_t)w->op;
    h.srcQpn = q->ibv.qp_num;
    h.dstQpn = q->destQpn;
    h.psn = (uint32_t)((q->sqPsn + q->sendPos) & kPsnMask);
    h.flags = (seg == 0 ? kFirst : 0) | (seg + 1 == w->nseg ? kLast : 0) | (q->ah.is_global ? kGrh : 0);
    bool eth = c->cfg.linkLayer == IBV_LINK_LAYER_ETHERNET;
    int sgidIndex = q->ah.is_global ? q->ah.grh.sgid_index : 0;
    h.gidType = (uint8_t)c->gidTypes[sgidIndex];
    memcpy(h.sgid, c->gids[sgidIndex].raw, 16);
    if (q->ah.is_global) memcpy(h.dgid, q->ah.grh.dgid.raw, 16);
    h.slid = eth ? 0 : (uint16_t)c->node;
    h.dlid = q->ah.dlid;
    h.pmtuBytes = (uint32_t)mtuBytes(q->pmtu);
    h.remoteAddr = w->remoteAddr + off;
    h.rkey = w->rkey;
    h.imm = w->imm;
    h.msgLen = w->len;
    h.msgOffset = off;
    h.payloadLen = (uint32_t)len;
    Packet b(sizeof h + len);  // header and gather write every byte
    memcpy(b.bytes.get(), &h, sizeof h);
    if (!gather(c, q, *w, off, len, b.bytes.get() + sizeof h)) {
      qpError(q, IBV_WC_LOC_PROT_ERR);
      return;
    }
    bool lost = !c->portUp || dst == 0;
    if (q->dropCount != 0) {
      lost = true;
      if (q->dropCount > 0) q->dropCount--;
    }
    if (c->cfg.dropEvery && ++c->sentPackets % c->cfg.dropEvery == 0) lost = true;
    q->stats.packetsSent++;
    if (q->sendPos < q->sentHigh) q->stats.retransmits++;
    if (q->una == q->sentHigh) q->deadline = now + ackTimeout(c, q->timeout);  // first outstanding
    if (lost)
      q->stats.dropped++;
    else
      enqueue(c, dst, std::move(b));
    q->sendPos++;
    if (q->sendPos > q->sentHigh) q->sentHigh = q->sendPos;
  }
}

void requesterTick(Ctx* c, Qp* q, Clock::time_point now, Clock::time_point* next) {
  if (q->state != IBV_QPS_RTS) return;
  Clock::duration to = ackTimeout(c, q->timeout);
  if (q->rnrWaiting) {
    if (now < q->rnrUntil) {
      *next = std::min(*next, q->rnrUntil);
      return;
    }
    q->rnrWaiting = false;
    q->deadline = now + to;
  }
  if (q->una < q->sentHigh && to != Clock::duration::zero() && now >= q->deadline) {
    q->stats.timeouts++;
    if (q->retriesLeft <= 0) {
      qpError(q, IBV_WC_RETRY_EXC_ERR);
      return;
    }
    q->retriesLeft--;
    q->sendPos = q->una;  // go back N
    q->deadline = now + to;
  }
  transmit(c, q, now);
  if (q->state == IBV_QPS_RTS && q->una < q->sentHigh && to != Clock::duration::zero())
    *next = std::min(*next, q->deadline);
}

void onResponse(Ctx* c, Qp* q, const WireHdr& h, Clock::time_point now) {
  if (q->state != IBV_QPS_RTS) return;
  if (h.srcQpn != q->destQpn || h.srcNode != routeNode(q)) return;
  uint64_t outstanding = q->sentHigh - q->una;
  uint64_t d = (h.psn - (uint32_t)(q->sqPsn + q->una)) & kPsnMask;
  if (d >= outstanding) return;  // stale or foreign
  uint64_t s = q->una + d;
  if (h.type == kAck) {
    ackUpTo(c, q, s + 1, now);
    return;
  }
  ackUpTo(c, q, s, now);  // a NAK acknowledges what came before it
  switch (h.opcode) {
    case kNakSeq:
      q->stats.seqNaks++;
      if (q->rnrWaiting) return;
      if (q->retriesLeft <= 0) {
        qpError(q, IBV_WC_RETRY_EXC_ERR);
        return;
      }
      q->retriesLeft--;
      q->sendPos = s;
      q->deadline = now + ackTimeout(c, q->timeout);
      return;
    case kNakRnr:
      q->stats.rnrNaks++;
      if (q->rnrRetry != 7) {  // 7: retry forever
        if (q->rnrLeft <= 0) {
          qpError(q, IBV_WC_RNR_RETRY_EXC_ERR);
          return;
        }
        q->rnrLeft--;
      }
      q->rnrWaiting = true;
      q->rnrUntil = now + rnrDelay(h.rnrTimer);
      q->sendPos = s;
      return;
    case kNakAccess: qpError(q, IBV_WC_REM_ACCESS_ERR); return;
    case kNakInvReq: qpError(q, IBV_WC_REM_INV_REQ_ERR); return;
    default: qpError(q, IBV_WC_REM_OP_ERR); return;
  }
}

// ---- responder -----------------------------------------------------------------------------

bool sourceMatches(Ctx* c, Qp* q, const WireHdr& h) {
  if (h.srcQpn != q->destQpn) return false;
  bool grh = (h.flags & kGrh) != 0;
  if (c->cfg.linkLayer == IBV_LINK_LAYER_ETHERNET) {
    if (!grh || memcmp(h.sgid, q->ah.grh.dgid.raw, 16) != 0) return false;
    int idx = -1;
    for (int i = 0; i < c->gidCount; i++)
      if (memcmp(c->gids[i].raw, h.dgid, 16) == 0) idx = i;
    // RoCE v1 and v2 frames are different protocols: each end must use the same type.
    if (idx < 0 || c->gidTypes[idx] != h.gidType) return false;
    return c->gidTypes[q->ah.grh.sgid_index] == h.gidType;
  }
  if (h.slid != q->ah.dlid || h.dlid != c->node) return false;
  if (q->ah.is_global && (!grh || memcmp(h.sgid, q->ah.grh.dgid.raw, 16) != 0)) return false;
  return true;
}

Mr* remoteMr(Ctx* c, Qp* q, uint32_t rkey, uint64_t addr, uint64_t len) {
  if (!(q->access & IBV_ACCESS_REMOTE_WRITE)) return nullptr;
  auto it = c->mrByRkey.find(rkey);
  if (it == c->mrByRkey.end()) return nullptr;
  Mr* m = it->second;
  if (m->pd != q->pd || !(m->access & IBV_ACCESS_REMOTE_WRITE)) return nullptr;
  if (addr < m->iova || len > m->length || addr - m->iova > m->length - len) return nullptr;
  return m;
}

void responderError(Ctx* c, Qp* q, const WireHdr& h, uint8_t nak, ibv_event_type ev) {
  sendResponse(c, q, h, kNak, nak, h.psn);
  ibv_async_event e;
  memset(&e, 0, sizeof e);
  e.event_type = ev;
  e.element.qp = &q->ibv;
  raiseAsync(c, e);
  qpError(q, IBV_WC_WR_FLUSH_ERR);
}

void popRecv(Qp* q, ibv_wc_status st, ibv_wc_opcode op, const WireHdr& h, bool withImm) {
  RecvWqe r = std::move(q->rq.front());
  q->rq.pop_front();
  ibv_wc wc = baseWc(q, r.wrId, st, op);
  if (st == IBV_WC_SUCCESS) {
    wc.byte_len = (uint32_t)h.msgLen;
    if (withImm) {
      wc.wc_flags = IBV_WC_WITH_IMM;
      wc.imm_data = h.imm;
    }
  }
  pushCqe(q->rcq, wc, q->slots, false, r.seq);
}

// Scatters a SEND's payload at `off` into the receive's SGEs; false on a protection error (a
// device region's copy failing is one).
bool scatter(Ctx* c, Qp* q, const RecvWqe& r, uint64_t off, const char* data, uint64_t len) {
  for (const ibv_sge& s : r.sges) {
    if (len == 0) break;
    if (off >= s.length) {
      off -= s.length;
      continue;
    }
    Mr* m = localMr(c, q, s, true);
    if (!m) return false;
    uint64_t n = std::min<uint64_t>(s.length - off, len);
    if (mrWrite(m, (s.addr - m->iova) + off, data, n) != 0) return false;
    data += n;
    len -= n;
    off = 0;
  }
  return true;
}

void onRequest(Ctx* c, Qp* q, const WireHdr& h, const char* data) {
  if (q->state != IBV_QPS_RTR && q->state != IBV_QPS_RTS) {
    q->stats.rejected++;
    return;
  }
  if (!sourceMatches(c, q, h)) {
    q->stats.rejected++;
    return;
  }
  uint32_t mtu = (uint32_t)mtuBytes(q->pmtu);
  if (h.payloadLen > mtu && h.pmtuBytes > mtu) {  // the sender's packets are larger than this path allows
    q->stats.rejected++;
    return;
  }
  uint32_t d = (h.psn - q->ePsn) & kPsnMask;
  if (d != 0) {
    if (d < 0x800000) {  // ahead: packets were lost; one sequence NAK per gap
      if (!q->nakSeqSent) sendResponse(c, q, h, kNak, kNakSeq, q->ePsn);
      q->nakSeqSent = true;
    } else {  // a duplicate: acknowledged again, not executed again
      sendResponse(c, q, h, kAck, 0, q->ePsn - 1);
    }
    return;
  }
  bool first = h.flags & kFirst, last = h.flags & kLast;
  switch (h.opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: {
      if (h.msgLen > 0) {
        // The first packet's address and length cover the whole message, as the RETH does.
        uint64_t checkLen = first ? h.msgLen : h.payloadLen;
        Mr* m = remoteMr(c, q, h.rkey, h.remoteAddr, checkLen);
        if (!m || h.payloadLen > checkLen) {
          responderError(c, q, h, kNakAccess, IBV_EVENT_QP_ACCESS_ERR);
          return;
        }
        // A device region whose copy fails is a fault at the target address: remote access error.
        if (mrWrite(m, h.remoteAddr - m->iova, data, h.payloadLen) != 0) {
          responderError(c, q, h, kNakAccess, IBV_EVENT_QP_ACCESS_ERR);
          return;
        }
      }
      if (h.opcode == IBV_WR_RDMA_WRITE_WITH_IMM && last) {
        if (q->rq.empty()) {
          sendResponse(c, q, h, kNak, kNakRnr, h.psn);
          q->nakSeqSent = true;  // drop what follows silently until the retry arrives
          return;
        }
        popRecv(q, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, h, true);
      }
      break;
    }
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM: {
      if (first) {
        if (q->rq.empty()) {
          sendResponse(c, q, h, kNak, kNakRnr, h.psn);
          q->nakSeqSent = true;
          return;
        }
        if (h.msgLen > q->rq.front().capacity) {
          popRecv(q, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, h, false);
          responderError(c, q, h, kNakInvReq, IBV_EVENT_QP_REQ_ERR);
          return;
        }
        q->recvInProgress = true;
      } else if (!q->recvInProgress) {
        responderError(c, q, h, kNakInvReq, IBV_EVENT_QP_REQ_ERR);
        return;
      }
      if (!scatter(c, q, q->rq.front(), h.msgOffset, data, h.payloadLen)) {
        popRecv(q, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, h, false);
        responderError(c, q, h, kNakRemOp, IBV_EVENT_QP_ACCESS_ERR);
        return;
      }
      if (last) {
        popRecv(q, IBV_WC_SUCCESS, IBV_WC_RECV, h, h.opcode == IBV_WR_SEND_WITH_IMM);
        q->recvInProgress = false;
      }
      break;
    }
    default: responderError(c, q, h, kNakInvReq, IBV_EVENT_QP_REQ_ERR); return;
  }
  q->ePsn = (q->ePsn + 1) & kPsnMask;
  q->nakSeqSent = false;
  sendResponse(c, q, h, kAck, 0, h.psn);
}

void onPacket(Ctx* c, const WireHdr& h, const char* data, Clock::time_point now) {
  if (!c->portUp || h.dstNode != c->node) return;  // a port that is down hears nothing
  auto it = c->qps.find(h.dstQpn);
  if (it == c->qps.end()) return;  // no such QP: silently dropped, as on the wire
  if (h.type == kReq)
    onRequest(c, it->second, h, data);
  else
    onResponse(c, it->second, h, now);
}

// Reads what is there; false when the connection closed or carried garbage.
bool readIn(Ctx* c, InConn& in) {
  for (int k = 0; k < 256; k++) {
    if (in.hdrGot < sizeof(WireHdr)) {
      ssize_t n = recv(in.fd, in.hdr.data() + in.hdrGot, sizeof(WireHdr) - in.hdrGot, MSG_DONTWAIT);
      if (n == 0) return false;
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      in.hdrGot += (size_t)n;
      if (in.hdrGot < sizeof(WireHdr)) continue;
      const WireHdr* h = reinterpret_cast<const WireHdr*>(in.hdr.data());
      if (h->magic != kMagic || h->version != kWireVersion || h->payloadLen > kSegment) {
        CLB_WARN("verbs emulator: node %u dropped a connection carrying a foreign or newer wire format", c->node);
        return false;
      }
      in.payLen = h->payloadLen;  // <= kSegment: fits the connection's buffer
      in.payGot = 0;
    }
    if (in.payGot < in.payLen) {
      ssize_t n = recv(in.fd, in.payload.data() + in.payGot, in.payLen - in.payGot, MSG_DONTWAIT);
      if (n == 0) return false;
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      in.payGot += (size_t)n;
      if (in.payGot < in.payLen) continue;
    }
    WireHdr h;
    memcpy(&h, in.hdr.data(), sizeof h);
    {
      std::lock_guard<std::mutex> lock(c->mu);
      onPacket(c, h, in.payload.data(), Clock::now());
    }
    in.hdrGot = 0;
    in.payLen = 0;
    in.payGot = 0;
  }
  return true;
}

void handleOverruns(Ctx* c) {
  c->overrunPending = false;
  for (auto& kv : c->qps) {
    Qp* q = kv.second;
    if (q->state == IBV_QPS_RESET || q->state == IBV_QPS_ERR) continue;
    bool over;
    {
      std::lock_guard<std::mutex> l1(q->scq->mu);
      over = q->scq->overrun;
    }
    if (!over) {
      std::lock_guard<std::mutex> l2(q->rcq->mu);
      over = q->rcq->overrun;
    }
    if (over) qpError(q, IBV_WC_WR_FLUSH_ERR);
  }
}

void nicLoop(Ctx* c) {
  std::vector<pollfd> fds;
  std::vector<uint32_t> outNodes;
  while (!c->stop.load()) {
    Clock::time_point now = Clock::now();
    Clock::time_point next = now + std::chrono::milliseconds(200);
    fds.clear();
    outNodes.clear();
    fds.push_back({c->wakeFd, POLLIN, 0});
    fds.push_back({c->listenFd, POLLIN, 0});
    {
      std::lock_guard<std::mutex> lock(c->mu);
      if (c->overrunPending) handleOverruns(c);
      for (auto& kv : c->qps) requesterTick(c, kv.second, now, &next);
      for (auto& kv : c->out) {
        if (kv.second.fd >= 0 && !kv.second.q.empty()) {
          flushOut(kv.second);
          if (kv.second.fd >= 0 && !kv.second.q.empty()) {
            fds.push_back({kv.second.fd, POLLOUT, 0});
            outNodes.push_back(kv.first);
          }
        }
      }
    }
    size_t inBase = fds.size();
    for (InConn& in : c->in) fds.push_back({in.fd, POLLIN, 0});
    auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(next - Clock::now());
    if (wait.count() < 0) wait = std::chrono::nanoseconds(0);
    timespec ts{(time_t)(wait.count() / 1000000000), (long)(wait.count() % 1000000000)};
    int rc = ppoll(fds.data(), fds.size(), &ts, nullptr);
    if (rc < 0 && errno != EINTR) {
      CLB_WARN("verbs emulator: ppoll failed: %s", strerror(errno));
      continue;
    }
    if (rc <= 0) continue;
    if (fds[0].revents) {
      uint64_t v;
      while (read(c->wakeFd, &v, sizeof v) == (ssize_t)sizeof v) {
      }
    }
    now = Clock::now();
    for (size_t i = 0; i < c->in.size() && inBase + i < fds.size(); i++) {
      if (!fds[inBase + i].revents) continue;
      if (!readIn(c, c->in[i])) {
        close(c->in[i].fd);
        c->in[i].fd = -1;
      }
    }
    for (size_t i = 0; i < c->in.size();) {
      if (c->in[i].fd < 0) {
        c->in[i] = std::move(c->in.back());
        c->in.pop_back();
      } else {
        i++;
      }
    }
    if (fds[1].revents & POLLIN) {
      for (;;) {
        int fd = accept4(c->listenFd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        InConn in;
        in.fd = fd;
        in.hdr.resize(sizeof(WireHdr));
        in.payload.resize(kSegment);
        c->in.push_back(std::move(in));
      }
    }
    if (!outNodes.empty()) {
      std::lock_guard<std::mutex> lock(c->mu);
      for (size_t i = 0; i < outNodes.size(); i++)
        if (fds[2 + i].revents) {
          auto it = c->out.find(outNodes[i]);
          if (it != c->out.end() && it->second.fd >= 0) flushOut(it->second);
        }
    }
  }
}

}  // namespace

void wakeNic(Ctx* c) {
  uint64_t one = 1;
  if (write(c->wakeFd, &one, sizeof one) < 0 && errno != EAGAIN)
    CLB_WARN("verbs emulator: waking the NIC thread failed: %s", strerror(errno));
}

int startNic(Ctx* c) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  static std::atomic<uint32_t> opens{0};
  uint32_t start = (uint32_t)(((uint64_t)getpid() * 2654435761u + (uint64_t)opens++ * 40503u) % kMaxNode);
  uint32_t node = 0;
  for (uint32_t i = 0; i < kMaxNode && !node; i++) {
    uint32_t n = (start + i) % kMaxNode + 1;
    sockaddr_un a;
    socklen_t len = nodeAddr(n, &a);
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), len) == 0)
      node = n;
    else if (errno != EADDRINUSE)
      break;
  }
  if (!node || listen(fd, 128) != 0) {
    int e = errno ? errno : EADDRINUSE;
    close(fd);
    return e;
  }
  c->listenFd = fd;
  c->node = node;
  buildNodeAddresses(c);
  c->wakeFd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (c->wakeFd < 0) {
    int e = errno;
    close(fd);
    return e;
  }
  c->nic = std::thread(nicLoop, c);
  return 0;
}

void stopNic(Ctx* c) {
  c->stop.store(true);
  wakeNic(c);
  if (c->nic.joinable()) c->nic.join();
  close(c->listenFd);
  close(c->wakeFd);
  for (InConn& in : c->in) close(in.fd);
  c->in.clear();
  for (auto& kv : c->out)
    if (kv.second.fd >= 0) close(kv.second.fd);
  c->out.clear();
}

}  // namespace emu
}  // namespace verbs
}  // namespace clb
