// Paged attention against a CPU reference over a random paged cache with scattered block tables.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/gpu_test_util.h"
#include "kernels/paged_attention_decode.cuh"
#include "kernels/paged_attention_prefill.cuh"
#include "kv/block_table.h"

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
  int window = 0;  // sliding window, keys; 0: none
};

// Each query attends to keys [0, its position] of its row (with a window W, the latest W of them):
// softmax(q k / sqrt(d)) v in double.
std::vector<float> ReferenceAttention(
    const std::vector<float>& q, int64_t q_stride, const std::vector<float>& cache,
    const kernels::KvCacheLayout& layout, const std::vector<int32_t>& positions,
    const std::vector<int32_t>& token_row, const std::vector<int32_t>& row_offset,
    const std::vector<int32_t>& block_ids, int q_heads, float scale, int window) {
  const int hd = layout.head_dim, bs = layout.block_size;
  const int group = q_heads / layout.num_kv_heads;
  const int queries = static_cast<int>(positions.size());
  std::vector<float> want(int64_t{queries} * q_heads * hd);
  for (int i = 0; i < queries; ++i) {
    for (int h = 0; h < q_heads; ++h) {
      const int kvh = h / group;
      const int context = positions[i] + 1;
      const int first_key = window > 0 ? std::max(0, context - window) : 0;
      std::vector<double> scores(context, 0.0);
      double max_score = -INFINITY;
      for (int j = first_key; j < context; ++j) {
        const int block = block_ids[row_offset[token_row[i]] + j / bs];
        const float* k = cache.data() + KvOffset(layout, block, kvh, j % bs, false);
        double dot = 0.0;
        for (int d = 0; d < hd; ++d) dot += double{q[i * q_stride + h * hd + d]} * k[d];
        scores[j] = dot * scale;
        max_score = std::max(max_score, scores[j]);
      }
      double sum = 0.0;
      for (int j = first_key; j < context; ++j)
        sum += (scores[j] = std::exp(scores[j] - max_score));
      for (int d = 0; d < hd; ++d) {
        double acc = 0.0;
        for (int j = first_key; j < context; ++j) {
          const int block = block_ids[row_offset[token_row[i]] + j / bs];
          acc += scores[j] * cache[KvOffset(layout, block, kvh, j % bs, true) + d];
        }
        want[(int64_t{i} * q_heads + h) * hd + d] = static_cast<float>(acc / sum);
      }
    }
  }
  return want;
}

// Under a window, every block table entry wholly before the window of its row's earliest query
// points at `poison`, a block of NaNs: a kernel that reads one (the scheduler gives such blocks
// back) puts a NaN in the output. Returns how many entries it changed.
int PoisonBlocksBeforeWindows(const AttentionCase& c, const std::vector<int32_t>& positions,
                              const std::vector<int32_t>& token_row,
                              const std::vector<int32_t>& row_offset, int32_t poison,
                              std::vector<int32_t>* block_ids) {
  if (c.window <= 0) return 0;
  std::vector<int32_t> earliest(row_offset.size(), INT32_MAX);
  for (size_t i = 0; i < positions.size(); ++i) {
    earliest[token_row[i]] = std::min(earliest[token_row[i]], positions[i]);
  }
  int poisoned = 0;
  for (size_t r = 0; r < row_offset.size(); ++r) {
    const int64_t before = BlocksBeforeWindow(earliest[r], c.window, c.block_size);
    for (int64_t b = 0; b < before; ++b) (*block_ids)[row_offset[r] + b] = poison;
    poisoned += static_cast<int>(before);
  }
  return poisoned;
}

