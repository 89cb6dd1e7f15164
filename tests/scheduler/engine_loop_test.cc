// The engine loop: requests from many threads, refusals at once, timeouts that fire while the loop
// sleeps, cancellation, rejection events and shutdown. Runs the FakeExecutor on the real clock; the
// only waits are liveness bounds (a minute), never timing assertions.
#include "engine/engine_loop.h"

#include <initializer_list>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "fake_executor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "harness.h"
#include "scheduler/clock.h"
#include "status_matchers.h"

namespace convoy::testing {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kLiveness = absl::Minutes(1);

// Collects every request's events, thread-safe. Each test declares it before its loop, which calls
// it until it is shut down: however the test ends, the loop goes first.
class Collector {
 public:
  EngineLoop::EventCallback Callback() {
    return [this](const Event& event) {
      absl::MutexLock lock(&mu_);
      if (event.kind == Event::Kind::kToken) {
        tokens_[event.request_id].push_back(event.token);
      } else {
        finals_[event.request_id].push_back(event);
      }
    };
  }
  bool WaitForFinals(size_t n) {
    absl::MutexLock lock(&mu_);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return finals_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&done), kLiveness);
  }
  // Exactly `ids` ended, once each, cancelled.
  void ExpectOnlyCancelled(std::initializer_list<RequestId> ids) {
    auto ended = finals();
    ASSERT_EQ(ended.size(), ids.size());
    for (RequestId id : ids) {
      ASSERT_EQ(ended[id].size(), 1u) << id;
      EXPECT_EQ(ended[id][0].outcome, Outcome::kCancelled) << id;
    }
  }
  std::map<RequestId, std::vector<int32_t>> tokens() {
    absl::MutexLock lock(&mu_);
    return tokens_;
  }
  std::map<RequestId, std::vector<Event>> finals() {
    absl::MutexLock lock(&mu_);
    return finals_;
  }

 private:
  absl::Mutex mu_;
  std::map<RequestId, std::vector<int32_t>> tokens_ ABSL_GUARDED_BY(mu_);
  std::map<RequestId, std::vector<Event>> finals_ ABSL_GUARDED_BY(mu_);
};

EngineLoopOptions LoopOptions() {
  EngineLoopOptions options;
  options.scheduler = TestOptions();
  options.scheduler.max_batch_size = 16;
  return options;
}

TEST(EngineLoopTest, ServesRequestsFromManyThreads) {
  FakeExecutor executor(256, 4);
  Collector collector;
  auto loop = EngineLoop::Create(&executor, LoopOptions());
  ASSERT_OK(loop);
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const RequestId id = t * 1000 + i;
        EXPECT_OK((*loop)->Submit(MakeRequest(id, 1 + i % 13, 1 + i % 9), collector.Callback()));
      }
    });
  }
  for (std::thread& client : clients) client.join();
  ASSERT_TRUE(collector.WaitForFinals(200));
  (*loop)->Shutdown();
  auto tokens = collector.tokens();
  for (const auto& [id, finals] : collector.finals()) {
    ASSERT_EQ(finals.size(), 1u) << id;
    EXPECT_EQ(finals[0].outcome, Outcome::kCompleteLength);
    const int i = static_cast<int>(id % 1000);
    EXPECT_EQ(tokens[id], FakeExpectedTokens(MakePrompt(id, 1 + i % 13), 1 + i % 9)) << id;
  }
  EXPECT_EQ((*loop)->stats().outcomes[static_cast<int>(Outcome::kCompleteLength)], 200);
}

TEST(EngineLoopTest, RefusesAtOnceWhenTheQueueIsFull) {
  FakeExecutor executor(256, 4);
  EngineLoopOptions options = LoopOptions();
  options.scheduler.max_queue_delay = absl::Hours(1);  // nothing leaves the queue on its own
  options.scheduler.default_queue_policy.max_queue_size = 2;
  Collector collector;
  auto loop = EngineLoop::Create(&executor, options);
  ASSERT_OK(loop);
  ASSERT_OK((*loop)->Submit(MakeRequest(1, 4, 1), collector.Callback()));
  ASSERT_OK((*loop)->Submit(MakeRequest(2, 4, 1), collector.Callback()));
  EXPECT_THAT((*loop)->Submit(MakeRequest(3, 4, 1), collector.Callback()),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("full")));
  EXPECT_THAT((*loop)->Submit(MakeRequest(4, 4, 1, 5), collector.Callback()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("priority 5")));
  (*loop)->Shutdown(/*drain=*/false);
  // The two admitted ones end, cancelled; the refused ones have no events.
  collector.ExpectOnlyCancelled({1, 2});
  EXPECT_THAT((*loop)->Submit(MakeRequest(5, 4, 1), collector.Callback()),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("shutting down")));
}

