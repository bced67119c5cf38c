// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Bootstrap: ranks meet at a root over TCP, prove the shared secret without sending it
// (bootstrap/handshake.h), check protocol versions, receive the table's hash and the rows they
// connect with, then connect into a ring of TCP connections (next / prev) for notices and, for the
// socket transport, the data path, and into a tree (each rank to its parent) that serves the
// bootstrap's own all-gather and barrier, each connection authenticated the same way; the table's
// rows are the tree's first all-gather.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "bootstrap/handshake.h"
#include "bootstrap/net.h"
#include "bootstrap/tls.h"

namespace clb {

constexpr uint32_t kIdMagic = 0x31424c43;  // "CLB1"

// The layout of clbUniqueId's 128 bytes.
struct IdData {
  uint32_t magic;
  uint32_t protocol;
  uint32_t flags;  // kIdRootAtRank0: rank 0 opens the root itself (torchrun style); TLS mode
                   // (bootstrap/tls.h) in bits kIdTlsShift..+1
  uint16_t family;
  uint16_t port;
  uint8_t addr[16];
  uint8_t secret[kSecretBytes];
  char host[64];  // as given by the user, for messages
  // An id of clbCommGetUniqueId (flag kIdGrow): its secret is derived from the parent's with this
  // nonce (which is not secret), for a communicator grown from one of `growFrom` ranks.
  uint64_t growNonce;
  uint32_t growFrom;
  uint8_t pad[4];
};
static_assert(sizeof(IdData) == CLB_UNIQUE_ID_BYTES, "IdData must fill clbUniqueId exactly");
constexpr uint32_t kIdRootAtRank0 = 1;
constexpr uint32_t kIdGrow = 2;
constexpr uint32_t kIdTlsShift = 8, kIdTlsMask = 3u << kIdTlsShift;
inline TlsMode idTlsMode(const IdData& id) { return (TlsMode)((id.flags & kIdTlsMask) >> kIdTlsShift); }
inline void setIdTlsMode(IdData* id, TlsMode m) {
  id->flags = (id->flags & ~kIdTlsMask) | ((uint32_t)m << kIdTlsShift);
}
// The TLS mode of an id made in this process: COLIBRI_TLS, checked (and its files loaded) now, so
// that a mistake shows where the id is made.
clbResult_t tlsModeForNewId(TlsMode* out);

// The versions a rank runs with, compared across ranks at init (bootstrap/versions.h). Text, NUL
// terminated; "none" where the machine has no such thing.
struct VersionInfo {
  char colibri[16];   // "0.1.0"
  char driver[32];    // NVIDIA kernel driver, "580.159.04"
  char firmware[64];  // first RDMA NIC's fw_ver, "28.39.1002"
  int32_t check;      // this rank's clbVersionCheck_t
  int32_t pad;
};

// The settings that every rank must share (docs/configuration.md, "Settings that must agree
// across ranks"), as this rank resolved them at init; compared across ranks on receipt of the
// table (bootstrap/agree.h). Fixed size, no padding left undefined.
struct AgreedSettings {
  int32_t transport;  // clbTransport_t as configured (auto is resolved with the table)
  int32_t algorithm;  // clbAlgorithm_t
  int32_t pipelineDepth;
  int32_t verbsQpsPerConnection;
  int64_t chunkBytes;
  int64_t directMaxBytes;
  int64_t stagingCapBytes;       // it caps the direct path's scratch, so it changes what auto picks
  int32_t reserved0;             // 0
  int32_t verbsGpuMemory;        // verbsGpuMemory (GpuMemorySetting, base/config.h)
  int32_t devicePath;            // devicePath (DevicePathSetting)
  int32_t deviceCheckCalls;      // deviceCheckCalls
  int64_t deviceLLMaxBytes;      // deviceLLMaxBytes (auto resolved)
  int64_t deviceDirectMinBytes;  // deviceDirectMinBytes
  int32_t settingsValid;         // 1: this rank's configuration was valid (0: it joined only to say not)
  int32_t reserved;              // 0
};
static_assert(sizeof(AgreedSettings) == 80, "AgreedSettings is part of the wire format");

// What each rank tells the others. Changing this layout needs a new CLB_PROTOCOL_VERSION.
struct RankInfo {
  int32_t rank;
  int32_t pid;
  uint64_t hostHash;  // equal on one host (hostname + boot id)
  uint16_t family;
  uint16_t port;  // this rank's ring listener
  uint8_t addr[16];
  char hostname[64];
  VersionInfo versions;
  // With pid, names the process on its host (pid alone does not: processes in different PID
  // namespaces, containers, may have the same pid). See processNamespaceId. 0 from a library
  // older than this field (it was padding), never the value of this process.
  uint32_t pidNamespace;
  AgreedSettings agreed;  // protocol 4
};
static_assert(sizeof(RankInfo) == 304 && offsetof(RankInfo, agreed) == 224, "RankInfo is the wire format");

// A rank's hello to the root, the body of its handshake (so its proof authenticates it). The
// root answers with a ReplyHeader, its message and, on success, the SHA-256 of the whole table and
// the rows the rank needs to connect (replyRows), then a tag over all of it. The rest of the table
// comes over the tree (protocol 9). Changing these needs a new CLB_PROTOCOL_VERSION.
struct HelloBody {
  int32_t rank;
  int32_t nranks;
  int64_t timeoutMs;  // the rank's; the root waits this long after each join for the rest
  RankInfo info;
};

struct ReplyHeader {
  uint32_t status;  // clbResult_t
  uint32_t msgBytes;
  uint32_t nranks;
  uint32_t flags;                  // kReplyAboutAnother: the refusal is of another rank (this one's call was fine)
  uint8_t session[kSessionBytes];  // names the communicator: binds the ring's handshakes to it
};
constexpr uint32_t kMaxReplyMessageBytes = 1024;
constexpr uint32_t kReplyAboutAnother = 1;
// Not the reply but a note before it (protocol 6): the root still waits for ranks, which the
// message names ("rank(s) 2 of 3"), then, after a newline, how they are started. The rank reads it
// and waits on for the reply.
constexpr uint32_t kReplyNote = 2;
uint64_t localHostHash();
// This process's PID namespace: the inode number of /proc/self/ns/pid, unique among the namespaces
// of a host (the pid in a RankInfo counts in it). Where that cannot be read, a random value made
// once per process (never 0): then no other process is taken for one in the same namespace.
uint32_t processNamespaceId();
SockAddr idAddress(const IdData& id);
// Rank `p`'s ring listener as its row gives it, and its name for messages (into name, bytes).
SockAddr listenerOf(const RankInfo& pi, int p, char* name, size_t bytes);
clbResult_t decodeId(const clbUniqueId* id, IdData* out);

// Starts the root listener and its thread (detached). It serves one communicator: it collects
// every rank's hello, answers each bad one with the reason, then sends everyone the table's hash
// and their rows (replyRows). It gives up (closing every connection, the thread ending) when no
// communicator forms within `waitMs`, counted again from each rank's join with that rank's
// timeout, or when released.
clbResult_t startRoot(const SockAddr& listenAddr, const IdData& id, int64_t waitMs, SockAddr* bound);
// Fills the address of *id (magic, protocol, flags and secret already set) with a root started
// in this process on this host's address (COLIBRI_SOCKET_IFNAME / COLIBRI_SOCKET_FAMILY), as
// clbGetUniqueId does.
clbResult_t startLocalRoot(IdData* id);
// Stops the root of `id` that runs in this process, if it still runs. clbSuccess either way.
void releaseRoot(const IdData& id);
// How many roots run in this process, and whether the root of `id` does (tests).
int runningRoots();
bool rootRuns(const IdData& id);
// What the root of `id` in this process refused so far ("" when none, or when it runs elsewhere).
std::string rootRefusals(const IdData& id);
// The ranks that never joined the root of `id` in this process ("rank(s) 1, 3 of 4"), or "" (none
// missing, or the root runs elsewhere).
std::string rootMissing(const IdData& id);
// Where a listener for `advertised` binds: that address, or every interface (0.0.0.0 / ::) when
// COLIBRI_BOOTSTRAP_BIND=any, or when `advertised` is a loopback address that a host name (not a
// literal) resolved to (Debian maps the host name to 127.0.1.1; other hosts reach it elsewhere).
SockAddr listenAddressFor(const SockAddr& advertised, const char* hostAsGiven = nullptr);

struct RingDial;  // one of a rank's ring connections being opened (bootstrap.cc)

// The bootstrap's exchange tree: binomial, rooted at rank 0, so that an all-gather takes about
// 2 log2 n hops where a ring takes n - 1, and no rank holds more than log2 n + 1 of its
// connections. Rank r's parent is r with its lowest set bit cleared; its subtree is the ranks
// [r, treeEnd(r, n)), contiguous, so a subtree's blocks travel as one piece.
inline int treeParent(int r) { return r & (r - 1); }
inline int treeEnd(int r, int n) { return r == 0 ? n : (int)std::min<int64_t>(n, (int64_t)r + (r & -r)); }
// The rows of the table in the root's reply to rank r (protocol 9), in this order: its own (as the
// root holds it), next's and its tree parent's (the ranks it dials), prev's (the rank that dials it
// on the ring, named in messages); rank 0, the tree's root, gets its own row in its parent's place.
// The root's work grows as n, not n x n: the ranks gather the rest of the table over the tree and
// check it against the root's SHA-256 of the whole.
constexpr int kReplyRows = 4;
inline std::array<int, kReplyRows> replyRows(int r, int n) { return {r, (r + 1) % n, treeParent(r), (r + n - 1) % n}; }
// The SHA-256 of `count` rows that a root or a shrink's lowest survivor sends beside the rows each
// rank connects with (zeros for no rows); checkGatheredTable compares the gathered table with it.
std::array<uint8_t, kSha256Bytes> tableDigest(const RankInfo* rows, size_t count);
// The check of a table gathered over the tree (`rank`: this rank, for messages): clbAuthError
// unless its SHA-256 is `rootDigest`, the one that `source` ("the root", "the lowest survivor")
// gave; clbRemoteError if a row names another rank.
clbResult_t checkGatheredTable(std::vector<RankInfo>* table, const std::array<uint8_t, kSha256Bytes>& rootDigest,
                               int rank, const char* source = "the root");
// Rank r's children, ascending (the smallest subtree first): r + 2^j below treeEnd(r, n).
std::vector<int> treeChildren(int r, int n);
// What a tree message about the subtree [from, to) carries, in bytes of an all-gather's buffer of n
// blocks of `bytes`: up, the subtree's blocks; down, those outside it, [0, from) then [to, n).
struct TreeSpan {
  size_t loBytes;   // from the buffer's start
  size_t hiOffset;  // where the second part starts
  size_t hiBytes;
  size_t total() const { return loBytes + hiBytes; }
};
inline TreeSpan treeSpan(bool up, int from, int to, int n, size_t bytes) {
  if (up) return {0, (size_t)from * bytes, (size_t)(to - from) * bytes};
  return {(size_t)from * bytes, (size_t)to * bytes, (size_t)(n - to) * bytes};
}

// A rank's connections, as a dial names them: to its tree parent (kRingChannelBootstrap), and to
// the next rank of the ring (nextCtl / dataNext).
enum RingLinkKind : int32_t {
  kRingChannelBootstrap = 0,
  kRingChannelNotices = 1,
  kRingChannelTransport = 2,
  kRingChannels = 3
};
inline Purpose ringPurpose(int channel) {
  return channel == kRingChannelNotices ? kPurposeRingNotices : kPurposeRingData;
}

class Bootstrap {
 public:
  Bootstrap() = default;
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  // `versions` and `agreed` (each may be NULL: all zero) go to every rank in the table, see
  // peers(). `checkTable` (may be empty) looks at the table as soon as it is whole (the ring and
  // tree connected, the rows gathered and checked against the root's hash): every rank gets the
  // same table, so a check that fails there fails on every rank at once, and init returns its
  // error.
  using TableCheck = std::function<clbResult_t(const std::vector<RankInfo>&)>;
  clbResult_t init(const IdData& id, int rank, int nranks, int64_t timeoutMs, const std::atomic<bool>* abort,
                   const VersionInfo* versions = nullptr, const AgreedSettings* agreed = nullptr,
                   const TableCheck& checkTable = {});
  // For members that already share an authenticated channel (clbCommSplit, over the parent's
  // bootstrap): no root. openListener opens this rank's ring listener and describes it (the
  // caller adds versions and agreed settings); the members exchange those RankInfos over their
  // channel; initWithTable then takes the table (child rank order) and the session every member
  // derived, checks the table and connects the ring, as init does after the root's reply.
  // `abort` may be switched later (setAbortFlag): a split connects under the parent's flag.
  void setAbortFlag(const std::atomic<bool>* abort) { abort_ = abort; }
  // prepareTable: the TLS contexts the id asks for, then openListener (so that a rank that cannot
  // says so in the exchange, before anyone connects).
  clbResult_t prepareTable(const IdData& id, int rank, RankInfo* info);
  clbResult_t openListener(int rank, RankInfo* info);
  // With `digest` (clbCommShrink's), `table` holds only the rows of this rank's replyRows (the
  // others with rank -1): the rest is gathered on the tree and checked against it, as after a
  // root's reply.
  clbResult_t initWithTable(const IdData& id, int rank, int nranks, int64_t timeoutMs, const std::atomic<bool>* abort,
                            const uint8_t session[kSessionBytes], std::vector<RankInfo> table,
                            const TableCheck& checkTable, const std::array<uint8_t, kSha256Bytes>* digest = nullptr);
  // Every rank contributes `bytes` at buf + rank * bytes; all ranks end with every block.
  clbResult_t allGather(void* buf, size_t bytes);
  clbResult_t barrier();
  void close();

