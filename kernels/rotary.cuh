// Rotary position embedding (the Hugging Face Llama "rotate half" form), in place on the query
// and key heads of the fused QKV activations. For pair i < r/2 of a head at position p, r the
// rotary dimension (head_dim, or fewer with partial rotary embeddings: the rest of the head passes
// unchanged): (x[i], x[i + r/2]) becomes (x[i] c - x[i + r/2] s, x[i + r/2] c + x[i] s), c, s the
// cos and sin of p * inv_freq[i] times cos_sin_scale (LongRoPE's attention factor). Before it, in
// the order the families apply them: Qwen2's biases added to the queries, keys and values, then
// Qwen3's RMS norm over each query and key head (each value rounded to the 16-bit type after each
// stage).
#ifndef CONVOY_KERNELS_ROTARY_CUH_
#define CONVOY_KERNELS_ROTARY_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/half_type.cuh"
#include "kernels/kv_write.cuh"

namespace convoy::kernels {

struct RotaryParams {
  void* qkv = nullptr;  // [num_tokens, row_stride], dtype: query heads, then key heads, then values
  int64_t row_stride = 0;
  const int32_t* positions = nullptr;  // [num_tokens]
  const float* inv_freq = nullptr;     // [rotary_dim / 2], scaling already applied
  int64_t num_tokens = 0;
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;    // even
  int32_t rotary_dim = 0;  // even, at most head_dim; 0: head_dim
  float cos_sin_scale = 1.0f;
  HalfType dtype = HalfType::kBF16;
  const void* qkv_bias = nullptr;  // [row_stride's first (q + 2 kv) * head_dim], dtype; or null
  // [head_dim] each, dtype: every query head's and every key head's norm weight; both or neither.
  const void* q_norm = nullptr;
  const void* k_norm = nullptr;
  float norm_eps = 1e-6f;
  float norm_weight_offset = 0.0f;  // added to each norm weight (Gemma 3: 1)
  // When set, each token's rotated K and its V then go into the paged cache as LaunchKvWrite
  // would write them (kv_write's qkv, row_stride, num_tokens and dtype must be this launch's),
  // in the same kernel: one launch per layer fewer at decode.
  bool write_kv = false;
  KvWriteParams kv_write;
};

cudaError_t LaunchRotary(const RotaryParams& params, cudaStream_t stream);

}  // namespace convoy::kernels

#endif  // CONVOY_KERNELS_ROTARY_CUH_
