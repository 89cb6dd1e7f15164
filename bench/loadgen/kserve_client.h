// The KServe v2 protocol's client: one inference.GRPCInferenceService/ModelStreamInfer stream per
// request (the request written and the stream half-closed at once), its tokens counted from each
// response's output_ids, the end at triton_final_response: true (kserve_encoding.h has the
// messages). Same callback API and threads as the native client.
#ifndef CONVOY_BENCH_LOADGEN_KSERVE_CLIENT_H_
#define CONVOY_BENCH_LOADGEN_KSERVE_CLIENT_H_

#include <functional>
#include <memory>
#include <string>

#include "bench/loadgen/request_client.h"
#include "grpcpp/channel.h"
#include "inference/grpc_service.grpc.pb.h"

namespace convoy::bench {

class KServeClient final : public RequestClient {
 public:
  // `model`: the name the server serves (ModelInfo.name). Every call carries `api_key`
  // (client.h's AddApiKey).
  KServeClient(std::shared_ptr<grpc::Channel> channel, std::string model, std::string api_key,
               SteadyClock::time_point origin);

  void Start(const PlannedRequest& request, std::function<void(RequestRecord)> done) override;

 private:
  class Call;

  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  const std::string model_;
  const std::string api_key_;
};

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_KSERVE_CLIENT_H_