  // Point-to-point connections (bootstrap/bootstrap_peers.cc), for transports whose ranks share no
  // memory. The ring listener stays open after init; the transport either closes it
  // (closeListener: shm, one rank) or starts a thread that answers the handshakes of the ranks
  // that dial this one (startPeerAcceptor), so that a dial never waits for this rank's calls.
  // Whichever rank of a pair needs the connection first dials; when both dial at once, the lower
  // rank's dial is the one kept (the higher one's is answered "duplicate" and it takes the lower
  // one's as it comes). peerLink: the connection with rank p, dialing it if this rank has not yet;
  // *out stays closed while the peer's dial is still to come (call again; acceptorFd is readable
  // when a connection came).
  void closeListener();
  clbResult_t startPeerAcceptor();
  // An exchange among `members` (ranks of this communicator, ascending, this rank among them)
  // that needs no other rank alive, nor the ring: each member dials the lowest member's ring
  // listener (kPurposeGather; `seq` names the exchange, so that a stale dial of an earlier one is
  // dropped) and sends its `bytes`. The lowest member judges every block (`judge`, the same on
  // every member; it runs there alone) and answers each member with the verdict: on success the
  // SHA-256 it gives (*digest) and the blocks of that member's replyRows (member indices), in
  // place in `out` (members.size() * bytes; the other blocks are left alone), a constant size per
  // member, so that the lowest member's work grows as n, not n x n; otherwise the verdict's error,
  // or which members did not come within the timeout. Each message is tagged with its
  // connection's handshake. Not under the abort flag (clbCommShrink runs it on a communicator that
  // was revoked).
  struct GatherVerdict {
    clbResult_t status = clbSuccess;
    std::string why;  // when status is not clbSuccess: the message every member's error gives
    std::array<uint8_t, kSha256Bytes> digest{};
  };
  using GatherJudge = std::function<GatherVerdict(const char* blocks, size_t count)>;
  clbResult_t gatherAmong(const std::vector<int>& members, uint32_t seq, const void* block, size_t bytes,
                          const GatherJudge& judge, void* out, std::array<uint8_t, kSha256Bytes>* digest);
  clbResult_t peerLink(int p, Link* out);
  int acceptorFd() const { return readyFd_; }
  void drainAcceptorFd();  // after poll() said it is readable (the next peerLink looks)

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  // The communicator's session, random per communicator (first 8 bytes of what the root sent).
  uint64_t sessionNonce() const { return nonce_; }
  const std::vector<RankInfo>& peers() const { return peers_; }
  // Whether rank p is this rank's process (threads of one process), or only in its PID namespace
  // (so that its pid means here what it means there). Equal pids alone say neither.
  bool inThisProcess(int p) const;
  bool inThisPidNamespace(int p) const;
  // The ring's two connection pairs with the neighbours, each with one reader and one writer: the
  // notices (abort, failure) that must not wait behind data, and the transport's data (the socket
  // ring channel). The bootstrap's own exchanges (allGather, barrier: those of init, split, the
  // device set-up and registrations, at any time between calls) run on the tree's connections.
  // The transport's channel reads ahead (a later call's message header waits in it), so it never
  // shares a connection with the bootstrap's exchanges.
  Link& nextCtl() { return nextCtl_; }
  Link& prevCtl() { return prevCtl_; }
  Link& dataNext() { return dataNext_; }
  Link& dataPrev() { return dataPrev_; }
  TlsMode tlsMode() const { return idTlsMode(id_); }
  // The id this communicator was made from (its secret included: never send it).
  const IdData& id() const { return id_; }
  int64_t timeoutMs() const { return timeoutMs_; }

