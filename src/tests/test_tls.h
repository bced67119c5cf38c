// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// For the COLIBRI_TLS tests: environment variables for one scope, and certificates made at run
// time with the openssl command (skipped without it or libssl.so.3, unless
// COLIBRI_REQUIRE_TLS_TESTS=1, as in CI, makes that a failure: REQUIRE_PKI).
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace clbtest {

// Sets environment variables for one scope and puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (auto& [k, v] : vars) {
      const char* old = getenv(k);
      saved_.push_back({k, old ? std::string(old) : std::string(), old != nullptr});
      if (v)
        setenv(k, v, 1);
      else
        unsetenv(k);
    }
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->had)
        setenv(it->name.c_str(), it->value.c_str(), 1);
      else
        unsetenv(it->name.c_str());
    }
  }

 private:
  struct Saved {
    std::string name, value;
    bool had;
  };
  std::vector<Saved> saved_;
};

// A CA, a certificate it signed (shared by every rank here), a second key, and a rogue CA with a
// certificate of its own: PEM files in a temporary directory, made once per test binary.
struct Pki {
  std::string dir, ca, cert, key, otherKey, rogueCa, rogueCert, rogueKey;
  bool ok = false;
  std::string why;
  ~Pki() {  // the keys go with the test binary
    if (!dir.empty() && dir.rfind("/tmp/colibri-tls-", 0) == 0) (void)!system(("rm -rf " + dir).c_str());
  }
};

inline int sh(const std::string& cmd) { return system((cmd + " >/dev/null 2>&1").c_str()); }

inline const Pki& pki() {
  static const Pki p = [] {
    Pki k;
    if (sh("command -v openssl") != 0) {
      k.why = "no openssl command";
      return k;
    }
    if (void* h = dlopen("libssl.so.3", RTLD_NOW | RTLD_LOCAL)) {
      dlclose(h);
    } else {
      k.why = "no libssl.so.3";
      return k;
    }
    char tmpl[] = "/tmp/colibri-tls-XXXXXX";
    if (!mkdtemp(tmpl)) {
      k.why = "mkdtemp failed";
      return k;
    }
    k.dir = tmpl;
    const std::string d = k.dir + "/";
    const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::string caExt = " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign";
    std::vector<std::string> cmds = {
        "openssl req -x509" + ec + " -keyout " + d + "ca.key -out " + d + "ca.pem -days 2 -subj /CN=colibri-test-ca" +
            caExt,
        "openssl req" + ec + " -keyout " + d + "rank.key -out " + d + "rank.csr -subj /CN=colibri-rank",
        "openssl x509 -req -in " + d + "rank.csr -CA " + d + "ca.pem -CAkey " + d + "ca.key -CAcreateserial -out " + d +
            "rank.pem -days 2",
        "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out " + d + "other.key",
        "openssl req -x509" + ec + " -keyout " + d + "rogue-ca.key -out " + d + "rogue-ca.pem -days 2 -subj /CN=rogue" +
            caExt,
        "openssl req" + ec + " -keyout " + d + "rogue.key -out " + d + "rogue.csr -subj /CN=colibri-rank",
        "openssl x509 -req -in " + d + "rogue.csr -CA " + d + "rogue-ca.pem -CAkey " + d +
            "rogue-ca.key -CAcreateserial "
            "-out " +
            d + "rogue.pem -days 2",
    };
    for (const std::string& c : cmds)
      if (sh(c) != 0) {
        k.why = "failed: " + c;
        return k;
      }
    k.ca = d + "ca.pem";
    k.cert = d + "rank.pem";
    k.key = d + "rank.key";
    k.otherKey = d + "other.key";
    k.rogueCa = d + "rogue-ca.pem";
    k.rogueCert = d + "rogue.pem";
    k.rogueKey = d + "rogue.key";
    k.ok = true;
    return k;
  }();
  return p;
}

#define REQUIRE_PKI()                                                                           \
  do {                                                                                          \
    if (!clbtest::pki().ok) {                                                                   \
      const char* req = getenv("COLIBRI_REQUIRE_TLS_TESTS");                                    \
      if (req && !strcmp(req, "1")) FAIL() << "TLS tests required but: " << clbtest::pki().why; \
      GTEST_SKIP() << "TLS tests skipped: " << clbtest::pki().why;                              \
    }                                                                                           \
  } while (0)

inline ScopedEnv tlsEnv(const char* mode) {
  return ScopedEnv{{"COLIBRI_TLS", mode},
                   {"COLIBRI_TLS_CERT", pki().cert.c_str()},
                   {"COLIBRI_TLS_KEY", pki().key.c_str()},
                   {"COLIBRI_TLS_CA", pki().ca.c_str()},
                   {"COLIBRI_TLS_LIBRARY", nullptr}};
}

}  // namespace clbtest
