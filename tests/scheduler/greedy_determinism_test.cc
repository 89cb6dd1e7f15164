// Deterministic greedy decoding as a property of the engine: through the real Scheduler and the
// batch-invariant CpuExecutor, a greedy request's tokens and logprobs are the same bits however
// it is served: cold, with its prompt in the prefix cache, its prompt in chunks of several sizes,
// beside 1, 7 or 31 other requests (arriving at once or during its steps), and preempted and
// recomputed. On the default model (SmolLM2-135M-Instruct, scripts/fetch-default-model.sh; the
// case skips when the file is absent) and on random models.
//
// CONVOY_DETERMINISM_ONEDNN=1 runs the same cases with batch_invariant off (oneDNN's products):
// they are expected to fail, which shows that the test can.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "executor/cpu/cpu_executor.h"
#include "gtest/gtest.h"
#include "model/model_weights.h"
#include "parity_harness.h"
#include "scheduler/scheduler.h"
#include "status_matchers.h"
#include "test_models.h"
#include "test_paths.h"

namespace convoy::testing {
namespace {

constexpr char kDefaultModel[] = "default";
constexpr RequestId kTarget = 1;

struct Output {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
};

// Where the default model is: $CONVOY_MODELS_DIR (relative to the source tree when relative), by
// default models/, as scripts/fetch-default-model.sh puts it.
std::string DefaultModelPath() {
  const char* env = std::getenv("CONVOY_MODELS_DIR");
  std::string dir = env != nullptr && *env != '\0' ? env : "models";
  if (dir.front() != '/') dir = absl::StrCat(TestSourceDir(), "/", dir);
  return absl::StrCat(dir, "/SmolLM2-135M-Instruct.Q4_1.gguf");
}

bool OnOneDnn() {
  const char* env = std::getenv("CONVOY_DETERMINISM_ONEDNN");
  return env != nullptr && std::string(env) == "1";
}

struct Case {
  std::string model;  // kDefaultModel, or a random model's name
  int32_t prompt_length;
  int32_t max_tokens;
  bool skip_padding;  // the executor's: rows packed, or padded to the longest
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.model << ", " << c.prompt_length << " prompt tokens, " << c.max_tokens << " new"
      << (c.skip_padding ? ", padding skipped" : ", padded");
}

class GreedyDeterminismTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const Case& c = GetParam();
    if (c.model == kDefaultModel) {
      const std::string path = DefaultModelPath();
      if (!std::filesystem::exists(path)) {
        GTEST_SKIP() << "the default model is not at " << path
                     << "; scripts/fetch-default-model.sh fetches it";
      }
      auto loaded = ModelWeights::Load(path);
      ASSERT_OK(loaded);
      weights_ = std::move(loaded).value();
    } else {
      const bool small = c.model.rfind("small", 0) == 0;
      const uint64_t seed = std::stoull(c.model.substr(small ? 5 : 4));
      weights_ =
          LoadRandomModel(c.model, small ? SmallGqaConfig() : TinyModelConfig(), DType::kF32, seed);
      ASSERT_NE(weights_, nullptr);
    }
    CpuExecutorOptions options;
    options.block_size = 4;
    options.kv_cache_bytes = int64_t{256} << 20;
    options.batch_invariant = !OnOneDnn();
    options.skip_padding = c.skip_padding;
    auto executor = CpuExecutor::Create(*weights_, options);
    ASSERT_OK(executor);
    executor_ = std::move(executor).value();
    ASSERT_EQ(executor_->batch_invariant(), !OnOneDnn());
    vocab_ = static_cast<int32_t>(weights_->config().vocab_size);
  }

  // A greedy request; ids spread over the vocabulary (below 20,000 on large ones: ordinary
  // subword tokens rather than rare ones).
  Request MakeRequest(RequestId id, int32_t prompt_length, int32_t max_tokens) const {
    const int32_t range = std::min(vocab_, 20000);
    Request r;
    r.id = id;
    for (int32_t i = 0; i < prompt_length; ++i) {
      r.prompt_tokens.push_back(static_cast<int32_t>((id * 7919 + i * 131 + 17) % range));
    }
    r.max_tokens = max_tokens;
    return r;
  }

  Request Target() const {
    return MakeRequest(kTarget, GetParam().prompt_length, GetParam().max_tokens);
  }

