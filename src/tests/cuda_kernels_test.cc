// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Device kernels: the image chosen per compute capability, and — on a machine with a GPU — every
// type x op of the reduction kernel against the host loops of src/base/dtype.cc, bit for bit.
// Without a GPU or driver the device tests are skipped with the driver's reason.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "colibri_kernel_images.h"
#include "device/kernels.h"
#include "platform/cuda/driver.h"
#include "base/dtype.h"

using namespace clb;

// The build folder, or COLIBRI_KERNEL_DIR when the test binary runs elsewhere (the GPU host).
static std::string kernelDir() {
  const char* d = getenv("COLIBRI_KERNEL_DIR");
  return d && *d ? d : CLB_TEST_KERNEL_DIR;
}

TEST(KernelImage, ChosenByComputeCapability) {
  EXPECT_STREQ(cuda::imageFor(8, 0), "sm80");    // A100
  EXPECT_STREQ(cuda::imageFor(8, 6), "sm80");    // sm_80 code runs on 8.6
  EXPECT_STREQ(cuda::imageFor(8, 9), "sm89");    // L4, L40
  EXPECT_STREQ(cuda::imageFor(9, 0), "sm90");    // H100, H200 (sm_90a)
  EXPECT_STREQ(cuda::imageFor(10, 0), "sm100");  // B200
  EXPECT_STREQ(cuda::imageFor(12, 0), "sm120");
  EXPECT_STREQ(cuda::imageFor(7, 5), "ptx");
  EXPECT_STREQ(cuda::imageFor(11, 0), "ptx");
  EXPECT_STREQ(cuda::imageFor(9, 1), "ptx");   // sm_90a runs on exactly 9.0
  EXPECT_STREQ(cuda::imageFor(10, 3), "ptx");  // 100 and 120 are listed without "+"
  EXPECT_STREQ(cuda::imageFor(12, 1), "ptx");
  EXPECT_EQ(cuda::imageFile("sm90"), "colibri_kernels_sm90.cubin");
  EXPECT_EQ(cuda::imageFile("ptx"), "colibri_kernels.ptx");
}

// The build's images (colibri_kernel_images.h, from COLIBRI_KERNEL_ARCHS) are all there, and
// kernel-images.txt beside them (what colibri-cuda packages) names the same files.
TEST(KernelImage, EveryImageWasBuilt) {
  std::vector<std::string> files = {cuda::imageFile("ptx")};
  for (const auto& image : kernel_images::kNative) {
    EXPECT_EQ(cuda::imageFile(image.name), image.file);
    files.push_back(image.file);
  }
  EXPECT_GE(files.size(), 2u);  // at least one native image and the PTX
  for (const std::string& file : files) {
    std::string path = kernelDir() + "/" + file;
    FILE* f = fopen(path.c_str(), "rb");
    EXPECT_NE(f, nullptr) << "missing " << path;
    if (f) fclose(f);
  }
  std::ifstream list(kernelDir() + "/kernel-images.txt");
  ASSERT_TRUE(list) << "missing " << kernelDir() << "/kernel-images.txt";
  std::vector<std::string> listed;
  for (std::string line; std::getline(list, line);) {
    if (!line.empty() && line[0] != '#') listed.push_back(line);
  }
  EXPECT_EQ(listed, files);
}

