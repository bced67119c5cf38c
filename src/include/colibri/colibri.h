/*
 * Colibri — collective communication for GPU inference servers.
 * Public C ABI. Every function returns clbResult_t; on failure the calling thread's last-error
 * message (clbGetLastError) says what failed, where, and what to do about it.
 *
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
#ifndef COLIBRI_COLIBRI_H_
#define COLIBRI_COLIBRI_H_

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define CLB_API __attribute__((visibility("default")))
#else
#define CLB_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define CLB_VERSION_MAJOR 0
#define CLB_VERSION_MINOR 1
#define CLB_VERSION_PATCH 0
/* Encoded as major * 10000 + minor * 100 + patch. */
#define CLB_VERSION_CODE (CLB_VERSION_MAJOR * 10000 + CLB_VERSION_MINOR * 100 + CLB_VERSION_PATCH)

/* Version of the bootstrap wire protocol; ranks speaking different versions refuse each other.
 * 2: the hello carries the library, NVIDIA driver and NIC firmware versions (versionCheck).
 * 3: challenge-response handshakes (the secret never sent), tagged replies and bootstrap blocks.
 * 4: the rank table carries the settings every rank must share, compared at init.
 * 5: a third ring connection pair, the transport's data apart from the bootstrap's exchanges.
 * 6: failure notices between ranks that share no memory carry the failing rank's message; a
 *    split's exchange carries 240 bytes of a refusal's reason (160 before); the root notes to the
 *    joined ranks which ranks it still waits for.
 * 7: the root's reply is tagged over the table's SHA-256, not the table (hashed once, not per rank).
 * 8: the bootstrap's all-gather runs on a binomial tree (each rank dials its parent), not the ring.
 * 9: the root's reply carries the table's SHA-256 and the rows a rank connects with, not the whole
 *    table; the ranks gather the rest over the tree and check it against that hash. A shrink's
 *    lowest survivor answers the same way, with its verdict on every survivor's part. */
#define CLB_PROTOCOL_VERSION 9

typedef enum {
  clbSuccess = 0,
  clbInvalidArgument = 1, /* the caller passed something wrong; the message names it */
  clbInvalidUsage = 2,    /* a call in the wrong state (after close, after an error) */
  clbSystemError = 3,     /* an OS call failed; the message carries errno and the call */
  clbInternalError = 4,   /* a Colibri bug: please report the message */
  clbRemoteError = 5,     /* a peer failed, died, or disagreed (counts, collective) */
  clbTimeout = 6,         /* a peer did not answer within the configured timeout */
  clbAborted = 7,         /* clbCommAbort was called on this communicator or on a peer */
  clbAuthError = 8,       /* wrong secret or protocol version at bootstrap */
  clbUnsupported = 9,     /* the build or the machine lacks what was asked (GPU, RDMA...) */
  clbOutOfMemory = 10,    /* an allocation failed or would exceed the configured cap */
  clbNumResults = 11
} clbResult_t;

typedef enum {
  clbInt8 = 0,
  clbUint8 = 1,
  clbInt32 = 2,
  clbUint32 = 3,
  clbInt64 = 4,
  clbUint64 = 5,
  clbFloat16 = 6,
  clbBfloat16 = 7,
  clbFloat32 = 8,
  clbFloat64 = 9,
  clbNumTypes = 10
} clbDataType_t;

/* Reduction operations. The built-in ones are 0 .. clbNumOps - 1. clbRedOpCreatePreMulSum (below)
 * makes more, valid on one communicator only: their values are Colibri's own, clbNumOps + n, where n
 * counts the operations created in this process (so a live value names one operation of one
 * communicator, and a destroyed one is not handed out again before 2^31 - clbNumOps creations).
 * clbMaxRedOp is no operation: it makes the enum wide enough to hold every such value. */
typedef enum {
  clbSum = 0,
  clbProd = 1,
  clbMin = 2,
  clbMax = 3,
  clbAvg = 4,
  clbNumOps = 5,
  clbMaxRedOp = 0x7fffffff
} clbRedOp_t;

/* Where the scalar of a PreMulSum operation lies (NCCL's ncclScalarResidence_t, same values). */
typedef enum {
  clbScalarDevice = 0,       /* memory the GPU reads when each call runs, on the call's stream */
  clbScalarHostImmediate = 1 /* host memory, read once by clbRedOpCreatePreMulSum */
} clbScalarResidence_t;

/* Transport between ranks. Auto: shm between ranks on one host, socket otherwise. Verbs: RDMA
   through the verbs network plugin (libcolibri_verbs.so, which loads libibverbs at run time),
   ring only; never chosen by auto. */
typedef enum {
  clbTransportAuto = 0,
  clbTransportShm = 1,
  clbTransportSocket = 2,
  clbTransportVerbs = 3,
  clbNumTransports = 4
} clbTransport_t;

/* Algorithm of a collective. Auto picks by size (direct for small messages inside a host). */
typedef enum {
  clbAlgoAuto = 0,
  clbAlgoRing = 1,   /* ring reduce-scatter + all-gather, chunked and pipelined */
  clbAlgoDirect = 2, /* every rank reads its peers' inputs from shared memory, fixed order */
  clbAlgoNone = 3,   /* nothing moved: one rank, or count 0 */
  clbNumAlgos = 4
} clbAlgorithm_t;

typedef enum { clbLogOff = 0, clbLogError = 1, clbLogWarn = 2, clbLogInfo = 3, clbLogDebug = 4 } clbLogLevel_t;

/* What clbCommInitRank does when ranks report different versions (exchanged at bootstrap): the
 * Colibri library, the NVIDIA kernel driver (/proc/driver/nvidia/version) and the firmware of the
 * first RDMA NIC (/sys/class/infiniband/x/fw_ver). The strictest setting of any rank applies. */
typedef enum {
  clbVersionCheckWarn = 0,   /* every difference is a warning; init proceeds */
  clbVersionCheckStrict = 1, /* a different Colibri version fails init; driver and firmware warn */
  clbVersionCheckExact = 2,  /* any difference fails init: library, driver and NIC firmware */
  clbNumVersionChecks = 3
} clbVersionCheck_t;

#define CLB_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[CLB_UNIQUE_ID_BYTES];
} clbUniqueId;

