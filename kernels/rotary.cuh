// Rotary position embedding (the Hugging Face Llama "rotate half" form), in place on the query
// and key heads of the fused QKV activations. For pair i < head_dim/2 of a head at position p:
// (x[i], x[i + d/2]) becomes (x[i] c - x[i + d/2] s, x[i + d/2] c + x[i] s), c, s of p *
// inv_freq[i].
#ifndef CONVOY_KERNELS_ROTARY_CUH_
#define CONVOY_KERNELS_ROTARY_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/half_type.cuh"

namespace convoy::kernels {

struct RotaryParams {
  void* qkv = nullptr;  // [num_tokens, row_stride], dtype: query heads, then key heads, then values
  int64_t row_stride = 0;
  const int32_t* positions = nullptr;  // [num_tokens]
  const float* inv_freq = nullptr;     // [head_dim / 2], scaling already applied
  int64_t num_tokens = 0;
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;  // even
  HalfType dtype = HalfType::kBF16;
};

cudaError_t LaunchRotary(const RotaryParams& params, cudaStream_t stream);

}  // namespace convoy::kernels

#endif  // CONVOY_KERNELS_ROTARY_CUH_