// Block `block`'s K and V, every layer and head, are NaN.
void FillBlockWithNaN(const kernels::KvCacheLayout& layout, int32_t block,
                      std::vector<float>* cache) {
  std::fill(cache->begin() + int64_t{block} * layout.block_stride,
            cache->begin() + int64_t{block + 1} * layout.block_stride, NAN);
}

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
  // An unused block (there are three) holds NaNs for the entries a window leaves unread.
  const int32_t poison = perm[total_blocks];
  const int poisoned =
      PoisonBlocksBeforeWindows(c, positions, token_row, row_offset, poison, &block_ids);
  if (c.window > 0) {
    EXPECT_GT(poisoned, 0);
  }

  kernels::KvCacheLayout layout;
  layout.block_size = c.block_size;
  layout.num_kv_heads = c.kv_heads;
  layout.head_dim = c.head_dim;
  layout.num_blocks = num_blocks;
  layout.v_offset = int64_t{c.kv_heads} * c.block_size * c.head_dim;
  layout.block_stride = 2 * layout.v_offset * 3;  // three layers; test the middle one
  layout.layer_offset = 2 * layout.v_offset;
  std::vector<float> cache = RoundBF16(RandomFloats(num_blocks * layout.block_stride, 21));
  FillBlockWithNaN(layout, poison, &cache);
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
  p.window = c.window;
  p.num_splits = c.splits;
  p.partial_out = d_partial.get();
  p.partial_lse = d_lse.get();
  p.partial_capacity = entries;
  // The splits' counters start at zero and each launch leaves them so: launched twice, the output
  // poisoned in between, the second launch's merge must happen as the first's did.
  const std::vector<uint32_t> zeros(int64_t{queries} * c.kv_heads, 0);
  DeviceArray<uint32_t> d_counters(zeros);
  p.split_counters = d_counters.get();
  for (int launch = 0; launch < 2; ++launch) {
    CUDA_ASSERT_OK(cudaMemset(d_out.get(), 0xff, d_out.size() * sizeof(uint16_t)));
    CUDA_ASSERT_OK(kernels::LaunchPagedAttentionDecode(p, nullptr));
    CUDA_ASSERT_OK(cudaDeviceSynchronize());
    EXPECT_EQ(d_counters.Download(), zeros) << "launch " << launch;
  }

  const int group = c.q_heads / c.kv_heads;
  const std::vector<float> want =
      ReferenceAttention(q, q_stride, cache, layout, positions, token_row, row_offset, block_ids,
                         c.q_heads, scale, c.window);
  const double err = RelativeError(FromBF16(d_out.Download()), want);
  ReportError("paged_attention_hd" + std::to_string(c.head_dim) + "_g" + std::to_string(group) +
                  "_splits" + std::to_string(c.splits) +
                  (c.window > 0 ? "_window" + std::to_string(c.window) : ""),
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
// Gemma 3's head_dim and Phi-3-mini's (12 threads a key of 16), whose prompts go through this
// kernel too.
TEST(PagedAttentionKernel, HeadDims256And96) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckAttention({256, 4, 1, 16, 1});
  CheckAttention({256, 8, 2, 16, 7, 45});
  CheckAttention({96, 8, 2, 16, 1});
  CheckAttention({96, 4, 4, 16, 5, 45});
}
TEST(PagedAttentionKernel, HeadDim64Group8Split) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckAttention({64, 8, 1, 16, 32});
}
// Mistral's and Phi-3's sliding window: a query sees only its latest `window` keys, split or not,
// and never reads the blocks before them (NaN-filled here).
TEST(PagedAttentionKernel, SlidingWindow) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckAttention({128, 8, 2, 16, 1, 45});
  CheckAttention({64, 3, 3, 7, 5, 45});
  CheckAttention({64, 8, 1, 16, 32, 100});
}

