// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The bootstrap's crypto (src/bootstrap/crypto.h): SHA-256 against the FIPS 180 examples, HMAC-SHA256
// against every test case of RFC 4231, the same digest for every split of a message into updates,
// the padding boundaries (lengths around 56 and 64 bytes mod 64), the constant-time comparison
// and the kernel's random bytes. Expected values not from the standards were computed with
// python3's hashlib and hmac.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bootstrap/crypto.h"

namespace clb {
namespace {

std::string hex(const uint8_t* p, size_t bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < bytes; ++i) {
    s += kDigits[p[i] >> 4];
    s += kDigits[p[i] & 15];
  }
  return s;
}

std::string sha256Hex(const std::string& m) {
  uint8_t d[kSha256Bytes];
  sha256(m.data(), m.size(), d);
  return hex(d, kSha256Bytes);
}

std::string hmacHex(const std::string& key, const std::string& data) {
  uint8_t d[kSha256Bytes];
  hmacSha256(key.data(), key.size(), data.data(), data.size(), d);
  return hex(d, kSha256Bytes);
}

// A fixed pattern of n bytes: byte i is (i * mul + add) mod 256.
std::string pattern(size_t n, unsigned mul, unsigned add) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = char(uint8_t(i * mul + add));
  return s;
}

// The 1000-byte message of the split tests, and its digests (python3 hashlib / hmac).
const std::string kSplitMessage = pattern(1000, 131, 17);
const char* kSplitDigest = "9b1f933854c88e4433633db24196b7ba6282b9553cdee714193554db462d3169";
const char* kSplitHmac = "2e4022476906e0dc5deeaf4294c7acf0ca9a593fec662b1e2b1b940cd079360d";  // key "key"

std::string sha256InPieces(const std::string& m, const std::vector<size_t>& pieces) {
  Sha256 h;
  size_t at = 0;
  for (size_t n : pieces) {
    h.update(m.data() + at, n);
    at += n;
  }
  h.update(m.data() + at, m.size() - at);  // the rest, if any (possibly empty)
  uint8_t d[kSha256Bytes];
  h.final(d);
  return hex(d, kSha256Bytes);
}

std::vector<size_t> evenPieces(size_t total, size_t piece) {
  std::vector<size_t> v;
  for (size_t at = 0; at < total; at += piece) v.push_back(std::min(piece, total - at));
  return v;
}

