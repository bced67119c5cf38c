// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include "bootstrap/tls.h"

#include <dlfcn.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "bootstrap/net.h"

namespace clb {
namespace {

// The parts of OpenSSL 3's ABI used here (ssl.h, bio.h, tls1.h; stable across 3.x).
constexpr int kSslErrorSsl = 1, kSslWantRead = 2, kSslWantWrite = 3, kSslSyscall = 5, kSslZeroReturn = 6;
constexpr int kFiletypePem = 1;
constexpr int kVerifyPeer = 0x01, kVerifyFailIfNoPeerCert = 0x02;
constexpr int kCtrlMode = 33, kCtrlSetReadAhead = 41, kCtrlSetMinProtoVersion = 123;
constexpr long kModePartialWrite = 0x1, kModeMovingWriteBuffer = 0x2;
constexpr long kTls13 = 0x0304;
constexpr uint64_t kOpIgnoreUnexpectedEof = 1ull << 7, kOpNoTicket = 1ull << 14, kOpNoRenegotiation = 1ull << 30;
constexpr int kBioTypeSourceSink = 0x0400, kBioCtrlFlush = 11;
constexpr int kBioRead = 0x01, kBioWrite = 0x02, kBioRws = 0x07, kBioRetry = 0x08;

struct Api {
  void* lib = nullptr;
  std::string path;
  int (*OPENSSL_init_ssl)(uint64_t, const void*);
  const void* (*TLS_method)();
  void* (*SSL_CTX_new)(const void*);
  void (*SSL_CTX_free)(void*);
  int (*SSL_CTX_use_certificate_chain_file)(void*, const char*);
  int (*SSL_CTX_use_PrivateKey_file)(void*, const char*, int);
  int (*SSL_CTX_check_private_key)(const void*);
  int (*SSL_CTX_load_verify_locations)(void*, const char*, const char*);
  void (*SSL_CTX_set_verify)(void*, int, void*);
  long (*SSL_CTX_ctrl)(void*, int, long, void*);
  uint64_t (*SSL_CTX_set_options)(void*, uint64_t);
  int (*SSL_CTX_set_num_tickets)(void*, size_t);
  void* (*SSL_new)(void*);
  void (*SSL_free)(void*);
  void (*SSL_set_bio)(void*, void*, void*);
  void (*SSL_set_connect_state)(void*);
  void (*SSL_set_accept_state)(void*);
  int (*SSL_do_handshake)(void*);
  int (*SSL_read)(void*, void*, int);
  int (*SSL_peek)(void*, void*, int);
  int (*SSL_write)(void*, const void*, int);
  int (*SSL_get_error)(const void*, int);
  int (*SSL_pending)(const void*);
  int (*SSL_has_pending)(const void*);
  int (*SSL_export_keying_material)(void*, unsigned char*, size_t, const char*, size_t, const unsigned char*, size_t,
                                    int);
  int (*SSL_shutdown)(void*);
  long (*SSL_get_verify_result)(const void*);
  const char* (*SSL_get_version)(const void*);
  const void* (*SSL_get_current_cipher)(const void*);
  const char* (*SSL_CIPHER_get_name)(const void*);
  const char* (*X509_verify_cert_error_string)(long);
  unsigned long (*ERR_get_error)();
  void (*ERR_error_string_n)(unsigned long, char*, size_t);
  void (*ERR_clear_error)();
  const char* (*OpenSSL_version)(int);
  void* (*BIO_meth_new)(int, const char*);
  int (*BIO_meth_set_write)(void*, int (*)(void*, const char*, int));
  int (*BIO_meth_set_read)(void*, int (*)(void*, char*, int));
  int (*BIO_meth_set_ctrl)(void*, long (*)(void*, int, long, void*));
  int (*BIO_get_new_index)();
  void* (*BIO_new)(const void*);
  void (*BIO_set_data)(void*, void*);
  void* (*BIO_get_data)(void*);
  void (*BIO_set_init)(void*, int);
  void (*BIO_set_flags)(void*, int);
  void (*BIO_clear_flags)(void*, int);
  void* bioMethod = nullptr;  // sends with MSG_NOSIGNAL: a dead peer is an error, not SIGPIPE
};

// One libssl per process (its BIO method calls back into it).
std::mutex gApiMutex;
Api* gApi = nullptr;

// OpenSSL's error queue of this thread, as one line ("" when empty); the queue is emptied.
std::string drainErrors(const Api* a) {
  std::string out;
  while (unsigned long e = a->ERR_get_error()) {
    char b[256];
    a->ERR_error_string_n(e, b, sizeof b);
    if (!out.empty()) out += "; ";
    out += b;
  }
  return out;
}

int bioWrite(void* b, const char* p, int n) {
  const int fd = (int)(intptr_t)gApi->BIO_get_data(b);
  gApi->BIO_clear_flags(b, kBioRws | kBioRetry);
  ssize_t r = ::send(fd, p, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    gApi->BIO_set_flags(b, kBioWrite | kBioRetry);
  return (int)r;
}

int bioRead(void* b, char* p, int n) {
  const int fd = (int)(intptr_t)gApi->BIO_get_data(b);
  gApi->BIO_clear_flags(b, kBioRws | kBioRetry);
  ssize_t r = ::recv(fd, p, (size_t)n, MSG_DONTWAIT);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    gApi->BIO_set_flags(b, kBioRead | kBioRetry);
  return (int)r;
}

long bioCtrl(void*, int cmd, long, void*) { return cmd == kBioCtrlFlush ? 1 : 0; }

template <typename F>
bool bind(void* lib, const char* name, F* f, std::string* missing) {
  *f = reinterpret_cast<F>(dlsym(lib, name));
  if (!*f) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return *f != nullptr;
}

clbResult_t loadApi(const Api** out) {
  const char* env = getenv("COLIBRI_TLS_LIBRARY");
  const std::string path = env && *env ? env : "libssl.so.3";
  std::lock_guard<std::mutex> g(gApiMutex);
  if (gApi && gApi->path == path) {
    *out = gApi;
    return clbSuccess;
  }
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return setError(clbUnsupported,
                    "COLIBRI_TLS needs OpenSSL 3 (%s), which cannot be loaded here (%s): install it (Debian / Ubuntu: "
                    "apt-get install libssl3), point COLIBRI_TLS_LIBRARY at it, or run with COLIBRI_TLS=off",
                    path.c_str(), dlerror());
  if (gApi) {
    dlclose(lib);
    return setError(clbInvalidUsage,
                    "COLIBRI_TLS_LIBRARY=%s, but this process already uses %s for TLS: one OpenSSL "
                    "per process",
                    path.c_str(), gApi->path.c_str());
  }
  auto* a = new Api;
  a->lib = lib;
  a->path = path;
  std::string missing;
#define CLB_BIND(fn) bind(lib, #fn, &a->fn, &missing)
  CLB_BIND(OPENSSL_init_ssl), CLB_BIND(TLS_method), CLB_BIND(SSL_CTX_new), CLB_BIND(SSL_CTX_free),
      CLB_BIND(SSL_CTX_use_certificate_chain_file), CLB_BIND(SSL_CTX_use_PrivateKey_file),
      CLB_BIND(SSL_CTX_check_private_key), CLB_BIND(SSL_CTX_load_verify_locations), CLB_BIND(SSL_CTX_set_verify),
      CLB_BIND(SSL_CTX_ctrl), CLB_BIND(SSL_CTX_set_options), CLB_BIND(SSL_CTX_set_num_tickets), CLB_BIND(SSL_new),
      CLB_BIND(SSL_free), CLB_BIND(SSL_set_bio), CLB_BIND(SSL_set_connect_state), CLB_BIND(SSL_set_accept_state),
      CLB_BIND(SSL_do_handshake), CLB_BIND(SSL_read), CLB_BIND(SSL_peek), CLB_BIND(SSL_write), CLB_BIND(SSL_get_error),
      CLB_BIND(SSL_pending), CLB_BIND(SSL_has_pending), CLB_BIND(SSL_export_keying_material), CLB_BIND(SSL_shutdown),
      CLB_BIND(SSL_get_verify_result), CLB_BIND(SSL_get_version), CLB_BIND(SSL_get_current_cipher),
      CLB_BIND(SSL_CIPHER_get_name), CLB_BIND(X509_verify_cert_error_string), CLB_BIND(ERR_get_error),
      CLB_BIND(ERR_error_string_n), CLB_BIND(ERR_clear_error), CLB_BIND(OpenSSL_version), CLB_BIND(BIO_meth_new),
      CLB_BIND(BIO_meth_set_write), CLB_BIND(BIO_meth_set_read), CLB_BIND(BIO_meth_set_ctrl),
      CLB_BIND(BIO_get_new_index), CLB_BIND(BIO_new), CLB_BIND(BIO_set_data), CLB_BIND(BIO_get_data),
      CLB_BIND(BIO_set_init), CLB_BIND(BIO_set_flags), CLB_BIND(BIO_clear_flags);
#undef CLB_BIND
  if (!missing.empty()) {
    dlclose(lib);
    delete a;
    return setError(clbUnsupported,
                    "%s is not OpenSSL 3 (it lacks %s): install libssl3 or point COLIBRI_TLS_LIBRARY at "
                    "OpenSSL 3's libssl.so.3",
                    path.c_str(), missing.c_str());
  }
  // No clean-up at exit: a detached bootstrap root (or a communicator the program never
  // destroyed) may still free its TLS sessions then, and OpenSSL's atexit handler freeing its
  // tables under it aborted a process with "double free or corruption" (once, in CI).
  constexpr uint64_t kInitNoAtexit = 0x00080000ull;  // OPENSSL_INIT_NO_ATEXIT
  a->OPENSSL_init_ssl(kInitNoAtexit, nullptr);
  a->bioMethod = a->BIO_meth_new(a->BIO_get_new_index() | kBioTypeSourceSink, "colibri socket");
  if (!a->bioMethod || !a->BIO_meth_set_write(a->bioMethod, bioWrite) || !a->BIO_meth_set_read(a->bioMethod, bioRead) ||
      !a->BIO_meth_set_ctrl(a->bioMethod, bioCtrl)) {
    std::string why = drainErrors(a);
    dlclose(lib);
    delete a;
    return setError(clbSystemError, "OpenSSL could not make a BIO method: %s", why.c_str());
  }
  CLB_INFO("TLS through %s (%s)", path.c_str(), a->OpenSSL_version(0));
  gApi = a;  // kept for the life of the process, as the sessions that use it may be
  *out = a;
  return clbSuccess;
}

// A file's identity for the context cache: its name, size and change time (a rotated
// certificate makes a new context).
std::string fileKey(const char* path) {
  struct stat st {};
  if (stat(path, &st) != 0) return std::string(path) + "?";
  return std::string(path) + ":" + std::to_string((long long)st.st_size) + ":" +
         std::to_string((long long)st.st_mtime) + "." + std::to_string((long long)st.st_mtim.tv_nsec);
}

}  // namespace

class TlsContext {
 public:
  TlsContext(const Api* a, void* ctx) : api(a), ctx(ctx) {}
  ~TlsContext() { api->SSL_CTX_free(ctx); }
  const Api* api;
  void* ctx;
};

const char* tlsModeName(TlsMode m) {
  switch (m) {
    case TlsMode::kOff: return "off";
    case TlsMode::kBootstrap: return "bootstrap";
    case TlsMode::kAll: return "all";
  }
  return "?";
}

clbResult_t tlsModeFromEnv(TlsMode* out, bool* set) {
  const char* v = getenv("COLIBRI_TLS");
  *set = v && *v;
  *out = TlsMode::kOff;
  if (!*set) return clbSuccess;
  for (TlsMode m : {TlsMode::kOff, TlsMode::kBootstrap, TlsMode::kAll})
    if (!strcmp(v, tlsModeName(m))) {
      *out = m;
      return clbSuccess;
    }
  return setError(clbInvalidArgument, "COLIBRI_TLS='%s' is not one of off, bootstrap, all", v);
}

clbResult_t tlsContextFor(TlsMode mode, TlsContextRef* out) {
  out->reset();
  if (mode == TlsMode::kOff) return clbSuccess;
  const char* names[3] = {"COLIBRI_TLS_CERT", "COLIBRI_TLS_KEY", "COLIBRI_TLS_CA"};
  const char* files[3];
  for (int i = 0; i < 3; i++) {
    files[i] = getenv(names[i]);
    if (!files[i] || !*files[i])
      return setError(clbInvalidArgument,
                      "COLIBRI_TLS=%s needs %s (PEM files: COLIBRI_TLS_CERT this rank's certificate chain, "
                      "COLIBRI_TLS_KEY its private key, COLIBRI_TLS_CA the CA that signed every rank's)",
                      tlsModeName(mode), names[i]);
    if (access(files[i], R_OK) != 0) return setSysError(errno, "%s=%s cannot be read", names[i], files[i]);
  }
  const Api* a = nullptr;
  CLB_CHECK(loadApi(&a));
  const std::string key = fileKey(files[0]) + "|" + fileKey(files[1]) + "|" + fileKey(files[2]);
  // Never destroyed (threads may outlive main, as above).
  static std::mutex& cacheMutex = *new std::mutex;
  static std::string& cachedKey = *new std::string;
  static TlsContextRef& cached = *new TlsContextRef;
  std::lock_guard<std::mutex> g(cacheMutex);
  if (cached && cachedKey == key) {
    *out = cached;
    return clbSuccess;
  }
  a->ERR_clear_error();
  void* ctx = a->SSL_CTX_new(a->TLS_method());
  if (!ctx) return setError(clbSystemError, "OpenSSL could not make a TLS context: %s", drainErrors(a).c_str());
  auto ref = std::make_shared<TlsContext>(a, ctx);
  const char* step = nullptr;
  if (a->SSL_CTX_ctrl(ctx, kCtrlSetMinProtoVersion, kTls13, nullptr) != 1)
    step = "TLS 1.3 is not available";
  else if (a->SSL_CTX_use_certificate_chain_file(ctx, files[0]) != 1)
    step = "COLIBRI_TLS_CERT is not a PEM certificate";
  else if (a->SSL_CTX_use_PrivateKey_file(ctx, files[1], kFiletypePem) != 1)
    step = "COLIBRI_TLS_KEY is not a PEM key";
  else if (a->SSL_CTX_check_private_key(ctx) != 1)
    step = "COLIBRI_TLS_KEY is not the key of COLIBRI_TLS_CERT";
  else if (a->SSL_CTX_load_verify_locations(ctx, files[2], nullptr) != 1)
    step = "COLIBRI_TLS_CA holds no PEM certificate";
  std::string errors = step ? drainErrors(a) : "";
  if (step && errors.find("key values mismatch") != std::string::npos)
    step = "COLIBRI_TLS_KEY is not the key of COLIBRI_TLS_CERT";
  if (step)
    return setError(clbInvalidArgument,
                    "TLS setup (COLIBRI_TLS_CERT=%s, COLIBRI_TLS_KEY=%s, COLIBRI_TLS_CA=%s): %s (%s)", files[0],
                    files[1], files[2], step, errors.c_str());
  a->SSL_CTX_set_verify(ctx, kVerifyPeer | kVerifyFailIfNoPeerCert, nullptr);  // mutual: both sides present
  a->SSL_CTX_ctrl(ctx, kCtrlMode, kModePartialWrite | kModeMovingWriteBuffer, nullptr);
  a->SSL_CTX_set_options(ctx, kOpIgnoreUnexpectedEof | kOpNoTicket | kOpNoRenegotiation);
  a->SSL_CTX_set_num_tickets(ctx, 0);  // no resumption: nothing arrives after the handshake unasked
  // Read ahead: a socket read takes what is there (up to the record buffer, about 16 KiB) rather
  // than a record's header, then its body. The buffer stays the default size: a large one would be
  // allocated for every unauthenticated connection too.
  a->SSL_CTX_ctrl(ctx, kCtrlSetReadAhead, 1, nullptr);
  cached = ref;
  cachedKey = key;
  *out = ref;
  return clbSuccess;
}

clbResult_t TlsSession::create(const TlsContextRef& ctx, int fd, bool server, std::unique_ptr<TlsSession>* out) {
  const Api* a = ctx->api;
  std::unique_ptr<TlsSession> s(new TlsSession);
  s->ctx_ = ctx;
  s->fd_ = fd;
  a->ERR_clear_error();
  s->ssl_ = a->SSL_new(ctx->ctx);
  void* bio = s->ssl_ ? a->BIO_new(a->bioMethod) : nullptr;
  if (!bio) return setError(clbSystemError, "OpenSSL could not make a TLS session: %s", drainErrors(a).c_str());
  a->BIO_set_data(bio, (void*)(intptr_t)fd);
  a->BIO_set_init(bio, 1);
  a->SSL_set_bio(s->ssl_, bio, bio);  // the session owns the BIO now
  if (server)
    a->SSL_set_accept_state(s->ssl_);
  else
    a->SSL_set_connect_state(s->ssl_);
  *out = std::move(s);
  return clbSuccess;
}

TlsSession::~TlsSession() {
  if (!ssl_) return;
  const Api* a = ctx_->api;
  a->SSL_shutdown(ssl_);  // one try at a close_notify; the socket closes right after anyway
  a->ERR_clear_error();
  a->SSL_free(ssl_);
}

int TlsSession::handshakeStep(std::string* why) {
  std::lock_guard<std::mutex> g(mu_);
  const Api* a = ctx_->api;
  a->ERR_clear_error();
  errno = 0;
  const int r = a->SSL_do_handshake(ssl_);
  const int savedErrno = errno;
  if (r == 1) {
    want_ = 0;
    return 1;
  }
  const int e = a->SSL_get_error(ssl_, r);
  if (e == kSslWantRead || e == kSslWantWrite) {
    want_ = e == kSslWantRead ? POLLIN : POLLOUT;
    return 0;
  }
  const long verify = a->SSL_get_verify_result(ssl_);
  std::string errors = drainErrors(a);
  if (verify != 0)
    *why = std::string("its certificate was refused: ") + a->X509_verify_cert_error_string(verify) +
           " (is it signed by COLIBRI_TLS_CA?)";
  else if (e == kSslZeroReturn || (e == kSslSyscall && (savedErrno == 0 || savedErrno == ECONNRESET)) ||
           errors.find("eof") != std::string::npos) {
    *why =
        "it closed the connection during the TLS handshake (does it run with the same COLIBRI_TLS and trust the "
        "same CA?)" +
        (errors.empty() ? std::string() : " [" + errors + "]");
    return -2;  // a server that was full or restarting does this too: the client may connect again
  } else if (e == kSslSyscall)
    *why = std::string("the TLS handshake failed: ") + strerror(savedErrno);
  else
    *why =
        "the TLS handshake failed: " + (errors.empty() ? std::string("no reason given") : errors) +
        (errors.find("wrong version number") != std::string::npos || errors.find("packet length") != std::string::npos
             ? " (the peer does not speak TLS: does it run with COLIBRI_TLS?)"
             : "");
  return -1;
}

clbResult_t TlsSession::connect(int64_t deadlineMs, const std::atomic<bool>* abort, const char* peer) {
  for (;;) {
    std::string why;
    const int r = handshakeStep(&why);
    if (r == 1) {
      CLB_DEBUG("TLS to %s: %s", peer, describe().c_str());
      return clbSuccess;
    }
    if (r == -2) return setError(clbRemoteError, "TLS with %s: %s", peer, why.c_str());
    if (r < 0) return setError(clbAuthError, "TLS with %s: %s", peer, why.c_str());
    const int64_t now = nowMs();
    if (abort && abort->load()) return setError(clbAborted, "aborted during the TLS handshake with %s", peer);
    CLB_CHECK(WaitCheck::poll());
    if (now >= deadlineMs)
      return setError(clbTimeout, "the TLS handshake with %s did not complete before the timeout", peer);
    pollfd p{fd_, wantEvents(POLLIN), 0};
    const int64_t left = deadlineMs - now;
    (void)poll(&p, 1, (int)(left < 100 ? left : 100));
  }
}

ssize_t TlsSession::io(int ret, bool reading) {
  if (ret > 0) {
    want_ = 0;
    return ret;
  }
  const int savedErrno = errno;
  const Api* a = ctx_->api;
  const int e = a->SSL_get_error(ssl_, ret);
  switch (e) {
    case kSslWantRead:
    case kSslWantWrite:
      want_ = e == kSslWantRead ? POLLIN : POLLOUT;
      errno = EAGAIN;
      return -1;
    case kSslZeroReturn:
      a->ERR_clear_error();
      if (reading) return 0;
      errno = EPIPE;
      return -1;
    case kSslSyscall:
      a->ERR_clear_error();
      if (savedErrno == 0) {  // EOF without close_notify
        if (reading) return 0;
        errno = EPIPE;
        return -1;
      }
      errno = savedErrno;
      return -1;
    default: {
      failure_ = drainErrors(a);
      if (failure_.empty()) failure_ = "no reason given";
      for (const char* alert : {"alert unknown ca", "alert bad certificate", "alert certificate required",
                                "alert certificate expired", "alert unsupported certificate"})
        if (failure_.find(alert) != std::string::npos) {
          failure_ = "the peer refused this rank's certificate (" + failure_ +
                     "): sign COLIBRI_TLS_CERT with the CA the peer trusts (its COLIBRI_TLS_CA)";
          break;
        }
      CLB_DEBUG("TLS connection (fd %d) failed: %s", fd_, failure_.c_str());
      errno = EPROTO;
      return -1;
    }
  }
}

ssize_t TlsSession::send(const void* buf, size_t bytes) {
  std::lock_guard<std::mutex> g(mu_);
  ctx_->api->ERR_clear_error();
  errno = 0;
  return io(ctx_->api->SSL_write(ssl_, buf, (int)(bytes > (1u << 30) ? (1u << 30) : bytes)), false);
}

ssize_t TlsSession::recv(void* buf, size_t bytes, bool peek) {
  std::lock_guard<std::mutex> g(mu_);
  const Api* a = ctx_->api;
  a->ERR_clear_error();
  errno = 0;
  const int n = (int)(bytes > (1u << 30) ? (1u << 30) : bytes);
  return io(peek ? a->SSL_peek(ssl_, buf, n) : a->SSL_read(ssl_, buf, n), true);
}

bool TlsSession::binding(uint8_t out[32]) {
  std::lock_guard<std::mutex> g(mu_);
  static const char label[] = "EXPORTER-colibri-handshake";
  return ctx_->api->SSL_export_keying_material(ssl_, out, 32, label, sizeof label - 1, nullptr, 0, 0) == 1;
}

std::string TlsSession::failure() {
  std::lock_guard<std::mutex> g(mu_);
  return failure_;
}

bool TlsSession::buffered() {
  std::lock_guard<std::mutex> g(mu_);
  const Api* a = ctx_->api;
  if (a->SSL_pending(ssl_) > 0) return true;    // decrypted plaintext
  if (!a->SSL_has_pending(ssl_)) return false;  // nothing read ahead either
  // Read ahead, but maybe only part of a record (then the socket must be waited for): a peek
  // says whether a whole record is there. An error or the peer's close counts as buffered, so
  // that the next receive reports it at once.
  char b;
  a->ERR_clear_error();
  const int r = a->SSL_peek(ssl_, &b, 1);
  if (r > 0) return true;
  const int e = a->SSL_get_error(ssl_, r);
  a->ERR_clear_error();
  return e != kSslWantRead && e != kSslWantWrite;
}

std::string TlsSession::describe() {
  const Api* a = ctx_->api;
  const void* c = a->SSL_get_current_cipher(ssl_);
  return std::string(a->SSL_get_version(ssl_)) + " " + (c ? a->SSL_CIPHER_get_name(c) : "(no cipher)");
}

}  // namespace clb
