// The CPU's paged attention against a plain double-precision attention over the same cache: prompt
// chunks that start at 0 and later, decode rows, grouped-query attention with groups of 1, 3 and
// 8, head sizes the vector kernels take (64, 128) and one they do not (80), and a block size they
// do not (8); each with a cache of fp32, bf16 and int8 elements. Against the values the cache
// holds the results agree to float rounding; against the values written (before the cache rounded
// them) within the bound that rounding allows. Sharing K and V across a work item's queries must
// give exactly the results of one query per item. With a sliding window, each query attends to
// its window alone, and blocks wholly before a row's first window are never read.
#include "executor/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace convoy {
namespace {

struct Shape {
  int32_t heads;
  int32_t kv_heads;
  int32_t head_dim;
  int32_t block_size;
};

std::string Name(const ::testing::TestParamInfo<std::tuple<Shape, KvDtype>>& info) {
  const Shape& s = std::get<0>(info.param);
  return absl::StrCat("h", s.heads, "_kv", s.kv_heads, "_d", s.head_dim, "_b", s.block_size, "_",
                      KvDtypeName(std::get<1>(info.param)));
}

// The most one stored element differs from the value written (all within [-1, 1]): 0 for fp32;
// half a bf16 ulp, 2^-8 of the value; half an int8 step, the step being amax / 127 rounded up to
// a bf16 (at most 2^-7 more).
double ElementError(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kBF16:
      return 0x1p-8;
    case KvDtype::kInt8:
      return (1 + 0x1p-7) / 254;
    default:
      return 0;
  }
}

// The rows of one step: {start_pos, len}. A prompt from 0, a chunk after a cached prefix, decode
// rows at short and long contexts, a one-token prompt.
const std::vector<std::pair<int32_t, int32_t>> kRows = {{0, 37}, {45, 20}, {130, 1},
                                                        {0, 1},  {7, 1},   {16, 16}};
constexpr int32_t kLayers = 2;
constexpr int32_t kLayer = 1;

class PagedAttentionTest : public ::testing::TestWithParam<std::tuple<Shape, KvDtype>> {
 protected:
  const Shape& shape() const { return std::get<0>(GetParam()); }

