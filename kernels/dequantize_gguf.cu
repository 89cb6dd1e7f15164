#include <algorithm>

#include "kernels/dequantize_gguf.cuh"
#include "kernels/device_utils.cuh"
#include "kernels/gguf_blocks.cuh"

namespace convoy::kernels {
namespace {

constexpr int kThreads = 256;

// One thread per group of 32 values (a grid-stride loop over them), four 16-byte stores each.
template <GgufBlockType kType, typename T>
__global__ void __launch_bounds__(kThreads) DequantizeGgufKernel(DequantizeGgufParams p) {
  GridDependencyWait();
  const int64_t groups_per_row = p.k / kGgufGroup;
  const int64_t total = p.rows * groups_per_row;
  const int64_t row_bytes = GgufRowBytes(kType, p.k);
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t row = t / groups_per_row, g = t % groups_per_row;
    float w[kGgufGroup];
    DecodeGgufRowGroup<kType>(static_cast<const uint8_t*>(p.w) + row * row_bytes, g, w);
    auto* out = reinterpret_cast<Pack8<T>*>(static_cast<T*>(p.out) + row * p.k + g * kGgufGroup);
#pragma unroll
    for (int c = 0; c < kGgufGroup / 8; ++c) {
      Pack8<T> v;
#pragma unroll
      for (int j = 0; j < 8; ++j) v.v[j] = FromFloat<T>(w[8 * c + j]);
      out[c] = v;
    }
  }
}

}  // namespace

cudaError_t LaunchDequantizeGguf(const DequantizeGgufParams& params, cudaStream_t stream) {
  const auto& p = params;
  if (p.w == nullptr || p.out == nullptr || reinterpret_cast<uintptr_t>(p.out) % 16 != 0 ||
      !IsGgufBlockType(static_cast<int32_t>(p.type)) || p.rows < 1 || p.k < 1 ||
      p.k % GgufBlockElements(p.type) != 0) {
    return cudaErrorInvalidValue;
  }
  const int64_t total = p.rows * (p.k / kGgufGroup);
  // Enough blocks to fill the device several times over; the loop covers the rest.
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, 65536);
  cudaError_t err = cudaSuccess;
  CONVOY_DISPATCH_HALF(p.dtype, DispatchGgufBlockType(p.type, [&](auto tag) {
                         err = LaunchKernel(DequantizeGgufKernel<decltype(tag)::value, T>,
                                            dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0,
                                            stream, p);
                       }));
  return err;
}

}  // namespace convoy::kernels