// Prompt rows through the prefill kernel: whole prompts and chunks that continue a cached prefix
// (start > 0), tiles of 64 and ragged last tiles, a tile of one token, odd block sizes. The queries
// of the decode-only rows go through the decode kernel by index in the same buffers, so the two
// kernels' outputs must also leave each other's tokens alone. Both prefill kernels, the
// tensor-core one and the CUDA-core one, compute the same function.
void CheckPrefill(const AttentionCase& c, bool tensor_cores) {
  struct Row {
    int32_t start, tokens;  // the step's tokens are positions [start, start + tokens)
  };
  const std::vector<Row> rows = {{0, 130}, {37, 64}, {0, 16},   {200, 1},
                                 {5, 70},  {0, 1},   {300, 100}};
  std::vector<int32_t> positions, token_row, row_offset, block_ids, tiles, decode_list;
  int total_blocks = 0;
  for (int r = 0; r < static_cast<int>(rows.size()); ++r) {
    const int first = static_cast<int>(positions.size());
    for (int i = 0; i < rows[r].tokens; ++i) {
      positions.push_back(rows[r].start + i);
      token_row.push_back(r);
    }
    if (rows[r].tokens > 1) {
      for (int i = 0; i < rows[r].tokens; i += kernels::kPrefillTile) {
        tiles.push_back(first + i);
        tiles.push_back(std::min(kernels::kPrefillTile, rows[r].tokens - i));
      }
    } else {
      decode_list.push_back(first);
    }
    row_offset.push_back(static_cast<int32_t>(block_ids.size()));
    const int n = (rows[r].start + rows[r].tokens + c.block_size - 1) / c.block_size;
    for (int i = 0; i < n; ++i) block_ids.push_back(total_blocks++);
  }
  const int queries = static_cast<int>(positions.size());
  const int num_blocks = total_blocks + 2;
  std::vector<int32_t> perm(num_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(5));
  for (int32_t& b : block_ids) b = perm[b];
  // An unused block (there are two) holds NaNs for the entries a window leaves unread.
  const int32_t poison = perm[total_blocks];
  const int poisoned =
      PoisonBlocksBeforeWindows(c, positions, token_row, row_offset, poison, &block_ids);
  if (c.window > 0) {
    EXPECT_GT(poisoned, 0);
  }

  kernels::KvCacheLayout layout;
  layout.block_size = c.block_size;
  layout.num_kv_heads = c.kv_heads;
  layout.head_dim = c.head_dim;
  layout.num_blocks = num_blocks;
  layout.v_offset = int64_t{c.kv_heads} * c.block_size * c.head_dim;
  layout.block_stride = 2 * layout.v_offset * 2;  // two layers; test the second
  layout.layer_offset = 2 * layout.v_offset;
  std::vector<float> cache = RoundBF16(RandomFloats(num_blocks * layout.block_stride, 31));
  FillBlockWithNaN(layout, poison, &cache);
  const int64_t q_stride = int64_t{c.q_heads + 2 * c.kv_heads} * c.head_dim;
  const std::vector<float> q = RoundBF16(RandomFloats(queries * q_stride, 32, 2.0f));
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));

  DeviceArray<uint16_t> d_cache(ToBF16(cache)), d_q(ToBF16(q));
  DeviceArray<uint16_t> d_out(int64_t{queries} * c.q_heads * c.head_dim);  // poisoned
  DeviceArray<int32_t> d_pos(positions), d_row(token_row), d_off(row_offset), d_blocks(block_ids);
  DeviceArray<int32_t> d_tiles(tiles), d_list(decode_list);
  layout.base = d_cache.get();
  kernels::PagedAttentionPrefillParams p;
  p.q = d_q.get();
  p.q_row_stride = q_stride;
  p.out = d_out.get();
  p.positions = d_pos.get();
  p.token_row = d_row.get();
  p.row_block_offset = d_off.get();
  p.block_ids = d_blocks.get();
  p.tiles = d_tiles.get();
  p.num_tiles = static_cast<int64_t>(tiles.size() / 2);
  p.cache = layout;
  p.num_q_heads = c.q_heads;
  p.scale = scale;
  p.window = c.window;
  p.tensor_cores = tensor_cores;
  CUDA_ASSERT_OK(kernels::LaunchPagedAttentionPrefill(p, nullptr));
  const int64_t entries = static_cast<int64_t>(decode_list.size()) * c.q_heads * c.splits;
  DeviceArray<float> d_partial(entries * c.head_dim), d_lse(entries);
  kernels::PagedAttentionDecodeParams dp;
  dp.q = d_q.get();
  dp.q_row_stride = q_stride;
  dp.out = d_out.get();
  dp.positions = d_pos.get();
  dp.token_row = d_row.get();
  dp.row_block_offset = d_off.get();
  dp.block_ids = d_blocks.get();
  dp.cache = layout;
  dp.num_queries = static_cast<int64_t>(decode_list.size());
  dp.query_list = d_list.get();
  dp.num_q_heads = c.q_heads;
  dp.scale = scale;
  dp.window = c.window;
  dp.num_splits = c.splits;
  dp.partial_out = d_partial.get();
  dp.partial_lse = d_lse.get();
  dp.partial_capacity = entries;
  const std::vector<uint32_t> zeros(decode_list.size() * c.kv_heads, 0);
  DeviceArray<uint32_t> d_counters(zeros);
  dp.split_counters = d_counters.get();
  CUDA_ASSERT_OK(kernels::LaunchPagedAttentionDecode(dp, nullptr));
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  EXPECT_EQ(d_counters.Download(), zeros);

  const std::vector<float> want =
      ReferenceAttention(q, q_stride, cache, layout, positions, token_row, row_offset, block_ids,
                         c.q_heads, scale, c.window);
  const double err = RelativeError(FromBF16(d_out.Download()), want);  // NaN where unwritten
  ReportError(
      std::string(tensor_cores ? "paged_attention_prefill_mma" : "paged_attention_prefill") +
          "_hd" + std::to_string(c.head_dim) + "_g" + std::to_string(c.q_heads / c.kv_heads) +
          "_bs" + std::to_string(c.block_size) +
          (c.window > 0 ? "_window" + std::to_string(c.window) : ""),
      err);
  EXPECT_LT(err, 1e-2);
}

