// The CPU executor states how many token slots and rows one step may hold, from the memory a step
// may take, and the engine refuses a config that asks for more, naming the field: a permitted
// config cannot get the process killed for memory.
#include "engine/engine_loop.h"
#include "executor/cpu/cpu_executor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "test_models.h"

namespace convoy {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

TEST(CpuStepLimitsTest, TheStepMemoryBoundsTheTokensAStepMayHold) {
  auto weights = testing::LoadRandomModel("step_limits", testing::TinyModelConfig());
  ASSERT_NE(weights, nullptr);
  CpuExecutorOptions options;
  options.kv_cache_bytes = 4 << 20;
  options.step_memory_bytes = 64 << 20;
  auto executor = CpuExecutor::Create(*weights, options);
  ASSERT_OK(executor);
  const ExecutorLimits limits = (*executor)->limits();
  const ModelConfig& c = (*executor)->model_config();
  EXPECT_EQ(limits.max_rows_per_step, CpuExecutor::kMaxRowsPerStep);
  const int64_t logits = int64_t{CpuExecutor::kMaxRowsPerStep} * c.vocab_size * 4;
  EXPECT_EQ(limits.max_tokens_per_step,
            (options.step_memory_bytes - logits) / (*executor)->StepBytesPerToken());
  // At least the hidden states, Q/K/V, the MLP's three intermediate vectors: 4 bytes each.
  EXPECT_GE((*executor)->StepBytesPerToken(),
            4 * (c.hidden_size + c.q_size() + 2 * c.kv_size() + 3 * c.intermediate_size));

  EngineLoopOptions engine;
  engine.scheduler.max_batch_size = 8;
  engine.scheduler.block_size = (*executor)->kv_spec().block_size;
  engine.scheduler.max_num_batched_tokens = static_cast<int32_t>(limits.max_tokens_per_step);
  EXPECT_OK(EngineLoop::Create(executor->get(), engine));
  engine.scheduler.max_num_batched_tokens += 1;
  EXPECT_THAT(
      EngineLoop::Create(executor->get(), engine),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("scheduler.max_num_batched_tokens")));
  engine.scheduler.max_num_batched_tokens -= 1;
  engine.scheduler.max_batch_size = CpuExecutor::kMaxRowsPerStep + 1;
  EXPECT_THAT(EngineLoop::Create(executor->get(), engine),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("scheduler.max_batch_size")));
}

TEST(CpuStepLimitsTest, ABadStepMemoryIsRefused) {
  auto weights = testing::LoadRandomModel("step_limits", testing::TinyModelConfig());
  ASSERT_NE(weights, nullptr);
  CpuExecutorOptions options;
  options.kv_cache_bytes = 4 << 20;
  options.step_memory_bytes = 0;
  EXPECT_THAT(CpuExecutor::Create(*weights, options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("step_memory_bytes")));
}

}  // namespace
}  // namespace convoy
