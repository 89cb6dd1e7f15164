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
#include "kernels/silu_mul.cuh"

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

// RMS norm, shared by kernels/rms_norm.cu and the GEMV's fused prologue (kernels/gemv.cu), which
// must compute the same bits: a block of kNormThreads threads, thread t summing the squares of the
// float4s t, t + kNormThreads, ... of the row in that order, then BlockSum; every rounding is
// spelled out (__fmaf_rn and friends), so nvcc contracts nothing differently in either kernel.
inline constexpr int kNormThreads = 256;

__device__ __forceinline__ float SumSquares4(float sum, float4 v) {
  return __fadd_rn(
      sum, __fmaf_rn(v.w, v.w, __fmaf_rn(v.z, v.z, __fmaf_rn(v.y, v.y, __fmul_rn(v.x, v.x)))));
}

// rsqrt(mean of squares + eps) from the block's total of squares.
__device__ __forceinline__ float InvRms(float total_squares, int64_t hidden, float eps) {
  return rsqrtf(__fadd_rn(__fdiv_rn(total_squares, static_cast<float>(hidden)), eps));
}

// One normalized value: v * inv_rms * (weight_offset + weight), before rounding to the output type.
__device__ __forceinline__ float NormedValue(float v, float inv_rms, float weight_offset,
                                             float weight) {
  return __fmul_rn(__fmul_rn(v, inv_rms), __fadd_rn(weight_offset, weight));
}

// The gate's activation (kernels/silu_mul.cuh), shared by the gating kernel and the GEMV's fused
// epilogue, roundings spelled out for the same reason as the norm's.
template <GateActivation kActivation>
__device__ __forceinline__ float ActivateGate(float g) {
  if constexpr (kActivation == GateActivation::kSilu) {
    return __fdiv_rn(g, __fadd_rn(1.0f, __expf(-g)));
  } else {
    // 0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3))); sqrt(2 / pi) as PyTorch's kBeta; tanhf,
    // not the fast approximation.
    const float cube = __fmul_rn(__fmul_rn(g, g), g);
    const float inner = __fmul_rn(0.7978845608028654f, __fmaf_rn(0.044715f, cube, g));
    return __fmul_rn(__fmul_rn(0.5f, g), __fadd_rn(1.0f, tanhf(inner)));
  }
}

// A gated output in T: act(gate) * up, where gate and up are the products rounded to T first (as
// the gate/up product stores them).
template <typename T, GateActivation kActivation>
__device__ __forceinline__ T GatedValue(float gate, float up) {
  return FromFloat<T>(
      __fmul_rn(ActivateGate<kActivation>(ToFloat(FromFloat<T>(gate))), ToFloat(FromFloat<T>(up))));
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
