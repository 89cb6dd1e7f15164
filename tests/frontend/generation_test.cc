// The shared request path (GenerationHub, GenerationSession) over a real engine loop and CPU
// executor with a tiny random model: the engine never waits on what a protocol does with its
// output, and every session ends exactly once.
#include "frontend/generation.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "engine/engine_loop.h"
#include "executor/cpu/cpu_executor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "metrics/logging.h"
#include "spdlog/sinks/base_sink.h"
#include "test_models.h"
#include "text/tokenizer.h"

namespace convoy {
namespace {

constexpr absl::Duration kLiveness = absl::Seconds(120);

class GenerationHubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StartHub("generation_hub", testing::TinyModelConfig(), absl::Seconds(60));
  }

  void StartHub(const std::string& name, const ModelConfig& model,
                absl::Duration slow_client_timeout, const Tokenizer* tokenizer = nullptr) {
    weights_ = testing::LoadRandomModel(name, model);
    ASSERT_NE(weights_, nullptr);
    CpuExecutorOptions options;
    options.num_threads = 1;
    options.kv_cache_bytes = 8 << 20;
    auto executor = CpuExecutor::Create(*weights_, options);
    ASSERT_TRUE(executor.ok()) << executor.status();
    executor_ = *std::move(executor);
    auto loop = EngineLoop::Create(executor_.get(), EngineLoopOptions());
    ASSERT_TRUE(loop.ok()) << loop.status();
    loop_ = *std::move(loop);
    ServingContext context;
    context.engine = loop_.get();
    context.limits.model_name = "tiny";
    context.limits.vocab_size = weights_->config().vocab_size;
    context.limits.max_context_length = weights_->config().max_position_embeddings;
    context.limits.slow_client_timeout = slow_client_timeout;
    context.limits.tokenizer = tokenizer;
    hub_ = std::make_unique<GenerationHub>();
    hub_->Start(std::move(context));
  }
  void TearDown() override {
    if (loop_ != nullptr) loop_->Shutdown(/*drain=*/true);
    hub_.reset();  // runs what is still queued
  }

  static v1::InferRequest Request(int32_t max_tokens) {
    v1::InferRequest r;
    for (int32_t id : {1, 5, 9, 13}) r.add_prompt_token_ids(id);
    r.mutable_sampling()->set_max_tokens(max_tokens);
    return r;
  }

