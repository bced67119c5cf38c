/* Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 *
 * Colibri network plugins: a transport between hosts built as its own shared library (the verbs
 * transport is libcolibri_verbs.so) that libcolibri.so loads with dlopen when a communicator asks
 * for it. The contract is this header, in C: plain structs, function pointers, integers, opaque
 * handles. No C++ type crosses it (no std::string, no exception, no vtable), so the plugin and the
 * core may come from different compilers and standard libraries, and neither links the other.
 *
 * Versioning. A plugin exports one data symbol per interface version it implements, named
 * "clbNetPlugin_v<N>" (this header: clbNetPlugin_v1, of type clbNetPlugin_v1_t), whose `version`
 * field is N and `size` is sizeof(clbNetPlugin_v1_t) as the plugin was compiled. The core looks up
 * the newest name it knows, checks both fields and refuses a mismatch with a message naming the
 * library, the version found and the version needed. An interface change that is not a pure
 * addition at the end of a struct gets a new N (new struct names: clbNetPlugin_v2 ...); an old
 * core keeps loading new plugins that still export the old symbol.
 *
 * Results are clbResult_t values. On failure the plugin has already stated the reason
 * through clbNetCore_v1_t.setError, so the message lands in the calling thread's last error of the
 * core (clbGetLastError), exactly as if the core had failed itself.
 *
 * Threads. init is called once per process, under the core's lock. A channel is driven by one
 * thread at a time (the core serialises the calls of a communicator); different channels may be
 * driven concurrently.
 */
#ifndef COLIBRI_NET_PLUGIN_H_
#define COLIBRI_NET_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#include "colibri.h" /* clbResult_t, clbTransport_t, clbLogLevel_t */

