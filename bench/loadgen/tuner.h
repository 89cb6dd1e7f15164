// convoy tune's search: which server configs to measure, for how long, and which one wins, given a
// time budget. Successive halving over short runs: every candidate is measured briefly, the best
// 1/eta of them again for eta times as long, and so on until one is left; a grid too large for the
// budget is first sampled down (seeded, each value of each knob drawn as evenly as the sample's
// size allows) to what the budget can run at the shortest run length.
// The best few points are then measured again, `repeats` times each at the longest run length, in
// turn; the winner is the best mean goodput, reported with its spread over those repeats.
//
// The tuner knows the server only through TuneTarget (a live convoyd in tune_main.cc, a fake in
// tests) and time only through the clock it is given, so a test runs a whole search in no time.
#ifndef CONVOY_BENCH_LOADGEN_TUNER_H_
#define CONVOY_BENCH_LOADGEN_TUNER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/loadgen/config_override.h"
#include "bench/loadgen/report.h"
#include "nlohmann/json.hpp"

namespace convoy::bench {

// The server being tuned.
class TuneTarget {
 public:
  virtual ~TuneTarget() = default;
  // Puts the point's config in force (a live reload), checking that it took effect. An error
  // when it did not: the server then still runs the config it had.
  virtual absl::Status Apply(const std::vector<Override>& point) = 0;
  // Measures the traffic for `seconds` under the config in force; a failed run has its error set.
  virtual RunResult Measure(double seconds) = 0;
};

struct TuneOptions {
  // Wall-clock seconds for the whole search, repeats included.
  double budget_s = 600;
  // The shortest measured run (the first rung's), in seconds.
  double min_run_s = 5;
  // Each rung keeps the best 1/eta of its points and runs them eta times as long.
  int eta = 2;
  // The points measured again at the end, and how many times each.
  int finalists = 3;
  int repeats = 3;
  // The share of the budget kept for the repeats.
  double final_share = 0.3;
  // What a run costs beyond its measured seconds (the reload, warm-up requests, the drain), assumed
  // until the first runs have measured it.
  double expected_overhead_s = 2;
  // Seeds the sampling of a grid larger than the budget allows.
  uint64_t seed = 1;
};

// INVALID_ARGUMENT naming the option that is out of range.
absl::Status ValidateTuneOptions(const TuneOptions& options);

// One measured run of one point.
struct TuneRun {
  int point = 0;  // index into the space
  int rung = 0;   // 0, 1, ...; -1 for the repeats at the end
  double seconds = 0;
  RunResult result;  // its config label is the point's label
};

struct PointSummary {
  int point = 0;
  std::string label;
  bool applied = true;  // false: its reload was refused (`error` says why)
  std::string error;
  int deepest_rung = -1;        // the last rung that measured it; -1: none
  double rung_goodput = -1;     // its goodput at that rung
  std::vector<double> repeats;  // its goodput in each repeat
  double mean = -1;             // over the repeats; -1 without any
  double stddev = 0;            // sample standard deviation (0 for one repeat)
};

struct TuneResult {
  std::vector<TuneRun> runs;         // in the order they ran
  std::vector<PointSummary> points;  // every point tested (applied or refused), by index
  int best = -1;                     // index into `points`; -1 when no run succeeded
  int candidates = 0;                // points the search started from (after sampling)
  int space_size = 0;
  bool budget_ran_out = false;    // a rung or the repeats were cut short
  std::string final_apply_error;  // non-empty when the best could not be put back in force
  const PointSummary* best_point() const { return best >= 0 ? &points[best] : nullptr; }
};

// Searches `space` (each point a set of overrides of the server's config). Ends with the best
// point in force: every config the target runs was applied right before it was measured, and
// the last Apply is the best's (or none when nothing succeeded). `now` is the clock the budget is
// kept by.
TuneResult Tune(const std::vector<std::vector<Override>>& space, TuneTarget& target,
                const TuneOptions& options, const std::function<absl::Time()>& now);

// The goodput a run ranks by: the "all" class's; -1 for a failed run.
double RunGoodput(const RunResult& run);

// The frontier: per point tested, its label, rung, goodput and the repeats' mean and spread,
// best marked; the table, Markdown and JSON (which also holds every run).
std::string FormatTuneTable(const TuneResult& result);
nlohmann::json TuneToJson(const TuneResult& result);
// One RunResult per measured point: its last run (a repeat where there were any), for the SVG
// plot and the frontier's latencies.
std::vector<RunResult> FrontierRuns(const TuneResult& result);

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_TUNER_H_
