#include "bench/loadgen/kserve_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "bench/loadgen/client.h"
#include "bench/loadgen/kserve_encoding.h"

namespace convoy::bench {

// One ModelStreamInfer stream carrying one request. Owns itself: deleted after it reports in
// OnDone. The server ends the stream (OK) once it has answered the request, since the client
// half-closed it after the request.
class KServeClient::Call final
    : public RequestClient::Call,
      public grpc::ClientBidiReactor<inference::ModelInferRequest,
                                     inference::ModelStreamInferResponse> {
 public:
  Call(KServeClient* client, const PlannedRequest& planned, std::function<void(RequestRecord)> done)
      : RequestClient::Call(client, planned, std::move(done)),
        request_(BuildKServeRequest(planned, client->model_)) {}

  void Go(inference::GRPCInferenceService::Stub* stub, const std::string& api_key) {
    AddApiKey(api_key, context_);
    stub->async()->ModelStreamInfer(&context_, this);
    Sent();
    StartWriteLast(&request_, grpc::WriteOptions());
    StartRead(&response_);
    StartCall();
  }

  void Cancel() override { context_.TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone follows
    const KServeStreamMessage message = ReadKServeStreamMessage(response_);
    if (!message.error.empty()) {
      error_ = message.error;
    } else {
      TokensArrived(message.output_ids);
      if (message.final) {
        final_ = true;
        finish_reason_ = message.finish_reason;
      }
    }
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    if (!status.ok()) {
      Report(absl::StrCat("grpc ", status.error_code(), ": ", status.error_message()));
    } else if (!error_.empty()) {
      Report(error_);
    } else if (!final_) {
      Report("the stream ended before triton_final_response");
    } else if (finish_reason_ == "length" || finish_reason_ == "stop") {
      Report("");
    } else {
      Report(absl::StrCat("finish_reason '", finish_reason_, "'"));
    }
    delete this;
  }

 private:
  grpc::ClientContext context_;
  const inference::ModelInferRequest request_;
  inference::ModelStreamInferResponse response_;
  std::string error_;  // the stream's error_message for the request
  bool final_ = false;
  std::string finish_reason_;
};

KServeClient::KServeClient(std::shared_ptr<grpc::Channel> channel, std::string model,
                           std::string api_key, SteadyClock::time_point origin)
    : RequestClient(origin),
      stub_(inference::GRPCInferenceService::NewStub(std::move(channel))),
      model_(std::move(model)),
      api_key_(std::move(api_key)) {}

void KServeClient::Start(const PlannedRequest& request, std::function<void(RequestRecord)> done) {
  Call* call = new Call(this, request, std::move(done));
  Register(call);
  call->Go(stub_.get(), api_key_);
}

}  // namespace convoy::bench
