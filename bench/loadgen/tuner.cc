#include "bench/loadgen/tuner.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/loadgen/arrival.h"

namespace convoy::bench {
namespace {

// `shuffled` reordered so that every prefix draws each value of each knob as evenly as its
// length allows: each next point is the one whose values were drawn least so far (the sum over
// its knobs), the earliest in `shuffled` among equals. A sample of the first n points then holds
// every value of a knob with n values or fewer, which a random draw often misses (5 random points
// of a 4 x 3 x 2 grid miss a given value of the first knob 20% of the time).
std::vector<int> CoveringOrder(const std::vector<std::vector<Override>>& space,
                               const std::vector<int>& shuffled) {
  std::map<std::pair<std::string, std::string>, int> drawn;
  std::vector<int> order;
  std::vector<bool> taken(shuffled.size(), false);
  for (size_t k = 0; k < shuffled.size(); ++k) {
    size_t best = shuffled.size();
    int best_score = 0;
    for (size_t i = 0; i < shuffled.size(); ++i) {
      if (taken[i]) continue;
      int score = 0;
      for (const Override& o : space[shuffled[i]]) {
        const auto it = drawn.find({o.key, o.value});
        score += it == drawn.end() ? 0 : it->second;
      }
      if (best == shuffled.size() || score < best_score) {
        best = i;
        best_score = score;
      }
    }
    taken[best] = true;
    order.push_back(shuffled[best]);
    for (const Override& o : space[shuffled[best]]) ++drawn[{o.key, o.value}];
  }
  return order;
}

// Rounding room when a run is planned to end exactly at the budget.
constexpr double kSlackS = 1e-6;

// Planned run lengths are whole milliseconds, rounded down, so that runs planned to fill the budget
// do not overrun it by a rounding error.
double FloorMillis(double seconds) { return std::floor(seconds * 1e3) / 1e3; }

// How many rungs race `m` points down to one.
int RacingRungs(size_t m, int eta) {
  int rungs = 0;
  while (m > 1) {
    m = (m + eta - 1) / eta;
    ++rungs;
  }
  return rungs;
}

double Mean(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double SampleStddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double mean = Mean(v);
  double sum = 0;
  for (double x : v) sum += (x - mean) * (x - mean);
  return std::sqrt(sum / static_cast<double>(v.size() - 1));
}

// Orders points by how far the search took them, then by their goodput there.
bool FurtherAndBetter(const PointSummary& a, const PointSummary& b) {
  if (a.deepest_rung != b.deepest_rung) return a.deepest_rung > b.deepest_rung;
  if (a.rung_goodput != b.rung_goodput) return a.rung_goodput > b.rung_goodput;
  return a.point < b.point;
}

class Search {
 public:
  Search(const std::vector<std::vector<Override>>& space, TuneTarget& target,
         const TuneOptions& options, const std::function<absl::Time()>& now)
      : space_(space), target_(target), options_(options), now_(now), start_(now()) {
    result_.space_size = static_cast<int>(space.size());
    for (size_t i = 0; i < space.size(); ++i) {
      PointSummary& p = result_.points.emplace_back();
      p.point = static_cast<int>(i);
      p.label = OverrideLabel(space[i]);
    }
  }

  TuneResult Run() {
    if (space_.empty()) return std::move(result_);
    const std::vector<int> finalists = Race(Candidates());
    Repeat(finalists);
    PickBest();
    // The best is put back in force unless it is already (it ran last).
    if (result_.best >= 0 && (result_.runs.empty() || result_.runs.back().point != result_.best)) {
      if (absl::Status s = target_.Apply(space_[result_.best]); !s.ok()) {
        result_.final_apply_error = std::string(s.message());
      }
    }
    return std::move(result_);
  }

 private:
  double Elapsed() const { return absl::ToDoubleSeconds(now_() - start_); }
  double SearchBudget() const { return options_.budget_s * (1 - options_.final_share); }
  double Overhead() const {
    return runs_ > 0 ? std::max(0.0, overhead_total_ / runs_) : options_.expected_overhead_s;
  }
  // The longest a reload has taken: kept back from the budget for putting the best in force.
  double ApplyReserve() const {
    return runs_ > 0 ? longest_apply_s_ : options_.expected_overhead_s;
  }
  // Whether a run of `seconds` still ends before `budget` seconds from the start, with the
  // final reload's reserve where `budget` is the whole budget.
  bool Fits(double seconds, double budget) const {
    const double reserve = budget >= options_.budget_s ? ApplyReserve() : 0;
    return Elapsed() + seconds + Overhead() + reserve <= budget + kSlackS;
  }

