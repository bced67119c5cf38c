// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The verbs emulator's control path: device list, contexts, PDs, MRs (host memory and dma-buf),
// CQs and completion channels, the RC QP state machine of ibv_modify_qp, posting and polling.
// The wire and the NIC thread are in verbs_emu_nic.cc.
//
// What it models, as a transport on a real RC QP sees it (and what it does not):
//  - ibv_modify_qp: the transitions RESET→INIT→RTR→RTS, RTS→RTS, INIT→INIT, any→RESET and any→ERR
//    with the required and allowed attribute masks of RC; a missing required bit, a bit not allowed
//    for the transition, a transition that does not exist, or an invalid value (port, P_Key index,
//    access flags, path MTU above the port's active MTU, timer and retry fields, AV without GRH on
//    RoCE, GID index out of the table or empty) is EINVAL and changes nothing. PSNs and QP numbers
//    are taken modulo 2^24 as hardware does. SQD/SQE, alternate paths and path migration are not
//    modeled (EOPNOTSUPP for SQD/SQE; ALT_PATH/PATH_MIG_STATE masks are accepted and ignored).
//  - Posting: sends only in RTS (EINVAL in RESET/INIT/RTR; in ERR they complete with
//    IBV_WC_WR_FLUSH_ERR), receives from INIT on; too many SGEs or inline bytes is EINVAL; a full
//    queue is ENOMEM. Queue slots are freed when the completion is polled (an unsignaled WR's
//    slot stays used until a later signaled WR of the QP is polled), as on mlx5. RDMA READ and
//    atomics are not modeled (EOPNOTSUPP).
//  - Memory regions: lkey and rkey differ (a transport that sends its lkey as rkey fails here,
//    though it would pass on mlx5); REMOTE_WRITE/REMOTE_ATOMIC without LOCAL_WRITE is EINVAL;
//    ZERO_BASED and ON_DEMAND are EOPNOTSUPP; a byte limit stands in for RLIMIT_MEMLOCK (ENOMEM);
//    dma-buf regions are mapped with mmap (a memfd works); one whose fd cannot be mapped (a GPU
//    dma-buf) is reached through the copy function of setDeviceCopy() by its iova, and fails with
//    mmap's errno without one. A bad fd is EBADF; a range beyond the size the fd reports through
//    lseek(SEEK_END) (dma-bufs and memfds do) is EINVAL.
//  - CQs hold exactly `cqe` entries; one more is an overrun: the CQ stops taking completions,
//    pollCq returns -1 (errno EOVERFLOW) once drained, an IBV_EVENT_CQ_ERR is raised and the QPs
//    using it move to ERR, as on hardware.
#include <endian.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/config.h"
#include "base/error.h"
#include "tests/verbs_emu/verbs_emu_internal.h"