namespace {

struct Gpu {
  const cuda::Driver* d = nullptr;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  std::string why;
  bool up() {
    if (cuda::driver(&d) != clbSuccess) {
      why = clbGetLastError();
      return false;
    }
    int n = 0;
    if (d->cuDeviceGetCount(&n) != CUDA_SUCCESS || n == 0) {
      why = "no CUDA device";
      return false;
    }
    d->cuDeviceGet(&dev, 0);
    d->cuDevicePrimaryCtxRetain(&ctx, dev);
    d->cuCtxSetCurrent(ctx);
    return true;
  }
};

// Random element bits that are valid inputs: no NaN for the float types (NaN payloads may differ
// legitimately); halves get any finite or infinite pattern.
void fillRandom(std::vector<uint8_t>& buf, clbDataType_t t, std::mt19937_64& rng) {
  size_t esz = clbTypeSize(t), n = buf.size() / esz;
  for (size_t i = 0; i < n; i++) {
    uint64_t r = rng();
    uint8_t* p = buf.data() + i * esz;
    switch (t) {
      case clbFloat16: {
        uint16_t h = (uint16_t)r;
        if ((h & 0x7c00) == 0x7c00) h &= 0xfbff;  // exponent all ones -> finite
        memcpy(p, &h, 2);
        break;
      }
      case clbBfloat16: {
        uint16_t b = (uint16_t)r;
        if ((b & 0x7f80) == 0x7f80) b &= 0xffbf;
        memcpy(p, &b, 2);
        break;
      }
      case clbFloat32: {
        float f = std::ldexp((float)((int64_t)(r >> 11) % 2000001 - 1000000) / 1000.0f, (int)(r % 20) - 10);
        memcpy(p, &f, 4);
        break;
      }
      case clbFloat64: {
        double f = std::ldexp((double)((int64_t)(r >> 11) % 2000001 - 1000000) / 1000.0, (int)(r % 40) - 20);
        memcpy(p, &f, 8);
        break;
      }
      default: memcpy(p, &r, esz);
    }
  }
}

bool sameBits(const uint8_t* a, const uint8_t* b, clbDataType_t t) {
  size_t esz = clbTypeSize(t);
  if (memcmp(a, b, esz) == 0) return true;
  auto isNan = [&](const uint8_t* p) {
    uint64_t v = 0;
    memcpy(&v, p, esz);
    switch (t) {
      case clbFloat16: return (v & 0x7c00) == 0x7c00 && (v & 0x3ff);
      case clbBfloat16: return (v & 0x7f80) == 0x7f80 && (v & 0x7f);
      case clbFloat32: return ((v >> 23) & 0xff) == 0xff && (v & 0x7fffff);
      case clbFloat64: return ((v >> 52) & 0x7ff) == 0x7ff && (v & 0xfffffffffffffull);
      default: return false;
    }
  };
  return isNan(a) && isNan(b);  // NaN is NaN; payloads may differ
}

}  // namespace

TEST(DeviceKernels, ReduceMatchesHostBitForBitForEveryTypeAndOp) {
  Gpu g;
  if (!g.up()) GTEST_SKIP() << "no GPU here: " << g.why;
  cuda::Kernels k;
  ASSERT_EQ(k.load(g.dev, kernelDir()), clbSuccess) << clbGetLastError();
  std::printf("loaded %s\n", k.description().c_str());
  std::mt19937_64 rng(20261130);
  const size_t n = 100003;
  for (int t = 0; t < clbNumTypes; t++) {
    const clbDataType_t type = (clbDataType_t)t;
    const size_t esz = clbTypeSize(type), bytes = n * esz;
    std::vector<std::vector<uint8_t>> in(5, std::vector<uint8_t>(bytes));
    for (auto& v : in) fillRandom(v, type, rng);
    std::vector<CUdeviceptr> dIn(5);
    for (int s = 0; s < 5; s++) {
      ASSERT_EQ(g.d->cuMemAlloc(&dIn[s], bytes), CUDA_SUCCESS);
      ASSERT_EQ(g.d->cuMemcpyHtoD(dIn[s], in[s].data(), bytes), CUDA_SUCCESS);
    }
    CUdeviceptr dOut;
    ASSERT_EQ(g.d->cuMemAlloc(&dOut, bytes), CUDA_SUCCESS);
    for (int o = 0; o < clbNumOps; o++) {
      const clbRedOp_t op = (clbRedOp_t)o;
      struct Case {
        int k;
        int divide;
        int nranks;
      };
      for (Case c : {Case{2, 0, 2}, Case{2, 1, 3}, Case{5, 1, 5}, Case{1, 1, 7}}) {
        ClbReduceArgs a{};
        a.dst = (void*)dOut;
        for (int s = 0; s < c.k; s++) a.srcs[s] = (const void*)dIn[s];
        a.k = c.k;
        a.op = op;
        a.nranks = c.nranks;
        a.divide = c.divide;
        a.n = n;
        ASSERT_EQ(k.reduce(a, type, nullptr), clbSuccess) << clbGetLastError();
        ASSERT_EQ(g.d->cuStreamSynchronize(nullptr), CUDA_SUCCESS);
        std::vector<uint8_t> got(bytes), want(bytes);
        ASSERT_EQ(g.d->cuMemcpyDtoH(got.data(), dOut, bytes), CUDA_SUCCESS);
        if (c.k == 2 && !c.divide) {
          reducePair(want.data(), in[0].data(), in[1].data(), n, type, op);
        } else if (c.k == 2) {
          reducePairFinal(want.data(), in[0].data(), in[1].data(), n, type, op, c.nranks);
        } else {
          std::vector<const void*> srcs;
          for (int s = 0; s < c.k; s++) srcs.push_back(in[s].data());
          reduceMany(want.data(), srcs.data(), c.k, n, type, op, c.nranks);
        }
        size_t wrong = 0, first = n;
        for (size_t i = 0; i < n; i++)
          if (!sameBits(got.data() + i * esz, want.data() + i * esz, type)) {
            if (!wrong) first = i;
            wrong++;
          }
        EXPECT_EQ(wrong, 0u) << typeName(t) << " " << opName(o) << " k=" << c.k << " divide=" << c.divide
                             << ": first wrong element " << first;
      }
    }
    for (auto p : dIn) g.d->cuMemFree(p);
    g.d->cuMemFree(dOut);
  }
}

