// The asynchronous step (issue 23): the executor contract's Launch and Collect, the fake device
// that runs each step on a thread of its own, and the engine loop that hands a step's events to the
// front ends while the next step runs. Every wait is a liveness bound, never a timing assertion.
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "engine/engine_loop.h"
#include "executor/fake/fake_device_executor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "step/token_constraint.h"
#include "test_models.h"

namespace convoy::testing {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kLiveness = absl::Minutes(1);

std::unique_ptr<FakeDeviceExecutor> MakeDevice(absl::Duration step_time,
                                               std::vector<int32_t> never_sample = {}) {
  FakeDeviceOptions options;
  options.step_time = step_time;
  options.block_size = 4;
  options.kv_cache_bytes = int64_t{64} << 20;
  options.never_sample = std::move(never_sample);
  absl::StatusOr<std::unique_ptr<FakeDeviceExecutor>> device =
      FakeDeviceExecutor::Create(TinyModelConfig(), options);
  EXPECT_OK(device);
  return device.ok() ? *std::move(device) : nullptr;
}

StepRow DecodeRow(int64_t seq_id, int32_t token, int32_t position, int32_t first_block) {
  StepRow row;
  row.seq_id = seq_id;
  row.token_ids = {token};
  row.start_pos = position;
  for (int32_t b = 0; b * 4 <= position; ++b) row.block_table.push_back(first_block + b);
  return row;
}

// The tokens a request gets from the fake device after `prompt`, alone or not.
std::vector<int32_t> ExpectedTokens(const FakeDeviceExecutor& device,
                                    const std::vector<int32_t>& prompt, int n) {
  std::vector<int32_t> out;
  int32_t last = prompt.back();
  int64_t position = static_cast<int64_t>(prompt.size());
  for (int i = 0; i < n; ++i) {
    last = device.TokenAfter(last, position++);
    out.push_back(last);
  }
  return out;
}

TEST(FakeDeviceTest, LaunchReturnsAndCollectHandsBackTheStep) {
  auto device = MakeDevice(absl::Milliseconds(5));
  ASSERT_NE(device, nullptr);
  EXPECT_TRUE(device->steps_asynchronously());
  StepPlan plan;
  plan.rows.push_back(DecodeRow(1, 7, 3, 0));
  plan.rows.push_back(DecodeRow(2, 9, 5, 10));
  ASSERT_OK(device->Launch(plan));
  EXPECT_TRUE(device->step_launched());
  EXPECT_THAT(device->Launch(plan), StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::_));
  absl::StatusOr<StepResult> result = device->Collect();
  ASSERT_OK(result);
  EXPECT_FALSE(device->step_launched());
  ASSERT_EQ(result->rows.size(), 2u);
  EXPECT_EQ(result->rows[0].seq_id, 1);
  EXPECT_EQ(result->rows[0].token, device->TokenAfter(7, 4));
  EXPECT_EQ(result->rows[1].token, device->TokenAfter(9, 6));
  EXPECT_EQ(result->real_tokens, 2);
  // The step lasted its step time: the device sleeps until its deadline.
  EXPECT_GE(result->times.prepare + result->times.forward + result->times.sample,
            absl::Milliseconds(5));
  EXPECT_THAT(device->Collect(), StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::_));
}

// A step lasts its step time plus its time per token, from its launch.
TEST(FakeDeviceTest, APrefillChunkCostsItsTimePerToken) {
  FakeDeviceOptions options;
  options.step_time = absl::Milliseconds(1);
  options.time_per_token = absl::Microseconds(200);
  options.block_size = 4;
  auto device = FakeDeviceExecutor::Create(TinyModelConfig(), options);
  ASSERT_OK(device);
  StepPlan plan;
  StepRow prefill = DecodeRow(1, 5, 0, 0);
  prefill.token_ids = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14};  // positions 0..9: three blocks
  prefill.block_table = {0, 1, 2};
  plan.rows.push_back(prefill);
  absl::StatusOr<StepResult> result = (*device)->Step(plan);
  ASSERT_OK(result);
  EXPECT_EQ(result->rows[0].token, (*device)->TokenAfter(14, 10));
  EXPECT_GE(result->times.prepare + result->times.forward + result->times.sample,
            absl::Milliseconds(3));  // 1 ms + 10 x 200 us
}

