// Admission: bounded queues per priority, refusals, queue timeouts that fire on time with no other
// traffic, cancellation while queued, running and in flight, and executor failures.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "harness.h"

namespace convoy::testing {
namespace {

using ::testing::HasSubstr;

// Nothing fires on its own: a long delay and a large max_batch_size.
SchedulerOptions HoldingOptions() {
  SchedulerOptions options = TestOptions();
  options.max_batch_size = 8;
  options.max_queue_delay = absl::Hours(1);
  options.priority_levels = 2;
  options.default_priority_level = 2;
  return options;
}

TEST(AdmissionTest, FullQueueRefusesAtOnce) {
  SchedulerOptions options = HoldingOptions();
  options.default_queue_policy.max_queue_size = 2;
  Harness h(options);
  ASSERT_OK(h.Submit(MakeRequest(1, 4, 1)));
  ASSERT_OK(h.Submit(MakeRequest(2, 4, 1)));
  EXPECT_THAT(h.Submit(MakeRequest(3, 4, 1)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("queue of priority level 2 is full (max_queue_size 2)")));
  // The other level has its own bound.
  EXPECT_OK(h.Submit(MakeRequest(4, 4, 1, /*priority=*/1)));
  EXPECT_EQ(h.scheduler->stats().rejections[static_cast<int>(RejectReason::kQueueFull)], 1);
  EXPECT_FALSE(h.Finished(3));
}

TEST(AdmissionTest, PerLevelPolicyOverridesTheBound) {
  SchedulerOptions options = HoldingOptions();
  options.queue_policies = {QueuePolicy{1, absl::InfiniteDuration()},
                            QueuePolicy{0, absl::InfiniteDuration()}};
  Harness h(options);
  ASSERT_OK(h.Submit(MakeRequest(1, 4, 1, 1)));
  EXPECT_THAT(h.Submit(MakeRequest(2, 4, 1, 1)),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("level 1")));
  for (int id = 3; id < 100; ++id) ASSERT_OK(h.Submit(MakeRequest(id, 4, 1, 2)));
}

TEST(AdmissionTest, AdmittedRequestsLeaveTheQueue) {
  SchedulerOptions options = TestOptions();
  options.default_queue_policy.max_queue_size = 1;
  Harness h(options);
  ASSERT_OK(h.Submit(MakeRequest(1, 4, 5)));
  ASSERT_TRUE(h.Step());
  EXPECT_OK(h.Submit(MakeRequest(2, 4, 5)));
}

TEST(AdmissionTest, RefusesBadRequests) {
  Harness h(HoldingOptions());
  EXPECT_THAT(h.Submit(MakeRequest(1, 4, 1, 3)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("priority 3")));
  EXPECT_THAT(h.Submit(MakeRequest(1, 4, 1, -1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("priority -1")));
  EXPECT_THAT(h.Submit(MakeRequest(1, 0, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("prompt is empty")));
  // 4096 tokens need 1024 blocks of 4; the cache has 1024, so 4097 does not fit.
  EXPECT_THAT(h.Submit(MakeRequest(1, 4000, 97)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("KV blocks")));
  ASSERT_OK(h.Submit(MakeRequest(1, 4000, 96)));
  EXPECT_THAT(h.Submit(MakeRequest(1, 4, 1)),
              StatusIs(absl::StatusCode::kAlreadyExists, "request id 1 is in use"));
  EXPECT_EQ(h.scheduler->stats().rejections[static_cast<int>(RejectReason::kInvalidArgument)], 4);
}

TEST(AdmissionTest, PriorityZeroTakesTheDefaultLevel) {
  Harness h(HoldingOptions());
  ASSERT_OK(h.Submit(MakeRequest(1, 4, 1, 0)));
  EXPECT_EQ(h.scheduler->num_waiting(2), 1);
  EXPECT_EQ(h.scheduler->num_waiting(1), 0);
}

TEST(TimeoutTest, FiresOnTimeWithNoOtherTraffic) {
  Harness h(HoldingOptions());
  const absl::Time t0 = h.clock.Now();
  Request request = MakeRequest(1, 4, 1);
  request.timeout = absl::Milliseconds(30);
  ASSERT_OK(h.Submit(request));
  EXPECT_FALSE(h.Step());
  // The caller is told to wake exactly at the deadline, though the queue delay is an hour.
  EXPECT_EQ(h.decision.wake_at, t0 + absl::Milliseconds(30));
  h.clock.Set(t0 + absl::Milliseconds(30) - absl::Microseconds(1));
  EXPECT_FALSE(h.Step());
  EXPECT_FALSE(h.Finished(1));
  h.clock.Set(t0 + absl::Milliseconds(30));
  EXPECT_FALSE(h.Step());
  const Event final_event = h.Final(1);
  EXPECT_EQ(final_event.outcome, Outcome::kTimedOut);
  EXPECT_THAT(final_event.status, StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("30ms")));
  EXPECT_EQ(h.scheduler->num_held(), 0);
  EXPECT_FALSE(h.decision.wake_at.has_value());  // nothing left to wait for
}

TEST(TimeoutTest, LevelDefaultAppliesAndTheEarliestDeadlineWakes) {
  SchedulerOptions options = HoldingOptions();
  options.default_queue_policy.default_timeout = absl::Milliseconds(50);
  Harness h(options);
  const absl::Time t0 = h.clock.Now();
  ASSERT_OK(h.Submit(MakeRequest(1, 4, 1)));  // deadline t0 + 50ms
  h.clock.Advance(absl::Milliseconds(10));
  Request soon = MakeRequest(2, 4, 1);
  soon.timeout = absl::Milliseconds(20);  // deadline t0 + 30ms
  ASSERT_OK(h.Submit(soon));
  Request never = MakeRequest(3, 4, 1);
  never.timeout = absl::InfiniteDuration();
  ASSERT_OK(h.Submit(never));
  EXPECT_FALSE(h.Step());
  EXPECT_EQ(h.decision.wake_at, t0 + absl::Milliseconds(30));
  h.clock.Set(*h.decision.wake_at);
  EXPECT_FALSE(h.Step());
  EXPECT_EQ(h.Final(2).outcome, Outcome::kTimedOut);
  EXPECT_EQ(h.decision.wake_at, t0 + absl::Milliseconds(50));
  h.clock.Set(*h.decision.wake_at);
  EXPECT_FALSE(h.Step());
  EXPECT_EQ(h.Final(1).outcome, Outcome::kTimedOut);
  // The next wake-up is the queue delay of the one left, an hour after it arrived.
  EXPECT_EQ(h.decision.wake_at, t0 + absl::Milliseconds(10) + absl::Hours(1));
  EXPECT_FALSE(h.Finished(3));
}

TEST(TimeoutTest, NoTimeoutOnceScheduled) {
  SchedulerOptions options = TestOptions();
  Harness h(options);
  Request request = MakeRequest(1, 4, 10);
  request.timeout = absl::Milliseconds(1);
  ASSERT_OK(h.Submit(request));
  while (h.Step()) h.clock.Advance(absl::Milliseconds(1));
  EXPECT_EQ(h.Final(1).outcome, Outcome::kCompleteLength);
  EXPECT_EQ(h.tokens[1].size(), 10u);
}

TEST(CancelTest, WhileQueuedFreesItsPlace) {
  SchedulerOptions options = HoldingOptions();
  options.default_queue_policy.max_queue_size = 1;
  Harness h(options);
  ASSERT_OK(h.Submit(MakeRequest(1, 4, 1)));
  EXPECT_THAT(h.Submit(MakeRequest(2, 4, 1)),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("full")));
  ASSERT_OK(h.Cancel(1));
  EXPECT_EQ(h.Final(1).outcome, Outcome::kCancelled);
  EXPECT_THAT(h.Final(1).status, StatusIs(absl::StatusCode::kCancelled, ::testing::_));
  EXPECT_OK(h.Submit(MakeRequest(2, 4, 1)));
  EXPECT_THAT(h.Cancel(1), StatusIs(absl::StatusCode::kNotFound, HasSubstr("not held")));
}

TEST(CancelTest, WhileRunningFreesItsBlocksBeforeTheNextStep) {
  SchedulerOptions options = TestOptions();
  Harness h(options);
  ASSERT_OK(h.Submit(MakeRequest(1, 10, 100)));
  ASSERT_OK(h.Submit(MakeRequest(2, 10, 100)));
  ASSERT_TRUE(h.Step());
  ASSERT_TRUE(h.Step());
  const int32_t used = h.scheduler->allocator().num_used();
  ASSERT_OK(h.Cancel(1));
  EXPECT_EQ(h.Final(1).outcome, Outcome::kCancelled);
  EXPECT_EQ(h.Final(1).num_generated, 2);
  EXPECT_EQ(h.scheduler->allocator().num_used(), used / 2);
  ASSERT_TRUE(h.Step());
  EXPECT_EQ(RowIds(h.last_plan()), (std::vector<RequestId>{2}));
}

TEST(CancelTest, WhileInFlightEndsAtTheStepBoundary) {
  SchedulerOptions options = TestOptions();
  Harness h(options);
  ASSERT_OK(h.Submit(MakeRequest(1, 10, 100)));
  ASSERT_TRUE(h.Step());
  ScheduleDecision decision = h.scheduler->Schedule(h.clock.Now());
  ASSERT_TRUE(decision.plan.has_value());
  ASSERT_OK(h.scheduler->Cancel(1, h.clock.Now()));
  EXPECT_TRUE(h.scheduler->TakeEvents().empty());  // still in flight
  EXPECT_GT(h.scheduler->allocator().num_used(), 0);
  absl::StatusOr<StepResult> result = h.executor.Step(*decision.plan);
  ASSERT_OK(result);
  ASSERT_OK(h.scheduler->OnStepResult(*result, h.clock.Now()));
  std::vector<Event> events = h.scheduler->TakeEvents();
  ASSERT_EQ(events.size(), 1u);  // no token from the cancelled step
  EXPECT_EQ(events[0].kind, Event::Kind::kFinal);
  EXPECT_EQ(events[0].outcome, Outcome::kCancelled);
  EXPECT_EQ(h.scheduler->allocator().num_used(), 0);
  EXPECT_OK(h.scheduler->CheckInvariants());
}

TEST(FailureTest, ExecutorFailureEndsTheStepsRequests) {
  SchedulerOptions options = TestOptions();
  Harness h(options);
  ASSERT_OK(h.Submit(MakeRequest(1, 10, 100)));
  ASSERT_OK(h.Submit(MakeRequest(2, 10, 100)));
  ASSERT_TRUE(h.Step());
  h.executor.FailNextStep();
  ASSERT_TRUE(h.Step());
  EXPECT_EQ(h.Final(1).outcome, Outcome::kFailed);
  EXPECT_THAT(h.Final(2).status, StatusIs(absl::StatusCode::kInternal, HasSubstr("injected")));
  EXPECT_EQ(h.scheduler->allocator().num_used(), 0);
}

TEST(FailureTest, AMismatchedResultIsRefused) {
  Harness h(TestOptions());
  ASSERT_OK(h.Submit(MakeRequest(1, 10, 100)));
  ScheduleDecision decision = h.scheduler->Schedule(h.clock.Now());
  ASSERT_TRUE(decision.plan.has_value());
  StepResult wrong;
  EXPECT_THAT(h.scheduler->OnStepResult(wrong, h.clock.Now()),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("0 rows")));
  std::vector<Event> events = h.scheduler->TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].outcome, Outcome::kFailed);
}

}  // namespace
}  // namespace convoy::testing
