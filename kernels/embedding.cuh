// Embedding gather: out[t, :] = table[token_ids[t], :], widened to fp32 (the residual stream).
#ifndef CONVOY_KERNELS_EMBEDDING_CUH_
#define CONVOY_KERNELS_EMBEDDING_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/half_type.cuh"

namespace convoy::kernels {

struct EmbeddingParams {
  const void* table = nullptr;         // [vocab, hidden], dtype
  const int32_t* token_ids = nullptr;  // [num_tokens], device memory
  float* out = nullptr;                // [num_tokens, hidden]
  int64_t num_tokens = 0;
  int64_t hidden = 0;  // a multiple of 8
  int64_t vocab = 0;   // ids outside [0, vocab) give a zero row
  float scale = 1.0f;  // multiplies every value (Gemma: sqrt(hidden))
  HalfType dtype = HalfType::kBF16;
};

cudaError_t LaunchEmbedding(const EmbeddingParams& params, cudaStream_t stream);

}  // namespace convoy::kernels

#endif  // CONVOY_KERNELS_EMBEDDING_CUH_
