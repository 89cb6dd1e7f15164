#include "metrics/metrics.h"

#include <unistd.h>

#include <exception>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "http/http_exchange.h"
#include "metrics/logging.h"
#include "prometheus/text_serializer.h"

namespace convoy {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

// The process's resident set in bytes (/proc/self/statm's second field, in pages); -1 where that
// cannot be read.
int64_t ResidentMemoryBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size_pages = 0;
  int64_t resident_pages = 0;
  if (!(statm >> size_pages >> resident_pages)) return -1;
  return resident_pages * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

// Request-level latencies (queue time, TTFT, end to end): 1 ms to over 10 minutes.
const Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* const buckets = new Histogram::BucketBoundaries{
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,   0.25,  0.5,  1.0,
      2.5,   5.0,    10.0,  20.0, 40.0,  80.0, 160.0, 320.0, 640.0};
  return *buckets;
}

// A refusal should take well under a millisecond: buckets from 50 us.
const Histogram::BucketBoundaries& RefusalBuckets() {
  static const auto* const buckets =
      new Histogram::BucketBoundaries{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                      0.025,   0.05,   0.1,     0.25,   0.5,   1.0,    2.5,   5.0};
  return *buckets;
}

// Between two tokens: finer where GPU (ms) and CPU (tens to hundreds of ms) decode steps fall;
// below 5 ms every half millisecond or so, since a GPU decode step takes 1 to 7 ms and whether
// serving comes within a few percent of it (docs/perf/gpu.md) shows only at that grain.
const Histogram::BucketBoundaries& InterTokenBuckets() {
  static const auto* const buckets = new Histogram::BucketBoundaries{
      0.001, 0.0015, 0.002, 0.0025, 0.003, 0.004, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.04,
      0.05,  0.075,  0.1,   0.15,   0.2,   0.3,   0.5,   0.75,   1.0,  2.5,   5.0,  10.0, 20.0};
  return *buckets;
}

// One phase of a step: from a microsecond (handing a step to a device) to seconds (a long CPU
// prefill).
const Histogram::BucketBoundaries& StepPhaseBuckets() {
  static const auto* const buckets = new Histogram::BucketBoundaries{
      1e-6, 2.5e-6, 5e-6,   1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3,
      5e-3, 1e-2,   2.5e-2, 5e-2, 0.1,    0.25, 0.5,  1.0,    2.5,  5.0,  10.0};
  return *buckets;
}

// Tokens per request: 1, 2, 5, 10, ... 200000.
const Histogram::BucketBoundaries& TokenCountBuckets() {
  static const auto* const buckets = [] {
    auto* b = new Histogram::BucketBoundaries;
    for (double decade = 1; decade <= 100000; decade *= 10) {
      for (double m : {1.0, 2.0, 5.0}) b->push_back(m * decade);
    }
    return b;
  }();
  return *buckets;
}

// Powers of two from 1 to `max`.
Histogram::BucketBoundaries PowersOfTwo(double max) {
  Histogram::BucketBoundaries b;
  for (double v = 1; v <= max; v *= 2) b.push_back(v);
  return b;
}

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

// Triton's failure reasons.
constexpr char kRejected[] = "REJECTED";
constexpr char kCanceled[] = "CANCELED";
constexpr char kBackend[] = "BACKEND";

absl::Status ValidateOptions(const MetricsOptions& options) {
  if (!options.serve_http) return absl::OkStatus();
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics port ", options.port, " is outside 0..65535"));
  }
  if (options.listen_address.empty()) {
    return absl::InvalidArgumentError("the metrics listen address is empty");
  }
  if (!absl::StartsWith(options.path, "/")) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics path \"", options.path, "\" does not start with '/'"));
  }
  if (options.priority_levels < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics priority_levels ", options.priority_levels, " is below 1"));
  }
  return absl::OkStatus();
}

