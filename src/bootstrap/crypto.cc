// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include "bootstrap/crypto.h"

#include <errno.h>
#include <sys/random.h>

#include <cstring>

namespace clb {

namespace {

// FIPS 180-4 4.2.2: the first 32 bits of the fractional parts of the cube roots of the first 64
// primes.
constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

// FIPS 180-4 5.3.3: the first 32 bits of the fractional parts of the square roots of the first 8
// primes.
constexpr uint32_t kInitial[8] = {
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};

constexpr size_t kBlockBytes = 64;

inline uint32_t rotr(uint32_t x, unsigned n) { return (x >> n) | (x << (32 - n)); }

// The functions of FIPS 180-4 4.1.2.
inline uint32_t ch(uint32_t x, uint32_t y, uint32_t z) { return (x & y) ^ (~x & z); }
inline uint32_t maj(uint32_t x, uint32_t y, uint32_t z) { return (x & y) ^ (x & z) ^ (y & z); }
inline uint32_t bigSigma0(uint32_t x) { return rotr(x, 2) ^ rotr(x, 13) ^ rotr(x, 22); }
inline uint32_t bigSigma1(uint32_t x) { return rotr(x, 6) ^ rotr(x, 11) ^ rotr(x, 25); }
inline uint32_t smallSigma0(uint32_t x) { return rotr(x, 7) ^ rotr(x, 18) ^ (x >> 3); }
inline uint32_t smallSigma1(uint32_t x) { return rotr(x, 17) ^ rotr(x, 19) ^ (x >> 10); }

inline uint32_t loadBigEndian32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

inline void storeBigEndian32(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v >> 24);
  p[1] = uint8_t(v >> 16);
  p[2] = uint8_t(v >> 8);
  p[3] = uint8_t(v);
}

inline void storeBigEndian64(uint8_t* p, uint64_t v) {
  for (int i = 7; i >= 0; --i) {
    p[i] = uint8_t(v);
    v >>= 8;
  }
}

}  // namespace

Sha256::Sha256() : total_(0), used_(0) {
  std::memcpy(state_, kInitial, sizeof(state_));
  std::memset(block_, 0, sizeof(block_));
}

// FIPS 180-4 6.2.2: one 512-bit block into the state.
void Sha256::compress(const uint8_t block[64]) {
  uint32_t w[64];
  for (int t = 0; t < 16; ++t) w[t] = loadBigEndian32(block + 4 * t);
  for (int t = 16; t < 64; ++t) {
    w[t] = smallSigma1(w[t - 2]) + w[t - 7] + smallSigma0(w[t - 15]) + w[t - 16];
  }
  uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
  uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
  for (int t = 0; t < 64; ++t) {
    uint32_t t1 = h + bigSigma1(e) + ch(e, f, g) + kRound[t] + w[t];
    uint32_t t2 = bigSigma0(a) + maj(a, b, c);
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state_[0] += a;
  state_[1] += b;
  state_[2] += c;
  state_[3] += d;
  state_[4] += e;
  state_[5] += f;
  state_[6] += g;
  state_[7] += h;
  wipe(w, sizeof(w));  // the schedule is derived from the message (key material, in HMAC)
}

void Sha256::update(const void* data, size_t bytes) {
  const uint8_t* in = static_cast<const uint8_t*>(data);
  total_ += bytes;
  if (used_ > 0) {  // top up the partial block first
    size_t take = kBlockBytes - used_;
    if (take > bytes) take = bytes;
    std::memcpy(block_ + used_, in, take);
    used_ += take;
    in += take;
    bytes -= take;
    if (used_ < kBlockBytes) return;
    compress(block_);
    used_ = 0;
  }
  for (; bytes >= kBlockBytes; in += kBlockBytes, bytes -= kBlockBytes) compress(in);
  if (bytes > 0) {
    std::memcpy(block_, in, bytes);
    used_ = bytes;
  }
}

// FIPS 180-4 5.1.1: a 1 bit, zeros up to 448 bits mod 512, then the message length in bits as a
// 64-bit big-endian number.
void Sha256::final(uint8_t out[kSha256Bytes]) {
  const uint64_t bits = total_ << 3;
  block_[used_++] = 0x80;
  if (used_ > kBlockBytes - 8) {  // no room for the length: it goes into one more block
    std::memset(block_ + used_, 0, kBlockBytes - used_);
    compress(block_);
    used_ = 0;
  }
  std::memset(block_ + used_, 0, kBlockBytes - 8 - used_);
  storeBigEndian64(block_ + kBlockBytes - 8, bits);
  compress(block_);
  for (int i = 0; i < 8; ++i) storeBigEndian32(out + 4 * i, state_[i]);
  wipe(state_, sizeof(state_));
  wipe(block_, sizeof(block_));
  used_ = 0;
}

void sha256(const void* data, size_t bytes, uint8_t out[kSha256Bytes]) {
  Sha256 h;
  h.update(data, bytes);
  h.final(out);
}

// RFC 2104: H((K ^ opad) || H((K ^ ipad) || text)), K zero-padded to the block size (hashed first
// when longer than it).
HmacSha256::HmacSha256(const void* key, size_t keyBytes) {
  uint8_t k[kBlockBytes] = {};
  if (keyBytes > kBlockBytes) {
    sha256(key, keyBytes, k);
  } else if (keyBytes > 0) {
    std::memcpy(k, key, keyBytes);
  }
  uint8_t pad[kBlockBytes];
  for (size_t i = 0; i < kBlockBytes; ++i) pad[i] = uint8_t(k[i] ^ 0x36);
  inner_.update(pad, kBlockBytes);
  for (size_t i = 0; i < kBlockBytes; ++i) pad[i] = uint8_t(k[i] ^ 0x5c);
  outer_.update(pad, kBlockBytes);
  wipe(pad, sizeof(pad));
  wipe(k, sizeof(k));
}

void HmacSha256::update(const void* data, size_t bytes) { inner_.update(data, bytes); }

void HmacSha256::final(uint8_t out[kSha256Bytes]) {
  uint8_t innerDigest[kSha256Bytes];
  inner_.final(innerDigest);
  outer_.update(innerDigest, kSha256Bytes);
  outer_.final(out);
  wipe(innerDigest, sizeof(innerDigest));
}

void hmacSha256(const void* key, size_t keyBytes, const void* data, size_t bytes, uint8_t out[kSha256Bytes]) {
  HmacSha256 h(key, keyBytes);
  h.update(data, bytes);
  h.final(out);
}

bool equalConstantTime(const void* a, const void* b, size_t bytes) {
  // Read through volatile so that the compiler cannot stop at the first difference.
  const volatile uint8_t* x = static_cast<const volatile uint8_t*>(a);
  const volatile uint8_t* y = static_cast<const volatile uint8_t*>(b);
  uint8_t diff = 0;
  for (size_t i = 0; i < bytes; ++i) diff |= uint8_t(x[i] ^ y[i]);
  return diff == 0;
}

bool randomBytes(void* buf, size_t bytes) {
  uint8_t* p = static_cast<uint8_t*>(buf);
  while (bytes > 0) {
    ssize_t got = getrandom(p, bytes, 0);  // blocks only until the kernel's pool is first seeded
    if (got < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (got == 0) return false;  // not expected for a non-empty request: do not spin
    p += got;
    bytes -= size_t(got);
  }
  return true;
}

void wipe(void* p, size_t bytes) {
  volatile uint8_t* q = static_cast<volatile uint8_t*>(p);
  for (size_t i = 0; i < bytes; ++i) q[i] = 0;
}

}  // namespace clb
