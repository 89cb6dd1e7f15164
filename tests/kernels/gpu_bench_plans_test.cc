// Every plan gpu_bench makes fits the executor it makes, on both model shapes: checked here, where
// no GPU runs, with the executor's own plan validation and its capacity rules.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "bench/gpu/bench_plans.h"
#include "executor/cuda/cuda_executor.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace convoy::bench {
namespace {

void ExpectFits(const StepPlan& plan, const ModelConfig& config, const BenchShape& shape,
                const CudaExecutorOptions& options) {
  EXPECT_OK(ValidateStepPlan(plan, config, BenchKvSpec(config, shape)));
  int64_t tokens = 0;
  for (const StepRow& row : plan.rows) tokens += static_cast<int64_t>(row.token_ids.size());
  EXPECT_LE(tokens, options.max_tokens_per_step);
  EXPECT_LE(static_cast<int64_t>(plan.rows.size()), options.max_rows_per_step);
  EXPECT_LE(static_cast<int64_t>(plan.rows.size()), options.max_logit_rows);
}

class BenchPlansTest : public ::testing::TestWithParam<bool> {};

TEST_P(BenchPlansTest, EveryPlanFitsTheExecutorsCapacityAndKvCache) {
  const ModelConfig config = BenchLlama(GetParam());
  const BenchShape shape;
  const CudaExecutorOptions options = BenchExecutorOptions(shape, true);
  for (int32_t batch : shape.decode_batches) {
    SCOPED_TRACE(batch);
    ExpectFits(DecodePromptPlan(shape, batch), config, shape, options);
    std::vector<int32_t> tokens(batch, 5);
    for (int32_t step = 0; step < shape.warmup_steps + shape.decode_steps; ++step) {
      ExpectFits(DecodeStepPlan(shape, tokens, shape.prompt_tokens + step), config, shape, options);
    }
  }
  ExpectFits(PrefillPlan(shape), config, shape, options);
  // The largest decode batch is padded to a graph size that exists.
  const std::vector<int32_t> sizes = UsableGraphBatchSizes(options);
  ASSERT_FALSE(sizes.empty());
  EXPECT_GE(sizes.back(), shape.max_batch());
}

TEST_P(BenchPlansTest, SequencesNeverShareABlock) {
  const BenchShape shape;
  const StepPlan plan = DecodePromptPlan(shape, shape.max_batch());
  std::vector<int32_t> seen;
  for (const StepRow& row : plan.rows) {
    for (BlockId b : row.block_table) seen.push_back(b);
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::adjacent_find(seen.begin(), seen.end()), seen.end());
}

INSTANTIATE_TEST_SUITE_P(Shapes, BenchPlansTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Llama8B" : "Llama1B";
                         });

TEST(GraphBatchSizes, BoundedByEveryStepBuffer) {
  CudaExecutorOptions options;
  options.graph_batch_sizes = {64, 1, 8, 8, 128, 0, 16};
  options.max_rows_per_step = 128;
  options.max_tokens_per_step = 100;
  options.max_logit_rows = 512;
  EXPECT_EQ(UsableGraphBatchSizes(options), (std::vector<int32_t>{1, 8, 16, 64}));
  options.max_logit_rows = 10;
  EXPECT_EQ(UsableGraphBatchSizes(options), (std::vector<int32_t>{1, 8}));
  options.max_rows_per_step = 4;
  EXPECT_EQ(UsableGraphBatchSizes(options), (std::vector<int32_t>{1}));
}

}  // namespace
}  // namespace convoy::bench