// host:port, with IPv6 hosts in brackets, for messages.
std::string ListenSpec(const std::string& address, int32_t port) {
  const bool bare_ipv6 = absl::StrContains(address, ':') && !absl::StartsWith(address, "[");
  return bare_ipv6 ? absl::StrCat("[", address, "]:", port) : absl::StrCat(address, ":", port);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Create(const MetricsOptions& options) {
  if (absl::Status status = ValidateOptions(options); !status.ok()) return status;
  std::unique_ptr<Metrics> metrics;
  try {
    metrics.reset(new Metrics(std::make_shared<prometheus::Registry>()));
    for (int32_t level = 1; level <= options.priority_levels; ++level) {
      metrics->WaitingGauge(level);
      metrics->QueueTimeHistogram(level);
    }
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("registering the metrics failed: ", e.what()));
  }
  if (!options.serve_http) return metrics;

  HttpRouter router;
  if (absl::Status added = metrics->AddHttpRoute(options.path, &router); !added.ok()) return added;
  HttpServerOptions server_options;
  server_options.listen_address = options.listen_address;
  server_options.port = options.port;
  server_options.io_threads = 1;  // a scrape now and then
  server_options.thread_name = "metrics";
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start(server_options, std::move(router));
  if (!server.ok()) {
    return absl::Status(
        server.status().code(),
        absl::StrCat("cannot serve metrics on ", ListenSpec(options.listen_address, options.port),
                     options.path, ": ", server.status().message()));
  }
  metrics->server_ = *std::move(server);
  metrics->port_ = metrics->server_->port();
  return metrics;
}

