#include "bench/loadgen/runner.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "bench/loadgen/arrival.h"
#include "bench/loadgen/client.h"
#include "bench/loadgen/kserve_client.h"
#include "bench/loadgen/metrics_sampler.h"
#include "bench/loadgen/openai_client.h"
#include "bench/loadgen/request_source.h"
#include "bench/loadgen/workload.h"
#include "convoy/status_macros.h"

namespace convoy::bench {
namespace {

// Seeds of the independent random streams derived from the workload's seed.
constexpr uint64_t kArrivalStream = 0x61727269766c6c73ULL;
constexpr uint64_t kWarmupStream = 0x7761726d75707321ULL;
// How often the server's /metrics is read during a run.
constexpr absl::Duration kMetricsInterval = absl::Seconds(1);

// What the completion callbacks share with the sending thread.
class Tally {
 public:
  void Add(RequestRecord record) {
    absl::MutexLock lock(&mu_);
    tokens_ += record.output_tokens;
    if (!record.completed) ++failed_;
    records_.push_back(std::move(record));
  }
  int64_t finished() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int64_t>(records_.size());
  }
  // Waits until more than `seen` calls have finished or `deadline` passes.
  void AwaitMoreThan(int64_t seen, absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto more = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return static_cast<int64_t>(records_.size()) > seen;
    };
    mu_.AwaitWithDeadline(absl::Condition(&more), deadline);
  }
  void Snapshot(int64_t* finished, int64_t* failed, int64_t* tokens) const {
    absl::MutexLock lock(&mu_);
    *finished = static_cast<int64_t>(records_.size());
    *failed = failed_;
    *tokens = tokens_;
  }
  std::vector<RequestRecord> Take() {
    absl::MutexLock lock(&mu_);
    return std::move(records_);
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<RequestRecord> records_ ABSL_GUARDED_BY(mu_);
  int64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t tokens_ ABSL_GUARDED_BY(mu_) = 0;
};

// A status line on stderr: rewritten in place on a terminal, a new line every few seconds
// otherwise.
class Progress {
 public:
  Progress(bool enabled, std::string label)
      : enabled_(enabled), tty_(isatty(STDERR_FILENO) == 1), label_(std::move(label)) {}

  void Maybe(double now_s, double send_end_s, int64_t sent, const Tally& tally, int64_t in_flight,
             bool draining) {
    if (!enabled_ || now_s < next_s_) return;
    next_s_ = now_s + (tty_ ? 0.5 : 5.0);
    int64_t finished, failed, tokens;
    tally.Snapshot(&finished, &failed, &tokens);
    const std::string window = send_end_s < std::numeric_limits<double>::infinity()
                                   ? absl::StrFormat("/%.0fs", send_end_s)
                                   : "";
    std::fprintf(stderr,
                 "%s[%s] %6.1fs%s %s sent %lld done %lld fail %lld in flight %lld | %.0f out "
                 "tok/s%s",
                 tty_ ? "\r\033[K" : "", label_.c_str(), now_s, window.c_str(),
                 draining ? "draining" : "sending", static_cast<long long>(sent),
                 static_cast<long long>(finished - failed), static_cast<long long>(failed),
                 static_cast<long long>(in_flight), now_s > 0 ? tokens / now_s : 0.0,
                 tty_ ? "" : "\n");
    std::fflush(stderr);
    printed_ = true;
  }
  void End() {
    if (enabled_ && printed_ && tty_) std::fprintf(stderr, "\n");
  }

