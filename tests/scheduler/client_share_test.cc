// Fair shares between the clients of one priority level: a client's backlog does not hold back
// another client's requests, and one client alone is served in arrival order.
#include "scheduler/client_share.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
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

TEST(ClientShareTest, AFullBatchGivesAnUnderShareClientASlotAndNoMore) {
  SchedulerOptions options = TestOptions();
  options.max_batch_size = 3;
  Harness h(options);
  for (RequestId id = 1; id <= 3; ++id) {
    Request r = MakeRequest(id, 6, 12);
    r.client = "a";
    ASSERT_OK(h.Submit(std::move(r)));
  }
  ASSERT_TRUE(h.Step());
  ASSERT_TRUE(h.Step());
  Request b = MakeRequest(10, 6, 12);
  b.client = "b";
  ASSERT_OK(h.Submit(std::move(b)));
  ASSERT_TRUE(h.Step());
  // a ran 3, b none: a's latest admitted (3) yields its slot to b's request.
  EXPECT_EQ(RowIds(h.last_plan()), (std::vector<RequestId>{1, 2, 10}));
  EXPECT_EQ(h.scheduler->stats().preemptions, 1);
  // a 2, b 1: even enough; b's second request waits for a free slot.
  Request b2 = MakeRequest(11, 6, 12);
  b2.client = "b";
  ASSERT_OK(h.Submit(std::move(b2)));
  ASSERT_TRUE(h.Step());
  EXPECT_EQ(RowIds(h.last_plan()), (std::vector<RequestId>{1, 2, 10}));
  EXPECT_EQ(h.scheduler->stats().preemptions, 1);
  h.RunUntilIdle();
  for (RequestId id : {1, 2, 3, 10, 11}) {
    EXPECT_EQ(h.Final(id).outcome, Outcome::kCompleteLength) << id;
    // The yielded request recomputes and goes on as if it had run alone.
    EXPECT_EQ(h.tokens[id], FakeExpectedTokens(MakePrompt(id, 6), 12)) << id;
  }
}

// docs/reliability.md's flood, in steps: one client keeps `flood` requests in flight (a closed
// loop: each one that ends is replaced at once) against a running batch of 16, so that most of them
// wait, with prompts of 16-64 tokens and 24-40 output tokens; another client sends one request at
// a time. For each of the victim's requests: the steps it waited between its arrival and its first
// row, and how many of the flood's requests started meanwhile.
struct Wait {
  int steps = 0;
  int flood_starts = 0;
};

std::vector<Wait> VictimWaits(bool plan_ahead, int flood, int victims) {
  SchedulerOptions options = TestOptions();
  options.max_batch_size = 16;
  options.num_blocks = 4096;
  Harness h(options);
  h.plan_ahead = plan_ahead;
  uint32_t s = 1;
  auto uniform = [&](int lo, int hi) {
    s = s * 1664525u + 1013904223u;
    return lo + static_cast<int>((s >> 8) % static_cast<uint32_t>(hi - lo + 1));
  };
  RequestId next_id = 1;
  auto request = [&](const std::string& client) {
    Request r = MakeRequest(next_id++, uniform(16, 64), uniform(24, 40));
    r.client = client;
    return r;
  };
  std::set<RequestId> flood_ids;
  for (int i = 0; i < flood; ++i) {
    Request r = request("flood");
    flood_ids.insert(r.id);
    EXPECT_OK(h.Submit(std::move(r)));
  }
  std::vector<Wait> waits;
  RequestId victim = 0;  // waiting for its first row; 0: none
  Wait wait;
  for (int step = 0; step < 20000 && static_cast<int>(waits.size()) < victims; ++step) {
    if (victim == 0 && step > 40 && step % 7 == 0) {
      Request r = request("victim");
      victim = r.id;
      wait = Wait{};
      EXPECT_OK(h.Submit(std::move(r)));
    }
    EXPECT_TRUE(h.Step());
    if (victim != 0) {
      bool started = false;
      for (const StepRow& row : h.last_plan().rows) {  // new rows in the order they were admitted
        if (row.start_pos != 0 || started) continue;
        if (row.seq_id == victim) started = true;
        if (flood_ids.contains(row.seq_id)) ++wait.flood_starts;
      }
      if (started) {
        waits.push_back(wait);
        victim = 0;
      } else {
        ++wait.steps;
      }
    }
    for (auto it = flood_ids.begin(); it != flood_ids.end();) {
      if (h.Finished(*it)) {
        it = flood_ids.erase(it);
        Request r = request("flood");
        flood_ids.insert(r.id);
        EXPECT_OK(h.Submit(std::move(r)));
      } else {
        ++it;
      }
    }
  }
  return waits;
}

TEST(ClientShareTest, AFloodingClientsBacklogNeverOvertakesAnotherClient) {
  // The victim's request starts before any of the flood's waiting requests, whatever the length
  // grouping would prefer and however far the flood's backlog runs ahead, and the full batch
  // gives it one of the flood's slots: it waits one step at most (the step planned ahead before
  // it came), and the flood's request that yielded its slot waits right behind it.
  for (bool plan_ahead : {false, true}) {
    const std::vector<Wait> waits = VictimWaits(plan_ahead, 63, 60);
    ASSERT_EQ(waits.size(), 60u);
    std::vector<int> steps;
    for (const Wait& w : waits) {
      EXPECT_EQ(w.flood_starts, 0) << (plan_ahead ? "planning ahead" : "");
      EXPECT_LE(w.steps, plan_ahead ? 1 : 0);
      steps.push_back(w.steps);
    }
    std::sort(steps.begin(), steps.end());
    std::printf("%svictim's wait in steps: p50 %d, p90 %d, max %d\n",
                plan_ahead ? "planning ahead: " : "", steps[30], steps[54], steps.back());
  }
}
}  // namespace
}  // namespace convoy::testing
