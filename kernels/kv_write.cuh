// Writes each token's K and V (from the fused QKV activations) into its slot of the paged cache:
// the token at position p of its row goes to block block_ids[row_block_offset[row] + p /
// block_size], slot p % block_size.
#ifndef CONVOY_KERNELS_KV_WRITE_CUH_
#define CONVOY_KERNELS_KV_WRITE_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/half_type.cuh"
#include "kernels/kv_cache_layout.cuh"

namespace convoy::kernels {

struct KvWriteParams {
  const void* qkv = nullptr;  // [num_tokens, row_stride], dtype
  int64_t row_stride = 0;
  int64_t k_column = 0;  // first K element in a QKV row; V follows K's num_kv_heads * head_dim
  const int32_t* positions = nullptr;         // [num_tokens]
  const int32_t* token_row = nullptr;         // [num_tokens]: the row each token belongs to
  const int32_t* row_block_offset = nullptr;  // [rows]: where the row's blocks start in block_ids
  const int32_t* block_ids = nullptr;
  KvCacheLayout cache;
  int64_t num_tokens = 0;
  HalfType dtype = HalfType::kBF16;
};

cudaError_t LaunchKvWrite(const KvWriteParams& params, cudaStream_t stream);

// What LaunchKvWrite accepts (the rotary kernel's fused write checks the same).
bool ValidKvWriteParams(const KvWriteParams& params);

}  // namespace convoy::kernels

#endif  // CONVOY_KERNELS_KV_WRITE_CUH_
