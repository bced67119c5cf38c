// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The verbs emulator behaves like an RC queue pair on a real NIC, as far as a transport can tell:
// the device and port it reports, memory registration rules, every ibv_modify_qp transition with
// its required masks and value checks, RDMA WRITE / WRITE_WITH_IMM / SEND between queue pairs of
// one process and of two processes (data checked byte by byte, completions field by field), and
// each failure a transport must survive or report: remote access errors, RNR, flushes in the
// error state, lost packets, port down, misconfigured connections, full queues and CQ overrun.
// Every wait is bounded; nothing here sleeps for long.
#include <gtest/gtest.h>

#include "tests/test_fd_io.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "transport/verbs/verbs_api.h"
#include "tests/verbs_emu/emu_client.h"

extern char** environ;

namespace {

using clb::verbs::VerbsApi;
namespace emu = clbtest::emu;
using Ms = std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

const VerbsApi& V() { return *emu::api(); }

constexpr unsigned kRw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

// What a bootstrap exchanges to connect two RC queue pairs.
struct ConnInfo {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint16_t lid = 0;
  ibv_gid gid{};
  uint8_t mtu = IBV_MTU_4096;
  uint64_t addr = 0;
  uint32_t rkey = 0;
};

struct Opts {
  uint8_t gidIndex = 1;  // RoCE v2
  ibv_mtu mtu = IBV_MTU_4096;
  uint8_t timeout = 14;
  uint8_t retryCnt = 7;
  uint8_t rnrRetry = 7;
  uint8_t minRnrTimer = 1;
  unsigned access = kRw;
  bool global = true;
};

int toInit(ibv_qp* qp, unsigned access) {
  ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qp_access_flags = access;
  return V().modifyQp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

ibv_qp_attr rtrAttr(const ConnInfo& r, const Opts& o) {
  ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = o.mtu;
  a.dest_qp_num = r.qpn;
  a.rq_psn = r.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = o.minRnrTimer;
  a.ah_attr.port_num = 1;
  a.ah_attr.dlid = r.lid;
  if (o.global) {
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = r.gid;
    a.ah_attr.grh.sgid_index = o.gidIndex;
    a.ah_attr.grh.hop_limit = 64;
  }
  return a;
}
constexpr int kRtrMask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                         IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;

ibv_qp_attr rtsAttr(uint32_t psn, const Opts& o) {
  ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = psn;
  a.timeout = o.timeout;
  a.retry_cnt = o.retryCnt;
  a.rnr_retry = o.rnrRetry;
  a.max_rd_atomic = 1;
  return a;
}
constexpr int kRtsMask =
    IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;

ibv_qp_state stateOf(ibv_qp* qp) {
  ibv_qp_attr a;
  ibv_qp_init_attr i;
  EXPECT_EQ(V().queryQp(qp, &a, IBV_QP_STATE, &i), 0);
  return a.qp_state;
}

// One emulated host: a context (its own node), a PD and a CQ, plus what the test registers.
struct Host {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  std::vector<ibv_qp*> qps;
  std::vector<ibv_mr*> mrs;
  std::vector<ibv_cq*> cqs;

  void open(int cqe = 4096) {
    int n = 0;
    ibv_device** l = V().getDeviceList(&n);
    ASSERT_NE(l, nullptr);
    ASSERT_EQ(n, 1);
    ctx = V().openDevice(l[0]);
    V().freeDeviceList(l);
    ASSERT_NE(ctx, nullptr) << strerror(errno);
    pd = V().allocPd(ctx);
    ASSERT_NE(pd, nullptr);
    cq = V().createCq(ctx, cqe, nullptr, nullptr, 0);
    ASSERT_NE(cq, nullptr);
  }
  ~Host() {
    for (ibv_qp* q : qps) EXPECT_EQ(V().destroyQp(q), 0);
    for (ibv_mr* m : mrs) EXPECT_EQ(V().deregMr(m), 0);
    for (ibv_cq* c : cqs) EXPECT_EQ(V().destroyCq(c), 0);
    if (cq) {
      EXPECT_EQ(V().destroyCq(cq), 0);
    }
    if (pd) {
      EXPECT_EQ(V().deallocPd(pd), 0);
    }
    if (ctx) {
      EXPECT_EQ(V().closeDevice(ctx), 0);
    }
  }
  ibv_qp* qp(int maxSend = 256, int maxRecv = 256, ibv_cq* scq = nullptr, ibv_cq* rcq = nullptr, int sigAll = 0,
             int maxInline = 0) {
    ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = scq ? scq : cq;
    ia.recv_cq = rcq ? rcq : cq;
    ia.qp_type = IBV_QPT_RC;
    ia.sq_sig_all = sigAll;
    ia.cap.max_send_wr = maxSend;
    ia.cap.max_recv_wr = maxRecv;
    ia.cap.max_send_sge = 4;
    ia.cap.max_recv_sge = 4;
    ia.cap.max_inline_data = maxInline;
    ibv_qp* q = V().createQp(pd, &ia);
    EXPECT_NE(q, nullptr) << strerror(errno);
    if (q) qps.push_back(q);
    return q;
  }
  ibv_cq* newCq(int cqe, ibv_comp_channel* ch = nullptr, void* cqCtx = nullptr) {
    ibv_cq* c = V().createCq(ctx, cqe, cqCtx, ch, 0);
    EXPECT_NE(c, nullptr);
    if (c) cqs.push_back(c);
    return c;
  }
  ibv_mr* reg(void* p, size_t len, int access = kRw) {
    ibv_mr* m = V().regMr(pd, p, len, access);
    EXPECT_NE(m, nullptr) << strerror(errno);
    if (m) mrs.push_back(m);
    return m;
  }
  ConnInfo info(ibv_qp* q, uint32_t psn, int gidIndex = 1) {
    ConnInfo c;
    c.qpn = q->qp_num;
    c.psn = psn;
    ibv_port_attr pa;
    EXPECT_EQ(V().queryPort(ctx, 1, &pa), 0);
    c.lid = pa.lid;
    c.mtu = pa.active_mtu;
    EXPECT_EQ(V().queryGid(ctx, 1, gidIndex, &c.gid), 0);
    return c;
  }
};

// Connects qa (on a) and qb (on b) as a bootstrap would: exchange, INIT, RTR, RTS.
void connectPair(Host& a, ibv_qp* qa, Host& b, ibv_qp* qb, const Opts& oa = Opts(), const Opts& ob = Opts(),
                 uint32_t psnA = 0x123456, uint32_t psnB = 0xfffff0) {
  ConnInfo ia = a.info(qa, psnA, oa.gidIndex), ib = b.info(qb, psnB, ob.gidIndex);
  ASSERT_EQ(toInit(qa, oa.access), 0);
  ASSERT_EQ(toInit(qb, ob.access), 0);
  ibv_qp_attr r = rtrAttr(ib, oa);
  ASSERT_EQ(V().modifyQp(qa, &r, kRtrMask), 0);
  r = rtrAttr(ia, ob);
  ASSERT_EQ(V().modifyQp(qb, &r, kRtrMask), 0);
  ibv_qp_attr s = rtsAttr(psnA, oa);
  ASSERT_EQ(V().modifyQp(qa, &s, kRtsMask), 0);
  s = rtsAttr(psnB, ob);
  ASSERT_EQ(V().modifyQp(qb, &s, kRtsMask), 0);
}

int postWrite(ibv_qp* qp, uint64_t wrId, const void* local, size_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey,
              ibv_wr_opcode op = IBV_WR_RDMA_WRITE, uint32_t immHost = 0, unsigned flags = IBV_SEND_SIGNALED) {
  ibv_sge sge{(uint64_t)(uintptr_t)local, (uint32_t)len, lkey};
  ibv_send_wr wr;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = wrId;
  wr.sg_list = &sge;
  wr.num_sge = len ? 1 : 0;
  wr.opcode = op;
  wr.send_flags = flags;
  wr.imm_data = htonl(immHost);
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  return V().postSend(qp, &wr, &bad);
}

int postRecv(ibv_qp* qp, uint64_t wrId, void* buf = nullptr, size_t len = 0, uint32_t lkey = 0) {
  ibv_sge sge{(uint64_t)(uintptr_t)buf, (uint32_t)len, lkey};
  ibv_recv_wr wr;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = wrId;
  wr.sg_list = &sge;
  wr.num_sge = buf ? 1 : 0;
  ibv_recv_wr* bad = nullptr;
  return V().postRecv(qp, &wr, &bad);
}

// One completion within `ms`, or false.
bool pollOne(ibv_cq* cq, ibv_wc* wc, int ms = 5000, const VerbsApi& v = V()) {
  auto end = Clock::now() + Ms(ms);
  do {
    int n = v.pollCq(cq, 1, wc);
    if (n == 1) return true;
    if (n < 0) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  } while (Clock::now() < end);
  return false;
}

// Everything that arrives within `ms`.
std::vector<ibv_wc> collect(ibv_cq* cq, int ms) {
  std::vector<ibv_wc> out;
  auto end = Clock::now() + Ms(ms);
  while (Clock::now() < end) {
    ibv_wc wc[16];
    int n = V().pollCq(cq, 16, wc);
    if (n > 0)
      out.insert(out.end(), wc, wc + n);
    else
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return out;
}

std::vector<char> pattern(size_t n, unsigned seed) {
  std::vector<char> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& c : v) {
    x = x * 1103515245u + 12345u;
    c = (char)(x >> 16);
  }
  return v;
}

// The first differing byte, or -1.
long firstDiff(const char* a, const char* b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (a[i] != b[i]) return (long)i;
  return -1;
}

bool asyncEvent(ibv_context* ctx, ibv_async_event* ev, int ms = 2000) {
  pollfd p{ctx->async_fd, POLLIN, 0};
  if (poll(&p, 1, ms) != 1) return false;
  if (V().getAsyncEvent(ctx, ev) != 0) return false;
  V().ackAsyncEvent(ev);
  return true;
}

class VerbsEmu : public ::testing::Test {
 protected:
  void SetUp() override {
    emu::Config c;
    c.minTimeoutMs = 10;
    emu::configure(c);
  }
  void TearDown() override { emu::resetConfig(); }
  void configure(const std::function<void(emu::Config&)>& f) {
    emu::Config c = emu::config();
    f(c);
    emu::configure(c);
  }
};

// ---- device and port -------------------------------------------------------------------------

using VerbsEmuDevice = VerbsEmu;

TEST_F(VerbsEmuDevice, ListsOneDeviceWithOneActivePort) {
  int n = -1;
  ibv_device** l = V().getDeviceList(&n);
  ASSERT_NE(l, nullptr);
  ASSERT_EQ(n, 1);
  EXPECT_EQ(l[1], nullptr) << "NULL-terminated like libibverbs' list";
  EXPECT_STREQ(V().getDeviceName(l[0]), "colibri_emu0");
  ibv_context* ctx = V().openDevice(l[0]);
  V().freeDeviceList(l);
  ASSERT_NE(ctx, nullptr);
  EXPECT_TRUE(emu::isEmulated(ctx));
  ibv_device_attr da;
  ASSERT_EQ(V().queryDevice(ctx, &da), 0);
  EXPECT_EQ(da.phys_port_cnt, 1);
  EXPECT_GE(da.max_qp_wr, 4096);
  EXPECT_GE(da.max_sge, 4);
  EXPECT_GE(da.max_cqe, 65536);
  EXPECT_NE(da.node_guid, 0u);
  ibv_port_attr pa;
  ASSERT_EQ(V().queryPort(ctx, 1, &pa), 0);
  EXPECT_EQ(pa.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(pa.phys_state, 5);  // LinkUp
  EXPECT_EQ(pa.active_mtu, IBV_MTU_4096);
  EXPECT_EQ(pa.max_mtu, IBV_MTU_4096);
  EXPECT_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_EQ(pa.lid, 0) << "RoCE ports have no LID";
  EXPECT_EQ(pa.gid_tbl_len, 16);
  EXPECT_EQ(V().queryPort(ctx, 2, &pa), EINVAL) << "there is one port";
  EXPECT_EQ(V().closeDevice(ctx), 0);
}

TEST_F(VerbsEmuDevice, RoceGidTableHasLinkLocalV1AndIpv4MappedV2) {
  Host h;
  ASSERT_NO_FATAL_FAILURE(h.open());
  uint32_t node = emu::nodeId(h.ctx);
  ASSERT_GE(node, 1u);
  ASSERT_LE(node, 0xBFFFu);
  ibv_gid g0, g1, g2;
  ASSERT_EQ(V().queryGid(h.ctx, 1, 0, &g0), 0);
  ASSERT_EQ(V().queryGid(h.ctx, 1, 1, &g1), 0);
  ASSERT_EQ(V().queryGid(h.ctx, 1, 2, &g2), 0);
  EXPECT_EQ(g0.raw[0], 0xfe);
  EXPECT_EQ(g0.raw[1], 0x80);
  static const uint8_t v4prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  EXPECT_EQ(memcmp(g1.raw, v4prefix, 12), 0) << "::ffff:a.b.c.d";
  EXPECT_EQ(g1.raw[12], 10);
  EXPECT_EQ(((uint32_t)g1.raw[13] << 16 | (uint32_t)g1.raw[14] << 8 | g1.raw[15]), node);
  static const ibv_gid zero = {};
  EXPECT_EQ(memcmp(&g2, &zero, sizeof zero), 0) << "unused entries read as zero";
  EXPECT_EQ(V().queryGid(h.ctx, 1, 16, &g2), EINVAL);
  ASSERT_NE(V().queryGidEx, nullptr);
  ibv_gid_entry e;
  ASSERT_EQ(V().queryGidEx(h.ctx, 1, 0, &e, 0), 0);
  EXPECT_EQ(e.gid_type, IBV_GID_TYPE_ROCE_V1);
  ASSERT_EQ(V().queryGidEx(h.ctx, 1, 1, &e, 0), 0);
  EXPECT_EQ(e.gid_type, IBV_GID_TYPE_ROCE_V2);
  EXPECT_EQ(memcmp(&e.gid, &g1, sizeof g1), 0);
  EXPECT_EQ(e.gid_index, 1u);
  EXPECT_EQ(V().queryGidEx(h.ctx, 1, 2, &e, 0), ENODATA);
}

TEST_F(VerbsEmuDevice, InfinibandPortHasALidAndAnIbGid) {
  configure([](emu::Config& c) { c.linkLayer = IBV_LINK_LAYER_INFINIBAND; });
  Host h;
  ASSERT_NO_FATAL_FAILURE(h.open());
  ibv_port_attr pa;
  ASSERT_EQ(V().queryPort(h.ctx, 1, &pa), 0);
  EXPECT_EQ(pa.link_layer, IBV_LINK_LAYER_INFINIBAND);
  EXPECT_EQ(pa.lid, emu::nodeId(h.ctx));
  EXPECT_NE(pa.lid, 0);
  ibv_gid_entry e;
  ASSERT_EQ(V().queryGidEx(h.ctx, 1, 0, &e, 0), 0);
  EXPECT_EQ(e.gid_type, IBV_GID_TYPE_IB);
  EXPECT_EQ(e.gid.raw[0], 0xfe);
  EXPECT_EQ(V().queryGidEx(h.ctx, 1, 1, &e, 0), ENODATA);
}

TEST_F(VerbsEmuDevice, ContextsAreDistinctNodesWithDistinctAddresses) {
  Host a, b;
  ASSERT_NO_FATAL_FAILURE(a.open());
  ASSERT_NO_FATAL_FAILURE(b.open());
  EXPECT_NE(emu::nodeId(a.ctx), emu::nodeId(b.ctx));
  ibv_gid ga, gb;
  ASSERT_EQ(V().queryGid(a.ctx, 1, 1, &ga), 0);
  ASSERT_EQ(V().queryGid(b.ctx, 1, 1, &gb), 0);
  EXPECT_NE(memcmp(&ga, &gb, sizeof ga), 0);
  ibv_qp* qa = a.qp();
  ibv_qp* qb = b.qp();
  ibv_qp* qa2 = a.qp();
  ASSERT_TRUE(qa && qb && qa2);
  EXPECT_NE(qa->qp_num, qb->qp_num);
  EXPECT_NE(qa->qp_num, qa2->qp_num);
  EXPECT_LE(qa->qp_num, 0xFFFFFFu);
  EXPECT_GT(qa->qp_num, 1u) << "QP 0 and 1 are special on real devices";
}

TEST_F(VerbsEmuDevice, DeviceListKnobsGiveTheEnvironmentErrors) {
  configure([](emu::Config& c) { c.noKernelSupport = true; });
  int n = 5;
  errno = 0;
  EXPECT_EQ(V().getDeviceList(&n), nullptr);
  EXPECT_EQ(errno, ENOSYS);
  ibv_device** l;
  EXPECT_EQ(clb::verbs::listDevices(V(), &l, &n), clbUnsupported);
  std::string msg = clb::lastError();
  EXPECT_NE(msg.find("ENOSYS"), std::string::npos) << msg;
  EXPECT_NE(msg.find("modprobe ib_uverbs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("emulator"), std::string::npos) << "names the implementation: " << msg;

  configure([](emu::Config& c) {
    c.noKernelSupport = false;
    c.numDevices = 0;
  });
  EXPECT_EQ(clb::verbs::listDevices(V(), &l, &n), clbUnsupported);
  msg = clb::lastError();
  EXPECT_NE(msg.find("no RDMA device"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ibverbs-providers"), std::string::npos) << msg;

  configure([](emu::Config& c) { c.numDevices = 1; });
  ASSERT_EQ(clb::verbs::listDevices(V(), &l, &n), clbSuccess) << clb::lastError();
  EXPECT_EQ(n, 1);
  V().freeDeviceList(l);
}

// ---- memory regions --------------------------------------------------------------------------

using VerbsEmuMr = VerbsEmu;

TEST_F(VerbsEmuMr, KeysAndAccessRules) {
  Host h;
  ASSERT_NO_FATAL_FAILURE(h.open());
  std::vector<char> buf(8192);
  ibv_mr* m = V().regMr(h.pd, buf.data(), buf.size(), kRw);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->addr, buf.data());
  EXPECT_EQ(m->length, buf.size());
  EXPECT_EQ(m->pd, h.pd);
  EXPECT_NE(m->lkey, m->rkey) << "a transport must send the rkey, not the lkey";
  ibv_mr* m2 = V().regMr(h.pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(m2, nullptr);
  EXPECT_NE(m2->lkey, m->lkey);
  EXPECT_NE(m2->rkey, m->rkey);
  errno = 0;
  EXPECT_EQ(V().regMr(h.pd, buf.data(), buf.size(), IBV_ACCESS_REMOTE_WRITE), nullptr);
  EXPECT_EQ(errno, EINVAL) << "remote write needs local write";
  EXPECT_EQ(V().regMr(h.pd, buf.data(), 0, kRw), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(V().regMr(h.pd, nullptr, 64, kRw), nullptr);
  EXPECT_EQ(errno, EFAULT);
  EXPECT_EQ(V().regMr(h.pd, buf.data(), 64, kRw | IBV_ACCESS_ON_DEMAND), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  EXPECT_EQ(V().deallocPd(h.pd), EBUSY) << "regions still use the PD";
  EXPECT_EQ(V().deregMr(m), 0);
  EXPECT_EQ(V().deregMr(m2), 0);
}

TEST_F(VerbsEmuMr, MemlockLimitFailsRegistrationWithEnomem) {
  configure([](emu::Config& c) { c.memlockBytes = 1 << 20; });
  Host h;
  ASSERT_NO_FATAL_FAILURE(h.open());
  std::vector<char> a(600 << 10), b(600 << 10);
  ibv_mr* ma = V().regMr(h.pd, a.data(), a.size(), kRw);
  ASSERT_NE(ma, nullptr);
  errno = 0;
  EXPECT_EQ(V().regMr(h.pd, b.data(), b.size(), kRw), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  ASSERT_EQ(V().deregMr(ma), 0);
  ibv_mr* mb = V().regMr(h.pd, b.data(), b.size(), kRw);
  ASSERT_NE(mb, nullptr) << "deregistration gives the bytes back";
  EXPECT_EQ(V().deregMr(mb), 0);
}

TEST_F(VerbsEmuMr, DmabufRegionIsWritableRemotelyAndCanBeSwitchedOff) {
  Host a, b;
  ASSERT_NO_FATAL_FAILURE(a.open());
  ASSERT_NO_FATAL_FAILURE(b.open());
  int fd = memfd_create("colibri-dmabuf-test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 3 * 4096), 0);
  const uint64_t iova = 0x7000000000ull;
  ASSERT_NE(V().regDmabufMr, nullptr);
  ibv_mr* dm = V().regDmabufMr(b.pd, 4096 + 100, 5000, iova, fd, kRw);
  ASSERT_NE(dm, nullptr) << strerror(errno);
  EXPECT_EQ((uint64_t)(uintptr_t)dm->addr, iova);
  ibv_qp* qa = a.qp();
  ibv_qp* qb = b.qp();
  ASSERT_NO_FATAL_FAILURE(connectPair(a, qa, b, qb));
  std::vector<char> src = pattern(5000, 7);
  ibv_mr* sm = a.reg(src.data(), src.size());
  ASSERT_EQ(postWrite(qa, 1, src.data(), src.size(), sm->lkey, iova, dm->rkey), 0);
  ibv_wc wc;
  ASSERT_TRUE(pollOne(a.cq, &wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << V().wcStatusStr(wc.status);
  std::vector<char> back(5000);
  ASSERT_EQ(pread(fd, back.data(), back.size(), 4096 + 100), (ssize_t)back.size());
  EXPECT_EQ(firstDiff(back.data(), src.data(), src.size()), -1);
  EXPECT_EQ(V().deregMr(dm), 0);

  configure([](emu::Config& c) { c.dmabufSupported = false; });
  Host c;
  ASSERT_NO_FATAL_FAILURE(c.open());
  errno = 0;
  EXPECT_EQ(V().regDmabufMr(c.pd, 0, 4096, iova, fd, kRw), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  close(fd);
}

// Reaches "device" memory (here: host memory at the iova) the way cuMemcpy would, counting calls.
std::atomic<int> gDeviceCopies{0};
int hostDeviceCopy(void* dst, const void* src, size_t bytes) {
  gDeviceCopies++;
  memcpy(dst, src, bytes);
  return 0;
}
int faultingDeviceCopy(void*, const void*, size_t) {
  gDeviceCopies++;
  return EFAULT;
}

// Sets the emulator's DeviceCopy for one test and clears it however the test ends (declared
// before the hosts, so that their NIC threads are gone first).
struct DeviceCopyScope {
  explicit DeviceCopyScope(emu::DeviceCopy copy) : before(emu::deviceCopy()) {
    gDeviceCopies = 0;
    emu::setDeviceCopy(copy);
  }
  ~DeviceCopyScope() { emu::setDeviceCopy(before); }  // the stand-in's CUDA copy, on a CUDA build
  emu::DeviceCopy before;
};

// A pipe's end: a valid fd that cannot be mapped, like a GPU dma-buf.
struct Pipe {
  int fds[2] = {-1, -1};
  Pipe() { EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0) << strerror(errno); }
  ~Pipe() {
    for (int fd : fds)
      if (fd >= 0) close(fd);
  }
  int fd() const { return fds[0]; }
};

TEST_F(VerbsEmuMr, DmabufMemfdReceivesAWriteWithImmElementByElement) {
  DeviceCopyScope scope(nullptr);  // mapped regions never use it
  const size_t kElems = 50000;     // 200000 bytes: four emulated packets
  const size_t bytes = kElems * sizeof(uint32_t), fdBytes = bytes + 2 * 4096;
  int fd = memfd_create("colibri-dmabuf-imm-test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, (off_t)fdBytes), 0);
  void* map = mmap(nullptr, fdBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(map, MAP_FAILED) << strerror(errno);
  memset(map, 0xEE, fdBytes);
  const uint64_t offset = 4096 + 64;
  const auto* view = reinterpret_cast<const uint32_t*>(static_cast<const char*>(map) + offset);
  std::vector<uint32_t> src(kElems);
  for (size_t i = 0; i < kElems; i++) src[i] = 0x5EED0000u ^ (uint32_t)(i * 2654435761u);
  {
    Host a, b;
    ASSERT_NO_FATAL_FAILURE(a.open());
    ASSERT_NO_FATAL_FAILURE(b.open());
    const uint64_t iova = 0x7100000000ull;
    ibv_mr* dm = V().regDmabufMr(b.pd, offset, bytes, iova, fd, kRw);
    ASSERT_NE(dm, nullptr) << strerror(errno);
    b.mrs.push_back(dm);
    ibv_qp* qa = a.qp();
    ibv_qp* qb = b.qp();
    ASSERT_NO_FATAL_FAILURE(connectPair(a, qa, b, qb));
    ibv_mr* sm = a.reg(src.data(), bytes);
    ASSERT_EQ(postRecv(qb, 70), 0);
    ASSERT_EQ(postWrite(qa, 7, src.data(), bytes, sm->lkey, iova, dm->rkey, IBV_WR_RDMA_WRITE_WITH_IMM, 0xD0B0F00Du),
              0);
    ibv_wc wc;
    ASSERT_TRUE(pollOne(b.cq, &wc));
    EXPECT_EQ(wc.wr_id, 70u);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << V().wcStatusStr(wc.status);
    EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_EQ(ntohl(wc.imm_data), 0xD0B0F00Du);
    EXPECT_EQ(wc.byte_len, bytes);
    for (size_t i = 0; i < kElems; i++) ASSERT_EQ(view[i], src[i]) << "element " << i << " in the memfd's mapping";
    EXPECT_EQ(static_cast<const char*>(map)[offset - 1], (char)0xEE) << "nothing before the region";
    EXPECT_EQ(static_cast<const char*>(map)[offset + bytes], (char)0xEE) << "nothing past the region";
    ASSERT_TRUE(pollOne(a.cq, &wc));
    EXPECT_EQ(wc.wr_id, 7u);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << V().wcStatusStr(wc.status);
  }
  EXPECT_EQ(gDeviceCopies.load(), 0);
  munmap(map, fdBytes);
  close(fd);
}

TEST_F(VerbsEmuMr, DmabufRangeBeyondTheFdSizeIsEinvalAndABadFdIsEbadf) {
  Host h;
  ASSERT_NO_FATAL_FAILURE(h.open());
  int fd = memfd_create("colibri-dmabuf-size-test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 2 * 4096), 0);
  ASSERT_EQ(lseek(fd, 100, SEEK_SET), 100);
  const uint64_t iova = 0x7200000000ull;
  struct Case {
    const char* what;
    uint64_t offset;
    size_t length;
  } beyond[] = {{"one byte past the end", 4096, 4097},
                {"offset past the end", 3 * 4096, 64},
                {"longer than the fd", 0, 3 * 4096},
                {"offset + length wraps around", ~0ull - 10, 64}};
  for (const Case& c : beyond) {
    errno = 0;
    EXPECT_EQ(V().regDmabufMr(h.pd, c.offset, c.length, iova, fd, kRw), nullptr) << c.what;
    EXPECT_EQ(errno, EINVAL) << c.what << ": " << strerror(errno);
  }
  ibv_mr* whole = V().regDmabufMr(h.pd, 4096, 4096, iova, fd, kRw);
  EXPECT_NE(whole, nullptr) << "exactly up to the end: " << strerror(errno);
  if (whole) {
    EXPECT_EQ(V().deregMr(whole), 0);
  }
  EXPECT_EQ(lseek(fd, 0, SEEK_CUR), 100) << "the size check leaves the file position alone";
  close(fd);
  errno = 0;
  EXPECT_EQ(V().regDmabufMr(h.pd, 0, 4096, iova, fd, kRw), nullptr) << "a closed fd";
  EXPECT_EQ(errno, EBADF) << strerror(errno);
}

TEST_F(VerbsEmuMr, UnmappableDmabufFailsWithMmapsErrnoWithoutADeviceCopy) {
  DeviceCopyScope scope(nullptr);
  Host h;
  ASSERT_NO_FATAL_FAILURE(h.open());
  Pipe p;
  ASSERT_GE(p.fd(), 0);
  errno = 0;
  ASSERT_EQ(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, p.fd(), 0), MAP_FAILED);
  int mmapErr = errno;
  std::vector<char> mem(4096);
  errno = 0;
  EXPECT_EQ(V().regDmabufMr(h.pd, 0, mem.size(), (uint64_t)(uintptr_t)mem.data(), p.fd(), kRw), nullptr);
  EXPECT_EQ(errno, mmapErr) << strerror(errno) << " vs mmap's " << strerror(mmapErr);
}

// ---- queue pair state machine ----------------------------------------------------------------

using VerbsEmuQp = VerbsEmu;

TEST_F(VerbsEmuQp, CreateChecksTypeCapsAndQueues) {
  Host h;
  ASSERT_NO_FATAL_FAILURE(h.open());
  ibv_qp_init_attr ia;
  memset(&ia, 0, sizeof ia);
  ia.send_cq = ia.recv_cq = h.cq;
  ia.qp_type = IBV_QPT_UD;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  errno = 0;
  EXPECT_EQ(V().createQp(h.pd, &ia), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP) << "only RC is modeled";
  ia.qp_type = IBV_QPT_RC;
  ia.send_cq = nullptr;
  EXPECT_EQ(V().createQp(h.pd, &ia), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ia.send_cq = h.cq;
  ia.cap.max_send_wr = 1 << 20;
  EXPECT_EQ(V().createQp(h.pd, &ia), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ia.cap.max_send_wr = 16;
  ia.cap.max_inline_data = 4096;
  EXPECT_EQ(V().createQp(h.pd, &ia), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ia.cap.max_inline_data = 0;
  ibv_qp* q = V().createQp(h.pd, &ia);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->state, IBV_QPS_RESET);
  EXPECT_EQ(q->qp_type, IBV_QPT_RC);
  EXPECT_EQ(q->send_cq, h.cq);
  EXPECT_EQ(V().destroyCq(h.cq), EBUSY) << "a QP uses the CQ";
  EXPECT_EQ(V().createCq(h.ctx, 0, nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(V().destroyQp(q), 0);
}

TEST_F(VerbsEmuQp, EveryTransitionAndWhatQueryReports) {
  Host h;
  ASSERT_NO_FATAL_FAILURE(h.open());
  ibv_qp* q = h.qp();
  ASSERT_NE(q, nullptr);
  ConnInfo self = h.info(q, 77);
  Opts o;
  ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RESET;
  EXPECT_EQ(V().modifyQp(q, &a, IBV_QP_STATE), 0) << "RESET -> RESET";
  ASSERT_EQ(toInit(q, IBV_ACCESS_LOCAL_WRITE), 0);
  EXPECT_EQ(q->state, IBV_QPS_INIT);
  memset(&a, 0, sizeof a);
  a.qp_access_flags = kRw;
  EXPECT_EQ(V().modifyQp(q, &a, IBV_QP_ACCESS_FLAGS), 0) << "INIT -> INIT without the state bit";
  ibv_qp_attr r = rtrAttr(self, o);
  ASSERT_EQ(V().modifyQp(q, &r, kRtrMask), 0);
  EXPECT_EQ(q->state, IBV_QPS_RTR);
  ibv_qp_attr s = rtsAttr(88, o);
  ASSERT_EQ(V().modifyQp(q, &s, kRtsMask), 0);
  EXPECT_EQ(q->state, IBV_QPS_RTS);
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.cur_qp_state = IBV_QPS_RTS;
  a.min_rnr_timer = 12;
  EXPECT_EQ(V().modifyQp(q, &a, IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_MIN_RNR_TIMER), 0) << "RTS -> RTS";
  a.cur_qp_state = IBV_QPS_INIT;
  EXPECT_EQ(V().modifyQp(q, &a, IBV_QP_STATE | IBV_QP_CUR_STATE), EINVAL) << "cur_qp_state must be the truth";

  ibv_qp_attr qa;
  ibv_qp_init_attr qi;
  ASSERT_EQ(V().queryQp(q, &qa, IBV_QP_STATE | IBV_QP_AV, &qi), 0);
  EXPECT_EQ(qa.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(qa.qp_access_flags, kRw);
  EXPECT_EQ(qa.port_num, 1);
  EXPECT_EQ(qa.path_mtu, IBV_MTU_4096);
  EXPECT_EQ(qa.dest_qp_num, q->qp_num);
  EXPECT_EQ(qa.rq_psn, 77u);
  EXPECT_EQ(qa.sq_psn, 88u);
  EXPECT_EQ(qa.min_rnr_timer, 12);
  EXPECT_EQ(qa.timeout, o.timeout);
  EXPECT_EQ(qa.retry_cnt, o.retryCnt);
  EXPECT_EQ(qa.rnr_retry, o.rnrRetry);
  EXPECT_EQ(qa.ah_attr.is_global, 1);
  EXPECT_EQ(memcmp(&qa.ah_attr.grh.dgid, &self.gid, sizeof self.gid), 0);
  EXPECT_EQ(qi.send_cq, h.cq);
  EXPECT_EQ(qi.cap.max_send_wr, 256u);
  EXPECT_EQ(qi.qp_type, IBV_QPT_RC);

  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_ERR;
  EXPECT_EQ(V().modifyQp(q, &a, IBV_QP_STATE), 0);
  EXPECT_EQ(q->state, IBV_QPS_ERR);
  a.qp_state = IBV_QPS_RESET;
  EXPECT_EQ(V().modifyQp(q, &a, IBV_QP_STATE), 0) << "ERR -> RESET";
  ASSERT_EQ(toInit(q, kRw), 0);
  a.qp_state = IBV_QPS_ERR;
  EXPECT_EQ(V().modifyQp(q, &a, IBV_QP_STATE), 0) << "INIT -> ERR";
  a.qp_state = IBV_QPS_RESET;
  EXPECT_EQ(V().modifyQp(q, &a, IBV_QP_STATE), 0);
  ASSERT_EQ(toInit(q, kRw), 0);
  ASSERT_EQ(V().modifyQp(q, &r, kRtrMask), 0);
  a.qp_state = IBV_QPS_RESET;
  EXPECT_EQ(V().modifyQp(q, &a, IBV_QP_STATE), 0) << "RTR -> RESET";
  EXPECT_EQ(stateOf(q), IBV_QPS_RESET);
  a.qp_state = IBV_QPS_SQD;
  EXPECT_EQ(V().modifyQp(q, &a, IBV_QP_STATE), EOPNOTSUPP) << "SQD is not modeled";
}

// Brings a fresh QP of `h` to `state` (connected to itself).
ibv_qp* qpIn(Host& h, ibv_qp_state state) {
  ibv_qp* q = h.qp();
  if (!q || state == IBV_QPS_RESET) return q;
  EXPECT_EQ(toInit(q, kRw), 0);
  if (state == IBV_QPS_INIT) return q;
  ibv_qp_attr r = rtrAttr(h.info(q, 5), Opts());
  EXPECT_EQ(V().modifyQp(q, &r, kRtrMask), 0);
  if (state == IBV_QPS_RTR) return q;
  ibv_qp_attr s = rtsAttr(5, Opts());
  EXPECT_EQ(V().modifyQp(q, &s, kRtsMask), 0);
  if (state == IBV_QPS_RTS) return q;
  ibv_qp_attr e;
  memset(&e, 0, sizeof e);
  e.qp_state = IBV_QPS_ERR;
  EXPECT_EQ(V().modifyQp(q, &e, IBV_QP_STATE), 0);
  return q;
}

TEST_F(VerbsEmuQp, EachMissingRequiredAttributeIsEinvalAndChangesNothing) {
  Host h;
  ASSERT_NO_FATAL_FAILURE(h.open());
  struct Case {
    ibv_qp_state from;
    ibv_qp_attr attr;
    int mask;
  };
  ibv_qp_attr init;
  memset(&init, 0, sizeof init);
  init.qp_state = IBV_QPS_INIT;
  init.port_num = 1;
  init.qp_access_flags = kRw;
  ibv_qp* probe = h.qp();
  ASSERT_NE(probe, nullptr);
  const Case cases[] = {
      {IBV_QPS_RESET, init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS},
      {IBV_QPS_INIT, rtrAttr(h.info(probe, 1), Opts()), kRtrMask},
      {IBV_QPS_RTR, rtsAttr(1, Opts()), kRtsMask},
  };
  int checked = 0;
  for (const Case& c : cases) {
    for (int bit = 0; bit < 21; bit++) {
      int b = 1 << bit;
      if (!(c.mask & b)) continue;
      ibv_qp* q = qpIn(h, c.from);
      ASSERT_NE(q, nullptr);
      ibv_qp_attr a = c.attr;
      EXPECT_EQ(V().modifyQp(q, &a, c.mask & ~b), EINVAL)
          << "from " << clb::verbs::qpStateName(c.from) << " without mask bit 0x" << std::hex << b;
      EXPECT_EQ(stateOf(q), c.from);
      checked++;
    }
    ibv_qp* q = qpIn(h, c.from);
    ibv_qp_attr a = c.attr;
    EXPECT_EQ(V().modifyQp(q, &a, c.mask), 0) << "the full mask works from " << clb::verbs::qpStateName(c.from);
  }
  EXPECT_EQ(checked, 4 + 7 + 6) << "every required bit, the state bit included";
}

TEST_F(VerbsEmuQp, MaskBitsNotAllowedForTheTransitionAreEinval) {
  Host h;
  ASSERT_NO_FATAL_FAILURE(h.open());
  ibv_qp* q = qpIn(h, IBV_QPS_RESET);
  ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = kRw;
  EXPECT_EQ(V().modifyQp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS | IBV_QP_SQ_PSN),
            EINVAL);
  q = qpIn(h, IBV_QPS_INIT);
  ibv_qp_attr r = rtrAttr(h.info(q, 1), Opts());
  EXPECT_EQ(V().modifyQp(q, &r, kRtrMask | IBV_QP_SQ_PSN), EINVAL) << "SQ PSN belongs to RTS";
  EXPECT_EQ(V().modifyQp(q, &r, kRtrMask | IBV_QP_PKEY_INDEX), 0) << "P_Key index is allowed at RTR";
  ibv_qp_attr s = rtsAttr(1, Opts());
  s.ah_attr = r.ah_attr;
  EXPECT_EQ(V().modifyQp(q, &s, kRtsMask | IBV_QP_AV), EINVAL) << "the AV is set at RTR";
  EXPECT_EQ(V().modifyQp(q, &s, kRtsMask | IBV_QP_RATE_LIMIT), EINVAL);
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_ERR;
  a.port_num = 1;
  EXPECT_EQ(V().modifyQp(q, &a, IBV_QP_STATE | IBV_QP_PORT), EINVAL) << "to ERR takes the state only";
  EXPECT_EQ(stateOf(q), IBV_QPS_RTR);
}

TEST_F(VerbsEmuQp, TransitionsThatDoNotExistAreEinval) {
  Host h;
  ASSERT_NO_FATAL_FAILURE(h.open());
  ibv_qp* probe = h.qp();
  ibv_qp_attr r = rtrAttr(h.info(probe, 1), Opts());
  ibv_qp_attr s = rtsAttr(1, Opts());
  ibv_qp_attr i;
  memset(&i, 0, sizeof i);
  i.qp_state = IBV_QPS_INIT;
  i.port_num = 1;
  const int initMask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  struct {
    ibv_qp_state from;
    ibv_qp_attr* attr;
    int mask;
  } cases[] = {
      {IBV_QPS_RESET, &r, kRtrMask}, {IBV_QPS_RESET, &s, kRtsMask}, {IBV_QPS_INIT, &s, kRtsMask},
      {IBV_QPS_RTR, &i, initMask},   {IBV_QPS_RTS, &r, kRtrMask},   {IBV_QPS_ERR, &i, initMask},
      {IBV_QPS_ERR, &s, kRtsMask},
  };
  for (auto& c : cases) {
    ibv_qp* q = qpIn(h, c.from);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(V().modifyQp(q, c.attr, c.mask), EINVAL)
        << clb::verbs::qpStateName(c.from) << " -> " << clb::verbs::qpStateName(c.attr->qp_state);
    EXPECT_EQ(stateOf(q), c.from);
  }
}

TEST_F(VerbsEmuQp, InvalidValuesAreEinval) {
  Host h;
  ASSERT_NO_FATAL_FAILURE(h.open());
  auto initWith = [&](const std::function<void(ibv_qp_attr&)>& f) {
    ibv_qp* q = qpIn(h, IBV_QPS_RESET);
    ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = kRw;
    f(a);
    return V().modifyQp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  };
  EXPECT_EQ(initWith([](ibv_qp_attr& a) { a.port_num = 2; }), EINVAL);
  EXPECT_EQ(initWith([](ibv_qp_attr& a) { a.port_num = 0; }), EINVAL);
  EXPECT_EQ(initWith([](ibv_qp_attr& a) { a.pkey_index = 1; }), EINVAL);
  EXPECT_EQ(initWith([](ibv_qp_attr& a) { a.qp_access_flags |= IBV_ACCESS_MW_BIND; }), EINVAL);
  EXPECT_EQ(initWith([](ibv_qp_attr&) {}), 0);

  auto rtrWith = [&](const std::function<void(ibv_qp_attr&)>& f) {
    ibv_qp* q = qpIn(h, IBV_QPS_INIT);
    ibv_qp_attr a = rtrAttr(h.info(q, 1), Opts());
    f(a);
    return V().modifyQp(q, &a, kRtrMask);
  };
  EXPECT_EQ(rtrWith([](ibv_qp_attr& a) { a.min_rnr_timer = 32; }), EINVAL);
  EXPECT_EQ(rtrWith([](ibv_qp_attr& a) { a.max_dest_rd_atomic = 17; }), EINVAL);
  EXPECT_EQ(rtrWith([](ibv_qp_attr& a) { a.path_mtu = (ibv_mtu)6; }), EINVAL);
  EXPECT_EQ(rtrWith([](ibv_qp_attr& a) { a.path_mtu = (ibv_mtu)0; }), EINVAL);
  EXPECT_EQ(rtrWith([](ibv_qp_attr& a) { a.ah_attr.port_num = 0; }), EINVAL);
  EXPECT_EQ(rtrWith([](ibv_qp_attr& a) { a.ah_attr.sl = 16; }), EINVAL);
  EXPECT_EQ(rtrWith([](ibv_qp_attr&) {}), 0);

  auto rtsWith = [&](const std::function<void(ibv_qp_attr&)>& f) {
    ibv_qp* q = qpIn(h, IBV_QPS_RTR);
    ibv_qp_attr a = rtsAttr(1, Opts());
    f(a);
    return V().modifyQp(q, &a, kRtsMask);
  };
  EXPECT_EQ(rtsWith([](ibv_qp_attr& a) { a.timeout = 32; }), EINVAL);
  EXPECT_EQ(rtsWith([](ibv_qp_attr& a) { a.retry_cnt = 8; }), EINVAL);
  EXPECT_EQ(rtsWith([](ibv_qp_attr& a) { a.rnr_retry = 8; }), EINVAL);
  EXPECT_EQ(rtsWith([](ibv_qp_attr& a) { a.max_rd_atomic = 17; }), EINVAL);
  EXPECT_EQ(rtsWith([](ibv_qp_attr&) {}), 0);
}

TEST_F(VerbsEmuQp, PathMtuAboveThePortsActiveMtuIsEinval) {
  configure([](emu::Config& c) { c.activeMtu = IBV_MTU_1024; });
  Host h;
  ASSERT_NO_FATAL_FAILURE(h.open());
  ibv_port_attr pa;
  ASSERT_EQ(V().queryPort(h.ctx, 1, &pa), 0);
  EXPECT_EQ(pa.active_mtu, IBV_MTU_1024);
  for (ibv_mtu m : {IBV_MTU_2048, IBV_MTU_4096}) {
    ibv_qp* q = qpIn(h, IBV_QPS_INIT);
    Opts o;
    o.mtu = m;
    ibv_qp_attr r = rtrAttr(h.info(q, 1), o);
    EXPECT_EQ(V().modifyQp(q, &r, kRtrMask), EINVAL) << clb::verbs::mtuBytes(m);
    EXPECT_EQ(stateOf(q), IBV_QPS_INIT);
  }
  ibv_qp* q = qpIn(h, IBV_QPS_INIT);
  Opts o;
  o.mtu = IBV_MTU_1024;
  ibv_qp_attr r = rtrAttr(h.info(q, 1), o);
  EXPECT_EQ(V().modifyQp(q, &r, kRtrMask), 0);
}

TEST_F(VerbsEmuQp, RoceNeedsAGlobalRouteWithAValidGidIndex) {
  Host h;
  ASSERT_NO_FATAL_FAILURE(h.open());
  auto rtrWith = [&](const std::function<void(ibv_qp_attr&)>& f) {
    ibv_qp* q = qpIn(h, IBV_QPS_INIT);
    ibv_qp_attr a = rtrAttr(h.info(q, 1), Opts());
    f(a);
    int rc = V().modifyQp(q, &a, kRtrMask);
    if (rc) {
      EXPECT_EQ(stateOf(q), IBV_QPS_INIT);
    }
    return rc;
  };
  EXPECT_EQ(rtrWith([](ibv_qp_attr& a) { a.ah_attr.is_global = 0; }), EINVAL) << "RoCE without GRH";
  EXPECT_EQ(rtrWith([](ibv_qp_attr& a) { a.ah_attr.grh.sgid_index = 2; }), EINVAL) << "empty GID entry";
  EXPECT_EQ(rtrWith([](ibv_qp_attr& a) { a.ah_attr.grh.sgid_index = 200; }), EINVAL) << "beyond the table";
  EXPECT_EQ(rtrWith([](ibv_qp_attr& a) { memset(&a.ah_attr.grh.dgid, 0, 16); }), EINVAL) << "no destination";
  EXPECT_EQ(rtrWith([](ibv_qp_attr& a) { a.ah_attr.grh.sgid_index = 0; }), 0) << "RoCE v1 GID is valid too";
  EXPECT_EQ(rtrWith([](ibv_qp_attr&) {}), 0);
}

TEST_F(VerbsEmuQp, PostingChecksStateSgesAndOpcode) {
  Host h;
  ASSERT_NO_FATAL_FAILURE(h.open());
  std::vector<char> buf(4096);
  ibv_mr* m = h.reg(buf.data(), buf.size());
  ibv_sge sge{(uint64_t)(uintptr_t)buf.data(), 64, m->lkey};
  ibv_send_wr wr;
  memset(&wr, 0, sizeof wr);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr.rdma.remote_addr = (uintptr_t)buf.data();
  wr.wr.rdma.rkey = m->rkey;
  ibv_recv_wr rwr;
  memset(&rwr, 0, sizeof rwr);
  ibv_send_wr* bad = nullptr;
  ibv_recv_wr* rbad = nullptr;
  for (ibv_qp_state st : {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR}) {
    ibv_qp* q = qpIn(h, st);
    bad = nullptr;
    EXPECT_EQ(V().postSend(q, &wr, &bad), EINVAL) << "send in " << clb::verbs::qpStateName(st);
    EXPECT_EQ(bad, &wr);
    EXPECT_EQ(V().postRecv(q, &rwr, &rbad), st == IBV_QPS_RESET ? EINVAL : 0)
        << "receive in " << clb::verbs::qpStateName(st);
  }
  ibv_qp* q = qpIn(h, IBV_QPS_RTS);
  ibv_send_wr second = wr;
  second.wr_id = 2;
  second.num_sge = 5;  // max_send_sge is 4
  wr.wr_id = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.next = &second;
  EXPECT_EQ(V().postSend(q, &wr, &bad), EINVAL);
  EXPECT_EQ(bad, &second) << "the first WR was posted, the second refused";
  ibv_wc wc;
  ASSERT_TRUE(pollOne(h.cq, &wc));
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << V().wcStatusStr(wc.status);
  wr.next = nullptr;
  wr.opcode = IBV_WR_RDMA_READ;
  EXPECT_EQ(V().postSend(q, &wr, &bad), EOPNOTSUPP) << "READ is not modeled";
  wr.opcode = IBV_WR_BIND_MW;
  EXPECT_EQ(V().postSend(q, &wr, &bad), EINVAL) << "not an RC data operation";
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_INLINE;
  EXPECT_EQ(V().postSend(q, &wr, &bad), EINVAL) << "64 inline bytes on a QP created with max_inline_data 0";
}

// ---- data path -------------------------------------------------------------------------------

using VerbsEmuData = VerbsEmu;

struct Pair {
  std::vector<char> src, dst;  // outlive the hosts, whose NIC threads write into them
  Host a, b;
  ibv_qp* qa = nullptr;
  ibv_qp* qb = nullptr;
  ibv_mr* srcMr = nullptr;
  ibv_mr* dstMr = nullptr;

  void open(size_t bytes, const Opts& oa = Opts(), const Opts& ob = Opts(), int cqe = 4096) {
    ASSERT_NO_FATAL_FAILURE(a.open(cqe));
    ASSERT_NO_FATAL_FAILURE(b.open(cqe));
    qa = a.qp();
    qb = b.qp();
    ASSERT_TRUE(qa && qb);
    ASSERT_NO_FATAL_FAILURE(connectPair(a, qa, b, qb, oa, ob));
    src = pattern(bytes, 1);
    dst.assign(bytes, (char)0xEE);
    srcMr = a.reg(src.data(), src.size());
    dstMr = b.reg(dst.data(), dst.size());
    ASSERT_TRUE(srcMr && dstMr);
  }
  uint64_t dstAddr(size_t off = 0) const { return (uint64_t)(uintptr_t)dst.data() + off; }
};

void expectSendWc(const ibv_wc& wc, uint64_t wrId, ibv_qp* qp, ibv_wc_opcode op = IBV_WC_RDMA_WRITE) {
  EXPECT_EQ(wc.wr_id, wrId);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << V().wcStatusStr(wc.status);
  EXPECT_EQ(wc.opcode, op);
  EXPECT_EQ(wc.qp_num, qp->qp_num);
  EXPECT_EQ(wc.wc_flags, 0u);
}

TEST_F(VerbsEmuData, WritePlacesEveryByteAndCompletesAfterward) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.open(1 << 20));
  uint64_t id = 0;
  for (size_t len : {(size_t)0, (size_t)1, (size_t)4095, (size_t)4096, (size_t)65536, (size_t)65537, (size_t)300013,
                     (size_t)(1 << 20)}) {
    std::fill(p.dst.begin(), p.dst.end(), (char)0xEE);
    ASSERT_EQ(postWrite(p.qa, ++id, p.src.data(), len, p.srcMr->lkey, p.dstAddr(), p.dstMr->rkey), 0);
    ibv_wc wc;
    ASSERT_TRUE(pollOne(p.a.cq, &wc)) << "no completion for a write of " << len;
    expectSendWc(wc, id, p.qa);
    // The completion means the data is in the peer's memory, every byte of it and nothing more.
    EXPECT_EQ(firstDiff(p.dst.data(), p.src.data(), len), -1) << "write of " << len;
    if (len < p.dst.size()) {
      EXPECT_EQ(p.dst[len], (char)0xEE) << "wrote past the end (" << len << ")";
    }
  }
  // Three SGEs gather into one contiguous remote range.
  std::fill(p.dst.begin(), p.dst.end(), (char)0xEE);
  ibv_sge sges[3] = {{(uint64_t)(uintptr_t)(p.src.data() + 1000), 100, p.srcMr->lkey},
                     {(uint64_t)(uintptr_t)(p.src.data() + 70000), 70000, p.srcMr->lkey},
                     {(uint64_t)(uintptr_t)(p.src.data() + 5), 3, p.srcMr->lkey}};
  ibv_send_wr wr;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = 99;
  wr.sg_list = sges;
  wr.num_sge = 3;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = p.dstAddr(17);
  wr.wr.rdma.rkey = p.dstMr->rkey;
  ibv_send_wr* bad;
  ASSERT_EQ(V().postSend(p.qa, &wr, &bad), 0);
  ibv_wc wc;
  ASSERT_TRUE(pollOne(p.a.cq, &wc));
  expectSendWc(wc, 99, p.qa);
  EXPECT_EQ(firstDiff(p.dst.data() + 17, p.src.data() + 1000, 100), -1);
  EXPECT_EQ(firstDiff(p.dst.data() + 117, p.src.data() + 70000, 70000), -1);
  EXPECT_EQ(firstDiff(p.dst.data() + 70117, p.src.data() + 5, 3), -1);
  EXPECT_EQ(p.dst[16], (char)0xEE);
  EXPECT_EQ(p.dst[70120], (char)0xEE);
  // An unsignaled write gives no completion; the signaled one after it does, and implies both.
  ASSERT_EQ(postWrite(p.qa, 200, p.src.data(), 1000, p.srcMr->lkey, p.dstAddr(200000), p.dstMr->rkey, IBV_WR_RDMA_WRITE,
                      0, 0),
            0);
  ASSERT_EQ(postWrite(p.qa, 201, p.src.data() + 1000, 1000, p.srcMr->lkey, p.dstAddr(201000), p.dstMr->rkey), 0);
  ASSERT_TRUE(pollOne(p.a.cq, &wc));
  expectSendWc(wc, 201, p.qa);
  EXPECT_EQ(firstDiff(p.dst.data() + 200000, p.src.data(), 2000), -1);
  EXPECT_EQ(V().pollCq(p.a.cq, 1, &wc), 0) << "nothing for the unsignaled write";
  EXPECT_EQ(V().pollCq(p.b.cq, 1, &wc), 0) << "plain writes consume no receive and complete nothing remotely";
}

TEST_F(VerbsEmuData, WriteWithImmConsumesReceivesInOrder) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.open(1 << 20));
  const size_t lens[] = {10, 0, 70000, 4096};
  for (int i = 0; i < 4; i++) ASSERT_EQ(postRecv(p.qb, 100 + i), 0);
  size_t off = 0;
  for (int i = 0; i < 4; i++) {
    ASSERT_EQ(postWrite(p.qa, i, p.src.data() + off, lens[i], p.srcMr->lkey, p.dstAddr(off), p.dstMr->rkey,
                        IBV_WR_RDMA_WRITE_WITH_IMM, 0xA0B0C000u + i),
              0);
    off += lens[i];
  }
  off = 0;
  for (int i = 0; i < 4; i++) {
    ibv_wc wc;
    ASSERT_TRUE(pollOne(p.b.cq, &wc)) << "receive " << i;
    EXPECT_EQ(wc.wr_id, 100u + i) << "receives complete in posting order";
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << V().wcStatusStr(wc.status);
    EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
    EXPECT_EQ(ntohl(wc.imm_data), 0xA0B0C000u + i) << "the immediate travels in network byte order";
    EXPECT_EQ(wc.byte_len, lens[i]);
    EXPECT_EQ(wc.qp_num, p.qb->qp_num);
    EXPECT_EQ(firstDiff(p.dst.data() + off, p.src.data() + off, lens[i]), -1) << "data before its completion";
    off += lens[i];
    ASSERT_TRUE(pollOne(p.a.cq, &wc));
    expectSendWc(wc, i, p.qa);
  }
}

TEST_F(VerbsEmuData, SendScattersIntoTheReceiveAndATooSmallReceiveFailsBothSides) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.open(1 << 16));
  // One receive of two SGEs (100 + 200 bytes) takes a 250-byte SEND.
  ibv_sge rs[2] = {{(uint64_t)(uintptr_t)p.dst.data(), 100, p.dstMr->lkey},
                   {(uint64_t)(uintptr_t)(p.dst.data() + 1000), 200, p.dstMr->lkey}};
  ibv_recv_wr rwr;
  memset(&rwr, 0, sizeof rwr);
  rwr.wr_id = 7;
  rwr.sg_list = rs;
  rwr.num_sge = 2;
  ibv_recv_wr* rbad;
  ASSERT_EQ(V().postRecv(p.qb, &rwr, &rbad), 0);
  ASSERT_EQ(postRecv(p.qb, 8), 0);  // no buffer: takes a zero-byte SEND_WITH_IMM
  ASSERT_EQ(postWrite(p.qa, 1, p.src.data(), 250, p.srcMr->lkey, 0, 0, IBV_WR_SEND), 0);
  ASSERT_EQ(postWrite(p.qa, 2, nullptr, 0, 0, 0, 0, IBV_WR_SEND_WITH_IMM, 42), 0);
  ibv_wc wc;
  ASSERT_TRUE(pollOne(p.b.cq, &wc));
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << V().wcStatusStr(wc.status);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.byte_len, 250u);
  EXPECT_FALSE(wc.wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(firstDiff(p.dst.data(), p.src.data(), 100), -1);
  EXPECT_EQ(firstDiff(p.dst.data() + 1000, p.src.data() + 100, 150), -1);
  EXPECT_EQ(p.dst[1150], (char)0xEE);
  ASSERT_TRUE(pollOne(p.b.cq, &wc));
  EXPECT_EQ(wc.wr_id, 8u);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(wc.imm_data), 42u);
  EXPECT_EQ(wc.byte_len, 0u);
  ASSERT_TRUE(pollOne(p.a.cq, &wc));
  expectSendWc(wc, 1, p.qa, IBV_WC_SEND);
  ASSERT_TRUE(pollOne(p.a.cq, &wc));
  expectSendWc(wc, 2, p.qa, IBV_WC_SEND);

  ASSERT_EQ(postRecv(p.qb, 9, p.dst.data(), 10, p.dstMr->lkey), 0);
  ASSERT_EQ(postRecv(p.qb, 10), 0);
  ASSERT_EQ(postWrite(p.qa, 3, p.src.data(), 11, p.srcMr->lkey, 0, 0, IBV_WR_SEND), 0);
  ASSERT_TRUE(pollOne(p.b.cq, &wc));
  EXPECT_EQ(wc.wr_id, 9u);
  EXPECT_EQ(wc.status, IBV_WC_LOC_LEN_ERR) << V().wcStatusStr(wc.status);
  ASSERT_TRUE(pollOne(p.b.cq, &wc));
  EXPECT_EQ(wc.wr_id, 10u);
  EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
  ASSERT_TRUE(pollOne(p.a.cq, &wc));
  EXPECT_EQ(wc.wr_id, 3u);
  EXPECT_EQ(wc.status, IBV_WC_REM_INV_REQ_ERR) << V().wcStatusStr(wc.status);
  EXPECT_EQ(stateOf(p.qa), IBV_QPS_ERR);
  EXPECT_EQ(stateOf(p.qb), IBV_QPS_ERR);
}

TEST_F(VerbsEmuData, InlineDataIsCopiedWhenPosted) {
  std::vector<char> dst(256, 0);
  Host a, b;
  ASSERT_NO_FATAL_FAILURE(a.open());
  ASSERT_NO_FATAL_FAILURE(b.open());
  ibv_qp* qa = a.qp(16, 16, nullptr, nullptr, 0, 128);
  ibv_qp* qb = b.qp();
  ASSERT_NO_FATAL_FAILURE(connectPair(a, qa, b, qb));
  ibv_mr* dm = b.reg(dst.data(), dst.size());
  char msg[100];
  memset(msg, 'x', sizeof msg);
  ASSERT_EQ(postWrite(qa, 5, msg, sizeof msg, 0 /* lkey unused inline */, (uintptr_t)dst.data(), dm->rkey,
                      IBV_WR_RDMA_WRITE, 0, IBV_SEND_SIGNALED | IBV_SEND_INLINE),
            0);
  memset(msg, 'y', sizeof msg);  // allowed right after posting an inline WR
  ibv_wc wc;
  ASSERT_TRUE(pollOne(a.cq, &wc));
  expectSendWc(wc, 5, qa);
  EXPECT_EQ(std::string(dst.data(), 100), std::string(100, 'x'));
  char big[200] = {};
  EXPECT_EQ(postWrite(qa, 6, big, sizeof big, 0, (uintptr_t)dst.data(), dm->rkey, IBV_WR_RDMA_WRITE, 0,
                      IBV_SEND_SIGNALED | IBV_SEND_INLINE),
            EINVAL)
      << "above max_inline_data";
}

TEST_F(VerbsEmuData, InfinibandConnectsByLidWithoutAGlobalRoute) {
  configure([](emu::Config& c) { c.linkLayer = IBV_LINK_LAYER_INFINIBAND; });
  Opts o;
  o.global = false;
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.open(4096, o, o));
  ASSERT_EQ(postRecv(p.qb, 1), 0);
  ASSERT_EQ(
      postWrite(p.qa, 2, p.src.data(), 4096, p.srcMr->lkey, p.dstAddr(), p.dstMr->rkey, IBV_WR_RDMA_WRITE_WITH_IMM, 9),
      0);
  ibv_wc wc;
  ASSERT_TRUE(pollOne(p.b.cq, &wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << V().wcStatusStr(wc.status);
  EXPECT_EQ(ntohl(wc.imm_data), 9u);
  EXPECT_EQ(firstDiff(p.dst.data(), p.src.data(), 4096), -1);
}

TEST_F(VerbsEmuData, BadRkeyIsARemoteAccessErrorThatBreaksBothQps) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.open(4096));
  ASSERT_EQ(postRecv(p.qb, 50), 0);
  ASSERT_EQ(postWrite(p.qa, 1, p.src.data(), 64, p.srcMr->lkey, p.dstAddr(), p.dstMr->rkey ^ 0x100), 0);
  ASSERT_EQ(postWrite(p.qa, 2, p.src.data(), 64, p.srcMr->lkey, p.dstAddr(), p.dstMr->rkey, IBV_WR_RDMA_WRITE, 0, 0),
            0);
  ibv_wc wc;
  ASSERT_TRUE(pollOne(p.a.cq, &wc));
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << V().wcStatusStr(wc.status);
  EXPECT_EQ(wc.qp_num, p.qa->qp_num);
  EXPECT_NE(wc.vendor_err, 0u);
  ASSERT_TRUE(pollOne(p.a.cq, &wc)) << "the unsignaled WR behind it is flushed, with a completion";
  EXPECT_EQ(wc.wr_id, 2u);
  EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(stateOf(p.qa), IBV_QPS_ERR);
  EXPECT_EQ(p.qa->state, IBV_QPS_ERR);
  // The responder's QP breaks too: its receive is flushed and an async event names the QP.
  ASSERT_TRUE(pollOne(p.b.cq, &wc));
  EXPECT_EQ(wc.wr_id, 50u);
  EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(stateOf(p.qb), IBV_QPS_ERR);
  ibv_async_event ev;
  ASSERT_TRUE(asyncEvent(p.b.ctx, &ev));
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_ACCESS_ERR);
  EXPECT_EQ(ev.element.qp, p.qb);
  EXPECT_EQ(p.dst[0], (char)0xEE) << "nothing was written";
}

TEST_F(VerbsEmuData, OutOfBoundsAndMissingRemoteWriteAreRemoteAccessErrors) {
  struct Case {
    const char* what;
    size_t off, len;
    bool mrRemoteWrite, qpRemoteWrite;
  } cases[] = {{"past the end", 4096 - 32, 64, true, true},
               {"one byte past the end", 1, 4096, true, true},
               {"region without REMOTE_WRITE", 0, 64, false, true},
               {"QP without REMOTE_WRITE", 0, 64, true, false},
               {"in bounds (control)", 4096 - 64, 64, true, true}};
  for (const Case& c : cases) {
    Opts ob;
    if (!c.qpRemoteWrite) ob.access = IBV_ACCESS_LOCAL_WRITE;
    Pair p;
    ASSERT_NO_FATAL_FAILURE(p.open(4096, Opts(), ob));
    ibv_mr* target = p.dstMr;
    if (!c.mrRemoteWrite) target = p.b.reg(p.dst.data(), p.dst.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_EQ(postWrite(p.qa, 1, p.src.data(), c.len, p.srcMr->lkey, p.dstAddr(c.off), target->rkey), 0);
    ibv_wc wc;
    ASSERT_TRUE(pollOne(p.a.cq, &wc)) << c.what;
    bool ok = std::string(c.what).find("control") != std::string::npos;
    EXPECT_EQ(wc.status, ok ? IBV_WC_SUCCESS : IBV_WC_REM_ACCESS_ERR) << c.what << ": " << V().wcStatusStr(wc.status);
    if (!ok) {
      EXPECT_EQ(p.dst[c.off], (char)0xEE) << c.what << ": nothing placed";
    }
  }
}

TEST_F(VerbsEmuData, BadLkeyOrRangeIsALocalProtectionError) {
  for (int variant = 0; variant < 2; variant++) {
    Pair p;
    ASSERT_NO_FATAL_FAILURE(p.open(4096));
    uint32_t lkey = variant == 0 ? p.srcMr->lkey + 0x1000 : p.srcMr->lkey;
    size_t len = variant == 0 ? 64 : 4097;  // variant 1: one byte beyond the local region
    ASSERT_EQ(postWrite(p.qa, 1, p.src.data(), len, lkey, p.dstAddr(), p.dstMr->rkey), 0);
    ibv_wc wc;
    ASSERT_TRUE(pollOne(p.a.cq, &wc));
    EXPECT_EQ(wc.status, IBV_WC_LOC_PROT_ERR) << V().wcStatusStr(wc.status);
    EXPECT_EQ(stateOf(p.qa), IBV_QPS_ERR);
  }
}

// ---- memory regions reached through the DeviceCopy (GPU memory) ------------------------------

TEST_F(VerbsEmuData, UnmappableDmabufIsReachedThroughTheDeviceCopy) {
  DeviceCopyScope scope(hostDeviceCopy);
  const size_t kElems = 40000;  // 160000 bytes: three emulated packets
  const size_t bytes = kElems * sizeof(uint32_t);
  std::vector<uint32_t> src(kElems), dev(kElems, 0xEEEEEEEEu), devSrc(kElems), dst(kElems, 0xEEEEEEEEu);
  for (size_t i = 0; i < kElems; i++) {
    src[i] = 0xC0DE0000u + (uint32_t)i * 7u;
    devSrc[i] = 0xBEEF0000u ^ (uint32_t)(i * 2654435761u);
  }
  Pipe pipeA, pipeB;
  Host a, b;
  ASSERT_NO_FATAL_FAILURE(a.open());
  ASSERT_NO_FATAL_FAILURE(b.open());
  // The "device" memory's address is its iova, as a CUDA pointer would be.
  ibv_mr* devMr = V().regDmabufMr(b.pd, 0, bytes, (uint64_t)(uintptr_t)dev.data(), pipeB.fd(), kRw);
  ASSERT_NE(devMr, nullptr) << strerror(errno);
  b.mrs.push_back(devMr);
  EXPECT_EQ(devMr->addr, dev.data());
  EXPECT_EQ(devMr->length, bytes);
  ibv_mr* devSrcMr = V().regDmabufMr(a.pd, 0, bytes, (uint64_t)(uintptr_t)devSrc.data(), pipeA.fd(), kRw);
  ASSERT_NE(devSrcMr, nullptr) << strerror(errno);
  a.mrs.push_back(devSrcMr);
  ibv_qp* qa = a.qp();
  ibv_qp* qb = b.qp();
  ASSERT_NO_FATAL_FAILURE(connectPair(a, qa, b, qb));
  ibv_mr* srcMr = a.reg(src.data(), bytes);
  ibv_mr* dstMr = b.reg(dst.data(), bytes);
  ASSERT_TRUE(srcMr && dstMr);

  // Target side: host memory into the device region, a WRITE_WITH_IMM completing a receive.
  ASSERT_EQ(postRecv(qb, 80), 0);
  ASSERT_EQ(postWrite(qa, 1, src.data(), bytes, srcMr->lkey, (uint64_t)(uintptr_t)dev.data(), devMr->rkey,
                      IBV_WR_RDMA_WRITE_WITH_IMM, 42),
            0);
  ibv_wc wc;
  ASSERT_TRUE(pollOne(b.cq, &wc));
  EXPECT_EQ(wc.wr_id, 80u);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << V().wcStatusStr(wc.status);
  EXPECT_EQ(wc.byte_len, bytes);
  ASSERT_TRUE(pollOne(a.cq, &wc));
  expectSendWc(wc, 1, qa);
  for (size_t i = 0; i < kElems; i++) ASSERT_EQ(dev[i], src[i]) << "element " << i << " of the device region";
  int afterTarget = gDeviceCopies.load();
  EXPECT_GE(afterTarget, 3) << "one copy per packet at least";

  // A write at an offset inside the device region lands there and nowhere else.
  std::fill(dev.begin(), dev.end(), 0xEEEEEEEEu);
  ASSERT_EQ(postWrite(qa, 2, src.data() + 10, 100 * sizeof(uint32_t), srcMr->lkey,
                      (uint64_t)(uintptr_t)(dev.data() + 1000), devMr->rkey),
            0);
  ASSERT_TRUE(pollOne(a.cq, &wc));
  expectSendWc(wc, 2, qa);
  for (size_t i = 0; i < kElems; i++) {
    uint32_t want = i >= 1000 && i < 1100 ? src[10 + i - 1000] : 0xEEEEEEEEu;
    ASSERT_EQ(dev[i], want) << "element " << i << " of the device region";
  }

  // Source side: the device region gathered into host memory on the peer.
  ASSERT_EQ(postWrite(qa, 3, devSrc.data(), bytes, devSrcMr->lkey, (uint64_t)(uintptr_t)dst.data(), dstMr->rkey), 0);
  ASSERT_TRUE(pollOne(a.cq, &wc));
  expectSendWc(wc, 3, qa);
  for (size_t i = 0; i < kElems; i++) ASSERT_EQ(dst[i], devSrc[i]) << "element " << i << " read from the device region";
  EXPECT_GT(gDeviceCopies.load(), afterTarget + 1);
}

TEST_F(VerbsEmuData, FailingDeviceCopyIsACompletionErrorOnEitherSide) {
  DeviceCopyScope scope(faultingDeviceCopy);
  const size_t bytes = 8192;
  for (bool deviceIsTarget : {true, false}) {
    const char* what = deviceIsTarget ? "device region as the target" : "device region as the source";
    std::vector<char> src = pattern(bytes, 3), dev(bytes, (char)0xEE), dst(bytes, (char)0xEE);
    Pipe pipe;
    Host a, b;
    ASSERT_NO_FATAL_FAILURE(a.open());
    ASSERT_NO_FATAL_FAILURE(b.open());
    Host& owner = deviceIsTarget ? b : a;
    ibv_mr* devMr = V().regDmabufMr(owner.pd, 0, bytes, (uint64_t)(uintptr_t)dev.data(), pipe.fd(), kRw);
    ASSERT_NE(devMr, nullptr) << what << ": " << strerror(errno);
    owner.mrs.push_back(devMr);
    ibv_qp* qa = a.qp();
    ibv_qp* qb = b.qp();
    ASSERT_NO_FATAL_FAILURE(connectPair(a, qa, b, qb));
    ibv_mr* srcMr = a.reg(src.data(), bytes);
    ibv_mr* dstMr = b.reg(dst.data(), bytes);
    ASSERT_TRUE(srcMr && dstMr);
    int before = gDeviceCopies.load();
    if (deviceIsTarget) {
      ASSERT_EQ(postWrite(qa, 1, src.data(), bytes, srcMr->lkey, (uint64_t)(uintptr_t)dev.data(), devMr->rkey), 0);
    } else {
      ASSERT_EQ(postWrite(qa, 1, dev.data(), bytes, devMr->lkey, (uint64_t)(uintptr_t)dst.data(), dstMr->rkey), 0);
    }
    ibv_wc wc;
    ASSERT_TRUE(pollOne(a.cq, &wc)) << what;
    EXPECT_EQ(wc.wr_id, 1u) << what;
    // The responder's fault is a remote access error NAK; the requester's its local protection error.
    EXPECT_EQ(wc.status, deviceIsTarget ? IBV_WC_REM_ACCESS_ERR : IBV_WC_LOC_PROT_ERR)
        << what << ": " << V().wcStatusStr(wc.status);
    EXPECT_EQ(stateOf(qa), IBV_QPS_ERR) << what;
    EXPECT_GT(gDeviceCopies.load(), before) << what << ": the copy was tried";
    if (deviceIsTarget) {
      ibv_async_event ev;
      ASSERT_TRUE(asyncEvent(b.ctx, &ev)) << what;
      EXPECT_EQ(ev.event_type, IBV_EVENT_QP_ACCESS_ERR) << what;
      EXPECT_EQ(stateOf(qb), IBV_QPS_ERR) << what;
    } else {
      EXPECT_EQ(dst[0], (char)0xEE) << what << ": nothing sent";
    }
  }
}

TEST_F(VerbsEmuData, NoReceivePostedExhaustsRnrRetries) {
  Opts oa;
  oa.rnrRetry = 2;
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.open(4096, oa));
  auto t0 = Clock::now();
  ASSERT_EQ(
      postWrite(p.qa, 1, p.src.data(), 100, p.srcMr->lkey, p.dstAddr(), p.dstMr->rkey, IBV_WR_RDMA_WRITE_WITH_IMM, 1),
      0);
  ibv_wc wc;
  ASSERT_TRUE(pollOne(p.a.cq, &wc));
  EXPECT_EQ(wc.status, IBV_WC_RNR_RETRY_EXC_ERR) << V().wcStatusStr(wc.status);
  EXPECT_LT(Clock::now() - t0, Ms(2000));
  emu::QpStats st;
  ASSERT_EQ(emu::queryStats(p.qa, &st), 0);
  EXPECT_EQ(st.rnrNaks, 3u) << "the first attempt and two retries";
  EXPECT_EQ(stateOf(p.qa), IBV_QPS_ERR);
  EXPECT_EQ(stateOf(p.qb), IBV_QPS_RTS) << "RNR does not break the responder";
}

TEST_F(VerbsEmuData, RnrRecoversWhenAReceiveIsPostedLater) {
  Pair p;  // rnr_retry 7: retry forever
  ASSERT_NO_FATAL_FAILURE(p.open(1 << 18));
  ASSERT_EQ(postWrite(p.qa, 1, p.src.data(), 100000, p.srcMr->lkey, p.dstAddr(), p.dstMr->rkey,
                      IBV_WR_RDMA_WRITE_WITH_IMM, 77),
            0);
  ASSERT_EQ(postWrite(p.qa, 2, p.src.data() + 100000, 5000, p.srcMr->lkey, p.dstAddr(100000), p.dstMr->rkey), 0);
  std::this_thread::sleep_for(Ms(30));
  ibv_wc wc;
  EXPECT_EQ(V().pollCq(p.a.cq, 1, &wc), 0) << "the sender waits while the receiver is not ready";
  emu::QpStats st;
  ASSERT_EQ(emu::queryStats(p.qa, &st), 0);
  EXPECT_GE(st.rnrNaks, 2u);
  ASSERT_EQ(postRecv(p.qb, 9), 0);
  ASSERT_TRUE(pollOne(p.b.cq, &wc));
  EXPECT_EQ(wc.wr_id, 9u);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << V().wcStatusStr(wc.status);
  EXPECT_EQ(wc.byte_len, 100000u);
  EXPECT_EQ(ntohl(wc.imm_data), 77u);
  ASSERT_TRUE(pollOne(p.a.cq, &wc));
  expectSendWc(wc, 1, p.qa);
  ASSERT_TRUE(pollOne(p.a.cq, &wc));
  expectSendWc(wc, 2, p.qa);
  EXPECT_EQ(firstDiff(p.dst.data(), p.src.data(), 105000), -1);
}

TEST_F(VerbsEmuData, ErrorStateFlushesOutstandingAndLaterWorkRequests) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.open(4096));
  // The first WR waits for a receive that never comes (RNR forever); three more queue behind it.
  ASSERT_EQ(
      postWrite(p.qa, 1, p.src.data(), 10, p.srcMr->lkey, p.dstAddr(), p.dstMr->rkey, IBV_WR_RDMA_WRITE_WITH_IMM, 1),
      0);
  ASSERT_EQ(postWrite(p.qa, 2, p.src.data(), 10, p.srcMr->lkey, p.dstAddr(), p.dstMr->rkey, IBV_WR_RDMA_WRITE, 0, 0),
            0);
  ASSERT_EQ(postWrite(p.qa, 3, p.src.data(), 10, p.srcMr->lkey, p.dstAddr(), p.dstMr->rkey), 0);
  ASSERT_EQ(postRecv(p.qa, 4), 0);
  std::this_thread::sleep_for(Ms(10));
  ibv_qp_attr e;
  memset(&e, 0, sizeof e);
  e.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(V().modifyQp(p.qa, &e, IBV_QP_STATE), 0);
  std::vector<ibv_wc> wcs = collect(p.a.cq, 50);
  ASSERT_EQ(wcs.size(), 4u) << "every outstanding WR completes, unsignaled ones included";
  for (size_t i = 0; i < 3; i++) {
    EXPECT_EQ(wcs[i].wr_id, i + 1) << "in order";
    EXPECT_EQ(wcs[i].status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(wcs[i].qp_num, p.qa->qp_num);
  }
  EXPECT_EQ(wcs[3].wr_id, 4u);
  EXPECT_EQ(wcs[3].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(wcs[3].opcode, IBV_WC_RECV);
  // Posting in ERR is accepted and flushed at once.
  ASSERT_EQ(postWrite(p.qa, 5, p.src.data(), 10, p.srcMr->lkey, p.dstAddr(), p.dstMr->rkey), 0);
  ASSERT_EQ(postRecv(p.qa, 6), 0);
  wcs = collect(p.a.cq, 20);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 5u);
  EXPECT_EQ(wcs[0].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(wcs[1].wr_id, 6u);
  EXPECT_EQ(wcs[1].status, IBV_WC_WR_FLUSH_ERR);
  // RESET brings it back: connect afresh to the same peer QP.
  ibv_qp_attr r;
  memset(&r, 0, sizeof r);
  r.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(V().modifyQp(p.qa, &r, IBV_QP_STATE), 0);
  ASSERT_EQ(V().modifyQp(p.qb, &r, IBV_QP_STATE), 0);
  ASSERT_NO_FATAL_FAILURE(connectPair(p.a, p.qa, p.b, p.qb, Opts(), Opts(), 10, 20));
  ASSERT_EQ(postWrite(p.qa, 7, p.src.data(), 10, p.srcMr->lkey, p.dstAddr(), p.dstMr->rkey), 0);
  ibv_wc wc;
  ASSERT_TRUE(pollOne(p.a.cq, &wc));
  expectSendWc(wc, 7, p.qa);
}

TEST_F(VerbsEmuData, LostPacketsExhaustTheRetryCount) {
  Opts oa;
  oa.timeout = 1;  // 8 us, floored to the emulator's 10 ms
  oa.retryCnt = 2;
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.open(4096, oa));
  ASSERT_EQ(emu::dropPackets(p.qa, -1), 0);
  auto t0 = Clock::now();
  ASSERT_EQ(postWrite(p.qa, 1, p.src.data(), 100, p.srcMr->lkey, p.dstAddr(), p.dstMr->rkey), 0);
  ASSERT_EQ(postWrite(p.qa, 2, p.src.data(), 100, p.srcMr->lkey, p.dstAddr(), p.dstMr->rkey), 0);
  ibv_wc wc;
  ASSERT_TRUE(pollOne(p.a.cq, &wc));
  auto took = Clock::now() - t0;
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR) << V().wcStatusStr(wc.status);
  EXPECT_GE(took, Ms(25)) << "three timeouts of 10 ms";
  ASSERT_TRUE(pollOne(p.a.cq, &wc));
  EXPECT_EQ(wc.wr_id, 2u);
  EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
  emu::QpStats st;
  ASSERT_EQ(emu::queryStats(p.qa, &st), 0);
  EXPECT_EQ(st.timeouts, 3u);
  EXPECT_EQ(st.dropped, st.packetsSent);
  EXPECT_GE(st.retransmits, 2u);
  EXPECT_EQ(p.dst[0], (char)0xEE);
}

TEST_F(VerbsEmuData, AFewLostPacketsAreRetransmittedTransparently) {
  Opts oa;
  oa.timeout = 14;  // 67 ms: recovery must come from the receiver's sequence NAK, not a timeout
  oa.retryCnt = 7;
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.open(1 << 20, oa));
  ASSERT_EQ(emu::dropPackets(p.qa, 3), 0);
  for (int i = 0; i < 8; i++)
    ASSERT_EQ(
        postWrite(p.qa, i, p.src.data() + i * 100000, 100000, p.srcMr->lkey, p.dstAddr(i * 100000), p.dstMr->rkey), 0);
  for (int i = 0; i < 8; i++) {
    ibv_wc wc;
    ASSERT_TRUE(pollOne(p.a.cq, &wc));
    expectSendWc(wc, i, p.qa);
  }
  EXPECT_EQ(firstDiff(p.dst.data(), p.src.data(), 800000), -1);
  emu::QpStats st;
  ASSERT_EQ(emu::queryStats(p.qa, &st), 0);
  EXPECT_EQ(st.dropped, 3u);
  EXPECT_GE(st.retransmits, 3u);
  EXPECT_GE(st.seqNaks, 1u) << "packets after the gap make the receiver NAK the missing PSN";
  EXPECT_EQ(st.timeouts, 0u);
}

TEST_F(VerbsEmuData, PortDownIsReportedAndTimesQpsOut) {
  Opts o;
  o.timeout = 1;
  o.retryCnt = 1;
  for (int side = 0; side < 2; side++) {  // the sender's port, then the receiver's
    Pair p;
    ASSERT_NO_FATAL_FAILURE(p.open(4096, o, o));
    ibv_context* down = side == 0 ? p.a.ctx : p.b.ctx;
    ASSERT_EQ(emu::setPortState(down, false), 0);
    ibv_port_attr pa;
    ASSERT_EQ(V().queryPort(down, 1, &pa), 0);
    EXPECT_EQ(pa.state, IBV_PORT_DOWN);
    EXPECT_EQ(pa.phys_state, 3);  // Disabled
    ibv_async_event ev;
    ASSERT_TRUE(asyncEvent(down, &ev));
    EXPECT_EQ(ev.event_type, IBV_EVENT_PORT_ERR);
    EXPECT_EQ(ev.element.port_num, 1);
    ASSERT_EQ(postWrite(p.qa, 1, p.src.data(), 100, p.srcMr->lkey, p.dstAddr(), p.dstMr->rkey), 0);
    ibv_wc wc;
    ASSERT_TRUE(pollOne(p.a.cq, &wc));
    EXPECT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR) << "side " << side << ": " << V().wcStatusStr(wc.status);
    EXPECT_EQ(p.dst[0], (char)0xEE);
    ASSERT_EQ(emu::setPortState(down, true), 0);
    ASSERT_TRUE(asyncEvent(down, &ev));
    EXPECT_EQ(ev.event_type, IBV_EVENT_PORT_ACTIVE);
    ASSERT_EQ(V().queryPort(down, 1, &pa), 0);
    EXPECT_EQ(pa.state, IBV_PORT_ACTIVE);
    // A new connection works once the port is back.
    ibv_qp* qa2 = p.a.qp();
    ibv_qp* qb2 = p.b.qp();
    ASSERT_NO_FATAL_FAILURE(connectPair(p.a, qa2, p.b, qb2, o, o));
    ASSERT_EQ(postWrite(qa2, 2, p.src.data(), 100, p.srcMr->lkey, p.dstAddr(), p.dstMr->rkey), 0);
    ASSERT_TRUE(pollOne(p.a.cq, &wc));
    expectSendWc(wc, 2, qa2);
    EXPECT_EQ(firstDiff(p.dst.data(), p.src.data(), 100), -1);
  }
}

TEST_F(VerbsEmuData, ManyOutstandingWrsOnBoundedQueuesCompleteInOrder) {
  const int kWrs = 2000, kLen = 256;
  std::vector<char> src = pattern(kWrs * kLen, 3), dst(kWrs * kLen, (char)0xEE);
  Host a, b;
  ASSERT_NO_FATAL_FAILURE(a.open());
  ASSERT_NO_FATAL_FAILURE(b.open());
  ibv_cq* scq = a.newCq(64);  // bounded: smaller than the number of WRs
  ibv_cq* rcq = b.newCq(64);
  ibv_qp* qa = a.qp(128, 16, scq, scq);
  ibv_qp* qb = b.qp(16, 64, rcq, rcq);
  ASSERT_NO_FATAL_FAILURE(connectPair(a, qa, b, qb));
  ibv_mr* sm = a.reg(src.data(), src.size());
  ibv_mr* dm = b.reg(dst.data(), dst.size());
  int posted = 0, completed = 0, fullQueue = 0;
  uint64_t expectId = 3;
  auto deadline = Clock::now() + Ms(20000);
  while (completed < kWrs / 4 && Clock::now() < deadline) {
    while (posted < kWrs) {
      bool signaled = posted % 4 == 3;
      int rc = postWrite(qa, posted, src.data() + posted * kLen, kLen, sm->lkey, (uintptr_t)dst.data() + posted * kLen,
                         dm->rkey, IBV_WR_RDMA_WRITE, 0, signaled ? IBV_SEND_SIGNALED : 0);
      if (rc == ENOMEM) {
        fullQueue++;
        break;
      }
      ASSERT_EQ(rc, 0);
      posted++;
    }
    ibv_wc wc[16];
    int n = V().pollCq(scq, 16, wc);
    ASSERT_GE(n, 0) << "the CQ must not overrun";
    for (int i = 0; i < n; i++) {
      ASSERT_EQ(wc[i].status, IBV_WC_SUCCESS) << V().wcStatusStr(wc[i].status);
      ASSERT_EQ(wc[i].wr_id, expectId) << "signaled completions in posting order";
      expectId += 4;
      completed++;
    }
  }
  EXPECT_EQ(completed, kWrs / 4);
  EXPECT_GT(fullQueue, 0) << "128 slots cannot hold 2000 WRs: posting must have met ENOMEM";
  EXPECT_EQ(firstDiff(dst.data(), src.data(), dst.size()), -1);

  // A window of 64 receives, consumed by 64 immediates, complete in order on a 64-entry CQ.
  for (int i = 0; i < 64; i++) ASSERT_EQ(postRecv(qb, 1000 + i), 0);
  for (int i = 0; i < 64; i++) {
    int rc;
    deadline = Clock::now() + Ms(5000);
    while ((rc = postWrite(qa, 5000 + i, src.data(), 8, sm->lkey, (uintptr_t)dst.data(), dm->rkey,
                           IBV_WR_RDMA_WRITE_WITH_IMM, i, 0)) == ENOMEM &&
           Clock::now() < deadline) {
      ibv_wc wc;
      ASSERT_GE(V().pollCq(scq, 1, &wc), 0);
    }
    ASSERT_EQ(rc, 0);
  }
  for (int i = 0; i < 64; i++) {
    ibv_wc wc;
    ASSERT_TRUE(pollOne(rcq, &wc));
    ASSERT_EQ(wc.wr_id, 1000u + i);
    ASSERT_EQ(ntohl(wc.imm_data), (uint32_t)i);
  }
}

TEST_F(VerbsEmuData, UnsignaledWrsHoldTheirSlotsUntilALaterCompletionIsPolled) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.open(4096));
  ibv_qp* qa = p.a.qp(8, 8);
  ibv_qp* qb = p.b.qp(8, 8);
  ASSERT_NO_FATAL_FAILURE(connectPair(p.a, qa, p.b, qb));
  for (int i = 0; i < 7; i++)
    ASSERT_EQ(postWrite(qa, i, p.src.data(), 8, p.srcMr->lkey, p.dstAddr(), p.dstMr->rkey, IBV_WR_RDMA_WRITE, 0, 0), 0);
  ASSERT_EQ(postWrite(qa, 7, p.src.data(), 8, p.srcMr->lkey, p.dstAddr(), p.dstMr->rkey), 0);
  std::this_thread::sleep_for(Ms(20));  // all eight are done on the wire by now
  EXPECT_EQ(postWrite(qa, 8, p.src.data(), 8, p.srcMr->lkey, p.dstAddr(), p.dstMr->rkey), ENOMEM)
      << "slots are freed by polling, not by the wire";
  ibv_wc wc;
  ASSERT_TRUE(pollOne(p.a.cq, &wc));
  expectSendWc(wc, 7, qa);
  for (int i = 0; i < 8; i++)
    EXPECT_EQ(postWrite(qa, 10 + i, p.src.data(), 8, p.srcMr->lkey, p.dstAddr(), p.dstMr->rkey, IBV_WR_RDMA_WRITE, 0,
                        i == 7 ? IBV_SEND_SIGNALED : 0),
              0)
        << "polling the signaled completion freed all eight";
  ASSERT_TRUE(pollOne(p.a.cq, &wc));
  expectSendWc(wc, 17, qa);
}

TEST_F(VerbsEmuData, CqOverrunIsLoudAndBreaksItsQps) {
  std::vector<char> src(64), dst(64);
  Host a, b;
  ASSERT_NO_FATAL_FAILURE(a.open());
  ASSERT_NO_FATAL_FAILURE(b.open());
  ibv_cq* small = a.newCq(4);
  ibv_qp* qa = a.qp(16, 16, small, small);
  ibv_qp* qb = b.qp();
  ASSERT_NO_FATAL_FAILURE(connectPair(a, qa, b, qb));
  ibv_mr* sm = a.reg(src.data(), src.size());
  ibv_mr* dm = b.reg(dst.data(), dst.size());
  for (int i = 0; i < 8; i++) ASSERT_EQ(postWrite(qa, i, src.data(), 8, sm->lkey, (uintptr_t)dst.data(), dm->rkey), 0);
  ibv_async_event ev;
  ASSERT_TRUE(asyncEvent(a.ctx, &ev)) << "an overrun raises IBV_EVENT_CQ_ERR";
  EXPECT_EQ(ev.event_type, IBV_EVENT_CQ_ERR);
  EXPECT_EQ(ev.element.cq, small);
  ibv_wc wc[8];
  int n = V().pollCq(small, 8, wc);
  ASSERT_EQ(n, 4) << "the entries that fitted";
  for (int i = 0; i < 4; i++) EXPECT_EQ(wc[i].wr_id, (uint64_t)i);
  errno = 0;
  EXPECT_LT(V().pollCq(small, 8, wc), 0) << "then an error, not a silent empty CQ";
  EXPECT_EQ(errno, EOVERFLOW);
  auto end = Clock::now() + Ms(2000);
  while (stateOf(qa) != IBV_QPS_ERR && Clock::now() < end) std::this_thread::sleep_for(Ms(1));
  EXPECT_EQ(stateOf(qa), IBV_QPS_ERR);
}

TEST_F(VerbsEmuData, MisconfiguredConnectionsTimeOut) {
  Opts o;
  o.timeout = 1;
  o.retryCnt = 1;
  enum { kWrongPsn, kWrongQpn, kGidTypeMismatch, kMtuMismatch };
  for (int c : {kWrongPsn, kWrongQpn, kGidTypeMismatch, kMtuMismatch}) {
    SCOPED_TRACE(c);
    std::vector<char> src = pattern(8192, 5), dst(8192, (char)0xEE);
    Host a, b;
    ASSERT_NO_FATAL_FAILURE(a.open());
    ASSERT_NO_FATAL_FAILURE(b.open());
    ibv_qp* qa = a.qp();
    ibv_qp* qb = b.qp();
    Opts oa = o, ob = o;
    if (c == kGidTypeMismatch) oa.gidIndex = 0;  // A speaks RoCE v1, B RoCE v2
    if (c == kMtuMismatch) ob.mtu = IBV_MTU_1024;
    ConnInfo ia = a.info(qa, 100, oa.gidIndex), ib = b.info(qb, 200, ob.gidIndex);
    if (c == kGidTypeMismatch) ia = a.info(qa, 100, 0);
    ConnInfo ibSeenByA = ib;
    if (c == kWrongPsn) ibSeenByA.psn += 5;
    if (c == kWrongQpn) ibSeenByA.qpn += 1;
    ASSERT_EQ(toInit(qa, kRw), 0);
    ASSERT_EQ(toInit(qb, kRw), 0);
    ibv_qp_attr r = rtrAttr(ibSeenByA, oa);
    ASSERT_EQ(V().modifyQp(qa, &r, kRtrMask), 0);
    r = rtrAttr(ia, ob);
    ASSERT_EQ(V().modifyQp(qb, &r, kRtrMask), 0);
    // B's receive side expects A's PSN 100; A sends from the PSN it believes in.
    ibv_qp_attr s = rtsAttr(c == kWrongPsn ? 105 : 100, oa);
    ASSERT_EQ(V().modifyQp(qa, &s, kRtsMask), 0);
    s = rtsAttr(200, ob);
    ASSERT_EQ(V().modifyQp(qb, &s, kRtsMask), 0);
    ibv_mr* sm = a.reg(src.data(), src.size());
    ibv_mr* dm = b.reg(dst.data(), dst.size());
    ibv_wc wc;
    if (c == kMtuMismatch) {
      // Messages within the smaller MTU pass; larger packets are dropped by the receiver.
      ASSERT_EQ(postWrite(qa, 1, src.data(), 1000, sm->lkey, (uintptr_t)dst.data(), dm->rkey), 0);
      ASSERT_TRUE(pollOne(a.cq, &wc));
      EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << V().wcStatusStr(wc.status);
    }
    ASSERT_EQ(postWrite(qa, 2, src.data(), 3000, sm->lkey, (uintptr_t)dst.data(), dm->rkey), 0);
    ASSERT_TRUE(pollOne(a.cq, &wc));
    EXPECT_EQ(wc.wr_id, 2u);
    EXPECT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR) << V().wcStatusStr(wc.status);
    emu::QpStats st;
    ASSERT_EQ(emu::queryStats(qb, &st), 0);
    if (c != kWrongQpn && c != kWrongPsn) {
      EXPECT_GT(st.rejected, 0u) << "B saw and refused the packets";
    }
  }
}

TEST_F(VerbsEmuData, CompletionChannelSignalsAnArmedCq) {
  std::vector<char> buf(64);
  Host a, b;
  ASSERT_NO_FATAL_FAILURE(a.open());
  ASSERT_NO_FATAL_FAILURE(b.open());
  ibv_comp_channel* ch = V().createCompChannel(b.ctx);
  ASSERT_NE(ch, nullptr);
  int tag = 0;
  ibv_cq* cq = b.newCq(16, ch, &tag);
  ibv_qp* qa = a.qp();
  ibv_qp* qb = b.qp(16, 16, cq, cq);
  ASSERT_NO_FATAL_FAILURE(connectPair(a, qa, b, qb));
  ibv_mr* sm = a.reg(buf.data(), buf.size());
  ibv_mr* dm = b.reg(buf.data(), buf.size());
  ASSERT_EQ(V().reqNotifyCq(cq, 0), 0);
  ASSERT_EQ(postRecv(qb, 1), 0);
  ASSERT_EQ(postWrite(qa, 1, buf.data(), 8, sm->lkey, (uintptr_t)buf.data(), dm->rkey, IBV_WR_RDMA_WRITE_WITH_IMM, 3),
            0);
  pollfd pf{ch->fd, POLLIN, 0};
  ASSERT_EQ(poll(&pf, 1, 5000), 1) << "the channel's fd becomes readable";
  ibv_cq* evCq = nullptr;
  void* evCtx = nullptr;
  ASSERT_EQ(V().getCqEvent(ch, &evCq, &evCtx), 0);
  EXPECT_EQ(evCq, cq);
  EXPECT_EQ(evCtx, &tag);
  V().ackCqEvents(evCq, 1);
  ibv_wc wc;
  ASSERT_TRUE(pollOne(cq, &wc));
  EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(V().destroyCompChannel(ch), EBUSY) << "a CQ still uses it";
  b.cqs.clear();
  b.qps.erase(std::find(b.qps.begin(), b.qps.end(), qb));
  EXPECT_EQ(V().destroyQp(qb), 0);
  EXPECT_EQ(V().destroyCq(cq), 0);
  EXPECT_EQ(V().destroyCompChannel(ch), 0);
}

TEST_F(VerbsEmuData, LoaderWrappersReachTheProviderThroughTheContextOps) {
  // The libibverbs table's post/poll entries are the static-inline ones of verbs.h: they must call
  // the provider's functions in the context. The emulator installs its own there, like a provider.
  const VerbsApi* real = nullptr;
  if (clb::verbs::loadLibibverbs(&real) != clbSuccess) GTEST_SKIP() << clb::lastError();
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.open(4096));
  ASSERT_EQ(real->reqNotifyCq(p.b.cq, 0), 0);
  ibv_sge sge{(uint64_t)(uintptr_t)p.src.data(), 64, p.srcMr->lkey};
  ibv_recv_wr rwr;
  memset(&rwr, 0, sizeof rwr);
  rwr.wr_id = 5;
  ibv_recv_wr* rbad;
  ASSERT_EQ(real->postRecv(p.qb, &rwr, &rbad), 0);
  ibv_send_wr wr;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = 6;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = p.dstAddr();
  wr.wr.rdma.rkey = p.dstMr->rkey;
  ibv_send_wr* bad;
  ASSERT_EQ(real->postSend(p.qa, &wr, &bad), 0);
  ibv_wc wc;
  ASSERT_TRUE(pollOne(p.b.cq, &wc, 5000, *real));
  EXPECT_EQ(wc.wr_id, 5u);
  ASSERT_TRUE(pollOne(p.a.cq, &wc, 5000, *real));
  EXPECT_EQ(wc.wr_id, 6u);
  EXPECT_STREQ(real->wcStatusStr(IBV_WC_REM_ACCESS_ERR), V().wcStatusStr(IBV_WC_REM_ACCESS_ERR));
}

// ---- two processes ---------------------------------------------------------------------------

constexpr const char* kPeerFdEnv = "COLIBRI_VERBS_EMU_TEST_PEER_FD";
constexpr size_t kXferBytes = 300007;  // several packets

using clb::test::readAll;
using clb::test::writeAll;

// Both processes run this: exchange connection info, receive the peer's write with immediate,
// answer with one of their own. `first` writes first.
void exchangeAndTransfer(int fd, bool first) {
  std::vector<char> mine = pattern(kXferBytes, first ? 11 : 22), inbox(kXferBytes, 0);
  Host h;
  ASSERT_NO_FATAL_FAILURE(h.open());
  ibv_qp* q = h.qp();
  ASSERT_NE(q, nullptr);
  ibv_mr* sm = h.reg(mine.data(), mine.size());
  ibv_mr* rm = h.reg(inbox.data(), inbox.size());
  ConnInfo me = h.info(q, first ? 0x1000 : 0x2000);
  me.addr = (uintptr_t)inbox.data();
  me.rkey = rm->rkey;
  ConnInfo peer;
  ASSERT_TRUE(writeAll(fd, &me, sizeof me));
  ASSERT_TRUE(readAll(fd, &peer, sizeof peer)) << "no connection info from the peer process";
  EXPECT_NE(memcmp(&peer.gid, &me.gid, sizeof me.gid), 0) << "GIDs differ across processes";
  Opts o;
  o.mtu = (ibv_mtu)std::min(me.mtu, peer.mtu);
  ASSERT_EQ(toInit(q, kRw), 0);
  ASSERT_EQ(postRecv(q, 1), 0);
  ibv_qp_attr r = rtrAttr(peer, o);
  ASSERT_EQ(V().modifyQp(q, &r, kRtrMask), 0);
  ibv_qp_attr s = rtsAttr(me.psn, o);
  ASSERT_EQ(V().modifyQp(q, &s, kRtsMask), 0);
  char ready = 'r', peerReady = 0;
  ASSERT_TRUE(writeAll(fd, &ready, 1));
  ASSERT_TRUE(readAll(fd, &peerReady, 1));
  ibv_wc wc;
  auto send = [&] {
    ASSERT_EQ(postWrite(q, 2, mine.data(), mine.size(), sm->lkey, peer.addr, peer.rkey, IBV_WR_RDMA_WRITE_WITH_IMM,
                        first ? 0x11110000u : 0x22220000u),
              0);
    ASSERT_TRUE(pollOne(h.cq, &wc, 10000));
    EXPECT_EQ(wc.wr_id, 2u);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << V().wcStatusStr(wc.status);
  };
  auto receive = [&] {
    ASSERT_TRUE(pollOne(h.cq, &wc, 10000));
    EXPECT_EQ(wc.wr_id, 1u);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << V().wcStatusStr(wc.status);
    EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_EQ(wc.byte_len, kXferBytes);
    EXPECT_EQ(ntohl(wc.imm_data), first ? 0x22220000u : 0x11110000u);
    std::vector<char> expect = pattern(kXferBytes, first ? 22 : 11);
    EXPECT_EQ(firstDiff(inbox.data(), expect.data(), kXferBytes), -1);
  };
  if (first) {
    ASSERT_NO_FATAL_FAILURE(send());
    ASSERT_NO_FATAL_FAILURE(receive());
  } else {
    ASSERT_NO_FATAL_FAILURE(receive());
    ASSERT_NO_FATAL_FAILURE(send());
  }
  char done = 'd', peerDone = 0;
  ASSERT_TRUE(writeAll(fd, &done, 1));
  ASSERT_TRUE(readAll(fd, &peerDone, 1)) << "the peer did not finish";
}

TEST_F(VerbsEmu, ProcessPeerSide) {
  const char* fdStr = getenv(kPeerFdEnv);
  if (!fdStr) GTEST_SKIP() << "runs only as the peer process of VerbsEmu.WriteWithImmAcrossProcesses";
  exchangeAndTransfer(atoi(fdStr), false);
}

TEST_F(VerbsEmu, WriteWithImmAcrossProcesses) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  fcntl(sv[0], F_SETFD, FD_CLOEXEC);
  const pid_t pid =
      clb::test::spawnSelf("VerbsEmu.ProcessPeerSide", {std::string(kPeerFdEnv) + "=" + std::to_string(sv[1])});
  ASSERT_GT(pid, 0);
  close(sv[1]);
  exchangeAndTransfer(sv[0], true);
  close(sv[0]);
  int status = 0;
  if (!clb::test::waitOrKill(pid, 15000, &status)) FAIL() << "the peer process did not exit";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the peer process's checks failed (its output is above)";
}

}  // namespace