namespace clb {
namespace verbs {
namespace emu {
namespace {

std::mutex gCfgMu;
Config gCfg;
bool gCfgKnown = false;
std::atomic<uint64_t> gRegisteredBytes{0};
std::atomic<DeviceCopy> gDeviceCopy{nullptr};

ibv_device* emuDevice() {
  static ibv_device dev = [] {
    ibv_device d;
    memset(&d, 0, sizeof d);
    d.node_type = IBV_NODE_CA;
    d.transport_type = IBV_TRANSPORT_IB;
    snprintf(d.name, sizeof d.name, "colibri_emu0");
    snprintf(d.dev_name, sizeof d.dev_name, "uverbs_emu0");
    snprintf(d.dev_path, sizeof d.dev_path, "/sys/class/infiniband_verbs/uverbs_emu0");
    snprintf(d.ibdev_path, sizeof d.ibdev_path, "/sys/class/infiniband/colibri_emu0");
    return d;
  }();
  return &dev;
}

bool ours(ibv_context* c) { return c && c->device == emuDevice(); }
Ctx* ctxOf(ibv_context* c) { return reinterpret_cast<Ctx*>(c); }

// The open contexts, for liveQps.
std::mutex gCtxsMu;
std::set<Ctx*> gCtxs;
Qp* qpOf(ibv_qp* q) { return reinterpret_cast<Qp*>(q); }
Cq* cqOf(ibv_cq* q) { return reinterpret_cast<Cq*>(q); }
Pd* pdOf(ibv_pd* p) { return reinterpret_cast<Pd*>(p); }
Mr* mrOf(ibv_mr* m) { return reinterpret_cast<Mr*>(m); }
Channel* chOf(ibv_comp_channel* c) { return reinterpret_cast<Channel*>(c); }

template <typename T>
T* failNull(int err) {
  errno = err;
  return nullptr;
}

bool envUint(const char* name, uint64_t* out) {
  const char* v = getenv(name);
  if (!v || !*v) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || !end || *end) {
    CLB_WARN("verbs emulator: %s=%s is not a number; ignored", name, v);
    return false;
  }
  *out = x;
  return true;
}

// ---- device and context ---------------------------------------------------------------------

ibv_device** getDeviceList(int* num) {
  Config c = config();
  if (num) *num = 0;
  if (c.noKernelSupport) return failNull<ibv_device*>(ENOSYS);
  int n = c.numDevices > 0 ? 1 : 0;
  auto** l = static_cast<ibv_device**>(calloc(n + 1, sizeof(ibv_device*)));
  if (!l) return failNull<ibv_device*>(ENOMEM);
  if (n) l[0] = emuDevice();
  if (num) *num = n;
  return l;
}

void freeDeviceList(ibv_device** l) { free(l); }

const char* getDeviceName(ibv_device* d) { return d ? d->name : nullptr; }

int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int postRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
int pollCq(ibv_cq* cq, int n, ibv_wc* wc);
int reqNotifyCq(ibv_cq* cq, int solicitedOnly);

void freeMr(Ctx* c, Mr* m) {
  c->mrByLkey.erase(m->ibv.lkey);
  c->mrByRkey.erase(m->ibv.rkey);
  gRegisteredBytes -= m->length;
  if (m->mapBase) munmap(m->mapBase, m->mapLen);
  m->pd->refs--;
  delete m;
}

ibv_context* openDevice(ibv_device* d) {
  if (d != emuDevice()) return failNull<ibv_context>(ENODEV);
  auto* c = new Ctx;
  memset(&c->ibv, 0, sizeof c->ibv);
  c->ibv.device = d;
  c->ibv.cmd_fd = -1;
  c->ibv.num_comp_vectors = 1;
  pthread_mutex_init(&c->ibv.mutex, nullptr);
  c->ibv.ops.post_send = postSend;
  c->ibv.ops.post_recv = postRecv;
  c->ibv.ops.poll_cq = pollCq;
  c->ibv.ops.req_notify_cq = reqNotifyCq;
  c->cfg = config();
  c->portUp = !c->cfg.portDown;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    int e = errno;
    delete c;
    return failNull<ibv_context>(e);
  }
  c->ibv.async_fd = p[0];
  c->asyncWriteFd = p[1];
  int e = startNic(c);  // claims the node number, then builds the addresses, then runs
  if (e) {
    close(p[0]);
    close(p[1]);
    delete c;
    return failNull<ibv_context>(e);
  }
  std::lock_guard<std::mutex> lock(gCtxsMu);
  gCtxs.insert(c);
  return &c->ibv;
}

int closeDevice(ibv_context* ctx) {
  if (!ours(ctx)) return EINVAL;
  Ctx* c = ctxOf(ctx);
  {
    std::lock_guard<std::mutex> lock(gCtxsMu);
    gCtxs.erase(c);
  }
  stopNic(c);
  {
    std::lock_guard<std::mutex> lock(c->mu);
    for (auto& kv : c->qps) delete kv.second;
    c->qps.clear();
    std::vector<Mr*> mrs;
    for (auto& kv : c->mrByLkey) mrs.push_back(kv.second);
    for (Mr* m : mrs) freeMr(c, m);
    for (Cq* q : c->cqs) delete q;
    for (Channel* ch : c->channels) {
      close(ch->ibv.fd);
      close(ch->writeFd);
      delete ch;
    }
    for (Pd* p : c->pds) delete p;
  }
  close(c->ibv.async_fd);
  close(c->asyncWriteFd);
  delete c;
  return 0;
}

int queryDevice(ibv_context* ctx, ibv_device_attr* a) {
  if (!ours(ctx) || !a) return EINVAL;
  Ctx* c = ctxOf(ctx);
  memset(a, 0, sizeof *a);
  snprintf(a->fw_ver, sizeof a->fw_ver, "colibri-emu 1.0");
  a->node_guid = htobe64(c->guid);
  a->sys_image_guid = htobe64(c->guid);
  a->max_mr_size = 1ull << 46;
  a->page_size_cap = 0xfffff000ull;
  a->max_qp = 1 << 16;
  a->max_qp_wr = kMaxQpWr;
  a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT;
  a->max_sge = kMaxSge;
  a->max_sge_rd = kMaxSge;
  a->max_cq = 1 << 16;
  a->max_cqe = kMaxCqe;
  a->max_mr = 1 << 20;
  a->max_pd = 1 << 16;
  a->max_qp_rd_atom = kMaxRdAtom;
  a->max_res_rd_atom = kMaxRdAtom << 16;
  a->max_qp_init_rd_atom = kMaxRdAtom;
  a->atomic_cap = IBV_ATOMIC_NONE;
  a->max_pkeys = 1;
  a->local_ca_ack_delay = 16;
  a->phys_port_cnt = 1;
  return 0;
}

int queryPort(ibv_context* ctx, uint8_t port, ibv_port_attr* a) {
  if (!ours(ctx) || !a || port != 1) return EINVAL;
  Ctx* c = ctxOf(ctx);
  std::lock_guard<std::mutex> lock(c->mu);
  memset(a, 0, sizeof *a);
  bool ib = c->cfg.linkLayer == IBV_LINK_LAYER_INFINIBAND;
  a->state = c->portUp ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
  a->max_mtu = IBV_MTU_4096;
  a->active_mtu = c->cfg.activeMtu;
  a->gid_tbl_len = kGidTableLen;
  a->max_msg_sz = kMaxMsgSize;
  a->pkey_tbl_len = 1;
  a->lid = ib ? (uint16_t)c->node : 0;
  a->sm_lid = ib ? 1 : 0;
  a->max_vl_num = 1;
  a->subnet_timeout = ib ? 18 : 0;
  a->active_width = 2;                // 4x
  a->active_speed = 64;               // HDR
  a->phys_state = c->portUp ? 5 : 3;  // LinkUp : Disabled
  a->link_layer = c->cfg.linkLayer;
  return 0;
}

int queryGid(ibv_context* ctx, uint8_t port, int index, ibv_gid* gid) {
  if (!ours(ctx) || !gid || port != 1 || index < 0 || index >= kGidTableLen) return EINVAL;
  *gid = ctxOf(ctx)->gids[index];
  return 0;
}

int queryGidEx(ibv_context* ctx, uint32_t port, uint32_t index, ibv_gid_entry* e, uint32_t flags) {
  if (!ours(ctx) || !e || flags || port != 1 || index >= (uint32_t)kGidTableLen) return EINVAL;
  Ctx* c = ctxOf(ctx);
  if ((int)index >= c->gidCount) return ENODATA;
  memset(e, 0, sizeof *e);
  e->gid = c->gids[index];
  e->gid_index = index;
  e->port_num = port;
  e->gid_type = c->gidTypes[index];
  e->ndev_ifindex = c->cfg.linkLayer == IBV_LINK_LAYER_ETHERNET ? 1 : 0;
  return 0;
}

int getAsyncEvent(ibv_context* ctx, ibv_async_event* ev) {
  if (!ours(ctx) || !ev) {
    errno = EINVAL;
    return -1;
  }
  Ctx* c = ctxOf(ctx);
  char b;
  ssize_t n;
  do n = read(c->ibv.async_fd, &b, 1);
  while (n < 0 && errno == EINTR);
  if (n != 1) return -1;  // errno from read (EAGAIN on a non-blocking fd)
  std::lock_guard<std::mutex> lock(c->asyncMu);
  *ev = c->asyncQ.front();
  c->asyncQ.pop_front();
  return 0;
}

void ackAsyncEvent(ibv_async_event*) {}

// ---- protection domains and memory regions ---------------------------------------------------

ibv_pd* allocPd(ibv_context* ctx) {
  if (!ours(ctx)) return failNull<ibv_pd>(EINVAL);
  Ctx* c = ctxOf(ctx);
  auto* p = new Pd;
  memset(&p->ibv, 0, sizeof p->ibv);
  p->ibv.context = ctx;
  p->ctx = c;
  std::lock_guard<std::mutex> lock(c->mu);
  p->ibv.handle = (uint32_t)c->pds.size() + 1;
  c->pds.insert(p);
  return &p->ibv;
}

int deallocPd(ibv_pd* pd) {
  if (!pd || !ours(pd->context)) return EINVAL;
  Pd* p = pdOf(pd);
  Ctx* c = p->ctx;
  std::lock_guard<std::mutex> lock(c->mu);
  if (p->refs > 0) return EBUSY;
  c->pds.erase(p);
  delete p;
  return 0;
}

int checkMrAccess(int access) {
  if (access & ~(0xff | IBV_ACCESS_OPTIONAL_RANGE)) return EINVAL;
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE))
    return EINVAL;  // the verbs rule: remote write or atomic needs local write
  if (access & (IBV_ACCESS_ZERO_BASED | IBV_ACCESS_ON_DEMAND | IBV_ACCESS_MW_BIND)) return EOPNOTSUPP;
  return 0;
}

