// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Every transport a host test runs over, from one list: shm, socket, socket with TLS on every
// connection (COLIBRI_TLS=all) and the verbs stand-in (transport verbs through the verbs plugin
// over the emulator this test binary links). A suite parametrized with
// INSTANTIATE_TRANSPORTS(Suite) runs each case on all four; a case that cannot run on one says
// why in its skip message (TransportScope), never by leaving the transport out.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "colibri/colibri.h"
#include "tests/test_ranks.h"
#include "tests/test_tls.h"

namespace clbtest {

enum class Net { kShm, kSocket, kSocketTls, kVerbs };

inline const std::vector<Net>& allNets() {
  static const std::vector<Net> nets{Net::kShm, Net::kSocket, Net::kSocketTls, Net::kVerbs};
  return nets;
}

inline const char* netName(Net n) {
  switch (n) {
    case Net::kShm: return "shm";
    case Net::kSocket: return "socket";
    case Net::kSocketTls: return "socket_tls";
    case Net::kVerbs: return "verbs_standin";
  }
  return "?";
}

inline int netTransport(Net n) {
  switch (n) {
    case Net::kShm: return clbTransportShm;
    case Net::kSocket:
    case Net::kSocketTls: return clbTransportSocket;
    case Net::kVerbs: return clbTransportVerbs;
  }
  return clbTransportAuto;
}

// What a transport needs around a test: COLIBRI_TLS=all with the test PKI for kSocketTls (made
// before the unique id, which carries the TLS mode), TLS off otherwise. ready() is false, with
// why(), where the transport cannot run in this build (the caller skips, naming it).
class TransportScope {
 public:
  explicit TransportScope(Net n) : net_(n) {
    if (n == Net::kSocketTls) {
      if (!pki().ok) {
        why_ = "TLS needs the openssl command and libssl.so.3: " + pki().why;
        const char* req = getenv("COLIBRI_REQUIRE_TLS_TESTS");
        required_ = req && !strcmp(req, "1");
        return;
      }
      env_ = std::make_unique<ScopedEnv>(tlsEnv("all"));
    } else {
      env_ = std::make_unique<ScopedEnv>(
          std::initializer_list<std::pair<const char*, const char*>>{{"COLIBRI_TLS", nullptr}});
    }
#ifndef CLB_HAVE_VERBS
    if (n == Net::kVerbs) why_ = "this test binary was built without infiniband/verbs.h, so without the verbs stand-in";
#endif
  }
  bool ready() const { return why_.empty(); }
  // A missing prerequisite that CI requires (COLIBRI_REQUIRE_TLS_TESTS=1) fails instead of skipping.
  bool required() const { return required_; }
  const std::string& why() const { return why_; }
  Net net() const { return net_; }

 private:
  Net net_;
  std::string why_;
  bool required_ = false;
  std::unique_ptr<ScopedEnv> env_;
};

// Inside a TEST_P of a transport suite: the scope, or a skip (or failure) that names why.
#define CLB_TRANSPORT_SCOPE(scope, net)                                  \
  ::clbtest::TransportScope scope(net);                                  \
  if (!scope.ready()) {                                                  \
    if (scope.required()) FAIL() << netName(net) << ": " << scope.why(); \
    GTEST_SKIP() << netName(net) << ": " << scope.why();                 \
  }

// Ranks as threads over `net`, each config set by `configure` after the transport (may be empty).
inline std::vector<std::string> runOver(Net net, int nranks, int64_t timeoutMs,
                                        const std::function<void(int, clbConfig_t*)>& configure,
                                        const std::function<void(int, clbComm_t)>& body) {
  return runThreadRanks(
      nranks,
      [&](int r, clbConfig_t* cfg) {
        cfg->transport = netTransport(net);
        cfg->timeoutMs = timeoutMs;
        if (configure) configure(r, cfg);
      },
      body);
}

inline std::string netParamName(const ::testing::TestParamInfo<Net>& i) { return netName(i.param); }

}  // namespace clbtest

#define INSTANTIATE_TRANSPORTS(suite) \
  INSTANTIATE_TEST_SUITE_P(Transports, suite, ::testing::ValuesIn(::clbtest::allNets()), ::clbtest::netParamName)
