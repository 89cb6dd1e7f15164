// The CPU executor's KV cache types: in the same memory budget a bf16 cache holds twice fp32's
// tokens and an int8 cache (a bf16 scale per token, KV head and k|v beside its bytes) nearly
// twice bf16's; a type the CPU cache does not store is refused; the tools' spellings parse.
#include "executor/cpu/cpu_executor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "test_models.h"

namespace convoy {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

// KV heads of 64, as the default model's (SmolLM2-135M).
ModelConfig Heads64Config() {
  ModelConfig c = testing::TinyModelConfig();
  c.hidden_size = 128;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 64;
  return c;
}

int32_t BlocksFor(const ModelWeights& weights, KvDtype dtype) {
  CpuExecutorOptions options;
  options.kv_cache_bytes = 8 << 20;
  options.kv_dtype = dtype;
  auto executor = CpuExecutor::Create(weights, options);
  EXPECT_OK(executor);
  if (!executor.ok()) return 0;
  EXPECT_EQ((*executor)->kv_spec().dtype, dtype);
  return (*executor)->kv_spec().num_blocks;
}

TEST(KvDtypeTest, TheSameBudgetHoldsMoreTokensInSmallerTypes) {
  auto weights = testing::LoadRandomModel("kv_dtype", Heads64Config());
  ASSERT_NE(weights, nullptr);
  const int32_t f32 = BlocksFor(*weights, KvDtype::kF32);
  const int32_t bf16 = BlocksFor(*weights, KvDtype::kBF16);
  const int32_t int8 = BlocksFor(*weights, KvDtype::kInt8);
  ASSERT_GT(f32, 0);
  EXPECT_EQ(bf16, 2 * f32);
  // 64 bytes and a 2-byte scale per token, head and k|v against bf16's 128 bytes: 128 / 66.
  EXPECT_GE(int8, 1.9 * bf16);
  EXPECT_EQ(int8, static_cast<int32_t>((int64_t{8} << 20) / (int64_t{2} * 2 * 16 * (64 + 2))));
}

TEST(KvDtypeTest, ATypeTheCpuCacheDoesNotStoreIsRefused) {
  auto weights = testing::LoadRandomModel("kv_dtype", Heads64Config());
  ASSERT_NE(weights, nullptr);
  CpuExecutorOptions options;
  options.kv_cache_bytes = 8 << 20;
  options.kv_dtype = KvDtype::kF16;
  EXPECT_THAT(CpuExecutor::Create(*weights, options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("f16")));
}

TEST(KvDtypeTest, ToolSpellingsParse) {
  EXPECT_EQ(ParseCpuKvDtype("f32"), KvDtype::kF32);
  EXPECT_EQ(ParseCpuKvDtype("bf16"), KvDtype::kBF16);
  EXPECT_EQ(ParseCpuKvDtype("int8"), KvDtype::kInt8);
  EXPECT_EQ(ParseCpuKvDtype("f16"), std::nullopt);
  EXPECT_EQ(ParseCpuKvDtype("fp8"), std::nullopt);
}

}  // namespace
}  // namespace convoy
