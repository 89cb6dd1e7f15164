// The CPU executor's element-wise kernels and its paged attention, on Llama-8B-like shapes
// (hidden 4096, intermediate 14336, 32 query heads and 4 KV heads of 64). Every buffer is filled
// with random data before timing (untouched pages would all map to the zero page).
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "executor/cpu/attention.h"
#include "executor/cpu/ops.h"
#include "kv/kv_cache_spec.h"
#include "model/model_config.h"

namespace convoy {
namespace {

constexpr int64_t kHidden = 4096;
constexpr int64_t kIntermediate = 14336;
constexpr int32_t kHeads = 32;
constexpr int32_t kKvHeads = 4;
constexpr int32_t kHeadDim = 64;

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = uniform(rng);
  return v;
}

// state.range(0): rows.
void BM_RmsNorm(benchmark::State& state) {
  const int64_t rows = state.range(0);
  const std::vector<float> x = RandomFloats(rows * kHidden, 1);
  const std::vector<float> weight = RandomFloats(kHidden, 2);
  std::vector<float> out = RandomFloats(rows * kHidden, 3);
  for (auto _ : state) {
    RmsNorm(x.data(), weight.data(), rows, kHidden, 1e-5f, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * rows * kHidden * 2 *
                          static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(BM_RmsNorm)->Arg(1)->Arg(64);

// state.range(0): rows.
void BM_SiluMul(benchmark::State& state) {
  const int64_t rows = state.range(0);
  const std::vector<float> gate_up = RandomFloats(rows * 2 * kIntermediate, 4);
  std::vector<float> out = RandomFloats(rows * kIntermediate, 5);
  for (auto _ : state) {
    SiluMul(gate_up.data(), rows, kIntermediate, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * rows * kIntermediate * 3 *
                          static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(BM_SiluMul)->Arg(1)->Arg(64);

// Rotary embedding of Q (32 heads) and K (4 heads) for state.range(0) tokens at positions 0...
void BM_RopeApply(benchmark::State& state) {
  const int64_t tokens = state.range(0);
  ModelConfig config;
  config.head_dim = kHeadDim;
  config.rope_theta = 500000.0;
  const RopeTable rope(config);
  const int64_t half = rope.half_dim();
  std::vector<float> cos_sin(tokens * 2 * half);
  for (int64_t t = 0; t < tokens; ++t) {
    rope.Angles(t, &cos_sin[t * 2 * half], &cos_sin[t * 2 * half + half]);
  }
  const int64_t width = (kHeads + kKvHeads) * kHeadDim;
  std::vector<float> qk = RandomFloats(tokens * width, 6);
  for (auto _ : state) {
    for (int64_t t = 0; t < tokens; ++t) {
      float* q = &qk[t * width];
      const float* a = &cos_sin[t * 2 * half];
      RopeTable::Apply(q, kHeads, kHeadDim, a, a + half);
      RopeTable::Apply(q + kHeads * kHeadDim, kKvHeads, kHeadDim, a, a + half);
    }
    benchmark::DoNotOptimize(qk.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * tokens);
}
BENCHMARK(BM_RopeApply)->Arg(1)->Arg(64);

// One decode token per row over a 1024-token context, one layer; state.range(0): rows, each with
// its own context; state.range(1): 1 when work items share K and V (AttentionShape::share_kv).
void BM_PagedAttentionDecode(benchmark::State& state) {
  constexpr int32_t kContext = 1024;
  constexpr int32_t kBlockSize = 16;
  constexpr int32_t kBlocksPerRow = kContext / kBlockSize;
  const int32_t num_rows = static_cast<int32_t>(state.range(0));

  KvCacheSpec spec;
  spec.num_layers = 1;
  spec.num_kv_heads = kKvHeads;
  spec.head_dim = kHeadDim;
  spec.block_size = kBlockSize;
  spec.num_blocks = kBlocksPerRow * num_rows;
  PagedKvCache cache(spec);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> k(kHeadDim), v(kHeadDim);
  for (int32_t b = 0; b < spec.num_blocks; ++b) {
    for (int32_t h = 0; h < kKvHeads; ++h) {
      for (int32_t s = 0; s < kBlockSize; ++s) {
        for (float& x : k) x = uniform(rng);
        for (float& x : v) x = uniform(rng);
        cache.Write(b, 0, h, s, k.data(), v.data());
      }
    }
  }

  const int64_t q_size = int64_t{kHeads} * kHeadDim;
  const std::vector<float> q = RandomFloats(num_rows * q_size, 8);
  std::vector<float> out = RandomFloats(num_rows * q_size, 9);
  std::vector<BlockId> blocks(spec.num_blocks);
  for (int32_t b = 0; b < spec.num_blocks; ++b) blocks[b] = b;
  std::vector<AttentionRow> rows(num_rows);
  for (int32_t r = 0; r < num_rows; ++r) {
    rows[r] = {&q[r * q_size], &out[r * q_size], /*len=*/1, /*start_pos=*/kContext - 1,
               &blocks[r * kBlocksPerRow]};
  }
  AttentionShape shape{kHeads, kKvHeads, kHeadDim,
                       q_size, q_size,   static_cast<float>(1.0 / std::sqrt(double{kHeadDim}))};
  shape.share_kv = state.range(1) != 0;
  for (auto _ : state) {
    PagedAttention(&cache, 0, shape, rows.data(), num_rows);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  // K and V of the whole context, read once per row.
  state.SetBytesProcessed(state.iterations() * num_rows * spec.BytesPerBlock() * kBlocksPerRow);
}
BENCHMARK(BM_PagedAttentionDecode)
    ->ArgsProduct({{1, 8}, {0, 1}})
    ->ArgNames({"rows", "share"})
    ->UseRealTime();

}  // namespace
}  // namespace convoy