/* Bytes of clbConfig_t.verbsDevice, the terminating NUL included (names up to 63 bytes). */
#define CLB_VERBS_DEVICE_BYTES 64

/*
 * Communicator options. Always start from clbConfigInit, which fills the documented defaults and
 * applies COLIBRI_* environment variables; then change fields. `size` lets later versions grow
 * the struct without breaking callers: new fields are only ever added at the end, and
 * clbCommInitRank also takes the struct of an earlier version (size 64, up to versionCheck; size
 * 144, up to verbsDevice; or size 152, up to verbsQpsPerConnection), filling the fields it lacks as
 * clbConfigInit would.
 */
typedef struct {
  size_t size;             /* sizeof(clbConfig_t), set by clbConfigInit */
  int transport;           /* clbTransport_t                       COLIBRI_TRANSPORT */
  int algorithm;           /* clbAlgorithm_t, forced for every call  COLIBRI_ALGORITHM */
  int logLevel;            /* clbLogLevel_t                        COLIBRI_LOG_LEVEL */
  int pipelineDepth;       /* chunks in flight per link (1..64)    COLIBRI_PIPELINE_DEPTH */
  int64_t chunkBytes;      /* ring chunk size (4 KiB..64 MiB)      COLIBRI_CHUNK_BYTES */
  int64_t directMaxBytes;  /* largest message on the direct path   COLIBRI_DIRECT_MAX_BYTES */
  int64_t stagingCapBytes; /* cap on staging memory per rank       COLIBRI_STAGING_CAP_BYTES */
  int64_t timeoutMs;       /* a peer silent this long is an error  COLIBRI_TIMEOUT_MS */
  int versionCheck;        /* clbVersionCheck_t                    COLIBRI_VERSION_CHECK */
  /* Transport verbs (RDMA); fields added after the first version of the struct (size 64). */
  int verbsPort;                            /* port of the device (1..255)          COLIBRI_VERBS_PORT */
  int verbsGidIndex;                        /* -1: RoCE v2 GID on Ethernet, 0 on IB COLIBRI_VERBS_GID_INDEX */
  int verbsTrafficClass;                    /* GRH traffic class (0..255)           COLIBRI_VERBS_TRAFFIC_CLASS */
  int verbsTimeout;                         /* local ACK timeout 4.096 us * 2^x (0..31) COLIBRI_VERBS_TIMEOUT */
  int verbsRetryCount;                      /* transport retries (0..7)             COLIBRI_VERBS_RETRY_COUNT */
  char verbsDevice[CLB_VERBS_DEVICE_BYTES]; /* NUL-terminated; "": first  COLIBRI_VERBS_DEVICE */
  /* Added after the second version of the struct (size 144, up to verbsDevice). */
  int verbsQpsPerConnection; /* RC queue pairs per link (1..8)       COLIBRI_VERBS_QPS_PER_CONNECTION */
  /* Added after the third version of the struct (size 152, up to verbsQpsPerConnection): the
   * device path's settings (docs/device.md) and how device buffers between hosts reach the NIC.
   * The words of a clbConfigSet value are in brackets, in the order of their codes. */
  int devicePath;               /* [auto ll staged direct]              COLIBRI_DEVICE_PATH */
  int deviceLaunch;             /* [auto graph kernel]                  COLIBRI_DEVICE_LAUNCH */
  int deviceGate;               /* [auto on off]                        COLIBRI_DEVICE_GATE */
  int deviceMeet;               /* [off on]                             COLIBRI_DEVICE_MEET */
  int deviceP2P;                /* [off auto]                           COLIBRI_DEVICE_P2P */
  int deviceP2PInPlace;         /* [off on]                             COLIBRI_DEVICE_P2P_IN_PLACE */
  int deviceCheckCalls;         /* 1: every device call compared across ranks (0..1) COLIBRI_DEVICE_CHECK_CALLS */
  int stuckWarnPercent;         /* a wait this share of the timeout warns (0..99) COLIBRI_STUCK_WARN_PERCENT */
  int verbsGpuMemory;           /* [auto dmabuf peermem host]           COLIBRI_VERBS_GPU_MEMORY */
  int64_t deviceLLMaxBytes;     /* LL up to this per destination (-1: auto, 0..1 MiB) COLIBRI_DEVICE_LL_MAX_BYTES */
  int64_t deviceDirectMinBytes; /* direct paths from this size (0: auto)  COLIBRI_DEVICE_DIRECT_MIN_BYTES */
} clbConfig_t;

#define CLB_DEFAULT_PIPELINE_DEPTH 4
#define CLB_DEFAULT_CHUNK_BYTES (256 * 1024)
#define CLB_DEFAULT_DIRECT_MAX_BYTES (64 * 1024)
#define CLB_DEFAULT_STAGING_CAP_BYTES (64 * 1024 * 1024)
#define CLB_DEFAULT_TIMEOUT_MS 60000
#define CLB_DEFAULT_VERSION_CHECK clbVersionCheckStrict
#define CLB_DEFAULT_VERBS_PORT 1
#define CLB_DEFAULT_VERBS_GID_INDEX (-1)
#define CLB_DEFAULT_VERBS_TRAFFIC_CLASS 0
#define CLB_DEFAULT_VERBS_TIMEOUT 14
#define CLB_DEFAULT_VERBS_RETRY_COUNT 7
#define CLB_DEFAULT_VERBS_QPS_PER_CONNECTION 1
#define CLB_DEFAULT_STUCK_WARN_PERCENT 50

typedef struct {
  int64_t hostBytes;     /* host memory Colibri holds now (staging, control blocks) */
  int64_t hostPeakBytes; /* the most it ever held at once */
  int64_t deviceBytes;   /* device memory Colibri holds now */
  int64_t devicePeakBytes;
} clbMemStats_t;

typedef struct clbComm* clbComm_t;

/* ---- errors and version ---- */
CLB_API const char* clbGetErrorString(clbResult_t result);
/* The calling thread's message for its last failed call; "" after a call that succeeded (or
 * none). Valid until its next call. */
CLB_API const char* clbGetLastError(void);
CLB_API clbResult_t clbGetVersion(int* version);

