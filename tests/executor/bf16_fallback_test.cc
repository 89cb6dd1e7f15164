// bf16 weights on a CPU where oneDNN has no bf16 matrix product (oneDNN 2.6 on an AVX2-only CPU):
// the executor keeps fp32 weights and says so, instead of failing to load. CTest runs this file
// twice: as it is, and with ONEDNN_MAX_CPU_ISA=AVX2 (bf16_fallback_avx2_test), which makes any
// machine such a CPU.
#include <cstdlib>
#include <string>

#include "executor/cpu/cpu_executor.h"
#include "executor/cpu/linear.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "test_models.h"

namespace convoy {
namespace {

bool LimitedToAvx2() {
  const char* isa = std::getenv("ONEDNN_MAX_CPU_ISA");
  return isa != nullptr && std::string(isa) == "AVX2";
}

absl::StatusOr<std::unique_ptr<CpuExecutor>> ExecutorFor(const ModelWeights& weights,
                                                         CpuWeightFormat format) {
  CpuExecutorOptions options;
  options.weight_format = format;
  options.kv_cache_bytes = 4 << 20;
  options.block_size = 8;
  return CpuExecutor::Create(weights, options);
}

TEST(Bf16FallbackTest, TheProbeAnswersAndSaysWhyNot) {
  std::string reason;
  const bool available = Bf16MatmulAvailable(&reason);
  if (LimitedToAvx2()) {
    EXPECT_FALSE(available);
  }
  if (available) {
    EXPECT_TRUE(reason.empty()) << reason;
  } else {
    EXPECT_NE(reason.find(LimitedToAvx2() ? "instruction set AVX2" : "instruction set"),
              std::string::npos)
        << reason;
  }
}

TEST(Bf16FallbackTest, Bf16WeightsLoadAndStepWhateverTheCpu) {
  auto weights = testing::LoadRandomModel("bf16_fallback", testing::SmallGqaConfig());
  ASSERT_NE(weights, nullptr);
  absl::StatusOr<std::unique_ptr<CpuExecutor>> executor =
      ExecutorFor(*weights, CpuWeightFormat::kBF16);
  ASSERT_OK(executor);
  EXPECT_EQ((*executor)->weight_format(),
            Bf16MatmulAvailable() ? CpuWeightFormat::kBF16 : CpuWeightFormat::kF32);

  StepPlan plan;
  StepRow row;
  row.seq_id = 1;
  row.token_ids = {1, 2, 3};
  row.block_table = {0};
  plan.rows.push_back(row);
  absl::StatusOr<StepResult> result = (*executor)->Step(plan);
  ASSERT_OK(result);
  ASSERT_EQ(result->rows.size(), 1u);
  EXPECT_GE(result->rows[0].token, 0);
  EXPECT_LT(result->rows[0].token, weights->config().vocab_size);
}

TEST(Bf16FallbackTest, F32WeightsStayF32) {
  auto weights = testing::LoadRandomModel("bf16_fallback_f32", testing::SmallGqaConfig());
  ASSERT_NE(weights, nullptr);
  absl::StatusOr<std::unique_ptr<CpuExecutor>> executor =
      ExecutorFor(*weights, CpuWeightFormat::kF32);
  ASSERT_OK(executor);
  EXPECT_EQ((*executor)->weight_format(), CpuWeightFormat::kF32);
}

}  // namespace
}  // namespace convoy
