// Reports (table, frontier, JSON, CSV, SVG) and server-config overrides for sweeps.
#include "bench/loadgen/report.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "bench/loadgen/config_override.h"
#include "bench/loadgen/svg_plot.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

namespace convoy::bench {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

RunResult MakeRun(const std::string& config, double goodput, double tokens_per_s, double ttft_p50) {
  RunResult r;
  r.config = config;
  r.offered_rps = 4;
  r.elapsed_s = 10;
  ClassStats all;
  all.name = "all";
  all.sent = 10;
  all.completed = 10;
  all.met_slo = static_cast<int64_t>(goodput * 10);
  all.goodput_rps = goodput;
  all.output_tokens_per_s = tokens_per_s;
  all.requests_per_s = 1;
  all.ttft_s = {10, ttft_p50, ttft_p50, ttft_p50 * 2, ttft_p50 * 3, ttft_p50 * 3};
  all.itl_s = {100, 0.01, 0.01, 0.02, 0.03, 0.04};
  all.e2e_s = {10, 1, 1, 2, 3, 3};
  r.classes = {all};
  return r;
}

TEST(ReportTest, BestGoodputSkipsFailuresAndBreaksTiesOnThroughput) {
  RunResult failed = MakeRun("broken", 99, 99, 0.1);
  failed.error = "convoyd exited";
  const std::vector<RunResult> runs = {MakeRun("a", 0.5, 100, 0.1), failed,
                                       MakeRun("b", 0.8, 90, 0.2), MakeRun("c", 0.8, 120, 0.3)};
  EXPECT_EQ(BestGoodput(runs), 3);
  EXPECT_EQ(BestGoodput({failed}), -1);
  const std::string table = FormatFrontierTable(runs);
  EXPECT_THAT(table, HasSubstr("* c"));
  EXPECT_THAT(table, HasSubstr("failed: convoyd exited"));
  EXPECT_THAT(table, HasSubstr("best goodput: c"));
  EXPECT_THAT(FormatFrontierMarkdown(runs), HasSubstr("| **c** (best) | 4/s |"));
}

TEST(ReportTest, JsonAndCsv) {
  const std::vector<RunResult> runs = {MakeRun("mode=STATIC", 0.5, 100, 0.1),
                                       MakeRun("mode=CONTINUOUS", 0.9, 300, 0.05)};
  const nlohmann::json j = SweepToJson(runs);
  EXPECT_EQ(j["best"], 1);
  EXPECT_EQ(j["runs"][0]["config"], "mode=STATIC");
  EXPECT_DOUBLE_EQ(j["runs"][1]["classes"][0]["ttft_s"]["p50"].get<double>(), 0.05);
  const std::vector<std::string> lines = absl::StrSplit(FormatCsv(runs), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_THAT(lines[0], HasSubstr("config,offered_rps,concurrency,class"));
  EXPECT_THAT(lines[1], HasSubstr("mode=STATIC,4,0,all,10,10,0,5,1,100,0.5,100,200,300"));
  // The header and every row have the same number of fields.
  for (const std::string& line : lines) {
    EXPECT_EQ(std::count(line.begin(), line.end(), ','), 20) << line;
  }
}

TEST(ReportTest, ClassTableHasEveryClass) {
  RunResult r = MakeRun("base", 1, 10, 0.1);
  ClassStats chat = r.classes[0];
  chat.name = "chat";
  r.classes.insert(r.classes.begin(), chat);
  const std::string table = FormatClassTable(r);
  EXPECT_THAT(table, HasSubstr("\nchat "));
  EXPECT_THAT(table, HasSubstr("\nall "));
  EXPECT_THAT(table, HasSubstr("100.0/200.0/300.0"));  // TTFT p50/p95/p99 in ms
}

// Seed 002's figures: error rate, cold start, memory and cost per 1,000 requests, in the table and
// the JSON; what was not measured is left out of the table and null in the JSON.
TEST(ReportTest, ErrorRateColdStartMemoryAndCost) {
  RunResult r = MakeRun("base", 1, 10, 0.1);
  r.classes[0].sent = 20;
  r.classes[0].failed = 5;
  r.classes[0].completed = 15;
  r.elapsed_s = 36;
  EXPECT_DOUBLE_EQ(ErrorRate(r.classes[0]), 0.25);
  EXPECT_DOUBLE_EQ(ErrorRate(ClassStats()), 0);

  const std::string bare = FormatClassTable(r);
  EXPECT_THAT(bare, HasSubstr(" 25.0\n"));  // err%
  EXPECT_THAT(bare, Not(HasSubstr("server:")));
  nlohmann::json j = RunToJson(r);
  EXPECT_TRUE(j["cold_start_s"].is_null());
  EXPECT_TRUE(j["cost_per_1000_requests"].is_null());
  EXPECT_TRUE(j["server_memory"]["peak_resident_bytes"].is_null());
  EXPECT_DOUBLE_EQ(j["classes"][0]["error_rate"].get<double>(), 0.25);

  // 36 s of a machine at 2.5 per hour is 0.025; over 15 requests, 1,000 cost 1.6667.
  r.price_per_hour = 2.5;
  EXPECT_NEAR(CostPer1000Requests(r), 0.025 / 15 * 1000, 1e-12);
  r.cold_start_s = ColdStartSeconds(absl::FromUnixSeconds(100), absl::FromUnixMillis(103250));
  EXPECT_DOUBLE_EQ(r.cold_start_s, 3.25);
  r.memory.Add({.resident_bytes = 512 * 1048576.0, .kv_usage = 0.25, .kv_blocks_used = 256});
  r.memory.Add({.resident_bytes = 500 * 1048576.0, .kv_usage = 0.5, .kv_blocks_used = 512});
  const std::string table = FormatClassTable(r);
  EXPECT_THAT(table, HasSubstr("cold start 3.25 s"));
  EXPECT_THAT(table, HasSubstr("peak RSS 512 MiB"));
  EXPECT_THAT(table, HasSubstr("peak KV 50.0% (512 blocks)"));
  EXPECT_THAT(table, HasSubstr("1.667 per 1,000 requests at 2.5/hour"));
  j = RunToJson(r);
  EXPECT_DOUBLE_EQ(j["cold_start_s"].get<double>(), 3.25);
  EXPECT_EQ(j["server_memory"]["samples"], 2);
  EXPECT_DOUBLE_EQ(j["server_memory"]["peak_resident_bytes"].get<double>(), 512 * 1048576.0);
  EXPECT_DOUBLE_EQ(j["server_memory"]["peak_kv_usage"].get<double>(), 0.5);
  EXPECT_NEAR(j["cost_per_1000_requests"].get<double>(), 0.025 / 15 * 1000, 1e-12);

  // Nothing answered: no cold start; nothing completed: no cost.
  EXPECT_EQ(ColdStartSeconds(absl::Now(), absl::InfiniteFuture()), -1);
  r.classes[0].completed = 0;
  EXPECT_TRUE(std::isnan(CostPer1000Requests(r)));
}

TEST(SvgTest, OneSeriesPerConfig) {
  const std::vector<RunResult> runs = {MakeRun("x<1>", 1, 100, 0.1), MakeRun("x<1>", 1, 200, 0.2),
                                       MakeRun("y", 1, 150, 0.05)};
  const std::string svg = LatencyThroughputSvg(runs, "title");
  EXPECT_THAT(svg, HasSubstr("<svg"));
  EXPECT_THAT(svg, HasSubstr("</svg>"));
  EXPECT_THAT(svg, HasSubstr("x&lt;1&gt;"));
  // Two panels x two percentiles x two series.
  size_t lines = 0;
  for (size_t at = svg.find("<polyline"); at != std::string::npos;
       at = svg.find("<polyline", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 8u);
}

TEST(ConfigOverrideTest, ParsesAxesAndTheirProduct) {
  absl::StatusOr<SweepAxis> mode = ParseSweepAxis("mode=STATIC,CONTINUOUS");
  ASSERT_OK(mode);
  EXPECT_EQ(mode->key, "mode");
  EXPECT_EQ(mode->values, (std::vector<std::string>{"STATIC", "CONTINUOUS"}));
  absl::StatusOr<SweepAxis> batch = ParseSweepAxis("max_batch_size=1,8,32");
  ASSERT_OK(batch);
  const auto combos = CartesianProduct({*mode, *batch});
  ASSERT_EQ(combos.size(), 6u);
  EXPECT_EQ(OverrideLabel(combos[0]), "mode=STATIC max_batch_size=1");
  EXPECT_EQ(OverrideLabel(combos[5]), "mode=CONTINUOUS max_batch_size=32");
  EXPECT_EQ(CartesianProduct({}).size(), 1u);
  EXPECT_EQ(OverrideLabel({}), "base");

  EXPECT_THAT(ParseSweepAxis("max_batch_size"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expected key=value")));
  EXPECT_THAT(ParseSweepAxis("no_such_knob=1"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown config field")));
  EXPECT_THAT(ParseSweepAxis("batch=1,,2"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty value")));
}

TEST(ConfigOverrideTest, AppliesToTheBaseConfig) {
  absl::StatusOr<convoy::v1::ServerConfig> config = ParseServerConfigText(
      "scheduler { mode: CONTINUOUS max_batch_size: 32 }\nkv_cache { block_size: 16 }\n", "base");
  ASSERT_OK(config);
  ASSERT_OK(ApplyOverride({"mode", "STATIC"}, &*config));
  ASSERT_OK(ApplyOverride({"batch", "8"}, &*config));
  ASSERT_OK(ApplyOverride({"token_budget", "4096"}, &*config));
  ASSERT_OK(ApplyOverride({"chunk_size", "128"}, &*config));
  ASSERT_OK(ApplyOverride({"max_queue_delay_microseconds", "5000"}, &*config));
  ASSERT_OK(ApplyOverride({"kv_cache.block_size", "32"}, &*config));
  EXPECT_EQ(config->scheduler().mode(), convoy::v1::SchedulerConfig::STATIC);
  EXPECT_EQ(config->scheduler().max_batch_size(), 8u);
  EXPECT_EQ(config->scheduler().max_num_batched_tokens(), 4096u);
  EXPECT_EQ(config->scheduler().prefill_chunk_size(), 128u);
  EXPECT_EQ(config->scheduler().max_queue_delay_microseconds(), 5000u);
  EXPECT_EQ(config->kv_cache().block_size(), 32u);

  EXPECT_THAT(ApplyOverride({"mode", "SOMETIMES"}, &*config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("invalid value 'SOMETIMES'")));
  EXPECT_THAT(ApplyOverride({"max_batch_size", "-1"}, &*config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("invalid value")));
  EXPECT_THAT(ApplyOverride({"scheduler.priority_queue_policy", "1"}, &*config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a single value")));
  EXPECT_THAT(ParseServerConfigText("scheduler { bogus: 1 }", "cfg.pbtxt"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cfg.pbtxt:1:")));
}

}  // namespace
}  // namespace convoy::bench