// Registers [iova, iova + length) backed by `host` (nullptr: a device region, reached through the
// DeviceCopy by iova); takes ownership of a dma-buf mapping.
ibv_mr* newMr(Pd* p, uint64_t iova, size_t length, char* host, int access, void* mapBase, size_t mapLen) {
  Ctx* c = p->ctx;
  std::lock_guard<std::mutex> lock(c->mu);
  if (c->cfg.memlockBytes && gRegisteredBytes + length > c->cfg.memlockBytes) {
    if (mapBase) munmap(mapBase, mapLen);
    return failNull<ibv_mr>(ENOMEM);
  }
  auto* m = new Mr;
  memset(&m->ibv, 0, sizeof m->ibv);
  uint32_t idx = ++c->keyCounter & 0xffffff;
  m->ibv.context = &c->ibv;
  m->ibv.pd = &p->ibv;
  m->ibv.addr = reinterpret_cast<void*>(iova);
  m->ibv.length = length;
  m->ibv.handle = idx;
  m->ibv.lkey = (idx << 8) | 0x0a;
  m->ibv.rkey = ((idx << 8) | 0xb0) ^ ((c->node * 0x9E3779B1u) & 0xffffff00u);
  m->pd = p;
  m->iova = iova;
  m->length = length;
  m->host = host;
  m->device = host == nullptr;
  m->access = access;
  m->mapBase = mapBase;
  m->mapLen = mapLen;
  gRegisteredBytes += length;
  p->refs++;
  c->mrByLkey[m->ibv.lkey] = m;
  c->mrByRkey[m->ibv.rkey] = m;
  return &m->ibv;
}

ibv_mr* regMr(ibv_pd* pd, void* addr, size_t length, int access) {
  if (!pd || !ours(pd->context)) return failNull<ibv_mr>(EINVAL);
  if (int e = checkMrAccess(access)) return failNull<ibv_mr>(e);
  if (length == 0) return failNull<ibv_mr>(EINVAL);
  if (!addr) return failNull<ibv_mr>(EFAULT);
  return newMr(pdOf(pd), (uintptr_t)addr, length, static_cast<char*>(addr), access, nullptr, 0);
}

ibv_mr* regDmabufMr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access) {
  if (!pd || !ours(pd->context)) return failNull<ibv_mr>(EINVAL);
  if (!pdOf(pd)->ctx->cfg.dmabufSupported) return failNull<ibv_mr>(EOPNOTSUPP);
  if (int e = checkMrAccess(access)) return failNull<ibv_mr>(e);
  if (length == 0 || fd < 0) return failNull<ibv_mr>(EINVAL);
  if (fcntl(fd, F_GETFD) < 0) return failNull<ibv_mr>(EBADF);
  // dma-bufs (and memfds) report their size through lseek(SEEK_END); a range beyond it would be
  // SIGBUS on first touch of a mapping, and the kernel refuses it for a real dma-buf. The file
  // position is put back (a dma-buf has none that matters: it only seeks to 0).
  off_t pos = lseek(fd, 0, SEEK_CUR);
  off_t size = lseek(fd, 0, SEEK_END);
  if (size >= 0) lseek(fd, pos >= 0 ? pos : 0, SEEK_SET);
  if (size > 0 && (length > (uint64_t)size || offset > (uint64_t)size - length)) return failNull<ibv_mr>(EINVAL);
  long page = sysconf(_SC_PAGESIZE);
  uint64_t aligned = offset / page * page;
  size_t mapLen = length + (offset - aligned);
  void* base = mmap(nullptr, mapLen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)aligned);
  if (base == MAP_FAILED) {
    int err = errno;
    // GPU dma-bufs cannot be mapped: the region is reached through the DeviceCopy by its iova,
    // which the caller made the memory's address (on a GPU host: the device pointer).
    if (!gDeviceCopy.load()) return failNull<ibv_mr>(err);
    return newMr(pdOf(pd), iova, length, nullptr, access, nullptr, 0);
  }
  return newMr(pdOf(pd), iova, length, static_cast<char*>(base) + (offset - aligned), access, base, mapLen);
}

int deregMr(ibv_mr* mr) {
  if (!mr || !ours(mr->context)) return EINVAL;
  Mr* m = mrOf(mr);
  Ctx* c = m->pd->ctx;
  std::lock_guard<std::mutex> lock(c->mu);
  freeMr(c, m);
  return 0;
}

// ---- completion queues ---------------------------------------------------------------------

ibv_comp_channel* createCompChannel(ibv_context* ctx) {
  if (!ours(ctx)) return failNull<ibv_comp_channel>(EINVAL);
  Ctx* c = ctxOf(ctx);
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return failNull<ibv_comp_channel>(errno);
  auto* ch = new Channel;
  memset(&ch->ibv, 0, sizeof ch->ibv);
  ch->ibv.context = ctx;
  ch->ibv.fd = p[0];
  ch->writeFd = p[1];
  ch->ctx = c;
  std::lock_guard<std::mutex> lock(c->mu);
  c->channels.insert(ch);
  return &ch->ibv;
}

int destroyCompChannel(ibv_comp_channel* channel) {
  if (!channel || !ours(channel->context)) return EINVAL;
  Channel* ch = chOf(channel);
  Ctx* c = ch->ctx;
  std::lock_guard<std::mutex> lock(c->mu);
  if (ch->ibv.refcnt > 0) return EBUSY;
  c->channels.erase(ch);
  close(ch->ibv.fd);
  close(ch->writeFd);
  delete ch;
  return 0;
}