  // How many points (at least 2) `seconds` can race, starting with runs of `run_s`, at the
  // overhead known now.
  size_t Affordable(double seconds, double run_s) const {
    size_t m = space_.size();
    const double per_run = run_s + Overhead();
    while (m > 2 && static_cast<double>(m) * RacingRungs(m, options_.eta) * per_run > seconds) {
      --m;
    }
    return m;
  }

  // The whole space in a seeded random order, rearranged so that each value of each knob comes
  // early (CoveringOrder), cut to what the search budget can race at the shortest run length.
  // (Random among equals, so that a rung cut short later drops no part of the space more than
  // another.)
  std::vector<int> Candidates() {
    std::vector<int> all(space_.size());
    std::iota(all.begin(), all.end(), 0);
    Rng rng(options_.seed);
    for (size_t i = 0; i + 1 < all.size(); ++i) {
      const size_t j = static_cast<size_t>(
          rng.UniformInt(static_cast<int64_t>(i), static_cast<int64_t>(all.size() - 1)));
      std::swap(all[i], all[j]);
    }
    all = CoveringOrder(space_, all);
    all.resize(std::min(all.size(), Affordable(SearchBudget(), options_.min_run_s)));
    result_.candidates = static_cast<int>(all.size());
    return all;
  }

  // Applies and measures one point; its goodput, or -1 when its reload or run failed.
  double Measure(int point, int rung, double seconds) {
    const double began = Elapsed();
    PointSummary& summary = result_.points[point];
    const absl::Status applied = target_.Apply(space_[point]);
    longest_apply_s_ = std::max(longest_apply_s_, Elapsed() - began);
    if (!applied.ok()) {
      summary.applied = false;
      summary.error = std::string(applied.message());
      return -1;
    }
    TuneRun& run = result_.runs.emplace_back();
    run.point = point;
    run.rung = rung;
    run.seconds = seconds;
    run.result = target_.Measure(seconds);
    run.result.config = summary.label;
    overhead_total_ += Elapsed() - began - seconds;
    ++runs_;
    return RunGoodput(run.result);
  }

  // Successive halving; returns the points the last rung ranked, best first.
  std::vector<int> Race(std::vector<int> alive) {
    int rung = 0;
    while (alive.size() > 1) {
      const double left = SearchBudget() - Elapsed();
      const double planned =
          left / RacingRungs(alive.size(), options_.eta) / static_cast<double>(alive.size()) -
          Overhead();
      run_s_ = std::max({run_s_, options_.min_run_s, FloorMillis(planned)});
      std::vector<std::pair<double, int>> scored;
      for (size_t i = 0; i < alive.size(); ++i) {
        const int point = alive[i];
        if (!Fits(run_s_, SearchBudget())) {
          result_.budget_ran_out = true;
          break;
        }
        const double goodput = Measure(point, rung, run_s_);
        // The first run measured what a run costs beyond its seconds: the first rung keeps only
        // as many points as the search budget can race at that cost.
        if (runs_ == 1 && rung == 0) {
          const size_t affordable = Affordable(left, run_s_);
          if (affordable < alive.size()) {
            alive.resize(std::max(affordable, i + 1));
            result_.candidates = static_cast<int>(alive.size());
          }
        }
        PointSummary& summary = result_.points[point];
        if (!summary.applied) continue;
        summary.deepest_rung = rung;
        summary.rung_goodput = goodput;
        if (goodput >= 0) scored.emplace_back(goodput, point);
      }
      std::stable_sort(scored.begin(), scored.end(),
                       [](const auto& a, const auto& b) { return a.first > b.first; });
      alive.clear();
      const size_t keep = (scored.size() + options_.eta - 1) / options_.eta;
      for (size_t i = 0; i < scored.size() && i < std::max<size_t>(keep, 1); ++i) {
        alive.push_back(scored[i].second);
      }
      ++rung;
      if (result_.budget_ran_out) break;
    }
    // The finalists: the points the search took furthest, best first.
    std::vector<PointSummary> measured;
    for (const PointSummary& p : result_.points) {
      if (p.applied && p.rung_goodput >= 0) measured.push_back(p);
    }
    // A single candidate was never raced: it is the only finalist.
    if (measured.empty() && alive.size() == 1) return alive;
    std::sort(measured.begin(), measured.end(), FurtherAndBetter);
    std::vector<int> finalists;
    for (size_t i = 0; i < measured.size() && i < static_cast<size_t>(options_.finalists); ++i) {
      finalists.push_back(measured[i].point);
    }
    return finalists;
  }