// PreMulSum's scaling kernel against the host loop (scaleInto), bit for bit, for every type, with
// the scalar passed by value and read from device memory, aligned and not, in place and not.
TEST(DeviceKernels, ScaleMatchesHostBitForBitForEveryType) {
  Gpu g;
  if (!g.up()) GTEST_SKIP() << "no GPU here: " << g.why;
  cuda::Kernels k;
  ASSERT_EQ(k.load(g.dev, kernelDir()), clbSuccess) << clbGetLastError();
  std::mt19937_64 rng(20261205);
  const size_t n = 100003;
  for (int t = 0; t < clbNumTypes; t++) {
    const clbDataType_t type = (clbDataType_t)t;
    const size_t esz = clbTypeSize(type), bytes = (n + 1) * esz;
    std::vector<uint8_t> in(bytes), scalars(4 * esz);
    fillRandom(in, type, rng);
    fillRandom(scalars, type, rng);
    CUdeviceptr dIn, dOut, dScalar;
    ASSERT_EQ(g.d->cuMemAlloc(&dIn, bytes), CUDA_SUCCESS);
    ASSERT_EQ(g.d->cuMemAlloc(&dOut, bytes), CUDA_SUCCESS);
    ASSERT_EQ(g.d->cuMemAlloc(&dScalar, esz), CUDA_SUCCESS);
    for (int c = 0; c < 4; c++) {
      const uint8_t* scalar = scalars.data() + c * esz;
      const bool byValue = c % 2 == 0, inPlace = c == 3;
      const size_t off = c == 1 ? esz : 0;  // one element in: not 16-byte aligned
      ASSERT_EQ(g.d->cuMemcpyHtoD(dIn, in.data(), bytes), CUDA_SUCCESS);
      ASSERT_EQ(g.d->cuMemcpyHtoD(dScalar, scalar, esz), CUDA_SUCCESS);
      ClbScaleArgs a{};
      a.src = (const void*)(dIn + off);
      a.dst = (void*)((inPlace ? dIn : dOut) + off);
      a.scalar = byValue ? nullptr : (const void*)dScalar;
      memcpy(&a.value, scalar, esz);
      a.n = n;
      ASSERT_EQ(k.scale(a, type, nullptr), clbSuccess) << clbGetLastError();
      ASSERT_EQ(g.d->cuStreamSynchronize(nullptr), CUDA_SUCCESS);
      std::vector<uint8_t> got(n * esz), want(n * esz);
      ASSERT_EQ(g.d->cuMemcpyDtoH(got.data(), (CUdeviceptr)a.dst, n * esz), CUDA_SUCCESS);
      scaleInto(want.data(), in.data() + off, n, type, scalar);
      size_t wrong = 0, first = n;
      for (size_t i = 0; i < n; i++)
        if (!sameBits(got.data() + i * esz, want.data() + i * esz, type)) {
          if (!wrong) first = i;
          wrong++;
        }
      EXPECT_EQ(wrong, 0u) << typeName(t) << " case " << c << ": first wrong element " << first;
    }
    g.d->cuMemFree(dIn);
    g.d->cuMemFree(dOut);
    g.d->cuMemFree(dScalar);
  }
}