TEST(FakeDeviceTest, AMalformedPlanFailsAtCollectNamingTheRow) {
  auto device = MakeDevice(absl::Microseconds(100));
  ASSERT_NE(device, nullptr);
  StepPlan plan;
  plan.rows.push_back(DecodeRow(1, 7, 3, 0));
  plan.rows.push_back(DecodeRow(1, 8, 3, 4));
  ASSERT_OK(device->Launch(plan));
  EXPECT_THAT(device->Collect(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sequence 1 appears twice")));
  plan.rows.pop_back();
  plan.rows[0].token_ids = {static_cast<int32_t>(TinyModelConfig().vocab_size)};
  EXPECT_THAT(device->Step(plan),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("outside the vocabulary")));
}

TEST(FakeDeviceTest, RefusesOptionsItCannotRun) {
  FakeDeviceOptions options;
  options.step_time = absl::ZeroDuration();
  EXPECT_THAT(FakeDeviceExecutor::Create(TinyModelConfig(), options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("step time")));
  options.step_time = absl::Milliseconds(1);
  options.kv_cache_bytes = 1;
  EXPECT_THAT(FakeDeviceExecutor::Create(TinyModelConfig(), options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("holds no block")));
  ModelConfig no_vocab = TinyModelConfig();
  no_vocab.vocab_size = 0;
  options.kv_cache_bytes = int64_t{1} << 20;
  EXPECT_THAT(FakeDeviceExecutor::Create(no_vocab, options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("vocabulary")));
}

// Allows exactly one token, forever.
class OnlyToken : public TokenConstraint {
 public:
  explicit OnlyToken(int32_t token) : token_(token) {}
  void FillNextTokenMask(uint32_t* bits, int32_t) override {
    bits[token_ >> 5] |= 1u << (token_ & 31);
  }
  absl::Status AcceptToken(int32_t token) override {
    return token == token_ ? absl::OkStatus() : absl::InvalidArgumentError("unexpected token");
  }
  bool IsTerminated() const override { return false; }

 private:
  const int32_t token_;
};

TEST(FakeDeviceTest, AConstraintThatAllowsOneTokenForcesItAndEndTokensAreNeverSampled) {
  const int32_t vocab = static_cast<int32_t>(TinyModelConfig().vocab_size);
  std::vector<int32_t> ends;
  for (int32_t t = 0; t < vocab; t += 2) ends.push_back(t);  // every even id
  auto device = MakeDevice(absl::Microseconds(50), ends);
  ASSERT_NE(device, nullptr);
  for (int32_t position = 1; position < 40; ++position) {
    StepPlan plan;
    plan.rows.push_back(DecodeRow(1, position % vocab, position, 0));
    StepRow forced = DecodeRow(2, position % vocab, position, 20);
    // An even (end) token: a constraint overrules never_sample, as one that allows only the end
    // must be able to end its request.
    forced.allowed_tokens = std::make_shared<TokenMask>(std::make_unique<OnlyToken>(42), vocab);
    plan.rows.push_back(std::move(forced));
    absl::StatusOr<StepResult> result = device->Step(plan);
    ASSERT_OK(result);
    EXPECT_EQ(result->rows[0].token % 2, 1) << position;
    EXPECT_EQ(result->rows[1].token, 42) << position;
  }
}

// Collects every request's events and, at each token, whether a step was in flight.
class Collector {
 public:
  explicit Collector(const FakeDeviceExecutor* device) : device_(device) {}
  EngineLoop::EventCallback Callback() {
    return [this](const Event& event) {
      const bool in_flight = device_->step_launched();
      absl::MutexLock lock(&mu_);
      if (finals_.contains(event.request_id)) ++after_final_;
      if (event.kind == Event::Kind::kToken) {
        tokens_[event.request_id].push_back(event.token);
        in_flight_[event.request_id].push_back(in_flight);
      } else {
        finals_[event.request_id] = event;
      }
    };
  }
  bool WaitForFinals(size_t n) {
    absl::MutexLock lock(&mu_);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return finals_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&done), kLiveness);
  }
  std::map<RequestId, std::vector<int32_t>> tokens() {
    absl::MutexLock lock(&mu_);
    return tokens_;
  }
  std::map<RequestId, std::vector<bool>> in_flight() {
    absl::MutexLock lock(&mu_);
    return in_flight_;
  }
  std::map<RequestId, Event> finals() {
    absl::MutexLock lock(&mu_);
    return finals_;
  }
  int after_final() {
    absl::MutexLock lock(&mu_);
    return after_final_;
  }

 private:
  const FakeDeviceExecutor* const device_;
  absl::Mutex mu_;
  std::map<RequestId, std::vector<int32_t>> tokens_ ABSL_GUARDED_BY(mu_);
  std::map<RequestId, std::vector<bool>> in_flight_ ABSL_GUARDED_BY(mu_);
  std::map<RequestId, Event> finals_ ABSL_GUARDED_BY(mu_);
  int after_final_ ABSL_GUARDED_BY(mu_) = 0;
};

