// QueueServiceRate: the rate at which waiting requests start, over the time some request waited.
#include "scheduler/service_rate.h"

#include "gtest/gtest.h"

namespace convoy {
namespace {

constexpr absl::Duration kPass = absl::Milliseconds(100);

// Passes every 100 ms for `duration`, one request started every `every` passes, the queue
// holding requests throughout when `waiting`.
absl::Time Passes(QueueServiceRate* rate, absl::Time t, absl::Duration duration, int every,
                  bool waiting) {
  for (int pass = 1; pass * kPass <= duration; ++pass) {
    t += kPass;
    rate->Observe(t, pass % every == 0 ? 1 : 0, waiting);
  }
  return t;
}

TEST(QueueServiceRateTest, StatesNoRateBeforeASecondOfWaiting) {
  QueueServiceRate rate;
  absl::Time t = absl::UnixEpoch();
  rate.Observe(t, 0, true);
  t = Passes(&rate, t, absl::Milliseconds(900), 5, true);
  EXPECT_FALSE(rate.per_second().has_value());
  EXPECT_FALSE(rate.ExpectedWait(3).has_value());
  EXPECT_EQ(rate.ExpectedWait(0), absl::ZeroDuration()) << "nobody ahead: no wait";
  Passes(&rate, t, absl::Milliseconds(200), 5, true);
  EXPECT_TRUE(rate.per_second().has_value());
}

TEST(QueueServiceRateTest, MeasuresTheRateWhileRequestsWait) {
  QueueServiceRate rate;
  absl::Time t = absl::UnixEpoch();
  rate.Observe(t, 0, true);
  Passes(&rate, t, absl::Seconds(30), 5, true);  // one start per 500 ms
  ASSERT_TRUE(rate.per_second().has_value());
  EXPECT_NEAR(*rate.per_second(), 2.0, 0.05);
  EXPECT_NEAR(absl::ToDoubleSeconds(*rate.ExpectedWait(6)), 3.0, 0.1);
}

TEST(QueueServiceRateTest, TimeWithAnEmptyQueueDoesNotCount) {
  QueueServiceRate rate;
  absl::Time t = absl::UnixEpoch();
  rate.Observe(t, 0, true);
  t = Passes(&rate, t, absl::Seconds(30), 5, true);
  const double saturated = *rate.per_second();
  // Ten seconds of a queue that empties at every pass: each arrival starts at once, as fast as
  // they come (here ten a second), which says nothing about capacity.
  t = Passes(&rate, t, absl::Seconds(10), 1, false);
  // The last pass left nobody waiting; the starts of the next one served new arrivals too.
  rate.Observe(t + kPass, 1, true);
  // Decay scales what was measured, not the ratio; the first of the ten seconds' passes followed
  // a waiting interval, so its one start counts.
  EXPECT_NEAR(*rate.per_second(), saturated, 0.15);
}

TEST(QueueServiceRateTest, FollowsAChangeWithinAFewTimeConstants) {
  QueueServiceRate rate(absl::Seconds(10));
  absl::Time t = absl::UnixEpoch();
  rate.Observe(t, 0, true);
  t = Passes(&rate, t, absl::Seconds(30), 5, true);  // 2 a second
  Passes(&rate, t, absl::Seconds(60), 2, true);      // then 5 a second
  EXPECT_NEAR(*rate.per_second(), 5.0, 0.1);
}

TEST(QueueServiceRateTest, AQueueThatNeverMovesHasAnInfiniteWait) {
  QueueServiceRate rate;
  absl::Time t = absl::UnixEpoch();
  rate.Observe(t, 0, true);
  Passes(&rate, t, absl::Seconds(5), 1000000, true);
  EXPECT_EQ(rate.per_second(), 0.0);
  EXPECT_EQ(rate.ExpectedWait(1), absl::InfiniteDuration());
}

}  // namespace
}  // namespace convoy
