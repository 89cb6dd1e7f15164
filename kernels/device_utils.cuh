// Device-side helpers shared by the kernels (included from .cu files only).
#ifndef CONVOY_KERNELS_DEVICE_UTILS_CUH_
#define CONVOY_KERNELS_DEVICE_UTILS_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "kernels/half_type.cuh"

namespace convoy::kernels {

__device__ __forceinline__ float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float ToFloat(__half x) { return __half2float(x); }

template <typename T>
__device__ __forceinline__ T FromFloat(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float x) {
  return __float2half_rn(x);
}

// Eight 16-bit values moved as one 16-byte access.
template <typename T>
struct alignas(16) Pack8 {
  T v[8];
};

__device__ __forceinline__ float WarpSum(float x) {
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

__device__ __forceinline__ float WarpMax(float x) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  }
  return x;
}

// Sum over the block; every thread gets the result. `scratch` holds at least 32 floats and is
// reused, so calls must not overlap.
__device__ __forceinline__ float BlockSum(float x, float* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int num_warps = (blockDim.x + 31) >> 5;
  x = WarpSum(x);
  __syncthreads();
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  float total = lane < num_warps ? scratch[lane] : 0.0f;
  return WarpSum(total);
}

__device__ __forceinline__ float BlockMax(float x, float* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int num_warps = (blockDim.x + 31) >> 5;
  x = WarpMax(x);
  __syncthreads();
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  float total = lane < num_warps ? scratch[lane] : -FLT_MAX;
  return WarpMax(total);
}

}  // namespace convoy::kernels

// Runs `body` with `T` bound to the CUDA type of `half_type`.
#define CONVOY_DISPATCH_HALF(half_type, ...)                 \
  do {                                                       \
    if ((half_type) == ::convoy::kernels::HalfType::kBF16) { \
      using T = __nv_bfloat16;                               \
      __VA_ARGS__;                                           \
    } else {                                                 \
      using T = __half;                                      \
      __VA_ARGS__;                                           \
    }                                                        \
  } while (false)

#endif  // CONVOY_KERNELS_DEVICE_UTILS_CUH_