TEST(PagedAttentionPrefillKernel, HeadDim128Group4) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckPrefill({128, 8, 2, 16, 3}, /*tensor_cores=*/true);
}
TEST(PagedAttentionPrefillKernel, HeadDim64NoGqaOddBlocks) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckPrefill({64, 3, 3, 7, 1}, /*tensor_cores=*/true);
}
TEST(PagedAttentionPrefillKernel, HeadDim64Group8) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckPrefill({64, 32, 4, 16, 2}, /*tensor_cores=*/true);
}
TEST(PagedAttentionPrefillKernel, CudaCoresHeadDim128Group4) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckPrefill({128, 8, 2, 16, 3}, /*tensor_cores=*/false);
}
TEST(PagedAttentionPrefillKernel, CudaCoresHeadDim64NoGqaOddBlocks) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckPrefill({64, 3, 3, 7, 1}, /*tensor_cores=*/false);
}

// A sliding window shorter and longer than a tile, over whole prompts and continued chunks: a
// tile's early queries see keys its late ones do not, and rows wholly outside every window of a
// key tile (the window's first tiles) must give weights of exactly 0, not NaN.
TEST(PagedAttentionPrefillKernel, SlidingWindow) {
  CONVOY_SKIP_WITHOUT_GPU();
  for (bool tensor_cores : {true, false}) {
    SCOPED_TRACE(tensor_cores ? "tensor cores" : "CUDA cores");
    CheckPrefill({128, 8, 2, 16, 3, 45}, tensor_cores);
    CheckPrefill({64, 3, 3, 7, 1, 100}, tensor_cores);
  }
}

// Whether the device gives a block the tile's shared memory at `head_dim` (the executor sends
// prompts to the decode kernel where it does not: 256 on an A100 or an Ada GPU).
bool TileFits(int head_dim, bool tensor_cores) {
  int shared_per_block = 0;
  EXPECT_EQ(cudaDeviceGetAttribute(&shared_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0),
            cudaSuccess);
  return kernels::PagedAttentionPrefillSharedBytes(head_dim, tensor_cores) <= shared_per_block;
}

// Phi-3-mini's head_dim and Gemma 3's on tensor cores (gpu-check.sh's racecheck runs the
// HeadDim* tests: the new shared-memory layouts of the staged K and V tiles).
TEST(PagedAttentionPrefillKernel, HeadDims96And256) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckPrefill({96, 4, 4, 7, 1, 45}, /*tensor_cores=*/true);
  if (TileFits(256, true)) CheckPrefill({256, 8, 4, 16, 2}, /*tensor_cores=*/true);
}

