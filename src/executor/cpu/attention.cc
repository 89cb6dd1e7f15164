#include "executor/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

#include "common/half.h"
#include "common/simd.h"
#include "executor/cpu/ops.h"

namespace convoy {
namespace {

// The stored elements as fp32: fp32, bf16 (its uint16_t bits), int8 (the scale applied apart).
inline float ToFloat(float x) { return x; }
inline float ToFloat(uint16_t x) { return BF16ToFloat(x); }
inline float ToFloat(int8_t x) { return static_cast<float>(x); }

#if defined(__AVX512F__)
// 16 stored elements as fp32.
inline __m512 Load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 Load16(const uint16_t* p) {
  const __m512i wide =
      _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}
inline __m512 Load16(const int8_t* p) {
  return _mm512_cvtepi32_ps(
      _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
#endif

// scores[s] = q . K[:, s] for the first `n` of `block_size` keys of a transposed K block. (Blocks
// of 16 take BlockScores16 instead where the CPU has AVX-512.)
template <typename T>
void BlockScores(const float* q, const T* kt, int32_t head_dim, int32_t block_size, int32_t n,
                 float* scores) {
  for (int32_t s = 0; s < n; ++s) scores[s] = 0.0f;
  for (int32_t d = 0; d < head_dim; ++d) {
    const float qd = q[d];
    const T* row = kt + static_cast<int64_t>(d) * block_size;
    for (int32_t s = 0; s < n; ++s) scores[s] += qd * ToFloat(row[s]);
  }
}

// out = sum over begin <= j < context of weights[j] * V[j], V read block by block from the block
// that holds `begin`. The sums stay in registers across keys (64 elements of the head at a time);
// adding into `out` key by key made every key wait on the previous key's store.
template <typename T>
void WeightedValues(const PagedKvCache& cache, const BlockId* blocks, int32_t layer,
                    int32_t kv_head, const float* weights, int32_t begin, int32_t context,
                    float* out) {
  const int32_t hd = cache.spec().head_dim;
  const int32_t block_size = cache.spec().block_size;
#if defined(__AVX512F__)
  if (hd % 16 == 0) {
    for (int32_t d0 = 0; d0 < hd; d0 += 64) {
      const int32_t lanes = std::min(64, hd - d0) / 16;
      __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                       _mm512_setzero_ps()};
      for (int32_t b = begin / block_size; b * block_size < context; ++b) {
        const T* v = cache.ValueBlock<T>(blocks[b], layer, kv_head) + d0;
        const int32_t n = std::min(block_size, context - b * block_size);
        for (int32_t s = 0; s < n; ++s, v += hd) {
          const __m512 w = _mm512_set1_ps(weights[b * block_size + s]);
          for (int32_t c = 0; c < lanes; ++c) {
            acc[c] = _mm512_fmadd_ps(w, Load16(v + 16 * c), acc[c]);
          }
        }
      }
      for (int32_t c = 0; c < lanes; ++c) _mm512_storeu_ps(out + d0 + 16 * c, acc[c]);
    }
    return;
  }
#endif
  std::memset(out, 0, sizeof(float) * hd);
  for (int32_t j = begin; j < context; ++j) {
    const T* v = cache.ValueBlock<T>(blocks[j / block_size], layer, kv_head) +
                 static_cast<int64_t>(j % block_size) * hd;
    for (int32_t d = 0; d < hd; ++d) out[d] += weights[j] * ToFloat(v[d]);
  }
}

#if defined(__AVX512F__)
// Scores of N queries against the first `n` keys of one transposed K block of 16 keys:
// scores[i * stride + s] = q_i . K[:, s], the queries contiguous in `q` ([N][head_dim]). Each row
// of K is loaded once for all N; the N sums are independent chains, so the multiply-adds are not
// held up by one another's latency. Per query the sum runs over d in order, as BlockScores'.
template <typename T, int N>
void BlockScores16(const float* q, const T* kt, int32_t head_dim, int32_t n, float* scores,
                   int64_t stride) {
  __m512 acc[N];
  for (int i = 0; i < N; ++i) acc[i] = _mm512_setzero_ps();
  for (int32_t d = 0; d < head_dim; ++d) {
    const __m512 k = Load16(kt + d * 16);
    for (int i = 0; i < N; ++i) {
      acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(q[i * head_dim + d]), k, acc[i]);
    }
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1);
  for (int i = 0; i < N; ++i) _mm512_mask_storeu_ps(scores + i * stride, mask, acc[i]);
}

// The most queries one BlockScores16 takes: N sums and a row of K in registers.
constexpr int kScoreQueries = 12;

template <typename T>
void BlockScoresMany(int count, const float* q, const T* kt, int32_t head_dim, int32_t n,
                     float* scores, int64_t stride) {
  switch (count) {
#define CONVOY_SCORES_CASE(N)                                \
  case N:                                                    \
    BlockScores16<T, N>(q, kt, head_dim, n, scores, stride); \
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

// out_i += sum over first_block * block_size <= j < context of weights[i * stride + j] * V[j]
// for N queries over 64 elements of the head starting at d0, V read block by block once for all N
// (zero weights outside a query's own window leave its sums as they are). Per query the sums run
// over j in order, as WeightedValues'.
template <typename T, int N>
void WeightedValues64(const PagedKvCache& cache, const BlockId* blocks, int32_t layer,
                      int32_t kv_head, const float* weights, int64_t stride, int32_t first_block,
                      int32_t context, int32_t d0, float* const* out) {
  const int32_t hd = cache.spec().head_dim;
  const int32_t block_size = cache.spec().block_size;
  __m512 acc[N][4];
  for (int i = 0; i < N; ++i) {
    for (int c = 0; c < 4; ++c) acc[i][c] = _mm512_setzero_ps();
  }
  for (int32_t b = first_block; b * block_size < context; ++b) {
    const T* v = cache.ValueBlock<T>(blocks[b], layer, kv_head) + d0;
    const int32_t n = std::min(block_size, context - b * block_size);
    const float* w = weights + static_cast<int64_t>(b) * block_size;
    for (int32_t s = 0; s < n; ++s, v += hd) {
      const __m512 v0 = Load16(v), v1 = Load16(v + 16), v2 = Load16(v + 32), v3 = Load16(v + 48);
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

template <typename T>
void WeightedValuesMany(int count, const PagedKvCache& cache, const BlockId* blocks, int32_t layer,
                        int32_t kv_head, const float* weights, int64_t stride, int32_t first_block,
                        int32_t context, int32_t d0, float* const* out) {
  switch (count) {
#define CONVOY_VALUES_CASE(N)                                                                    \
  case N:                                                                                        \
    WeightedValues64<T, N>(cache, blocks, layer, kv_head, weights, stride, first_block, context, \
                           d0, out);                                                             \
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
  std::vector<int32_t> begin;      // per query, the first position of its window
  std::vector<float> slot_scales;  // kInt8: per context position, K's or V's scale
};

// kInt8: x[i * stride + j] *= the scale of position j's K (kv 0) or V (kv 1), for positions
// first_block * block_size <= j < count of `queries` rows.
void ApplySlotScales(const PagedKvCache& cache, const BlockId* blocks, int32_t layer, int32_t kv,
                     int32_t kv_head, int32_t first_block, int32_t count, int32_t queries,
                     int64_t stride, float* x, std::vector<float>* slot_scales) {
  const int32_t block_size = cache.spec().block_size;
  slot_scales->resize(count);
  for (int32_t b = first_block; b * block_size < count; ++b) {
    const uint16_t* scales = cache.Scales(blocks[b], layer, kv, kv_head);
    const int32_t n = std::min(block_size, count - b * block_size);
    for (int32_t s = 0; s < n; ++s) (*slot_scales)[b * block_size + s] = BF16ToFloat(scales[s]);
  }
  for (int32_t i = 0; i < queries; ++i) {
    float* row = x + i * stride;
    for (int32_t j = first_block * block_size; j < count; ++j) row[j] *= (*slot_scales)[j];
  }
}

template <typename T>
void RunItem(const PagedKvCache& cache, int32_t layer, const AttentionShape& shape,
             const AttentionRow& row, const AttentionItem& item, ItemScratch* scratch) {
  constexpr bool kScaled = std::is_same_v<T, int8_t>;
  const int32_t hd = shape.head_dim;
  const int32_t block_size = cache.spec().block_size;
  const int32_t queries = item.num_tokens * item.num_heads;
  // Every query's context ends within the item's last token's: scores and weights are computed
  // up to it, a query's weights past its own context set to 0.
  const int32_t longest = row.start_pos + item.first_token + item.num_tokens;
  const int64_t stride = (longest + 15) / 16 * 16;
  scratch->q.resize(static_cast<size_t>(queries) * hd);
  scratch->scores.resize(static_cast<size_t>(queries) * stride);
  scratch->out.resize(queries);
  scratch->context.resize(queries);
  scratch->begin.resize(queries);
  for (int32_t t = 0; t < item.num_tokens; ++t) {
    for (int32_t h = 0; h < item.num_heads; ++h) {
      const int32_t i = t * item.num_heads + h;
      const int32_t token = item.first_token + t;
      const int64_t head_offset = static_cast<int64_t>(item.first_head + h) * hd;
      std::memcpy(&scratch->q[static_cast<size_t>(i) * hd],
                  row.q + token * shape.q_stride + head_offset, sizeof(float) * hd);
      scratch->out[i] = row.out + token * shape.out_stride + head_offset;
      scratch->context[i] = row.start_pos + token + 1;
      scratch->begin[i] = shape.window > 0 ? std::max(0, scratch->context[i] - shape.window) : 0;
    }
  }
  // Blocks before the one that holds the first token's window are never read: with a sliding
  // window they may hold nothing of this sequence.
  const int32_t first_block = scratch->begin[0] / block_size;
  const float* q = scratch->q.data();
  float* scores = scratch->scores.data();

  for (int32_t b = first_block; b * block_size < longest; ++b) {
    const T* kt = cache.KeyBlock<T>(row.blocks[b], layer, item.kv_head);
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
  if constexpr (kScaled) {
    ApplySlotScales(cache, row.blocks, layer, 0, item.kv_head, first_block, longest, queries,
                    stride, scores, &scratch->slot_scales);
  }
  for (int32_t i = 0; i < queries; ++i) {
    float* w = scores + i * stride;
    const int32_t begin = scratch->begin[i];
    const int32_t context = scratch->context[i];
    const float max_score = ScaleAndMax(w + begin, context - begin, shape.scale);
    const float inv_sum = 1.0f / ExpShiftedSum(w + begin, context - begin, max_score);
    for (int32_t j = begin; j < context; ++j) w[j] *= inv_sum;
    std::fill(w + first_block * block_size, w + begin, 0.0f);
    std::fill(w + context, w + longest, 0.0f);
  }
  if constexpr (kScaled) {
    // The weights times V's scales: the value sums then run on the stored integers.
    ApplySlotScales(cache, row.blocks, layer, 1, item.kv_head, first_block, longest, queries,
                    stride, scores, &scratch->slot_scales);
  }
#if defined(__AVX512F__)
  if (hd % 64 == 0) {
    for (int32_t i = 0; i < queries; i += kValueQueries) {
      for (int32_t d0 = 0; d0 < hd; d0 += 64) {
        WeightedValuesMany<T>(std::min(kValueQueries, queries - i), cache, row.blocks, layer,
                              item.kv_head, scores + i * stride, stride, first_block, longest, d0,
                              scratch->out.data() + i);
      }
    }
    return;
  }
#endif
  for (int32_t i = 0; i < queries; ++i) {
    WeightedValues<T>(cache, row.blocks, layer, item.kv_head, scores + i * stride,
                      scratch->begin[i], scratch->context[i], scratch->out[i]);
  }
}

// One slot's K (kv 0) or V (kv 1) of a KV head: head_dim values `x` stored `step` elements apart
// from `out`, rounded to T; for int8 with their bf16 scale, amax / 127 rounded up (so that no
// value falls outside -127..127), written to `scale`.
template <typename T>
void StoreSlot(const float* x, int32_t head_dim, int64_t step, T* out, uint16_t* scale) {
  if constexpr (std::is_same_v<T, float>) {
    for (int32_t d = 0; d < head_dim; ++d) out[d * step] = x[d];
  } else if constexpr (std::is_same_v<T, uint16_t>) {
    for (int32_t d = 0; d < head_dim; ++d) out[d * step] = FloatToBF16(x[d]);
  } else {
    float amax = 0.0f;
    for (int32_t d = 0; d < head_dim; ++d) amax = std::max(amax, std::fabs(x[d]));
    const float wanted = amax / 127.0f;
    uint16_t bits = FloatToBF16(wanted);
    if (BF16ToFloat(bits) < wanted) ++bits;  // the next bf16 up: wanted is positive
    *scale = bits;
    const float s = BF16ToFloat(bits);
    for (int32_t d = 0; d < head_dim; ++d) {
      // fmax/fmin also take a NaN (a zero scale's 0 / 0) to a bound, not to undefined behaviour.
      const float r = s > 0.0f ? std::nearbyint(x[d] / s) : 0.0f;
      out[d * step] = static_cast<int8_t>(std::fmin(std::fmax(r, -127.0f), 127.0f));
    }
  }
}

template <typename T>
void WriteSlot(PagedKvCache* cache, BlockId block, int32_t layer, int32_t head, int32_t slot,
               const float* k, const float* v) {
  const KvCacheSpec& spec = cache->spec();
  T* kt = cache->KeyBlock<T>(block, layer, head) + slot;
  T* vs = cache->ValueBlock<T>(block, layer, head) + static_cast<int64_t>(slot) * spec.head_dim;
  StoreSlot(k, spec.head_dim, spec.block_size, kt, cache->Scales(block, layer, 0, head) + slot);
  StoreSlot(v, spec.head_dim, 1, vs, cache->Scales(block, layer, 1, head) + slot);
}

template <typename T>
void ReadSlot(const PagedKvCache& cache, BlockId block, int32_t layer, int32_t head, int32_t slot,
              float* k, float* v) {
  const KvCacheSpec& spec = cache.spec();
  const T* kt = cache.KeyBlock<T>(block, layer, head) + slot;
  const T* vs =
      cache.ValueBlock<T>(block, layer, head) + static_cast<int64_t>(slot) * spec.head_dim;
  float k_scale = 1.0f, v_scale = 1.0f;
  if constexpr (std::is_same_v<T, int8_t>) {
    k_scale = BF16ToFloat(cache.Scales(block, layer, 0, head)[slot]);
    v_scale = BF16ToFloat(cache.Scales(block, layer, 1, head)[slot]);
  }
  for (int32_t d = 0; d < spec.head_dim; ++d) {
    k[d] = ToFloat(kt[d * spec.block_size]) * k_scale;
    v[d] = ToFloat(vs[d]) * v_scale;
  }
}

template <typename T>
void RunAttention(const PagedKvCache& cache, int32_t layer, const AttentionShape& shape,
                  const AttentionRow* rows, const std::vector<AttentionItem>& items, int64_t work) {
  const int64_t total = static_cast<int64_t>(items.size());
#pragma omp parallel if (work >= kMinParallelWork)
  {
    ItemScratch scratch;
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < total; ++i) {
      const AttentionItem& item = items[i];
      RunItem<T>(cache, layer, shape, rows[item.row], item, &scratch);
    }
  }
}

}  // namespace

PagedKvCache::PagedKvCache(const KvCacheSpec& spec)
    : spec_(spec),
      region_bytes_(int64_t{spec.block_size} *
                    (int64_t{spec.head_dim} * spec.BytesPerElement() + spec.ScaleBytes())) {
  const size_t bytes = static_cast<size_t>(spec.BytesPerBlock()) * spec.num_blocks;
  data_ =
      static_cast<uint8_t*>(std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64)));
  if (data_ == nullptr) throw std::bad_alloc();
}

PagedKvCache::~PagedKvCache() { std::free(data_); }

void PagedKvCache::Write(BlockId block, int32_t layer, int32_t head, int32_t slot, const float* k,
                         const float* v) {
  switch (spec_.dtype) {
    case KvDtype::kBF16:
      return WriteSlot<uint16_t>(this, block, layer, head, slot, k, v);
    case KvDtype::kInt8:
      return WriteSlot<int8_t>(this, block, layer, head, slot, k, v);
    default:
      return WriteSlot<float>(this, block, layer, head, slot, k, v);
  }
}

void PagedKvCache::Read(BlockId block, int32_t layer, int32_t head, int32_t slot, float* k,
                        float* v) const {
  switch (spec_.dtype) {
    case KvDtype::kBF16:
      return ReadSlot<uint16_t>(*this, block, layer, head, slot, k, v);
    case KvDtype::kInt8:
      return ReadSlot<int8_t>(*this, block, layer, head, slot, k, v);
    default:
      return ReadSlot<float>(*this, block, layer, head, slot, k, v);
  }
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
  switch (cache->spec().dtype) {
    case KvDtype::kBF16:
      return RunAttention<uint16_t>(*cache, layer, shape, rows, items, work);
    case KvDtype::kInt8:
      return RunAttention<int8_t>(*cache, layer, shape, rows, items, work);
    default:
      return RunAttention<float>(*cache, layer, shape, rows, items, work);
  }
}

}  // namespace convoy