ibv_cq* createCq(ibv_context* ctx, int cqe, void* cqContext, ibv_comp_channel* channel, int vector) {
  if (!ours(ctx)) return failNull<ibv_cq>(EINVAL);
  if (cqe < 1 || cqe > kMaxCqe) return failNull<ibv_cq>(EINVAL);
  if (channel && channel->context != ctx) return failNull<ibv_cq>(EINVAL);
  if (vector < 0 || vector >= ctx->num_comp_vectors) return failNull<ibv_cq>(EINVAL);
  Ctx* c = ctxOf(ctx);
  auto* q = new Cq;
  memset(&q->ibv, 0, sizeof q->ibv);
  q->ibv.context = ctx;
  q->ibv.channel = channel;
  q->ibv.cq_context = cqContext;
  q->ibv.cqe = cqe;
  q->ctx = c;
  q->channel = channel ? chOf(channel) : nullptr;
  q->depth = cqe;
  std::lock_guard<std::mutex> lock(c->mu);
  q->ibv.handle = (uint32_t)c->cqs.size() + 1;
  if (channel) channel->refcnt++;
  c->cqs.insert(q);
  return &q->ibv;
}

int destroyCq(ibv_cq* cq) {
  if (!cq || !ours(cq->context)) return EINVAL;
  Cq* q = cqOf(cq);
  Ctx* c = q->ctx;
  std::lock_guard<std::mutex> lock(c->mu);
  if (q->qpRefs > 0) return EBUSY;
  if (q->channel) {
    q->channel->ibv.refcnt--;
    std::lock_guard<std::mutex> chLock(q->channel->mu);
    auto& ev = q->channel->events;
    ev.erase(std::remove(ev.begin(), ev.end(), q), ev.end());
  }
  c->cqs.erase(q);
  delete q;
  return 0;
}

int reqNotifyCq(ibv_cq* cq, int) {
  Cq* q = cqOf(cq);
  std::lock_guard<std::mutex> lock(q->mu);
  q->armed = true;
  return 0;
}

int getCqEvent(ibv_comp_channel* channel, ibv_cq** cq, void** cqContext) {
  if (!channel || !ours(channel->context)) {
    errno = EINVAL;
    return -1;
  }
  Channel* ch = chOf(channel);
  char b;
  ssize_t n;
  do n = read(ch->ibv.fd, &b, 1);
  while (n < 0 && errno == EINTR);
  if (n != 1) return -1;
  std::lock_guard<std::mutex> lock(ch->mu);
  if (ch->events.empty()) {  // its CQ was destroyed meanwhile
    errno = EAGAIN;
    return -1;
  }
  Cq* q = ch->events.front();
  ch->events.pop_front();
  *cq = &q->ibv;
  if (cqContext) *cqContext = q->ibv.cq_context;
  return 0;
}

void ackCqEvents(ibv_cq* cq, unsigned int n) {
  Cq* q = cqOf(cq);
  std::lock_guard<std::mutex> lock(q->mu);
  q->ibv.comp_events_completed += n;
}

void releaseSlots(const Cqe& e) {
  if (!e.slots) return;
  if (e.send) {
    uint64_t want = e.seq + 1, cur = e.slots->sqReleased.load();
    while (cur < want && !e.slots->sqReleased.compare_exchange_weak(cur, want)) {
    }
  } else {
    e.slots->rqReleased++;
  }
}

int pollCq(ibv_cq* cq, int n, ibv_wc* wc) {
  if (n < 0 || (n > 0 && !wc)) return -1;
  Cq* q = cqOf(cq);
  std::lock_guard<std::mutex> lock(q->mu);
  int i = 0;
  while (i < n && !q->q.empty()) {
    Cqe& e = q->q.front();
    wc[i++] = e.wc;
    releaseSlots(e);
    q->q.pop_front();
  }
  if (i == 0 && q->overrun) {
    errno = EOVERFLOW;
    return -1;
  }
  return i;
}

// ---- queue pairs ---------------------------------------------------------------------------

uint32_t allocQpn(Ctx* c) {
  // The first 256 QPs of a node carry the node number (unique on the host); later ones are
  // unique within the node, which is all routing needs: packets go to (node, qpn).
  for (;;) {
    uint32_t n = c->qpCounter++;
    uint32_t qpn = n < 256 ? (c->node << 8) | n : 0xC00000 | ((n - 256) & 0x3fffff);
    if (!c->qps.count(qpn)) return qpn;
  }
}

ibv_qp* createQp(ibv_pd* pd, ibv_qp_init_attr* init) {
  if (!pd || !ours(pd->context) || !init) return failNull<ibv_qp>(EINVAL);
  if (init->qp_type != IBV_QPT_RC) return failNull<ibv_qp>(EOPNOTSUPP);  // only RC is modeled
  if (init->srq) return failNull<ibv_qp>(EOPNOTSUPP);
  if (!init->send_cq || !init->recv_cq || init->send_cq->context != pd->context ||
      init->recv_cq->context != pd->context)
    return failNull<ibv_qp>(EINVAL);
  const ibv_qp_cap& cap = init->cap;
  if (cap.max_send_wr > (uint32_t)kMaxQpWr || cap.max_recv_wr > (uint32_t)kMaxQpWr ||
      cap.max_send_sge > (uint32_t)kMaxSge || cap.max_recv_sge > (uint32_t)kMaxSge || cap.max_inline_data > kMaxInline)
    return failNull<ibv_qp>(EINVAL);
  Pd* p = pdOf(pd);
  Ctx* c = p->ctx;
  auto* q = new Qp;
  memset(&q->ibv, 0, sizeof q->ibv);
  std::lock_guard<std::mutex> lock(c->mu);
  q->ibv.context = pd->context;
  q->ibv.qp_context = init->qp_context;
  q->ibv.pd = pd;
  q->ibv.send_cq = init->send_cq;
  q->ibv.recv_cq = init->recv_cq;
  q->ibv.qp_num = allocQpn(c);
  q->ibv.handle = q->ibv.qp_num;
  q->ibv.state = IBV_QPS_RESET;
  q->ibv.qp_type = IBV_QPT_RC;
  q->ctx = c;
  q->pd = p;
  q->scq = cqOf(init->send_cq);
  q->rcq = cqOf(init->recv_cq);
  q->cap = cap;
  q->sigAll = init->sq_sig_all != 0;
  p->refs++;
  q->scq->qpRefs++;
  q->rcq->qpRefs++;
  c->qps[q->ibv.qp_num] = q;
  return &q->ibv;
}

int destroyQp(ibv_qp* qp) {
  if (!qp || !ours(qp->context)) return EINVAL;
  Qp* q = qpOf(qp);
  Ctx* c = q->ctx;
  std::lock_guard<std::mutex> lock(c->mu);
  c->qps.erase(q->ibv.qp_num);
  q->pd->refs--;
  q->scq->qpRefs--;
  q->rcq->qpRefs--;
  delete q;
  return 0;
}

