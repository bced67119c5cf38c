// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The small kernels of the decode command's GPU decoder (colibri-bench, package
// io.colibri.bench.decode, DeviceDecoder): everything of a Llama-shaped layer but the GEMMs
// (cuBLAS) and the collectives (Colibri). Built as PTX (colibri_decode_kernels.ptx) and packaged
// in colibri-bench.jar; not part of libcolibri. The formulas are those of the CPU reference,
// HostDecoder.
//
// Each kernel exists for float32 activations (suffix _f32) and bfloat16 (_bf16); the arithmetic
// is float32 either way, and bfloat16 values are rounded to nearest even when stored.
//
// Rows: a pass of the model works on rows = sequences × n positions per sequence, row r being
// sequence r / n at position *pos + r % n. A decode step is n = 1; a prefill (a chunk of the
// prompt in one pass) is n > 1. The position is read from device memory, so a replayed CUDA
// graph of a decode step works on the next position: clb_dec_advance moves it on by n, and
// clb_dec_argmax writes the next tokens.

#include <cuda_bf16.h>

#include <cstdint>

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float load(const float* p) { return *p; }
__device__ __forceinline__ float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// Sum of `v` over the block (kThreads threads); every thread gets it.
__device__ float blockSum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = 0;
  for (int w = 0; w < kThreads / 32; w++) t += scratch[w];
  return t;
}

__device__ float blockMax(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = scratch[0];
  for (int w = 1; w < kThreads / 32; w++) t = fmaxf(t, scratch[w]);
  return t;
}

// x[r][:] = table[tokens[r]][:]. Grid: one block per row.
template <typename T>
__device__ void embed(const T* table, const int* tokens, T* x, int hidden) {
  const int r = blockIdx.x;
  const T* row = table + (int64_t)tokens[r] * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) x[(int64_t)r * hidden + i] = row[i];
}

// y[r][:] = x[r][:] / sqrt(mean(x[r][:]^2) + eps) (norm weights 1). Grid: one block per row.
template <typename T>
__device__ void rmsnorm(const T* x, T* y, int width, float eps) {
  __shared__ float scratch[kThreads / 32];
  const T* in = x + (int64_t)blockIdx.x * width;
  T* out = y + (int64_t)blockIdx.x * width;
  float ss = 0;
  for (int i = threadIdx.x; i < width; i += blockDim.x) ss += load(in + i) * load(in + i);
  const float inv = (float)(1.0 / sqrt((double)blockSum(ss, scratch) / width + eps));
  for (int i = threadIdx.x; i < width; i += blockDim.x) store(out + i, load(in + i) * inv);
}

// Rotates each pair (2i, 2i + 1) of every head of row r of a[rows][heads * d] by its position ×
// theta^(-2i / d). Grid: one block per row.
template <typename T>
__device__ void rope(T* a, int heads, int d, const int* pos, int n, double theta) {
  const int half = d / 2, p = *pos + (int)blockIdx.x % n;
  T* row = a + (int64_t)blockIdx.x * heads * d;
  for (int t = threadIdx.x; t < heads * half; t += blockDim.x) {
    const int h = t / half, i = t % half;
    const double angle = p * pow(theta, -2.0 * i / d);
    const float c = (float)cos(angle), s = (float)sin(angle);
    T* e = row + h * d + 2 * i;
    const float x1 = load(e), x2 = load(e + 1);
    store(e, x1 * c - x2 * s);
    store(e + 1, x1 * s + x2 * c);
  }
}

// The cache [sequence][kv head][position][d] takes each row's k and v ([rows][kv heads * d]) at
// the row's position. Grid: one block per row.
template <typename T>
__device__ void cache(const T* k, const T* v, T* kc, T* vc, int kvHeads, int context, int d, const int* pos, int n) {
  const int r = blockIdx.x, b = r / n, p = *pos + r % n;
  for (int t = threadIdx.x; t < kvHeads * d; t += blockDim.x) {
    const int h = t / d, e = t % d;
    const int64_t at = (((int64_t)b * kvHeads + h) * context + p) * d + e;
    kc[at] = k[(int64_t)r * kvHeads * d + t];
    vc[at] = v[(int64_t)r * kvHeads * d + t];
  }
}

