// Fair shares between the clients of one priority level: a client's backlog does not hold back
// another client's requests, and one client alone is served in arrival order.
#include "scheduler/client_share.h"

#include <vector>

#include "gtest/gtest.h"
#include "harness.h"

namespace convoy::testing {
namespace {

Request ClientRequest(RequestId id, const std::string& client, int priority = 0) {
  Request request = MakeRequest(id, 4, 2, priority);
  request.client = client;
  return request;
}

// The ids in the order they first appear in a step.
std::vector<RequestId> StartOrder(const Harness& h) {
  std::vector<RequestId> order;
  for (const StepPlan& plan : h.plans()) {
    for (const StepRow& row : plan.rows) {
      if (row.start_pos == 0) order.push_back(row.seq_id);
    }
  }
  return order;
}

SchedulerOptions OneAtATime() {
  SchedulerOptions options = TestOptions();
  options.max_batch_size = 1;
  return options;
}

TEST(ClientShareTest, AnotherClientsRequestStartsBeforeABacklog) {
  Harness h(OneAtATime());
  for (RequestId id = 1; id <= 20; ++id) ASSERT_OK(h.Submit(ClientRequest(id, "flood")));
  ASSERT_TRUE(h.Step());  // 1 runs
  ASSERT_OK(h.Submit(ClientRequest(100, "victim")));
  h.RunUntilIdle();
  const std::vector<RequestId> order = StartOrder(h);
  ASSERT_EQ(order.size(), 21u);
  EXPECT_EQ(order[0], 1);
  // In arrival order it would be last; its fair share lets it go after one more of the flood's.
  const auto victim = std::find(order.begin(), order.end(), 100) - order.begin();
  EXPECT_LE(victim, 2) << "the victim started " << victim << "th";
  for (RequestId id = 1; id <= 20; ++id) EXPECT_EQ(h.Final(id).outcome, Outcome::kCompleteLength);
  EXPECT_EQ(h.Final(100).outcome, Outcome::kCompleteLength);
}

TEST(ClientShareTest, BackloggedClientsTakeTurns) {
  Harness h(OneAtATime());
  for (RequestId id = 1; id <= 6; ++id) ASSERT_OK(h.Submit(ClientRequest(id, "a")));
  for (RequestId id = 11; id <= 16; ++id) ASSERT_OK(h.Submit(ClientRequest(id, "b")));
  h.RunUntilIdle();
  EXPECT_EQ(StartOrder(h), (std::vector<RequestId>{1, 11, 2, 12, 3, 13, 4, 14, 5, 15, 6, 16}));
}

TEST(ClientShareTest, OneClientIsServedInArrivalOrderAndLevelsStillRank) {
  SchedulerOptions options = OneAtATime();
  options.priority_levels = 2;
  Harness h(options);
  for (RequestId id = 1; id <= 5; ++id) ASSERT_OK(h.Submit(ClientRequest(id, "a", 2)));
  ASSERT_OK(h.Submit(ClientRequest(50, "b", 2)));
  // A higher level goes first whatever the shares.
  ASSERT_OK(h.Submit(ClientRequest(9, "a", 1)));
  h.RunUntilIdle();
  EXPECT_EQ(StartOrder(h), (std::vector<RequestId>{9, 1, 50, 2, 3, 4, 5}));
}

TEST(ClientShareTest, AClientThatWasIdleStartsAtTheVirtualTimeNotWithCredit) {
  // Tags only move forward: a client quiet for a long time gets no burst of priority later.
  ClientShare share(1);
  EXPECT_EQ(share.Arrive(1, "a"), 0u);
  EXPECT_EQ(share.Arrive(1, "a"), 1u);
  share.Started(1, 0);
  share.Started(1, 1);
  for (int i = 0; i < 10; ++i) share.Started(1, share.Arrive(1, "b"));
  EXPECT_EQ(share.Arrive(1, "a"), 10u);
  EXPECT_EQ(share.Arrive(1, "a"), 11u);
  EXPECT_EQ(share.Arrive(1, "c"), 10u);
}

}  // namespace
}  // namespace convoy::testing
