#include "kernels/device_utils.cuh"
#include "kernels/rms_norm.cuh"

namespace convoy::kernels {
namespace {

constexpr int kThreads = kNormThreads;
// Values per thread kept in registers between the two passes: hidden up to 8 * 4 * 256 = 8192.
constexpr int kMaxVecsPerThread = 8;

template <typename T>
__global__ void __launch_bounds__(kThreads) RmsNormKernel(RmsNormParams p) {
  GridDependencyWait();
  __shared__ float scratch[32];
  const int64_t row = p.row_index != nullptr ? p.row_index[blockIdx.x] : blockIdx.x;
  float4* residual = reinterpret_cast<float4*>(p.residual + row * p.hidden);
  const float4* delta =
      p.delta != nullptr ? reinterpret_cast<const float4*>(p.delta + row * p.hidden) : nullptr;
  const int num_vecs = static_cast<int>(p.hidden / 4);
  float4 x[kMaxVecsPerThread];
  float sum_sq = 0.0f;
#pragma unroll
  for (int k = 0; k < kMaxVecsPerThread; ++k) {
    const int i = threadIdx.x + k * kThreads;
    if (i < num_vecs) {
      float4 v = residual[i];
      if (delta != nullptr) {
        const float4 d = delta[i];
        v.x += d.x;
        v.y += d.y;
        v.z += d.z;
        v.w += d.w;
        residual[i] = v;
      }
      x[k] = v;
      sum_sq = SumSquares4(sum_sq, v);
    }
  }
  const float inv_rms = InvRms(BlockSum(sum_sq, scratch), p.hidden, p.eps);
  const T* weight = static_cast<const T*>(p.weight);
  const int64_t out_row = static_cast<int64_t>(blockIdx.x) * p.hidden;
  // Each thread writes only the values it read into x: out_f32 may be the residual itself.
#pragma unroll
  for (int k = 0; k < kMaxVecsPerThread; ++k) {
    const int i = threadIdx.x + k * kThreads;
    if (i < num_vecs) {
      const float vals[4] = {x[k].x, x[k].y, x[k].z, x[k].w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float y = NormedValue(vals[j], inv_rms, p.weight_offset, ToFloat(weight[4 * i + j]));
        if (p.out_f32 != nullptr) {
          p.out_f32[out_row + 4 * i + j] = y;
        } else {
          static_cast<T*>(p.out)[out_row + 4 * i + j] = FromFloat<T>(y);
        }
      }
    }
  }
}

}  // namespace

cudaError_t LaunchRmsNorm(const RmsNormParams& params, cudaStream_t stream) {
  if (params.residual == nullptr || params.weight == nullptr ||
      (params.out == nullptr) == (params.out_f32 == nullptr) ||
      (params.out_f32 != nullptr && params.row_index != nullptr) || params.hidden <= 0 ||
      params.hidden % 4 != 0 || params.hidden > int64_t{4} * kThreads * kMaxVecsPerThread ||
      params.num_rows < 0 || params.num_rows > INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  if (params.num_rows == 0) return cudaSuccess;
  cudaError_t err = cudaSuccess;
  CONVOY_DISPATCH_HALF(
      params.dtype,
      err = LaunchKernel(RmsNormKernel<T>, dim3(static_cast<unsigned>(params.num_rows)),
                         dim3(kThreads), 0, stream, params));
  return err;
}

}  // namespace convoy::kernels