// The same head dims in more shapes, and on CUDA cores.
TEST(PagedAttentionPrefillKernel, MoreShapesAtHeadDims96And256) {
  CONVOY_SKIP_WITHOUT_GPU();
  for (bool tensor_cores : {true, false}) {
    SCOPED_TRACE(tensor_cores ? "tensor cores" : "CUDA cores");
    CheckPrefill({96, 8, 2, 16, 3}, tensor_cores);
    if (!tensor_cores) CheckPrefill({96, 4, 4, 7, 1, 45}, tensor_cores);
    if (TileFits(256, tensor_cores)) {
      CheckPrefill({256, 4, 2, 16, 1, 100}, tensor_cores);
      if (!tensor_cores) CheckPrefill({256, 8, 4, 16, 2}, tensor_cores);
    }
  }
}

TEST(PagedAttentionPrefillKernel, RejectsBadShapes) {
  kernels::PagedAttentionPrefillParams p;
  p.cache.head_dim = 80;
  EXPECT_EQ(kernels::LaunchPagedAttentionPrefill(p, nullptr), cudaErrorInvalidValue);
}

// What a tile takes of shared memory, which the executor holds against the device's limit for a
// block: every head_dim fits an Ada GPU (99 KB a block) but 256, whose tensor-core tile fits an
// H100 or H200 (227 KB) and not an A100 (163 KB).
TEST(PagedAttentionPrefillKernel, SharedMemoryOfATile) {
  for (bool tensor_cores : {true, false}) {
    for (int hd : {64, 96, 128}) {
      EXPECT_GT(kernels::PagedAttentionPrefillSharedBytes(hd, tensor_cores), 0) << hd;
      EXPECT_LE(kernels::PagedAttentionPrefillSharedBytes(hd, tensor_cores), 99 * 1024) << hd;
    }
    EXPECT_EQ(kernels::PagedAttentionPrefillSharedBytes(80, tensor_cores), 0);
  }
  const int64_t mma256 = kernels::PagedAttentionPrefillSharedBytes(256, true);
  EXPECT_GT(mma256, 163 * 1024);
  EXPECT_LE(mma256, 227 * 1024);
  EXPECT_LE(kernels::PagedAttentionPrefillSharedBytes(256, false), 227 * 1024);
}

TEST(PagedAttentionKernel, RejectsUnsupportedHeadDim) {
  kernels::PagedAttentionDecodeParams p;
  p.cache.head_dim = 96;
  EXPECT_EQ(kernels::LaunchPagedAttentionDecode(p, nullptr), cudaErrorInvalidValue);
}

// Splits need their partial buffers and counters (refused before any device work).
TEST(PagedAttentionKernel, SplitsWithoutTheirCountersAreRefused) {
  void* const fake = reinterpret_cast<void*>(uintptr_t{1} << 20);
  kernels::PagedAttentionDecodeParams p;
  p.q = fake;
  p.q_row_stride = 8 * 128;
  p.out = fake;
  p.positions = static_cast<const int32_t*>(fake);
  p.token_row = static_cast<const int32_t*>(fake);
  p.row_block_offset = static_cast<const int32_t*>(fake);
  p.block_ids = static_cast<const int32_t*>(fake);
  p.cache.base = fake;
  p.cache.head_dim = 128;
  p.cache.num_kv_heads = 2;
  p.cache.block_size = 16;
  p.num_q_heads = 8;
  p.num_queries = 1;
  p.num_splits = 4;
  p.partial_out = static_cast<float*>(fake);
  p.partial_lse = static_cast<float*>(fake);
  p.partial_capacity = 32;
  EXPECT_EQ(kernels::LaunchPagedAttentionDecode(p, nullptr), cudaErrorInvalidValue);
}

TEST(PagedAttentionKernel, ChoosesSplitsToFillTheGpu) {
  EXPECT_EQ(kernels::ChooseAttentionSplits(1, 8, 132),
            33 > kernels::kMaxAttentionSplits ? kernels::kMaxAttentionSplits : 33);
  EXPECT_EQ(kernels::ChooseAttentionSplits(4096, 8, 132), 1);
}

}  // namespace
}  // namespace convoy
