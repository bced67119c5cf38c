// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Reduction kernels: one kernel per element type (the op is a warp-uniform branch, so 10 kernels
// cover 10 types x 5 ops), PreMulSum's scaling kernels (one per type), and a byte copy.
#include "kernels/reduce_device.cuh"

// The sources go to shared memory first (clbk::ReduceRange says why).
#define CLB_REDUCE_KERNEL(NAME, S)                                                                               \
  extern "C" __global__ void __launch_bounds__(512) NAME(const ClbReduceArgs args) {                             \
    __shared__ const char* srcs[CLB_MAX_KERNEL_SRCS];                                                            \
    if (threadIdx.x < CLB_MAX_KERNEL_SRCS) srcs[threadIdx.x] = static_cast<const char*>(args.srcs[threadIdx.x]); \
    __syncthreads();                                                                                             \
    const clbk::ReduceRange<S> r{static_cast<S*>(args.dst),                                                      \
                                 srcs,                                                                           \
                                 0,                                                                              \
                                 args.n,                                                                         \
                                 args.k,                                                                         \
                                 args.op,                                                                        \
                                 args.nranks,                                                                    \
                                 args.op == clbk::kAvg && args.divide != 0};                                     \
    clbk::reduceRange<S>(r, blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x,                           \
                         (unsigned long long)gridDim.x * blockDim.x);                                            \
  }

CLB_REDUCE_KERNEL(clb_reduce_int8, int8_t)
CLB_REDUCE_KERNEL(clb_reduce_uint8, uint8_t)
CLB_REDUCE_KERNEL(clb_reduce_int32, int32_t)
CLB_REDUCE_KERNEL(clb_reduce_uint32, uint32_t)
CLB_REDUCE_KERNEL(clb_reduce_int64, int64_t)
CLB_REDUCE_KERNEL(clb_reduce_uint64, uint64_t)
CLB_REDUCE_KERNEL(clb_reduce_float16, __half)
CLB_REDUCE_KERNEL(clb_reduce_bfloat16, __nv_bfloat16)
CLB_REDUCE_KERNEL(clb_reduce_float32, float)
CLB_REDUCE_KERNEL(clb_reduce_float64, double)

#define CLB_SCALE_KERNEL(NAME, S)                                                        \
  extern "C" __global__ void __launch_bounds__(512) NAME(const ClbScaleArgs args) {      \
    clbk::scaleRange<S>(args, blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x, \
                        (unsigned long long)gridDim.x * blockDim.x);                     \
  }

CLB_SCALE_KERNEL(clb_scale_int8, int8_t)
CLB_SCALE_KERNEL(clb_scale_uint8, uint8_t)
CLB_SCALE_KERNEL(clb_scale_int32, int32_t)
CLB_SCALE_KERNEL(clb_scale_uint32, uint32_t)
CLB_SCALE_KERNEL(clb_scale_int64, int64_t)
CLB_SCALE_KERNEL(clb_scale_uint64, uint64_t)
CLB_SCALE_KERNEL(clb_scale_float16, __half)
CLB_SCALE_KERNEL(clb_scale_bfloat16, __nv_bfloat16)
CLB_SCALE_KERNEL(clb_scale_float32, float)
CLB_SCALE_KERNEL(clb_scale_float64, double)

// Byte copy, 16 bytes per thread where alignment allows.
extern "C" __global__ void __launch_bounds__(512) clb_copy(void* dst, const void* src, unsigned long long bytes) {
  clbk::copyRange(dst, src, bytes, blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x,
                  (unsigned long long)gridDim.x * blockDim.x);
}