/* ---- logging ----
 * The core logs lines of a clbLogLevel_t level (error, warn, info, debug) for the whole process.
 * A line above the threshold costs one comparison: it is neither formatted nor delivered. The
 * threshold starts at COLIBRI_LOG_LEVEL (default warn); clbCommInitRank raises it to its config's
 * logLevel when that is more verbose, and clbSetLogLevel sets it at any time.
 *
 * Without a callback, lines go to stderr as "HH:MM:SS.mmm colibri LEVEL [pid N] message". With
 * one, they go to it instead, as the bare message (the caller's logger adds time and level):
 *  - it may run on any thread, the caller's and Colibri's own (the bootstrap root, the device
 *    watchdog), on several at once, and while Colibri holds internal locks: it must return soon
 *    and must not call Colibri. A line that Colibri emits on a thread that is inside the callback
 *    goes to stderr;
 *  - `message` is UTF-8, NUL-terminated, valid until the callback returns;
 *  - it must not throw or longjmp (a C++ exception is caught and the line is lost).
 * The installed callback and `user` are one pair. When clbSetLogCallback returns, the previous
 * callback has returned on every thread and is not called again: its `user` may be freed. NULL
 * goes back to stderr. Calling it from inside the callback is INVALID_USAGE. */
typedef void (*clbLogCallback_t)(int level, const char* message, void* user);
CLB_API clbResult_t clbSetLogCallback(clbLogCallback_t callback, void* user);
/* Sets the threshold (clbLogOff .. clbLogDebug): lines at `level` and below are emitted. */
CLB_API clbResult_t clbSetLogLevel(int level);
CLB_API clbResult_t clbGetLogLevel(int* level);

/* ---- configuration ---- */
/* Fills `config` with the defaults and the COLIBRI_* environment. `bytes` is the size of the
 * caller's clbConfig_t (the clbConfigInit macro passes it as compiled), so that a program built
 * against an earlier, smaller struct is never written past its end: it gets that version's
 * fields and size. */
CLB_API clbResult_t clbConfigInitSized(clbConfig_t* config, size_t bytes);
/* The exported function: the first version's 64-byte struct (what programs built before the
 * macro below pass). Calls written clbConfigInit(&c) go through the macro; bindings that do not
 * compile C (ctypes, JNA, Panama, a function pointer) must call clbConfigInitSized with the
 * struct's full size, or clbCommInitRank takes their struct as the first version and the fields
 * after versionCheck from the environment and defaults. */
CLB_API clbResult_t clbConfigInit(clbConfig_t* config);
#define clbConfigInit(config) clbConfigInitSized((config), sizeof(clbConfig_t))
/* Every field by name, as text: the names are the fields' (and io.colibri.Option's camel names),
 * the values what their COLIBRI_* variables take ("ll", "262144", "auto", "mlx5_0"; names of
 * words in any case). One table in the library lists them, with their variables, defaults and
 * ranges, for clbConfigInit, the checks of clbCommInitRank and these calls. clbConfigSet refuses
 * an unknown name or a value out of range with INVALID_ARGUMENT saying what is valid, and leaves
 * the field as it was. clbConfigGet writes the value NUL-terminated into buf (words as words,
 * -1 of deviceLLMaxBytes as "auto"); a buf too small is INVALID_ARGUMENT. `config` is a full
 * clbConfig_t (from clbConfigInit). clbConfigOptionName(i) is the i-th name, NULL past the last:
 * how a binding lists them. */
CLB_API clbResult_t clbConfigSet(clbConfig_t* config, const char* name, const char* value);
CLB_API clbResult_t clbConfigGet(const clbConfig_t* config, const char* name, char* buf, size_t bytes);
CLB_API const char* clbConfigOptionName(int i);
/* Parses a transport / algorithm name ("auto", "shm", "socket", "verbs"; "ring", "direct"). */
CLB_API clbResult_t clbTransportFromName(const char* name, int* transport);
CLB_API clbResult_t clbAlgorithmFromName(const char* name, int* algorithm);
CLB_API const char* clbAlgorithmName(int algorithm);
CLB_API const char* clbTransportName(int transport);
/* "warn", "strict", "exact" (clbVersionCheck_t), or "unknown". */
CLB_API const char* clbVersionCheckName(int versionCheck);

/* ---- unique id ----
 * clbGetUniqueId starts, in the calling process, the bootstrap root that the ranks meet at. The id
 * carries the root's address, a 128-bit random secret and the protocol version. The secret never
 * goes on the wire: every bootstrap connection proves it by challenge-response (HMAC-SHA256). The
 * root listens on the address it advertises (COLIBRI_BOOTSTRAP_HOST / COLIBRI_SOCKET_IFNAME, or
 * every interface with COLIBRI_BOOTSTRAP_BIND=any), serves one communicator, and stops when it has
 * formed, when none forms within COLIBRI_TIMEOUT_MS (default 60 s, counted again from each rank's
 * join with that rank's timeout), or at clbUniqueIdRelease. */
CLB_API clbResult_t clbGetUniqueId(clbUniqueId* id);
/* Id for a root that rank 0 of clbCommInitRank will open at host:port (torchrun style). The secret
 * is derived from `secret`, a passphrase every rank passes (NULL or empty: COLIBRI_BOOTSTRAP_SECRET). With
 * neither it is derived from host:port, which proves agreement, not secrecy (a warning says so). */
CLB_API clbResult_t clbUniqueIdFromAddress(const char* host, int port, const char* secret, clbUniqueId* id);
/* Stops the root of an id made by clbGetUniqueId in this process, closing its connections, if it
 * still runs (an id whose communicator is never made, or one to abandon): ranks still joining it
 * fail. Success also when the root already stopped, or runs elsewhere. */
CLB_API clbResult_t clbUniqueIdRelease(const clbUniqueId* id);
/* Human-readable summary (root address and version, never the secret). */
CLB_API clbResult_t clbUniqueIdDescribe(const clbUniqueId* id, char* buf, size_t bufBytes);

/* ---- communicator ---- */
/* The most ranks a communicator may have (also the bound on what the bootstrap accepts from the
 * wire). */
#define CLB_MAX_RANKS 65536
CLB_API clbResult_t clbCommInitRank(clbComm_t* comm, const clbUniqueId* id, int rank, int nranks,
                                    const clbConfig_t* config);
