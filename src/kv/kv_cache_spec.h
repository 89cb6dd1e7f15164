// The shape of the paged KV cache, shared by the allocator's owner and the executors.
#ifndef CONVOY_KV_KV_CACHE_SPEC_H_
#define CONVOY_KV_KV_CACHE_SPEC_H_

#include <cstdint>

namespace convoy {

struct KvCacheSpec {
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 16;  // tokens per block
  int32_t bytes_per_element = 4;
  int32_t num_blocks = 0;

  // K and V of every layer for block_size tokens.
  int64_t BytesPerBlock() const {
    return int64_t{2} * num_layers * num_kv_heads * head_dim * block_size * bytes_per_element;
  }
  // How many blocks a memory budget holds.
  int32_t BlocksForBudget(int64_t budget_bytes) const {
    return static_cast<int32_t>(budget_bytes / BytesPerBlock());
  }
};

}  // namespace convoy

#endif  // CONVOY_KV_KV_CACHE_SPEC_H_
