// Live reload, the scheduler's half: Scheduler::Reconfigure between steps (knobs in force at once,
// held requests kept, the running batch trimmed to a smaller max_batch_size), and the config's
// half: which changed fields a reload may apply (FieldsNeedingRestart).
#include <string>
#include <vector>

#include "config/config_reload.h"
#include "config/server_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "harness.h"

namespace convoy::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

TEST(ReconfigureTest, ASmallerBatchSizeTrimsTheRunningBatchAndKeepsEveryRequest) {
  SchedulerOptions options = TestOptions();
  options.max_batch_size = 6;
  Harness h(options);
  for (RequestId id = 1; id <= 10; ++id) ASSERT_OK(h.Submit(MakeRequest(id, 4, 6)));
  ASSERT_TRUE(h.Step());
  EXPECT_EQ(h.last_plan().rows.size(), 6u);
  EXPECT_EQ(h.scheduler->stats().largest_step_rows_since_reconfigure, 6);

  options.max_batch_size = 2;
  options.max_queue_delay = absl::Hours(1);
  ASSERT_OK(h.scheduler->Reconfigure(options));
  EXPECT_EQ(h.scheduler->num_running(), 2);
  EXPECT_EQ(h.scheduler->num_waiting(), 8);
  EXPECT_EQ(h.scheduler->stats().preemptions, 4);
  EXPECT_EQ(h.scheduler->stats().largest_step_rows_since_reconfigure, 0);
  EXPECT_OK(h.scheduler->CheckInvariants());
  const size_t before = h.plans().size();
  h.RunUntilIdle();
  for (size_t i = before; i < h.plans().size(); ++i) EXPECT_LE(h.plans()[i].rows.size(), 2u);
  EXPECT_EQ(h.scheduler->stats().largest_step_rows_since_reconfigure, 2);
  for (RequestId id = 1; id <= 10; ++id) {
    EXPECT_EQ(h.Final(id).outcome, Outcome::kCompleteLength) << id;
    EXPECT_EQ(h.tokens[id].size(), 6u) << id;
  }
}

TEST(ReconfigureTest, TheNewQueueDelayHoldsAnIdleEngine) {
  SchedulerOptions options = TestOptions();
  Harness h(options);
  options.max_batch_size = 3;
  options.max_queue_delay = absl::Seconds(10);
  ASSERT_OK(h.scheduler->Reconfigure(options));
  ASSERT_OK(h.Submit(MakeRequest(1, 4, 2)));
  EXPECT_FALSE(h.Step());
  ASSERT_TRUE(h.decision.wake_at.has_value());
  EXPECT_EQ(*h.decision.wake_at, h.clock.Now() + absl::Seconds(10));
  ASSERT_OK(h.Submit(MakeRequest(2, 4, 2)));
  ASSERT_OK(h.Submit(MakeRequest(3, 4, 2)));
  ASSERT_TRUE(h.Step());
  EXPECT_EQ(h.last_plan().rows.size(), 3u);
}

TEST(ReconfigureTest, FixedKnobsAndInvalidKnobsChangeNothing) {
  SchedulerOptions options = TestOptions();
  Harness h(options);
  ASSERT_OK(h.Submit(MakeRequest(1, 4, 2)));
  SchedulerOptions levels = options;
  levels.priority_levels = 2;
  EXPECT_THAT(h.scheduler->Reconfigure(levels),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("priority_levels")));
  SchedulerOptions blocks = options;
  blocks.num_blocks = 8;
  blocks.block_size = 8;
  EXPECT_THAT(h.scheduler->Reconfigure(blocks),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("restart instead): block_size, num_blocks")));
  SchedulerOptions invalid = options;
  invalid.max_batch_size = 0;
  EXPECT_THAT(h.scheduler->Reconfigure(invalid),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("max_batch_size must be at least 1, got 0")));
  EXPECT_EQ(h.scheduler->options().max_batch_size, options.max_batch_size);
  ASSERT_TRUE(h.scheduler->Schedule(h.clock.Now()).plan.has_value());
  EXPECT_THAT(h.scheduler->Reconfigure(options),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("in flight")));
}

v1::ServerConfig Parse(const std::string& text) {
  absl::StatusOr<v1::ServerConfig> config = ParseServerConfig(text, "test.pbtxt");
  EXPECT_OK(config);
  return config.value_or(v1::ServerConfig());
}

TEST(FieldsNeedingRestartTest, BatcherKnobsLimitsAndKeysChangeLive) {
  const v1::ServerConfig current = Parse("");
  const v1::ServerConfig next = Parse(R"pb(
    scheduler {
      max_batch_size: 4
      max_queue_delay_microseconds: 5000
      preferred_batch_size: 2
      max_num_batched_tokens: 512
      prefill_chunk_size: 64
      length_grouping_window: 1
      max_queue_size: 7
      default_timeout_microseconds: 9
      priority_aging_microseconds: 10
      priority_queue_policy { priority_level: 1 max_queue_size: 3 }
    }
    request_defaults { max_tokens: 12 }
    request_limits { max_stop_token_ids: 3 }
    frontend {
      drain_timeout_microseconds: 1
      api_key { name: "a" key: "0123456789abcdef" }
      api_key_file: "keys.pbtxt"
    }
  )pb");
  EXPECT_THAT(FieldsNeedingRestart(current, next), IsEmpty());
}

TEST(FieldsNeedingRestartTest, NamesEveryRestartOnlyFieldThatChanged) {
  const v1::ServerConfig current = Parse("");
  const v1::ServerConfig next = Parse(R"pb(
    scheduler { max_batch_size: 4 priority_levels: 2 }
    kv_cache { memory_budget_bytes: 4096 enable_prefix_caching: false }
    frontend {
      port: 1234
      tls { cert_file: "c.pem" key_file: "k.pem" }
      reflection: true
    }
    metrics { listen_address: "0.0.0.0" }
    model { dir: "other" }
  )pb");
  EXPECT_THAT(FieldsNeedingRestart(current, next),
              ElementsAre("scheduler.priority_levels", "kv_cache.memory_budget_bytes",
                          "kv_cache.enable_prefix_caching", "frontend.port", "frontend.reflection",
                          "frontend.tls", "model", "metrics.listen_address"));
}

TEST(EffectiveConfigTextTest, RedactsKeysAndHashesStably) {
  const v1::ServerConfig config =
      Parse(R"pb(frontend { api_key { name: "ops" key: "very-secret-key-0123" } })pb");
  const std::string text = EffectiveConfigText(config);
  EXPECT_THAT(text, HasSubstr("name: \"ops\""));
  EXPECT_THAT(text, HasSubstr("<redacted>"));
  EXPECT_THAT(text, Not(HasSubstr("very-secret")));
  EXPECT_THAT(text, HasSubstr("listen_address: \"127.0.0.1\""));
  EXPECT_EQ(ConfigHash(text), ConfigHash(text));
  EXPECT_EQ(ConfigHash(text).size(), 16u);
  EXPECT_NE(ConfigHash(text), ConfigHash(EffectiveConfigText(Parse(""))));
  EXPECT_EQ(ConfigHash(""), "cbf29ce484222325");  // FNV-1a's offset basis
}

}  // namespace
}  // namespace convoy::testing
