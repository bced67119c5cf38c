// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The C ABI of unique ids: making one (a fresh secret and a bootstrap root in this process, or an
// id for a root that rank 0 opens at a known address), releasing its root, describing it.
#include <arpa/inet.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "colibri/colibri.h"
#include "bootstrap/bootstrap.h"
#include "base/config.h"
#include "bootstrap/crypto.h"
#include "base/error.h"
#include "bootstrap/handshake.h"
#include "bootstrap/net.h"
#include "bootstrap/tls.h"

using namespace clb;

extern "C" {

static clbResult_t randomSecret(uint8_t* s) {
  if (!randomBytes(s, kSecretBytes)) return setSysError(errno, "getrandom() for the bootstrap secret failed");
  return clbSuccess;
}

// How long a root waits for its first rank: COLIBRI_TIMEOUT_MS when set (and valid), else the
// default timeout. Each rank that joins extends it by its own timeout.
static int64_t rootWaitMs() {
  clbConfig_t c;
  clbConfigInit(&c);
  int64_t ms = c.timeoutMs;
  if (const char* s = getenv("COLIBRI_TIMEOUT_MS"); s && *s) {
    char* end = nullptr;
    long long v = strtoll(s, &end, 10);
    if (!*end && v >= 1) ms = v;
  }
  return ms;
}

static void fillAddress(IdData* d, const SockAddr& a);

}  // extern "C"

clbResult_t clb::startLocalRoot(IdData* d) {
  SockAddr local;
  CLB_CHECK(localAddress(&local));
  SockAddr bound;
  fillAddress(d, local);  // port filled below
  d->port = 0;
  CLB_CHECK(startRoot(listenAddressFor(local), *d, rootWaitMs(), &bound));
  d->port = (uint16_t)bound.port();
  snprintf(d->host, sizeof d->host, "%s", local.str().c_str());
  return clbSuccess;
}

extern "C" {

static void fillAddress(IdData* d, const SockAddr& a) {
  d->family = a.ss.ss_family;
  d->port = (uint16_t)a.port();
  if (a.ss.ss_family == AF_INET)
    memcpy(d->addr, &reinterpret_cast<const sockaddr_in*>(&a.ss)->sin_addr, 4);
  else
    memcpy(d->addr, &reinterpret_cast<const sockaddr_in6*>(&a.ss)->sin6_addr, 16);
}

clbResult_t clbGetUniqueId(clbUniqueId* id) {
  clearError();
  if (!id) return setError(clbInvalidArgument, "unique id is NULL");
  IdData d{};
  d.magic = kIdMagic;
  d.protocol = CLB_PROTOCOL_VERSION;
  TlsMode tls = TlsMode::kOff;
  CLB_CHECK(tlsModeForNewId(&tls));
  setIdTlsMode(&d, tls);
  CLB_CHECK(randomSecret(d.secret));
  CLB_CHECK(startLocalRoot(&d));
  memcpy(id, &d, sizeof d);
  wipe(&d, sizeof d);
  return clbSuccess;
}

clbResult_t clbUniqueIdFromAddress(const char* host, int port, const char* secret, clbUniqueId* id) {
  clearError();
  if (!host || !*host || !id) return setError(clbInvalidArgument, "host and id must not be NULL/empty");
  if (port <= 0 || port > 65535) return setError(clbInvalidArgument, "port %d is out of range 1..65535", port);
  SockAddr a;
  CLB_CHECK(resolveHost(host, port, &a));
  IdData d{};
  d.magic = kIdMagic;
  d.protocol = CLB_PROTOCOL_VERSION;
  d.flags = kIdRootAtRank0;
  TlsMode tls = TlsMode::kOff;
  CLB_CHECK(tlsModeForNewId(&tls));
  setIdTlsMode(&d, tls);
  fillAddress(&d, a);
  snprintf(d.host, sizeof d.host, "%s", host);
  // The secret: derived from the passphrase (the argument, else COLIBRI_BOOTSTRAP_SECRET), or, with none,
  // from host:port, which every rank knows and so does anyone else who can reach the port.
  const char* pass = secret && *secret ? secret : getenv("COLIBRI_BOOTSTRAP_SECRET");
  Sha256 h;
  if (pass && *pass) {
    static const char label[] = "colibri/passphrase/1";
    h.update(label, sizeof label);
    h.update(pass, strlen(pass));
  } else {
    static std::once_flag warned;
    std::call_once(warned, [&] {
      CLB_WARN("no COLIBRI_BOOTSTRAP_SECRET: anyone who can reach %s:%d can join; give every rank the same one", host,
               port);
    });
    char key[96];
    snprintf(key, sizeof key, "colibri/address/1|%s|%d", host, port);
    h.update(key, strlen(key) + 1);
  }
  uint8_t digest[kSha256Bytes];
  h.final(digest);
  memcpy(d.secret, digest, kSecretBytes);
  wipe(digest, sizeof digest);
  memcpy(id, &d, sizeof d);
  wipe(&d, sizeof d);
  return clbSuccess;
}

clbResult_t clbUniqueIdRelease(const clbUniqueId* id) {
  clearError();
  IdData d;
  CLB_CHECK(decodeId(id, &d));
  releaseRoot(d);
  wipe(&d, sizeof d);
  return clbSuccess;
}

clbResult_t clbUniqueIdDescribe(const clbUniqueId* id, char* buf, size_t bufBytes) {
  clearError();
  if (!buf || bufBytes == 0) return setError(clbInvalidArgument, "buffer is NULL or empty");
  IdData d;
  CLB_CHECK(decodeId(id, &d));
  snprintf(buf, bufBytes, "colibri-id{root=%s, protocol=%u, secret-fingerprint=%08x%s, tls=%s}",
           idAddress(d).str().c_str(), d.protocol, secretFingerprint(d.secret),
           (d.flags & kIdRootAtRank0) ? ", root opened by rank 0" : "", tlsModeName(idTlsMode(d)));
  return clbSuccess;
}

}  // extern "C"
