// Reading a server's /metrics over HTTP while a run goes on: one scrape now and then on a thread of
// its own, kept as the run's peaks (server_metrics.h).
#ifndef CONVOY_BENCH_LOADGEN_METRICS_SAMPLER_H_
#define CONVOY_BENCH_LOADGEN_METRICS_SAMPLER_H_

#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "bench/loadgen/server_metrics.h"

namespace convoy::bench {

// GET http://ADDRESS/PATH (ADDRESS is HOST:PORT) with `Authorization: Bearer KEY` when `api_key`
// is not empty; the body of a 200 answer. UNAVAILABLE when the server cannot be reached or does
// not answer within `timeout`, or answers another status.
absl::StatusOr<std::string> HttpGetText(const std::string& address, const std::string& path,
                                        const std::string& api_key, absl::Duration timeout);

class MetricsSampler {
 public:
  // Scrapes http://ADDRESS/metrics at once and then every `interval` until Stop.
  MetricsSampler(std::string address, std::string api_key, absl::Duration interval);
  ~MetricsSampler();

  // Takes one last scrape and returns the peaks (samples == 0 when no scrape succeeded; the last
  // error in `error` then).
  ServerMemory Stop(std::string* error);

 private:
  void Scrape();

  const std::string address_;
  const std::string api_key_;
  absl::Notification stop_;
  absl::Mutex mu_;
  ServerMemory memory_ ABSL_GUARDED_BY(mu_);
  std::string error_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_METRICS_SAMPLER_H_