// A clock whose readings wait until the test lets them through, counted: the engine loop reads it
// once a pass right after taking its inbox (and again only around steps), so a test can hold the
// loop between taking requests and handing them to the scheduler.
class GatedClock final : public Clock {
 public:
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    ++arrived_;
    auto may_go = [this]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return open_ || passed_ < allowed_; };
    mu_.Await(absl::Condition(&may_go));
    ++passed_;
    return absl::UnixEpoch();
  }
  // Until `n` readings have been asked for (the n-th waits unless let through); false after the
  // liveness bound.
  bool AwaitReadings(int n) {
    absl::MutexLock lock(&mu_);
    auto arrived = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return arrived_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&arrived), kLiveness);
  }
  // The first `n` readings return.
  void Allow(int n) {
    absl::MutexLock lock(&mu_);
    allowed_ = n;
  }
  // Every reading returns from now on.
  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }

 private:
  mutable absl::Mutex mu_;
  mutable int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  mutable int passed_ ABSL_GUARDED_BY(mu_) = 0;
  int allowed_ ABSL_GUARDED_BY(mu_) = 0;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
};

// The requests the loop has taken from its inbox still hold their places in the queue until the
// scheduler's counts include them. (They did not: a request submitted in between found the queue
// of two empty, was taken, and was rejected by the scheduler on the next pass instead of refused
// at once. CI's ThreadSanitizer run met it in RefusesAtOnceWhenTheQueueIsFull.)
TEST(EngineLoopTest, RequestsBeingHandedToTheSchedulerStillFillTheQueue) {
  FakeExecutor executor(256, 4);
  GatedClock clock;
  EngineLoopOptions options = LoopOptions();
  options.clock = &clock;
  options.scheduler.max_queue_delay = absl::Hours(1);  // nothing leaves the queue on its own
  options.scheduler.default_queue_policy.max_queue_size = 2;
  Collector collector;
  auto loop = EngineLoop::Create(&executor, options);
  ASSERT_OK(loop);
  absl::Cleanup open = [&clock] { clock.Open(); };  // before the loop goes, however the test ends
  ASSERT_TRUE(clock.AwaitReadings(1));              // the first pass, which took an empty inbox
  ASSERT_OK((*loop)->Submit(MakeRequest(1, 4, 1), collector.Callback()));
  ASSERT_OK((*loop)->Submit(MakeRequest(2, 4, 1), collector.Callback()));
  clock.Allow(1);
  // The next pass has taken requests 1 and 2 and waits before handing them to the scheduler.
  ASSERT_TRUE(clock.AwaitReadings(2));
  EXPECT_THAT((*loop)->Submit(MakeRequest(3, 4, 1), collector.Callback()),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("full")));
  clock.Open();
  (*loop)->Shutdown(/*drain=*/false);
  collector.ExpectOnlyCancelled({1, 2});
}

// The queue delay never fires, and nothing else is submitted: the loop must wake up for the
// request's deadline by itself. (Once one test with the queue-full refusal above: under
// ThreadSanitizer on a loaded machine even a 1 s deadline passed before the third submit.)
TEST(EngineLoopTest, TimesOutWhileAsleep) {
  FakeExecutor executor(256, 4);
  EngineLoopOptions options = LoopOptions();
  options.scheduler.max_queue_delay = absl::Hours(1);
  Collector collector;
  auto loop = EngineLoop::Create(&executor, options);
  ASSERT_OK(loop);
  Request soon = MakeRequest(1, 4, 1);
  soon.timeout = absl::Milliseconds(20);
  ASSERT_OK((*loop)->Submit(soon, collector.Callback()));
  ASSERT_TRUE(collector.WaitForFinals(1));
  auto finals = collector.finals();
  ASSERT_EQ(finals[1].size(), 1u);
  EXPECT_EQ(finals[1][0].outcome, Outcome::kTimedOut);
  EXPECT_EQ(finals[1][0].status.code(), absl::StatusCode::kDeadlineExceeded);
  (*loop)->Shutdown(/*drain=*/false);
}

