// Batch formation: Triton's firing rule (size, preferred size, delay, delay 0), sequences joining
// and leaving a running batch, static mode, and length grouping against padding waste.
#include <algorithm>

#include "gtest/gtest.h"
#include "harness.h"
#include "scheduler/firing_rule.h"

namespace convoy::testing {
namespace {

const absl::Time kT0 = absl::UnixEpoch();

TEST(FiringRuleTest, NothingWaitingNeverFires) {
  FiringDecision d = DecideFiring(0, kT0, kT0, 8, {}, absl::Seconds(1));
  EXPECT_EQ(d.batch_size, 0);
  EXPECT_FALSE(d.wake_at.has_value());
}

TEST(FiringRuleTest, MaxBatchSizeFiresAtOnce) {
  EXPECT_EQ(DecideFiring(8, kT0, kT0, 8, {}, absl::Seconds(1)).batch_size, 8);
  EXPECT_EQ(DecideFiring(20, kT0, kT0, 8, {4}, absl::Seconds(1)).batch_size, 8);
}

TEST(FiringRuleTest, LargestPreferredSizeFiresAtOnce) {
  EXPECT_EQ(DecideFiring(5, kT0, kT0, 8, {2, 4}, absl::Seconds(1)).batch_size, 4);
  EXPECT_EQ(DecideFiring(2, kT0, kT0, 8, {4, 2}, absl::Seconds(1)).batch_size, 2);
  FiringDecision d = DecideFiring(1, kT0, kT0, 8, {2, 4}, absl::Seconds(1));
  EXPECT_EQ(d.batch_size, 0);
  EXPECT_EQ(d.wake_at, kT0 + absl::Seconds(1));
}

TEST(FiringRuleTest, DelayExpiryFiresWhatIsThere) {
  const absl::Duration delay = absl::Milliseconds(5);
  FiringDecision before = DecideFiring(3, kT0, kT0 + delay - absl::Microseconds(1), 8, {}, delay);
  EXPECT_EQ(before.batch_size, 0);
  EXPECT_EQ(before.wake_at, kT0 + delay);
  EXPECT_EQ(DecideFiring(3, kT0, kT0 + delay, 8, {}, delay).batch_size, 3);
}

TEST(FiringRuleTest, ZeroDelayNeverWaits) {
  EXPECT_EQ(DecideFiring(1, kT0, kT0, 8, {4}, absl::ZeroDuration()).batch_size, 1);
}

SchedulerOptions FiringOptions() {
  SchedulerOptions options = TestOptions();
  options.max_batch_size = 4;
  options.max_queue_delay = absl::Milliseconds(100);
  return options;
}

TEST(BatchFiringTest, IdleEngineWaitsUntilMaxBatchSize) {
  Harness h(FiringOptions());
  for (int id = 1; id <= 3; ++id) ASSERT_OK(h.Submit(MakeRequest(id, 5, 2)));
  EXPECT_FALSE(h.Step());
  EXPECT_EQ(h.decision.wake_at, h.clock.Now() + absl::Milliseconds(100));
  ASSERT_OK(h.Submit(MakeRequest(4, 5, 2)));
  ASSERT_TRUE(h.Step());
  EXPECT_EQ(h.last_plan().rows.size(), 4u);
}

TEST(BatchFiringTest, PreferredSizeFiresWithoutWaiting) {
  SchedulerOptions options = FiringOptions();
  options.max_batch_size = 8;
  options.preferred_batch_sizes = {2, 4};
  Harness h(options);
  ASSERT_OK(h.Submit(MakeRequest(1, 5, 2)));
  EXPECT_FALSE(h.Step());
  ASSERT_OK(h.Submit(MakeRequest(2, 5, 2)));
  ASSERT_OK(h.Submit(MakeRequest(3, 5, 2)));
  ASSERT_TRUE(h.Step());
  // Three wait: the largest preferred size that fits, two, fires; the oldest two go.
  EXPECT_EQ(RowIds(h.last_plan()), (std::vector<RequestId>{1, 2}));
}

TEST(BatchFiringTest, OldestRequestsDelayFiresASmallerBatch) {
  Harness h(FiringOptions());
  const absl::Time t0 = h.clock.Now();
  ASSERT_OK(h.Submit(MakeRequest(1, 5, 2)));
  h.clock.Advance(absl::Milliseconds(60));
  ASSERT_OK(h.Submit(MakeRequest(2, 5, 2)));
  EXPECT_FALSE(h.Step());
  // The wake-up is the oldest request's expiry, not the newest's.
  EXPECT_EQ(h.decision.wake_at, t0 + absl::Milliseconds(100));
  h.clock.Set(t0 + absl::Milliseconds(100) - absl::Microseconds(1));
  EXPECT_FALSE(h.Step());
  h.clock.Set(t0 + absl::Milliseconds(100));
  ASSERT_TRUE(h.Step());
  EXPECT_EQ(RowIds(h.last_plan()), (std::vector<RequestId>{1, 2}));
}

TEST(BatchFiringTest, ZeroDelayRunsALoneRequestAtOnce) {
  SchedulerOptions options = FiringOptions();
  options.max_queue_delay = absl::ZeroDuration();
  Harness h(options);
  ASSERT_OK(h.Submit(MakeRequest(1, 5, 2)));
  ASSERT_TRUE(h.Step());
  EXPECT_EQ(RowIds(h.last_plan()), (std::vector<RequestId>{1}));
}

TEST(ContinuousBatchingTest, SequencesJoinAndLeaveBetweenSteps) {
  SchedulerOptions options = TestOptions();
  Harness h(options);
  ASSERT_OK(h.Submit(MakeRequest(1, 6, 2)));
  ASSERT_TRUE(h.Step());  // 1: prefill, first token
  ASSERT_OK(h.Submit(MakeRequest(2, 3, 3)));
  ASSERT_TRUE(h.Step());  // 1 decodes (its last token), 2 joins with its prompt
  ASSERT_EQ(RowIds(h.last_plan()), (std::vector<RequestId>{1, 2}));
  EXPECT_EQ(h.last_plan().rows[0].token_ids.size(), 1u);
  EXPECT_EQ(h.last_plan().rows[1].token_ids.size(), 3u);
  EXPECT_EQ(h.Final(1).outcome, Outcome::kCompleteLength);
  ASSERT_TRUE(h.Step());  // 1 has left
  EXPECT_EQ(RowIds(h.last_plan()), (std::vector<RequestId>{2}));
  h.RunUntilIdle();
  EXPECT_EQ(h.tokens[1], FakeExpectedTokens(MakePrompt(1, 6), 2));
  EXPECT_EQ(h.tokens[2], FakeExpectedTokens(MakePrompt(2, 3), 3));
}

TEST(StaticBatchingTest, BatchRunsToItsLongestMemberAndReturnsTogether) {
  SchedulerOptions options = TestOptions();
  options.mode = BatchingMode::kStatic;
  options.max_batch_size = 2;
  options.length_grouping_window = 1;
  Harness h(options);
  ASSERT_OK(h.Submit(MakeRequest(1, 4, 2)));
  ASSERT_OK(h.Submit(MakeRequest(2, 7, 5)));
  ASSERT_OK(h.Submit(MakeRequest(3, 4, 1)));  // waits for the next batch
  ASSERT_TRUE(h.Step());
  EXPECT_EQ(RowIds(h.last_plan()), (std::vector<RequestId>{1, 2}));
  // The whole batch is padded to its longest prompt.
  EXPECT_EQ(h.scheduler->stats().padded_tokens, 3);
  int steps = 1;
  while (!h.Finished(2)) {
    ASSERT_TRUE(h.Step());
    ++steps;
    for (RequestId id : RowIds(h.last_plan())) EXPECT_NE(id, 3) << "joined a static batch";
    // 1 finished generating after two steps, but is returned with the batch.
    if (!h.Finished(2)) {
      EXPECT_FALSE(h.Finished(1));
    }
  }
  EXPECT_EQ(steps, 5);
  EXPECT_EQ(h.tokens[1].size(), 2u);
  EXPECT_EQ(h.Final(1).outcome, Outcome::kCompleteLength);
  ASSERT_TRUE(h.Step());
  EXPECT_EQ(RowIds(h.last_plan()), (std::vector<RequestId>{3}));
  h.RunUntilIdle();
  EXPECT_EQ(h.tokens[2], FakeExpectedTokens(MakePrompt(2, 7), 5));
  EXPECT_EQ(h.scheduler->allocator().num_free(), options.num_blocks);
}

TEST(StaticBatchingTest, WaitsForTheQueueDelayLikeTheDynamicBatcher) {
  SchedulerOptions options = TestOptions();
  options.mode = BatchingMode::kStatic;
  options.max_batch_size = 4;
  options.max_queue_delay = absl::Milliseconds(10);
  Harness h(options);
  ASSERT_OK(h.Submit(MakeRequest(1, 4, 1)));
  EXPECT_FALSE(h.Step());
  h.clock.Advance(absl::Milliseconds(10));
  ASSERT_TRUE(h.Step());
  EXPECT_EQ(RowIds(h.last_plan()), (std::vector<RequestId>{1}));
}

// Eight prompts alternating 40 and 8 tokens, four per step.
double PaddingWaste(int32_t window, std::vector<size_t>* first_step_lengths) {
  SchedulerOptions options = TestOptions();
  options.max_batch_size = 4;
  options.length_grouping_window = window;
  Harness h(options);
  for (int id = 1; id <= 8; ++id) EXPECT_OK(h.Submit(MakeRequest(id, id % 2 == 1 ? 40 : 8, 1)));
  h.RunUntilIdle();
  for (const StepRow& row : h.plans()[0].rows) first_step_lengths->push_back(row.token_ids.size());
  return h.scheduler->stats().padding_waste();
}

TEST(LengthGroupingTest, SimilarLengthsShareAStep) {
  std::vector<size_t> strict_lengths, grouped_lengths;
  const double strict = PaddingWaste(1, &strict_lengths);
  const double grouped = PaddingWaste(8, &grouped_lengths);
  EXPECT_EQ(strict_lengths, (std::vector<size_t>{40, 8, 40, 8}));
  EXPECT_EQ(grouped_lengths, (std::vector<size_t>{40, 40, 40, 40}));
  EXPECT_GT(strict, 0.5);
  EXPECT_EQ(grouped, 0.0);
}

}  // namespace
}  // namespace convoy::testing
