// A malformed step plan is refused with a message naming the row and field, writes nothing, and
// the executor keeps working.
#include <functional>
#include <string>
#include <vector>

#include "executor/cpu/cpu_executor.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "test_models.h"

namespace convoy {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

class StepPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    weights_ = testing::LoadRandomModel("plans", testing::SmallGqaConfig());
    ASSERT_NE(weights_, nullptr);
    CpuExecutorOptions options;
    options.kv_cache_bytes = 4 << 20;
    options.block_size = 4;
    auto executor = CpuExecutor::Create(*weights_, options);
    ASSERT_OK(executor);
    executor_ = std::move(executor).value();
  }

  StepRow GoodRow() {
    StepRow row;
    row.seq_id = 1;
    row.token_ids = {5, 6, 7, 8, 9};
    row.block_table = {0, 1};
    return row;
  }

  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<CpuExecutor> executor_;
};

TEST_F(StepPlanTest, EachMalformedPlanNamesWhatIsWrong) {
  struct Case {
    std::string name;
    std::function<void(StepPlan*)> breaks;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"no rows", [](StepPlan* p) { p->rows.clear(); }, "no rows"},
      {"empty tokens", [](StepPlan* p) { p->rows[0].token_ids.clear(); }, "token_ids is empty"},
      {"token too large", [](StepPlan* p) { p->rows[0].token_ids[2] = 320; },
       "token_ids[2] = 320 is outside the vocabulary"},
      {"negative token", [](StepPlan* p) { p->rows[0].token_ids[0] = -1; }, "token_ids[0] = -1"},
      {"negative start", [](StepPlan* p) { p->rows[0].start_pos = -3; }, "start_pos -3"},
      {"short block table", [](StepPlan* p) { p->rows[0].block_table = {0}; },
       "block_table holds 4 tokens, the row needs 5"},
      {"block out of range", [](StepPlan* p) { p->rows[0].block_table[1] = 1 << 30; },
       "block_table[1]"},
      {"duplicate sequence", [](StepPlan* p) { p->rows.push_back(p->rows[0]); }, "twice"},
      {"past the context",
       [](StepPlan* p) {
         p->rows[0].start_pos = 510;
         p->rows[0].block_table.assign(129, 0);
       },
       "exceed the model's context of 512"},
      {"bad top_p",
       [](StepPlan* p) {
         p->rows[0].sampling.temperature = 1.0f;
         p->rows[0].sampling.top_p = 0.0f;
       },
       "top_p"},
  };
  for (const Case& c : cases) {
    StepPlan plan;
    plan.rows.push_back(GoodRow());
    c.breaks(&plan);
    EXPECT_THAT(executor_->Step(plan),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.name;
  }
  StepPlan good;
  good.rows.push_back(GoodRow());
  auto result = executor_->Step(good);
  ASSERT_OK(result);
  EXPECT_EQ(result->rows[0].seq_id, 1);
  EXPECT_GE(result->rows[0].token, 0);
}

// RunStepIsolatingRows: a malformed row is left out with its own error, and the rows beside it run
// exactly as they would without it.
TEST_F(StepPlanTest, AMalformedRowFailsAloneAndTheOthersRun) {
  StepRow decode;
  decode.seq_id = 3;
  decode.token_ids = {11};
  decode.block_table = {2};
  StepRow bad = GoodRow();
  bad.seq_id = 2;
  bad.token_ids[1] = 320;
  bad.block_table = {3, 4};
  StepPlan mixed;
  mixed.rows = {GoodRow(), bad, decode};
  auto result = RunStepIsolatingRows(*executor_, mixed);
  ASSERT_OK(result);
  ASSERT_EQ(result->rows.size(), 3u);
  EXPECT_THAT(result->rows[1].status,
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sequence 2: token_ids[1] = 320 is outside the vocabulary")));
  EXPECT_EQ(result->rows[1].seq_id, 2);
  EXPECT_EQ(result->real_tokens, 6) << "the bad row's tokens were not run";

  StepPlan without;
  without.rows = {GoodRow(), decode};
  auto alone = executor_->Step(without);
  ASSERT_OK(alone);
  for (int r : {0, 2}) {
    const RowResult& got = result->rows[r];
    const RowResult& want = alone->rows[r == 0 ? 0 : 1];
    EXPECT_OK(got.status);
    EXPECT_EQ(got.seq_id, want.seq_id);
    EXPECT_EQ(got.token, want.token);
    EXPECT_FLOAT_EQ(got.logprob, want.logprob);
  }

  StepPlan all_bad;
  all_bad.rows = {bad};
  auto none_ran = RunStepIsolatingRows(*executor_, all_bad);
  ASSERT_OK(none_ran);
  ASSERT_EQ(none_ran->rows.size(), 1u);
  EXPECT_THAT(none_ran->rows[0].status,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sequence 2")));
  EXPECT_EQ(none_ran->real_tokens, 0);
}

TEST_F(StepPlanTest, ReportsPaddingOfMixedLengths) {
  StepPlan plan;
  plan.rows.push_back(GoodRow());  // 5 tokens
  StepRow decode;
  decode.seq_id = 2;
  decode.token_ids = {3};
  decode.start_pos = 0;
  decode.block_table = {2};
  plan.rows.push_back(decode);
  auto result = executor_->Step(plan);
  ASSERT_OK(result);
  EXPECT_EQ(result->padded_length, 5);
  EXPECT_EQ(result->real_tokens, 6);
  EXPECT_EQ(result->padded_tokens, 4);
  EXPECT_EQ(result->computed_tokens, 10);

  CpuExecutorOptions options;
  options.kv_cache_bytes = 4 << 20;
  options.block_size = 4;
  options.skip_padding = true;
  auto packed = CpuExecutor::Create(*weights_, options);
  ASSERT_OK(packed);
  auto packed_result = (*packed)->Step(plan);
  ASSERT_OK(packed_result);
  EXPECT_EQ(packed_result->padded_tokens, 4) << "what padding would have cost";
  EXPECT_EQ(packed_result->computed_tokens, 6);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(packed_result->rows[r].token, result->rows[r].token);
    EXPECT_NEAR(packed_result->rows[r].logprob, result->rows[r].logprob, 1e-5);
  }
}

}  // namespace
}  // namespace convoy