// FIPS 180-2 appendix B and the examples of the NIST CSRC page for FIPS 180-4.
TEST(Sha256, MatchesFipsExampleForEmptyMessage) {
  EXPECT_EQ(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, MatchesFipsExampleForAbc) {
  EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, MatchesFipsExampleFor448BitMessage) {
  EXPECT_EQ(sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, MatchesFipsExampleFor896BitMessage) {
  EXPECT_EQ(sha256Hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopq"
                      "rlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, MatchesFipsExampleForOneMillionA) {
  EXPECT_EQ(sha256Hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // The same, fed as 10000 updates of 100 bytes (partial blocks carried across updates).
  Sha256 h;
  const std::string hundred(100, 'a');
  for (int i = 0; i < 10000; ++i) h.update(hundred.data(), hundred.size());
  uint8_t d[kSha256Bytes];
  h.final(d);
  EXPECT_EQ(hex(d, kSha256Bytes), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Lengths where the padding changes: 55 (the length fits in the last block), 56 and 63 (it does
// not: one more block), 64 (exactly one block), 65, 119, 120 (the same in the second block).
TEST(Sha256, PadsCorrectlyAtBlockBoundaries) {
  const struct {
    size_t len;
    const char* digest;
  } cases[] = {
      {55, "8aa994584139d128848eeebc4e815639ba5ab6e6e39574195a63ac4f14f7c43b"},
      {56, "ad574708f75c044c9b85de64cb568ee7711ff4f36448c6242f053ba8f6cc2b63"},
      {63, "280ed3e8ff1df845b2e7dfe6ac6cee817bef20e783cc65abc41b818b4d2fe076"},
      {64, "c6ab9724ade5b6a7a1edfffb12f3aa9181351355af8fd08c919952ad211339dd"},
      {65, "788367c73c7ddf4c53f65e68cc0d943e6227ab55b0e78ba63ace822b1c6301c0"},
      {119, "3d610547d68216dedf7435a4fb6260353911f6b3fd3f18805ddb8be285d726fe"},
      {120, "1f80156a804cb7862ad113e8200e9d74499723e7c7854d5f48776d3148e09656"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(sha256Hex(pattern(c.len, 31, 7)), c.digest) << "length " << c.len;
  }
}

TEST(Sha256, GivesTheSameDigestForEverySplitOfTheUpdates) {
  ASSERT_EQ(sha256Hex(kSplitMessage), kSplitDigest);
  for (size_t piece : {size_t(1), size_t(63), size_t(64), size_t(65)}) {
    EXPECT_EQ(sha256InPieces(kSplitMessage, evenPieces(kSplitMessage.size(), piece)), kSplitDigest)
        << "pieces of " << piece << " bytes";
  }
  // Empty updates anywhere change nothing.
  EXPECT_EQ(sha256InPieces(kSplitMessage, {0, 0, 10, 0, 500, 0}), kSplitDigest);
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<size_t> pieces;
    size_t left = kSplitMessage.size();
    while (left > 0) {
      size_t n = std::uniform_int_distribution<size_t>(0, std::min<size_t>(left, 200))(rng);
      pieces.push_back(n);
      left -= n;
    }
    EXPECT_EQ(sha256InPieces(kSplitMessage, pieces), kSplitDigest) << "trial " << trial;
  }
}

// RFC 4231 section 4.
TEST(HmacSha256, MatchesRfc4231Case1) {
  EXPECT_EQ(hmacHex(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
}

TEST(HmacSha256, MatchesRfc4231Case2KeyShorterThanOutput) {
  EXPECT_EQ(hmacHex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(HmacSha256, MatchesRfc4231Case3CombinedKeyAndDataLength) {
  EXPECT_EQ(hmacHex(std::string(20, '\xaa'), std::string(50, '\xdd')),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
}

TEST(HmacSha256, MatchesRfc4231Case4) {
  EXPECT_EQ(hmacHex(pattern(25, 1, 1), std::string(50, '\xcd')),  // key 0x01..0x19
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
}

TEST(HmacSha256, MatchesRfc4231Case5TruncatedTo128Bits) {
  const std::string key(20, '\x0c'), data = "Test With Truncation";
  uint8_t d[kSha256Bytes];
  hmacSha256(key.data(), key.size(), data.data(), data.size(), d);
  EXPECT_EQ(hex(d, 16), "a3b6167473100ee06e0c796c2955552b");
}

TEST(HmacSha256, MatchesRfc4231Case6KeyLongerThanBlockIsHashed) {
  EXPECT_EQ(hmacHex(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(HmacSha256, MatchesRfc4231Case7KeyAndDataLongerThanBlock) {
  EXPECT_EQ(hmacHex(std::string(131, '\xaa'),
                    "This is a test using a larger than block-size key and a larger than block-size "
                    "data. The key needs to be hashed before being used by the HMAC algorithm."),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

// Keys around the block size (64 bytes: used as is; 65: hashed first) and the empty key.
TEST(HmacSha256, HandlesEmptyKeyAndKeysAroundTheBlockSize) {
  EXPECT_EQ(hmacHex("", ""), "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
  EXPECT_EQ(hmacHex(pattern(64, 1, 0), "challenge"),
            "19099a3314b3db88d93963959912582deb5feff222767f1066326debb3559820");
  EXPECT_EQ(hmacHex(pattern(65, 1, 0), "challenge"),
            "3b75a2c09463761da074d2484642c3fef4c0f70dc80ee1f0389df62dc75434f1");
}

TEST(HmacSha256, GivesTheSameMacForEverySplitOfTheUpdates) {
  ASSERT_EQ(hmacHex("key", kSplitMessage), kSplitHmac);
  std::mt19937 rng(54321);
  for (int trial = 0; trial < 50; ++trial) {
    HmacSha256 h("key", 3);
    size_t at = 0;
    while (at < kSplitMessage.size()) {
      size_t n = std::uniform_int_distribution<size_t>(0, std::min<size_t>(kSplitMessage.size() - at, 130))(rng);
      h.update(kSplitMessage.data() + at, n);
      at += n;
    }
    uint8_t d[kSha256Bytes];
    h.final(d);
    EXPECT_EQ(hex(d, kSha256Bytes), kSplitHmac) << "trial " << trial;
  }
}

TEST(CryptoEqualConstantTime, IsTrueForEqualBuffers) {
  const std::string a = pattern(100, 7, 1), b = a;
  EXPECT_TRUE(equalConstantTime(a.data(), b.data(), a.size()));
  EXPECT_TRUE(equalConstantTime(a.data(), b.data(), 0));
}

TEST(CryptoEqualConstantTime, IsFalseWhereverTheBuffersDiffer) {
  const std::string a = pattern(100, 7, 1);
  for (size_t at : {size_t(0), size_t(50), size_t(99)}) {
    std::string b = a;
    b[at] = char(b[at] ^ 0x01);
    EXPECT_FALSE(equalConstantTime(a.data(), b.data(), a.size())) << "difference at byte " << at;
  }
}

TEST(CryptoRandomBytes, GivesDifferentOutputsOnTwoCalls) {
  uint8_t a[32], b[32];
  ASSERT_TRUE(randomBytes(a, sizeof(a)));
  ASSERT_TRUE(randomBytes(b, sizeof(b)));
  EXPECT_NE(std::memcmp(a, b, sizeof(a)), 0);
}

TEST(CryptoRandomBytes, FillsLargeBuffers) {
  std::vector<uint8_t> buf(100000, 0);
  ASSERT_TRUE(randomBytes(buf.data(), buf.size()));
  // Not all zero, and the end is filled too (not only the first getrandom's share).
  size_t zeros = 0, tailZeros = 0;
  for (size_t i = 0; i < buf.size(); ++i) {
    zeros += buf[i] == 0;
    if (i >= buf.size() - 1000) tailZeros += buf[i] == 0;
  }
  EXPECT_LT(zeros, buf.size() / 64);  // about 1 in 256 expected
  EXPECT_LT(tailZeros, size_t(50));
  EXPECT_TRUE(randomBytes(buf.data(), 0));
}

TEST(CryptoWipe, ZeroesTheBuffer) {
  std::string s = pattern(77, 3, 1);
  wipe(&s[0], s.size());
  EXPECT_EQ(s, std::string(77, '\0'));
}

}  // namespace
}  // namespace clb

namespace {

// The SHA extensions' rounds give the portable code's state for random states and blocks (every
// schedule word and round touched), and the FIPS digests above run through whichever the CPU has.
TEST(Sha256, ShaExtensionsMatchThePortableRounds) {
  if (!clb::sha256HasShaExtensions()) GTEST_SKIP() << "this CPU has no SHA extensions";
  uint64_t x = 0x9E3779B97F4A7C15ull;
  auto next = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (int trial = 0; trial < 2000; trial++) {
    uint32_t a[8], b[8];
    uint8_t block[64];
    for (uint32_t& v : a) v = (uint32_t)next();
    for (uint8_t& v : block) v = (uint8_t)next();
    if (trial % 3 == 0) memset(block, trial % 2 ? 0xFF : 0, sizeof block);  // the extremes too
    memcpy(b, a, sizeof a);
    clb::sha256CompressPortable(a, block);
    ASSERT_TRUE(clb::sha256CompressShaExtensions(b, block));
    for (int i = 0; i < 8; i++) ASSERT_EQ(a[i], b[i]) << "trial " << trial << " word " << i;
  }
}

}  // namespace
