// Prometheus metrics of the server (prometheus-cpp), served over HTTP by an HttpServer of their own
// (default 0.0.0.0:8002/metrics), and by any other server given the route (AddHttpRoute).
// docs/metrics.md lists every metric: name, type, labels, meaning, and the vLLM or Triton metric it
// mirrors.
//
// Two sources feed it, and each thing is counted by exactly one of them:
//  - the scheduler, through the SchedulerObserver interface (pass the Metrics to
//    Scheduler::Create or EngineLoopOptions::observer): per-step statistics, gauges, queue time,
//    TTFT, inter-token latency, preemptions and the scheduler's own rejections;
//  - the front end, at a request's end: OnRequestDone (the outcome the client saw, end-to-end
//    latency, prompt and generated tokens per request), and OnRejected for a request refused
//    before the scheduler saw it (a kRejected final event was already counted by the scheduler).
//    The outcome is the front end's to count: a request it ends at a stop string or at its own
//    deadline reaches the scheduler as a cancellation, yet completed or timed out.
//
// Thread-safe: every method may be called from any thread.
#ifndef CONVOY_METRICS_METRICS_H_
#define CONVOY_METRICS_METRICS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "http/http_router.h"
#include "http/http_server.h"
#include "metrics/request_summary.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "scheduler/request.h"
#include "scheduler/scheduler_metrics.h"

namespace convoy {

struct MetricsOptions {
  // false: no HTTP endpoint; read the metrics through Serialize() or registry() (tests).
  bool serve_http = true;
  // An IPv4 or IPv6 address (brackets optional) to listen on.
  std::string listen_address = "0.0.0.0";
  // 0: any free port (read it back with port()).
  int32_t port = 8002;
  std::string path = "/metrics";
  // The per-priority series of levels 1..priority_levels exist (at 0) from the start; higher
  // levels appear on first use.
  int32_t priority_levels = 1;
};

class Metrics : public SchedulerObserver {
 public:
  // INVALID_ARGUMENT for bad options; UNAVAILABLE when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<Metrics>> Create(const MetricsOptions& options);
  // Stops the HTTP server.
  ~Metrics() override;

  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // The port the HTTP server listens on (the one picked when options.port was 0); 0 without
  // HTTP.
  int32_t port() const { return port_; }
  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }
  // Every metric in the Prometheus text format, as the endpoint serves it.
  std::string Serialize() const;
  // Adds GET `path` (HEAD too) to `router`, answering Serialize() as text/plain (version 0.0.4).
  // The metrics must outlive the server that serves the route.
  absl::Status AddHttpRoute(const std::string& path, HttpRouter* router) const;

  // SchedulerObserver. A StepStats with num_rows == 0 refreshes the gauges only (state reported
  // while no step runs).
  void OnStepPlanned(const StepStats& stats) override;
  // Counts one refused request. The scheduler calls it for its own refusals; the front end calls
  // it for refusals of EngineLoop::Submit (RESOURCE_EXHAUSTED: kQueueFull, INVALID_ARGUMENT:
  // kInvalidArgument).
  void OnRejected(RejectReason reason) override;
  // How long a refused request took to be refused, from its arrival at the front end
  // (convoy_request_refusal_seconds): at the door (the front end's, with OnRejected) or by the
  // scheduler (OnRequestDone with kRejected).
  void OnRefusalLatency(absl::Duration time_to_refusal);
  void OnPreempted(RequestId id) override;
  void OnQueueTime(int32_t priority_level, absl::Duration queue_time) override;
  void OnFirstToken(absl::Duration time_to_first_token) override;
  void OnInterTokenTime(absl::Duration time_between_tokens) override;
  void OnStepPhases(const StepPhases& phases) override;

  // The front end, once per request at its final event. Counts its outcome (as the client saw
  // it), fills the end-to-end latency and the per-request token histograms; for kRejected only
  // the refusal latency (OnRejected counts those).
  void OnRequestDone(Outcome outcome, int64_t prompt_tokens, int64_t generated_tokens,
                     absl::Duration e2e_latency);
  // The same, and the request's mean time per output token
  // (convoy_request_time_per_output_token_seconds) when it generated two tokens or more.
  void OnRequestDone(const RequestSummary& summary);

  // A request ended because its client left its output unread for longer than
  // frontend.slow_client_timeout_microseconds (convoy_slow_clients_total).
  void OnSlowClient();
  // convoyd's config reloads: one more applied or refused (convoy_config_reloads_total).
  void OnConfigReload(bool applied);
  // The config in force: convoy_config_info{hash="..."} is 1 for it (and only it).
  void SetConfigHash(const std::string& hash);

