// With the CPU executor: a request's greedy tokens are the same whatever shares its steps, under
// every shipped config, including after preemption and recomputation. The reference is each
// request run alone with a cache large enough never to preempt.
#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "config/server_config.h"
#include "executor/cpu/cpu_executor.h"
#include "gtest/gtest.h"
#include "model/model_weights.h"
#include "model/random_model.h"
#include "model/test_dir.h"
#include "parity_harness.h"
#include "status_matchers.h"
#include "test_models.h"
#include "tiny_cpu_executor.h"

namespace convoy::testing {
namespace {

constexpr int32_t kBlockSize = 4;

const ModelWeights& Weights() {
  static const ModelWeights* weights = [] {
    const std::string dir = ProcessDir("convoy_sched_parity");
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
  return MakeTinyCpuExecutor(Weights(), num_blocks, kBlockSize);
}

// Each request alone, with room for everything and no prefix cache.
std::map<RequestId, std::vector<int32_t>> RunAlone(const std::vector<Request>& requests) {
  std::map<RequestId, std::vector<int32_t>> out;
  std::unique_ptr<CpuExecutor> executor = MakeExecutor(512);
  SchedulerOptions options;
  options.priority_levels = 2;
  options.enable_prefix_caching = false;
  for (const Request& request : requests) {
    Request alone = request;
    alone.priority = 0;
    out[request.id] = RunToCompletion(*executor, options, {alone}).tokens[request.id];
  }
  return out;
}

const std::map<RequestId, std::vector<int32_t>>& Reference() {
  static const auto* reference =
      new std::map<RequestId, std::vector<int32_t>>(RunAlone(ParityRequests()));
  return *reference;
}

const std::map<RequestId, std::vector<int32_t>>& SharedPrefixReference() {
  static const auto* reference =
      new std::map<RequestId, std::vector<int32_t>>(RunAlone(SharedPrefixParityRequests()));
  return *reference;
}

class CpuParityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CpuParityTest, GreedyTokensDoNotDependOnTheBatch) {
  const SchedulerOptions options = ShippedSchedulerOptions(GetParam());
  // A cache of 40 blocks (160 tokens) for requests needing up to ~90 each: preemption happens.
  std::unique_ptr<CpuExecutor> executor = MakeExecutor(40);
  ASSERT_NE(executor, nullptr);
  const ParityRun run = RunToCompletion(*executor, options, ParityRequests());
  const auto& reference = Reference();
  for (const auto& [id, tokens] : reference) {
    ASSERT_FALSE(tokens.empty());
    EXPECT_EQ(run.tokens.at(id), tokens) << "request " << id << " under " << GetParam();
  }
  EXPECT_GT(run.preemptions, 0) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(ShippedConfigs, CpuParityTest, ::testing::ValuesIn(ShippedConfigs()),
                         ConfigTestName);

// Prefix caching changes which tokens a step computes, never the tokens a request generates:
// requests sharing long prefixes, arriving a few steps apart, under every shipped config, with the
// cache off and on; on, also with a KV cache so small that cached prefixes are evicted part-way
// and running sequences preempted (their blocks then cached and reused when they resume), and
// with prompts prefilled in chunks of 8 tokens.
enum class CacheCase { kOff, kOn, kOnTinyBudget, kOnChunked };

class PrefixCacheParityTest : public ::testing::TestWithParam<std::tuple<std::string, CacheCase>> {
};

TEST_P(PrefixCacheParityTest, GreedyTokensAreTheSameWithAndWithoutTheCache) {
  const auto& [config, cache_case] = GetParam();
  SchedulerOptions options = ShippedSchedulerOptions(config);
  options.enable_prefix_caching = cache_case != CacheCase::kOff;
  if (cache_case == CacheCase::kOnChunked) options.prefill_chunk_size = 8;
  // 22 blocks (88 tokens) for requests of up to 75 tokens: evictions and preemptions.
  std::unique_ptr<CpuExecutor> executor =
      MakeExecutor(cache_case == CacheCase::kOnTinyBudget ? 22 : 64);
  ASSERT_NE(executor, nullptr);
  const ParityRun run = RunToCompletion(*executor, options, SharedPrefixParityRequests(),
                                        /*steps_between_arrivals=*/3);
  for (const auto& [id, tokens] : SharedPrefixReference()) {
    ASSERT_FALSE(tokens.empty());
    EXPECT_EQ(run.tokens.at(id), tokens) << "request " << id << " under " << config;
  }
  if (cache_case == CacheCase::kOff) {
    EXPECT_EQ(run.prefix_cache_hits, 0);
  } else {
    EXPECT_GT(run.prefix_cache_hits, 0) << config;
  }
  if (cache_case == CacheCase::kOnTinyBudget) {
    EXPECT_GT(run.prefix_cache_evictions, 0) << config;
    EXPECT_GT(run.preemptions, 0) << config;
  }
}

std::string CacheCaseTestName(
    const ::testing::TestParamInfo<std::tuple<std::string, CacheCase>>& info) {
  const std::string& config = std::get<0>(info.param);
  static constexpr const char* kNames[] = {"CacheOff", "CacheOn", "CacheOnTinyBudget",
                                           "CacheOnChunked"};
  return config.substr(0, config.find('.')) + "_" +
         kNames[static_cast<int>(std::get<1>(info.param))];
}

INSTANTIATE_TEST_SUITE_P(ShippedConfigs, PrefixCacheParityTest,
                         ::testing::Combine(::testing::ValuesIn(ShippedConfigs()),
                                            ::testing::Values(CacheCase::kOff, CacheCase::kOn,
                                                              CacheCase::kOnTinyBudget,
                                                              CacheCase::kOnChunked)),
                         CacheCaseTestName);

}  // namespace
}  // namespace convoy::testing