TEST(EngineLoopTest, CancelsAndRejectsThroughEvents) {
  FakeExecutor executor(256, 4);
  EngineLoopOptions options = LoopOptions();
  options.scheduler.max_queue_delay = absl::Hours(1);  // 1 stays queued until cancelled
  Collector collector;
  auto loop = EngineLoop::Create(&executor, options);
  ASSERT_OK(loop);
  ASSERT_OK((*loop)->Submit(MakeRequest(1, 4, 10), collector.Callback()));
  // Refused by the scheduler, not by Submit: 1,501 tokens cannot fit 256 blocks of 4.
  ASSERT_OK((*loop)->Submit(MakeRequest(2, 1500, 1), collector.Callback()));
  ASSERT_TRUE(collector.WaitForFinals(1));
  EXPECT_EQ(collector.finals()[2][0].outcome, Outcome::kRejected);
  EXPECT_THAT(collector.finals()[2][0].status,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("KV blocks")));
  (*loop)->Cancel(1);
  ASSERT_TRUE(collector.WaitForFinals(2));
  EXPECT_EQ(collector.finals()[1][0].outcome, Outcome::kCancelled);
  (*loop)->Shutdown();
}

TEST(EngineLoopTest, DrainFinishesWhatIsHeld) {
  FakeExecutor executor(256, 4);
  Collector collector;
  auto loop = EngineLoop::Create(&executor, LoopOptions());
  ASSERT_OK(loop);
  for (int id = 1; id <= 20; ++id) {
    ASSERT_OK((*loop)->Submit(MakeRequest(id, 5, 30), collector.Callback()));
  }
  (*loop)->Shutdown(/*drain=*/true);
  auto finals = collector.finals();
  ASSERT_EQ(finals.size(), 20u);
  for (const auto& [id, events] : finals) EXPECT_EQ(events[0].outcome, Outcome::kCompleteLength);
}

// A row the executor cannot run (here a prompt token outside the model's vocabulary, which the
// front end would have refused) ends only its own request; the requests sharing its steps finish
// with the tokens they would have had alone.
TEST(EngineLoopTest, OneBadRowFailsOnlyItsOwnRequest) {
  FakeExecutor executor(256, 4);
  EngineLoopOptions options = LoopOptions();
  // The first step waits for all three (a full batch), so that the bad row shares it with the
  // others whatever the threads' timing.
  options.scheduler.max_batch_size = 3;
  options.scheduler.max_queue_delay = absl::Hours(1);
  Collector collector;
  auto loop = EngineLoop::Create(&executor, options);
  ASSERT_OK(loop);
  Request bad = MakeRequest(2, 6, 5);
  bad.prompt_tokens[3] = kFakeModelVocab + 7;
  ASSERT_OK((*loop)->Submit(MakeRequest(1, 6, 5), collector.Callback()));
  ASSERT_OK((*loop)->Submit(bad, collector.Callback()));
  ASSERT_OK((*loop)->Submit(MakeRequest(3, 9, 5), collector.Callback()));
  ASSERT_TRUE(collector.WaitForFinals(3));
  (*loop)->Shutdown();
  auto finals = collector.finals();
  EXPECT_EQ(finals[2][0].outcome, Outcome::kFailed);
  EXPECT_THAT(finals[2][0].status, StatusIs(absl::StatusCode::kInvalidArgument,
                                            HasSubstr("token_ids[3] = 1048583 is outside")));
  auto tokens = collector.tokens();
  EXPECT_TRUE(tokens[2].empty());
  for (RequestId id : {1, 3}) {
    EXPECT_EQ(finals[id][0].outcome, Outcome::kCompleteLength) << id;
    EXPECT_EQ(tokens[id], FakeExpectedTokens(MakePrompt(id, id == 1 ? 6 : 9), 5)) << id;
  }
  // The bad row shared a step with the others and was left out of it.
  ASSERT_FALSE(executor.plans().empty());
  for (const StepRow& row : executor.plans()[0].rows) EXPECT_NE(row.seq_id, 2);
  EXPECT_EQ(executor.plans()[0].rows.size(), 2u);
}

// Every step takes 100 ms of a fake clock; the loop can be held inside a step, so that a test
// looks at a queue that does not move.
class PacedExecutor final : public Executor {
 public:
  explicit PacedExecutor(FakeClock* clock) : inner_(256, 4), clock_(clock) {}