/* clbCommInitRank that another thread can stop (what NCCL's ncclCommAbort does to a non-blocking
 * init): once *abortFlag is non-zero, the call returns clbAborted within about 100 ms (its waits
 * look at the flag at least that often), having freed everything it made, and *comm stays NULL;
 * a flag set when the call begins stops it before it connects, and one set as it completes still
 * makes it clbAborted (the communicator made is destroyed, the peers told as of an abort). Set the
 * flag from the other thread with an atomic store (C11 atomic_store on an _Atomic int,
 * __atomic_store_n, C++ std::atomic_ref<int>); it is read only while the call runs. NULL: the
 * same as clbCommInitRank. The peers whose inits wait for this rank fail as they would if it had
 * never come (a timeout), or sooner where its connections close. */
CLB_API clbResult_t clbCommInitRankAbortable(clbComm_t* comm, const clbUniqueId* id, int rank, int nranks,
                                             const clbConfig_t* config, const int* abortFlag);
/* Splits comm into communicators of the ranks that pass the same color (NCCL's ncclCommSplit).
 * Collective: every rank of comm calls it. Ranks of one color >= 0 form a new communicator,
 * numbered by key (ties: by their rank in comm); a rank passing CLB_SPLIT_NOCOLOR takes part and
 * gets *newcomm = NULL. config NULL: the new communicator gets comm's configuration (as comm
 * resolved it at init). Each new communicator has bootstrap connections of its own, made without a
 * root from a table its members exchange over comm; its secret is derived from comm's, so nothing
 * secret crosses the network, and comm stays usable (the two are independent; destroy each). A bad color or config on
 * any rank fails the call on every rank, naming that rank; comm stays usable then too. One call at a time on comm, like
 * the collectives. */
#define CLB_SPLIT_NOCOLOR (-1)
CLB_API clbResult_t clbCommSplit(clbComm_t comm, int color, int key, const clbConfig_t* config, clbComm_t* newcomm);
/* This rank's part of a clbCommSplit of comm that the other ranks make, refused for a reason of the
 * caller's (a binding's check of its arguments, such as the NCCL drop-in's of ncclCommSplit's
 * config): every rank's split fails at once, naming this rank and `reason` (its first 200 bytes),
 * as for a bad color, instead of waiting for this rank until the timeout; comm stays usable.
 * Returns clbInvalidArgument with that message. A NULL or empty `reason` still refuses ("(no reason
 * given)"). */
CLB_API clbResult_t clbCommSplitRefuse(clbComm_t comm, const char* reason);
/* A new communicator of comm's ranks but the `nexcluded` ranks in `excluded` (NCCL's
 * ncclCommShrink): for going on after ranks died, or without some. Every rank not excluded calls
 * it, with the same list (any order, repeats allowed); excluded ranks do not (one that does gets
 * clbInvalidArgument at once) and need not be alive. The survivors keep their order (ranks are
 * renumbered 0.. in comm's order). They meet without the excluded ranks and without comm's ring:
 * each sends its part to the lowest survivor over a connection of its own, authenticated like the
 * ring's (comm's secret), which answers them all; so comm may have failed (a peer died) or have
 * been aborted. With CLB_SHRINK_ABORT, comm is aborted first (its calls in progress on other
 * threads end, as with clbCommAbort), as after a failure. Bad flags, a NULL newcomm or config on
 * one survivor, or lists that differ between survivors, fail the call on every survivor at once,
 * saying which; a survivor that does not call within comm's timeout, naming it. Every call counts
 * on every rank, refused or not, so the survivors retry together. config NULL: comm's configuration. The new
 * communicator is independent of comm: destroy each. One call at a time on comm, like the collectives. */
/* Stops every call on comm, here and, through the abort notice, on its peers (NCCL's
 * ncclCommRevoke): a call in progress on another thread returns, and every later call but
 * clbCommShrink, clbCommDestroy and the queries is refused with clbInvalidUsage saying it was
 * revoked. Not collective: any rank, any thread, at any time; a second revoke is refused. What a
 * survivor does when a peer died or stalls, before clbCommShrink. */
CLB_API clbResult_t clbCommRevoke(clbComm_t comm);
#define CLB_SHRINK_DEFAULT 0
#define CLB_SHRINK_ABORT 1
CLB_API clbResult_t clbCommShrink(clbComm_t comm, const int* excluded, int nexcluded, const clbConfig_t* config,
                                  clbComm_t* newcomm, int flags);
/* Growing a communicator (NCCL's ncclCommGetUniqueId and ncclCommGrow): new ranks join comm's
 * ranks in a new communicator, without the existing ranks initialising again from a unique id of
 * the application's.
 * clbCommGetUniqueId: on one rank of comm (the coordinator), an id for that: its root runs in the
 * calling process (as clbGetUniqueId's), its secret is derived from comm's and a fresh nonce, so
 * the other ranks of comm derive it too and never need its bytes; it serves one grow. Hand it to
 * the new ranks as any unique id. Not collective; refused on a revoked or failed communicator. Its
 * root stops when the grow has formed, at clbUniqueIdRelease, or when comm is destroyed.
 * clbCommGrow: every rank of comm calls it with comm, rank -1 and the new size nranks (> comm's);
 * the coordinator with the id, the others with id NULL (or the same id). Each new rank calls it
 * with comm NULL, the id and its rank, comm's size .. nranks-1. Existing ranks keep their numbers.
 * config NULL: comm's configuration on existing ranks, the defaults on new ones. A bad argument on
 * one existing rank (size, rank, an id not of comm, none or differing ids) fails the call on every
 * existing rank at once, naming it; the new ranks then wait until their timeout. A new rank that
 * does not come fails the others at the timeout, naming it. comm is not changed: destroy each.
 * One call at a time on comm, like the collectives. */
CLB_API clbResult_t clbCommGetUniqueId(clbComm_t comm, clbUniqueId* id);
CLB_API clbResult_t clbCommGrow(clbComm_t comm, int nranks, const clbUniqueId* id, int rank, const clbConfig_t* config,
                                clbComm_t* newcomm);
/* clbCommGrow that another thread can stop while it waits for the ranks to meet, as
 * clbCommInitRankAbortable stops an init: once *abortFlag is non-zero it returns clbAborted within
 * about 100 ms, *newcomm NULL. On an existing rank, clbCommAbort or clbCommRevoke of comm stops
 * clbCommGrow's wait alike. NULL: clbCommGrow. */
