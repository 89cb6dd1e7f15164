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

#if defined(__AVX512F__)
// Scores of N queries against the first `n` keys of one transposed K block of 16 keys:
// scores[i * stride + s] = q_i . K[:, s], the queries contiguous in `q` ([N][head_dim]). Each row
// of K is loaded once for all N; the N sums are independent chains, so the multiply-adds are not
// held up by one another's latency. Per query the sum runs over d in order, as BlockScores'.
template <int N>
void BlockScores16(const float* q, const float* kt, int32_t head_dim, int32_t n, float* scores,
                   int64_t stride) {
  __m512 acc[N];
  for (int i = 0; i < N; ++i) acc[i] = _mm512_setzero_ps();
  for (int32_t d = 0; d < head_dim; ++d) {
    const __m512 k = _mm512_loadu_ps(kt + d * 16);
    for (int i = 0; i < N; ++i) {
      acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(q[i * head_dim + d]), k, acc[i]);
    }
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1);
  for (int i = 0; i < N; ++i) _mm512_mask_storeu_ps(scores + i * stride, mask, acc[i]);
}

// The most queries one BlockScores16 takes: N sums and a row of K in registers.
constexpr int kScoreQueries = 12;

void BlockScoresMany(int count, const float* q, const float* kt, int32_t head_dim, int32_t n,
                     float* scores, int64_t stride) {
  switch (count) {
#define CONVOY_SCORES_CASE(N)                             \
  case N:                                                 \
    BlockScores16<N>(q, kt, head_dim, n, scores, stride); \
    return;
    CONVOY_SCORES_CASE(1)
    CONVOY_SCORES_CASE(2)
    CONVOY_SCORES_CASE(3)
    CONVOY_SCORES_CASE(4)
    CONVOY_SCORES_CASE(5)
    CONVOY_SCORES_CASE(6)
    CONVOY_SCORES_CASE(7)
    CONVOY_SCORES_CASE(8)
    CONVOY_SCORES_CASE(9)
    CONVOY_SCORES_CASE(10)
    CONVOY_SCORES_CASE(11)
    CONVOY_SCORES_CASE(12)
#undef CONVOY_SCORES_CASE
    default:
      break;
  }
}

// out_i += sum over j < context of weights[i * stride + j] * V[j] for N queries over 64 elements
// of the head starting at d0, V read block by block once for all N (zero weights past a query's
// own context leave its sums as they are). Per query the sums run over j in order, as
// WeightedValues'.
template <int N>
void WeightedValues64(PagedKvCache* cache, const BlockId* blocks, int32_t layer, int32_t kv_head,
                      const float* weights, int64_t stride, int32_t context, int32_t d0,
                      float* const* out) {
  const int32_t hd = cache->spec().head_dim;
  const int32_t block_size = cache->spec().block_size;
  __m512 acc[N][4];
  for (int i = 0; i < N; ++i) {
    for (int c = 0; c < 4; ++c) acc[i][c] = _mm512_setzero_ps();
  }
  for (int32_t b = 0; b * block_size < context; ++b) {
    const float* v = cache->Value(blocks[b], layer, kv_head, 0) + d0;
    const int32_t n = std::min(block_size, context - b * block_size);
    const float* w = weights + static_cast<int64_t>(b) * block_size;
    for (int32_t s = 0; s < n; ++s, v += hd) {
      const __m512 v0 = _mm512_loadu_ps(v), v1 = _mm512_loadu_ps(v + 16),
                   v2 = _mm512_loadu_ps(v + 32), v3 = _mm512_loadu_ps(v + 48);
      for (int i = 0; i < N; ++i) {
        const __m512 wi = _mm512_set1_ps(w[i * stride + s]);
        acc[i][0] = _mm512_fmadd_ps(wi, v0, acc[i][0]);
        acc[i][1] = _mm512_fmadd_ps(wi, v1, acc[i][1]);
        acc[i][2] = _mm512_fmadd_ps(wi, v2, acc[i][2]);
        acc[i][3] = _mm512_fmadd_ps(wi, v3, acc[i][3]);
      }
    }
  }
  for (int i = 0; i < N; ++i) {
    for (int c = 0; c < 4; ++c) _mm512_storeu_ps(out[i] + d0 + 16 * c, acc[i][c]);
  }
}

// The most queries one WeightedValues64 takes: 4N sums and 4 registers of V.
constexpr int kValueQueries = 6;

void WeightedValuesMany(int count, PagedKvCache* cache, const BlockId* blocks, int32_t layer,
                        int32_t kv_head, const float* weights, int64_t stride, int32_t context,
                        int32_t d0, float* const* out) {
  switch (count) {
#define CONVOY_VALUES_CASE(N)                                                              \
  case N:                                                                                  \
    WeightedValues64<N>(cache, blocks, layer, kv_head, weights, stride, context, d0, out); \
    return;
    CONVOY_VALUES_CASE(1)
    CONVOY_VALUES_CASE(2)
    CONVOY_VALUES_CASE(3)
    CONVOY_VALUES_CASE(4)
    CONVOY_VALUES_CASE(5)
    CONVOY_VALUES_CASE(6)
#undef CONVOY_VALUES_CASE
    default:
      break;
  }
}
#endif  // __AVX512F__

// One work item: `num_tokens` consecutive tokens from `first_token` of a row, and `num_heads`
// query heads from `first_head`, all of KV head `kv_head`.
struct AttentionItem {
  int32_t row;
  int32_t kv_head;
  int32_t first_token;
  int32_t num_tokens;
  int32_t first_head;
  int32_t num_heads;
};