  void SetUp() override {
    const Shape& s = shape();
    spec_.dtype = std::get<1>(GetParam());
    spec_.num_layers = kLayers;
    spec_.num_kv_heads = s.kv_heads;
    spec_.head_dim = s.head_dim;
    spec_.block_size = s.block_size;
    int32_t blocks = 0;
    for (const auto& [start, len] : kRows)
      blocks += (start + len + s.block_size - 1) / s.block_size;
    // One more block, never in a table: the sliding-window test's block of NaNs.
    spec_.num_blocks = blocks + 1;
    poison_ = blocks;
    cache_ = std::make_unique<PagedKvCache>(spec_);

    // Each row's blocks, drawn from a shuffled pool: neither contiguous nor in order.
    std::mt19937 rng(11);
    std::vector<BlockId> pool(blocks);
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), rng);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    size_t next = 0;
    const int64_t q_size = int64_t{s.heads} * s.head_dim;
    for (const auto& [start, len] : kRows) {
      const int32_t context = start + len;
      std::vector<BlockId> table(pool.begin() + next,
                                 pool.begin() + next + (context + s.block_size - 1) / s.block_size);
      next += table.size();
      tables_.push_back(table);
      // [pos][kv head][d] of layer kLayer, as written.
      std::vector<float>& k = written_k_.emplace_back(int64_t{context} * s.kv_heads * s.head_dim);
      std::vector<float>& v = written_v_.emplace_back(k.size());
      for (int32_t pos = 0; pos < context; ++pos) {
        for (int32_t layer = 0; layer < kLayers; ++layer) {
          for (int32_t g = 0; g < s.kv_heads; ++g) {
            const int64_t at = (int64_t{pos} * s.kv_heads + g) * s.head_dim;
            for (int32_t d = 0; d < s.head_dim; ++d) {
              k[at + d] = uniform(rng);
              v[at + d] = uniform(rng);
            }
            cache_->Write(table[pos / s.block_size], layer, g, pos % s.block_size, &k[at], &v[at]);
          }
        }
      }
      std::vector<float> q(len * q_size);
      for (float& x : q) x = uniform(rng);
      queries_.push_back(std::move(q));
    }
  }

  // The attention of every row with `share_kv` and `window`, outputs per row
  // [len][heads * head_dim].
  std::vector<std::vector<float>> Run(bool share_kv, int32_t window = 0) {
    const Shape& s = shape();
    const int64_t q_size = int64_t{s.heads} * s.head_dim;
    std::vector<std::vector<float>> outs;
    std::vector<AttentionRow> rows;
    for (size_t r = 0; r < kRows.size(); ++r) {
      outs.emplace_back(queries_[r].size(), std::nanf(""));
    }
    for (size_t r = 0; r < kRows.size(); ++r) {
      rows.push_back(
          {queries_[r].data(), outs[r].data(), kRows[r].second, kRows[r].first, tables_[r].data()});
    }
    AttentionShape shape{
        s.heads, s.kv_heads, s.head_dim,
        q_size,  q_size,     static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)))};
    shape.share_kv = share_kv;
    shape.window = window;
    PagedAttention(cache_.get(), kLayer, shape, rows.data(), static_cast<int32_t>(rows.size()));
    return outs;
  }

  // softmax(q . k / sqrt(d)) . v in doubles, with K and V as the cache holds them (read slot by
  // slot through it) or, `stored` false, as they were written; over the latest `window`
  // positions only when `window` > 0.
  std::vector<double> Expected(size_t r, int32_t t, int32_t h, bool stored, int32_t window = 0) {
    const Shape& s = shape();
    const int32_t g = h / (s.heads / s.kv_heads);
    const int32_t context = kRows[r].first + t + 1;
    const int32_t begin = window > 0 ? std::max(0, context - window) : 0;
    const float* q = queries_[r].data() + (int64_t{t} * s.heads + h) * s.head_dim;
    std::vector<float> keys(int64_t{context} * s.head_dim), values(keys.size());
    for (int32_t j = begin; j < context; ++j) {
      float* k = &keys[int64_t{j} * s.head_dim];
      float* v = &values[int64_t{j} * s.head_dim];
      if (stored) {
        cache_->Read(tables_[r][j / s.block_size], kLayer, g, j % s.block_size, k, v);
      } else {
        const int64_t at = (int64_t{j} * s.kv_heads + g) * s.head_dim;
        std::copy_n(&written_k_[r][at], s.head_dim, k);
        std::copy_n(&written_v_[r][at], s.head_dim, v);
      }
    }
    std::vector<double> scores(context, -INFINITY);
    double top = -INFINITY;
    for (int32_t j = begin; j < context; ++j) {
      double dot = 0;
      for (int32_t d = 0; d < s.head_dim; ++d) dot += double{q[d]} * keys[j * s.head_dim + d];
      scores[j] = dot / std::sqrt(static_cast<double>(s.head_dim));
      top = std::max(top, scores[j]);
    }
    double sum = 0;
    for (double& x : scores) sum += (x = std::exp(x - top));
    std::vector<double> out(s.head_dim, 0.0);
    for (int32_t j = begin; j < context; ++j) {
      for (int32_t d = 0; d < s.head_dim; ++d) {
        out[d] += scores[j] / sum * values[j * s.head_dim + d];
      }
    }
    return out;
  }

  // The largest difference between the attention's outputs and Expected(stored, window).
  double LargestError(bool stored, int32_t window = 0) {
    const Shape& s = shape();
    const std::vector<std::vector<float>> got = Run(/*share_kv=*/true, window);
    double largest = 0;
    for (size_t r = 0; r < kRows.size(); ++r) {
      for (int32_t t = 0; t < kRows[r].second; ++t) {
        for (int32_t h = 0; h < s.heads; ++h) {
          const std::vector<double> want = Expected(r, t, h, stored, window);
          const float* out = got[r].data() + (int64_t{t} * s.heads + h) * s.head_dim;
          for (int32_t d = 0; d < s.head_dim; ++d) {
            // A NaN (an output never written) fails the comparisons below.
            const double error = std::fabs(out[d] - want[d]);
            largest = std::isnan(error) ? INFINITY : std::max(largest, error);
          }
        }
      }
    }
    return largest;
  }

  KvCacheSpec spec_;
  BlockId poison_ = 0;
  std::unique_ptr<PagedKvCache> cache_;
  std::vector<std::vector<BlockId>> tables_;
  std::vector<std::vector<float>> queries_;
  std::vector<std::vector<float>> written_k_, written_v_;
};

TEST_P(PagedAttentionTest, MatchesADoublePrecisionAttentionOverTheStoredValues) {
  EXPECT_LT(LargestError(/*stored=*/true), 2e-5);
}

// Each score moves by at most scale * sum over d of |q_d| |k_d error| <= sqrt(head_dim) * e (e the
// element error; |q| <= 1), so each softmax weight by a factor within exp(+-2 sqrt(head_dim) e);
// the output then by at most expm1(2 sqrt(head_dim) e) plus V's own error e (|v| <= 1).
TEST_P(PagedAttentionTest, StaysWithinTheRoundingBoundOfTheValuesWritten) {
  const double e = ElementError(std::get<1>(GetParam()));
  const double bound =
      std::expm1(2 * std::sqrt(static_cast<double>(shape().head_dim)) * e) + e + 2e-5;
  const double largest = LargestError(/*stored=*/false);
  EXPECT_LT(largest, bound);
  RecordProperty("largest_error", absl::StrCat(largest));
}

