// Planning ahead (Scheduler::ScheduleAhead, CommitAhead), step by step with the fake executor, as
// the engine loop drives an asynchronous executor: what joins the step planned ahead, what is left
// out of it, and that no executor sees a pending token.
#include <algorithm>
#include <memory>

#include "gtest/gtest.h"
#include "harness.h"

namespace convoy::testing {
namespace {

SchedulerOptions AheadOptions() {
  SchedulerOptions options = TestOptions();
  options.max_batch_size = 8;
  return options;
}

bool PlanHolds(const StepPlan& plan, RequestId id) {
  return std::any_of(plan.rows.begin(), plan.rows.end(),
                     [id](const StepRow& row) { return row.seq_id == id; });
}

TEST(AheadTest, ARequestThatComesWhileTheNextStepIsPlannedJoinsIt) {
  Harness h(AheadOptions());
  h.plan_ahead = true;
  ASSERT_OK(h.Submit(MakeRequest(1, 5, 20)));
  ASSERT_TRUE(h.Step());
  ASSERT_TRUE(h.ahead.has_value());  // request 1's decode, planned while its prefill ran
  EXPECT_FALSE(PlanHolds(*h.ahead, 2));
  ASSERT_OK(h.Submit(MakeRequest(2, 7, 20)));
  ASSERT_TRUE(h.Step());
  // Committed with request 2's prompt in it, as a step planned now would have had it.
  EXPECT_TRUE(PlanHolds(h.last_plan(), 1));
  EXPECT_TRUE(PlanHolds(h.last_plan(), 2));
  h.RunUntilIdle();
  EXPECT_EQ(h.tokens[1], FakeExpectedTokens(MakePrompt(1, 5), 20));
  EXPECT_EQ(h.tokens[2], FakeExpectedTokens(MakePrompt(2, 7), 20));
}

TEST(AheadTest, NoExecutorSeesAPendingTokenAndNoRowFollowsAStop) {
  Harness h(AheadOptions());
  h.plan_ahead = true;
  Request stopped = MakeRequest(1, 6, 30);
  const std::vector<int32_t> expected = FakeExpectedTokens(MakePrompt(1, 6), 30);
  stopped.stop_token_ids = {expected[4]};
  const size_t stop_at = static_cast<size_t>(
      std::find(expected.begin(), expected.end(), expected[4]) - expected.begin());
  ASSERT_OK(h.Submit(stopped));
  ASSERT_OK(h.Submit(MakeRequest(2, 6, 12)));  // its max_tokens ends it: no row after the last
  h.RunUntilIdle();
  EXPECT_GT(h.steps_planned_ahead, 5);
  EXPECT_EQ(h.Final(1).outcome, Outcome::kCompleteStop);
  EXPECT_EQ(h.tokens[1], std::vector<int32_t>(expected.begin(), expected.begin() + stop_at + 1));
  EXPECT_EQ(h.Final(2).outcome, Outcome::kCompleteLength);
  EXPECT_EQ(h.tokens[2], FakeExpectedTokens(MakePrompt(2, 6), 12));
  // Every row the executor ran had real tokens; request 1 ran one row per token it generated
  // (the prompt took one), request 2 likewise: no row of either after its end.
  int rows_of_1 = 0, rows_of_2 = 0;
  for (const StepPlan& plan : h.plans()) {
    for (const StepRow& row : plan.rows) {
      for (int32_t t : row.token_ids) EXPECT_GE(t, 0) << "sequence " << row.seq_id;
      rows_of_1 += row.seq_id == 1 ? 1 : 0;
      rows_of_2 += row.seq_id == 2 ? 1 : 0;
    }
  }
  EXPECT_EQ(rows_of_1, static_cast<int>(stop_at) + 1);
  EXPECT_EQ(rows_of_2, 12);
  EXPECT_EQ(h.scheduler->allocator().num_free(), AheadOptions().num_blocks);
}

// A constrained request's next row needs its last token, so it is not planned ahead; it joins
// each step at the commit, and the steps are still planned ahead for the others.
TEST(AheadTest, AConstrainedRequestJoinsEveryStepAtTheCommit) {
  Harness h(AheadOptions());
  h.plan_ahead = true;
  Request constrained = MakeRequest(1, 5, 25);
  constrained.constraint = std::make_shared<TokenMask>(std::make_unique<AllowAll>(), 1 << 20);
  ASSERT_OK(h.Submit(constrained));
  ASSERT_OK(h.Submit(MakeRequest(2, 6, 25)));
  h.RunUntilIdle();
  EXPECT_GT(h.steps_planned_ahead, 20);
  EXPECT_EQ(h.tokens[1], FakeExpectedTokens(MakePrompt(1, 5), 25));
  EXPECT_EQ(h.tokens[2], FakeExpectedTokens(MakePrompt(2, 6), 25));
  // One row per token it generated, the first with its prompt: it never skipped a step.
  int rows_of_1 = 0;
  for (const StepPlan& plan : h.plans()) rows_of_1 += PlanHolds(plan, 1) ? 1 : 0;
  EXPECT_EQ(rows_of_1, 25);
  EXPECT_EQ(h.plans().size(), 25u);
}

TEST(AheadTest, ACancellationBeforeTheCommitLeavesTheRowOut) {
  Harness h(AheadOptions());
  h.plan_ahead = true;
  ASSERT_OK(h.Submit(MakeRequest(1, 5, 50)));
  ASSERT_OK(h.Submit(MakeRequest(2, 5, 10)));
  ASSERT_TRUE(h.Step());
  ASSERT_TRUE(h.Step());
  ASSERT_TRUE(h.ahead.has_value());
  ASSERT_TRUE(PlanHolds(*h.ahead, 1));
  ASSERT_OK(h.Cancel(1));  // between two steps: its row planned ahead is not launched
  EXPECT_EQ(h.Final(1).outcome, Outcome::kCancelled);
  const size_t tokens_at_cancel = h.tokens[1].size();
  const size_t plans_before = h.plans().size();
  h.RunUntilIdle();
  for (size_t p = plans_before; p < h.plans().size(); ++p) {
    EXPECT_FALSE(PlanHolds(h.plans()[p], 1)) << "step " << p;
  }
  EXPECT_EQ(h.tokens[1].size(), tokens_at_cancel);
  EXPECT_EQ(h.tokens[2], FakeExpectedTokens(MakePrompt(2, 5), 10));
  EXPECT_EQ(h.scheduler->allocator().num_free(), AheadOptions().num_blocks);
}

}  // namespace
}  // namespace convoy::testing
