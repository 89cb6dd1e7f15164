// Iteration-level scheduling: the token budget, chunked prefill beside running decodes,
// priorities and aging, KV admission, preemption by recomputation, stop tokens and the metrics
// hooks.
#include <algorithm>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "harness.h"

namespace convoy::testing {
namespace {

int32_t LongestRow(const StepPlan& plan) {
  size_t longest = 0;
  for (const StepRow& row : plan.rows) longest = std::max(longest, row.token_ids.size());
  return static_cast<int32_t>(longest);
}

TEST(TokenBudgetTest, EveryStepFitsRowsTimesLongestRow) {
  SchedulerOptions options = TestOptions();
  options.max_batch_size = 8;
  options.max_num_batched_tokens = 64;
  Harness h(options);
  for (int id = 1; id <= 12; ++id) ASSERT_OK(h.Submit(MakeRequest(id, 10 + 9 * id, 6)));
  h.RunUntilIdle();
  ASSERT_FALSE(h.plans().empty());
  for (const StepPlan& plan : h.plans()) {
    EXPECT_LE(plan.rows.size(), 8u);
    EXPECT_LE(static_cast<int64_t>(plan.rows.size()) * LongestRow(plan), 64);
  }
  // The first step: the oldest prompt whole (19 tokens), then the one adding the least padding
  // (28 tokens); a third row would make 3 x 28 > 64.
  EXPECT_EQ(RowIds(h.plans()[0]), (std::vector<RequestId>{1, 2}));
  EXPECT_EQ(LongestRow(h.plans()[0]), 28);
  for (int id = 1; id <= 12; ++id) {
    EXPECT_EQ(h.tokens[id], FakeExpectedTokens(MakePrompt(id, 10 + 9 * id), 6)) << id;
  }
}

TEST(ChunkedPrefillTest, ALongPromptDoesNotStallRunningDecodes) {
  SchedulerOptions options = TestOptions();
  options.max_batch_size = 8;
  options.max_num_batched_tokens = 64;
  options.prefill_chunk_size = 32;
  Harness h(options);
  for (int id = 1; id <= 3; ++id) ASSERT_OK(h.Submit(MakeRequest(id, 4, 60)));
  ASSERT_TRUE(h.Step());
  ASSERT_OK(h.Submit(MakeRequest(9, 300, 2)));
  // Each step: three decodes and a 16-token chunk (64 tokens / 4 rows) of the long prompt.
  int prefill_steps = 0;
  while (h.tokens[9].empty()) {
    ASSERT_TRUE(h.Step());
    ++prefill_steps;
    const StepPlan& plan = h.last_plan();
    ASSERT_EQ(RowIds(plan), (std::vector<RequestId>{1, 2, 3, 9}));
    for (int r = 0; r < 3; ++r) EXPECT_EQ(plan.rows[r].token_ids.size(), 1u);
    EXPECT_EQ(plan.rows[3].start_pos, 16 * (prefill_steps - 1));
    EXPECT_EQ(plan.rows[3].sample, h.tokens[9].size() == 1);
  }
  EXPECT_EQ(prefill_steps, 19);  // ceil(300 / 16)
  h.RunUntilIdle();
  EXPECT_EQ(h.tokens[9], FakeExpectedTokens(MakePrompt(9, 300), 2));
  for (int id = 1; id <= 3; ++id)
    EXPECT_EQ(h.tokens[id], FakeExpectedTokens(MakePrompt(id, 4), 60));
}

// An executor that skips padding: the budget counts real tokens, so the chunk beside three
// decodes takes the rest of the budget (61 tokens, capped by the chunk size of 32) instead of
// 64 / 4 rows.
TEST(ChunkedPrefillTest, WithoutPaddingTheBudgetCountsRealTokens) {
  SchedulerOptions options = TestOptions();
  options.max_batch_size = 8;
  options.max_num_batched_tokens = 64;
  options.prefill_chunk_size = 32;
  options.budget_counts_padding = false;
  Harness h(options);
  for (int id = 1; id <= 3; ++id) ASSERT_OK(h.Submit(MakeRequest(id, 4, 60)));
  ASSERT_TRUE(h.Step());
  ASSERT_OK(h.Submit(MakeRequest(9, 300, 2)));
  int prefill_steps = 0;
  while (h.tokens[9].empty()) {
    ASSERT_TRUE(h.Step());
    ++prefill_steps;
    const StepPlan& plan = h.last_plan();
    ASSERT_EQ(RowIds(plan), (std::vector<RequestId>{1, 2, 3, 9}));
    int64_t real = 0;
    for (const StepRow& row : plan.rows) real += static_cast<int64_t>(row.token_ids.size());
    EXPECT_LE(real, 64);
    EXPECT_EQ(plan.rows[3].start_pos, 32 * (prefill_steps - 1));
  }
  EXPECT_EQ(prefill_steps, 10);  // ceil(300 / 32)
  h.RunUntilIdle();
  EXPECT_EQ(h.tokens[9], FakeExpectedTokens(MakePrompt(9, 300), 2));
}

TEST(ChunkedPrefillTest, ChunksAreAtMostTheChunkSize) {
  SchedulerOptions options = TestOptions();
  options.prefill_chunk_size = 7;
  Harness h(options);
  ASSERT_OK(h.Submit(MakeRequest(1, 30, 3)));
  h.RunUntilIdle();
  std::vector<size_t> lengths;
  for (const StepPlan& plan : h.plans()) lengths.push_back(plan.rows[0].token_ids.size());
  EXPECT_EQ(lengths, (std::vector<size_t>{7, 7, 7, 7, 2, 1, 1}));
  EXPECT_EQ(h.tokens[1], FakeExpectedTokens(MakePrompt(1, 30), 3));
}

SchedulerOptions PriorityOptions() {
  SchedulerOptions options = TestOptions();
  options.max_batch_size = 1;
  options.priority_levels = 3;
  options.default_priority_level = 3;
  return options;
}

TEST(PriorityTest, HigherLevelsAreScheduledFirst) {
  Harness h(PriorityOptions());
  ASSERT_OK(h.Submit(MakeRequest(1, 4, 1, 3)));
  ASSERT_OK(h.Submit(MakeRequest(2, 4, 1, 2)));
  ASSERT_OK(h.Submit(MakeRequest(3, 4, 1, 1)));
  ASSERT_OK(h.Submit(MakeRequest(4, 4, 1, 1)));
  h.RunUntilIdle();
  std::vector<RequestId> order;
  for (const StepPlan& plan : h.plans()) order.push_back(plan.rows[0].seq_id);
  EXPECT_EQ(order, (std::vector<RequestId>{3, 4, 2, 1}));
}

// A stream of high-priority requests, one per step, each done in one step; one background request
// arrives first. Returns the step that ran the background request, or -1 within `max_steps`.
int StepThatRanBackground(absl::Duration aging, int max_steps) {
  SchedulerOptions options = PriorityOptions();
  options.priority_levels = 2;
  options.default_priority_level = 2;
  options.priority_aging = aging;
  Harness h(options);
  EXPECT_OK(h.Submit(MakeRequest(1000, 4, 1, 2)));
  EXPECT_OK(h.Submit(MakeRequest(1, 4, 1, 1)));
  for (int step = 0; step < max_steps; ++step) {
    EXPECT_OK(h.Submit(MakeRequest(step + 2, 4, 1, 1)));
    EXPECT_TRUE(h.Step());
    if (h.last_plan().rows[0].seq_id == 1000) return step;
    h.clock.Advance(absl::Milliseconds(10));
  }
  return -1;
}

TEST(PriorityTest, AgingKeepsBackgroundWorkFromStarving) {
  EXPECT_EQ(StepThatRanBackground(absl::InfiniteDuration(), 200), -1);
  // After 100 ms (ten steps) it ranks with the interactive level and is older than all of it.
  EXPECT_EQ(StepThatRanBackground(absl::Milliseconds(100), 200), 10);
}

TEST(KvAdmissionTest, ARequestWaitsUntilItsBlocksFit) {
  SchedulerOptions options = TestOptions();
  options.block_size = 4;
  options.num_blocks = 10;
  Harness h(options);
  ASSERT_OK(h.Submit(MakeRequest(1, 24, 4)));  // 6 blocks, 7 when decoding
  ASSERT_TRUE(h.Step());
  ASSERT_OK(h.Submit(MakeRequest(2, 16, 2)));  // 4 blocks: only 3 are free
  while (!h.Finished(1)) {
    ASSERT_TRUE(h.Step());
    EXPECT_EQ(RowIds(h.last_plan()), (std::vector<RequestId>{1}));
  }
  h.RunUntilIdle();
  EXPECT_EQ(h.tokens[2], FakeExpectedTokens(MakePrompt(2, 16), 2));
  EXPECT_EQ(h.scheduler->stats().preemptions, 0);
}

class RecordingObserver : public SchedulerObserver {
 public:
  void OnStepPlanned(const StepStats& stats) override { steps.push_back(stats); }
  void OnRejected(RejectReason reason) override { rejected.push_back(reason); }
  void OnPreempted(RequestId id) override { preempted.push_back(id); }
  void OnQueueTime(int32_t /*level*/, absl::Duration d) override { queue_times.push_back(d); }
  void OnFirstToken(absl::Duration d) override { ttft.push_back(d); }
  void OnInterTokenTime(absl::Duration d) override { itl.push_back(d); }
  void OnFinished(Outcome outcome) override { finished.push_back(outcome); }

