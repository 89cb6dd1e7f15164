// Device-side helpers shared by the kernels (included from .cu files only).
#ifndef CONVOY_KERNELS_DEVICE_UTILS_CUH_
#define CONVOY_KERNELS_DEVICE_UTILS_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "kernels/dependent_launch.cuh"
#include "kernels/half_type.cuh"

namespace convoy::kernels {

// The first statement of every kernel launched by LaunchKernel: waits until the kernel before it
// in the stream has completed and its writes are visible (a no-op when it was launched the plain
// way), then lets the next kernel's blocks be scheduled as this one's run. Nothing may be read or
// written before it.
__device__ __forceinline__ void GridDependencyWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Launches `kernel`, as a programmatic dependent launch where DependentLaunchEnabled(); the kernel
// must begin with GridDependencyWait(). Returns the launch's error.
template <typename... Params, typename... Args>
cudaError_t LaunchKernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                         cudaStream_t stream, Args... args) {
  cudaLaunchAttribute attribute;
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = DependentLaunchEnabled() ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, args...);
}

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

// A product's output element: y[i] = sum, or y[i] + sum (added in fp32, then rounded) when
// accumulating; y is fp32 when y_f32, else T.
template <typename T>
__device__ __forceinline__ void StoreProduct(void* y, int64_t i, float sum, bool y_f32,
                                             bool accumulate) {
  if (y_f32) {
    float* out = static_cast<float*>(y);
    out[i] = accumulate ? out[i] + sum : sum;
  } else {
    T* out = static_cast<T*>(y);
    out[i] = FromFloat<T>(accumulate ? ToFloat(out[i]) + sum : sum);
  }
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