// The attribute masks of ibv_modify_qp for RC: what each transition requires and allows.
bool rcTransition(ibv_qp_state cur, ibv_qp_state next, int* req, int* opt) {
  *req = *opt = 0;
  if (next == IBV_QPS_RESET || next == IBV_QPS_ERR) return true;
  if (cur == IBV_QPS_RESET && next == IBV_QPS_INIT) {
    *req = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    return true;
  }
  if (cur == IBV_QPS_INIT && next == IBV_QPS_INIT) {
    *opt = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    return true;
  }
  if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR) {
    *req = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
           IBV_QP_MIN_RNR_TIMER;
    *opt = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
    return true;
  }
  if (cur == IBV_QPS_RTR && next == IBV_QPS_RTS) {
    *req = IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    *opt = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE;
    return true;
  }
  if (cur == IBV_QPS_RTS && next == IBV_QPS_RTS) {
    *opt = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE | IBV_QP_MIN_RNR_TIMER;
    return true;
  }
  return false;
}

int checkAh(const Ctx* c, const ibv_ah_attr& ah) {
  if (ah.port_num != 1) return EINVAL;
  if (ah.sl > 15) return EINVAL;
  bool eth = c->cfg.linkLayer == IBV_LINK_LAYER_ETHERNET;
  if (eth && !ah.is_global) return EINVAL;  // RoCE carries a GRH on every packet
  if (ah.is_global) {
    if (ah.grh.sgid_index >= kGidTableLen || ah.grh.sgid_index >= c->gidCount) return EINVAL;
    static const ibv_gid zero = {};
    if (memcmp(&ah.grh.dgid, &zero, sizeof zero) == 0) return EINVAL;
  }
  return 0;
}

void resetQp(Qp* q) {
  q->sq.clear();
  q->rq.clear();
  q->slots = std::make_shared<Slots>();
  q->sqPosted = q->rqPosted = 0;
  q->nextSerial = q->una = q->sendPos = q->sentHigh = 0;
  q->recvInProgress = q->nakSeqSent = q->rnrWaiting = false;
}

int modifyQp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  if (!qp || !ours(qp->context) || !attr) return EINVAL;
  Qp* q = qpOf(qp);
  Ctx* c = q->ctx;
  std::lock_guard<std::mutex> lock(c->mu);
  const int known = (1 << 21) - 1;  // IBV_QP_STATE .. IBV_QP_DEST_QPN
  if (mask & ~known) return EINVAL;
  ibv_qp_state cur = q->state;
  if ((mask & IBV_QP_STATE) && (attr->qp_state < IBV_QPS_RESET || attr->qp_state > IBV_QPS_ERR)) return EINVAL;
  ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
  if (next == IBV_QPS_SQD || next == IBV_QPS_SQE) return EOPNOTSUPP;  // not modeled
  int req, opt;
  if (!rcTransition(cur, next, &req, &opt)) return EINVAL;
  if ((mask & req) != req) return EINVAL;
  if (mask & ~(req | opt | IBV_QP_STATE)) return EINVAL;
  if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur) return EINVAL;
  const unsigned qpAccess =
      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  if ((mask & IBV_QP_ACCESS_FLAGS) && (attr->qp_access_flags & ~qpAccess)) return EINVAL;
  if ((mask & IBV_QP_PKEY_INDEX) && attr->pkey_index >= 1) return EINVAL;
  if ((mask & IBV_QP_PORT) && attr->port_num != 1) return EINVAL;
  if (mask & IBV_QP_PATH_MTU) {
    int bytes = mtuBytes(attr->path_mtu);
    if (bytes == 0 || bytes > mtuBytes(c->cfg.activeMtu)) return EINVAL;
  }
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && attr->max_dest_rd_atomic > kMaxRdAtom) return EINVAL;
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && attr->max_rd_atomic > kMaxRdAtom) return EINVAL;
  if ((mask & IBV_QP_MIN_RNR_TIMER) && attr->min_rnr_timer > 31) return EINVAL;
  if ((mask & IBV_QP_TIMEOUT) && attr->timeout > 31) return EINVAL;
  if ((mask & IBV_QP_RETRY_CNT) && attr->retry_cnt > 7) return EINVAL;
  if ((mask & IBV_QP_RNR_RETRY) && attr->rnr_retry > 7) return EINVAL;
  if (mask & IBV_QP_AV)
    if (int e = checkAh(c, attr->ah_attr)) return e;

  // Valid: apply.
  if (mask & IBV_QP_ACCESS_FLAGS) q->access = attr->qp_access_flags;
  if (mask & IBV_QP_PKEY_INDEX) q->pkeyIndex = attr->pkey_index;
  if (mask & IBV_QP_PORT) q->port = attr->port_num;
  if (mask & IBV_QP_PATH_MTU) q->pmtu = attr->path_mtu;
  if (mask & IBV_QP_DEST_QPN) q->destQpn = attr->dest_qp_num & kPsnMask;
  if (mask & IBV_QP_RQ_PSN) q->rqPsn = attr->rq_psn & kPsnMask;
  if (mask & IBV_QP_SQ_PSN) q->sqPsn = attr->sq_psn & kPsnMask;
  if (mask & IBV_QP_AV) q->ah = attr->ah_attr;
  if (mask & IBV_QP_MIN_RNR_TIMER) q->minRnrTimer = attr->min_rnr_timer;
  if (mask & IBV_QP_TIMEOUT) q->timeout = attr->timeout;
  if (mask & IBV_QP_RETRY_CNT) q->retryCnt = attr->retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) q->rnrRetry = attr->rnr_retry;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) q->maxRdAtomic = attr->max_rd_atomic;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) q->maxDestRdAtomic = attr->max_dest_rd_atomic;

  if (next == IBV_QPS_RESET) {
    resetQp(q);
  } else if (next == IBV_QPS_ERR) {
    if (cur != IBV_QPS_ERR) qpError(q, IBV_WC_WR_FLUSH_ERR);
  } else if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR) {
    q->ePsn = q->rqPsn;
    q->nakSeqSent = q->recvInProgress = false;
  } else if (cur == IBV_QPS_RTR && next == IBV_QPS_RTS) {
    q->nextSerial = q->una = q->sendPos = q->sentHigh = 0;
    q->retriesLeft = q->retryCnt;
    q->rnrLeft = q->rnrRetry;
    q->rnrWaiting = false;
  }
  q->state = next;
  q->ibv.state = next;
  wakeNic(c);
  return 0;
}

