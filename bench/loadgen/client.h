// The gRPC side of convoy-bench: the channel, the unary info calls, and the native protocol's
// client (convoy.v1 InferStream, each call measuring its tokens' arrival times).
#ifndef CONVOY_BENCH_LOADGEN_CLIENT_H_
#define CONVOY_BENCH_LOADGEN_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/loadgen/request_client.h"
#include "convoy/v1/inference.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace convoy::bench {

// A channel to `address` (HOST:PORT) with message size limits raised for long prompts.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address);

// Every gRPC call below takes `api_key`: when not empty, the call carries it as
// `authorization: Bearer KEY` metadata (a server with keys configured refuses calls without one).
void AddApiKey(const std::string& api_key, grpc::ClientContext& context);

absl::StatusOr<convoy::v1::ModelInfo> FetchModelInfo(grpc::Channel* channel, absl::Duration timeout,
                                                     const std::string& api_key);
absl::StatusOr<convoy::v1::ServerInfo> FetchServerInfo(grpc::Channel* channel,
                                                       absl::Duration timeout,
                                                       const std::string& api_key);

// Polls GetServerInfo until the server says SERVING; DEADLINE_EXCEEDED after `timeout`, or the
// error of `still_alive` when it returns one (e.g. the daemon exited).
absl::Status WaitUntilServing(grpc::Channel* channel, absl::Duration timeout,
                              const std::string& api_key,
                              const std::function<absl::Status()>& still_alive);

// convoy.v1 InferStream calls on the callback API: many in flight, served by gRPC's own few
// threads.
class StreamClient final : public RequestClient {
 public:
  // Times in the records are seconds since `origin`; every call carries `api_key` (AddApiKey).
  StreamClient(std::shared_ptr<grpc::Channel> channel, std::string api_key,
               SteadyClock::time_point origin);

  void Start(const PlannedRequest& request, std::function<void(RequestRecord)> done) override;

 private:
  class Call;

  std::unique_ptr<convoy::v1::Inference::Stub> stub_;
  const std::string api_key_;
};

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_CLIENT_H_
