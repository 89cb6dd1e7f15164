// The CPU's paged attention against a plain double-precision attention over the same cache: prompt
// chunks that start at 0 and later, decode rows, grouped-query attention with groups of 1, 3 and
// 8, head sizes the vector kernels take (64, 128) and one they do not (80), and a block size they
// do not (8). Sharing K and V across a work item's queries must give exactly the results of one
// query per item.
#include "executor/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
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

std::string Name(const ::testing::TestParamInfo<Shape>& info) {
  const Shape& s = info.param;
  return absl::StrCat("h", s.heads, "_kv", s.kv_heads, "_d", s.head_dim, "_b", s.block_size);
}

// The rows of one step: {start_pos, len}. A prompt from 0, a chunk after a cached prefix, decode
// rows at short and long contexts, a one-token prompt.
const std::vector<std::pair<int32_t, int32_t>> kRows = {{0, 37}, {45, 20}, {130, 1},
                                                        {0, 1},  {7, 1},   {16, 16}};
constexpr int32_t kLayers = 2;
constexpr int32_t kLayer = 1;

class PagedAttentionTest : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override {
    const Shape& s = GetParam();
    spec_.num_layers = kLayers;
    spec_.num_kv_heads = s.kv_heads;
    spec_.head_dim = s.head_dim;
    spec_.block_size = s.block_size;
    int32_t blocks = 0;
    for (const auto& [start, len] : kRows)
      blocks += (start + len + s.block_size - 1) / s.block_size;
    spec_.num_blocks = blocks;
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
      std::vector<float> k(s.head_dim), v(s.head_dim);
      for (int32_t pos = 0; pos < context; ++pos) {
        for (int32_t layer = 0; layer < kLayers; ++layer) {
          for (int32_t g = 0; g < s.kv_heads; ++g) {
            for (float& x : k) x = uniform(rng);
            for (float& x : v) x = uniform(rng);
            cache_->Write(table[pos / s.block_size], layer, g, pos % s.block_size, k.data(),
                          v.data());
          }
        }
      }
      std::vector<float> q(len * q_size);
      for (float& x : q) x = uniform(rng);
      queries_.push_back(std::move(q));
    }
  }

  // The attention of every row with `share_kv`, outputs per row [len][heads * head_dim].
  std::vector<std::vector<float>> Run(bool share_kv) {
    const Shape& s = GetParam();
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
    PagedAttention(cache_.get(), kLayer, shape, rows.data(), static_cast<int32_t>(rows.size()));
    return outs;
  }

  // softmax(q . k / sqrt(d)) . v in doubles, reading K and V slot by slot through the cache.
  std::vector<double> Expected(size_t r, int32_t t, int32_t h) {
    const Shape& s = GetParam();
    const int32_t g = h / (s.heads / s.kv_heads);
    const int32_t context = kRows[r].first + t + 1;
    const float* q = queries_[r].data() + (int64_t{t} * s.heads + h) * s.head_dim;
    std::vector<double> scores(context);
    double top = -INFINITY;
    for (int32_t j = 0; j < context; ++j) {
      const BlockId block = tables_[r][j / s.block_size];
      const float* kt = cache_->KeyBlock(block, kLayer, g);
      double dot = 0;
      for (int32_t d = 0; d < s.head_dim; ++d) {
        dot += double{q[d]} * kt[d * s.block_size + j % s.block_size];
      }
      scores[j] = dot / std::sqrt(static_cast<double>(s.head_dim));
      top = std::max(top, scores[j]);
    }
    double sum = 0;
    for (double& x : scores) sum += (x = std::exp(x - top));
    std::vector<double> out(s.head_dim, 0.0);
    for (int32_t j = 0; j < context; ++j) {
      const float* v = cache_->Value(tables_[r][j / s.block_size], kLayer, g, j % s.block_size);
      for (int32_t d = 0; d < s.head_dim; ++d) out[d] += scores[j] / sum * v[d];
    }
    return out;
  }

  KvCacheSpec spec_;
  std::unique_ptr<PagedKvCache> cache_;
  std::vector<std::vector<BlockId>> tables_;
  std::vector<std::vector<float>> queries_;
};

TEST_P(PagedAttentionTest, MatchesADoublePrecisionAttention) {
  const Shape& s = GetParam();
  const std::vector<std::vector<float>> got = Run(/*share_kv=*/true);
  for (size_t r = 0; r < kRows.size(); ++r) {
    for (int32_t t = 0; t < kRows[r].second; ++t) {
      for (int32_t h = 0; h < s.heads; ++h) {
        const std::vector<double> want = Expected(r, t, h);
        const float* out = got[r].data() + (int64_t{t} * s.heads + h) * s.head_dim;
        for (int32_t d = 0; d < s.head_dim; ++d) {
          ASSERT_NEAR(out[d], want[d], 2e-5)
              << "row " << r << " token " << t << " head " << h << " element " << d;
        }
      }
    }
  }
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

INSTANTIATE_TEST_SUITE_P(Shapes, PagedAttentionTest,
                         ::testing::Values(Shape{9, 3, 64, 16},   // SmolLM2-135M
                                           Shape{32, 4, 64, 16},  // TinyLlama: groups of 8
                                           Shape{4, 4, 128, 16},  // no grouping, 128 wide
                                           Shape{6, 2, 80, 16},   // a width the V kernel skips
                                           Shape{9, 3, 64, 8}),   // a block the K kernel skips
                         Name);

}  // namespace
}  // namespace convoy
