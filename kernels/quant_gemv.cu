#include "kernels/device_utils.cuh"
#include "kernels/gguf_blocks.cuh"
#include "kernels/quant_gemv.cuh"

namespace convoy::kernels {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;

// M: rows of x the kernel is built for (1, 2, 4 or 8); p.m <= M of them are real.
template <GgufBlockType kType, typename T, int M>
__global__ void __launch_bounds__(kThreads) QuantGemvKernel(QuantGemvParams p) {
  GridDependencyWait();
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (row >= p.n) return;  // a whole warp: no block-wide synchronization follows
  const auto* w_row = static_cast<const uint8_t*>(p.w) + row * GgufRowBytes(kType, p.k);
  const int64_t groups = p.k / kGgufGroup;

  float acc[M];
#pragma unroll
  for (int i = 0; i < M; ++i) acc[i] = 0.0f;
  for (int64_t g = lane; g < groups; g += 32) {
    float w[kGgufGroup];
    DecodeGgufRowGroup<kType>(w_row, g, w);
#pragma unroll
    for (int i = 0; i < M; ++i) {
      if (i >= p.m) break;
      const auto* x =
          reinterpret_cast<const Pack8<T>*>(static_cast<const T*>(p.x) + i * p.k + g * kGgufGroup);
#pragma unroll
      for (int c = 0; c < kGgufGroup / 8; ++c) {
        const Pack8<T> xv = x[c];
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i] = fmaf(w[8 * c + j], ToFloat(xv.v[j]), acc[i]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < M; ++i) {
    const float sum = WarpSum(acc[i]);
    if (lane != 0 || i >= p.m) continue;
    StoreProduct<T>(p.y, i * p.ldy + row, sum, p.y_f32, p.accumulate);
  }
}

template <GgufBlockType kType, typename T>
cudaError_t LaunchFor(const QuantGemvParams& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((p.n + kWarps - 1) / kWarps));
  if (p.m <= 1)
    return LaunchKernel(QuantGemvKernel<kType, T, 1>, grid, dim3(kThreads), 0, stream, p);
  if (p.m <= 2)
    return LaunchKernel(QuantGemvKernel<kType, T, 2>, grid, dim3(kThreads), 0, stream, p);
  if (p.m <= 4)
    return LaunchKernel(QuantGemvKernel<kType, T, 4>, grid, dim3(kThreads), 0, stream, p);
  return LaunchKernel(QuantGemvKernel<kType, T, 8>, grid, dim3(kThreads), 0, stream, p);
}

}  // namespace

cudaError_t LaunchQuantGemv(const QuantGemvParams& params, cudaStream_t stream) {
  const auto& p = params;
  if (p.x == nullptr || p.w == nullptr || p.y == nullptr ||
      reinterpret_cast<uintptr_t>(p.x) % 16 != 0 ||
      !IsGgufBlockType(static_cast<int32_t>(p.type)) || p.m < 1 || p.m > kQuantGemvMaxRows ||
      p.n < 1 || p.n > (int64_t{1} << 31) || p.k < 1 || p.k % GgufBlockElements(p.type) != 0 ||
      p.k > INT32_MAX || p.ldy < p.n) {
    return cudaErrorInvalidValue;
  }
  cudaError_t err = cudaSuccess;
  CONVOY_DISPATCH_HALF(p.dtype, DispatchGgufBlockType(p.type, [&](auto tag) {
                         err = LaunchFor<decltype(tag)::value, T>(p, stream);
                       }));
  return err;
}

}  // namespace convoy::kernels
