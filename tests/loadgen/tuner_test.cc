// convoy tune's search against a fake server and a fake clock: it finds the best point of a known
// goodput surface, keeps to its budget, samples a grid too large for it, goes on past a refused
// reload and ends on a config it measured.
#include "bench/loadgen/tuner.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

namespace convoy::bench {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

// A server whose goodput is a known function of max_batch_size and the queue delay, peaked at
// batch 16, delay 2000; each run adds a small deterministic wobble. Every call advances the clock:
// a reload 1 s, a run its seconds plus 1 s of warm-up and drain.
class FakeServer : public TuneTarget {
 public:
  absl::Time now = absl::FromUnixSeconds(1000);
  double run_overhead_s = 1;  // warm-up and drain, beyond a run's seconds
  std::string refuse;         // the label of a point whose reload is refused
  std::string in_force = "original";
  std::vector<std::string> measured;  // the config in force at each run
  std::vector<std::string> applied;

  absl::Status Apply(const std::vector<Override>& point) override {
    now += absl::Seconds(1);
    const std::string label = OverrideLabel(point);
    if (label == refuse) {
      return absl::FailedPreconditionError("config.pbtxt:3: max_batch_size: out of range");
    }
    in_force = label;
    applied.push_back(label);
    batch_ = Value(point, "max_batch_size");
    delay_ = Value(point, "max_queue_delay_microseconds");
    return absl::OkStatus();
  }

  RunResult Measure(double seconds) override {
    now += absl::Seconds(seconds + run_overhead_s);
    measured.push_back(in_force);
    const double wobble = 0.02 * (static_cast<double>(measured.size() * 7 % 5) - 2);
    const double goodput =
        10 - std::abs(std::log2(batch_ / 16)) - std::abs(std::log2(delay_ / 2000)) + wobble;
    RunResult run;
    run.elapsed_s = seconds;
    ClassStats all;
    all.name = "all";
    all.goodput_rps = goodput;
    run.classes = {all};
    return run;
  }

