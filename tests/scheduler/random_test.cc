// Nothing is lost: thousands of requests submitted, cancelled and timed out at random, under
// every mode, with a KV cache small enough to force preemption. Each ends with exactly one final
// outcome, completed ones have exactly the tokens they would have alone, and every block is free
// at the end.
#include <map>
#include <random>

#include "gtest/gtest.h"
#include "harness.h"

namespace convoy::testing {
namespace {

struct Scenario {
  const char* name;
  BatchingMode mode;
  int32_t max_batch_size;
  int64_t max_num_batched_tokens;
  int32_t prefill_chunk_size;
  absl::Duration max_queue_delay;
  std::vector<int32_t> preferred;
  bool plan_ahead = false;  // the next step planned while one runs (Scheduler::ScheduleAhead)
};

class RandomTest : public ::testing::TestWithParam<Scenario> {};

TEST_P(RandomTest, EveryRequestEndsExactlyOnceAndAllBlocksAreFree) {
  const Scenario& scenario = GetParam();
  SchedulerOptions options;
  options.mode = scenario.mode;
  options.max_batch_size = scenario.max_batch_size;
  options.max_num_batched_tokens = scenario.max_num_batched_tokens;
  options.prefill_chunk_size = scenario.prefill_chunk_size;
  options.max_queue_delay = scenario.max_queue_delay;
  options.preferred_batch_sizes = scenario.preferred;
  options.priority_levels = 3;
  options.default_priority_level = 3;
  options.default_queue_policy.max_queue_size = 40;
  options.priority_aging = absl::Milliseconds(50);
  options.block_size = 4;
  options.num_blocks = 48;
  Harness h(options);
  h.plan_ahead = scenario.plan_ahead;

  std::mt19937 rng(1234);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  constexpr int kRequests = 3000;
  std::map<RequestId, Request> submitted;
  int rejected = 0;
  RequestId next_id = 1;
  int steps = 0;
  while (next_id <= kRequests || !h.scheduler->empty()) {
    // Arrivals.
    const int arrivals = next_id <= kRequests ? uniform(0, 4) : 0;
    for (int i = 0; i < arrivals && next_id <= kRequests; ++i) {
      Request request = MakeRequest(next_id, uniform(1, 40), uniform(1, 24), uniform(0, 3));
      if (uniform(0, 3) == 0) request.timeout = absl::Milliseconds(uniform(1, 30));
      if (uniform(0, 9) == 0) request.stop_token_ids = {uniform(0, kFakeVocab - 1)};
      // Three clients, one sending most: fair shares reorder the queue and take slots back.
      const int who = uniform(0, 4);
      request.client = who <= 2 ? "a" : who == 3 ? "b" : "c";
      const RequestId id = next_id++;
      absl::Status status = h.Submit(request);
      if (status.ok()) {
        submitted.emplace(id, std::move(request));
      } else {
        EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
        ++rejected;
      }
    }
    // Cancellations of anything, held or not.
    if (uniform(0, 4) == 0 && next_id > 1) {
      const RequestId id = uniform(1, static_cast<int>(next_id) - 1);
      const bool held = submitted.contains(id) && !h.Finished(id);
      EXPECT_EQ(h.Cancel(id).ok(), held) << id;
    }
    // Now and then a failed step.
    if (uniform(0, 200) == 0) h.executor.FailNextStep();
    if (h.Step()) ++steps;
    h.clock.Advance(absl::Microseconds(uniform(0, 3000)));
    ASSERT_LT(steps, 200000) << "no progress";
  }

  EXPECT_GT(rejected, 0);
  EXPECT_GT(h.scheduler->stats().preemptions, 0);
  std::map<Outcome, int> outcomes;
  for (const auto& [id, request] : submitted) {
    const Event final_event = h.Final(id);
    ++outcomes[final_event.outcome];
    const std::vector<int32_t>& tokens = h.tokens[id];
    EXPECT_EQ(final_event.num_generated, static_cast<int64_t>(tokens.size()));
    // Whatever it generated is what it would have generated alone.
    const std::vector<int32_t> alone =
        FakeExpectedTokens(request.prompt_tokens, static_cast<int>(tokens.size()));
    EXPECT_EQ(tokens, alone) << "request " << id;
    if (final_event.outcome == Outcome::kCompleteLength) {
      EXPECT_EQ(static_cast<int>(tokens.size()), request.max_tokens);
    }
    if (final_event.outcome == Outcome::kTimedOut) {
      EXPECT_TRUE(tokens.empty());
    }
  }
  EXPECT_EQ(h.finals.size(), submitted.size());
  for (Outcome o :
       {Outcome::kCompleteLength, Outcome::kCancelled, Outcome::kTimedOut, Outcome::kFailed}) {
    EXPECT_GT(outcomes[o], 0) << OutcomeName(o);
  }
  EXPECT_EQ(h.scheduler->allocator().num_free(), options.num_blocks);
  EXPECT_OK(h.scheduler->allocator().CheckInvariants());
  EXPECT_OK(h.scheduler->CheckInvariants());
  if (scenario.plan_ahead && scenario.mode == BatchingMode::kContinuous) {
    EXPECT_GT(h.steps_planned_ahead, steps / 2);
  } else {
    EXPECT_EQ(h.steps_planned_ahead, 0);  // static batching never plans ahead
  }
  // Every ended or preempted sequence's release reached the executor (through failed steps, rows
  // left out, cancellations and steps planned ahead): after one more request's first step it
  // holds that request's block table alone.
  ASSERT_OK(h.Submit(MakeRequest(kRequests + 1, 4, 2)));
  for (int i = 0; i < 1000 && !h.Step(); ++i) h.clock.Advance(absl::Milliseconds(1));
  EXPECT_EQ(h.executor.block_tables().num_sequences(), 1u);
  EXPECT_EQ(h.executor.block_tables().held(kRequests + 1), 1);
}

INSTANTIATE_TEST_SUITE_P(
    Modes, RandomTest,
    ::testing::Values(
        Scenario{"continuous", BatchingMode::kContinuous, 8, 64, 16, absl::ZeroDuration(), {}},
        Scenario{"continuous_delay",
                 BatchingMode::kContinuous,
                 16,
                 128,
                 32,
                 absl::Milliseconds(2),
                 {4, 8}},
        Scenario{"static", BatchingMode::kStatic, 8, 256, 64, absl::Milliseconds(1), {4}},
        Scenario{"continuous_ahead",
                 BatchingMode::kContinuous,
                 8,
                 64,
                 16,
                 absl::ZeroDuration(),
                 {},
                 /*plan_ahead=*/true},
        Scenario{"continuous_delay_ahead",
                 BatchingMode::kContinuous,
                 16,
                 128,
                 32,
                 absl::Milliseconds(2),
                 {4, 8},
                 /*plan_ahead=*/true},
        Scenario{"static_ahead",
                 BatchingMode::kStatic,
                 8,
                 256,
                 64,
                 absl::Milliseconds(1),
                 {4},
                 /*plan_ahead=*/true}),
    [](const ::testing::TestParamInfo<Scenario>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace convoy::testing