 private:
  explicit Metrics(std::shared_ptr<prometheus::Registry> registry);

  // One accepted request ended this way (not kRejected: OnRejected counts those).
  void CountOutcome(Outcome outcome);

  // Series of one priority level (1-based), created on first use.
  prometheus::Gauge& WaitingGauge(int32_t level);
  prometheus::Histogram& QueueTimeHistogram(int32_t level);

  // Constant after construction (the metrics themselves are thread-safe).
  const std::shared_ptr<prometheus::Registry> registry_;
  int32_t port_ = 0;

  prometheus::Family<prometheus::Gauge>* waiting_by_priority_family_ = nullptr;
  prometheus::Family<prometheus::Histogram>* queue_time_family_ = nullptr;

  prometheus::Gauge* waiting_ = nullptr;
  prometheus::Gauge* running_ = nullptr;
  prometheus::Gauge* kv_usage_ = nullptr;
  prometheus::Gauge* kv_blocks_used_ = nullptr;
  prometheus::Gauge* kv_blocks_free_ = nullptr;
  prometheus::Gauge* prefix_cache_blocks_ = nullptr;
  prometheus::Gauge* log_lines_dropped_ = nullptr;  // set at each scrape
  prometheus::Gauge* resident_memory_ = nullptr;    // set at each scrape

  prometheus::Histogram* ttft_ = nullptr;
  prometheus::Histogram* inter_token_ = nullptr;
  prometheus::Histogram* request_time_per_output_token_ = nullptr;
  prometheus::Histogram* e2e_ = nullptr;
  prometheus::Histogram* refusal_latency_ = nullptr;
  prometheus::Histogram* request_prompt_tokens_ = nullptr;
  prometheus::Histogram* request_generation_tokens_ = nullptr;
  prometheus::Histogram* step_sequences_ = nullptr;
  prometheus::Histogram* step_tokens_ = nullptr;
  // convoy_engine_step_phase_seconds, in OnStepPhases' order.
  std::vector<prometheus::Histogram*> step_phase_;

  std::array<prometheus::Counter*, kNumOutcomes> requests_by_outcome_{};
  std::array<prometheus::Counter*, kNumRejectReasons> rejected_by_reason_{};
  prometheus::Counter* success_stop_ = nullptr;    // vLLM request_success_total{stop}
  prometheus::Counter* success_length_ = nullptr;  // vLLM request_success_total{length}
  prometheus::Counter* preemptions_ = nullptr;
  prometheus::Counter* prefix_cache_queries_ = nullptr;  // vLLM prefix_cache_queries
  prometheus::Counter* prefix_cache_hits_ = nullptr;     // vLLM prefix_cache_hits
  prometheus::Counter* prefix_cache_evictions_ = nullptr;
  prometheus::Counter* prompt_tokens_ = nullptr;
  prometheus::Counter* generation_tokens_ = nullptr;
  prometheus::Counter* padded_tokens_ = nullptr;
  // Triton's counters.
  prometheus::Counter* nv_success_ = nullptr;
  prometheus::Counter* nv_failure_rejected_ = nullptr;
  prometheus::Counter* nv_failure_canceled_ = nullptr;
  prometheus::Counter* nv_failure_backend_ = nullptr;
  prometheus::Counter* nv_inference_count_ = nullptr;
  prometheus::Counter* nv_exec_count_ = nullptr;
  prometheus::Counter* nv_queue_duration_us_ = nullptr;

  prometheus::Counter* slow_clients_ = nullptr;
  prometheus::Counter* reloads_applied_ = nullptr;
  prometheus::Counter* reloads_refused_ = nullptr;
  prometheus::Family<prometheus::Gauge>* config_info_family_ = nullptr;

  absl::Mutex config_mu_;
  prometheus::Gauge* config_info_ ABSL_GUARDED_BY(config_mu_) = nullptr;

  absl::Mutex levels_mu_;
  // Index level - 1.
  std::vector<prometheus::Gauge*> waiting_by_level_ ABSL_GUARDED_BY(levels_mu_);
  std::vector<prometheus::Histogram*> queue_time_by_level_ ABSL_GUARDED_BY(levels_mu_);

  // Last: stops serving before the metrics go away.
  std::unique_ptr<HttpServer> server_;
};

}  // namespace convoy

#endif  // CONVOY_METRICS_METRICS_H_