  // Measures the finalists `repeats` times each, in turn, in runs that share what is left of the
  // budget (fewer finalists, then fewer repeats, where those would be shorter than min_run_s).
  void Repeat(std::vector<int> finalists) {
    if (finalists.empty()) return;
    int repeats = options_.repeats;
    auto run_length = [&] {
      return (options_.budget_s - Elapsed() - ApplyReserve()) /
                 static_cast<double>(finalists.size() * repeats) -
             Overhead();
    };
    while (finalists.size() > 1 && run_length() < options_.min_run_s) finalists.pop_back();
    while (repeats > 1 && run_length() < options_.min_run_s) --repeats;
    const double seconds = std::max(FloorMillis(run_length()), options_.min_run_s);
    for (int r = 0; r < repeats; ++r) {
      for (int point : finalists) {
        if (!Fits(seconds, options_.budget_s)) {
          result_.budget_ran_out = true;
          return;
        }
        const double goodput = Measure(point, -1, seconds);
        PointSummary& summary = result_.points[point];
        if (goodput >= 0) summary.repeats.push_back(goodput);
      }
    }
  }

  void PickBest() {
    for (PointSummary& p : result_.points) {
      if (p.repeats.empty()) continue;
      p.mean = Mean(p.repeats);
      p.stddev = SampleStddev(p.repeats);
      if (result_.best < 0 || p.mean > result_.points[result_.best].mean) result_.best = p.point;
    }
    if (result_.best >= 0) return;
    // No repeat ran: the furthest and best of the race.
    for (const PointSummary& p : result_.points) {
      if (!p.applied || p.rung_goodput < 0) continue;
      if (result_.best < 0 || FurtherAndBetter(p, result_.points[result_.best])) {
        result_.best = p.point;
      }
    }
  }