Metrics::Metrics(std::shared_ptr<prometheus::Registry> registry) : registry_(std::move(registry)) {
  prometheus::Registry& r = *registry_;

  // Gauges.
  waiting_ = &BuildGauge()
                  .Name("convoy_num_requests_waiting")
                  .Help("Requests waiting in the queues, all priority levels.")
                  .Register(r)
                  .Add({});
  waiting_by_priority_family_ = &BuildGauge()
                                     .Name("convoy_num_requests_waiting_by_priority")
                                     .Help("Requests waiting in the queue of each priority level.")
                                     .Register(r);
  running_ = &BuildGauge()
                  .Name("convoy_num_requests_running")
                  .Help("Requests in the running batch.")
                  .Register(r)
                  .Add({});
  kv_usage_ = &BuildGauge()
                   .Name("convoy_kv_cache_usage_perc")
                   .Help("Fraction of KV cache blocks in use (0 to 1).")
                   .Register(r)
                   .Add({});
  kv_blocks_used_ = &BuildGauge()
                         .Name("convoy_kv_cache_blocks_used")
                         .Help("KV cache blocks in use.")
                         .Register(r)
                         .Add({});
  kv_blocks_free_ = &BuildGauge()
                         .Name("convoy_kv_cache_blocks_free")
                         .Help("KV cache blocks free.")
                         .Register(r)
                         .Add({});
  prefix_cache_blocks_ = &BuildGauge()
                              .Name("convoy_prefix_cache_blocks")
                              .Help(
                                  "KV cache blocks whose content is cached for reuse (in use "
                                  "or not).")
                              .Register(r)
                              .Add({});
  log_lines_dropped_ = &BuildGauge()
                            .Name("convoy_log_lines_dropped_total")
                            .Help(
                                "Log lines dropped because the log's queue was full (a slow "
                                "sink), since start.")
                            .Register(r)
                            .Add({});
  resident_memory_ = &BuildGauge()
                          .Name("process_resident_memory_bytes")
                          .Help("Resident memory size of the server process in bytes.")
                          .Register(r)
                          .Add({});

  // Histograms.
  queue_time_family_ = &BuildHistogram()
                            .Name("convoy_request_queue_time_seconds")
                            .Help("Arrival to the first step that holds the request.")
                            .Register(r);
  ttft_ = &BuildHistogram()
               .Name("convoy_time_to_first_token_seconds")
               .Help("Arrival to the first generated token.")
               .Register(r)
               .Add({}, LatencyBuckets());
  inter_token_ = &BuildHistogram()
                      .Name("convoy_inter_token_latency_seconds")
                      .Help("Time between two consecutive tokens of a request.")
                      .Register(r)
                      .Add({}, InterTokenBuckets());
  request_time_per_output_token_ =
      &BuildHistogram()
           .Name("convoy_request_time_per_output_token_seconds")
           .Help(
               "A request's mean time between its generated tokens: first token to final "
               "response over generated tokens - 1 (requests with two tokens or more).")
           .Register(r)
           .Add({}, InterTokenBuckets());
  e2e_ = &BuildHistogram()
              .Name("convoy_e2e_request_latency_seconds")
              .Help("Arrival to the final response of a request that was not rejected.")
              .Register(r)
              .Add({}, LatencyBuckets());
  refusal_latency_ = &BuildHistogram()
                          .Name("convoy_request_refusal_seconds")
                          .Help("Arrival at the front end to the refusal of a rejected request.")
                          .Register(r)
                          .Add({}, RefusalBuckets());
  request_prompt_tokens_ = &BuildHistogram()
                                .Name("convoy_request_prompt_tokens")
                                .Help("Prompt tokens per request.")
                                .Register(r)
                                .Add({}, TokenCountBuckets());
  request_generation_tokens_ = &BuildHistogram()
                                    .Name("convoy_request_generation_tokens")
                                    .Help("Generated tokens per request.")
                                    .Register(r)
                                    .Add({}, TokenCountBuckets());
  step_sequences_ = &BuildHistogram()
                         .Name("convoy_iteration_sequences")
                         .Help("Sequences (rows) per engine step.")
                         .Register(r)
                         .Add({}, PowersOfTwo(1024));
  step_tokens_ = &BuildHistogram()
                      .Name("convoy_iteration_tokens_total")
                      .Help("Tokens computed per engine step, padding excluded.")
                      .Register(r)
                      .Add({}, PowersOfTwo(65536));
  auto& phases =
      BuildHistogram()
          .Name("convoy_engine_step_phase_seconds")
          .Help(
              "Time per engine step in each phase: plan, launch, emit, plan_ahead, wait "
              "and apply on the engine thread; engine_thread, their sum less waiting (and less "
              "launch when the step runs on the engine thread); the executor's own "
              "prepare, forward and sample.")
          .Register(r);
  for (const char* phase : {"plan", "launch", "emit", "plan_ahead", "wait", "apply",
                            "engine_thread", "prepare", "forward", "sample"}) {
    step_phase_.push_back(&phases.Add({{"phase", phase}}, StepPhaseBuckets()));
  }

  slow_clients_ = &BuildCounter()
                       .Name("convoy_slow_clients_total")
                       .Help(
                           "Requests cancelled because their client left the output unread "
                           "for longer than frontend.slow_client_timeout_microseconds.")
                       .Register(r)
                       .Add({});

  // Config reloads.
  auto& reloads = BuildCounter()
                      .Name("convoy_config_reloads_total")
                      .Help("Config reloads (SIGHUP or a changed file), applied or refused.")
                      .Register(r);
  reloads_applied_ = &reloads.Add({{"result", "applied"}});
  reloads_refused_ = &reloads.Add({{"result", "refused"}});
  config_info_family_ = &BuildGauge()
                             .Name("convoy_config_info")
                             .Help(
                                 "1 for the config in force, labelled with its hash (convoy "
                                 "info shows the config and the same hash).")
                             .Register(r);

  // Counters.
  auto& outcomes = BuildCounter()
                       .Name("convoy_requests_total")
                       .Help("Requests that ended, by outcome.")
                       .Register(r);
  for (int i = 0; i < kNumOutcomes; ++i) {
    requests_by_outcome_[i] = &outcomes.Add({{"outcome", OutcomeName(static_cast<Outcome>(i))}});
  }
  auto& rejections = BuildCounter()
                         .Name("convoy_requests_rejected_total")
                         .Help("Requests refused at admission, by reason.")
                         .Register(r);
  for (int i = 0; i < kNumRejectReasons; ++i) {
    rejected_by_reason_[i] =
        &rejections.Add({{"reason", RejectReasonName(static_cast<RejectReason>(i))}});
  }
  auto& success = BuildCounter()
                      .Name("convoy_request_success_total")
                      .Help("Requests that completed, by finish reason (stop token or length).")
                      .Register(r);
  success_stop_ = &success.Add({{"finished_reason", "stop"}});
  success_length_ = &success.Add({{"finished_reason", "length"}});
  preemptions_ = &BuildCounter()
                      .Name("convoy_num_preemptions_total")
                      .Help("Running requests preempted to free KV cache blocks.")
                      .Register(r)
                      .Add({});
  prefix_cache_queries_ = &BuildCounter()
                               .Name("convoy_prefix_cache_queries_total")
                               .Help("Prompt tokens looked up in the prefix cache at admission.")
                               .Register(r)
                               .Add({});
  prefix_cache_hits_ = &BuildCounter()
                            .Name("convoy_prefix_cache_hits_total")
                            .Help("Prompt tokens found in the prefix cache (not recomputed).")
                            .Register(r)
                            .Add({});
  prefix_cache_evictions_ = &BuildCounter()
                                 .Name("convoy_prefix_cache_evictions_total")
                                 .Help(
                                     "Cached KV blocks evicted to make room, least recently "
                                     "used first.")
                                 .Register(r)
                                 .Add({});
  prompt_tokens_ = &BuildCounter()
                        .Name("convoy_prompt_tokens_total")
                        .Help("Prompt tokens computed by prefill (recomputation included).")
                        .Register(r)
                        .Add({});
  generation_tokens_ = &BuildCounter()
                            .Name("convoy_generation_tokens_total")
                            .Help("Tokens generated.")
                            .Register(r)
                            .Add({});
  padded_tokens_ = &BuildCounter()
                        .Name("convoy_padded_tokens_total")
                        .Help("Padding tokens computed by steps (rows x longest row - real).")
                        .Register(r)
                        .Add({});
  nv_success_ = &BuildCounter()
                     .Name("convoy_nv_inference_request_success")
                     .Help("Requests that completed (Triton's nv_inference_request_success).")
                     .Register(r)
                     .Add({});
  auto& failure = BuildCounter()
                      .Name("convoy_nv_inference_request_failure")
                      .Help("Requests that did not complete, by Triton's failure reason.")
                      .Register(r);
  nv_failure_rejected_ = &failure.Add({{"reason", kRejected}});
  nv_failure_canceled_ = &failure.Add({{"reason", kCanceled}});
  nv_failure_backend_ = &failure.Add({{"reason", kBackend}});
  nv_inference_count_ = &BuildCounter()
                             .Name("convoy_nv_inference_count")
                             .Help("Rows computed over all steps (Triton's nv_inference_count).")
                             .Register(r)
                             .Add({});
  nv_exec_count_ = &BuildCounter()
                        .Name("convoy_nv_inference_exec_count")
                        .Help("Steps executed (Triton's nv_inference_exec_count).")
                        .Register(r)
                        .Add({});
  nv_queue_duration_us_ = &BuildCounter()
                               .Name("convoy_nv_inference_queue_duration_us")
                               .Help("Cumulative queue time of requests, in microseconds.")
                               .Register(r)
                               .Add({});
}