int queryQp(ibv_qp* qp, ibv_qp_attr* attr, int, ibv_qp_init_attr* init) {
  if (!qp || !ours(qp->context) || !attr || !init) return EINVAL;
  Qp* q = qpOf(qp);
  std::lock_guard<std::mutex> lock(q->ctx->mu);
  memset(attr, 0, sizeof *attr);
  attr->qp_state = q->state;
  attr->cur_qp_state = q->state;
  attr->path_mtu = q->pmtu;
  attr->path_mig_state = IBV_MIG_MIGRATED;
  attr->rq_psn = q->rqPsn;
  attr->sq_psn = q->sqPsn;
  attr->dest_qp_num = q->destQpn;
  attr->qp_access_flags = q->access;
  attr->cap = q->cap;
  attr->ah_attr = q->ah;
  attr->pkey_index = q->pkeyIndex;
  attr->max_rd_atomic = q->maxRdAtomic;
  attr->max_dest_rd_atomic = q->maxDestRdAtomic;
  attr->min_rnr_timer = q->minRnrTimer;
  attr->port_num = q->port;
  attr->timeout = q->timeout;
  attr->retry_cnt = q->retryCnt;
  attr->rnr_retry = q->rnrRetry;
  memset(init, 0, sizeof *init);
  init->qp_context = q->ibv.qp_context;
  init->send_cq = q->ibv.send_cq;
  init->recv_cq = q->ibv.recv_cq;
  init->cap = q->cap;
  init->qp_type = IBV_QPT_RC;
  init->sq_sig_all = q->sigAll;
  return 0;
}

// ---- posting -------------------------------------------------------------------------------

int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  Qp* q = qpOf(qp);
  Ctx* c = q->ctx;
  int rc = 0;
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    for (; wr; wr = wr->next) {
      if (q->state != IBV_QPS_RTS && q->state != IBV_QPS_ERR)
        rc = EINVAL;
      else if (wr->opcode == IBV_WR_RDMA_READ || wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
               wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
        rc = EOPNOTSUPP;  // real on hardware, not modeled here
      else if (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM &&
               wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM)
        rc = EINVAL;
      else if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->cap.max_send_sge || (wr->num_sge && !wr->sg_list))
        rc = EINVAL;
      else if (q->sqPosted - q->slots->sqReleased.load() >= q->cap.max_send_wr)
        rc = ENOMEM;
      if (rc) break;
      SendWqe w;
      w.wrId = wr->wr_id;
      w.op = wr->opcode;
      w.signaled = q->sigAll || (wr->send_flags & IBV_SEND_SIGNALED);
      w.isInline = (wr->send_flags & IBV_SEND_INLINE) != 0;
      for (int i = 0; i < wr->num_sge; i++) w.len += wr->sg_list[i].length;
      if (w.isInline) {
        if (w.len > q->cap.max_inline_data) {
          rc = EINVAL;
          break;
        }
        for (int i = 0; i < wr->num_sge; i++) {
          const char* p = reinterpret_cast<const char*>((uintptr_t)wr->sg_list[i].addr);
          w.inlineData.insert(w.inlineData.end(), p, p + wr->sg_list[i].length);
        }
      } else {
        w.sges.assign(wr->sg_list, wr->sg_list + wr->num_sge);
      }
      w.remoteAddr = wr->wr.rdma.remote_addr;
      w.rkey = wr->wr.rdma.rkey;
      w.imm = wr->imm_data;
      w.nseg = w.len == 0 ? 1 : (w.len + kSegment - 1) / kSegment;
      w.seq = q->sqPosted++;
      if (q->state == IBV_QPS_ERR) {
        pushCqe(q->scq, baseWc(q, w.wrId, IBV_WC_WR_FLUSH_ERR, sendWcOpcode(w.op)), q->slots, true, w.seq);
        continue;
      }
      w.firstSerial = q->nextSerial;
      q->nextSerial += w.nseg;
      q->sq.push_back(std::move(w));
      queued = true;
    }
    if (rc && bad) *bad = wr;
  }
  if (queued) wakeNic(c);
  return rc;
}

int postRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  Qp* q = qpOf(qp);
  Ctx* c = q->ctx;
  int rc = 0;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    for (; wr; wr = wr->next) {
      if (q->state == IBV_QPS_RESET)
        rc = EINVAL;
      else if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->cap.max_recv_sge || (wr->num_sge && !wr->sg_list))
        rc = EINVAL;
      else if (q->rqPosted - q->slots->rqReleased.load() >= q->cap.max_recv_wr)
        rc = ENOMEM;
      if (rc) break;
      RecvWqe r;
      r.wrId = wr->wr_id;
      r.seq = q->rqPosted++;
      r.sges.assign(wr->sg_list, wr->sg_list + wr->num_sge);
      for (auto& s : r.sges) r.capacity += s.length;
      if (q->state == IBV_QPS_ERR) {
        pushCqe(q->rcq, baseWc(q, r.wrId, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV), q->slots, false, r.seq);
        continue;
      }
      q->rq.push_back(std::move(r));
    }
    if (rc && bad) *bad = wr;
  }
  // A receive may be what an RNR-waiting peer needs; nothing to do here: the peer retries.
  return rc;
}

VerbsApi makeTable() {
  VerbsApi t{};
  t.impl = "emulator";
  t.getDeviceList = getDeviceList;
  t.freeDeviceList = freeDeviceList;
  t.getDeviceName = getDeviceName;
  t.openDevice = openDevice;
  t.closeDevice = closeDevice;
  t.queryDevice = queryDevice;
  t.queryPort = queryPort;
  t.queryGid = queryGid;
  t.queryGidEx = queryGidEx;
  t.getAsyncEvent = getAsyncEvent;
  t.ackAsyncEvent = ackAsyncEvent;
  t.allocPd = allocPd;
  t.deallocPd = deallocPd;
  t.regMr = regMr;
  t.regDmabufMr = regDmabufMr;
  t.deregMr = deregMr;
  t.createCompChannel = createCompChannel;
  t.destroyCompChannel = destroyCompChannel;
  t.createCq = createCq;
  t.destroyCq = destroyCq;
  t.reqNotifyCq = reqNotifyCq;
  t.getCqEvent = getCqEvent;
  t.ackCqEvents = ackCqEvents;
  t.createQp = createQp;
  t.modifyQp = modifyQp;
  t.queryQp = queryQp;
  t.destroyQp = destroyQp;
  t.postSend = postSend;
  t.postRecv = postRecv;
  t.pollCq = pollCq;
  t.wcStatusStr = [](ibv_wc_status s) -> const char* {
    static const char* names[] = {"success",
                                  "local length error",
                                  "local QP operation error",
                                  "local EE context operation error",
                                  "local protection error",
                                  "Work Request Flushed Error",
                                  "memory management operation error",
                                  "bad response error",
                                  "local access error",
                                  "remote invalid request error",
                                  "remote access error",
                                  "remote operation error",
                                  "transport retry counter exceeded",
                                  "RNR retry counter exceeded",
                                  "local RDD violation error",
                                  "remote invalid RD request",
                                  "aborted error",
                                  "invalid EE context number",
                                  "invalid EE context state",
                                  "fatal error",
                                  "response timeout error",
                                  "general error"};
    unsigned i = (unsigned)s;
    return i < sizeof names / sizeof names[0] ? names[i] : "unknown";
  };
  return t;
}

}  // namespace

