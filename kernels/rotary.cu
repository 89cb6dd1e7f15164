#include "kernels/device_utils.cuh"
#include "kernels/rotary.cuh"

namespace convoy::kernels {
namespace {

template <typename T>
__global__ void RotaryKernel(RotaryParams p) {
  const int64_t token = blockIdx.x;
  const int half_dim = p.head_dim / 2;
  const int num_pairs = (p.num_q_heads + p.num_kv_heads) * half_dim;
  const float pos = static_cast<float>(p.positions[token]);
  T* row = static_cast<T*>(p.qkv) + token * p.row_stride;
  for (int pair = threadIdx.x; pair < num_pairs; pair += blockDim.x) {
    const int head = pair / half_dim;
    const int i = pair - head * half_dim;
    float s, c;
    sincosf(pos * p.inv_freq[i], &s, &c);
    T* x = row + static_cast<int64_t>(head) * p.head_dim;
    const float a = ToFloat(x[i]);
    const float b = ToFloat(x[i + half_dim]);
    x[i] = FromFloat<T>(a * c - b * s);
    x[i + half_dim] = FromFloat<T>(b * c + a * s);
  }
}

}  // namespace

cudaError_t LaunchRotary(const RotaryParams& params, cudaStream_t stream) {
  const RotaryParams& p = params;
  if (p.qkv == nullptr || p.positions == nullptr || p.inv_freq == nullptr || p.head_dim <= 0 ||
      p.head_dim % 2 != 0 || p.num_q_heads <= 0 || p.num_kv_heads <= 0 ||
      p.row_stride < int64_t{p.num_q_heads + p.num_kv_heads} * p.head_dim || p.num_tokens < 0 ||
      p.num_tokens > INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  if (p.num_tokens == 0) return cudaSuccess;
  CONVOY_DISPATCH_HALF(p.dtype, RotaryKernel<T><<<p.num_tokens, 256, 0, stream>>>(p));
  return cudaGetLastError();
}

}  // namespace convoy::kernels