Metrics::~Metrics() = default;

std::string Metrics::Serialize() const {
  log_lines_dropped_->Set(static_cast<double>(DroppedLogLines()));
  if (const int64_t resident = ResidentMemoryBytes(); resident >= 0) {
    resident_memory_->Set(static_cast<double>(resident));
  }
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

absl::Status Metrics::AddHttpRoute(const std::string& path, HttpRouter* router) const {
  return router->Add("GET", path, [this](const HttpRequest&, std::shared_ptr<HttpExchange> x) {
    x->Respond(200, "text/plain; version=0.0.4; charset=utf-8", Serialize()).IgnoreError();
  });
}

void Metrics::OnSlowClient() { slow_clients_->Increment(); }

void Metrics::OnConfigReload(bool applied) {
  (applied ? reloads_applied_ : reloads_refused_)->Increment();
}

void Metrics::SetConfigHash(const std::string& hash) {
  absl::MutexLock lock(&config_mu_);
  if (config_info_ != nullptr) config_info_family_->Remove(config_info_);
  config_info_ = &config_info_family_->Add({{"hash", hash}});
  config_info_->Set(1);
}

prometheus::Gauge& Metrics::WaitingGauge(int32_t level) {
  absl::MutexLock lock(&levels_mu_);
  if (static_cast<int32_t>(waiting_by_level_.size()) < level) waiting_by_level_.resize(level);
  prometheus::Gauge*& gauge = waiting_by_level_[level - 1];
  if (gauge == nullptr) {
    gauge = &waiting_by_priority_family_->Add({{"priority", absl::StrCat(level)}});
  }
  return *gauge;
}

prometheus::Histogram& Metrics::QueueTimeHistogram(int32_t level) {
  absl::MutexLock lock(&levels_mu_);
  if (static_cast<int32_t>(queue_time_by_level_.size()) < level) {
    queue_time_by_level_.resize(level);
  }
  prometheus::Histogram*& histogram = queue_time_by_level_[level - 1];
  if (histogram == nullptr) {
    histogram = &queue_time_family_->Add({{"priority", absl::StrCat(level)}}, LatencyBuckets());
  }
  return *histogram;
}

void Metrics::OnStepPlanned(const StepStats& stats) {
  running_->Set(stats.num_running);
  int64_t waiting = 0;
  for (size_t i = 0; i < stats.queue_depth.size(); ++i) {
    WaitingGauge(static_cast<int32_t>(i) + 1).Set(static_cast<double>(stats.queue_depth[i]));
    waiting += stats.queue_depth[i];
  }
  waiting_->Set(static_cast<double>(waiting));
  const int64_t blocks = int64_t{stats.kv_blocks_used} + stats.kv_blocks_free;
  kv_usage_->Set(blocks == 0 ? 0.0 : static_cast<double>(stats.kv_blocks_used) / blocks);
  kv_blocks_used_->Set(stats.kv_blocks_used);
  kv_blocks_free_->Set(stats.kv_blocks_free);
  prefix_cache_blocks_->Set(stats.kv_blocks_cached);
  prefix_cache_queries_->Increment(static_cast<double>(stats.prefix_cache_queries));
  prefix_cache_hits_->Increment(static_cast<double>(stats.prefix_cache_hits));
  prefix_cache_evictions_->Increment(static_cast<double>(stats.prefix_cache_evictions));
  if (stats.num_rows == 0) return;

  step_sequences_->Observe(stats.num_rows);
  step_tokens_->Observe(static_cast<double>(stats.real_tokens));
  // A decode row computes one token; the rest of the step's tokens are prompt chunks.
  prompt_tokens_->Increment(static_cast<double>(stats.real_tokens - stats.num_decode_rows));
  padded_tokens_->Increment(static_cast<double>(stats.padded_tokens));
  nv_inference_count_->Increment(stats.num_rows);
  nv_exec_count_->Increment();
}

void Metrics::OnRejected(RejectReason reason) {
  rejected_by_reason_[static_cast<int>(reason)]->Increment();
  requests_by_outcome_[static_cast<int>(Outcome::kRejected)]->Increment();
  nv_failure_rejected_->Increment();
}

void Metrics::OnRefusalLatency(absl::Duration time_to_refusal) {
  refusal_latency_->Observe(Seconds(time_to_refusal));
}

void Metrics::OnPreempted(RequestId /*id*/) { preemptions_->Increment(); }

void Metrics::OnQueueTime(int32_t priority_level, absl::Duration queue_time) {
  if (priority_level >= 1) QueueTimeHistogram(priority_level).Observe(Seconds(queue_time));
  nv_queue_duration_us_->Increment(absl::ToDoubleMicroseconds(queue_time));
}

void Metrics::OnFirstToken(absl::Duration time_to_first_token) {
  ttft_->Observe(Seconds(time_to_first_token));
  generation_tokens_->Increment();
}

void Metrics::OnStepPhases(const StepPhases& p) {
  const absl::Duration each[] = {p.plan,
                                 p.launch,
                                 p.emit,
                                 p.plan_ahead,
                                 p.wait,
                                 p.apply,
                                 p.engine_thread,
                                 p.executor.prepare,
                                 p.executor.forward,
                                 p.executor.sample};
  for (size_t i = 0; i < step_phase_.size(); ++i) step_phase_[i]->Observe(Seconds(each[i]));
}

void Metrics::OnInterTokenTime(absl::Duration time_between_tokens) {
  inter_token_->Observe(Seconds(time_between_tokens));
  generation_tokens_->Increment();
}

void Metrics::CountOutcome(Outcome outcome) {
  requests_by_outcome_[static_cast<int>(outcome)]->Increment();
  switch (outcome) {
    case Outcome::kCompleteStop:
      success_stop_->Increment();
      nv_success_->Increment();
      break;
    case Outcome::kCompleteLength:
      success_length_->Increment();
      nv_success_->Increment();
      break;
    case Outcome::kCancelled:
      nv_failure_canceled_->Increment();
      break;
    case Outcome::kTimedOut:  // Triton rejects a request whose queue timeout expires
    case Outcome::kRejected:
      nv_failure_rejected_->Increment();
      break;
    case Outcome::kFailed:
      nv_failure_backend_->Increment();
      break;
  }
}

void Metrics::OnRequestDone(Outcome outcome, int64_t prompt_tokens, int64_t generated_tokens,
                            absl::Duration e2e_latency) {
  if (outcome == Outcome::kRejected) {
    OnRefusalLatency(e2e_latency);
    return;
  }
  CountOutcome(outcome);
  e2e_->Observe(Seconds(e2e_latency));
  request_prompt_tokens_->Observe(static_cast<double>(prompt_tokens));
  request_generation_tokens_->Observe(static_cast<double>(generated_tokens));
}

void Metrics::OnRequestDone(const RequestSummary& summary) {
  OnRequestDone(summary.outcome, summary.prompt_tokens, summary.generated_tokens,
                summary.e2e_latency);
  // The request's mean inter-token time, the measure of a per-request ITL SLO (convoy-bench's
  // goodput and tune --watch hold a request to it), which the gaps' histogram cannot give.
  if (summary.outcome != Outcome::kRejected && summary.time_to_first_token.has_value() &&
      summary.generated_tokens >= 2) {
    request_time_per_output_token_->Observe(
        Seconds(summary.e2e_latency - *summary.time_to_first_token) /
        static_cast<double>(summary.generated_tokens - 1));
  }
}

}  // namespace convoy
