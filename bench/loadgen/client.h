// The gRPC side of convoy-bench: InferStream calls on the callback API (many in flight, served by
// gRPC's own few threads), each measuring its tokens' arrival times, and the unary info calls.
#ifndef CONVOY_BENCH_LOADGEN_CLIENT_H_
#define CONVOY_BENCH_LOADGEN_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/loadgen/request_source.h"
#include "bench/loadgen/stats.h"
#include "convoy/v1/inference.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace convoy::bench {

using SteadyClock = std::chrono::steady_clock;

// A channel to `address` (HOST:PORT) with message size limits raised for long prompts.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address);

absl::StatusOr<convoy::v1::ModelInfo> FetchModelInfo(grpc::Channel* channel,
                                                     absl::Duration timeout);
absl::StatusOr<convoy::v1::ServerInfo> FetchServerInfo(grpc::Channel* channel,
                                                       absl::Duration timeout);

// Polls GetServerInfo until the server says SERVING; DEADLINE_EXCEEDED after `timeout`, or the
// error of `still_alive` when it returns one (e.g. the daemon exited).
absl::Status WaitUntilServing(grpc::Channel* channel, absl::Duration timeout,
                              const std::function<absl::Status()>& still_alive);

// Starts InferStream calls and keeps the set of those in flight, so that they can be cancelled.
// Thread-safe. Completion callbacks run on gRPC's threads and must not block.
class StreamClient {
 public:
  // Times in the records are seconds since `origin`.
  StreamClient(std::shared_ptr<grpc::Channel> channel, SteadyClock::time_point origin);
  // REQUIRES: no call in flight (WaitForIdle first).
  ~StreamClient();

  // Starts one call; `done` receives its record once it ends.
  void Start(const PlannedRequest& request, std::function<void(RequestRecord)> done);

  // Cancels every call in flight (each still reports through its `done`).
  void CancelAll();
  int64_t in_flight() const;
  // Blocks until no call is in flight or `deadline` passes; true when idle.
  bool WaitForIdle(absl::Time deadline);

  double SecondsSinceOrigin() const;

 private:
  class Call;
  void Finished(Call* call);

  std::unique_ptr<convoy::v1::Inference::Stub> stub_;
  const SteadyClock::time_point origin_;
  mutable absl::Mutex mu_;
  absl::flat_hash_set<Call*> calls_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_CLIENT_H_
