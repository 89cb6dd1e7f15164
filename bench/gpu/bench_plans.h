// The step plans and executor sizes of gpu_bench, kept apart from the timing so that a test on a
// machine without a GPU can check that every plan the benchmark makes fits the executor it makes.
#ifndef CONVOY_BENCH_GPU_BENCH_PLANS_H_
#define CONVOY_BENCH_GPU_BENCH_PLANS_H_

#include <cstdint>
#include <vector>

#include "executor/cuda/cuda_executor.h"
#include "executor/executor.h"
#include "kv/kv_cache_spec.h"
#include "model/model_config.h"

namespace convoy::bench {

// What the benchmark runs on one model shape.
struct BenchShape {
  std::vector<int32_t> decode_batches = {1, 8, 64};
  int32_t prompt_tokens = 128;    // per sequence, before the decode steps
  int32_t warmup_steps = 3;       // decode steps before timing
  int32_t decode_steps = 48;      // timed decode steps
  int32_t prefill_tokens = 2048;  // one row
  int64_t kv_cache_bytes = int64_t{8} << 30;
  int32_t block_size = 16;

  int32_t max_batch() const;
  // The longest a decode sequence grows to.
  int32_t decode_length() const { return prompt_tokens + warmup_steps + decode_steps + 1; }
};

// A Llama 3.2 1B (eight_b false) or Llama 3.1 8B shape.
ModelConfig BenchLlama(bool eight_b);

// Executor options sized from the shape: a step holds the largest prefill (every decode sequence's
// prompt at once, or the long prefill), rows and logits rows for the largest batch.
CudaExecutorOptions BenchExecutorOptions(const BenchShape& shape, bool graphs);

// The KV cache an executor made with BenchExecutorOptions has for `config` (the CUDA executor's
// rule: the budget's blocks less one scratch block).
KvCacheSpec BenchKvSpec(const ModelConfig& config, const BenchShape& shape);

// Sequence `seq` owns blocks [seq * blocks_per_seq, (seq + 1) * blocks_per_seq); a row names only
// the blocks its positions up to start + tokens reach.
StepRow BenchRow(int32_t seq, std::vector<int32_t> tokens, int32_t start, int32_t blocks_per_seq,
                 int32_t block_size);

// Blocks each decode sequence owns; the long prefill's row is sequence 0 with its own count.
int32_t DecodeBlocksPerSeq(const BenchShape& shape);
int32_t PrefillBlocks(const BenchShape& shape);

// The first step of a decode run: every sequence's prompt.
StepPlan DecodePromptPlan(const BenchShape& shape, int32_t batch);
// One decode step: `tokens[s]` at position `pos` for each sequence s.
StepPlan DecodeStepPlan(const BenchShape& shape, const std::vector<int32_t>& tokens, int32_t pos);
// The long prefill as one row.
StepPlan PrefillPlan(const BenchShape& shape);

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_GPU_BENCH_PLANS_H_