  // `count` other requests of 2 to 45 prompt tokens and 2 to 9 new tokens.
  std::vector<Request> Others(int32_t count) const {
    std::vector<Request> others;
    for (int32_t i = 0; i < count; ++i) {
      others.push_back(MakeRequest(100 + i, 2 + (i * 13) % 44, 2 + (i * 5) % 8));
    }
    return others;
  }

  // The target request's output in `run` must be the reference's, bit for bit.
  void ExpectSame(const ParityRun& run, RequestId id, const std::string& condition) {
    ASSERT_TRUE(run.tokens.contains(id)) << condition;
    const Output got{run.tokens.at(id), run.logprobs.at(id)};
    EXPECT_EQ(got.tokens, reference_.tokens) << condition;
    ASSERT_EQ(got.logprobs.size(), reference_.logprobs.size()) << condition;
    for (size_t t = 0; t < got.logprobs.size(); ++t) {
      EXPECT_EQ(std::memcmp(&got.logprobs[t], &reference_.logprobs[t], sizeof(float)), 0)
          << condition << ": token " << t << " logprob " << got.logprobs[t] << " vs "
          << reference_.logprobs[t];
    }
  }

  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<CpuExecutor> executor_;
  int32_t vocab_ = 0;
  Output reference_;
};

TEST_P(GreedyDeterminismTest, SameTokensAndLogprobsHoweverServed) {
  const Request target = Target();
  SchedulerOptions cold;
  cold.enable_prefix_caching = false;
  {
    ParityRun run = RunToCompletion(*executor_, cold, {target}, 0);
    reference_ = {run.tokens[kTarget], run.logprobs[kTarget]};
    ASSERT_EQ(reference_.tokens.size(), static_cast<size_t>(target.max_tokens));
  }

  // The same prompt again: its full blocks from the prefix cache, the tail computed against them.
  {
    SchedulerOptions options;
    Request again = target;
    again.id = 2;
    ParityRun run = RunToCompletion(*executor_, options, {target, again}, 1 << 20);
    EXPECT_GT(run.prefix_cache_hits, 0);
    ExpectSame(run, kTarget, "cold, prefix caching on");
    ExpectSame(run, 2, "prompt cached");
  }

  for (int32_t chunk : {1, 5, 16}) {
    SchedulerOptions options = cold;
    options.max_batch_size = 4;
    options.prefill_chunk_size = chunk;
    options.max_num_batched_tokens = std::max(chunk, options.max_batch_size);
    ExpectSame(RunToCompletion(*executor_, options, {target}, 0), kTarget,
               absl::StrCat("prefill in chunks of ", chunk));
  }

  for (int32_t others : {1, 7, 31}) {
    std::vector<Request> requests = Others(others);
    requests.insert(requests.begin() + others / 2, target);
    for (int64_t arrivals : {0, 2}) {
      SchedulerOptions options;
      options.max_batch_size = 32;
      ExpectSame(RunToCompletion(*executor_, options, requests, arrivals), kTarget,
                 absl::StrCat("beside ", others, " others, arriving ", arrivals, " steps apart"));
    }
  }

  // The target first, on the lower of two priorities, then seven others a step apart in room for
  // about two: as they grow the target is preempted, and its prompt and generated tokens are
  // computed again.
  {
    Request low = target;
    low.priority = 2;
    std::vector<Request> requests = {low};
    for (int32_t i = 0; i < 7; ++i) {
      requests.push_back(MakeRequest(200 + i, 20 + 3 * i, 16));
      requests.back().priority = 1;
    }
    SchedulerOptions options = cold;
    options.priority_levels = 2;
    const int32_t block = executor_->kv_spec().block_size;
    const int32_t tokens = static_cast<int32_t>(target.prompt_tokens.size()) + target.max_tokens;
    const int32_t num_blocks = 2 * ((tokens + block - 1) / block);
    ASSERT_LE(num_blocks, executor_->kv_spec().num_blocks);
    ParityRun run = RunToCompletion(*executor_, options, requests, 1, num_blocks);
    EXPECT_EQ(run.recomputed.count(kTarget), 1u)
        << "the target was not preempted (" << run.preemptions << " preemptions)";
    ExpectSame(run, kTarget, "preempted and recomputed");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, GreedyDeterminismTest,
    ::testing::Values(Case{kDefaultModel, 37, 12, true}, Case{"tiny5", 45, 20, false},
                      Case{"tiny6", 29, 20, true}, Case{"small11", 61, 16, false},
                      Case{"small12", 33, 16, true}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return info.param.model + (info.param.skip_padding ? "_packed" : "_padded");
    });

}  // namespace
}  // namespace convoy::testing