  // Waits (bounded) until `session` has ended; its whole output in `*out`.
  static std::optional<SessionEnd> WaitForEnd(GenerationSession& session, SessionOutput* out) {
    const absl::Time deadline = absl::Now() + kLiveness;
    while (absl::Now() < deadline) {
      if (std::optional<SessionEnd> end = session.Take(out)) return end;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return std::nullopt;
  }

  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<CpuExecutor> executor_;
  std::unique_ptr<EngineLoop> loop_;
  std::unique_ptr<GenerationHub> hub_;
};

TEST_F(GenerationHubTest, TheEngineKeepsSteppingWhileAProtocolIsStuckOnItsOutput) {
  // Session `stuck` stands for a front end that cannot go on (a socket that does not drain, a log
  // pipe nobody reads): its wake-up blocks until the test releases it.
  absl::Notification blocked, release;
  std::shared_ptr<GenerationSession> stuck = GenerationSession::Create(hub_.get(), [&] {
    if (!blocked.HasBeenNotified()) {
      blocked.Notify();
      release.WaitForNotification();
    }
  });
  std::shared_ptr<GenerationSession> other = GenerationSession::Create(hub_.get(), [] {});
  stuck->Begin(Request(4), absl::InfiniteFuture(), CallOrigin());
  ASSERT_TRUE(blocked.WaitForNotificationWithTimeout(kLiveness));

  // While it is stuck, another request runs its 200 steps to the end in the engine.
  const int64_t steps_before = loop_->stats().steps;
  other->Begin(Request(200), absl::InfiniteFuture(), CallOrigin());
  const absl::Time deadline = absl::Now() + kLiveness;
  while (loop_->stats().steps < steps_before + 200 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_GE(loop_->stats().steps, steps_before + 200)
      << "the engine stopped stepping while a session's wake-up was blocked";
  EXPECT_TRUE(blocked.HasBeenNotified());
  release.Notify();

  // Nothing was lost: both end, each exactly once, with all their tokens.
  SessionOutput stuck_out, other_out;
  std::optional<SessionEnd> stuck_end = WaitForEnd(*stuck, &stuck_out);
  std::optional<SessionEnd> other_end = WaitForEnd(*other, &other_out);
  ASSERT_TRUE(stuck_end.has_value());
  ASSERT_TRUE(other_end.has_value());
  EXPECT_TRUE(stuck_end->status.ok()) << stuck_end->status;
  EXPECT_TRUE(other_end->status.ok()) << other_end->status;
  EXPECT_EQ(stuck_out.token_ids.size(), 4u);
  EXPECT_EQ(other_out.token_ids.size(), 200u);
  EXPECT_EQ(other_end->completion_tokens, 200);
  stuck->Detach();
  other->Detach();
}

// A protocol's wake-up may end sessions, its own among them: a call whose choice failed ends the
// others from the wake-up of whichever choice it was handling (ChoiceGroup::ClientGone). The
// wake-ups that causes come after the one in progress, on the same thread, not inside it. (CI
// once saw the hub's dispatcher stuck for good this way: inside choice B's wake-up it ended the
// call's choices, B with them, and B's own wake-up waited for the lock it held; no event was
// dispatched again.)
TEST_F(GenerationHubTest, AWakeUpThatEndsSessionsIsFollowedByTheirWakeUpsNotEnteredByThem) {
  // Two sessions of one call: the first wake-up of either ends both (its own session included).
  absl::Mutex mu;
  std::vector<std::pair<int, bool>> wakes;  // (session, whether inside another's wake-up)
  int depth = 0;
  std::shared_ptr<GenerationSession> sessions[2];
  absl::Notification ended;
  auto wake = [&](int self) {
    {
      absl::MutexLock lock(&mu);
      wakes.emplace_back(self, depth > 0);
      ++depth;
    }
    SessionOutput out;
    bool both_ended = false;
    if (sessions[self]->Take(&out).has_value()) {
      both_ended = sessions[1 - self]->Take(&out).has_value();
    } else {
      for (const auto& session : sessions) session->ClientGone();
    }
    absl::MutexLock lock(&mu);
    --depth;
    if (both_ended && !ended.HasBeenNotified()) ended.Notify();
  };
  sessions[0] = GenerationSession::Create(hub_.get(), [&] { wake(0); });
  sessions[1] = GenerationSession::Create(hub_.get(), [&] { wake(1); });
  for (const auto& session : sessions) {
    session->Begin(Request(50), absl::InfiniteFuture(), CallOrigin());
  }
  ASSERT_TRUE(ended.WaitForNotificationWithTimeout(kLiveness))
      << "a wake-up that ended sessions never returned";
  for (const auto& session : sessions) session->Detach();
  absl::MutexLock lock(&mu);
  for (const auto& [session, nested] : wakes) {
    EXPECT_FALSE(nested) << "session " << session << " was woken inside another wake-up";
  }
}

// A tokenizer whose token i is the text "<i>", for every token of the tiny model.
std::unique_ptr<Tokenizer> TokenPerTagTokenizer(int64_t vocab_size) {
  std::string vocab;
  for (int64_t i = 0; i < vocab_size; ++i) {
    absl::StrAppend(&vocab, i == 0 ? "" : ", ", "\"<", i, ">\": ", i);
  }
  auto tokenizer = Tokenizer::FromHuggingFaceJson(absl::StrCat(
      R"({"added_tokens": [], "normalizer": null, "pre_tokenizer": null, "post_processor": null,
          "decoder": null, "model": {"type": "BPE", "merges": [], "vocab": {)",
      vocab, "}}}"));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

// The front end takes the engine's events on its dispatcher thread, which may run behind the
// engine. These tests hold the dispatcher (inside another session's wake-up) while a request
// runs to its end in the engine, so that the session sees its tokens only after the engine has
// finished it.
class BehindTheEngineTest : public GenerationHubTest {
 protected:
  void SetUp() override {
    tokenizer_ = TokenPerTagTokenizer(testing::TinyModelConfig().vocab_size);
    ASSERT_NE(tokenizer_, nullptr);
    StartHub("behind_the_engine", testing::TinyModelConfig(), absl::Seconds(60), tokenizer_.get());
  }

  // Runs `request` to its end in the engine (12 tokens, to its max_tokens) while the dispatcher
  // is held, then lets the dispatcher go; the session's end, its output in `*out`. With
  // `deadline_after`, the call's deadline is that long after the request is sent (long enough
  // for the engine to schedule it, which a deadline passed in the queue would prevent), and the
  // dispatcher is let go once it has passed.
  std::optional<SessionEnd> RunWhileTheDispatcherIsHeld(
      const v1::InferRequest& request, std::optional<absl::Duration> deadline_after,
      SessionOutput* out) {
    const int64_t lengths_before =
        loop_->stats().outcomes[static_cast<int>(Outcome::kCompleteLength)];
    const int64_t counted_before = CountedByTheHub();
    absl::Notification blocked, release;
    std::shared_ptr<GenerationSession> stuck = GenerationSession::Create(hub_.get(), [&] {
      if (!blocked.HasBeenNotified()) {
        blocked.Notify();
        release.WaitForNotification();
      }
    });
    stuck->Begin(Request(2), absl::InfiniteFuture(), CallOrigin());
    EXPECT_TRUE(blocked.WaitForNotificationWithTimeout(kLiveness));
    std::shared_ptr<GenerationSession> session = GenerationSession::Create(hub_.get(), [] {});
    // From here: a deadline set before the held session's first step (slow under ThreadSanitizer)
    // could pass before the request arrives, which refuses it.
    const absl::Time deadline =
        deadline_after ? absl::Now() + *deadline_after : absl::InfiniteFuture();
    session->Begin(request, deadline, CallOrigin());
    // Both requests end in the engine, to their max_tokens.
    const absl::Time give_up = absl::Now() + kLiveness;
    auto lengths = [&] {
      return loop_->stats().outcomes[static_cast<int>(Outcome::kCompleteLength)];
    };
    while (lengths() < lengths_before + 2 && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(2));
    }
    EXPECT_GE(lengths(), lengths_before + 2)
        << "the engine did not finish both requests while the dispatcher was held";
    while (absl::Now() < deadline && deadline - absl::Now() < kLiveness) {
      absl::SleepFor(absl::Milliseconds(2));  // and its deadline passes, when it has one
    }
    release.Notify();
    std::optional<SessionEnd> end = WaitForEnd(*session, out);
    SessionOutput rest;
    EXPECT_TRUE(WaitForEnd(*stuck, &rest).has_value());
    // A session that ended at its deadline is counted when the dispatcher reaches the engine's
    // final event for it, which may come after its client has the answer (CI's sanitizer runs
    // saw the count still 0 here): wait for the hub to count both requests.
    while (CountedByTheHub() < counted_before + 2 && absl::Now() < give_up + kLiveness) {
      absl::SleepFor(absl::Milliseconds(2));
    }
    EXPECT_EQ(CountedByTheHub(), counted_before + 2);
    stuck->Detach();
    session->Detach();
    return end;
  }

  int64_t CountedByTheHub() const {
    const std::array<int64_t, kNumOutcomes> outcomes = hub_->outcomes();
    return std::accumulate(outcomes.begin(), outcomes.end(), int64_t{0});
  }

  std::unique_ptr<Tokenizer> tokenizer_;
};

// The engine ended the request at its max_tokens before the cancel sent at its stop string came:
// the answer still ends at the stop string, as "stop", and is counted so.
TEST_F(BehindTheEngineTest, AnAnswerEndsAtItsStopStringWhenTheEngineFinishedFirst) {
  std::shared_ptr<GenerationSession> probe = GenerationSession::Create(hub_.get(), [] {});
  probe->Begin(Request(12), absl::InfiniteFuture(), CallOrigin());
  SessionOutput whole;
  ASSERT_TRUE(WaitForEnd(*probe, &whole).has_value());
  probe->Detach();
  ASSERT_EQ(whole.token_ids.size(), 12u);
  // The stop string: the text of the fifth token, where it first appears.
  const std::string stop = absl::StrCat("<", whole.token_ids[4], ">");
  const size_t at = whole.text.find(stop);
  ASSERT_NE(at, std::string::npos) << whole.text;

  v1::InferRequest request = Request(12);
  request.mutable_sampling()->add_stop(stop);
  SessionOutput out;
  std::optional<SessionEnd> end = RunWhileTheDispatcherIsHeld(request, std::nullopt, &out);
  ASSERT_TRUE(end.has_value());
  EXPECT_TRUE(end->status.ok()) << end->status;
  EXPECT_EQ(end->finish_reason, v1::FINISH_REASON_STOP);
  EXPECT_EQ(end->stop_string, stop);
  EXPECT_EQ(out.text, whole.text.substr(0, at));
  EXPECT_EQ(hub_->outcomes()[static_cast<int>(Outcome::kCompleteStop)], 1);
}

// Likewise a deadline that passed before the session saw the tokens: the client gets the timeout,
// and the request is counted as timed out, not as complete.
TEST_F(BehindTheEngineTest, ARequestWhoseDeadlinePassedFirstIsCountedAsTheClientSawIt) {
  SessionOutput out;
  std::optional<SessionEnd> end = RunWhileTheDispatcherIsHeld(Request(12), absl::Seconds(3), &out);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->status.code(), absl::StatusCode::kDeadlineExceeded) << end->status;
  EXPECT_EQ(hub_->outcomes()[static_cast<int>(Outcome::kTimedOut)], 1);
  EXPECT_EQ(hub_->outcomes()[static_cast<int>(Outcome::kCompleteLength)], 1) << "the held one";
}

// frontend.slow_client_timeout_microseconds: a front end whose client does not read stops taking
// output; once output has waited longer than the timeout the hub ends the session, cancels the
// request and frees its blocks.
class SlowClientTest : public GenerationHubTest {
 protected:
  void SetUp() override {
    ModelConfig long_context = testing::TinyModelConfig();
    long_context.max_position_embeddings = 8192;  // a generation far longer than the timeout
    StartHub("slow_client", long_context, absl::Milliseconds(20));
  }
};

TEST_F(SlowClientTest, AClientThatTakesNothingIsEndedAndItsRequestCancelled) {
  std::atomic<int> wakes{0};
  // A front end whose client stopped reading: woken, it takes nothing.
  std::shared_ptr<GenerationSession> slow =
      GenerationSession::Create(hub_.get(), [&] { wakes.fetch_add(1); });
  slow->Begin(Request(8000), absl::InfiniteFuture(), CallOrigin());
  const absl::Time deadline = absl::Now() + kLiveness;
  while (!slow->slow_client() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_TRUE(slow->slow_client());

  SessionOutput out;
  std::optional<SessionEnd> end = WaitForEnd(*slow, &out);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->status.code(), absl::StatusCode::kResourceExhausted) << end->status;
  EXPECT_THAT(std::string(end->status.message()),
              ::testing::HasSubstr("frontend.slow_client_timeout_microseconds"));
  EXPECT_EQ(end->finish_reason, v1::FINISH_REASON_CANCELLED);
  EXPECT_TRUE(out.token_ids.empty()) << "the output waiting was dropped";
  EXPECT_LT(end->completion_tokens, 8000);
  EXPECT_GT(wakes.load(), 0);
  // The engine lets go of the request: every KV block is free again.
  while (loop_->snapshot().kv_blocks_free != loop_->snapshot().kv_blocks_total &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(loop_->snapshot().kv_blocks_free, loop_->snapshot().kv_blocks_total);
  EXPECT_EQ(loop_->snapshot().num_running, 0);
  slow->Detach();
}

// request_limits.max_in_flight_per_client: a client (here, an address) with that many requests
// unfinished is refused another, naming the limit; other clients are not; a slot frees when one of
// its requests ends.
TEST_F(GenerationHubTest, OneClientCannotHoldMoreRequestsInFlightThanItsLimit) {
  hub_->UpdateLimits([](ServingLimits* limits) { limits->max_in_flight_per_client = 2; });
  const CallOrigin a{"", "10.0.0.1"}, b{"", "10.0.0.2"};
  auto begin = [&](const CallOrigin& origin, int32_t max_tokens) {
    std::shared_ptr<GenerationSession> session = GenerationSession::Create(hub_.get(), [] {});
    session->Begin(Request(max_tokens), absl::InfiniteFuture(), origin);
    return session;
  };
  std::shared_ptr<GenerationSession> a1 = begin(a, 250), a2 = begin(a, 250);
  std::shared_ptr<GenerationSession> a3 = begin(a, 4);
  SessionOutput out;
  std::optional<SessionEnd> refused = a3->Take(&out);
  ASSERT_TRUE(refused.has_value()) << "the third request of one client was admitted";
  EXPECT_EQ(refused->status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused->status.message()),
              ::testing::AllOf(::testing::HasSubstr("10.0.0.1"),
                               ::testing::HasSubstr("request_limits.max_in_flight_per_client")));
  EXPECT_EQ(hub_->rejections()[static_cast<int>(RejectReason::kClientLimit)], 1);

  std::shared_ptr<GenerationSession> b1 = begin(b, 4);  // another client: admitted
  std::optional<SessionEnd> b1_end = WaitForEnd(*b1, &out);
  ASSERT_TRUE(b1_end.has_value());
  EXPECT_TRUE(b1_end->status.ok()) << b1_end->status;

  a1->ClientGone();  // ends a1, and with it one of a's two slots
  ASSERT_TRUE(WaitForEnd(*a1, &out).has_value());
  std::shared_ptr<GenerationSession> a4 = begin(a, 4);
  std::optional<SessionEnd> a4_end = WaitForEnd(*a4, &out);
  ASSERT_TRUE(a4_end.has_value());
  EXPECT_TRUE(a4_end->status.ok()) << a4_end->status;
  a2->ClientGone();
  ASSERT_TRUE(WaitForEnd(*a2, &out).has_value());
  for (auto* session : {&a1, &a2, &a3, &a4, &b1}) (*session)->Detach();
}

// A sink that blocks every write until released.
class StalledSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  absl::Notification release;

 protected:
  void sink_it_(const spdlog::details::log_msg&) override { release.WaitForNotification(); }
  void flush_() override {}
};

TEST(AsyncLoggingTest, ALoggerNeverWaitsOnAStalledSinkAndCountsWhatItDrops) {
  auto sink = std::make_shared<StalledSink>();
  LoggingOptions options;
  options.async = true;
  options.async_queue_lines = 64;
  options.sinks = {sink};
  options.logger_name = "stalled";
  absl::StatusOr<std::shared_ptr<spdlog::logger>> logger = MakeLogger(options);
  ASSERT_TRUE(logger.ok()) << logger.status();
  const int64_t dropped_before = DroppedLogLines();
  // Far more lines than the queue holds, with the sink stuck on the first: none of these calls
  // may wait for it (the test would hang otherwise).
  for (int i = 0; i < 10000; ++i) (*logger)->info("line {}", i);
  EXPECT_GT(DroppedLogLines(), dropped_before);
  sink->release.Notify();
  (*logger)->flush();
}

}  // namespace
}  // namespace convoy