class PhaseObserver : public SchedulerObserver {
 public:
  void OnStepPhases(const StepPhases& phases) override {
    absl::MutexLock lock(&mu_);
    phases_.push_back(phases);
  }
  std::vector<StepPhases> phases() {
    absl::MutexLock lock(&mu_);
    return phases_;
  }

 private:
  absl::Mutex mu_;
  std::vector<StepPhases> phases_ ABSL_GUARDED_BY(mu_);
};

EngineLoopOptions Options(bool overlap, SchedulerObserver* observer = nullptr,
                          bool plan_ahead = true) {
  EngineLoopOptions options;
  options.plan_ahead = plan_ahead;
  options.scheduler.max_batch_size = 32;
  options.scheduler.max_num_batched_tokens = 1024;
  options.scheduler.block_size = 4;
  options.emit_during_next_step = overlap;
  options.observer = observer;
  return options;
}

Request MakeRequest(RequestId id, int prompt_length, int max_tokens) {
  Request request;
  request.id = id;
  for (int i = 0; i < prompt_length; ++i) {
    request.prompt_tokens.push_back(static_cast<int32_t>((id * 31 + i * 7) % 300));
  }
  request.max_tokens = max_tokens;
  return request;
}

// Many requests from two threads: each gets exactly the fake's tokens for its prompt, whatever
// shared its steps, then exactly one final; with the overlap, a token goes out while the next step
// runs whenever the request has one more token to come. Planning ahead, a decode row's token is the
// one the step before sampled: a wrong fill-in changes every later token of the fake's chain.
void ServeMany(bool overlap, bool plan_ahead) {
  auto device = MakeDevice(absl::Microseconds(300));
  ASSERT_NE(device, nullptr);
  PhaseObserver observer;
  auto loop = EngineLoop::Create(device.get(), Options(overlap, &observer, plan_ahead));
  ASSERT_OK(loop);
  Collector collector(device.get());
  std::map<RequestId, Request> sent;
  for (RequestId id = 1; id <= 60; ++id) sent[id] = MakeRequest(id, 1 + id % 11, 1 + id % 7);
  std::vector<std::thread> clients;
  for (int t = 0; t < 2; ++t) {
    clients.emplace_back([&, t] {
      for (RequestId id = 1 + t; id <= 60; id += 2) {
        EXPECT_OK((*loop)->Submit(sent[id], collector.Callback()));
      }
    });
  }
  for (std::thread& c : clients) c.join();
  ASSERT_TRUE(collector.WaitForFinals(60));
  (*loop)->Shutdown();
  const auto tokens = collector.tokens();
  const auto in_flight = collector.in_flight();
  for (const auto& [id, final_event] : collector.finals()) {
    const Request& request = sent[id];
    EXPECT_EQ(final_event.outcome, Outcome::kCompleteLength) << id;
    EXPECT_EQ(tokens.at(id), ExpectedTokens(*device, request.prompt_tokens, request.max_tokens))
        << id;
    // Token k of n (k < n) is followed by the step that makes token k + 1.
    for (size_t k = 0; k + 1 < in_flight.at(id).size(); ++k) {
      EXPECT_EQ(in_flight.at(id)[k], overlap) << "request " << id << " token " << k;
    }
  }
  EXPECT_EQ(collector.after_final(), 0);
  const EngineLoopSnapshot snapshot = (*loop)->snapshot();
  EXPECT_EQ(snapshot.kv_blocks_free, snapshot.kv_blocks_total);
  const std::vector<StepPhases> phases = observer.phases();
  EXPECT_EQ(static_cast<int64_t>(phases.size()), snapshot.stats.steps);
  EXPECT_EQ(snapshot.step_phases.steps, snapshot.stats.steps);
  for (const StepPhases& p : phases) {
    // The device's step, as it measured it, is at least its step time; the engine's own work
    // is everything but the wait.
    EXPECT_GE(p.executor.prepare + p.executor.forward + p.executor.sample, absl::Microseconds(300));
    EXPECT_EQ(p.engine_thread, p.plan + p.launch + p.emit + p.plan_ahead + p.apply);
  }
}