 private:
  bool enabled_;
  bool tty_;
  std::string label_;
  double next_s_ = 0;
  bool printed_ = false;
};

absl::StatusOr<std::unique_ptr<RequestClient>> MakeClient(const ServerTarget& target,
                                                          const std::string& model,
                                                          SteadyClock::time_point origin) {
  switch (target.protocol) {
    case Protocol::kNative:
      return std::unique_ptr<RequestClient>(
          std::make_unique<StreamClient>(target.channel, target.api_key, origin));
    case Protocol::kKServe:
      return std::unique_ptr<RequestClient>(
          std::make_unique<KServeClient>(target.channel, model, target.api_key, origin));
    case Protocol::kOpenAi: {
      if (target.http_address.empty()) {
        return absl::InvalidArgumentError("the openai protocol needs the server's HTTP address");
      }
      OpenAiClientOptions options;
      options.address = target.http_address;
      options.model = model;
      options.api_key = target.api_key;
      return MakeOpenAiClient(options, origin);
    }
  }
  return absl::InvalidArgumentError("unknown protocol");
}

// Sends `count` short requests one at a time; sets `first_answer` when the first one ends.
absl::Status Warmup(const ServerTarget& target, const convoy::v1::ModelInfo& model,
                    const v1::Workload& workload, int count, absl::Time* first_answer) {
  if (count <= 0) return absl::OkStatus();
  RequestSource source(workload, model.vocab_size(), model.max_context_length(),
                       workload.seed() ^ kWarmupStream);
  ASSIGN_OR_RETURN(std::unique_ptr<RequestClient> client,
                   MakeClient(target, model.name(), SteadyClock::now()));
  Tally tally;
  for (int i = 0; i < count; ++i) {
    PlannedRequest r = source.Next();
    r.max_tokens = std::min(r.max_tokens, 8);
    client->Start(r, [&tally](RequestRecord record) { tally.Add(std::move(record)); });
    if (!client->WaitForIdle(absl::Now() + absl::Seconds(120))) {
      client->CancelAll();
      client->WaitForIdle(absl::InfiniteFuture());
      return absl::DeadlineExceededError("a warm-up request took over 120 s");
    }
    if (i == 0) *first_answer = absl::Now();
  }
  std::vector<RequestRecord> records = tally.Take();
  for (const RequestRecord& r : records) {
    if (!r.completed)
      return absl::UnavailableError(absl::StrCat("warm-up request failed: ", r.error));
  }
  return absl::OkStatus();
}

}  // namespace

v1::Arrival EffectiveArrival(const v1::Workload& workload, const RunOptions& options) {
  v1::Arrival arrival = workload.arrival();
  if (options.rate_rps > 0) {
    v1::OpenLoop open = arrival.has_open_loop() ? arrival.open_loop() : v1::OpenLoop();
    if (open.pattern() == v1::OpenLoop::PATTERN_UNSPECIFIED)
      open.set_pattern(v1::OpenLoop::POISSON);
    if (!open.has_burstiness()) open.set_burstiness(0.25);
    open.set_rate_rps(options.rate_rps);
    *arrival.mutable_open_loop() = open;
  } else if (options.concurrency > 0) {
    arrival.mutable_closed_loop()->set_concurrency(options.concurrency);
  }
  return arrival;
}