CLB_API clbResult_t clbCommGrowAbortable(clbComm_t comm, int nranks, const clbUniqueId* id, int rank,
                                         const clbConfig_t* config, clbComm_t* newcomm, const int* abortFlag);
/* Frees everything the communicator holds. Safe after an error or an abort. While another thread
 * is in a call on comm it frees nothing and returns clbInvalidUsage naming that call: make the call
 * return first (clbCommAbort does at once), then destroy. A second clbCommDestroy of the same
 * handle, and any call on a destroyed handle, returns clbInvalidArgument saying so and reads
 * nothing of it (the process keeps the set of communicators alive; a handle whose address a later
 * communicator got again names that one). */
CLB_API clbResult_t clbCommDestroy(clbComm_t comm);
/* Makes every blocked or later call on this communicator return clbAborted, tells peers, and may
 * be called from any thread while another thread is inside a collective. Destroy still needed. */
CLB_API clbResult_t clbCommAbort(clbComm_t comm);
/* Fails this communicator because this rank cannot go on with it: a call it refused on its own (a
 * binding's argument check, an application's), or any reason of the caller's. Every later call on
 * it fails at once (clbInvalidUsage, naming `reason`), and the peers are told at once, as when a
 * collective fails on this rank: their waits end, and their calls and clbCommGetAsyncError return
 * clbRemoteError naming this rank and `reason` (its first 400 bytes), instead of waiting for this
 * rank until their timeout. The first failure wins: on a communicator that failed already it
 * changes nothing. Any thread, also while another is in a call on it. Destroy still needed.
 * (Colibri's own calls do this by themselves for a refusal of their arguments: see clbAllReduce; a
 * binding refusing a call's arguments of its own uses clbCommRefuse.) */
CLB_API clbResult_t clbCommFail(clbComm_t comm, const char* reason);
/* A call that this rank refuses above the library, for a reason the library does not see (a
 * binding's check of its arguments): as for the refusals of Colibri's own calls, the communicator
 * fails and its peers are told at once, naming this rank, `call` ("allReduce", "send") and
 * `reason` (its first 400 bytes), for they make the call too and would wait for this rank's until
 * their timeout. `collective`: nonzero for a collective (all-reduce, broadcast, reduce,
 * reduce-scatter, all-gather, barrier), which takes its place among the collective calls, so a
 * peer still in the collective before it finishes that one. Returns clbInvalidArgument, the
 * refusal, whose message (clbGetLastError) is the one to report: the reason, and that the
 * communicator fails with it. While another thread is in a call on `comm` this changes nothing and
 * returns that usage refusal (clbInvalidUsage), as Colibri refuses a second thread's call whatever
 * its arguments; a communicator of one rank (no peers) goes on, and the message is the reason.
 * A NULL or empty `call` or `reason` still refuses ("call", "(no reason given)"), for the peers
 * would wait otherwise. On a suspended communicator it is the suspend's usage refusal, changing
 * nothing. (clbCommFail fails the communicator whatever another thread is doing.) */
CLB_API clbResult_t clbCommRefuse(clbComm_t comm, const char* call, int collective, const char* reason);
/* What has gone wrong on this communicator without making a call, from any thread (NCCL's
 * ncclCommGetAsyncError): *asyncError is clbSuccess, or clbAborted (this rank or a peer aborted),
 * clbTimeout (a device wait of an earlier, asynchronous call ran out of time: its output is
 * undefined), clbRemoteError (a peer failed, or its process died) or the code of an earlier failure;
 * then clbGetLastError() says what happened and which call and ranks it concerns, and the
 * communicator must be destroyed. Returns clbInvalidArgument only for a NULL comm or asyncError.
 * Cheap (a few loads, one lock probe per peer process on this host): poll it after replaying a
 * CUDA graph, or from a health check. Any thread, also while a collective runs on another, but not
 * during or after clbCommDestroy of the same communicator. */
CLB_API clbResult_t clbCommGetAsyncError(clbComm_t comm, clbResult_t* asyncError);
CLB_API clbResult_t clbCommRank(clbComm_t comm, int* rank);
CLB_API clbResult_t clbCommCount(clbComm_t comm, int* nranks);
CLB_API clbResult_t clbCommMemStats(clbComm_t comm, clbMemStats_t* stats);
/* Gives back host staging memory not in use, and the scratch of PreMulSum calls (host memory, and
 * device memory that no CUDA graph capture used; see clbRedOpCreatePreMulSum). Local: peers need
 * not call it at the same time. Device buffers (peers write into them) stay until clbCommDestroy.
 * One call at a time, like the collectives (see there). */
CLB_API clbResult_t clbCommTrim(clbComm_t comm);
/* Gives back the memory the communicator's calls set up (NCCL's ncclCommSuspend): its device
 * memory (the device runtime's flags, LL and staging buffers, point-to-point on the GPU, the
 * scratch of PreMulSum and barriers) and its host staging, keeping its connections, so that a
 * server can lend the GPU's memory to other work between requests. Collective: every rank calls
 * it at the same point of its sequence of calls; it waits for this rank's device work and returns
 * once every rank has given its memory back. Refused on every rank, nothing given back anywhere
 * (clbInvalidUsage naming the rank and why), where a rank's calls were captured in a CUDA graph
 * (its replays would use that memory: destroy the communicator instead) or it holds registrations
 * (deregister them first). Until clbCommResume every call on it but the queries, clbCommTrim,
 * clbCommDestroy and clbCommAbort is refused with clbInvalidUsage, changing nothing, whatever its
 * arguments. A suspend this rank refuses for usage (suspended already, another thread in a call)
 * changes nothing either: the peers' suspends wait for it until their timeout, as for any call a
 * rank does not make. On a communicator that failed, here or on a peer whose notice came, it
 * returns that failure at once. What stays:
 * the connections and their host control blocks, and the GPU memory of point-to-point channels
 * between hosts. */
CLB_API clbResult_t clbCommSuspend(clbComm_t comm);
/* Ends clbCommSuspend on this rank: the next calls set up what they need again, as the first
 * calls did. Local (a peer's call waits for this rank's resume and call, as for any late rank);
 * call it on every rank. clbInvalidUsage where the communicator is not suspended. */
