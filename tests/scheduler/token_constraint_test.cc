// Constrained sampling (step/token_constraint.h) through the engine loop, the scheduler and the
// CPU executor on a random model: a constraint that allows one token forces it at every step,
// also across preemption and recomputation and beside unconstrained requests; one that allows
// everything changes nothing; one that allows nothing ends only its own request, with an error
// that says so; a terminated constraint ends its request as stopped. And TokenMask's contract:
// computed once per position, whichever thread asks first.
#include "step/token_constraint.h"

#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "engine/engine_loop.h"
#include "executor/cpu/cpu_executor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "harness.h"
#include "model/model_weights.h"
#include "model/random_model.h"
#include "serve_engine.h"
#include "status_matchers.h"
#include "test_models.h"
#include "tiny_cpu_executor.h"

namespace convoy::testing {
namespace {

using ::testing::HasSubstr;

constexpr int32_t kBlockSize = 4;
constexpr int32_t kVocab = 320;  // TinyModelConfig's

// Allows exactly the next token of `script`; terminated once the script is spent.
class ScriptedConstraint : public TokenConstraint {
 public:
  explicit ScriptedConstraint(std::vector<int32_t> script, std::atomic<int>* fills = nullptr)
      : script_(std::move(script)), fills_(fills) {}
  void FillNextTokenMask(uint32_t* bits, int32_t) override {
    if (fills_ != nullptr) fills_->fetch_add(1);
    if (next_ < script_.size()) bits[script_[next_] >> 5] |= 1u << (script_[next_] & 31);
  }
  absl::Status AcceptToken(int32_t token) override {
    if (next_ >= script_.size() || token != script_[next_]) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected token ", token));
    }
    ++next_;
    return absl::OkStatus();
  }
  bool IsTerminated() const override { return next_ == script_.size(); }