absl::StatusOr<RunResult> RunWorkload(const ServerTarget& target, const v1::Workload& workload,
                                      const RunOptions& options) {
  ASSIGN_OR_RETURN(const convoy::v1::ModelInfo model,
                   FetchModelInfo(target.channel.get(), absl::Seconds(10), target.api_key));
  if (model.vocab_size() < 1 || model.max_context_length() < 2) {
    return absl::FailedPreconditionError(
        absl::StrFormat("the server's model has vocab_size %d and max_context_length %d",
                        model.vocab_size(), model.max_context_length()));
  }
  absl::Time first_answer = absl::InfiniteFuture();
  RETURN_IF_ERROR(Warmup(target, model, workload, options.warmup_requests, &first_answer));
  std::optional<MetricsSampler> sampler;
  if (!target.metrics_address.empty()) {
    sampler.emplace(target.metrics_address, target.api_key, kMetricsInterval);
  }

  const v1::Arrival arrival = EffectiveArrival(workload, options);
  RunResult result;
  result.config = options.config_label;
  result.protocol = ProtocolName(target.protocol);
  result.arrival = DescribeArrival(arrival);
  result.slo = options.slo;
  result.price_per_hour = options.price_per_hour;
  if (arrival.has_open_loop()) {
    result.offered_rps = arrival.open_loop().rate_rps();
  } else {
    result.concurrency = arrival.closed_loop().concurrency();
  }

  const int64_t max_requests = options.num_requests > 0      ? options.num_requests
                               : options.duration_s > 0      ? std::numeric_limits<int64_t>::max()
                               : workload.num_requests() > 0 ? workload.num_requests()
                                                             : std::numeric_limits<int64_t>::max();
  const double send_end_s = options.num_requests > 0      ? std::numeric_limits<double>::infinity()
                            : options.duration_s > 0      ? options.duration_s
                            : workload.num_requests() > 0 ? std::numeric_limits<double>::infinity()
                                                          : workload.duration_s();

  RequestSource source(workload, model.vocab_size(), model.max_context_length(), workload.seed());
  OpenLoopArrivals gaps(arrival.open_loop(), workload.seed() ^ kArrivalStream);
  const SteadyClock::time_point origin = SteadyClock::now();
  const absl::Time origin_abs = absl::Now();
  ASSIGN_OR_RETURN(std::unique_ptr<RequestClient> client_holder,
                   MakeClient(target, model.name(), origin));
  RequestClient& client = *client_holder;
  Tally tally;
  Progress progress(options.progress, options.config_label);
  auto done = [&tally](RequestRecord record) { tally.Add(std::move(record)); };

  int64_t sent = 0;
  std::optional<TraceReplay> replay;
  if (options.trace != nullptr) {
    replay.emplace(*options.trace, options.rate_scale, model.vocab_size(),
                   model.max_context_length(), workload.seed() ^ kArrivalStream);
    result.arrival = absl::StrFormat("trace %s x%g", options.trace->source, options.rate_scale);
  }
  double next_arrival_s = arrival.has_open_loop() ? gaps.NextGapSeconds() : 0;
  while (sent < max_requests) {
    const double now = client.SecondsSinceOrigin();
    if (now >= send_end_s) break;
    progress.Maybe(now, send_end_s, sent, tally, sent - tally.finished(), false);
    if (replay.has_value()) {
      if (replay->done()) break;
      if (now >= replay->next_arrival_s()) {
        client.Start(replay->Next(), done);
        ++sent;
        continue;
      }
      absl::SleepFor(
          absl::Seconds(std::min({replay->next_arrival_s(), send_end_s, now + 0.25}) - now));
    } else if (arrival.has_open_loop()) {
      if (now >= next_arrival_s) {
        client.Start(source.Next(), done);
        ++sent;
        next_arrival_s += gaps.NextGapSeconds();
        continue;
      }
      const double wake = std::min({next_arrival_s, send_end_s, now + 0.25});
      absl::SleepFor(absl::Seconds(wake - now));
    } else {
      const int64_t finished = tally.finished();
      if (sent - finished < arrival.closed_loop().concurrency()) {
        client.Start(source.Next(), done);
        ++sent;
        continue;
      }
      const double wake = std::min(send_end_s, now + 0.25);
      tally.AwaitMoreThan(finished, origin_abs + absl::Seconds(wake));
    }
  }

  // Drain: let the calls in flight finish, up to the timeout, then cancel what is left.
  const double drain_end_s = client.SecondsSinceOrigin() + options.drain_timeout_s;
  while (client.in_flight() > 0) {
    const double now = client.SecondsSinceOrigin();
    if (now >= drain_end_s) break;
    progress.Maybe(now, send_end_s, sent, tally, client.in_flight(), true);
    client.WaitForIdle(origin_abs + absl::Seconds(std::min(drain_end_s, now + 0.25)));
  }
  if (client.in_flight() > 0) {
    client.CancelAll();
    client.WaitForIdle(absl::InfiniteFuture());
  }
  progress.End();
  if (sampler.has_value()) {
    std::string error;
    result.memory = sampler->Stop(&error);
    if (result.memory.samples == 0) {
      std::fprintf(stderr, "convoy-bench: the server's memory was not read: %s\n", error.c_str());
    }
  }

  std::vector<RequestRecord> records = tally.Take();
  for (const RequestRecord& r : records) {
    result.elapsed_s = std::max(result.elapsed_s, r.end_s);
    if (r.completed) first_answer = std::min(first_answer, origin_abs + absl::Seconds(r.end_s));
  }
  if (options.server_started.has_value()) {
    result.cold_start_s = ColdStartSeconds(*options.server_started, first_answer);
  }
  std::vector<std::string> names;
  for (const v1::RequestClass& c : workload.request_class()) names.push_back(c.name());
  result.classes = ComputeStats(records, names, result.elapsed_s, options.slo);
  return result;
}

}  // namespace convoy::bench