 private:
  static double Value(const std::vector<Override>& point, const std::string& key) {
    for (const Override& o : point) {
      double v = 0;
      if (o.key == key && absl::SimpleAtod(o.value, &v)) return v;
    }
    return 1;
  }
  double batch_ = 1;
  double delay_ = 1;
};

std::vector<std::vector<Override>> Space(const std::vector<std::string>& batches,
                                         const std::vector<std::string>& delays) {
  return CartesianProduct({{"max_batch_size", batches}, {"max_queue_delay_microseconds", delays}});
}

TuneResult RunTune(const std::vector<std::vector<Override>>& space, FakeServer& server,
                   const TuneOptions& options) {
  return Tune(space, server, options, [&server] { return server.now; });
}

TEST(TunerTest, FindsTheBestPointWithinTheBudgetInFewerRunsThanTheGrid) {
  FakeServer server;
  const auto space = Space({"4", "8", "16", "32"}, {"500", "1000", "2000", "4000"});
  TuneOptions options;
  options.budget_s = 900;
  options.min_run_s = 5;
  const absl::Time start = server.now;
  const TuneResult result = RunTune(space, server, options);
  ASSERT_NE(result.best_point(), nullptr);
  EXPECT_EQ(result.best_point()->label, "max_batch_size=16 max_queue_delay_microseconds=2000");
  EXPECT_EQ(result.candidates, 16);
  EXPECT_LE(server.now - start, absl::Seconds(options.budget_s));
  // Halving measures 16 + 8 + 4 + 2 points and then repeats 3 finalists 3 times: 39 runs, the
  // later rungs' longer than a grid of 16 could afford in the same budget.
  EXPECT_EQ(result.runs.size(), 16u + 8 + 4 + 2 + 9);
  EXPECT_EQ(result.best_point()->repeats.size(), 3u);
  EXPECT_GT(result.best_point()->stddev, 0);
  // Rungs never get shorter.
  for (size_t i = 1; i < result.runs.size() && result.runs[i].rung >= 0; ++i) {
    EXPECT_GE(result.runs[i].seconds, result.runs[i - 1].seconds);
  }
  EXPECT_GT(result.runs[16].seconds, result.runs[0].seconds);
  // Every run measured the config applied for it, and the search ended on the best.
  for (size_t i = 0; i < result.runs.size(); ++i) {
    EXPECT_EQ(server.measured[i], result.points[result.runs[i].point].label);
  }
  EXPECT_EQ(server.in_force, result.best_point()->label);
  EXPECT_TRUE(result.final_apply_error.empty());

  const std::string table = FormatTuneTable(result);
  EXPECT_THAT(table,
              HasSubstr("* best: max_batch_size=16 max_queue_delay_microseconds=2000: goodput"));
  EXPECT_THAT(table, HasSubstr("over 3 repeats"));
  const nlohmann::json j = TuneToJson(result);
  EXPECT_EQ(j["best"], "max_batch_size=16 max_queue_delay_microseconds=2000");
  EXPECT_EQ(j["runs"].size(), result.runs.size());
  EXPECT_EQ(j["points"].size(), 16u);
  EXPECT_EQ(FrontierRuns(result).size(), 16u);
}

TEST(TunerTest, ARefusedReloadIsReportedAndTheSearchGoesOn) {
  FakeServer server;
  server.refuse = "max_batch_size=8 max_queue_delay_microseconds=2000";
  const auto space = Space({"8", "16"}, {"1000", "2000"});
  TuneOptions options;
  options.budget_s = 120;
  options.min_run_s = 2;
  const TuneResult result = RunTune(space, server, options);
  ASSERT_NE(result.best_point(), nullptr);
  EXPECT_EQ(result.best_point()->label, "max_batch_size=16 max_queue_delay_microseconds=2000");
  const PointSummary& refused = result.points[1];
  EXPECT_EQ(refused.label, server.refuse);
  EXPECT_FALSE(refused.applied);
  EXPECT_THAT(refused.error, HasSubstr("max_batch_size: out of range"));
  EXPECT_THAT(FormatTuneTable(result), HasSubstr("reload refused: config.pbtxt:3"));
  EXPECT_EQ(TuneToJson(result)["points"][1]["applied"], false);
  // The refused config was never in force, let alone measured.
  for (const std::string& label : server.measured) EXPECT_NE(label, server.refuse);
  EXPECT_EQ(server.in_force, result.best_point()->label);
}

TEST(TunerTest, AGridTooLargeForTheBudgetIsSampledAndTheBudgetKept) {
  FakeServer server;
  std::vector<std::string> batches, delays;
  for (int i = 0; i < 8; ++i) {
    batches.push_back(std::to_string(1 << i));
    delays.push_back(std::to_string(250 << i));
  }
  const auto space = Space(batches, delays);  // 64 points
  TuneOptions options;
  options.budget_s = 100;
  options.min_run_s = 3;
  options.seed = 5;
  const absl::Time start = server.now;
  const TuneResult result = RunTune(space, server, options);
  EXPECT_EQ(result.space_size, 64);
  EXPECT_LT(result.candidates, 64);
  EXPECT_GE(result.candidates, 2);
  EXPECT_LE(server.now - start, absl::Seconds(options.budget_s));
  ASSERT_NE(result.best_point(), nullptr);
  // The best is a point that was measured, and it is in force.
  EXPECT_EQ(server.in_force, result.best_point()->label);
  EXPECT_GE(result.best_point()->deepest_rung, 0);
  // The same seed samples the same candidates.
  FakeServer again;
  const TuneResult repeated = RunTune(space, again, options);
  EXPECT_EQ(again.measured, server.measured);
}

// A sample of a grid holds every value of each knob that has no more values than the sample has
// points, as evenly as it can.
TEST(TunerTest, ASampledGridDrawsEveryValueOfEachKnob) {
  const auto space = CartesianProduct({{"max_batch_size", {"2", "4", "8", "32"}},
                                       {"max_queue_delay_microseconds", {"0", "5000", "20000"}},
                                       {"max_num_batched_tokens", {"256", "2048"}}});
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    FakeServer server;
    TuneOptions options;
    options.budget_s = 120;
    options.min_run_s = 3;
    options.seed = seed;
    const TuneResult result = RunTune(space, server, options);
    ASSERT_GE(result.candidates, 4) << "seed " << seed;
    ASSERT_LT(result.candidates, 24) << "seed " << seed;
    std::map<std::string, std::map<std::string, int>> drawn;  // knob -> value -> points
    std::set<int> first_rung;
    for (const TuneRun& run : result.runs) {
      if (run.rung == 0) first_rung.insert(run.point);
    }
    for (int point : first_rung) {
      for (const Override& o : space[point]) ++drawn[o.key][o.value];
    }
    for (const auto& [knob, values] : drawn) {
      const size_t all = knob == "max_batch_size" ? 4 : knob == "max_num_batched_tokens" ? 2 : 3;
      EXPECT_EQ(values.size(), std::min(all, first_rung.size())) << knob << ", seed " << seed;
      int least = static_cast<int>(first_rung.size()), most = 0;
      for (const auto& [value, count] : values) {
        least = std::min(least, count);
        most = std::max(most, count);
      }
      if (values.size() == all) {
        EXPECT_LE(most - least, 1) << knob << ", seed " << seed;
      }
    }
  }
}