#ifdef __cplusplus
extern "C" {
#endif

#define CLB_NET_PLUGIN_VERSION 1
#define CLB_NET_PLUGIN_SYMBOL_V1 "clbNetPlugin_v1"

/* ---- What the core gives the plugin ------------------------------------------------------ */

/* Process-wide services, valid for the life of the process (passed to init). */
typedef struct clbNetCore_v1_s {
  uint32_t version; /* CLB_NET_PLUGIN_VERSION of the core */
  uint32_t size;    /* sizeof(clbNetCore_v1_t) in the core */
  /* Sets the calling thread's last error (clbGetLastError) to `text` (copied); returns `result`. */
  clbResult_t (*setError)(clbResult_t result, const char* text);
  /* The calling thread's last error, valid until the thread's next core or plugin call. */
  const char* (*lastError)(void);
  /* Appends "  at file:line" to the thread's last error (the path a failure took). */
  void (*breadcrumb)(const char* file, int line);
  /* One log line at a clbLogLevel_t level, through the core's sink (stderr or clbSetLogCallback). */
  void (*log)(int level, const char* text);
  /* The process's log threshold now: nothing above it is printed, so skip formatting it. */
  int (*logLevel)(void);
} clbNetCore_v1_t;

/* Device memory for a channel in device mode (GPUDirect RDMA): the core allocates GPU memory and
 * exports it; the plugin registers it with its NIC. All calls return clbResult_t and set the
 * error through the core themselves. */
typedef struct clbNetUserRange_v1_s {
  void* base; /* page-aligned start of the registrable range */
  size_t bytes;
  uint64_t id; /* the allocation's identity: another id at the same base means freed and reused */
} clbNetUserRange_v1_t;

typedef struct clbNetDeviceMemory_v1_s {
  /* `bytes` (a multiple of 4 KiB) of page-aligned device memory at *mem; *dmabufFd a dma-buf of
   * exactly that range (the plugin closes it after registering) or -1: register the address. */
  clbResult_t (*alloc)(void* self, size_t bytes, void** mem, int* dmabufFd);
  void (*release)(void* self, void* mem, size_t bytes);
  void* self;
  const char* name; /* how it is registered, for messages: "dma-buf", "nvidia-peermem" */
  /* Optional (NULL: every message is copied into the plugin's staging): the registrable range
   * holding [p, p + len) (*found 0: none), and a dma-buf of such a range (*dmabufFd -1: the
   * address itself). */
  clbResult_t (*lookup)(void* self, const void* p, size_t len, clbNetUserRange_v1_t* range, int* found);
  clbResult_t (*exportRange)(void* self, void* base, size_t bytes, int* dmabufFd);
} clbNetDeviceMemory_v1_t;

/* One communicator's side of a connection, for connect(): valid during connect only (the plugin
 * copies what it keeps); `ctx` and the callbacks stay valid until the channel is destroyed. */
typedef struct clbNetHost_v1_s {
  uint32_t version;        /* CLB_NET_PLUGIN_VERSION */
  uint32_t size;           /* sizeof(clbNetHost_v1_t) in the core */
  void* ctx;               /* passed back to every callback */
  int rank, nranks;        /* this rank's place in the ring: it sends to rank+1, receives from rank-1 */
  int64_t timeoutMs;       /* how long a wait may last without progress (checkWait enforces it) */
  int64_t stagingCapBytes; /* cap on the bytes the channel may register */
  int slots;               /* messages in flight per link (the core's pipelineDepth, >= 2) */
  /* Bootstrap: every rank contributes `bytesPerRank` at buf + rank * bytesPerRank and receives
   * everyone's. Collective: every rank of the communicator calls it the same number of times. */
  clbResult_t (*allGather)(void* ctx, void* buf, size_t bytesPerRank);
  /* The slow path of every wait: abort, a peer that failed or died, the timeout. Non-zero ends
   * the wait with that result (the error is set). `startMs` on a CLOCK_MONOTONIC millisecond
   * clock; `peer` the rank waited for, or -1. Call it every few milliseconds of waiting. */
  clbResult_t (*checkWait)(void* ctx, int64_t startMs, const char* what, int peer);
  /* Memory the channel holds (registered regions, queues), counted in the communicator's
   * memoryStats: deltas in bytes. */
  void (*account)(void* ctx, int64_t hostDelta, int64_t deviceDelta);
  /* The communicator's (validated) option `name` as text into buf (NUL-terminated); returns 0,
   * or -1 for a name the core does not know. Names are the clbConfig_t field names (verbsDevice,
   * verbsPort, verbsGidIndex, verbsTrafficClass, verbsTimeout, verbsRetryCount,
   * verbsQpsPerConnection, ...); a plugin for another network asks for its own. */
  int (*option)(void* ctx, const char* name, char* buf, size_t len);
} clbNetHost_v1_t;

/* ---- What the plugin gives the core ------------------------------------------------------ */

/* The tag every ring message carries; the plugin moves it with the payload and gives it back to
 * the receiver, which compares it with what it expects. Only `bytes` (the payload length) means
 * anything to the plugin. */
#define CLB_NET_TAG_CALL_BYTES 40
typedef struct clbNetTag_v1_s {
  uint8_t call[CLB_NET_TAG_CALL_BYTES]; /* the collective, as the core describes it (opaque) */
  uint64_t index;                       /* message number within the collective */
  uint64_t bytes;                       /* payload bytes */
} clbNetTag_v1_t;

/* A connected channel: ordered messages to the next rank and from the previous one. */
typedef struct clbNetChannel_s* clbNetChannel;

typedef struct clbNetStats_v1_s {
  int64_t registeredBytes; /* host and device memory registered with the NIC now */
  uint64_t userRegs;       /* device mode: user allocations registered for sends without a copy */
  int64_t userRegBytes;
  uint64_t userRegHits;
} clbNetStats_v1_t;

/* What the network can do with GPU memory, for the core's GPUDirect choice. */
typedef struct clbNetDeviceSupport_v1_s {
  int dmabuf;  /* 1: the NIC library can register dma-bufs (ibv_reg_dmabuf_mr) */
  int peermem; /* 1: device addresses can be registered as they are (nvidia-peermem) */
} clbNetDeviceSupport_v1_t;

typedef struct clbNetPlugin_v1_s {
  uint32_t version;  /* CLB_NET_PLUGIN_VERSION: 1 */
  uint32_t size;     /* sizeof(clbNetPlugin_v1_t) */
  const char* name;  /* "verbs": also the transport name users ask for */
  int transport;     /* the clbTransport_t it provides (clbTransportVerbs) */
  const char* build; /* free text for logs: the plugin's version and build */

  /* Once per process before anything else. Non-zero: the plugin is unusable (error set). */
  clbResult_t (*init)(const clbNetCore_v1_t* core);

  /* Opens this rank's channel and connects it to its ring neighbours through host->allGather.
   * Collective: every rank calls it, and every rank fails if any does (a rank that fails still
   * takes part in the exchanges so that no rank waits). `device` NULL: host memory; else the
   * channel's slots and staging are GPU memory from it (GPUDirect RDMA), which must outlive the
   * channel. `describe` receives transportInfo's link line ("verbs: mlx5_0 port 1, ..."). */
  clbResult_t (*connect)(const clbNetHost_v1_t* host, const clbNetDeviceMemory_v1_t* device, clbNetChannel* out,
                         char* describe, size_t describeLen);
  /* Frees everything of the channel (no wait: call finish first when healthy). */
  void (*destroy)(clbNetChannel ch);

  /* The ring channel: the same contract as the core's RingChannel. prepare once per collective
   * before any message (staging for messages of up to maxBytes); acquireSend gives space for the
   * next outgoing message, valid until postSend; waitRecv the next incoming message and its tag,
   * valid until releaseRecv (in device mode buffers are device addresses); finish: everything
   * posted is on its way; trim: registered staging given back once the peer consumed what was
   * sent. sendFrom: the next message straight from `src` where the network can (*sent 1), else
   * *sent 0 and the core uses acquireSend. */
  clbResult_t (*prepare)(clbNetChannel ch, size_t maxBytes);
  clbResult_t (*acquireSend)(clbNetChannel ch, size_t bytes, void** buf);
  clbResult_t (*postSend)(clbNetChannel ch, const clbNetTag_v1_t* tag);
  clbResult_t (*waitRecv)(clbNetChannel ch, clbNetTag_v1_t* got, const void** buf);
  clbResult_t (*releaseRecv)(clbNetChannel ch);
  clbResult_t (*finish)(clbNetChannel ch);
  clbResult_t (*trim)(clbNetChannel ch);
  clbResult_t (*sendFrom)(clbNetChannel ch, const void* src, const clbNetTag_v1_t* tag, int* sent);
  clbResult_t (*stats)(clbNetChannel ch, clbNetStats_v1_t* out);

  /* Device buffers: what the network supports (no channel needed), and the text transportInfo
   * shows at init about them (NUL-terminated into buf). */
  clbResult_t (*deviceSupport)(clbNetDeviceSupport_v1_t* out);
  clbResult_t (*devicePlan)(char* buf, size_t len);

  /* ---- Point-to-point (added within version 1: a plugin whose `size` ends before peerOpen, or
   * whose peerOpen is NULL, has none, and the core sends point-to-point messages over TCP) ----
   * A channel between this rank and one `peer`: ordered messages both ways, host memory. peerOpen
   * opens it (the channels of one host->ctx may share a device) and writes this side's connection
   * info into info (at most *infoLen bytes; *infoLen receives the bytes written), which the core
   * hands to the peer by its own means. peerConnect takes the peer's info. peerStart is called
   * once the core knows the peer has connected too (nothing may reach the peer before that):
   * staging for messages of up to maxBytes, and from then on trySend, postSend, tryRecv and
   * releaseRecv work as for the ring, without blocking: trySend gives space for the next message
   * or *buf NULL when the peer has no free slot now, tryRecv the next message or *buf NULL when
   * none has arrived. destroy, stats as for the ring. */
  clbResult_t (*peerOpen)(const clbNetHost_v1_t* host, int peer, clbNetChannel* out, void* info, size_t* infoLen);
  clbResult_t (*peerConnect)(clbNetChannel ch, const void* info, size_t infoLen);
  clbResult_t (*peerStart)(clbNetChannel ch, size_t maxBytes);
  clbResult_t (*trySend)(clbNetChannel ch, size_t bytes, void** buf);
  clbResult_t (*tryRecv)(clbNetChannel ch, clbNetTag_v1_t* got, const void** buf);

  /* ---- Point-to-point in device mode (added within version 1: a plugin whose `size` ends before
   * it, or whose entry is NULL, has host-memory peer channels only) ----
   * peerOpen with the channel's slots and staging in GPU memory from `device` (GPUDirect RDMA),
   * which must outlive the channel: trySend and tryRecv then give device addresses (the core
   * copies in and out of them). Before it returns it proves that the GPU memory the channel will
   * hold for messages of up to `maxBytes` (what peerStart will be given) can be had and
   * registered, all of it at once, and gives it back (else fails, saying why), so that a rank
   * short of GPU memory or NIC-mappable space finds out while the pair can still choose host
   * memory. Both ends of a pair must open alike: the connection info says how, and peerConnect
   * refuses a peer that opened the other way; the core agrees on the way first. */
  clbResult_t (*peerOpenDevice)(const clbNetHost_v1_t* host, const clbNetDeviceMemory_v1_t* device, int peer,
                                size_t maxBytes, clbNetChannel* out, void* info, size_t* infoLen);
} clbNetPlugin_v1_t;

/* The size of a version-1 plugin table without point-to-point (the first release's). */
#define CLB_NET_PLUGIN_V1_BASE_SIZE offsetof(clbNetPlugin_v1_t, peerOpen)

#ifdef __cplusplus
}
#endif

#endif /* COLIBRI_NET_PLUGIN_H_ */
