// With the CPU executor: a request's greedy tokens are the same whatever shares its steps, under
// every shipped config, including after preemption and recomputation. The reference is each
// request run alone with a cache large enough never to preempt.
#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "executor/cpu/cpu_executor.h"
#include "gtest/gtest.h"
#include "harness.h"
#include "model/model_weights.h"
#include "model/random_model.h"
#include "scheduler/server_config.h"
#include "status_matchers.h"
#include "test_models.h"

namespace convoy::testing {
namespace {

constexpr int32_t kBlockSize = 4;

const ModelWeights& Weights() {
  static const ModelWeights* weights = [] {
    const std::string dir =
        ::testing::TempDir() + "/convoy_sched_parity_" + std::to_string(::getpid());
    RandomModelOptions options;
    options.config = TinyModelConfig();
    options.seed = 5;
    options.dtype = DType::kF32;
    absl::Status written = WriteRandomModel(dir, options);
    EXPECT_TRUE(written.ok()) << written;
    auto loaded = ModelWeights::Load(dir);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return loaded.ok() ? loaded->release() : nullptr;
  }();
  return *weights;
}

std::unique_ptr<CpuExecutor> MakeExecutor(int32_t num_blocks) {
  CpuExecutorOptions options;
  options.num_threads = 2;
  options.block_size = kBlockSize;
  options.weight_format = CpuWeightFormat::kF32;
  const ModelConfig& c = TinyModelConfig();
  options.kv_cache_bytes = int64_t{num_blocks} * 2 * c.num_hidden_layers * c.num_key_value_heads *
                           c.head_dim * kBlockSize * static_cast<int64_t>(sizeof(float));
  auto executor = CpuExecutor::Create(Weights(), options);
  EXPECT_TRUE(executor.ok()) << executor.status();
  return executor.ok() ? std::move(executor).value() : nullptr;
}

struct RunResult {
  std::map<RequestId, std::vector<int32_t>> tokens;
  int64_t preemptions = 0;
  int64_t steps = 0;
};

// Runs `requests` to completion on a fake clock (1 ms per step: no timeouts fire).
RunResult RunAll(Executor& executor, SchedulerOptions options,
                 const std::vector<Request>& requests) {
  options.block_size = executor.kv_spec().block_size;
  options.num_blocks = executor.kv_spec().num_blocks;
  RunResult run;
  auto scheduler = Scheduler::Create(options);
  EXPECT_OK(scheduler);
  if (!scheduler.ok()) return run;
  Scheduler& s = **scheduler;
  absl::Time now = absl::UnixEpoch();
  for (const Request& request : requests) EXPECT_OK(s.Submit(request, now));
  while (!s.empty()) {
    ScheduleDecision decision = s.Schedule(now);
    if (!decision.plan) {
      now = decision.wake_at.value_or(now + absl::Milliseconds(1));
      continue;
    }
    absl::StatusOr<StepResult> result = executor.Step(*decision.plan);
    EXPECT_OK(result);
    if (!result.ok()) return run;
    EXPECT_OK(s.OnStepResult(*result, now));
    for (const Event& event : s.TakeEvents()) {
      if (event.kind == Event::Kind::kToken) {
        run.tokens[event.request_id].push_back(event.token);
      } else {
        EXPECT_TRUE(event.outcome == Outcome::kCompleteLength) << OutcomeName(event.outcome);
      }
    }
    now += absl::Milliseconds(1);
    ++run.steps;
  }
  run.preemptions = s.stats().preemptions;
  EXPECT_EQ(s.allocator().num_free(), options.num_blocks);
  return run;
}

std::vector<Request> Requests() {
  std::vector<Request> requests;
  for (int id = 1; id <= 12; ++id) {
    Request request;
    request.id = id;
    for (int i = 0; i < 3 + (id * 17) % 58; ++i) {
      request.prompt_tokens.push_back((id * 131 + i * 29) % 320);
    }
    request.max_tokens = 8 + (id * 5) % 17;
    request.priority = 1 + id % 2;
    requests.push_back(std::move(request));
  }
  return requests;
}

// Each request alone, with room for everything.
const std::map<RequestId, std::vector<int32_t>>& Reference() {
  static const auto* reference = [] {
    auto* out = new std::map<RequestId, std::vector<int32_t>>;
    std::unique_ptr<CpuExecutor> executor = MakeExecutor(512);
    SchedulerOptions options;
    options.priority_levels = 2;
    for (const Request& request : Requests()) {
      Request alone = request;
      alone.priority = 0;
      (*out)[request.id] = RunAll(*executor, options, {alone}).tokens[request.id];
    }
    return out;
  }();
  return *reference;
}

class CpuParityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CpuParityTest, GreedyTokensDoNotDependOnTheBatch) {
  absl::StatusOr<v1::ServerConfig> config =
      LoadServerConfig(std::string(CONVOY_SOURCE_DIR) + "/configs/" + GetParam());
  ASSERT_OK(config);
  SchedulerOptions options = SchedulerOptionsFromConfig(*config);
  if (options.priority_levels < 2) {
    // Priorities beyond the config's levels fold into its default level.
    options.priority_levels = 2;
    options.default_priority_level = 2;
    options.queue_policies.clear();
  }
  // A cache of 40 blocks (160 tokens) for requests needing up to ~90 each: preemption happens.
  std::unique_ptr<CpuExecutor> executor = MakeExecutor(40);
  ASSERT_NE(executor, nullptr);
  const RunResult run = RunAll(*executor, options, Requests());
  const auto& reference = Reference();
  for (const auto& [id, tokens] : reference) {
    ASSERT_FALSE(tokens.empty());
    EXPECT_EQ(run.tokens.at(id), tokens) << "request " << id << " under " << GetParam();
  }
  EXPECT_GT(run.preemptions, 0) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(ShippedConfigs, CpuParityTest,
                         ::testing::Values("default.pbtxt", "latency.pbtxt", "throughput.pbtxt",
                                           "mixed.pbtxt", "static.pbtxt"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param.substr(0, info.param.find('.'));
                         });

}  // namespace
}  // namespace convoy::testing
