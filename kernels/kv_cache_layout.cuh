// Where K and V of one layer live in the paged cache. A block holds block_size tokens of every
// layer; inside one layer's part, K then V, each laid out [kv_head][slot][head_dim]. Element
// offsets (not bytes) from `base`, in the cache's 16-bit type.
#ifndef CONVOY_KERNELS_KV_CACHE_LAYOUT_CUH_
#define CONVOY_KERNELS_KV_CACHE_LAYOUT_CUH_

#include <cstdint>

#include "kernels/half_type.cuh"

namespace convoy::kernels {

struct KvCacheLayout {
  void* base = nullptr;
  int64_t block_stride = 0;  // elements from one block to the next
  int64_t layer_offset = 0;  // elements from a block's start to this layer's K
  int64_t v_offset = 0;      // elements from a layer's K to its V
  int32_t block_size = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t num_blocks = 0;  // block ids must lie in [0, num_blocks)
};

// Element offset of K (is_v false) or V of token `slot` in `block`, head `head`.
CONVOY_HOST_DEVICE inline int64_t KvOffset(const KvCacheLayout& layout, int32_t block, int32_t head,
                                           int32_t slot, bool is_v) {
  return static_cast<int64_t>(block) * layout.block_stride + layout.layer_offset +
         (is_v ? layout.v_offset : 0) +
         (static_cast<int64_t>(head) * layout.block_size + slot) * layout.head_dim;
}

}  // namespace convoy::kernels

#endif  // CONVOY_KERNELS_KV_CACHE_LAYOUT_CUH_