// Attention of one query head of one row over positions 0 .. the row's position of its
// sequence's KV head (causal). Grid: (rows, heads): rows in x, which takes up to 2^31 - 1 blocks
// (y takes 65535); dynamic shared memory: context floats.
template <typename T>
__device__ void attention(const T* q, const T* kc, const T* vc, T* out, int heads, int kvHeads, int context, int d,
                          const int* pos, int n) {
  extern __shared__ float score[];
  __shared__ float scratch[kThreads / 32];
  const int r = blockIdx.x, h = blockIdx.y, b = r / n, p = *pos + r % n;
  const int kh = h / (heads / kvHeads);
  const T* qv = q + ((int64_t)r * heads + h) * d;
  const T* keys = kc + ((int64_t)b * kvHeads + kh) * context * d;
  const T* vals = vc + ((int64_t)b * kvHeads + kh) * context * d;
  const float scale = (float)(1.0 / sqrt((double)d));
  float mx = -INFINITY;
  for (int t = threadIdx.x; t <= p; t += blockDim.x) {
    float dot = 0;
    for (int e = 0; e < d; e++) dot += load(qv + e) * load(keys + (int64_t)t * d + e);
    score[t] = dot * scale;
    mx = fmaxf(mx, score[t]);
  }
  mx = blockMax(mx, scratch);
  float sum = 0;
  for (int t = threadIdx.x; t <= p; t += blockDim.x) {
    score[t] = expf(score[t] - mx);
    sum += score[t];
  }
  sum = blockSum(sum, scratch);  // its barriers also publish every score
  T* o = out + ((int64_t)r * heads + h) * d;
  for (int e = threadIdx.x; e < d; e += blockDim.x) {
    float acc = 0;
    for (int t = 0; t <= p; t++) acc += score[t] / sum * load(vals + (int64_t)t * d + e);
    store(o + e, acc);
  }
}

// gate[i] = silu(gate[i]) * up[i].
template <typename T>
__device__ void siluMul(T* gate, const T* up, int64_t count) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x) {
    const float g = load(gate + i);
    store(gate + i, g / (1.0f + expf(-g)) * load(up + i));
  }
}

// x[i] += y[i].
template <typename T>
__device__ void add(T* x, const T* y, int64_t count) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x)
    store(x + i, load(x + i) + load(y + i));
}

// The next token of each sequence: the index of its largest logit (the lowest among equals) in
// the all-gathered logits, rank-major ([rank][batch][vocabPerRank]). Grid: batch blocks.
template <typename T>
__device__ void argmax(const T* gathered, int* tokens, int ranks, int batch, int vocabPerRank) {
  __shared__ float bestV[kThreads];
  __shared__ int bestI[kThreads];
  const int b = blockIdx.x;
  float v = -INFINITY;
  int idx = 0x7fffffff;
  for (int t = threadIdx.x; t < ranks * vocabPerRank; t += blockDim.x) {
    const int r = t / vocabPerRank, j = t % vocabPerRank;
    const float x = load(gathered + ((int64_t)r * batch + b) * vocabPerRank + j);
    if (x > v || (x == v && t < idx)) {
      v = x;
      idx = t;
    }  // t is the vocabulary index
  }
  bestV[threadIdx.x] = v;
  bestI[threadIdx.x] = idx;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      const float ov = bestV[threadIdx.x + s];
      const int oi = bestI[threadIdx.x + s];
      if (ov > bestV[threadIdx.x] || (ov == bestV[threadIdx.x] && oi < bestI[threadIdx.x])) {
        bestV[threadIdx.x] = ov;
        bestI[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  // No logit above -inf (all NaN or -inf): token 0, as the CPU reference's scan from index 0 gives.
  if (threadIdx.x == 0) tokens[b] = bestI[0] == 0x7fffffff ? 0 : bestI[0];
}

}  // namespace

// The exported kernels, one set per activation type (DeviceDecoder.KERNELS names them).
#define CLB_DEC_KERNELS(T, S)                                                                                         \
  extern "C" __global__ void clb_dec_embed_##S(const T* table, const int* tokens, T* x, int hidden) {                 \
    embed(table, tokens, x, hidden);                                                                                  \
  }                                                                                                                   \
  extern "C" __global__ void clb_dec_rmsnorm_##S(const T* x, T* y, int width, float eps) {                            \
    rmsnorm(x, y, width, eps);                                                                                        \
  }                                                                                                                   \
  extern "C" __global__ void clb_dec_rope_##S(T* a, int heads, int d, const int* pos, int n, double theta) {          \
    rope(a, heads, d, pos, n, theta);                                                                                 \
  }                                                                                                                   \
  extern "C" __global__ void clb_dec_cache_##S(const T* k, const T* v, T* kc, T* vc, int kvHeads, int context, int d, \
                                               const int* pos, int n) {                                               \
    cache(k, v, kc, vc, kvHeads, context, d, pos, n);                                                                 \
  }                                                                                                                   \
  extern "C" __global__ void clb_dec_attention_##S(const T* q, const T* kc, const T* vc, T* out, int heads,           \
                                                   int kvHeads, int context, int d, const int* pos, int n) {          \
    attention(q, kc, vc, out, heads, kvHeads, context, d, pos, n);                                                    \
  }                                                                                                                   \
  extern "C" __global__ void clb_dec_silu_mul_##S(T* gate, const T* up, int64_t count) { siluMul(gate, up, count); }  \
  extern "C" __global__ void clb_dec_add_##S(T* x, const T* y, int64_t count) { add(x, y, count); }                   \
  extern "C" __global__ void clb_dec_argmax_##S(const T* gathered, int* tokens, int ranks, int batch,                 \
                                                int vocabPerRank) {                                                   \
    argmax(gathered, tokens, ranks, batch, vocabPerRank);                                                             \
  }

CLB_DEC_KERNELS(float, f32)
CLB_DEC_KERNELS(__nv_bfloat16, bf16)

// The next pass's position: n more.
extern "C" __global__ void clb_dec_advance(int* pos, int n) { *pos += n; }
