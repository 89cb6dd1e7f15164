// convoy.v1.Inference on gRPC's callback API: one reactor per call over a GenerationSession
// (frontend/generation.h), and no gRPC thread ever waits on the engine. A call starts its session
// and returns; the session's wake-ups (on the hub's dispatcher thread) fill the response or start
// the stream's next write; the next write starts only from OnWriteDone, so a slow reader gets
// several tokens per message.
//
// A request with n choices (InferRequest.n) runs n sessions (frontend/choices.h), and its call
// ends once every choice has; when one fails, the others are ended and the call has its status.
//
// A call ends in exactly one way: the engine's final event (OK, or the engine's error), the
// deadline (the gRPC deadline or timeout_microseconds, whichever is earlier: DEADLINE_EXCEEDED),
// the client cancelling or going away (CANCELLED: the request is cancelled in the engine, which
// frees its KV blocks), or the server giving up on it after the drain timeout (UNAVAILABLE).
//
// Life cycle: calls get UNAVAILABLE until Start (the model is loading), are served after it, and
// get UNAVAILABLE again after StopAccepting (shutdown), while the calls already admitted go on.
// Thread-safe.
#ifndef CONVOY_FRONTEND_INFERENCE_SERVICE_H_
#define CONVOY_FRONTEND_INFERENCE_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "convoy/v1/inference.grpc.pb.h"
#include "engine/engine_loop.h"
#include "frontend/generation.h"

namespace convoy {

// Every method takes its message as bytes and parses it here, so that a request that is not its
// message (an InferRequest, a GetModelInfoRequest, ...) gets INVALID_ARGUMENT naming it (gRPC's own
// parse answers UNIMPLEMENTED with no message); the responses are serialized here too.
using InferenceServiceBase =
    v1::Inference::WithRawCallbackMethod_Infer<v1::Inference::WithRawCallbackMethod_InferStream<
        v1::Inference::WithRawCallbackMethod_GetModelInfo<
            v1::Inference::WithRawCallbackMethod_GetServerInfo<v1::Inference::Service>>>>;

class InferenceService final : public InferenceServiceBase {
 public:
  explicit InferenceService(std::string version);
  // REQUIRES: the gRPC server holding this service has shut down (no call is open).
  ~InferenceService() override;

  // Starts serving. Called once.
  void Start(ServingContext context);
  // New calls get UNAVAILABLE from now on; admitted ones go on. Idempotent.
  void StopAccepting();
  // Cancels every request still in the engine; their calls end with UNAVAILABLE.
  void AbortAll();
  // Waits until no call is open, at most `timeout`; true when none is.
  bool WaitForNoCalls(absl::Duration timeout);
  int64_t open_calls() const;
  // The request path the other protocols' services share.
  GenerationHub* hub() { return &hub_; }

  grpc::ServerUnaryReactor* Infer(grpc::CallbackServerContext* context,
                                  const grpc::ByteBuffer* request,
                                  grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* InferStream(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;

 private:
  class UnaryCall;
  class StreamCall;

  // Parses an Infer or InferStream request into `*request`, and returns its number of choices
  // (CountChoices); a refusal is counted.
  absl::StatusOr<int32_t> ParseInferRequest(const grpc::ByteBuffer& bytes,
                                            v1::InferRequest* request);
  // The answer of GetModelInfo and GetServerInfo (INVALID_ARGUMENT for `request` bytes that are no
  // GetModelInfoRequest, ...), filled into `*info`.
  absl::Status FillModelInfo(const grpc::CallbackServerContext& context,
                             const grpc::ByteBuffer& request, v1::ModelInfo* info) const;
  absl::Status FillServerInfo(const grpc::CallbackServerContext& context,
                              const grpc::ByteBuffer& request, v1::ServerInfo* info) const;

  const std::string version_;
  // The request path's state: every call goes through it.
  GenerationHub hub_;
};

}  // namespace convoy

#endif  // CONVOY_FRONTEND_INFERENCE_SERVICE_H_
