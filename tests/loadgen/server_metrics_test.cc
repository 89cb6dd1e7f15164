// Reading the server's memory and reload counters out of a /metrics exposition.
#include "bench/loadgen/server_metrics.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

namespace convoy::bench {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::_;
using ::testing::HasSubstr;

constexpr char kExposition[] = R"(# HELP process_resident_memory_bytes Resident memory.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 123456789
convoy_kv_cache_usage_perc 0.375
convoy_kv_cache_blocks_used 48 1700000000000
convoy_config_reloads_total{result="applied"} 3
convoy_config_reloads_total{result="refused"} 1
convoy_num_requests_waiting_by_priority{priority="1"} 0
broken_value nan-ish
)";

TEST(ServerMetricsTest, FindsASeriesByNameAndLabels) {
  ASSERT_OK(FindSample(kExposition, R"(convoy_config_reloads_total{result="applied"})"));
  EXPECT_EQ(*FindSample(kExposition, R"(convoy_config_reloads_total{result="applied"})"), 3);
  EXPECT_EQ(*FindSample(kExposition, R"(convoy_config_reloads_total{result="refused"})"), 1);
  // A timestamp after the value is ignored.
  EXPECT_EQ(*FindSample(kExposition, "convoy_kv_cache_blocks_used"), 48);
  // A name is not a prefix of a longer one.
  EXPECT_THAT(FindSample(kExposition, "convoy_kv_cache"), StatusIs(absl::StatusCode::kNotFound, _));
  EXPECT_THAT(FindSample(kExposition, "convoy_config_reloads_total"),
              StatusIs(absl::StatusCode::kNotFound, _));
  EXPECT_THAT(FindSample(kExposition, "broken_value"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("broken_value")));
}

TEST(ServerMetricsTest, ParsesMemoryAndKeepsPeaks) {
  const ServerMetricsSample sample = ParseServerMetrics(kExposition);
  EXPECT_EQ(sample.resident_bytes, 123456789);
  EXPECT_EQ(sample.kv_usage, 0.375);
  EXPECT_EQ(sample.kv_blocks_used, 48);
  const ServerMetricsSample missing = ParseServerMetrics("other_metric 1\n");
  EXPECT_EQ(missing.resident_bytes, -1);
  EXPECT_EQ(missing.kv_usage, -1);

  ServerMemory memory;
  memory.Add(sample);
  memory.Add({.resident_bytes = 200000000, .kv_usage = 0.125, .kv_blocks_used = 16});
  memory.Add(missing);
  EXPECT_EQ(memory.samples, 3);
  EXPECT_EQ(memory.peak_resident_bytes, 200000000);
  EXPECT_EQ(memory.peak_kv_usage, 0.375);
  EXPECT_EQ(memory.peak_kv_blocks_used, 48);
}

}  // namespace
}  // namespace convoy::bench