TEST(AsyncEngineTest, ServesEveryRequestExactlyPlanningAhead) {
  ServeMany(/*overlap=*/true, /*plan_ahead=*/true);
}

TEST(AsyncEngineTest, ServesEveryRequestExactlyWithTheOverlapAlone) {
  ServeMany(/*overlap=*/true, /*plan_ahead=*/false);
}

TEST(AsyncEngineTest, ServesEveryRequestExactlyWithoutTheOverlap) {
  ServeMany(/*overlap=*/false, /*plan_ahead=*/false);
}

// A cancellation that arrives between a step's launch and its collection (from a token's
// callback, which with the overlap runs while the next step is in flight) ends the request at the
// next step boundary: one final, cancelled, nothing after it, at most one token more.
TEST(AsyncEngineTest, ACancellationBetweenLaunchAndCollectEndsTheRequestOneStepLateAtMost) {
  auto device = MakeDevice(absl::Milliseconds(2));
  ASSERT_NE(device, nullptr);
  auto loop = EngineLoop::Create(device.get(), Options(/*overlap=*/true));
  ASSERT_OK(loop);
  absl::Mutex mu;
  std::vector<Event> events;
  std::atomic<bool> cancelled_in_flight{false};
  EngineLoop* raw = loop->get();
  auto callback = [&](const Event& event) {
    if (event.kind == Event::Kind::kToken && event.request_id == 1 && !cancelled_in_flight.load()) {
      cancelled_in_flight = device->step_launched();
      raw->Cancel(1);
    }
    absl::MutexLock lock(&mu);
    events.push_back(event);
  };
  ASSERT_OK((*loop)->Submit(MakeRequest(1, 5, 200), callback));
  ASSERT_OK((*loop)->Submit(MakeRequest(2, 5, 20), callback));
  {
    absl::MutexLock lock(&mu);
    auto both = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      int finals = 0;
      for (const Event& e : events) finals += e.kind == Event::Kind::kFinal ? 1 : 0;
      return finals == 2;
    };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&both), kLiveness));
  }
  (*loop)->Shutdown();
  EXPECT_TRUE(cancelled_in_flight.load());
  int tokens_of_1 = 0, finals_of_1 = 0, after_final = 0;
  for (const Event& e : events) {
    if (e.request_id != 1) continue;
    if (finals_of_1 > 0) ++after_final;
    if (e.kind == Event::Kind::kToken) ++tokens_of_1;
    if (e.kind == Event::Kind::kFinal) {
      ++finals_of_1;
      EXPECT_EQ(e.outcome, Outcome::kCancelled);
    }
  }
  EXPECT_EQ(finals_of_1, 1);
  EXPECT_EQ(after_final, 0);
  EXPECT_GE(tokens_of_1, 1);
  EXPECT_LE(tokens_of_1, 2);
  const EngineLoopSnapshot snapshot = (*loop)->snapshot();
  EXPECT_EQ(snapshot.kv_blocks_free, snapshot.kv_blocks_total);
}

