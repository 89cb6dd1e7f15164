#include "executor/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#if defined(__AVX512F__)
#include "common/simd.h"
#include "executor/cpu/ops.h"
#endif

namespace convoy {
namespace {

float Dot(const float* a, const float* b, int32_t n) {
#if defined(__AVX512F__)
  if (n % 16 == 0) {
    __m512 acc = _mm512_setzero_ps();
    for (int32_t i = 0; i < n; i += 16) {
      acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
    }
    return HorizontalSum(acc);
  }
#endif
  float sum = 0.0f;
  for (int32_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// y += a * x
void Axpy(float a, const float* x, float* y, int32_t n) {
#if defined(__AVX512F__)
  if (n % 16 == 0) {
    const __m512 va = _mm512_set1_ps(a);
    for (int32_t i = 0; i < n; i += 16) {
      _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    }
    return;
  }
#endif
  for (int32_t i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace

PagedKvCache::PagedKvCache(const KvCacheSpec& spec) : spec_(spec) {
  const size_t bytes = static_cast<size_t>(spec.BytesPerBlock()) * spec.num_blocks;
  data_ = static_cast<float*>(std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64)));
  if (data_ == nullptr) throw std::bad_alloc();
}

PagedKvCache::~PagedKvCache() { std::free(data_); }

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
      float max_score = -INFINITY;
      for (int32_t j = 0; j < context; ++j) {
        const float* k = cache->At(row.blocks[j / block_size], layer, 0, kv_head, j % block_size);
        scores[j] = Dot(q, k, hd) * shape.scale;
        max_score = std::max(max_score, scores[j]);
      }
      float sum = 0.0f;
      for (int32_t j = 0; j < context; ++j) {
        scores[j] = std::exp(scores[j] - max_score);
        sum += scores[j];
      }
      std::memset(out, 0, sizeof(float) * hd);
      const float inv_sum = 1.0f / sum;
      for (int32_t j = 0; j < context; ++j) {
        const float* v = cache->At(row.blocks[j / block_size], layer, 1, kv_head, j % block_size);
        Axpy(scores[j] * inv_sum, v, out, hd);
      }
    }
  }
}

}  // namespace convoy
