// The executor states what one step may hold (ExecutorLimits); the engine reconciles that with the
// scheduler's options at start and at every reload. With a fake executor smaller than some shipped
// configs ask for, each shipped config either runs with no step beyond the limits or is refused at
// start naming the field.
#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "config/server_config.h"
#include "engine/engine_loop.h"
#include "fake_executor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "harness.h"
#include "scheduler/scheduler_options.h"
#include "status_matchers.h"
#include "test_paths.h"

namespace convoy::testing {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

constexpr absl::Duration kLiveness = absl::Minutes(1);

class Finals {
 public:
  EngineLoop::EventCallback Callback() {
    return [this](const Event& event) {
      if (event.kind == Event::Kind::kToken) return;
      absl::MutexLock lock(&mu_);
      outcomes_[event.request_id].push_back(event.outcome);
    };
  }
  bool WaitFor(size_t n) {
    absl::MutexLock lock(&mu_);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return outcomes_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&done), kLiveness);
  }
  std::map<RequestId, std::vector<Outcome>> outcomes() {
    absl::MutexLock lock(&mu_);
    return outcomes_;
  }

 private:
  absl::Mutex mu_;
  std::map<RequestId, std::vector<Outcome>> outcomes_ ABSL_GUARDED_BY(mu_);
};

ExecutorLimits SmallLimits(bool computes_padding) {
  ExecutorLimits limits;
  limits.max_rows_per_step = 64;
  limits.max_tokens_per_step = 2048;
  limits.computes_padding = computes_padding;
  return limits;
}

class ShippedConfigLimitsTest : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(ShippedConfigLimitsTest, RunsWithinTheExecutorsLimitsOrIsRefusedNamingTheField) {
  const auto& [name, computes_padding] = GetParam();
  absl::StatusOr<v1::ServerConfig> config = LoadServerConfig(TestSourceDir() + "/configs/" + name);
  ASSERT_OK(config);
  EngineLoopOptions options;
  options.scheduler = SchedulerOptionsFromConfig(*config);
  FakeExecutor executor(/*num_blocks=*/4096, options.scheduler.block_size);
  const ExecutorLimits limits = SmallLimits(computes_padding);
  executor.set_limits(limits);

  absl::StatusOr<std::unique_ptr<EngineLoop>> loop = EngineLoop::Create(&executor, options);
  const bool too_many_rows = options.scheduler.max_batch_size > limits.max_rows_per_step;
  const bool too_many_tokens =
      options.scheduler.max_num_batched_tokens > limits.max_tokens_per_step;
  if (too_many_rows || too_many_tokens) {
    EXPECT_THAT(loop.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                        AnyOf(HasSubstr("scheduler.max_batch_size is "),
                                              HasSubstr("scheduler.max_num_batched_tokens is "))));
    return;
  }
  ASSERT_OK(loop);

  // Long prompts (chunked), short ones and many at once: steps as full as the config allows.
  Finals finals;
  constexpr int kRequests = 96;
  constexpr int kWave = 32;  // under every shipped queue bound
  for (int i = 0; i < kRequests; ++i) {
    const int prompt = i % 4 == 0 ? 700 + 13 * i : 1 + (i * 37) % 90;
    ASSERT_OK((*loop)->Submit(MakeRequest(i + 1, prompt, 1 + i % 12), finals.Callback()));
    if ((i + 1) % kWave == 0) {
      ASSERT_TRUE(finals.WaitFor(i + 1));
    }
  }
  ASSERT_TRUE(finals.WaitFor(kRequests));
  (*loop)->Shutdown(/*drain=*/true);
  for (const auto& [id, outcomes] : finals.outcomes()) {
    ASSERT_EQ(outcomes.size(), 1u) << "request " << id;
    EXPECT_EQ(outcomes[0], Outcome::kCompleteLength) << "request " << id;
  }
  EXPECT_EQ(executor.steps_beyond_limits(), 0);
  EXPECT_FALSE(executor.plans().empty());
}

INSTANTIATE_TEST_SUITE_P(ShippedConfigs, ShippedConfigLimitsTest,
                         ::testing::Combine(::testing::Values("default.pbtxt", "latency.pbtxt",
                                                              "throughput.pbtxt", "mixed.pbtxt",
                                                              "static.pbtxt", "docker.pbtxt"),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           std::string name = std::get<0>(info.param);
                           name = name.substr(0, name.find('.'));
                           return name + (std::get<1>(info.param) ? "Padded" : "Packed");
                         });

TEST(ExecutorLimitsTest, ARefusalNamesTheFieldAndTheLimit) {
  FakeExecutor executor(256, 4);
  ExecutorLimits limits;
  limits.max_rows_per_step = 8;
  limits.max_tokens_per_step = 512;
  executor.set_limits(limits);
  EngineLoopOptions options;
  options.scheduler = TestOptions();  // 8 rows, 1,024 tokens
  EXPECT_THAT(EngineLoop::Create(&executor, options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("scheduler.max_num_batched_tokens is 1024; the executor runs at "
                                 "most 512 tokens a step")));
  options.scheduler.max_batch_size = 9;
  EXPECT_THAT(EngineLoop::Create(&executor, options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("scheduler.max_batch_size is 9; the executor runs at most 8 "
                                 "sequences a step")));
}

TEST(ExecutorLimitsTest, AReloadBeyondTheLimitsIsRefusedAndTheOldOptionsKept) {
  FakeExecutor executor(256, 4);
  ExecutorLimits limits;
  limits.max_rows_per_step = 8;
  executor.set_limits(limits);
  EngineLoopOptions options;
  options.scheduler = TestOptions();
  absl::StatusOr<std::unique_ptr<EngineLoop>> loop = EngineLoop::Create(&executor, options);
  ASSERT_OK(loop);
  SchedulerOptions bigger = options.scheduler;
  bigger.max_batch_size = 16;
  EXPECT_THAT((*loop)->Reconfigure(bigger),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("scheduler.max_batch_size")));
  EXPECT_EQ((*loop)->options().max_batch_size, 8);
}

TEST(ExecutorLimitsTest, WhetherPaddingCountsComesFromTheExecutor) {
  for (bool computes_padding : {true, false}) {
    FakeExecutor executor(256, 4);
    ExecutorLimits limits;
    limits.computes_padding = computes_padding;
    executor.set_limits(limits);
    EngineLoopOptions options;
    options.scheduler = TestOptions();
    options.scheduler.budget_counts_padding = !computes_padding;  // the executor decides
    absl::StatusOr<std::unique_ptr<EngineLoop>> loop = EngineLoop::Create(&executor, options);
    ASSERT_OK(loop);
    EXPECT_EQ((*loop)->options().budget_counts_padding, computes_padding);
  }
}

}  // namespace
}  // namespace convoy::testing