  absl::StatusOr<StepResult> Step(const StepPlan& plan) override {
    clock_->Advance(absl::Milliseconds(100));
    {
      absl::MutexLock lock(&mu_);
      ++steps_;
      if (hold_at_ > 0 && steps_ == hold_at_) {
        held_ = true;
        mu_.Await(absl::Condition(
            +[](bool* held) { return !*held; }, &held_));
      }
    }
    return inner_.Step(plan);
  }
  const ModelConfig& model_config() const override { return inner_.model_config(); }
  const KvCacheSpec& kv_spec() const override { return inner_.kv_spec(); }
  ExecutorLimits limits() const override { return inner_.limits(); }
  // The block tables are the inner executor's.
  absl::Status CheckRow(const StepRow& row) const override { return inner_.CheckRow(row); }
  void ReleaseTables(absl::Span<const int64_t> seq_ids) override { inner_.ReleaseTables(seq_ids); }

  void HoldAtStep(int step) {
    absl::MutexLock lock(&mu_);
    hold_at_ = step;
  }
  bool WaitUntilHeld() {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&held_), kLiveness);
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    held_ = false;
  }
  // Lets the held step go on and holds the loop again at `step`.
  void ReleaseAndHoldAt(int step) {
    absl::MutexLock lock(&mu_);
    hold_at_ = step;
    held_ = false;
  }

 private:
  FakeExecutor inner_;
  FakeClock* const clock_;
  absl::Mutex mu_;
  int steps_ ABSL_GUARDED_BY(mu_) = 0;
  int hold_at_ ABSL_GUARDED_BY(mu_) = 0;
  bool held_ ABSL_GUARDED_BY(mu_) = false;
};

// One sequence at a time, four steps (400 ms) each: the queue is served at about 2.5 a second.
// Twelve requests are queued, and the loop held at its 20th step: five have started, seven wait,
// and the queue has been measured for 1.8 s.
struct PacedQueue {
  explicit PacedQueue(bool refuse_expected_timeouts) : executor(&clock) {
    EngineLoopOptions options = LoopOptions();
    options.clock = &clock;
    options.scheduler.max_batch_size = 1;
    options.scheduler.refuse_expected_timeouts = refuse_expected_timeouts;
    // Held at the first step until all twelve are queued: a loop that ran ahead of the
    // submissions would see an empty queue between them, and measure too little waiting.
    executor.HoldAtStep(1);
    auto created = EngineLoop::Create(&executor, options);
    EXPECT_OK(created);
    loop = std::move(created).value();
    for (RequestId id = 1; id <= 12; ++id) {
      EXPECT_OK(loop->Submit(MakeRequest(id, 4, 4), collector.Callback()));
    }
    EXPECT_TRUE(executor.WaitUntilHeld());
    executor.ReleaseAndHoldAt(20);
    EXPECT_TRUE(executor.WaitUntilHeld());
  }
  FakeClock clock;
  PacedExecutor executor;
  Collector collector;
  std::unique_ptr<EngineLoop> loop;
};

TEST(EngineLoopTest, RefusesAtOnceARequestThatWouldTimeOutInTheQueue) {
  PacedQueue q(/*refuse_expected_timeouts=*/true);
  Request hurried = MakeRequest(13, 4, 4);
  hurried.timeout = absl::Seconds(1);  // seven ahead at about 2.2 a second: some 3 s
  EXPECT_THAT(q.loop->Submit(hurried, q.collector.Callback()),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("7 requests ahead at priority level 1")));
  Request patient = MakeRequest(14, 4, 4);
  patient.timeout = absl::Seconds(60);
  EXPECT_OK(q.loop->Submit(patient, q.collector.Callback()));
  // No timeout: never refused this way.
  EXPECT_OK(q.loop->Submit(MakeRequest(15, 4, 4), q.collector.Callback()));
  q.executor.Release();
  ASSERT_TRUE(q.collector.WaitForFinals(14));
  q.loop->Shutdown();
  auto finals = q.collector.finals();
  EXPECT_EQ(finals.count(13), 0u) << "refused: no event";
  for (const auto& [id, events] : finals) {
    EXPECT_EQ(events[0].outcome, Outcome::kCompleteLength) << id;
  }
}

// Without the switch the same request is admitted, waits, and times out: what the refusal spares.
TEST(EngineLoopTest, WithoutTheSwitchTheRequestWaitsAndTimesOut) {
  PacedQueue q(/*refuse_expected_timeouts=*/false);
  Request hurried = MakeRequest(13, 4, 4);
  hurried.timeout = absl::Seconds(1);
  ASSERT_OK(q.loop->Submit(hurried, q.collector.Callback()));
  q.executor.Release();
  ASSERT_TRUE(q.collector.WaitForFinals(13));
  q.loop->Shutdown();
  EXPECT_EQ(q.collector.finals()[13][0].outcome, Outcome::kTimedOut);
}

