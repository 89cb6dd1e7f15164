#include "executor/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "common/simd.h"
#include "executor/cpu/ops.h"

namespace convoy {
namespace {

// scores[s] = q . K[:, s] for the first `n` of `block_size` keys of a transposed K block.
void BlockScores(const float* q, const float* kt, int32_t head_dim, int32_t block_size, int32_t n,
                 float* scores) {
#if defined(__AVX512F__)
  if (block_size == 16) {
    __m512 acc = _mm512_setzero_ps();
    for (int32_t d = 0; d < head_dim; ++d) {
      acc = _mm512_fmadd_ps(_mm512_set1_ps(q[d]), _mm512_loadu_ps(kt + d * 16), acc);
    }
    _mm512_mask_storeu_ps(scores, static_cast<__mmask16>((1u << n) - 1), acc);
    return;
  }
#endif
  for (int32_t s = 0; s < n; ++s) scores[s] = 0.0f;
  for (int32_t d = 0; d < head_dim; ++d) {
    const float qd = q[d];
    const float* row = kt + static_cast<int64_t>(d) * block_size;
    for (int32_t s = 0; s < n; ++s) scores[s] += qd * row[s];
  }
}

// out = sum over j < context of weights[j] * V[j], V read block by block. The sums stay in
// registers across keys (64 elements of the head at a time); adding into `out` key by key made
// every key wait on the previous key's store.
void WeightedValues(PagedKvCache* cache, const BlockId* blocks, int32_t layer, int32_t kv_head,
                    const float* weights, int32_t context, float* out) {
  const int32_t hd = cache->spec().head_dim;
  const int32_t block_size = cache->spec().block_size;
#if defined(__AVX512F__)
  if (hd % 16 == 0) {
    for (int32_t d0 = 0; d0 < hd; d0 += 64) {
      const int32_t lanes = std::min(64, hd - d0) / 16;
      __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                       _mm512_setzero_ps()};
      for (int32_t b = 0; b * block_size < context; ++b) {
        const float* v = cache->Value(blocks[b], layer, kv_head, 0) + d0;
        const int32_t n = std::min(block_size, context - b * block_size);
        for (int32_t s = 0; s < n; ++s, v += hd) {
          const __m512 w = _mm512_set1_ps(weights[b * block_size + s]);
          for (int32_t c = 0; c < lanes; ++c) {
            acc[c] = _mm512_fmadd_ps(w, _mm512_loadu_ps(v + 16 * c), acc[c]);
          }
        }
      }
      for (int32_t c = 0; c < lanes; ++c) _mm512_storeu_ps(out + d0 + 16 * c, acc[c]);
    }
    return;
  }
#endif
  std::memset(out, 0, sizeof(float) * hd);
  for (int32_t j = 0; j < context; ++j) {
    const float* v = cache->Value(blocks[j / block_size], layer, kv_head, j % block_size);
    for (int32_t d = 0; d < hd; ++d) out[d] += weights[j] * v[d];
  }
}

}  // namespace

PagedKvCache::PagedKvCache(const KvCacheSpec& spec) : spec_(spec) {
  const size_t bytes = static_cast<size_t>(spec.BytesPerBlock()) * spec.num_blocks;
  data_ = static_cast<float*>(std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64)));
  if (data_ == nullptr) throw std::bad_alloc();
}

PagedKvCache::~PagedKvCache() { std::free(data_); }

void PagedKvCache::Write(BlockId block, int32_t layer, int32_t head, int32_t slot, const float* k,
                         const float* v) {
  float* kt = KeyBlock(block, layer, head);
  for (int32_t d = 0; d < spec_.head_dim; ++d) kt[d * spec_.block_size + slot] = k[d];
  std::memcpy(Value(block, layer, head, slot), v, sizeof(float) * spec_.head_dim);
}

void PagedAttention(PagedKvCache* cache, int32_t layer, const AttentionShape& shape,
                    const AttentionRow* rows, int32_t num_rows) {
  // Work items: (row, token, head), flattened so small batches still spread over every thread.
  std::vector<int64_t> row_offsets(num_rows + 1, 0);
  for (int32_t r = 0; r < num_rows; ++r) {
    row_offsets[r + 1] = row_offsets[r] + static_cast<int64_t>(rows[r].len) * shape.num_heads;
  }
  const int64_t total = row_offsets[num_rows];
  // Multiply-adds of the whole pass, to decide whether waking the thread team pays.
  int64_t work = 0;
  for (int32_t r = 0; r < num_rows; ++r) {
    work += static_cast<int64_t>(rows[r].len) * shape.num_heads *
            (rows[r].start_pos + rows[r].len) * shape.head_dim * 2;
  }
  const int32_t group = shape.num_heads / shape.num_kv_heads;
  const int32_t hd = shape.head_dim;
  const int32_t block_size = cache->spec().block_size;

#pragma omp parallel if (work >= kMinParallelWork)
  {
    std::vector<float> scores;
#pragma omp for schedule(dynamic, 4)
    for (int64_t item = 0; item < total; ++item) {
      const int32_t r = static_cast<int32_t>(
          std::upper_bound(row_offsets.begin(), row_offsets.end(), item) - row_offsets.begin() - 1);
      const AttentionRow& row = rows[r];
      const int64_t local = item - row_offsets[r];
      const int32_t t = static_cast<int32_t>(local / shape.num_heads);
      const int32_t h = static_cast<int32_t>(local % shape.num_heads);
      const int32_t kv_head = h / group;
      const float* q = row.q + t * shape.q_stride + static_cast<int64_t>(h) * hd;
      float* out = row.out + t * shape.out_stride + static_cast<int64_t>(h) * hd;
      const int32_t context = row.start_pos + t + 1;

      scores.resize(context);
      for (int32_t b = 0; b * block_size < context; ++b) {
        BlockScores(q, cache->KeyBlock(row.blocks[b], layer, kv_head), hd, block_size,
                    std::min(block_size, context - b * block_size), scores.data() + b * block_size);
      }
      const float max_score = ScaleAndMax(scores.data(), context, shape.scale);
      const float inv_sum = 1.0f / ExpShiftedSum(scores.data(), context, max_score);
      for (int32_t j = 0; j < context; ++j) scores[j] *= inv_sum;
      WeightedValues(cache, row.blocks, layer, kv_head, scores.data(), context, out);
    }
  }
}

}  // namespace convoy
