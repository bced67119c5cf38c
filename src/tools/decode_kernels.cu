// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The small kernels of the decode command's GPU decoder (colibri-bench, package
// io.colibri.bench.decode, DeviceDecoder): everything of a Llama-shaped layer but the GEMMs
// (cuBLAS) and the collectives (Colibri). float32 activations, one CUDA graph per step: the
// position and the tokens are read from device memory, so a replayed graph decodes the next
// position (clb_dec_advance moves it on, clb_dec_argmax writes the next tokens). Built as PTX
// (colibri_decode_kernels.ptx) and packaged in colibri-bench.jar; not part of libcolibri.
// The formulas are those of the CPU reference, HostDecoder.

#include <cstdint>

namespace {

constexpr int kThreads = 256;

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

}  // namespace

// x[b][:] = table[tokens[b]][:]. Grid: batch blocks.
extern "C" __global__ void clb_dec_embed(const float* table, const int* tokens, float* x, int hidden) {
  const int b = blockIdx.x;
  const float* row = table + (int64_t)tokens[b] * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) x[(int64_t)b * hidden + i] = row[i];
}

// y[r][:] = x[r][:] / sqrt(mean(x[r][:]^2) + eps) (norm weights 1). Grid: one block per row.
extern "C" __global__ void clb_dec_rmsnorm(const float* x, float* y, int width, float eps) {
  __shared__ float scratch[kThreads / 32];
  const float* in = x + (int64_t)blockIdx.x * width;
  float* out = y + (int64_t)blockIdx.x * width;
  float ss = 0;
  for (int i = threadIdx.x; i < width; i += blockDim.x) ss += in[i] * in[i];
  const float inv = (float)(1.0 / sqrt((double)blockSum(ss, scratch) / width + eps));
  for (int i = threadIdx.x; i < width; i += blockDim.x) out[i] = in[i] * inv;
}

// Rotates each pair (2i, 2i + 1) of every head of a[b][heads * d] by pos × theta^(-2i / d).
// Grid: batch blocks.
extern "C" __global__ void clb_dec_rope(float* a, int heads, int d, const int* pos, double theta) {
  const int half = d / 2, p = *pos;
  float* row = a + (int64_t)blockIdx.x * heads * d;
  for (int t = threadIdx.x; t < heads * half; t += blockDim.x) {
    const int h = t / half, i = t % half;
    const double angle = p * pow(theta, -2.0 * i / d);
    const float c = (float)cos(angle), s = (float)sin(angle);
    float* e = row + h * d + 2 * i;
    const float x1 = e[0], x2 = e[1];
    e[0] = x1 * c - x2 * s;
    e[1] = x1 * s + x2 * c;
  }
}

// The cache [b][kv head][position][d] takes k and v ([b][kv heads * d]) at *pos. Grid: batch.
extern "C" __global__ void clb_dec_cache(const float* k, const float* v, float* kc, float* vc, int kvHeads,
                                         int context, int d, const int* pos) {
  const int b = blockIdx.x, p = *pos;
  for (int t = threadIdx.x; t < kvHeads * d; t += blockDim.x) {
    const int h = t / d, e = t % d;
    const int64_t at = (((int64_t)b * kvHeads + h) * context + p) * d + e;
    kc[at] = k[(int64_t)b * kvHeads * d + t];
    vc[at] = v[(int64_t)b * kvHeads * d + t];
  }
}

// Attention of one query head of one sequence over positions 0..*pos of its KV head.
// Grid: (heads, batch); dynamic shared memory: context floats.
extern "C" __global__ void clb_dec_attention(const float* q, const float* kc, const float* vc, float* out,
                                             int heads, int kvHeads, int context, int d, const int* pos) {
  extern __shared__ float score[];
  __shared__ float scratch[kThreads / 32];
  const int h = blockIdx.x, b = blockIdx.y, p = *pos;
  const int kh = h / (heads / kvHeads);
  const float* qv = q + ((int64_t)b * heads + h) * d;
  const float* keys = kc + ((int64_t)b * kvHeads + kh) * context * d;
  const float* vals = vc + ((int64_t)b * kvHeads + kh) * context * d;
  const float scale = (float)(1.0 / sqrt((double)d));
  float mx = -INFINITY;
  for (int t = threadIdx.x; t <= p; t += blockDim.x) {
    float dot = 0;
    for (int e = 0; e < d; e++) dot += qv[e] * keys[(int64_t)t * d + e];
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
  float* o = out + ((int64_t)b * heads + h) * d;
  for (int e = threadIdx.x; e < d; e += blockDim.x) {
    float acc = 0;
    for (int t = 0; t <= p; t++) acc += score[t] / sum * vals[(int64_t)t * d + e];
    o[e] = acc;
  }
}

// gate[i] = silu(gate[i]) * up[i].
extern "C" __global__ void clb_dec_silu_mul(float* gate, const float* up, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float g = gate[i];
    gate[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

// x[i] += y[i].
extern "C" __global__ void clb_dec_add(float* x, const float* y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    x[i] += y[i];
}

// The next token of each sequence: the index of its largest logit (the lowest among equals) in
// the all-gathered logits, rank-major ([rank][batch][vocabPerRank]). Grid: batch blocks.
extern "C" __global__ void clb_dec_argmax(const float* gathered, int* tokens, int ranks, int batch, int vocabPerRank) {
  __shared__ float bestV[kThreads];
  __shared__ int bestI[kThreads];
  const int b = blockIdx.x;
  float v = -INFINITY;
  int idx = 0x7fffffff;
  for (int t = threadIdx.x; t < ranks * vocabPerRank; t += blockDim.x) {
    const int r = t / vocabPerRank, j = t % vocabPerRank;
    const float x = gathered[((int64_t)r * batch + b) * vocabPerRank + j];
    if (x > v || (x == v && t < idx)) { v = x; idx = t; }  // t is the vocabulary index
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

// The next step's position: one more.
extern "C" __global__ void clb_dec_advance(int* pos) { *pos += 1; }
