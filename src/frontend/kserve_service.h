// KServe's Open Inference Protocol v2 over gRPC (inference.GRPCInferenceService,
// proto/inference/grpc_service.proto), as Triton serves LLMs: the adapter that lets tritonclient
// and other KServe v2 clients use convoyd. It serves one model, named as the server's model
// (version "1"), whose tensors frontend/kserve_tensors.h lists, over the same GenerationHub as
// convoy.v1.Inference: the same validation, admission, deadlines and cancellation.
//
// ModelInfer answers with the whole result. ModelStreamInfer takes any number of requests on one
// stream and answers each decoupled, as Triton's decoupled models do: one response per chunk of
// new tokens (fewer, larger chunks when the client reads slowly), the last one with the
// parameter triton_final_response = true (the others have it false); with stream: false one
// response holds the whole result. A request that fails gets a stream message with its
// error_message (and triton_final_response = true), and the stream stays open. A client that
// cancels the stream cancels its requests, which frees their KV blocks.
//
// Final responses also carry the parameters finish_reason ("length" or "stop"), prompt_tokens
// and completion_tokens. Errors are INVALID_ARGUMENT naming the input, parameter or output at
// fault (or inference.ModelInferRequest, for bytes that are not one), and otherwise the codes of
// convoy's own API (UNAVAILABLE while loading or draining, RESOURCE_EXHAUSTED when the queue is
// full, ...).
//
// With API keys configured (frontend/api_keys.h), every call but the three health calls needs the
// `authorization: Bearer KEY` metadata: UNAUTHENTICATED otherwise (a stream fails whole, at once).
//
// ServerLive is always true; ServerReady and ModelReady are true while the hub serves and
// accepts requests. Thread-safe.
#ifndef CONVOY_FRONTEND_KSERVE_SERVICE_H_
#define CONVOY_FRONTEND_KSERVE_SERVICE_H_

#include <string>

#include "frontend/generation.h"
#include "inference/grpc_service.grpc.pb.h"

namespace convoy {

// ModelInfer and ModelStreamInfer take their messages as bytes and parse them here
// (frontend/grpc_bytes.h), so that a request that is not a ModelInferRequest gets INVALID_ARGUMENT
// naming it: ModelInfer as its status, ModelStreamInfer as that request's error_message (the stream
// goes on). Their responses are serialized here too.
using KServeServiceBase = inference::GRPCInferenceService::WithRawCallbackMethod_ModelInfer<
    inference::GRPCInferenceService::WithRawCallbackMethod_ModelStreamInfer<
        inference::GRPCInferenceService::WithCallbackMethod_ServerLive<
            inference::GRPCInferenceService::WithCallbackMethod_ServerReady<
                inference::GRPCInferenceService::WithCallbackMethod_ModelReady<
                    inference::GRPCInferenceService::WithCallbackMethod_ServerMetadata<
                        inference::GRPCInferenceService::WithCallbackMethod_ModelMetadata<
                            inference::GRPCInferenceService::WithCallbackMethod_ModelConfig<
                                inference::GRPCInferenceService::Service>>>>>>>>;

class KServeService final : public KServeServiceBase {
 public:
  // `hub` must outlive the gRPC server holding this service. `version`: the server's version.
  KServeService(GenerationHub* hub, std::string version);
  // REQUIRES: the gRPC server holding this service has shut down (no call is open).
  ~KServeService() override = default;

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context,
                                       const inference::ServerLiveRequest* request,
                                       inference::ServerLiveResponse* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const inference::ServerReadyRequest* request,
                                        inference::ServerReadyResponse* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const inference::ServerMetadataRequest* request,
                                           inference::ServerMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* context,
                                        const inference::ModelConfigRequest* request,
                                        inference::ModelConfigResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ModelStreamInfer(
      grpc::CallbackServerContext* context) override;

 private:
  class UnaryCall;
  class StreamCall;
  class Generation;

  // OK with the serving context when `name` and `version` name the model served; UNAVAILABLE
  // while loading, INVALID_ARGUMENT for another model.
  absl::StatusOr<const ServingContext*> FindModel(const std::string& name,
                                                  const std::string& version) const;
  // OK when the call's API key is good (or none is asked for); UNAUTHENTICATED otherwise.
  absl::Status CheckCaller(const grpc::CallbackServerContext& context) const;

  GenerationHub* const hub_;
  const std::string version_;
};

}  // namespace convoy

#endif  // CONVOY_FRONTEND_KSERVE_SERVICE_H_