// The FakeExecutor behind a gate: each step waits until the test lets one through, so the test
// sees the loop between two steps, where it stays until the next Release.
class GatedExecutor final : public Executor {
 public:
  GatedExecutor(int32_t num_blocks, int32_t block_size) : inner_(num_blocks, block_size) {}

  absl::StatusOr<StepResult> Step(const StepPlan& plan) override {
    {
      absl::MutexLock lock(&mu_);
      ++arrived_;
      auto permitted = [this]()
                           ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return open_ || permits_ > 0; };
      mu_.Await(absl::Condition(&permitted));
      if (!open_) --permits_;
    }
    return inner_.Step(plan);
  }
  const ModelConfig& model_config() const override { return inner_.model_config(); }
  const KvCacheSpec& kv_spec() const override { return inner_.kv_spec(); }
  ExecutorLimits limits() const override { return inner_.limits(); }
  // The block tables are the inner executor's.
  absl::Status CheckRow(const StepRow& row) const override { return inner_.CheckRow(row); }
  void ReleaseTables(absl::Span<const int64_t> seq_ids) override { inner_.ReleaseTables(seq_ids); }

  // Waits until `n` steps have come to the gate in all.
  bool WaitForArrivals(int64_t n) {
    absl::MutexLock lock(&mu_);
    auto arrived = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return arrived_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&arrived), kLiveness);
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    ++permits_;
  }
  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }

 private:
  FakeExecutor inner_;
  absl::Mutex mu_;
  int64_t arrived_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t permits_ ABSL_GUARDED_BY(mu_) = 0;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
};

TEST(EngineLoopTest, APreemptedSequenceTakesNoPlaceInTheQueueBound) {
  // Four blocks of four tokens: two requests that each grow to three blocks cannot both keep
  // theirs, so one is preempted and waits to be recomputed.
  GatedExecutor executor(4, 4);
  EngineLoopOptions options = LoopOptions();
  options.scheduler.num_blocks = 4;
  options.scheduler.default_queue_policy.max_queue_size = 1;
  Collector collector;
  auto loop = EngineLoop::Create(&executor, options);
  ASSERT_OK(loop);
  absl::Cleanup open_gate = [&executor] { executor.Open(); };  // however the test ends
  ASSERT_OK((*loop)->Submit(MakeRequest(1, 4, 8), collector.Callback()));
  ASSERT_TRUE(executor.WaitForArrivals(1));  // 1's prefill
  executor.Release();
  ASSERT_TRUE(executor.WaitForArrivals(2));  // 1's first decode: the queue is empty
  ASSERT_OK((*loop)->Submit(MakeRequest(2, 4, 8), collector.Callback()));
  int64_t arrivals = 2;
  bool preempted_waiting = false;
  while (!preempted_waiting && arrivals < 40) {
    executor.Release();
    ASSERT_TRUE(executor.WaitForArrivals(++arrivals));
    const EngineLoopSnapshot snapshot = (*loop)->snapshot();
    preempted_waiting = snapshot.stats.preemptions > 0 && snapshot.num_waiting == 1;
  }
  ASSERT_TRUE(preempted_waiting) << "no sequence was preempted";
  // The one waiting was admitted before; a new request still has its level's one place.
  EXPECT_OK((*loop)->Submit(MakeRequest(3, 4, 2), collector.Callback()));
  EXPECT_THAT((*loop)->Submit(MakeRequest(4, 4, 2), collector.Callback()),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("full")));
  executor.Open();
  ASSERT_TRUE(collector.WaitForFinals(3));
  (*loop)->Shutdown();
  for (RequestId id : {1, 2, 3}) {
    ASSERT_EQ(collector.finals()[id].size(), 1u) << id;
    EXPECT_EQ(collector.finals()[id][0].outcome, Outcome::kCompleteLength) << id;
  }
}

TEST(EngineLoopTest, RefusesABlockSizeThatDiffersFromTheCache) {
  FakeExecutor executor(256, 8);
  EXPECT_THAT(EngineLoop::Create(&executor, LoopOptions()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("block_size 4")));
}

}  // namespace
}  // namespace convoy::testing