  std::vector<StepStats> steps;
  std::vector<RejectReason> rejected;
  std::vector<RequestId> preempted;
  std::vector<absl::Duration> queue_times, ttft, itl;
  std::vector<Outcome> finished;
};

TEST(PreemptionTest, LowestPriorityAdmittedLastIsRecomputedWithTheSameTokens) {
  SchedulerOptions options = TestOptions();
  options.block_size = 4;
  options.num_blocks = 12;
  options.priority_levels = 2;
  RecordingObserver observer;
  Harness h(options, &observer);
  // Each needs 7 blocks at its longest; together 21 > 12.
  ASSERT_OK(h.Submit(MakeRequest(1, 8, 20, 2)));
  ASSERT_OK(h.Submit(MakeRequest(2, 8, 20, 1)));
  ASSERT_OK(h.Submit(MakeRequest(3, 8, 20, 2)));
  h.RunUntilIdle();
  ASSERT_FALSE(observer.preempted.empty());
  // 3 is of the lowest level and admitted after 1.
  EXPECT_EQ(observer.preempted[0], 3);
  EXPECT_EQ(h.scheduler->stats().preemptions, static_cast<int64_t>(observer.preempted.size()));
  for (int id = 1; id <= 3; ++id) {
    EXPECT_EQ(h.tokens[id], FakeExpectedTokens(MakePrompt(id, 8), 20)) << id;
    EXPECT_EQ(h.Final(id).outcome, Outcome::kCompleteLength);
  }
  EXPECT_EQ(h.scheduler->allocator().num_free(), 12);
}

TEST(PreemptionTest, RecomputationKeepsTheSampleIndex) {
  SchedulerOptions options = TestOptions();
  options.block_size = 4;
  options.num_blocks = 8;
  // Recomputation from the first token (prefix_cache_test.cc covers resuming from cached blocks).
  options.enable_prefix_caching = false;
  Harness h(options);
  ASSERT_OK(h.Submit(MakeRequest(1, 8, 16)));
  ASSERT_OK(h.Submit(MakeRequest(2, 8, 16)));
  h.RunUntilIdle();
  ASSERT_GT(h.scheduler->stats().preemptions, 0);
  // Every row's sample_index is the number of tokens its sequence had generated.
  std::map<RequestId, int64_t> generated;
  bool recomputed = false;
  for (const StepPlan& plan : h.plans()) {
    for (const StepRow& row : plan.rows) {
      EXPECT_EQ(row.sample_index, generated[row.seq_id]);
      if (row.start_pos == 0 && row.token_ids.size() > 8) recomputed = true;
      if (row.sample) ++generated[row.seq_id];
    }
  }
  EXPECT_TRUE(recomputed);
  EXPECT_EQ(h.tokens[2], FakeExpectedTokens(MakePrompt(2, 8), 16));
}

TEST(StopTest, AStopTokenEndsGeneration) {
  Harness h(TestOptions());
  const std::vector<int32_t> expected = FakeExpectedTokens(MakePrompt(1, 5), 10);
  Request request = MakeRequest(1, 5, 10);
  request.stop_token_ids = {expected[3]};
  ASSERT_OK(h.Submit(request));
  h.RunUntilIdle();
  EXPECT_EQ(h.tokens[1], std::vector<int32_t>(expected.begin(), expected.begin() + 4));
  EXPECT_EQ(h.Final(1).outcome, Outcome::kCompleteStop);
}

TEST(StopTest, MaxModelLenEndsGeneration) {
  SchedulerOptions options = TestOptions();
  options.max_model_len = 12;
  Harness h(options);
  ASSERT_OK(h.Submit(MakeRequest(1, 5, 100)));
  h.RunUntilIdle();
  EXPECT_EQ(h.tokens[1].size(), 7u);
  EXPECT_EQ(h.Final(1).outcome, Outcome::kCompleteLength);
}

TEST(MetricsTest, HooksSeeStepsTimesAndOutcomes) {
  SchedulerOptions options = TestOptions();
  options.priority_levels = 2;
  options.default_queue_policy.max_queue_size = 2;
  RecordingObserver observer;
  Harness h(options, &observer);
  ASSERT_OK(h.Submit(MakeRequest(1, 6, 3)));
  ASSERT_OK(h.Submit(MakeRequest(2, 3, 3)));
  EXPECT_FALSE(h.Submit(MakeRequest(3, 3, 3)).ok());
  h.clock.Advance(absl::Milliseconds(5));
  ASSERT_TRUE(h.Step());
  ASSERT_EQ(observer.steps.size(), 1u);
  const StepStats& first = observer.steps[0];
  EXPECT_EQ(first.num_rows, 2);
  EXPECT_EQ(first.num_prefill_rows, 2);
  EXPECT_EQ(first.padded_length, 6);
  EXPECT_EQ(first.real_tokens, 9);
  EXPECT_EQ(first.padded_tokens, 3);
  EXPECT_EQ(first.num_running, 2);
  EXPECT_EQ(first.kv_blocks_used, 3);  // 6 tokens: 2 blocks of 4; 3 tokens: 1
  EXPECT_EQ(first.kv_blocks_free, options.num_blocks - 3);
  EXPECT_EQ(first.queue_depth, (std::vector<int64_t>{0, 0}));
  h.clock.Advance(absl::Milliseconds(7));
  h.RunUntilIdle();
  EXPECT_EQ(observer.rejected, (std::vector<RejectReason>{RejectReason::kQueueFull}));
  EXPECT_EQ(observer.queue_times, (std::vector<absl::Duration>(2, absl::Milliseconds(5))));
  EXPECT_EQ(observer.ttft, (std::vector<absl::Duration>(2, absl::Milliseconds(5))));
  ASSERT_EQ(observer.itl.size(), 4u);
  EXPECT_EQ(observer.itl[0], absl::Milliseconds(7));
  EXPECT_EQ(observer.finished.size(), 2u);
  EXPECT_EQ(observer.steps[1].num_decode_rows, 2);
  EXPECT_EQ(h.scheduler->stats().outcomes[static_cast<int>(Outcome::kCompleteLength)], 2);
  EXPECT_DOUBLE_EQ(h.scheduler->stats().padding_waste(), 3.0 / 13.0);
}

// Once the last request is done, the next planning pass (nothing to run) refreshes the gauges: an
// idle server does not keep showing the last step's running requests and KV blocks.
TEST(MetricsTest, AnIdlePassRefreshesTheGauges) {
  SchedulerOptions options = TestOptions();
  options.priority_levels = 2;
  options.default_queue_policy.default_timeout = absl::Milliseconds(50);
  RecordingObserver observer;
  Harness h(options, &observer);
  ASSERT_OK(h.Submit(MakeRequest(1, 6, 3)));
  h.RunUntilIdle();
  ASSERT_TRUE(h.Finished(1));
  ASSERT_GE(observer.steps.size(), 2u);
  const StepStats& idle = observer.steps.back();
  EXPECT_EQ(idle.num_rows, 0);
  EXPECT_EQ(idle.num_running, 0);
  EXPECT_EQ(idle.kv_blocks_used, 0);
  EXPECT_EQ(idle.kv_blocks_free, options.num_blocks);
  EXPECT_EQ(idle.queue_depth, (std::vector<int64_t>{0, 0}));

  // A request that times out in the queue while nothing runs leaves the waiting gauge at 0.
  options.max_batch_size = 1;
  options.max_queue_delay = absl::Seconds(10);
  options.preferred_batch_sizes = {1};
  RecordingObserver queued;
  Harness q(options, &queued);
  ASSERT_OK(q.Submit(MakeRequest(2, 4, 2, /*priority=*/2)));
  q.clock.Advance(absl::Milliseconds(60));
  q.Step();
  ASSERT_TRUE(q.Finished(2));
  ASSERT_FALSE(queued.steps.empty());
  EXPECT_EQ(queued.steps.back().queue_depth, (std::vector<int64_t>{0, 0}));
}

}  // namespace
}  // namespace convoy::testing