CLB_API clbResult_t clbCommResume(clbComm_t comm);
/* *suspended = 1 between clbCommSuspend and clbCommResume, else 0; any thread. */
CLB_API clbResult_t clbCommSuspended(clbComm_t comm, int* suspended);
/* Algorithm used by this rank's last collective on comm. */
CLB_API clbResult_t clbCommLastAlgorithm(clbComm_t comm, int* algorithm);
/* One line per fact: transport per link, algorithm thresholds, what was loaded. */
CLB_API clbResult_t clbCommInfo(clbComm_t comm, char* buf, size_t bufBytes);

/* ---- collectives ----
 * Argument order follows NCCL. `stream` is ignored for host buffers (pass NULL). In-place: pass
 * the same pointer for send and recv (for allGather: send = recv + rank * count; for
 * reduceScatter: recv = send + rank * recvCount).
 *
 * Threads: a communicator takes one call at a time. A collective, clbCommRegister,
 * clbCommDeregister, clbCommTrim or clbCommDestroy called while another thread is in one of them
 * on the same communicator returns clbInvalidUsage at once, with a message naming the call in
 * progress ("allReduce #5"), and touches nothing: the call in progress goes on and completes
 * normally, and the communicator stays usable. Give each thread its own communicator, or
 * serialize the calls. Any thread may call clbCommAbort, clbCommGetAsyncError, clbCommRank,
 * clbCommCount, clbCommMemStats and clbCommLastAlgorithm at any time, also during a call, but
 * not once clbCommDestroy has begun: it frees the communicator (the Java API waits for such
 * calls before it destroys).
 * A device call (on a stream, or captured in a CUDA graph) holds the communicator until it
 * returns (once its work is enqueued), not while that work runs on the GPU. The last-error
 * message is per thread: a refused call's message never replaces that of the call in progress.
 * Bad arguments (a type, op or root out of range, a NULL or wrapping buffer, buffers that overlap,
 * here and in every call below that peers take part in) are refused with clbInvalidArgument before
 * anything moves. Where the communicator has peers, such a refusal also fails it and tells the
 * peers at once (their matching calls would otherwise wait for this one until their timeout): they
 * fail with clbRemoteError naming this rank and its message. A refusal of usage (clbInvalidUsage:
 * another thread's call in progress, a capture) changes nothing. */
CLB_API clbResult_t clbAllReduce(const void* sendbuff, void* recvbuff, size_t count, clbDataType_t datatype,
                                 clbRedOp_t op, clbComm_t comm, void* stream);
CLB_API clbResult_t clbAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, clbDataType_t datatype,
                                 clbComm_t comm, void* stream);
CLB_API clbResult_t clbReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, clbDataType_t datatype,
                                     clbRedOp_t op, clbComm_t comm, void* stream);
CLB_API clbResult_t clbBroadcast(const void* sendbuff, void* recvbuff, size_t count, clbDataType_t datatype, int root,
                                 clbComm_t comm, void* stream);
/* Every rank of comm waits for every other (collective; one call like the others). stream NULL:
 * the call returns once every rank has entered it. A stream: the barrier is on the stream (work
 * queued after it on any rank starts once every rank's stream reached it), it can be captured
 * into a CUDA graph, and the call returns at once; the first such barrier, outside any capture,
 * allocates 4 bytes of device memory in the stream's context (counted in clbCommMemStats). It is
 * an all-reduce of one int32 underneath whose description no other call has: on host buffers a
 * rank in a barrier while another is in a collective gets the mismatch error that names both. */
CLB_API clbResult_t clbBarrier(clbComm_t comm, void* stream);

/* ---- point-to-point, and the calls made of it ----
 * A send and the receive it meets: count elements of datatype from this rank to rank peer. The
 * two ranks match their sends and receives to each other in the order they post them (per pair
 * and direction), and the pair must agree on count and type (a difference fails the receive,
 * naming both calls). Outside a group a call returns once its data moved (a send: once its buffer
 * may be reused); a receive whose send never comes ends in clbTimeout naming the peer. count 0 is
 * a no-op on both sides. A send to this rank itself (peer == rank) is copied to its receive,
 * which must be in the same group. Host buffers take stream NULL; device buffers take their
 * stream: between ranks of one process on one GPU the call enqueues a kernel and returns (it can
 * be captured in a CUDA graph once the pair made one device call outside a capture); otherwise it
 * goes through host memory in this version (the streams synchronized, the data copied out and back
 * before the call returns; refused inside a capture). Memory: per peer, and only for peers actually used, at the first
 * message (shm: pipelineDepth slots, each as large as the messages, at most chunkBytes), counted
 * in clbCommMemStats and capped by stagingCapBytes; clbCommTrim gives it back. */
CLB_API clbResult_t clbSend(const void* sendbuff, size_t count, clbDataType_t datatype, int peer, clbComm_t comm,
                            void* stream);
CLB_API clbResult_t clbRecv(void* recvbuff, size_t count, clbDataType_t datatype, int peer, clbComm_t comm,
                            void* stream);
/* Groups: between clbGroupStart and clbGroupEnd every call of this thread (sends, receives, the
 * calls below, collectives, barriers; on one communicator or several) is checked and recorded; the
 * outermost clbGroupEnd runs them and returns once all are done, so any order of sends and
 * receives inside a group completes (a ring exchange, an all-to-all made of sends and receives)
 * and one thread can drive several communicators (one per rank of a clique) in one group. Per
 * communicator the group's sends and receives run together, then its collectives in call order;
 * the communicators run side by side. Groups nest: only the outermost end runs anything. Buffers
 * must stay valid until the end. A call refused inside the group (a bad argument, of a collective
 * too) returns its error, and the end then runs nothing and returns that error too; a bad argument
 * fails every communicator of the group and tells their peers (see clbAllReduce). */
CLB_API clbResult_t clbGroupStart(void);
CLB_API clbResult_t clbGroupEnd(void);
/* Refuses the calling thread's group for a reason of the caller's (a binding's check of a call it
 * would have recorded in the group): its clbGroupEnd runs nothing and returns clbInvalidArgument
 * with `reason`, and the group's communicators with calls to other ranks fail, their peers told
 * `reason`, as for a call Colibri refuses inside a group. Returns clbInvalidArgument with
 * `reason`; clbInvalidUsage outside a group. The first refusal of a group is the one kept. */