 private:
  const std::vector<int32_t> script_;
  std::atomic<int>* const fills_;
  size_t next_ = 0;
};

// Allows nothing.
class AllowNothing : public TokenConstraint {
 public:
  void FillNextTokenMask(uint32_t*, int32_t) override {}
  absl::Status AcceptToken(int32_t) override { return absl::OkStatus(); }
  bool IsTerminated() const override { return false; }
};

const ModelWeights& Weights() {
  static const ModelWeights* weights =
      LoadRandomModel("token_constraint", TinyModelConfig()).release();
  return *weights;
}

std::unique_ptr<CpuExecutor> MakeExecutor(int32_t num_blocks) {
  return MakeTinyCpuExecutor(Weights(), num_blocks, kBlockSize);
}

Request MakeConstrainedRequest(RequestId id, int32_t prompt_len, int32_t max_tokens,
                               SamplingParams sampling = {}) {
  Request request;
  request.id = id;
  for (int i = 0; i < prompt_len; ++i) request.prompt_tokens.push_back((id * 131 + i * 29) % 320);
  request.max_tokens = max_tokens;
  request.sampling = sampling;
  return request;
}

std::vector<int32_t> ScriptFor(RequestId id, int32_t length) {
  std::vector<int32_t> script;
  for (int32_t i = 0; i < length; ++i) script.push_back((id * 37 + i * 101 + 7) % kVocab);
  return script;
}

TEST(TokenConstraintTest, ForcedTokensAreGeneratedAndTheRequestStopsWhenTheScriptEnds) {
  // Twelve requests, half greedy and half sampled, half constrained, on a cache of 40 blocks
  // (160 tokens) for up to 12 x ~60: preemption and recomputation happen.
  std::unique_ptr<CpuExecutor> executor = MakeExecutor(40);
  ASSERT_NE(executor, nullptr);
  std::vector<Request> requests;
  std::map<RequestId, std::vector<int32_t>> scripts;
  for (RequestId id = 1; id <= 12; ++id) {
    SamplingParams sampling;
    if (id % 3 == 0) sampling = {0.9f, 40, 0.95f, static_cast<uint64_t>(id), 0};
    Request request = MakeConstrainedRequest(id, 3 + (id * 17) % 40, 40, sampling);
    if (id % 2 == 0) {
      scripts[id] = ScriptFor(id, 8 + (id * 5) % 17);
      request.constraint =
          std::make_shared<TokenMask>(std::make_unique<ScriptedConstraint>(scripts[id]), kVocab);
    }
    requests.push_back(std::move(request));
  }
  Served served = Serve(*executor, requests);
  ASSERT_EQ(served.finals.size(), 12u);
  for (RequestId id = 1; id <= 12; ++id) {
    const Event& final_event = served.finals.at(id);
    EXPECT_TRUE(final_event.status.ok()) << id << ": " << final_event.status;
    if (scripts.contains(id)) {
      EXPECT_EQ(served.tokens[id], scripts[id]) << "request " << id;
      EXPECT_EQ(final_event.outcome, Outcome::kCompleteStop) << id;
    } else {
      EXPECT_EQ(served.tokens[id].size(), 40u) << id;
      EXPECT_EQ(final_event.outcome, Outcome::kCompleteLength) << id;
    }
  }
  EXPECT_GT(served.preemptions, 0);
}

TEST(TokenConstraintTest, AConstraintAllowingEverythingGivesTheTokensOfNone) {
  std::unique_ptr<CpuExecutor> executor = MakeExecutor(512);
  ASSERT_NE(executor, nullptr);
  std::vector<Request> free, allow_all;
  for (RequestId id = 1; id <= 8; ++id) {
    SamplingParams sampling;
    if (id % 2 == 0) sampling = {1.0f, 0, 1.0f, static_cast<uint64_t>(100 + id), 0};
    free.push_back(MakeConstrainedRequest(id, 5 + id * 3, 12, sampling));
    Request constrained = free.back();
    constrained.constraint = std::make_shared<TokenMask>(std::make_unique<AllowAll>(), kVocab);
    allow_all.push_back(std::move(constrained));
  }
  const Served a = Serve(*executor, free);
  const Served b = Serve(*executor, allow_all);
  for (RequestId id = 1; id <= 8; ++id) {
    EXPECT_EQ(a.tokens.at(id), b.tokens.at(id)) << id;
    EXPECT_EQ(a.logprobs.at(id), b.logprobs.at(id)) << id;
    EXPECT_EQ(b.finals.at(id).outcome, Outcome::kCompleteLength) << id;
  }
}

TEST(TokenConstraintTest, AConstraintAllowingNothingFailsOnlyItsRequest) {
  std::unique_ptr<CpuExecutor> executor = MakeExecutor(512);
  ASSERT_NE(executor, nullptr);
  std::vector<Request> requests;
  requests.push_back(MakeConstrainedRequest(1, 6, 10));
  requests.push_back(MakeConstrainedRequest(2, 6, 10));
  requests[1].constraint = std::make_shared<TokenMask>(std::make_unique<AllowNothing>(), kVocab);
  requests.push_back(MakeConstrainedRequest(3, 9, 10));
  Served served = Serve(*executor, requests);
  EXPECT_OK(served.finals.at(1).status);
  EXPECT_OK(served.finals.at(3).status);
  EXPECT_EQ(served.tokens.at(1).size(), 10u);
  EXPECT_EQ(served.finals.at(2).outcome, Outcome::kFailed);
  EXPECT_THAT(served.finals.at(2).status.message(), HasSubstr("constraint allows no token"));
  EXPECT_FALSE(served.tokens.contains(2));
}

TEST(TokenConstraintTest, AConstraintOfTheWrongVocabularyIsRefusedForItsRowOnly) {
  std::unique_ptr<CpuExecutor> executor = MakeExecutor(512);
  ASSERT_NE(executor, nullptr);
  std::vector<Request> requests;
  requests.push_back(MakeConstrainedRequest(1, 6, 4));
  requests.push_back(MakeConstrainedRequest(2, 6, 4));
  requests[1].constraint = std::make_shared<TokenMask>(std::make_unique<AllowAll>(), kVocab + 1);
  Served served = Serve(*executor, requests);
  EXPECT_OK(served.finals.at(1).status);
  EXPECT_THAT(served.finals.at(2).status, StatusIs(absl::StatusCode::kInvalidArgument,
                                                   HasSubstr("allowed_tokens covers 321 tokens")));
}

TEST(TokenMaskTest, TheMaskIsComputedOncePerPositionWhoeverAsksFirst) {
  std::atomic<int> fills{0};
  const std::vector<int32_t> script = {5, 70, 300, 31, 32};
  TokenMask mask(std::make_unique<ScriptedConstraint>(script, &fills), kVocab);
  for (size_t position = 0; position < script.size(); ++position) {
    // A prefetching thread and several samplers at once: one computation, one answer.
    std::vector<std::thread> threads;
    std::atomic<int> right{0};
    threads.emplace_back([&] { mask.Prefetch(); });
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        const uint32_t* bits = mask.Get();
        int allowed = 0;
        for (int32_t i = 0; i < kVocab; ++i) allowed += TokenAllowed(bits, i) ? 1 : 0;
        if (allowed == 1 && TokenAllowed(bits, script[position])) right.fetch_add(1);
      });
    }
    for (std::thread& thread : threads) thread.join();
    EXPECT_EQ(right.load(), 4) << position;
    EXPECT_EQ(fills.load(), static_cast<int>(position) + 1);
    EXPECT_FALSE(mask.terminated());
    ASSERT_OK(mask.Accept(script[position]));
  }
  EXPECT_TRUE(mask.terminated());
}

TEST(TokenMaskTest, AcceptingATokenTheMaskRefusedIsAnError) {
  TokenMask mask(std::make_unique<ScriptedConstraint>(std::vector<int32_t>{9}), kVocab);
  mask.Get();
  EXPECT_THAT(mask.Accept(10), StatusIs(absl::StatusCode::kInternal,
                                        HasSubstr("the request's constraint did not allow it")));
}

}  // namespace
}  // namespace convoy::testing