// A token's K and V written into its slot leave every other slot's values as they were: int8's
// scale is the slot's own.
TEST_P(PagedAttentionTest, WritingASlotChangesNoOther) {
  const Shape& s = shape();
  const int32_t blocks = spec_.num_blocks;
  auto read_all = [&] {
    std::vector<float> all;
    std::vector<float> k(s.head_dim), v(s.head_dim);
    for (BlockId b = 0; b < blocks; ++b) {
      for (int32_t slot = 0; slot < s.block_size; ++slot) {
        cache_->Read(b, kLayer, 0, slot, k.data(), v.data());
        all.insert(all.end(), k.begin(), k.end());
        all.insert(all.end(), v.begin(), v.end());
      }
    }
    return all;
  };
  std::vector<float> before = read_all();
  // Values far larger than the others (a shared scale would have to grow), and exact in every
  // dtype: 127 x 8.
  const std::vector<float> big(s.head_dim, 1016.0f);
  cache_->Write(tables_[0][0], kLayer, 0, 1, big.data(), big.data());
  const std::vector<float> after = read_all();
  const int64_t slot_floats = 2 * int64_t{s.head_dim};
  const int64_t changed = (int64_t{tables_[0][0]} * s.block_size + 1) * slot_floats;
  for (int64_t i = 0; i < slot_floats; ++i) {
    EXPECT_EQ(after[changed + i], 1016.0f);
    before[changed + i] = 1016.0f;
  }
  // Bits, not values: slots no row has written hold whatever the memory held, NaNs maybe.
  ASSERT_EQ(after.size(), before.size());
  EXPECT_EQ(std::memcmp(after.data(), before.data(), sizeof(float) * after.size()), 0);
}

TEST_P(PagedAttentionTest, SharingKAndVGivesTheSameBitsAsOneQueryPerItem) {
  const std::vector<std::vector<float>> shared = Run(/*share_kv=*/true);
  const std::vector<std::vector<float>> alone = Run(/*share_kv=*/false);
  for (size_t r = 0; r < kRows.size(); ++r) {
    ASSERT_EQ(shared[r].size(), alone[r].size());
    EXPECT_EQ(std::memcmp(shared[r].data(), alone[r].data(), sizeof(float) * shared[r].size()), 0)
        << "row " << r;
  }
}

// A window of 13 positions: rows whose context is longer see only their latest 13 keys. Blocks
// wholly before a row's first token's window are replaced in its table by a block of NaNs (all
// bits set: NaN in fp32 and bf16, and int8's scales): had attention read one, its output would
// be NaN.
TEST_P(PagedAttentionTest, SlidingWindowSeesOnlyItsWindowAndReadsNoBlockBeforeIt) {
  constexpr int32_t kWindow = 13;
  const Shape& s = shape();
  for (int32_t layer = 0; layer < kLayers; ++layer) {
    for (int32_t g = 0; g < s.kv_heads; ++g) {
      const size_t region = static_cast<size_t>(s.block_size) *
                            (s.head_dim * spec_.BytesPerElement() + spec_.ScaleBytes());
      std::memset(cache_->KeyBlock<uint8_t>(poison_, layer, g), 0xff, region);
      std::memset(cache_->ValueBlock<uint8_t>(poison_, layer, g), 0xff, region);
    }
  }
  int poisoned = 0;
  for (size_t r = 0; r < kRows.size(); ++r) {
    const int32_t first_window = std::max(0, kRows[r].first + 1 - kWindow);
    for (int32_t b = 0; b < first_window / s.block_size; ++b, ++poisoned) tables_[r][b] = poison_;
  }
  EXPECT_GT(poisoned, 0);
  EXPECT_LT(LargestError(/*stored=*/true, kWindow), 2e-5);
  const std::vector<std::vector<float>> shared = Run(/*share_kv=*/true, kWindow);
  const std::vector<std::vector<float>> alone = Run(/*share_kv=*/false, kWindow);
  for (size_t r = 0; r < kRows.size(); ++r) {
    EXPECT_EQ(std::memcmp(shared[r].data(), alone[r].data(), sizeof(float) * shared[r].size()), 0)
        << "row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(
    ShapesAndDtypes, PagedAttentionTest,
    ::testing::Combine(::testing::Values(Shape{9, 3, 64, 16},   // SmolLM2-135M
                                         Shape{32, 4, 64, 16},  // TinyLlama: groups of 8
                                         Shape{4, 4, 128, 16},  // no grouping, 128 wide
                                         Shape{6, 2, 80, 16},   // a width the V kernel skips
                                         Shape{9, 3, 64, 8}),   // a block the K kernel skips
                       ::testing::Values(KvDtype::kF32, KvDtype::kBF16, KvDtype::kInt8)),
    Name);

}  // namespace
}  // namespace convoy
