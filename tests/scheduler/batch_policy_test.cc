// The two batching policies on their own: who may join a running batch, and when results go out.
#include "scheduler/batch_policy.h"

#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace convoy {
namespace {

Event FinalOf(RequestId id) {
  Event event;
  event.kind = Event::Kind::kFinal;
  event.request_id = id;
  return event;
}

Sequence Seq(RequestId id) {
  Request request;
  request.id = id;
  return Sequence(std::move(request), /*block_size=*/4);
}

std::vector<RequestId> Ids(const std::vector<Event>& events) {
  std::vector<RequestId> ids;
  for (const Event& e : events) ids.push_back(e.request_id);
  return ids;
}

TEST(BatchPolicyTest, ContinuousLetsEveryoneJoinAndAnswersAtOnce) {
  auto policy = BatchPolicy::Create(BatchingMode::kContinuous);
  EXPECT_FALSE(policy->BatchRunning(false));
  EXPECT_TRUE(policy->BatchRunning(true));
  Sequence a = Seq(1);
  EXPECT_TRUE(policy->MayJoin(a));
  policy->Joined(&a);
  std::vector<Event> out;
  policy->Ended(a, FinalOf(1), /*complete=*/true, &out);
  EXPECT_THAT(Ids(out), ::testing::ElementsAre(1));
  EXPECT_FALSE(policy->Holds(1));
}

TEST(BatchPolicyTest, StaticTakesBackOnlyItsMembersAndAnswersWhenTheLastEnds) {
  auto policy = BatchPolicy::Create(BatchingMode::kStatic);
  EXPECT_FALSE(policy->BatchRunning(true));  // sequences alone do not make a static batch
  policy->BatchFired();
  Sequence a = Seq(1), b = Seq(2), c = Seq(3), late = Seq(4);
  for (Sequence* s : {&a, &b, &c}) policy->Joined(s);
  EXPECT_TRUE(policy->BatchRunning(false));
  // A member preempted and waiting again may come back; a newcomer may not.
  EXPECT_TRUE(policy->MayJoin(b));
  EXPECT_FALSE(policy->MayJoin(late));
  policy->Joined(&b);  // back after a preemption: still one member

  std::vector<Event> out;
  policy->Ended(a, FinalOf(1), /*complete=*/true, &out);
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(policy->Holds(1));
  policy->Ended(b, FinalOf(2), /*complete=*/false, &out);  // cancelled: answered at once
  EXPECT_THAT(Ids(out), ::testing::ElementsAre(2));
  EXPECT_TRUE(policy->BatchRunning(false));
  policy->Ended(c, FinalOf(3), /*complete=*/true, &out);
  EXPECT_THAT(Ids(out), ::testing::ElementsAre(2, 1, 3));
  EXPECT_FALSE(policy->Holds(1));
  EXPECT_FALSE(policy->BatchRunning(true));

  // A request that never joined (it waited and was cancelled) is answered at once.
  std::vector<Event> other;
  policy->Ended(late, FinalOf(4), /*complete=*/false, &other);
  EXPECT_THAT(Ids(other), ::testing::ElementsAre(4));
  // The next batch's members are new ones.
  policy->BatchFired();
  EXPECT_FALSE(policy->MayJoin(a));
  policy->NoneAdmitted();
  EXPECT_FALSE(policy->BatchRunning(false));
}

}  // namespace
}  // namespace convoy
