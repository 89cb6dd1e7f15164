// The KV block allocator and block tables: what the scheduler pays per step for KV bookkeeping.
#include <cstdint>
#include <vector>

#include "benchmark/benchmark.h"
#include "kv/block_allocator.h"
#include "kv/block_table.h"

namespace convoy {
namespace {

constexpr int32_t kNumBlocks = 16384;
constexpr int32_t kBlockSize = 16;

// Allocate state.range(0) blocks at once, then release them one by one.
void BM_AllocateRelease(benchmark::State& state) {
  const int32_t n = static_cast<int32_t>(state.range(0));
  BlockAllocator allocator(kNumBlocks);
  std::vector<BlockId> blocks;
  blocks.reserve(n);
  for (auto _ : state) {
    blocks.clear();
    if (!allocator.Allocate(n, &blocks).ok()) state.SkipWithError("allocation failed");
    for (BlockId block : blocks) allocator.Release(block).IgnoreError();
    benchmark::DoNotOptimize(blocks.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_AllocateRelease)->Arg(1)->Arg(16)->Arg(256);

// A sequence decoding token by token to state.range(0) tokens (Reserve once per token, a new
// block every kBlockSize tokens), then released: the per-token cost of growing a table.
void BM_BlockTableReserveGrowth(benchmark::State& state) {
  const int64_t tokens = state.range(0);
  BlockAllocator allocator(kNumBlocks);
  for (auto _ : state) {
    BlockTable table(kBlockSize);
    for (int64_t t = 1; t <= tokens; ++t) {
      if (!table.Reserve(t, &allocator).ok()) state.SkipWithError("reserve failed");
    }
    benchmark::DoNotOptimize(table.blocks().data());
    table.ReleaseAll(&allocator);
  }
  state.SetItemsProcessed(state.iterations() * tokens);
}
BENCHMARK(BM_BlockTableReserveGrowth)->Arg(256)->Arg(4096);

// A prompt of state.range(0) tokens reserved in one call (prefill admission), then released.
void BM_BlockTableReservePrompt(benchmark::State& state) {
  const int64_t tokens = state.range(0);
  BlockAllocator allocator(kNumBlocks);
  for (auto _ : state) {
    BlockTable table(kBlockSize);
    if (!table.Reserve(tokens, &allocator).ok()) state.SkipWithError("reserve failed");
    benchmark::DoNotOptimize(table.blocks().data());
    table.ReleaseAll(&allocator);
  }
  state.SetItemsProcessed(state.iterations() * tokens);
}
BENCHMARK(BM_BlockTableReservePrompt)->Arg(512)->Arg(8192);

}  // namespace
}  // namespace convoy
