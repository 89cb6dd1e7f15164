#include "bench/loadgen/watch.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/loadgen/server_metrics.h"

namespace convoy::bench {
namespace {

// A histogram's count and the count of its observations up to `limit` (the largest bucket bound
// not above it; none when `limit` <= 0: then every observation counts).
absl::Status ReadHistogram(absl::string_view exposition, absl::string_view name, double limit,
                           double* count, double* within) {
  absl::StatusOr<double> total = FindSample(exposition, absl::StrCat(name, "_count"));
  if (!total.ok()) return absl::InvalidArgumentError(total.status().message());
  *count = *total;
  *within = *total;
  if (limit <= 0) return absl::OkStatus();
  const std::string prefix = absl::StrCat(name, "_bucket{le=\"");
  double best_bound = -1;
  *within = 0;
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::ConsumePrefix(&line, prefix)) continue;
    const size_t quote = line.find('"');
    double bound = 0;
    if (quote == absl::string_view::npos || !absl::SimpleAtod(line.substr(0, quote), &bound)) {
      continue;  // +Inf, or not a bound
    }
    if (bound > limit || bound <= best_bound) continue;
    double value = 0;
    const absl::string_view rest = absl::StripAsciiWhitespace(line.substr(quote + 2));
    if (!absl::SimpleAtod(rest.substr(0, rest.find(' ')), &value)) continue;
    best_bound = bound;
    *within = value;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<WatchCounters> ReadWatchCounters(absl::string_view exposition,
                                                const SloTargets& slo) {
  WatchCounters c;
  absl::StatusOr<double> requests =
      FindSample(exposition, "convoy_e2e_request_latency_seconds_count");
  absl::StatusOr<double> prompt = FindSample(exposition, "convoy_prompt_tokens_total");
  if (!requests.ok() || !prompt.ok()) {
    return absl::InvalidArgumentError(
        "/metrics lacks convoy_e2e_request_latency_seconds_count or convoy_prompt_tokens_total");
  }
  c.requests = *requests;
  c.prompt_tokens = *prompt;
  absl::Status s = ReadHistogram(exposition, "convoy_time_to_first_token_seconds", slo.ttft_s,
                                 &c.ttft_count, &c.ttft_within);
  if (s.ok()) {
    s = ReadHistogram(exposition, "convoy_request_time_per_output_token_seconds", slo.itl_s,
                      &c.itl_count, &c.itl_within);
  }
  if (!s.ok()) return s;
  return c;
}

WatchWindow Difference(const WatchCounters& before, const WatchCounters& after, double seconds) {
  WatchWindow w;
  w.seconds = seconds;
  w.requests = after.requests - before.requests;
  if (seconds > 0) w.requests_per_s = w.requests / seconds;
  if (w.requests > 0)
    w.mean_prompt_tokens = (after.prompt_tokens - before.prompt_tokens) / w.requests;
  auto share = [](double within, double count) {
    return count > 0 ? std::clamp(within / count, 0.0, 1.0) : 1.0;
  };
  // A request that ended without a first token (timed out in the queue, failed, cancelled)
  // missed the TTFT SLO: the first tokens within it are a share of the requests that ended, or
  // of the first tokens where more of those came in the window.
  const double first_tokens = after.ttft_count - before.ttft_count;
  w.attainment = share(after.ttft_within - before.ttft_within, std::max(w.requests, first_tokens)) *
                 share(after.itl_within - before.itl_within, after.itl_count - before.itl_count);
  w.goodput_rps = w.requests_per_s * w.attainment;
  return w;
}

WatchController::WatchController(std::vector<int> axis_sizes, int start, absl::Time now,
                                 WatchOptions options)
    : axis_sizes_(std::move(axis_sizes)), options_(options), current_(start), last_move_(now) {}

WatchController::Regime WatchController::RegimeOf(const WatchWindow& window) {
  auto grid = [](double x) {
    return static_cast<int>(std::lround(2 * std::log2(std::max(x, 1e-3))));
  };
  return {grid(window.requests_per_s), grid(window.mean_prompt_tokens)};
}

std::vector<int> WatchController::Neighbours(int point) const {
  std::vector<int> out;
  int stride = 1;
  for (size_t a = axis_sizes_.size(); a-- > 0;) {
    const int index = point / stride % axis_sizes_[a];
    if (index > 0) out.push_back(point - stride);
    if (index + 1 < axis_sizes_[a]) out.push_back(point + stride);
    stride *= axis_sizes_[a];
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<WatchMove> WatchController::Observe(absl::Time now, const WatchWindow& window) {
  if (window.requests < options_.min_requests) return std::nullopt;
  Regime regime = RegimeOf(window);
  // Hysteresis: a window one grid step from the regime in force (a factor of about 1.4, as a
  // Poisson rate's noise over a short window gives) stays in it.
  if (regime_.has_value() && std::abs(regime.first - regime_->first) <= 1 &&
      std::abs(regime.second - regime_->second) <= 1) {
    regime = *regime_;
  }
  if (!attainment_.count(regime)) Inherit(regime);
  std::map<int, double>& seen = attainment_[regime];
  seen[current_] = window.attainment;
  const std::map<int, double>& prior = prior_[regime];
  const bool shifted = regime_.has_value() && *regime_ != regime;
  regime_ = regime;
  if (now - last_move_ < options_.interval) return std::nullopt;
  std::optional<WatchMove> move = Decide(seen, prior, shifted, window);
  if (move.has_value()) last_move_ = now;
  return move;
}

void WatchController::Inherit(const Regime& regime) {
  const std::map<int, double>* nearest = nullptr;
  int nearest_distance = 0;
  for (const auto& [known, seen] : attainment_) {
    const int distance =
        std::abs(known.first - regime.first) + std::abs(known.second - regime.second);
    if (nearest == nullptr || distance < nearest_distance) {
      nearest = &seen;
      nearest_distance = distance;
    }
  }
  prior_[regime] = nearest != nullptr ? *nearest : std::map<int, double>();
}

std::optional<WatchMove> WatchController::Decide(const std::map<int, double>& seen,
                                                 const std::map<int, double>& prior, bool shifted,
                                                 const WatchWindow& window) const {
  int best = current_;
  for (const auto& [point, attainment] : seen) {
    if (attainment > seen.at(best)) best = point;
  }
  const std::string traffic = absl::StrFormat(
      "traffic %.2f req/s, mean prompt %.0f tokens, %.1f%% within the SLOs, goodput %.2f req/s",
      window.requests_per_s, window.mean_prompt_tokens, 100 * window.attainment,
      window.goodput_rps);
  if (shifted && best != current_) {
    return WatchMove{
        best,
        absl::StrCat("the traffic shifted (", traffic, "): back to this traffic's best point (",
                     absl::StrFormat("%.1f", 100 * seen.at(best)), "% within the SLOs)")};
  }
  if (shifted && !prior.empty()) {
    // A traffic met for the first time (or whose prior's best it has not tried yet): its best
    // guess is the nearest known traffic's best point, not whatever that traffic's trials left in
    // force.
    int guess = prior.begin()->first;
    for (const auto& [point, attainment] : prior) {
      if (attainment > prior.at(guess)) guess = point;
    }
    if (guess != current_ && !seen.count(guess) && prior.at(guess) > seen.at(best)) {
      return WatchMove{guess, absl::StrCat("the traffic shifted (", traffic,
                                           "): to the nearest known traffic's best point, not yet "
                                           "tried for this one (",
                                           absl::StrFormat("%.1f", 100 * prior.at(guess)),
                                           "% within the SLOs there)")};
    }
  }
  if (seen.at(best) >= options_.satisfied) {
    if (best == current_) return std::nullopt;
    return WatchMove{best, absl::StrCat(traffic, ": back to this traffic's best point (",
                                        absl::StrFormat("%.1f", 100 * seen.at(best)),
                                        "% within the SLOs: nothing to gain by trying others)")};
  }
  for (int neighbour : Neighbours(best)) {
    // Not tried here, and not far worse than this best where the nearest traffic tried it.
    const auto elsewhere = prior.find(neighbour);
    if (!seen.count(neighbour) &&
        (elsewhere == prior.end() || elsewhere->second >= 0.5 * seen.at(best))) {
      return WatchMove{neighbour, absl::StrCat(shifted ? "the traffic shifted; " : "", traffic,
                                               ": trying a neighbour of the best point")};
    }
  }
  if (best != current_) {
    return WatchMove{
        best, absl::StrCat(traffic, ": every neighbour tried; back to the best (",
                           absl::StrFormat("%.1f", 100 * seen.at(best)), "% within the SLOs)")};
  }
  return std::nullopt;
}

void WatchController::Moved(int point) { current_ = point; }

void WatchController::Failed(int point) {
  if (regime_.has_value()) attainment_[*regime_][point] = -1;
}

}  // namespace convoy::bench