 private:
  clbResult_t joinRoot(const SockAddr& root, int64_t deadline, const VersionInfo* versions,
                       const AgreedSettings* agreed, const TableCheck& checkTable);
  // The rest of a note (kReplyNote) whose header `rep` arrived: its message (checked against its
  // tag) into *note, and a WARN when it says something new.
  clbResult_t readNote(Link& link, const ReplyHeader& rep, const Transcript& t, int64_t deadline,
                       const std::string& rootName, std::string* note);
  clbResult_t connectRing();
  // The rest of the table after the root's reply (protocol 9): every rank's row gathered over the
  // tree, then checked against the root's hash of the whole table (`rootDigest`).
  clbResult_t gatherTable(const std::array<uint8_t, kSha256Bytes>& rootDigest, const char* source);
  // A rank that holds only its replyRows rows: connects its ring and tree with them, gathers the
  // rest (gatherTable) and runs checkTable on the whole, the same table on every rank.
  clbResult_t connectAndGather(const std::array<uint8_t, kSha256Bytes>& digest, const char* source,
                               const TableCheck& checkTable);
  // Rank p as messages name it: "rank p (host pid n)" when its row is here, else "rank p".
  std::string rowName(int p) const;
  clbResult_t setUpTls(const IdData& id, int rank);  // the TLS contexts the id's mode asks for
  void acceptRing(Authenticated* a);                 // a dial from prev (ring) or from a child (tree)
  clbResult_t stepDial(RingDial* d, bool ready, int64_t deadline);
  int rank_ = 0, nranks_ = 0;
  uint64_t nonce_ = 0;
  uint8_t session_[kSessionBytes] = {};
  // The tree's connections: to the parent (none on rank 0) and from each child (childRanks_'s
  // order), with their handshakes: the all-gather's blocks carry a tag keyed by them, numbered by
  // the exchange and naming their ranks, so a block cannot be forged, replayed or moved.
  Link up_;
  Transcript upT_{};
  std::vector<int> childRanks_;
  std::vector<Link> children_;
  std::vector<Transcript> childT_;
  uint64_t exchange_ = 0;  // the all-gathers so far (every rank counts alike)
  clbResult_t sendTree(Link& link, const Transcript& t, bool up, uint64_t ex, int from, int to, const char* b,
                       size_t bytes, int64_t deadline, const char* name);
  clbResult_t recvTree(Link& link, const Transcript& t, bool up, uint64_t ex, int from, int to, char* b, size_t bytes,
                       int64_t deadline, int peer, const char* name);
  int64_t timeoutMs_ = 0;
  const std::atomic<bool>* abort_ = nullptr;
  IdData id_{};
  int listenFd_ = -1;
  Link nextCtl_, prevCtl_, dataNext_, dataPrev_;
  // The ring connection of a ring channel (RingBody::channel): to next (`toNext`) or from prev.
  Link* ringLink(int channel, bool toNext) {
    if (channel == kRingChannelNotices) return toNext ? &nextCtl_ : &prevCtl_;
    return toNext ? &dataNext_ : &dataPrev_;
  }
  // The point-to-point acceptor: its thread, the eventfds that stop it and that say a connection
  // came, and the connections that came (per rank), under stashMutex_.
  void acceptPeers();
  void stopAcceptor();
  std::thread acceptor_;
  int stopFd_ = -1, readyFd_ = -1;
  std::mutex stashMutex_;
  // kOwn / kTheirs: the connection is taken, the one this rank dialed / the one p dialed.
  enum PeerState : uint8_t { kNoLink, kDialing, kAnswering, kAwaitingTheirs, kOwn, kTheirs };
  std::vector<Link> stash_;                // [p]: the connection p dialed, until taken
  std::vector<PeerState> peerState_;       // [p]: where this rank is with p's connection
  std::vector<Authenticated> earlyPeers_;  // point-to-point dials that came during connectRing
  void answerPeer(Authenticated* a, const char* where);
  // gatherAmong: the dials the lowest member's acceptor took, per rank (under stashMutex_).
  struct GatherDial {
    Link link;
    Transcript transcript{};
  };
  std::vector<GatherDial> gatherStash_;
  int64_t leading_ = -1;  // the gatherAmong this rank leads (its number), -1: none (under stashMutex_)
  clbResult_t dialGather(int lead, uint32_t seq, int64_t deadline, Link* out, Transcript* t);
  clbResult_t leadGather(const std::vector<int>& members, uint32_t seq, size_t bytes, const GatherJudge& judge,
                         char* all, std::array<uint8_t, kSha256Bytes>* digest, int64_t deadline);
  clbResult_t dialPeer(int p, Link* out, bool* duplicate);
  TlsContextRef rootTls_, ringTls_;  // set where COLIBRI_TLS covers those connections
  std::vector<RankInfo> peers_;
};

}  // namespace clb