  const std::vector<std::vector<Override>>& space_;
  TuneTarget& target_;
  const TuneOptions options_;
  const std::function<absl::Time()>& now_;
  const absl::Time start_;
  TuneResult result_;
  double run_s_ = 0;  // the current run length; runs never get shorter
  double overhead_total_ = 0;
  double longest_apply_s_ = 0;
  int runs_ = 0;
};

}  // namespace

absl::Status ValidateTuneOptions(const TuneOptions& options) {
  if (!(options.budget_s > 0)) return absl::InvalidArgumentError("the budget must be above 0 s");
  if (!(options.min_run_s > 0)) {
    return absl::InvalidArgumentError("the shortest run must be above 0 s");
  }
  if (options.eta < 2) return absl::InvalidArgumentError("eta must be at least 2");
  if (options.finalists < 1) return absl::InvalidArgumentError("finalists must be at least 1");
  if (options.repeats < 1) return absl::InvalidArgumentError("repeats must be at least 1");
  if (!(options.final_share >= 0 && options.final_share < 1)) {
    return absl::InvalidArgumentError("the repeats' share of the budget must be in [0, 1)");
  }
  if (!(options.expected_overhead_s >= 0)) {
    return absl::InvalidArgumentError("the expected overhead must not be negative");
  }
  return absl::OkStatus();
}

double RunGoodput(const RunResult& run) {
  const ClassStats* all = run.all();
  if (!run.error.empty() || all == nullptr) return -1;
  return all->goodput_rps;
}

TuneResult Tune(const std::vector<std::vector<Override>>& space, TuneTarget& target,
                const TuneOptions& options, const std::function<absl::Time()>& now) {
  return Search(space, target, options, now).Run();
}

std::vector<RunResult> FrontierRuns(const TuneResult& result) {
  std::vector<const TuneRun*> last(result.points.size(), nullptr);
  for (const TuneRun& run : result.runs) last[run.point] = &run;
  std::vector<RunResult> runs;
  for (const TuneRun* run : last) {
    if (run != nullptr) runs.push_back(run->result);
  }
  return runs;
}

std::string FormatTuneTable(const TuneResult& result) {
  size_t width = 6;
  for (const PointSummary& p : result.points) width = std::max(width, p.label.size());
  std::string out =
      absl::StrFormat("  %-*s %5s %12s | %7s %16s %7s %7s\n", static_cast<int>(width), "config",
                      "rung", "rung goodput", "repeats", "goodput mean+-sd", "min", "max");
  for (const PointSummary& p : result.points) {
    const char* mark = p.point == result.best ? "*" : " ";
    if (!p.applied) {
      absl::StrAppendFormat(&out, "%s %-*s  reload refused: %s\n", mark, static_cast<int>(width),
                            p.label, p.error);
      continue;
    }
    if (p.deepest_rung < 0 && p.repeats.empty()) continue;  // never measured
    const std::string rung = p.deepest_rung >= 0 ? absl::StrCat(p.deepest_rung) : "-";
    const std::string rung_goodput = p.rung_goodput >= 0 ? absl::StrFormat("%.2f", p.rung_goodput)
                                                         : (p.deepest_rung >= 0 ? "failed" : "-");
    if (p.repeats.empty()) {
      absl::StrAppendFormat(&out, "%s %-*s %5s %12s | %7d %16s %7s %7s\n", mark,
                            static_cast<int>(width), p.label, rung, rung_goodput, 0, "-", "-", "-");
      continue;
    }
    absl::StrAppendFormat(&out, "%s %-*s %5s %12s | %7d %16s %7.2f %7.2f\n", mark,
                          static_cast<int>(width), p.label, rung, rung_goodput, p.repeats.size(),
                          absl::StrFormat("%.2f +- %.2f", p.mean, p.stddev),
                          *std::min_element(p.repeats.begin(), p.repeats.end()),
                          *std::max_element(p.repeats.begin(), p.repeats.end()));
  }
  if (const PointSummary* best = result.best_point(); best != nullptr) {
    if (!best->repeats.empty()) {
      absl::StrAppendFormat(&out,
                            "* best: %s: goodput %.2f req/s (sd %.2f over %d repeats, min %.2f, "
                            "max %.2f)\n",
                            best->label, best->mean, best->stddev, best->repeats.size(),
                            *std::min_element(best->repeats.begin(), best->repeats.end()),
                            *std::max_element(best->repeats.begin(), best->repeats.end()));
    } else {
      absl::StrAppendFormat(&out,
                            "* best: %s: goodput %.2f req/s in one run (no time was left to "
                            "repeat it: its spread is unknown)\n",
                            best->label, best->rung_goodput);
    }
  }
  absl::StrAppendFormat(
      &out, "%d run(s) of %d candidate(s) from a space of %d%s\n", result.runs.size(),
      result.candidates, result.space_size,
      result.budget_ran_out ? "; the budget ran out before the search ended" : "");
  return out;
}

nlohmann::json TuneToJson(const TuneResult& result) {
  nlohmann::json j;
  j["space_size"] = result.space_size;
  j["candidates"] = result.candidates;
  j["budget_ran_out"] = result.budget_ran_out;
  j["points"] = nlohmann::json::array();
  for (const PointSummary& p : result.points) {
    if (p.applied && p.deepest_rung < 0 && p.repeats.empty()) continue;
    nlohmann::json point = {{"point", p.point},
                            {"config", p.label},
                            {"applied", p.applied},
                            {"deepest_rung", p.deepest_rung},
                            {"rung_goodput_rps", p.rung_goodput},
                            {"repeats_goodput_rps", p.repeats}};
    if (!p.error.empty()) point["error"] = p.error;
    if (!p.repeats.empty()) {
      point["mean_goodput_rps"] = p.mean;
      point["stddev_goodput_rps"] = p.stddev;
    }
    j["points"].push_back(std::move(point));
  }
  j["runs"] = nlohmann::json::array();
  for (const TuneRun& run : result.runs) {
    nlohmann::json r = RunToJson(run.result);
    r["point"] = run.point;
    r["rung"] = run.rung;
    r["seconds"] = run.seconds;
    j["runs"].push_back(std::move(r));
  }
  j["best"] =
      result.best >= 0 ? nlohmann::json(result.points[result.best].label) : nlohmann::json(nullptr);
  if (!result.final_apply_error.empty()) j["final_apply_error"] = result.final_apply_error;
  return j;
}

}  // namespace convoy::bench
