#include "kernels/device_utils.cuh"
#include "kernels/kv_write_device.cuh"
#include "kernels/rotary.cuh"

namespace convoy::kernels {
namespace {

template <typename T>
__global__ void RotaryKernel(RotaryParams p) {
  GridDependencyWait();
  const int64_t token = blockIdx.x;
  const int half_dim = (p.rotary_dim > 0 ? p.rotary_dim : p.head_dim) / 2;
  const int num_pairs = (p.num_q_heads + p.num_kv_heads) * half_dim;
  const float pos = static_cast<float>(p.positions[token]);
  T* row = static_cast<T*>(p.qkv) + token * p.row_stride;
  if (p.qkv_bias != nullptr) {
    const T* bias = static_cast<const T*>(p.qkv_bias);
    const int n = (p.num_q_heads + 2 * p.num_kv_heads) * p.head_dim;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      row[i] = FromFloat<T>(ToFloat(row[i]) + ToFloat(bias[i]));
    }
    __syncthreads();
  }
  if (p.q_norm != nullptr) {
    // One warp per head: x * rsqrt(mean(x^2) + eps) * weight.
    const int lane = threadIdx.x & 31;
    for (int head = threadIdx.x >> 5; head < p.num_q_heads + p.num_kv_heads;
         head += blockDim.x >> 5) {
      T* x = row + static_cast<int64_t>(head) * p.head_dim;
      const T* w = static_cast<const T*>(head < p.num_q_heads ? p.q_norm : p.k_norm);
      float squares = 0.0f;
      for (int i = lane; i < p.head_dim; i += 32) {
        const float v = ToFloat(x[i]);
        squares += v * v;
      }
      const float inv = rsqrtf(WarpSum(squares) / static_cast<float>(p.head_dim) + p.norm_eps);
      for (int i = lane; i < p.head_dim; i += 32) {
        x[i] = FromFloat<T>(ToFloat(x[i]) * inv * (p.norm_weight_offset + ToFloat(w[i])));
      }
    }
    __syncthreads();
  }
  for (int pair = threadIdx.x; pair < num_pairs; pair += blockDim.x) {
    const int head = pair / half_dim;
    const int i = pair - head * half_dim;
    float s, c;
    sincosf(pos * p.inv_freq[i], &s, &c);
    s *= p.cos_sin_scale;
    c *= p.cos_sin_scale;
    T* x = row + static_cast<int64_t>(head) * p.head_dim;
    const float a = ToFloat(x[i]);
    const float b = ToFloat(x[i + half_dim]);
    x[i] = FromFloat<T>(a * c - b * s);
    x[i + half_dim] = FromFloat<T>(b * c + a * s);
  }
  if (p.write_kv) {
    __syncthreads();  // the block's rotated K is written before it is copied
    WriteTokenKv<T>(p.kv_write, token);
  }
}

}  // namespace

cudaError_t LaunchRotary(const RotaryParams& params, cudaStream_t stream) {
  const RotaryParams& p = params;
  if (p.qkv == nullptr || p.positions == nullptr || p.inv_freq == nullptr || p.head_dim <= 0 ||
      p.head_dim % 2 != 0 || p.rotary_dim < 0 || p.rotary_dim % 2 != 0 ||
      p.rotary_dim > p.head_dim || !(p.cos_sin_scale > 0.0f) || p.num_q_heads <= 0 ||
      p.num_kv_heads <= 0 || p.row_stride < int64_t{p.num_q_heads + p.num_kv_heads} * p.head_dim ||
      p.num_tokens < 0 || p.num_tokens > INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  if ((p.q_norm == nullptr) != (p.k_norm == nullptr) || !(p.norm_eps > 0.0f)) {
    return cudaErrorInvalidValue;
  }
  if (p.write_kv &&
      (!ValidKvWriteParams(p.kv_write) || p.kv_write.qkv != p.qkv ||
       p.kv_write.row_stride != p.row_stride || p.kv_write.num_tokens != p.num_tokens ||
       p.kv_write.dtype != p.dtype || p.kv_write.cache.head_dim != p.head_dim ||
       p.kv_write.cache.num_kv_heads != p.num_kv_heads ||
       p.kv_write.k_column != int64_t{p.num_q_heads} * p.head_dim)) {
    return cudaErrorInvalidValue;
  }
  if (p.num_tokens == 0) return cudaSuccess;
  cudaError_t err = cudaSuccess;
  CONVOY_DISPATCH_HALF(
      p.dtype, err = LaunchKernel(RotaryKernel<T>, dim3(static_cast<unsigned>(p.num_tokens)),
                                  dim3(256), 0, stream, p));
  return err;
}

}  // namespace convoy::kernels
