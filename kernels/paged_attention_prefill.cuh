// Paged attention for prompt rows. A tile is up to kPrefillTile consecutive queries of one row
// (positions p0 .. p0+n-1); each attends causally to the keys of its row at positions [0, own]
// (with a sliding window W, the latest W of them: [own + 1 - W, own]), read through the row's
// block table; block table entries wholly before the tile's first query's keys are never read. One
// block computes one tile for one query head: the tile's queries stay in shared memory while the
// keys go by in tiles of 64 (online softmax in fp32), so K and V are read once per 64 queries
// instead of once per query as the decode kernel does. The queries' own K and V must already be in
// the cache (kv_write runs first in the same step).
#ifndef CONVOY_KERNELS_PAGED_ATTENTION_PREFILL_CUH_
#define CONVOY_KERNELS_PAGED_ATTENTION_PREFILL_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/half_type.cuh"
#include "kernels/kv_cache_layout.cuh"

namespace convoy::kernels {

inline constexpr int kPrefillTile = 64;

struct PagedAttentionPrefillParams {
  const void* q = nullptr;  // query heads at the start of each token's row of q, dtype
  int64_t q_row_stride = 0;
  void* out = nullptr;                 // [tokens, num_q_heads * head_dim], dtype
  const int32_t* positions = nullptr;  // [tokens]
  const int32_t* token_row = nullptr;  // [tokens]
  const int32_t* row_block_offset = nullptr;
  const int32_t* block_ids = nullptr;
  // [num_tiles][2]: the tile's first token and its number of tokens (1..kPrefillTile), all of one
  // row at consecutive positions.
  const int32_t* tiles = nullptr;
  int64_t num_tiles = 0;
  KvCacheLayout cache;      // head_dim 64, 96, 128 or 256
  int32_t num_q_heads = 0;  // a multiple of cache.num_kv_heads
  float scale = 1.0f;
  int32_t window = 0;  // a sliding window of this many keys, the query's own included; 0: none
  HalfType dtype = HalfType::kBF16;
  bool tensor_cores = true;  // false: the CUDA-core kernel
};

// INVALID_VALUE for a shape it does not take; an error from the launch when the tile's shared
// memory (PagedAttentionPrefillSharedBytes) exceeds what the device gives a block.
cudaError_t LaunchPagedAttentionPrefill(const PagedAttentionPrefillParams& params,
                                        cudaStream_t stream);

// The dynamic shared memory one tile takes at `head_dim` with the tensor-core or the CUDA-core
// kernel; 0 for a head_dim the kernels do not take. At 256 it is more than an A100 or an Ada GPU
// gives a block (cudaDevAttrMaxSharedMemoryPerBlockOptin): their prompts go through the decode
// kernel instead.
int64_t PagedAttentionPrefillSharedBytes(int head_dim, bool tensor_cores);

// The tensor-core kernel, for LaunchPagedAttentionPrefill, which checks the parameters first, and
// its shared memory (0: a head_dim it does not take).
cudaError_t LaunchPagedAttentionPrefillMma(const PagedAttentionPrefillParams& params,
                                           cudaStream_t stream);
int64_t PagedAttentionPrefillMmaSharedBytes(int head_dim);

// Smem<kHeadDim>::kBytes at the head dims the prefill kernels take; 0 at any other.
template <template <int> class Smem>
int64_t PrefillSharedBytesAt(int head_dim) {
  switch (head_dim) {
    case 64:
      return static_cast<int64_t>(Smem<64>::kBytes);
    case 96:
      return static_cast<int64_t>(Smem<96>::kBytes);
    case 128:
      return static_cast<int64_t>(Smem<128>::kBytes);
    case 256:
      return static_cast<int64_t>(Smem<256>::kBytes);
    default:
      return 0;
  }
}

}  // namespace convoy::kernels

#endif  // CONVOY_KERNELS_PAGED_ATTENTION_PREFILL_CUH_
