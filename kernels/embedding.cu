#include <algorithm>

#include "kernels/device_utils.cuh"
#include "kernels/embedding.cuh"

namespace convoy::kernels {
namespace {

template <typename T>
__global__ void EmbeddingKernel(EmbeddingParams p) {
  GridDependencyWait();
  const int64_t token = blockIdx.x;
  const int32_t id = p.token_ids[token];
  float* out = p.out + token * p.hidden;
  const bool valid = id >= 0 && id < p.vocab;
  const auto* row = reinterpret_cast<const Pack8<T>*>(static_cast<const T*>(p.table) +
                                                      (valid ? id : 0) * p.hidden);
  for (int64_t i = threadIdx.x; i < p.hidden / 8; i += blockDim.x) {
    Pack8<T> v = row[i];
    float4 lo, hi;
    if (valid) {
      const float s = p.scale;
      lo = make_float4(ToFloat(v.v[0]) * s, ToFloat(v.v[1]) * s, ToFloat(v.v[2]) * s,
                       ToFloat(v.v[3]) * s);
      hi = make_float4(ToFloat(v.v[4]) * s, ToFloat(v.v[5]) * s, ToFloat(v.v[6]) * s,
                       ToFloat(v.v[7]) * s);
    } else {
      lo = hi = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    reinterpret_cast<float4*>(out)[2 * i] = lo;
    reinterpret_cast<float4*>(out)[2 * i + 1] = hi;
  }
}

}  // namespace

cudaError_t LaunchEmbedding(const EmbeddingParams& params, cudaStream_t stream) {
  if (params.table == nullptr || params.token_ids == nullptr || params.out == nullptr ||
      params.hidden <= 0 || params.hidden % 8 != 0 || params.vocab <= 0 || params.num_tokens < 0 ||
      params.num_tokens > INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  if (params.num_tokens == 0) return cudaSuccess;
  const EmbeddingParams& p = params;
  const int threads = static_cast<int>(std::min<int64_t>(256, (p.hidden / 8 + 31) / 32 * 32));
  cudaError_t err = cudaSuccess;
  CONVOY_DISPATCH_HALF(
      p.dtype, err = LaunchKernel(EmbeddingKernel<T>, dim3(static_cast<unsigned>(p.num_tokens)),
                                  dim3(threads), 0, stream, p));
  return err;
}

}  // namespace convoy::kernels