// ---- shared with the NIC -------------------------------------------------------------------

int mrRead(const Mr* m, uint64_t off, void* out, size_t n) {
  if (n == 0) return 0;
  if (!m->device) {
    memcpy(out, m->host + off, n);
    return 0;
  }
  DeviceCopy copy = gDeviceCopy.load();
  if (!copy) return EFAULT;  // cleared while the region is registered
  return copy(out, reinterpret_cast<const char*>(m->iova) + off, n);
}

int mrWrite(Mr* m, uint64_t off, const void* data, size_t n) {
  if (n == 0) return 0;
  if (!m->device) {
    memcpy(m->host + off, data, n);
    return 0;
  }
  DeviceCopy copy = gDeviceCopy.load();
  if (!copy) return EFAULT;
  return copy(reinterpret_cast<char*>(m->iova) + off, data, n);
}

void pushCqe(Cq* cq, const ibv_wc& wc, const std::shared_ptr<Slots>& slots, bool send, uint64_t seq) {
  std::lock_guard<std::mutex> lock(cq->mu);
  if (cq->overrun) return;
  if ((int)cq->q.size() >= cq->depth) {
    cq->overrun = true;
    // The NIC moves the CQ's QPs to ERR. Callers hold ctx->mu, so the NIC thread sees the flag
    // once they release it; waking it only writes the context's non-blocking eventfd (no lock,
    // nothing that could wait), which is safe under ctx->mu and cq->mu, and from the NIC thread
    // itself (its next ppoll returns at once).
    cq->ctx->overrunPending = true;
    wakeNic(cq->ctx);
    ibv_async_event ev;
    memset(&ev, 0, sizeof ev);
    ev.event_type = IBV_EVENT_CQ_ERR;
    ev.element.cq = &cq->ibv;
    raiseAsync(cq->ctx, ev);
    return;
  }
  Cqe e;
  e.wc = wc;
  e.slots = slots;
  e.send = send;
  e.seq = seq;
  cq->q.push_back(std::move(e));
  if (cq->armed && cq->channel) {
    cq->armed = false;
    std::lock_guard<std::mutex> chLock(cq->channel->mu);
    cq->channel->events.push_back(cq);
    char b = 1;
    if (write(cq->channel->writeFd, &b, 1) != 1) CLB_WARN("verbs emulator: completion channel write failed");
  }
}

void qpError(Qp* q, ibv_wc_status firstStatus) {
  q->state = IBV_QPS_ERR;
  q->ibv.state = IBV_QPS_ERR;
  bool first = firstStatus != IBV_WC_WR_FLUSH_ERR;
  for (auto& w : q->sq) {
    ibv_wc_status st = first ? firstStatus : IBV_WC_WR_FLUSH_ERR;
    pushCqe(q->scq, baseWc(q, w.wrId, st, sendWcOpcode(w.op)), q->slots, true, w.seq);
    first = false;
  }
  q->sq.clear();
  for (auto& r : q->rq) pushCqe(q->rcq, baseWc(q, r.wrId, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV), q->slots, false, r.seq);
  q->rq.clear();
  q->recvInProgress = false;
  q->rnrWaiting = false;
  q->una = q->sendPos = q->sentHigh = q->nextSerial;
}

void raiseAsync(Ctx* c, const ibv_async_event& ev) {
  std::lock_guard<std::mutex> lock(c->asyncMu);
  c->asyncQ.push_back(ev);
  char b = 1;
  if (write(c->asyncWriteFd, &b, 1) != 1) CLB_WARN("verbs emulator: async event write failed");
}

ibv_wc_opcode sendWcOpcode(ibv_wr_opcode op) {
  return (op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM) ? IBV_WC_SEND : IBV_WC_RDMA_WRITE;
}

Clock::duration ackTimeout(const Ctx* c, uint8_t timeout) {
  if (timeout == 0) return Clock::duration::zero();         // 0 means "wait forever" in the IB spec
  auto spec = std::chrono::nanoseconds(4096ll << timeout);  // 4.096 us * 2^timeout
  auto floor = std::chrono::milliseconds(c->cfg.minTimeoutMs);
  return std::max<Clock::duration>(spec, floor);
}

Clock::duration rnrDelay(uint8_t timer) {
  // The RNR NAK timer field (IB spec), in microseconds; 0 is the longest. Floored at 1 ms so a
  // queue pair waiting for a receive does not spin the emulator.
  static const uint32_t us[32] = {655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,   320,
                                  480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240, 15360,
                                  20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};
  return std::max<Clock::duration>(std::chrono::microseconds(us[timer & 31]), std::chrono::milliseconds(1));
}

uint32_t gidNode(const ibv_gid& g) {
  const uint8_t* r = g.raw;
  bool ll = r[0] == 0xfe && r[1] == 0x80;
  for (int i = 2; i < 8 && ll; i++) ll = r[i] == 0;
  if (ll) {
    uint64_t guid = 0;
    for (int i = 8; i < 16; i++) guid = (guid << 8) | r[i];
    uint32_t node = (uint32_t)(guid & 0xffffffffu);
    if ((guid & 0xffffffff00000000ull) == kGuidPrefix && node >= 1 && node <= kMaxNode) return node;
    return 0;
  }
  for (int i = 0; i < 10; i++)
    if (r[i]) return 0;
  if (r[10] != 0xff || r[11] != 0xff || r[12] != 10) return 0;
  uint32_t node = ((uint32_t)r[13] << 16) | ((uint32_t)r[14] << 8) | r[15];
  return node >= 1 && node <= kMaxNode ? node : 0;
}

