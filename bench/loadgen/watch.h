// convoy tune --watch: keeps a live server's batching knobs suited to the traffic it serves now.
// Every interval it reads the server's /metrics, sums up the window since the last read (the
// request rate, the mean prompt length, the share of requests within the SLOs, goodput) and may
// move the knobs one step, within the operator's space:
//   - the traffic falls into a regime (request rate and mean prompt length, each on a log2 grid of
//     half steps; a window one step from the regime in force stays in it, so that the noise of a
//     short window is no shift); each regime keeps the share of requests within the SLOs each
//     point gave it (not goodput: under the same traffic the two rank points alike, and a short
//     window's arrival count is noise the share does not carry);
//   - a regime seen for the first time keeps what the nearest known regime measured as its prior:
//     the knobs go first to the prior's best point, and a neighbour that kept under half the share
//     there of what the best point keeps here is not tried, so that a traffic near a known one (or
//     a window half in two) does not try again what was found bad next door;
//   - when the regime changes to one with a known best point, the knobs go there;
//   - otherwise, unless the regime's best point already keeps nearly every request within the
//     SLOs (WatchOptions::satisfied), the knobs climb: the next point tried is an untried
//     neighbour (one axis one value up or down) of the regime's best; with none left, the knobs
//     go back to the best and stay.
// It never moves more often than once per interval, and says why each time.
#ifndef CONVOY_BENCH_LOADGEN_WATCH_H_
#define CONVOY_BENCH_LOADGEN_WATCH_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "bench/loadgen/stats.h"

namespace convoy::bench {

// The counters of one /metrics read that a window is the difference of.
struct WatchCounters {
  double requests = 0;       // requests ended (convoy_e2e_request_latency_seconds_count)
  double prompt_tokens = 0;  // convoy_prompt_tokens_total
  double ttft_count = 0;     // requests with a first token
  double ttft_within = 0;    // of those, with TTFT within the SLO (its histogram's bucket)
  // Requests with a mean time per output token (two tokens or more; the histogram
  // convoy_request_time_per_output_token_seconds): goodput holds each request's mean, not each
  // gap, to the inter-token SLO.
  double itl_count = 0;
  double itl_within = 0;  // of those, with the mean within the SLO
};

// Reads the counters from an exposition; the SLO's limits round down to the histograms' bucket
// bounds (a bound of 0 counts everything as within). INVALID_ARGUMENT when a series is missing.
absl::StatusOr<WatchCounters> ReadWatchCounters(absl::string_view exposition,
                                                const SloTargets& slo);

struct WatchWindow {
  double seconds = 0;
  double requests = 0;
  double requests_per_s = 0;
  double mean_prompt_tokens = 0;
  // The share of requests within the TTFT SLO times the share within the ITL SLO: an estimate
  // of the share of requests within both.
  double attainment = 1;
  double goodput_rps = 0;  // requests_per_s x attainment
};
WatchWindow Difference(const WatchCounters& before, const WatchCounters& after, double seconds);

struct WatchOptions {
  absl::Duration interval = absl::Minutes(1);
  // A window with fewer requests says nothing.
  double min_requests = 20;
  // A traffic whose best point keeps this share of its requests within the SLOs is served: no
  // neighbour is tried for it (none can gain much, and a bad one costs a whole window). Not 99%:
  // a 30-second window of a served chat traffic measured 96 to 98% (docs/perf/cpu.md section 21).
  double satisfied = 0.95;
  // After a move, the next window starts this share of the interval later, so that the requests
  // queued under the old knobs do not count against the new ones (the caller waits it out).
  double settle_fraction = 0.25;
};

struct WatchMove {
  int point = 0;
  std::string reason;
};

class WatchController {
 public:
  // `axis_sizes`: the values per axis of the space, in CartesianProduct's order (the first axis
  // varies slowest). `start`: the point in force now; `now`: when it was put in force.
  WatchController(std::vector<int> axis_sizes, int start, absl::Time now, WatchOptions options);

  // Takes the window that ended at `now` (measured under the point in force). Returns the point
  // to move to and why, or nothing; never a move within the interval of the last one. The caller
  // applies it and calls Moved, or Failed when the server refused it (it is not tried again for
  // this traffic).
  std::optional<WatchMove> Observe(absl::Time now, const WatchWindow& window);
  void Moved(int point);
  void Failed(int point);

  int current() const { return current_; }

 private:
  using Regime = std::pair<int, int>;
  static Regime RegimeOf(const WatchWindow& window);
  std::vector<int> Neighbours(int point) const;
  // Sets `regime`'s prior: the nearest known regime's measurements (on the grid), or none when
  // no regime is known. Called before the regime's own first measurement.
  void Inherit(const Regime& regime);
  std::optional<WatchMove> Decide(const std::map<int, double>& seen,
                                  const std::map<int, double>& prior, bool shifted,
                                  const WatchWindow& window) const;

  const std::vector<int> axis_sizes_;
  const WatchOptions options_;
  int current_;
  absl::Time last_move_;  // the last move decided (or the start)
  std::optional<Regime> regime_;
  // Per regime: each point's share within the SLOs (the last window measured under it); refused
  // points at -1.
  std::map<Regime, std::map<int, double>> attainment_;
  // Per regime: the nearest regime's measurements when it was first seen.
  std::map<Regime, std::map<int, double>> prior_;
};

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_WATCH_H_
