// One measured run of a workload against a live server.
#ifndef CONVOY_BENCH_LOADGEN_RUNNER_H_
#define CONVOY_BENCH_LOADGEN_RUNNER_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/loadgen/report.h"
#include "bench/loadgen/request_client.h"
#include "bench/loadgen/stats.h"
#include "bench/loadgen/trace.h"
#include "bench/loadgen/workload.pb.h"
#include "grpcpp/channel.h"

namespace convoy::bench {

struct RunOptions {
  // Seconds to send for; 0: the workload's duration_s (unless a request count is given).
  double duration_s = 0;
  // > 0: send exactly this many requests (overrides the duration).
  int64_t num_requests = 0;
  // > 0: send in open loop at this rate (keeping the workload's pattern when it is open loop).
  double rate_rps = 0;
  // > 0: send in closed loop with this many in flight.
  int concurrency = 0;
  // After sending stops, how long requests in flight may take before they are cancelled.
  double drain_timeout_s = 60;
  // Requests sent one at a time before measuring (not counted), drawn from another seed.
  int warmup_requests = 2;
  SloTargets slo;
  bool progress = true;
  std::string config_label = "base";
  // When the server process was spawned (set for the first run after the load generator started
  // it): the result's cold start runs from here to the first answered request.
  std::optional<absl::Time> server_started;
  // The machine's price per hour, for the cost per 1,000 requests; 0: none.
  double price_per_hour = 0;
  // When set, the trace's requests are sent at their recorded times divided by rate_scale (the
  // workload must then be TraceWorkload(*trace, rate_scale); rate_rps and concurrency are
  // ignored). Must outlive the run.
  const Trace* trace = nullptr;
  double rate_scale = 1;
};

// A live server and the protocol to drive it with.
struct ServerTarget {
  Protocol protocol = Protocol::kNative;
  // convoy's gRPC port: the model's description always comes from there (GetModelInfo), and the
  // native and KServe requests go there.
  std::shared_ptr<grpc::Channel> channel;
  // HOST:PORT of the HTTP port; required for Protocol::kOpenAi.
  std::string http_address;
  // When not empty, every call carries it: gRPC `authorization: Bearer KEY` metadata (the model's
  // description included), HTTP `Authorization: Bearer KEY`.
  std::string api_key;
  // HOST:PORT serving the server's /metrics (convoyd's HTTP port serves it); empty: the server's
  // memory is not read.
  std::string metrics_address;
};

// The workload's arrival process with the options' rate or concurrency applied.
v1::Arrival EffectiveArrival(const v1::Workload& workload, const RunOptions& options);

// Asks the server for its model (name, vocabulary, context), then sends the workload's requests
// over the target's protocol and measures them; the warm-up requests go the same way. While the
// measured requests run, the target's /metrics (when given) is read every second for the
// server's peak memory and KV use. An error
// when the server cannot be reached; failed requests are counted in the result, not returned as
// errors.
absl::StatusOr<RunResult> RunWorkload(const ServerTarget& target, const v1::Workload& workload,
                                      const RunOptions& options);

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_RUNNER_H_
