// What the metrics observer costs the engine loop: once per step (OnStepPlanned) and once per
// generated token (OnInterTokenTime). No HTTP server: a scrape is not part of the cost.
#include <cstdint>
#include <memory>

#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "metrics/metrics.h"

namespace convoy {
namespace {

std::unique_ptr<Metrics> MakeMetrics(benchmark::State& state) {
  MetricsOptions options;
  options.serve_http = false;
  absl::StatusOr<std::unique_ptr<Metrics>> metrics = Metrics::Create(options);
  if (!metrics.ok()) {
    state.SkipWithError(metrics.status().ToString().c_str());
    return nullptr;
  }
  return *std::move(metrics);
}

void BM_MetricsOnStepPlanned(benchmark::State& state) {
  std::unique_ptr<Metrics> metrics = MakeMetrics(state);
  if (metrics == nullptr) return;
  StepStats step;
  step.num_rows = 64;
  step.num_prefill_rows = 2;
  step.num_decode_rows = 62;
  step.padded_length = 512;
  step.real_tokens = 62 + 700;
  step.padded_tokens = 64 * 512 - step.real_tokens;
  step.num_running = 64;
  step.kv_blocks_used = 3000;
  step.kv_blocks_free = 1096;
  step.queue_depth = {3, 10, 40};
  for (auto _ : state) metrics->OnStepPlanned(step);
}
BENCHMARK(BM_MetricsOnStepPlanned);

void BM_MetricsOnInterTokenTime(benchmark::State& state) {
  std::unique_ptr<Metrics> metrics = MakeMetrics(state);
  if (metrics == nullptr) return;
  absl::Duration gap = absl::Milliseconds(20);
  for (auto _ : state) {
    metrics->OnInterTokenTime(gap);
    gap += absl::Microseconds(1);
  }
}
BENCHMARK(BM_MetricsOnInterTokenTime);

}  // namespace
}  // namespace convoy