CLB_API clbResult_t clbGroupRefuse(const char* reason);
/* Every rank sends count elements to every rank: block p of sendbuff (count elements at p x count)
 * goes to rank p, and block p of recvbuff comes from rank p. In place with sendbuff == recvbuff
 * (the input is first copied into the communicator's scratch, on the stream for device buffers);
 * otherwise send and recv must not overlap. */
CLB_API clbResult_t clbAllToAll(const void* sendbuff, void* recvbuff, size_t count, clbDataType_t datatype,
                                clbComm_t comm, void* stream);
/* As clbAllToAll with a count and a displacement (both in elements) per peer, host arrays of
 * nranks entries: sendcounts[p] elements at sendbuff + sdispls[p] go to rank p, recvcounts[p]
 * elements from rank p land at recvbuff + rdispls[p]. sendcounts[p] on this rank must equal
 * recvcounts[this rank] on rank p; a count may be 0 (nothing moves between those two). In place
 * with sendbuff == recvbuff and the same counts and displacements both ways; otherwise the two
 * buffers' extents must not overlap. */
CLB_API clbResult_t clbAllToAllv(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls, void* recvbuff,
                                 const size_t* recvcounts, const size_t* rdispls, clbDataType_t datatype,
                                 clbComm_t comm, void* stream);
/* Rank root gets the element-wise reduction of every rank's sendbuff (count elements) in recvbuff,
 * combined in rank order whatever the timing; recvbuff is only used at the root (in place there:
 * sendbuff == recvbuff). */
CLB_API clbResult_t clbReduce(const void* sendbuff, void* recvbuff, size_t count, clbDataType_t datatype, clbRedOp_t op,
                              int root, clbComm_t comm, void* stream);
/* Rank root gets every rank's count elements, rank p's at recvbuff + p x count (recvbuff only used
 * at the root; in place there: sendbuff == recvbuff + root x count). */
CLB_API clbResult_t clbGather(const void* sendbuff, void* recvbuff, size_t count, clbDataType_t datatype, int root,
                              clbComm_t comm, void* stream);
/* Rank p gets count elements from rank root's sendbuff + p x count (sendbuff only used at the
 * root; in place there: recvbuff == sendbuff + root x count). */
CLB_API clbResult_t clbScatter(const void* sendbuff, void* recvbuff, size_t count, clbDataType_t datatype, int root,
                               clbComm_t comm, void* stream);

CLB_API size_t clbTypeSize(clbDataType_t datatype);

/* ---- PreMulSum: a sum of scaled inputs (NCCL's ncclRedOpCreatePreMulSum) ----
 * Makes in *op a reduction operation for clbAllReduce, clbReduceScatter and clbReduce on comm
 * only: the result is the sum over the ranks r of scalar_r x input_r, element by element, where
 * each rank multiplies its own input by its own scalar before the sum (the ranks' scalars may
 * differ; every rank passes an operation of its own, made on its own communicator, to the same
 * call). The multiplication is that of the other operations: float16 and bfloat16 multiply in
 * float32 and round once to the element type, integers wrap around; the sum then follows the
 * contract of clbSum (docs/semantics.md), the scaled inputs taking the place of the inputs.
 *  - residence clbScalarHostImmediate: `scalar` points to one element of `datatype` in host memory,
 *    read now (the memory may be reused once clbRedOpCreatePreMulSum returns);
 *  - residence clbScalarDevice: `scalar` points to one element of `datatype` read when each call
 *    runs: for device buffers on the call's stream, by the GPU (device memory, or pinned host
 *    memory), so a call captured in a CUDA graph reads the value of each replay; for host buffers
 *    (stream NULL) when the call runs (host memory, or device memory, copied then).
 * A call with the operation must pass `datatype` as its type. The operation is valid until
 * clbRedOpDestroy(op, comm) or clbCommDestroy(comm); a call takes what it needs of it when it is
 * made (inside a group: when it is recorded), so the operation may be destroyed as soon as the
 * calls that use it have returned. Refused with clbInvalidArgument, naming the argument: another
 * communicator's operation, a destroyed one, a type that differs from the operation's, a NULL
 * scalar, an unknown type or residence. A rank in a PreMulSum call and a peer in a plain sum make
 * different calls (on host buffers the mismatch error names both). Any thread may create and
 * destroy operations, also while another thread is in a call on comm (not during or after
 * clbCommDestroy).
 *
 * How: each rank scales its input into memory of its own, then the call runs as a sum. allReduce
 * (and reduce's root, and one rank) scale straight into recvbuff when that is the call's only
 * output; reduceScatter and reduce's other ranks scale into a scratch buffer of the communicator
 * (the input's size: nranks x recvcount, or count elements), made at the first such call, reused,
 * counted in clbCommMemStats and given back by clbCommTrim and clbCommDestroy. Device buffers:
 * a scaling kernel on the call's stream before the collective's own (capturable in a CUDA graph);
 * the first such call of a communicator, and the first that needs more device scratch than it
 * holds, must come outside a capture (inside one they are refused with clbInvalidUsage saying so).
 * The device scratch is one per communicator, shared by its streams: a call on another stream
 * than the previous one waits on the GPU for the previous one's work to finish with it, as the
 * communicator's calls are ordered anyway; captured calls neither wait nor are waited for (their
 * replays are ordered by the application, as for every captured call), and device scratch that a
 * capture used stays until clbCommDestroy (clbCommTrim leaves it, since a graph may replay it). */
CLB_API clbResult_t clbRedOpCreatePreMulSum(clbRedOp_t* op, void* scalar, clbDataType_t datatype, int residence,
                                            clbComm_t comm);
/* Destroys an operation made by clbRedOpCreatePreMulSum on comm (NCCL's ncclRedOpDestroy). A
 * built-in operation, another communicator's operation or one already destroyed is refused with
 * clbInvalidArgument, naming op. */
CLB_API clbResult_t clbRedOpDestroy(clbRedOp_t op, clbComm_t comm);