TEST(DeviceKernels, CopyHandlesEveryAlignmentAndTail) {
  Gpu g;
  if (!g.up()) GTEST_SKIP() << "no GPU here: " << g.why;
  cuda::Kernels k;
  ASSERT_EQ(k.load(g.dev, kernelDir()), clbSuccess) << clbGetLastError();
  const size_t cap = (1 << 20) + 64;
  std::vector<uint8_t> src(cap);
  for (size_t i = 0; i < cap; i++) src[i] = (uint8_t)(i * 131 + 7);
  CUdeviceptr ds, dd;
  ASSERT_EQ(g.d->cuMemAlloc(&ds, cap), CUDA_SUCCESS);
  ASSERT_EQ(g.d->cuMemAlloc(&dd, cap), CUDA_SUCCESS);
  ASSERT_EQ(g.d->cuMemcpyHtoD(ds, src.data(), cap), CUDA_SUCCESS);
  for (size_t off : {0, 1, 3, 16}) {
    for (size_t len : {size_t(0), size_t(1), size_t(15), size_t(17), size_t(1 << 20)}) {
      std::vector<uint8_t> poison(cap, 0xa5), got(cap);
      ASSERT_EQ(g.d->cuMemcpyHtoD(dd, poison.data(), cap), CUDA_SUCCESS);
      ASSERT_EQ(k.copy((void*)(dd + off), (const void*)(ds + off), len, nullptr), clbSuccess);
      ASSERT_EQ(g.d->cuStreamSynchronize(nullptr), CUDA_SUCCESS);
      ASSERT_EQ(g.d->cuMemcpyDtoH(got.data(), dd, cap), CUDA_SUCCESS);
      for (size_t i = 0; i < cap; i++) {
        uint8_t want = (i >= off && i < off + len) ? src[i] : 0xa5;
        ASSERT_EQ(got[i], want) << "off " << off << " len " << len << " byte " << i;
      }
    }
  }
  g.d->cuMemFree(ds);
  g.d->cuMemFree(dd);
}

TEST(DeviceMemory, AStreamWithHostBuffersIsRefusedWithTheReason) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  clbComm_t comm = nullptr;
  ASSERT_EQ(clbCommInitRank(&comm, &id, 0, 1, nullptr), clbSuccess) << clbGetLastError();
  float a[4] = {1, 2, 3, 4}, b[4] = {0, 0, 0, 0};
  clbResult_t rc = clbAllReduce(a, b, 4, clbFloat32, clbSum, comm, reinterpret_cast<void*>(0x1));
  std::string msg = clbGetLastError();
  const cuda::Driver* d = nullptr;
  if (cuda::driver(&d) != clbSuccess) {
    EXPECT_EQ(rc, clbUnsupported);
    EXPECT_NE(msg.find("no CUDA driver"), std::string::npos) << msg;
  } else {
    EXPECT_EQ(rc, clbInvalidArgument);
    EXPECT_NE(msg.find("buffers are host memory"), std::string::npos) << msg;
  }
  EXPECT_EQ(b[0], 0.0f) << "nothing written";
  // Host buffers without a stream still work.
  EXPECT_EQ(clbAllReduce(a, b, 4, clbFloat32, clbSum, comm, nullptr), clbSuccess) << clbGetLastError();
  EXPECT_EQ(b[3], 4.0f);
  clbCommDestroy(comm);
}