// New knobs while steps are planned ahead: the reload waits for the step planned under the old
// ones, applies, and every request still gets exactly its tokens.
TEST(AsyncEngineTest, AReloadAppliesBetweenStepsPlannedAhead) {
  auto device = MakeDevice(absl::Microseconds(300));
  ASSERT_NE(device, nullptr);
  auto loop = EngineLoop::Create(device.get(), Options(/*overlap=*/true));
  ASSERT_OK(loop);
  Collector collector(device.get());
  std::map<RequestId, Request> sent;
  for (RequestId id = 1; id <= 24; ++id) {
    sent[id] = MakeRequest(id, 3 + id % 5, 60);
    ASSERT_OK((*loop)->Submit(sent[id], collector.Callback()));
  }
  for (int32_t batch : {4, 16, 2, 32}) {
    SchedulerOptions knobs = (*loop)->options();
    knobs.max_batch_size = batch;
    ASSERT_OK((*loop)->Reconfigure(knobs));
    EXPECT_EQ((*loop)->options().max_batch_size, batch);
  }
  ASSERT_TRUE(collector.WaitForFinals(24));
  (*loop)->Shutdown();
  for (const auto& [id, final_event] : collector.finals()) {
    EXPECT_EQ(final_event.outcome, Outcome::kCompleteLength) << id;
    EXPECT_EQ(collector.tokens()[id], ExpectedTokens(*device, sent[id].prompt_tokens, 60)) << id;
  }
  EXPECT_EQ(collector.after_final(), 0);
}

// A constraint that allows one token forces it at every step planned ahead too; the requests
// beside it get exactly their tokens.
TEST(AsyncEngineTest, AConstraintForcesItsTokenWhileStepsArePlannedAhead) {
  auto device = MakeDevice(absl::Microseconds(300));
  ASSERT_NE(device, nullptr);
  auto loop = EngineLoop::Create(device.get(), Options(/*overlap=*/true));
  ASSERT_OK(loop);
  Collector collector(device.get());
  const int32_t vocab = static_cast<int32_t>(TinyModelConfig().vocab_size);
  Request forced = MakeRequest(1, 4, 30);
  forced.constraint = std::make_shared<TokenMask>(std::make_unique<OnlyToken>(42), vocab);
  ASSERT_OK((*loop)->Submit(forced, collector.Callback()));
  std::map<RequestId, Request> free;
  for (RequestId id = 2; id <= 6; ++id) {
    free[id] = MakeRequest(id, 3 + id, 30);
    ASSERT_OK((*loop)->Submit(free[id], collector.Callback()));
  }
  ASSERT_TRUE(collector.WaitForFinals(6));
  (*loop)->Shutdown();
  EXPECT_EQ(collector.finals()[1].outcome, Outcome::kCompleteLength);
  EXPECT_EQ(collector.tokens()[1], std::vector<int32_t>(30, 42));
  for (const auto& [id, request] : free) {
    EXPECT_EQ(collector.tokens()[id], ExpectedTokens(*device, request.prompt_tokens, 30)) << id;
  }
}

// A stop token ends its request at once: no token past it, although the next step was planned
// while the stop token's events waited to go out.
TEST(AsyncEngineTest, NoTokenFollowsAStopToken) {
  auto device = MakeDevice(absl::Microseconds(300));
  ASSERT_NE(device, nullptr);
  auto loop = EngineLoop::Create(device.get(), Options(/*overlap=*/true));
  ASSERT_OK(loop);
  Collector collector(device.get());
  Request request = MakeRequest(1, 6, 50);
  const std::vector<int32_t> expected = ExpectedTokens(*device, request.prompt_tokens, 50);
  request.stop_token_ids = {expected[3]};
  const size_t stop_at = static_cast<size_t>(
      std::find(expected.begin(), expected.end(), expected[3]) - expected.begin());
  ASSERT_OK((*loop)->Submit(request, collector.Callback()));
  ASSERT_OK((*loop)->Submit(MakeRequest(2, 6, 30), collector.Callback()));
  ASSERT_TRUE(collector.WaitForFinals(2));
  (*loop)->Shutdown();
  EXPECT_EQ(collector.finals()[1].outcome, Outcome::kCompleteStop);
  EXPECT_EQ(collector.tokens()[1],
            std::vector<int32_t>(expected.begin(), expected.begin() + stop_at + 1));
  EXPECT_EQ(collector.after_final(), 0);
}

}  // namespace
}  // namespace convoy::testing