// Runs cost far more than the search assumed before it ran one (a long drain under overload):
// the first rung is cut to what the budget can race at the cost the first run showed.
TEST(TunerTest, RunsDearerThanExpectedCutTheFirstRungAndTheBudgetIsKept) {
  FakeServer server;
  server.run_overhead_s = 15;
  const auto space = Space({"4", "8", "16", "32"}, {"500", "1000", "2000", "4000"});
  TuneOptions options;
  options.budget_s = 400;
  options.min_run_s = 3;
  const absl::Time start = server.now;
  const TuneResult result = RunTune(space, server, options);
  EXPECT_LE(server.now - start, absl::Seconds(options.budget_s));
  EXPECT_LT(result.candidates, 16);
  EXPECT_GE(result.candidates, 2);
  ASSERT_NE(result.best_point(), nullptr);
  EXPECT_FALSE(result.best_point()->repeats.empty());
  EXPECT_EQ(server.in_force, result.best_point()->label);
}

TEST(TunerTest, ASinglePointIsRepeatedAndNothingIsTriedWithoutAnything) {
  FakeServer server;
  TuneOptions options;
  options.budget_s = 60;
  options.min_run_s = 5;
  const TuneResult one = RunTune(Space({"16"}, {"2000"}), server, options);
  ASSERT_NE(one.best_point(), nullptr);
  EXPECT_EQ(one.best_point()->repeats.size(), 3u);

  FakeServer idle;
  const TuneResult none = RunTune({}, idle, options);
  EXPECT_EQ(none.best_point(), nullptr);
  EXPECT_TRUE(idle.applied.empty());
}

TEST(TunerTest, RefusesOptionsOutOfRange) {
  TuneOptions options;
  EXPECT_TRUE(ValidateTuneOptions(options).ok());
  options.budget_s = 0;
  EXPECT_THAT(ValidateTuneOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("budget")));
  options = TuneOptions();
  options.eta = 1;
  EXPECT_THAT(ValidateTuneOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("eta must be at least 2")));
  options = TuneOptions();
  options.final_share = 1;
  EXPECT_THAT(ValidateTuneOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("share")));
  options = TuneOptions();
  options.repeats = 0;
  EXPECT_THAT(ValidateTuneOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("repeats")));
}

}  // namespace
}  // namespace convoy::bench