uint32_t routeNode(const Qp* q) {
  if (q->ctx->cfg.linkLayer == IBV_LINK_LAYER_ETHERNET) return gidNode(q->ah.grh.dgid);
  return q->ah.dlid >= 1 && q->ah.dlid <= kMaxNode ? q->ah.dlid : 0;
}

void buildNodeAddresses(Ctx* c) {
  c->guid = kGuidPrefix | c->node;
  memset(c->gids, 0, sizeof c->gids);
  for (auto& t : c->gidTypes) t = IBV_GID_TYPE_IB;
  ibv_gid ll;
  memset(&ll, 0, sizeof ll);
  ll.raw[0] = 0xfe;
  ll.raw[1] = 0x80;
  for (int i = 0; i < 8; i++) ll.raw[8 + i] = (uint8_t)(c->guid >> (56 - 8 * i));
  if (c->cfg.linkLayer == IBV_LINK_LAYER_INFINIBAND) {
    c->gids[0] = ll;
    c->gidTypes[0] = IBV_GID_TYPE_IB;
    c->gidCount = 1;
  } else {
    ibv_gid v4;
    memset(&v4, 0, sizeof v4);
    v4.raw[10] = v4.raw[11] = 0xff;
    v4.raw[12] = 10;
    v4.raw[13] = (uint8_t)(c->node >> 16);
    v4.raw[14] = (uint8_t)(c->node >> 8);
    v4.raw[15] = (uint8_t)c->node;
    c->gids[0] = ll;
    c->gidTypes[0] = IBV_GID_TYPE_ROCE_V1;
    c->gidCount = 1;
    if (c->cfg.roceV2) {  // an IPv4 address on the interface gives the RoCE v2 GID
      c->gids[1] = v4;
      c->gidTypes[1] = IBV_GID_TYPE_ROCE_V2;
      c->gidCount = 2;
    }
  }
}

// ---- public API ----------------------------------------------------------------------------

const VerbsApi* api() {
  static const VerbsApi table = makeTable();
  return &table;
}

Config configFromEnv() {
  Config c;
  if (const char* v = getenv("COLIBRI_VERBS_EMU_LINK_LAYER")) {
    if (strcasecmp(v, "ib") == 0 || strcasecmp(v, "infiniband") == 0)
      c.linkLayer = IBV_LINK_LAYER_INFINIBAND;
    else if (strcasecmp(v, "eth") == 0 || strcasecmp(v, "ethernet") == 0 || strcasecmp(v, "roce") == 0)
      c.linkLayer = IBV_LINK_LAYER_ETHERNET;
    else
      CLB_WARN("verbs emulator: COLIBRI_VERBS_EMU_LINK_LAYER=%s is neither eth nor ib; using eth", v);
  }
  uint64_t x;
  if (envUint("COLIBRI_VERBS_EMU_MTU", &x)) {
    bool ok = false;
    for (int m = IBV_MTU_256; m <= IBV_MTU_4096; m++)
      if ((uint64_t)mtuBytes((ibv_mtu)m) == x) {
        c.activeMtu = (ibv_mtu)m;
        ok = true;
      }
    if (!ok)
      CLB_WARN("verbs emulator: COLIBRI_VERBS_EMU_MTU=%llu is not 256/512/1024/2048/4096; using 4096",
               (unsigned long long)x);
  }
  if (envUint("COLIBRI_VERBS_EMU_DEVICES", &x)) c.numDevices = x > 0 ? 1 : 0;
  c.noKernelSupport = envFlag("COLIBRI_VERBS_EMU_NO_KERNEL", false);
  c.dmabufSupported = envFlag("COLIBRI_VERBS_EMU_DMABUF", true);
  if (envUint("COLIBRI_VERBS_EMU_MEMLOCK_BYTES", &x)) c.memlockBytes = x;
  c.portDown = envFlag("COLIBRI_VERBS_EMU_PORT_DOWN", false);
  c.roceV2 = envFlag("COLIBRI_VERBS_EMU_ROCE_V2", true);
  if (envUint("COLIBRI_VERBS_EMU_DROP_EVERY", &x)) c.dropEvery = (uint32_t)x;
  if (envUint("COLIBRI_VERBS_EMU_MIN_TIMEOUT_MS", &x)) c.minTimeoutMs = (uint32_t)x;
  return c;
}

Config config() {
  std::lock_guard<std::mutex> lock(gCfgMu);
  if (!gCfgKnown) {
    gCfg = configFromEnv();
    gCfgKnown = true;
  }
  return gCfg;
}

void configure(const Config& cfg) {
  std::lock_guard<std::mutex> lock(gCfgMu);
  gCfg = cfg;
  gCfgKnown = true;
}

void resetConfig() {
  std::lock_guard<std::mutex> lock(gCfgMu);
  gCfgKnown = false;
}

void setDeviceCopy(DeviceCopy copy) { gDeviceCopy.store(copy); }

DeviceCopy deviceCopy() { return gDeviceCopy.load(); }

bool isEmulated(ibv_context* ctx) { return ours(ctx); }

uint32_t nodeId(ibv_context* ctx) { return ours(ctx) ? ctxOf(ctx)->node : 0; }

int setPortState(ibv_context* ctx, bool up) {
  if (!ours(ctx)) return EINVAL;
  Ctx* c = ctxOf(ctx);
  {
    std::lock_guard<std::mutex> lock(c->mu);
    if (c->portUp == up) return 0;
    c->portUp = up;
    ibv_async_event ev;
    memset(&ev, 0, sizeof ev);
    ev.event_type = up ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR;
    ev.element.port_num = 1;
    raiseAsync(c, ev);
  }
  wakeNic(c);
  return 0;
}

int dropPackets(ibv_qp* qp, int count) {
  if (!qp || !ours(qp->context)) return EINVAL;
  Qp* q = qpOf(qp);
  std::lock_guard<std::mutex> lock(q->ctx->mu);
  q->dropCount = count;
  return 0;
}

int liveQps(ibv_qp** out, int max) {
  std::lock_guard<std::mutex> lock(gCtxsMu);
  int n = 0;
  for (Ctx* c : gCtxs) {
    std::lock_guard<std::mutex> ctxLock(c->mu);
    for (auto& kv : c->qps) {
      if (out && n < max) out[n] = &kv.second->ibv;
      n++;
    }
  }
  return n;
}

int queryStats(ibv_qp* qp, QpStats* s) {
  if (!qp || !ours(qp->context) || !s) return EINVAL;
  Qp* q = qpOf(qp);
  std::lock_guard<std::mutex> lock(q->ctx->mu);
  *s = q->stats;
  return 0;
}

}  // namespace emu
}  // namespace verbs
}  // namespace clb