/* ---- registered device buffers ----
 * Ranks in several processes read each other's registered buffers in place (CUDA IPC, zero copy)
 * instead of copying through staging; point-to-point between processes on one GPU writes a
 * message above 16 KiB straight into a registered receive buffer (the receive tells its sender
 * where over the host) instead of moving it in lines. Collective: every rank calls clbCommRegister (and later
 * clbCommDeregister) at the same point of its sequence of calls on comm, each with its own buffer
 * of any size. A device call uses zero copy when, on every rank, its buffers lie inside one live
 * registration; otherwise it is staged as before, so a missing registration costs speed, never
 * correctness. Memory must come from cudaMalloc, cuMemAlloc or clbDeviceAlloc (CUDA IPC cannot
 * export cudaMallocAsync pools or cuMemCreate). One mapping per peer allocation however many
 * registrations cover it. Freeing a registered buffer turns its registration off (the
 * allocation's ID changes); deregister before freeing to give the memory back at once. If any
 * rank's buffer cannot be registered, every rank gets an error and nothing is registered.
 * Sets up what a CUDA graph capture would need: register before capturing. */
CLB_API clbResult_t clbCommRegister(clbComm_t comm, void* buff, size_t bytes, void** handle);
/* Collective, like clbCommRegister. Waits for this rank's device work on comm to finish, closes
 * its mappings of the peers' buffers, and returns once every rank has. Refused on every rank at
 * once, nothing deregistered anywhere, when one rank's handle is NULL or not one of its
 * registrations (clbInvalidArgument), or when a CUDA graph that captured calls reading through
 * this registration still exists on one rank (clbInvalidUsage; ranks in several processes, whose
 * captured calls read the peers' buffers through its mappings): destroy the graph and its
 * instantiations, then deregister. Both take the communicator for one call at a time, like the
 * collectives. */
CLB_API clbResult_t clbCommDeregister(clbComm_t comm, void* handle);

/* ---- replaying CUDA graphs that hold calls ----
 * Launches the instantiated CUDA graph `graphExec` (CUgraphExec / cudaGraphExec_t) on `stream`
 * (cuGraphLaunch, in the calling thread's current context), for a graph that holds device calls
 * of the `ncomms` communicators in `comms`. Where other ranks of a communicator share this GPU
 * and this process (rank threads), those ranks meet first, as their eager calls do: each thread
 * launches once every one of them has arrived here, and returns once every one has launched. So
 * a thread that captures its graph lazily, or frees or allocates device memory between replays
 * (a context-wide synchronization), never holds a peer's replayed kernels: replay such graphs
 * through this call on every rank thread, naming the communicators in the same order on each
 * (docs/device.md). With no such ranks it is cuGraphLaunch. Takes each communicator for its
 * duration, like a collective; refused on a failed or aborted communicator. A rank thread that
 * replays while another makes an eager call on the same communicator is refused on both
 * (clbInvalidUsage naming both), and the communicator then cannot go on. */
CLB_API clbResult_t clbGraphLaunch(void* graphExec, void* stream, const clbComm_t* comms, int ncomms);

/* ---- device helpers ----
 * For callers without a CUDA binding of their own (the Java helpers in colibri-cuda use them).
 * Device buffers from any allocator (cudaMalloc, cuMemAlloc, PyTorch...) work with the
 * collectives; these are a convenience. Each makes the device's primary context current on the
 * calling thread. Without a GPU or driver they return clbUnsupported with the reason. */
CLB_API clbResult_t clbDeviceCount(int* count);
CLB_API clbResult_t clbDeviceAlloc(void** ptr, size_t bytes, int device);
CLB_API clbResult_t clbDeviceFree(void* ptr);
/* Copies between any host or device memory; with a stream the copy is asynchronous on it. */
CLB_API clbResult_t clbMemcpy(void* dst, const void* src, size_t bytes, void* stream);
CLB_API clbResult_t clbStreamCreate(void** stream, int device);
CLB_API clbResult_t clbStreamDestroy(void* stream);
CLB_API clbResult_t clbStreamSynchronize(void* stream);
/* Folder holding the kernel images (colibri_kernels_sm*.cubin, colibri_kernels.ptx), for the whole
 * process; default: COLIBRI_KERNEL_DIR, else the folder of libcolibri.so. */
CLB_API clbResult_t clbSetKernelDir(const char* dir);
/* Folder holding the network plugins (libcolibri_verbs.so, ...; colibri/net_plugin.h), for the
 * whole process; looked in first, then COLIBRI_PLUGIN_DIR, the folder of libcolibri.so and the
 * dynamic linker's path. A plugin already loaded stays. */
CLB_API clbResult_t clbSetPluginDir(const char* dir);

/* What the driver says about GPU `device` (0 .. clbDeviceCount - 1), for diagnostics (the perf
 * tool's `doctor`). Creates no context and allocates nothing on the GPU. */
typedef struct {
  char name[256];    /* e.g. "NVIDIA H200" */
  int major, minor;  /* compute capability */
  int driverVersion; /* cuDriverGetVersion: 1000 * major + 10 * minor of the CUDA the driver supports */
  char pciBusId[16]; /* domain:bus:device.function in hex, as under /sys/bus/pci/devices: "0000:1b:00.0" */
  char image[8];     /* kernel image device collectives load: "sm80", "sm90", ... (one per entry of
                        COLIBRI_KERNEL_ARCHS in src/CMakeLists.txt), or "ptx" (JIT-compiled by
                        the driver at the first device call) */
  int gpuDirectRdma; /* the driver supports GPUDirect RDMA for this GPU (nvidia-peermem): 1, 0, -1 unknown */
  int dmaBuf;        /* device memory can be exported as a dma-buf (for ibv_reg_dmabuf_mr): 1, 0, -1 unknown */
} clbDeviceInfo_t;
CLB_API clbResult_t clbDeviceInfo(int device, clbDeviceInfo_t* info);
/* Whether GPU `device` can map GPU `peer`'s memory (cuDeviceCanAccessPeer; 1 when they are the
 * same GPU). Ranks on GPUs without peer access run device collectives through host memory
 * (slower; docs/device.md). */
CLB_API clbResult_t clbDeviceCanAccessPeer(int device, int peer, int* canAccess);

#ifdef __cplusplus
}
#endif
#endif /* COLIBRI_COLIBRI_H_ */
