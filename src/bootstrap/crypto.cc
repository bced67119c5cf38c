// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include "bootstrap/crypto.h"

#include <errno.h>
#include <sys/random.h>

#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

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
void sha256CompressPortable(uint32_t state[8], const uint8_t block[64]) {
  uint32_t w[64];
  for (int t = 0; t < 16; ++t) w[t] = loadBigEndian32(block + 4 * t);
  for (int t = 16; t < 64; ++t) {
    w[t] = smallSigma1(w[t - 2]) + w[t - 7] + smallSigma0(w[t - 15]) + w[t - 16];
  }
  uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
  uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
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
  state[0] += a;
  state[1] += b;
  state[2] += c;
  state[3] += d;
  state[4] += e;
  state[5] += f;
  state[6] += g;
  state[7] += h;
  wipe(w, sizeof(w));  // the schedule is derived from the message (key material, in HMAC)
}

#if defined(__x86_64__)
bool sha256HasShaExtensions() {
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    const bool ssse3 = c & (1u << 9), sse41 = c & (1u << 19);
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return ssse3 && sse41 && (b & (1u << 29));  // CPUID.7.0:EBX.SHA
  }();
  return has;
}

// The same rounds with SHA256RNDS2 (two rounds per instruction on the state held as ABEF and CDGH,
// FIPS's a..h in the register lanes the instruction expects) and SHA256MSG1/MSG2 for the message
// schedule, four words at a time: w[t] for a group of four comes from the group 16 words back (w[t -
// 16] and, through MSG1, sigma0 of w[t - 15]), the words 7 back and, through MSG2, sigma1 of those 2
// back.
__attribute__((target("sha,sse4.1,ssse3"))) static void compressShaNi(uint32_t state[8], const uint8_t block[64]) {
  const __m128i byteSwap = _mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);
  __m128i abcd = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state));      // lanes a b c d
  __m128i efgh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state + 4));  // lanes e f g h
  abcd = _mm_shuffle_epi32(abcd, 0xB1);                                         // b a d c
  efgh = _mm_shuffle_epi32(efgh, 0x1B);                                         // h g f e
  __m128i abef = _mm_alignr_epi8(abcd, efgh, 8);                                // f e b a
  __m128i cdgh = _mm_blend_epi16(efgh, abcd, 0xF0);                             // h g d c
  const __m128i abefStart = abef, cdghStart = cdgh;
  __m128i m[4];
  for (int i = 0; i < 4; i++)
    m[i] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 16 * i)), byteSwap);
  for (int g = 0; g < 16; g++) {  // rounds 4g .. 4g + 3
    __m128i& w = m[g & 3];        // holds w[4g - 16 ..] until it becomes w[4g ..]
    if (g >= 4) {
      const __m128i& w12 = m[(g + 1) & 3];               // w[4g - 12 ..]
      const __m128i& w8 = m[(g + 2) & 3];                // w[4g - 8 ..]
      const __m128i& w4 = m[(g + 3) & 3];                // w[4g - 4 ..]
      const __m128i back7 = _mm_alignr_epi8(w4, w8, 4);  // w[4g - 7 ..]
      w = _mm_sha256msg2_epu32(_mm_add_epi32(_mm_sha256msg1_epu32(w, w12), back7), w4);
    }
    __m128i wk = _mm_add_epi32(w, _mm_loadu_si128(reinterpret_cast<const __m128i*>(kRound + 4 * g)));
    cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);  // two rounds: cdgh now holds the new abef
    wk = _mm_shuffle_epi32(wk, 0x0E);              // the other two words
    abef = _mm_sha256rnds2_epu32(abef, cdgh, wk);  // and back
  }
  abef = _mm_add_epi32(abef, abefStart);
  cdgh = _mm_add_epi32(cdgh, cdghStart);
  abef = _mm_shuffle_epi32(abef, 0x1B);                                                     // a b e f
  cdgh = _mm_shuffle_epi32(cdgh, 0xB1);                                                     // g h c d
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state), _mm_blend_epi16(abef, cdgh, 0xF0));   // a b c d
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state + 4), _mm_alignr_epi8(cdgh, abef, 8));  // e f g h
}

bool sha256CompressShaExtensions(uint32_t state[8], const uint8_t block[64]) {
  if (!sha256HasShaExtensions()) return false;
  compressShaNi(state, block);
  return true;
}
#else
bool sha256HasShaExtensions() { return false; }
bool sha256CompressShaExtensions(uint32_t*, const uint8_t*) { return false; }
#endif

void Sha256::compress(const uint8_t block[64]) {
  if (!sha256CompressShaExtensions(state_, block)) sha256CompressPortable(state_, block);
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
