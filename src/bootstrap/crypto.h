// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104) for the bootstrap's challenge-response: a rank
// proves that it knows the job's shared secret by answering a random challenge with an HMAC of it,
// so the secret itself never travels. Also the small helpers that go with it: a comparison whose
// time does not depend on where two digests differ, random bytes from the kernel for challenges,
// and a wipe of key material that the compiler may not remove. Portable C++, and on x86-64 CPUs
// with the SHA extensions (Intel since Ice Lake and Goldmont, AMD since Zen) their instructions,
// chosen at run time: the bootstrap's all-gathers tag every block they carry, and each rank checks
// the root's whole table, so at hundreds of ranks hashing is a visible share of init.
#pragma once

#include <cstddef>
#include <cstdint>

namespace clb {

constexpr size_t kSha256Bytes = 32;

// Incremental SHA-256: any number of update() calls, with any split of the message, then one
// final(). The object may not be updated (or finalized again) after final().
class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t bytes);
  void final(uint8_t out[kSha256Bytes]);

 private:
  void compress(const uint8_t block[64]);

  uint32_t state_[8];
  uint64_t total_;     // message bytes so far
  uint8_t block_[64];  // the partial block not yet compressed
  size_t used_;        // bytes of block_ in use (0..63)
};

// One 64-byte block into a SHA-256 state (FIPS 180-4 6.2.2): the portable code, and the SHA
// extensions' where the CPU has them (false, and nothing done, where it does not). Sha256 uses the
// second where it can; tests compare the two.
void sha256CompressPortable(uint32_t state[8], const uint8_t block[64]);
bool sha256CompressShaExtensions(uint32_t state[8], const uint8_t block[64]);
bool sha256HasShaExtensions();

// SHA-256 of one buffer.
void sha256(const void* data, size_t bytes, uint8_t out[kSha256Bytes]);

// Incremental HMAC-SHA256 with a key of any length (a key longer than 64 bytes is hashed first,
// as RFC 2104 says). The key is not kept: only the two hash states seeded with it.
class HmacSha256 {
 public:
  HmacSha256(const void* key, size_t keyBytes);
  void update(const void* data, size_t bytes);
  void final(uint8_t out[kSha256Bytes]);

 private:
  Sha256 inner_, outer_;
};

// HMAC-SHA256 of one buffer.
void hmacSha256(const void* key, size_t keyBytes, const void* data, size_t bytes, uint8_t out[kSha256Bytes]);

// Constant-time comparison (time does not depend on where the bytes differ).
bool equalConstantTime(const void* a, const void* b, size_t bytes);

// Fills buf with bytes from getrandom() (retries EINTR and short reads); false if the kernel refuses.
bool randomBytes(void* buf, size_t bytes);

// Wipes memory in a way the compiler may not remove.
void wipe(void* p, size_t bytes);

}  // namespace clb
