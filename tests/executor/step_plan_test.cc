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
      {"negative first_block", [](StepPlan* p) { p->rows[0].first_block = -1; },
       "first_block -1 < 0"},
      {"entries the executor does not hold",
       [](StepPlan* p) {
         p->rows[0].first_block = 1;
         p->rows[0].block_table = {1};
       },
       "sequence 1: first_block 1, but the executor holds 0 entries of its block table"},
      {"entry out of range after first_block",
       [](StepPlan* p) {
         p->rows[0].first_block = 0;
         p->rows[0].block_table = {0, -7};
       },
       "block_table[1] = -7"},
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

// The executor keeps each sequence's table between steps: a row that sends only the entries it
// adds gives the same result as one that sends its table whole, and a row cannot continue a table
// its plan releases.
TEST_F(StepPlanTest, ARowThatSendsOnlyNewEntriesRunsAsOneThatSendsAll) {
  CpuExecutorOptions options;
  options.kv_cache_bytes = 4 << 20;
  options.block_size = 4;
  auto whole = CpuExecutor::Create(*weights_, options);
  ASSERT_OK(whole);
  auto step = [](Executor& executor, StepRow row) {
    StepPlan plan;
    row.sampling.num_top_logprobs = 3;
    plan.rows.push_back(std::move(row));
    return executor.Step(plan);
  };
  StepRow prefill = GoodRow();  // positions 0..4 in blocks 0 and 1
  ASSERT_OK(step(*executor_, prefill));
  ASSERT_OK(step(**whole, prefill));
  EXPECT_EQ(executor_->block_tables().held(1), 2);
  // Position 5 fits the blocks held; position 8 starts block 2 (the cache's block 7).
  for (int32_t pos : {5, 6, 7, 8, 9}) {
    StepRow full;
    full.seq_id = 1;
    full.token_ids = {static_cast<int32_t>(10 + pos)};
    full.start_pos = pos;
    full.block_table = {0, 1};
    if (pos >= 8) full.block_table.push_back(7);
    StepRow delta = full;
    const int32_t held = executor_->block_tables().held(1);
    delta.first_block = held;
    delta.block_table.erase(delta.block_table.begin(), delta.block_table.begin() + held);
    auto got = step(*executor_, delta);
    auto want = step(**whole, full);
    ASSERT_OK(got);
    ASSERT_OK(want);
    EXPECT_EQ(got->rows[0].token, want->rows[0].token) << pos;
    EXPECT_EQ(got->rows[0].logprob, want->rows[0].logprob) << pos;
    ASSERT_EQ(got->rows[0].top_logprobs.size(), 3u);
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(got->rows[0].top_logprobs[k].token, want->rows[0].top_logprobs[k].token);
    }
  }
  EXPECT_EQ(executor_->block_tables().table(1), absl::Span<const BlockId>(std::vector{0, 1, 7}));

  StepRow next;
  next.seq_id = 1;
  next.token_ids = {3};
  next.start_pos = 10;
  next.first_block = 3;
  StepPlan released;
  released.rows.push_back(next);
  released.released = {1};
  EXPECT_THAT(executor_->Step(released),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the executor holds 0 entries of its block table (the same plan "
                                 "releases it)")));
  EXPECT_EQ(executor_->block_tables().held(1), 3) << "nothing changes on error";
  // Through IsolatedStep the releases apply even when no row runs.
  auto isolated = RunStepIsolatingRows(*executor_, released);
  ASSERT_OK(isolated);
  EXPECT_THAT(isolated->rows[0].status,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("first_block 3")));
  EXPECT_EQ(executor_->block_tables().num_sequences(), 0u);
}

// A row may also replace the tail of what is held (first_block below the held entries).
TEST(BlockTablesTest, ARowReplacesTheEntriesFromItsFirstBlockOn) {
  BlockTables tables;
  StepPlan plan;
  plan.rows.resize(1);
  plan.rows[0].seq_id = 4;
  plan.rows[0].block_table = {3, 5, 9};
  ASSERT_OK(tables.CheckPlan(plan));
  tables.Apply(plan);
  plan.rows[0].first_block = 1;
  plan.rows[0].block_table = {kNoBlock};
  ASSERT_OK(tables.CheckPlan(plan));
  tables.Apply(plan);
  EXPECT_EQ(tables.table(4), absl::Span<const BlockId>(std::vector{3, kNoBlock}));
  plan.rows[0].first_block = 3;
  EXPECT_THAT(
      tables.CheckPlan(plan),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("step row 0: sequence 4: first_block 3, but the executor holds 2")));
  tables.Release(std::vector<int64_t>{4, 99});
  EXPECT_EQ(tables.num_sequences(), 0u);
  EXPECT_TRUE(tables.table(4).empty());
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
