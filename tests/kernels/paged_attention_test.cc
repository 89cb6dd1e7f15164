// Paged attention against a CPU reference over a random paged cache with scattered block tables.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/gpu_test_util.h"
#include "kernels/paged_attention_decode.cuh"

namespace convoy {
namespace {

using testing::DeviceArray;
using testing::FromBF16;
using testing::RandomFloats;
using testing::RelativeError;
using testing::ReportError;
using testing::RoundBF16;
using testing::ToBF16;

struct AttentionCase {
  int head_dim;
  int q_heads;
  int kv_heads;
  int block_size;
  int splits;
};

void CheckAttention(const AttentionCase& c) {
  const std::vector<int32_t> row_lengths = {301, 17, 1, 130};  // context length of each row
  const int rows = static_cast<int>(row_lengths.size());
  // Queries: the last position of each row plus a few inner positions of row 0 (prefill-like).
  std::vector<int32_t> positions, token_row;
  for (int r = 0; r < rows; ++r) {
    positions.push_back(row_lengths[r] - 1);
    token_row.push_back(r);
  }
  for (int32_t p : {0, 63, 64, 200}) {
    positions.push_back(p);
    token_row.push_back(0);
  }
  const int queries = static_cast<int>(positions.size());
  // Scattered, shuffled block tables.
  std::vector<int32_t> row_offset, block_ids;
  int total_blocks = 0;
  for (int r = 0; r < rows; ++r) {
    row_offset.push_back(static_cast<int32_t>(block_ids.size()));
    const int n = (row_lengths[r] + c.block_size - 1) / c.block_size;
    for (int i = 0; i < n; ++i) block_ids.push_back(total_blocks++);
  }
  const int num_blocks = total_blocks + 3;
  std::vector<int32_t> perm(num_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(11));
  for (int32_t& b : block_ids) b = perm[b];

  kernels::KvCacheLayout layout;
  layout.block_size = c.block_size;
  layout.num_kv_heads = c.kv_heads;
  layout.head_dim = c.head_dim;
  layout.num_blocks = num_blocks;
  layout.v_offset = int64_t{c.kv_heads} * c.block_size * c.head_dim;
  layout.block_stride = 2 * layout.v_offset * 3;  // three layers; test the middle one
  layout.layer_offset = 2 * layout.v_offset;
  const std::vector<float> cache = RoundBF16(RandomFloats(num_blocks * layout.block_stride, 21));
  const int64_t q_stride = int64_t{c.q_heads + 2 * c.kv_heads} * c.head_dim;
  const std::vector<float> q = RoundBF16(RandomFloats(queries * q_stride, 22));
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));

  DeviceArray<uint16_t> d_cache(ToBF16(cache)), d_q(ToBF16(q));
  DeviceArray<uint16_t> d_out(int64_t{queries} * c.q_heads * c.head_dim);
  DeviceArray<int32_t> d_pos(positions), d_row(token_row), d_off(row_offset), d_blocks(block_ids);
  const int64_t entries = int64_t{queries} * c.q_heads * c.splits;
  DeviceArray<float> d_partial(entries * c.head_dim), d_lse(entries);
  layout.base = d_cache.get();
  kernels::PagedAttentionDecodeParams p;
  p.q = d_q.get();
  p.q_row_stride = q_stride;
  p.out = d_out.get();
  p.positions = d_pos.get();
  p.token_row = d_row.get();
  p.row_block_offset = d_off.get();
  p.block_ids = d_blocks.get();
  p.cache = layout;
  p.num_queries = queries;
  p.num_q_heads = c.q_heads;
  p.scale = scale;
  p.num_splits = c.splits;
  p.partial_out = d_partial.get();
  p.partial_lse = d_lse.get();
  p.partial_capacity = entries;
  CUDA_ASSERT_OK(kernels::LaunchPagedAttentionDecode(p, nullptr));
  CUDA_ASSERT_OK(cudaDeviceSynchronize());

  const int group = c.q_heads / c.kv_heads;
  std::vector<float> want(int64_t{queries} * c.q_heads * c.head_dim);
  for (int i = 0; i < queries; ++i) {
    for (int h = 0; h < c.q_heads; ++h) {
      const int kvh = h / group;
      const int context = positions[i] + 1;
      std::vector<double> scores(context);
      double max_score = -INFINITY;
      for (int j = 0; j < context; ++j) {
        const int block = block_ids[row_offset[token_row[i]] + j / c.block_size];
        const float* k = cache.data() + KvOffset(layout, block, kvh, j % c.block_size, false);
        double dot = 0.0;
        for (int d = 0; d < c.head_dim; ++d)
          dot += double{q[i * q_stride + h * c.head_dim + d]} * k[d];
        scores[j] = dot * scale;
        max_score = std::max(max_score, scores[j]);
      }
      double sum = 0.0;
      for (double& s : scores) sum += (s = std::exp(s - max_score));
      for (int d = 0; d < c.head_dim; ++d) {
        double acc = 0.0;
        for (int j = 0; j < context; ++j) {
          const int block = block_ids[row_offset[token_row[i]] + j / c.block_size];
          acc += scores[j] * cache[KvOffset(layout, block, kvh, j % c.block_size, true) + d];
        }
        want[(int64_t{i} * c.q_heads + h) * c.head_dim + d] = static_cast<float>(acc / sum);
      }
    }
  }
  const double err = RelativeError(FromBF16(d_out.Download()), want);
  ReportError("paged_attention_hd" + std::to_string(c.head_dim) + "_g" + std::to_string(group) +
                  "_splits" + std::to_string(c.splits),
              err);
  EXPECT_LT(err, 1e-2);
}

TEST(PagedAttentionKernel, HeadDim128Group4) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckAttention({128, 8, 2, 16, 1});
}
TEST(PagedAttentionKernel, HeadDim128Group4Split) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckAttention({128, 8, 2, 16, 5});
}
TEST(PagedAttentionKernel, HeadDim64NoGqaOddBlocks) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckAttention({64, 3, 3, 7, 1});
}
TEST(PagedAttentionKernel, HeadDim64Group8Split) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckAttention({64, 8, 1, 16, 32});
}

TEST(PagedAttentionKernel, RejectsUnsupportedHeadDim) {
  kernels::PagedAttentionDecodeParams p;
  p.cache.head_dim = 96;
  EXPECT_EQ(kernels::LaunchPagedAttentionDecode(p, nullptr), cudaErrorInvalidValue);
}

TEST(PagedAttentionKernel, ChoosesSplitsToFillTheGpu) {
  EXPECT_EQ(kernels::ChooseAttentionSplits(1, 8, 132),
            33 > kernels::kMaxAttentionSplits ? kernels::kMaxAttentionSplits : 33);
  EXPECT_EQ(kernels::ChooseAttentionSplits(4096, 8, 132), 1);
}

}  // namespace
}  // namespace convoy
