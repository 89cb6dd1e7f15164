// Paged attention with one query token per work item: query i (at position positions[i] of row
// token_row[i]) attends to the keys at positions [0, positions[i]] of its row (with a sliding
// window W, the latest W of them: [positions[i] + 1 - W, positions[i]]), read through the row's
// block table; block table entries wholly before a query's keys are never read. Every query head of
// a GQA group shares the K and V it loads. With num_splits > 1 the context is cut into that many
// chunks processed in parallel and merged by their log-sum-exp, so that a small batch still fills
// the GPU; the last split of a work item to finish merges them, in the same launch. Used for decode
// rows; correct for any query whose own K and V are already in the cache.
#ifndef CONVOY_KERNELS_PAGED_ATTENTION_DECODE_CUH_
#define CONVOY_KERNELS_PAGED_ATTENTION_DECODE_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/half_type.cuh"
#include "kernels/kv_cache_layout.cuh"

namespace convoy::kernels {

inline constexpr int kMaxAttentionSplits = 32;
inline constexpr int kMaxGqaGroup = 8;

struct PagedAttentionDecodeParams {
  const void* q = nullptr;  // query heads at the start of each row, dtype
  int64_t q_row_stride = 0;
  void* out = nullptr;                 // [num_queries, num_q_heads * head_dim], dtype
  const int32_t* positions = nullptr;  // [num_queries]
  const int32_t* token_row = nullptr;  // [num_queries]
  const int32_t* row_block_offset = nullptr;
  const int32_t* block_ids = nullptr;
  KvCacheLayout cache;  // head_dim 64, 96, 128 or 256
  int64_t num_queries = 0;
  // When set, work item z is query query_list[z] (the step's other queries are left alone);
  // otherwise it is query z.
  const int32_t* query_list = nullptr;  // [num_queries]
  int32_t num_q_heads = 0;  // a multiple of cache.num_kv_heads, at most kMaxGqaGroup times it
  float scale = 1.0f;       // usually 1 / sqrt(head_dim)
  int32_t window = 0;       // a sliding window of this many keys, the query's own included; 0: none
  int32_t num_splits = 1;   // 1..kMaxAttentionSplits: the query's keys cut into that many chunks
  // Needed when num_splits > 1: num_queries * num_q_heads * num_splits entries.
  float* partial_out = nullptr;  // [entries, head_dim]
  float* partial_lse = nullptr;  // [entries]
  int64_t partial_capacity = 0;  // entries the two buffers hold
  // Also needed when num_splits > 1: one counter per work item and KV head
  // ([num_queries * cache.num_kv_heads]), all zero before the launch; the launch leaves them zero.
  uint32_t* split_counters = nullptr;
  HalfType dtype = HalfType::kBF16;
};

cudaError_t LaunchPagedAttentionDecode(const PagedAttentionDecodeParams& params,
                                       cudaStream_t stream);

// How many splits fill `num_sms` multiprocessors for `num_queries` x `num_kv_heads` work items.
int ChooseAttentionSplits(int64_t num_queries, int num_kv_heads, int num_sms);

}  // namespace convoy::kernels

#endif  // CONVOY_KERNELS_PAGED_ATTENTION_DECODE_CUH_
