// Attention over the paged KV cache on the CPU. K and V are read through each row's block table;
// nothing is gathered into a contiguous per-sequence copy.
//
// Cache layout: for block b, layer l, k|v, kv head h a region at
// (((b * layers + l) * 2 + kv) * kv_heads + h) * region bytes, which holds block_size x head_dim
// elements of the spec's dtype (fp32; bf16 as its uint16_t bits; int8), then, for kInt8, the
// block_size slots' bf16 scales. V is stored by slot ([slot][d]); K transposed ([d][slot]), so
// that the scores of block_size keys are one chain of vector multiply-adds, with no horizontal sum
// per key. A slot's int8 scale multiplies its score (K) or its softmax weight (V) once, outside the
// inner loops, which convert the stored elements to fp32 and multiply-add as for fp32.
#ifndef CONVOY_EXECUTOR_CPU_ATTENTION_H_
#define CONVOY_EXECUTOR_CPU_ATTENTION_H_

#include <cstdint>

#include "kv/block_allocator.h"
#include "kv/kv_cache_spec.h"

namespace convoy {

class PagedKvCache {
 public:
  // REQUIRES: spec.dtype is kF32, kBF16 or kInt8.
  explicit PagedKvCache(const KvCacheSpec& spec);
  ~PagedKvCache();
  PagedKvCache(const PagedKvCache&) = delete;
  PagedKvCache& operator=(const PagedKvCache&) = delete;

  const KvCacheSpec& spec() const { return spec_; }
  // K of one block and KV head: [head_dim][block_size] elements of type T, the spec's dtype
  // (float, uint16_t for bf16, int8_t).
  template <typename T>
  T* KeyBlock(BlockId block, int32_t layer, int32_t head) const {
    return reinterpret_cast<T*>(Region(block, layer, 0, head));
  }
  // V of one block and KV head: [block_size][head_dim] elements of type T.
  template <typename T>
  T* ValueBlock(BlockId block, int32_t layer, int32_t head) const {
    return reinterpret_cast<T*>(Region(block, layer, 1, head));
  }
  // kInt8: the bf16 scales of one block's K (kv 0) or V (kv 1) of a KV head, one per slot.
  uint16_t* Scales(BlockId block, int32_t layer, int32_t kv, int32_t head) const {
    return reinterpret_cast<uint16_t*>(Region(block, layer, kv, head) +
                                       int64_t{spec_.block_size} * spec_.head_dim);
  }
  // Stores one token's K (head_dim floats) and V into their slot, rounded to the spec's dtype.
  // Only that slot changes.
  void Write(BlockId block, int32_t layer, int32_t head, int32_t slot, const float* k,
             const float* v);
  // The values one slot holds, as attention reads them (dequantized): head_dim floats each.
  void Read(BlockId block, int32_t layer, int32_t head, int32_t slot, float* k, float* v) const;

 private:
  uint8_t* Region(BlockId block, int32_t layer, int32_t kv, int32_t head) const {
    const int64_t index =
        ((static_cast<int64_t>(block) * spec_.num_layers + layer) * 2 + kv) * spec_.num_kv_heads +
        head;
    return data_ + index * region_bytes_;
  }

  KvCacheSpec spec_;
  int64_t region_bytes_;  // block_size slots of one k|v and KV head, scales included
  uint8_t* data_ = nullptr;
};

// One row of a step as attention sees it: `len` query tokens at positions start_pos.. whose K and V
// are already written to the cache.
struct AttentionRow {
  const float* q;  // [len, q_stride], heads of head_dim floats, rope applied
  float* out;      // [len, out_stride]
  int32_t len;
  int32_t start_pos;
  const BlockId* blocks;
};

struct AttentionShape {
  int32_t num_heads;
  int32_t num_kv_heads;
  int32_t head_dim;
  int64_t q_stride;
  int64_t out_stride;
  float scale;  // 1 / sqrt(head_dim)
  // A sliding window: each token attends to the latest `window` positions, its own included; 0:
  // to every earlier position. K and V blocks wholly before a row's first token's window are
  // never read (the block table may hold anything there).
  int32_t window = 0;
  // Whether one work item takes several queries that read the same K and V: the query heads of
  // one KV head's group, and a few consecutive tokens of a row (a prompt chunk's), so that each
  // K and V block is read once for all of them and their scores are independent chains of
  // multiply-adds. false: one work item per token and head (the baseline for benchmarks). The
  // results are the same either way, bit for bit.
  bool share_kv = true;
};

// For each row, token t and head h: softmax over context positions [0, start_pos + t] (causal),
// or its last `window` positions, of q . k * scale, times V. Parallel over rows, KV heads and
// tiles of tokens.
void PagedAttention(PagedKvCache* cache, int32_t layer, const AttentionShape& shape,
                    const AttentionRow* rows, int32_t num_rows);

}  // namespace convoy

#endif  // CONVOY_EXECUTOR_CPU_ATTENTION_H_
