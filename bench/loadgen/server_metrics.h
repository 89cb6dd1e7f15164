// What convoy-bench reads from a server's /metrics (the Prometheus text format): its resident
// memory and its KV cache's use, sampled through a run and summarised as peaks.
#ifndef CONVOY_BENCH_LOADGEN_SERVER_METRICS_H_
#define CONVOY_BENCH_LOADGEN_SERVER_METRICS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace convoy::bench {

// The value of one series of an exposition: `series` is its name with its labels as the server
// writes them (`convoy_config_reloads_total{result="applied"}`). NOT_FOUND when absent,
// INVALID_ARGUMENT (naming the line) when its value is not a number.
absl::StatusOr<double> FindSample(absl::string_view exposition, absl::string_view series);

// One scrape; -1 for what the exposition does not have.
struct ServerMetricsSample {
  double resident_bytes = -1;  // process_resident_memory_bytes
  double kv_usage = -1;        // convoy_kv_cache_usage_perc (0 to 1)
  double kv_blocks_used = -1;  // convoy_kv_cache_blocks_used
};
ServerMetricsSample ParseServerMetrics(absl::string_view exposition);

// The peaks of a run's scrapes.
struct ServerMemory {
  int64_t samples = 0;
  double peak_resident_bytes = -1;  // -1: no scrape had it
  double peak_kv_usage = -1;
  double peak_kv_blocks_used = -1;

  void Add(const ServerMetricsSample& sample);
};

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_SERVER_METRICS_H_