// Queries one item aims at when it may share K and V: a score kernel's worth.
constexpr int32_t kScoreQueriesPerItem = 12;

// The queries of one item, their scores and their outputs; reused by a thread across items.
struct ItemScratch {
  std::vector<float> q;       // [queries][head_dim], contiguous for the score kernels
  std::vector<float> scores;  // [queries][stride]: scores, then softmax weights
  std::vector<float*> out;    // per query
  std::vector<int32_t> context;
};

void RunItem(PagedKvCache* cache, int32_t layer, const AttentionShape& shape,
             const AttentionRow& row, const AttentionItem& item, ItemScratch* scratch) {
  const int32_t hd = shape.head_dim;
  const int32_t block_size = cache->spec().block_size;
  const int32_t queries = item.num_tokens * item.num_heads;
  // Every query's context ends within the item's last token's: scores and weights are computed
  // up to it, a query's weights past its own context set to 0.
  const int32_t longest = row.start_pos + item.first_token + item.num_tokens;
  const int64_t stride = (longest + 15) / 16 * 16;
  scratch->q.resize(static_cast<size_t>(queries) * hd);
  scratch->scores.resize(static_cast<size_t>(queries) * stride);
  scratch->out.resize(queries);
  scratch->context.resize(queries);
  for (int32_t t = 0; t < item.num_tokens; ++t) {
    for (int32_t h = 0; h < item.num_heads; ++h) {
      const int32_t i = t * item.num_heads + h;
      const int32_t token = item.first_token + t;
      const int64_t head_offset = static_cast<int64_t>(item.first_head + h) * hd;
      std::memcpy(&scratch->q[static_cast<size_t>(i) * hd],
                  row.q + token * shape.q_stride + head_offset, sizeof(float) * hd);
      scratch->out[i] = row.out + token * shape.out_stride + head_offset;
      scratch->context[i] = row.start_pos + token + 1;
    }
  }
  const float* q = scratch->q.data();
  float* scores = scratch->scores.data();

  for (int32_t b = 0; b * block_size < longest; ++b) {
    const float* kt = cache->KeyBlock(row.blocks[b], layer, item.kv_head);
    const int32_t n = std::min(block_size, longest - b * block_size);
#if defined(__AVX512F__)
    if (block_size == 16) {
      for (int32_t i = 0; i < queries; i += kScoreQueries) {
        BlockScoresMany(std::min(kScoreQueries, queries - i), q + static_cast<int64_t>(i) * hd, kt,
                        hd, n, scores + i * stride + b * block_size, stride);
      }
      continue;
    }
#endif
    for (int32_t i = 0; i < queries; ++i) {
      BlockScores(q + static_cast<int64_t>(i) * hd, kt, hd, block_size, n,
                  scores + i * stride + b * block_size);
    }
  }
  for (int32_t i = 0; i < queries; ++i) {
    float* w = scores + i * stride;
    const int32_t context = scratch->context[i];
    const float max_score = ScaleAndMax(w, context, shape.scale);
    const float inv_sum = 1.0f / ExpShiftedSum(w, context, max_score);
    for (int32_t j = 0; j < context; ++j) w[j] *= inv_sum;
    std::fill(w + context, w + longest, 0.0f);
  }
#if defined(__AVX512F__)
  if (hd % 64 == 0) {
    for (int32_t i = 0; i < queries; i += kValueQueries) {
      for (int32_t d0 = 0; d0 < hd; d0 += 64) {
        WeightedValuesMany(std::min(kValueQueries, queries - i), cache, row.blocks, layer,
                           item.kv_head, scores + i * stride, stride, longest, d0,
                           scratch->out.data() + i);
      }
    }
    return;
  }
#endif
  for (int32_t i = 0; i < queries; ++i) {
    WeightedValues(cache, row.blocks, layer, item.kv_head, scores + i * stride, scratch->context[i],
                   scratch->out[i]);
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
  const int32_t group = shape.num_heads / shape.num_kv_heads;
  // Tokens per item: enough that the item's queries (tokens x the group's heads) fill the score
  // kernel; one when a group alone does.
  const int32_t tile = shape.share_kv ? std::max(1, kScoreQueriesPerItem / group) : 1;
  std::vector<AttentionItem> items;
  // Multiply-adds of the whole pass, to decide whether waking the thread team pays.
  int64_t work = 0;
  for (int32_t r = 0; r < num_rows; ++r) {
    const AttentionRow& row = rows[r];
    work += static_cast<int64_t>(row.len) * shape.num_heads * (row.start_pos + row.len) *
            shape.head_dim * 2;
    for (int32_t g = 0; g < shape.num_kv_heads; ++g) {
      for (int32_t t = 0; t < row.len; t += tile) {
        const int32_t tokens = std::min(tile, row.len - t);
        if (shape.share_kv) {
          items.push_back({r, g, t, tokens, g * group, group});
        } else {
          for (int32_t h = 0; h < group; ++h) items.push_back({r, g, t, 1, g * group + h, 1});
        }
      }
    }
  }
  const int64_t total = static_cast<int64_t>(items.size());

#pragma omp parallel if (work >= kMinParallelWork)
  {
    ItemScratch scratch;
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < total; ++i) {
      const AttentionItem& item = items[i];
      RunItem(cache, layer, shape, rows[item.row], item, &scratch);
    }
  }
}

}  // namespace convoy
