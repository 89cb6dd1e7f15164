// What the reactor tests share: a scripted fake engine, and convoyd's two gRPC inference services
// (convoy.v1.Inference and KServe v2 over the same hub, as the daemon serves them) on a real gRPC
// server and client on loopback, plus raw calls that send bytes which are no message. The test
// decides the order in which the engine's events, the client's cancel and the server's abort
// arrive; waits are liveness bounds only (kLiveness), never timing thresholds.
#ifndef CONVOY_TESTS_FRONTEND_REACTOR_HARNESS_H_
#define CONVOY_TESTS_FRONTEND_REACTOR_HARNESS_H_

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/engine_loop.h"
#include "frontend/inference_service.h"
#include "frontend/kserve_service.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.pb.h"

namespace convoy::testing {

inline constexpr absl::Duration kLiveness = absl::Seconds(60);

// Holds what the front end submits and cancels; the test sends each request's events.
// Thread-safe.
class FakeEngine final : public RequestEngine {
 public:
  // Runs the submit hook, then holds the request.
  absl::Status Submit(Request request, EventCallback on_event) override;
  // As EngineLoop's: a no-op for an id it has not been submitted (it is not recorded).
  void Cancel(RequestId id) override;
  // Runs in each Submit, with the request's id, before the engine holds the request (as a request
  // on its way to EngineLoop's inbox, which a cancel does not find yet).
  void SetSubmitHook(std::function<void(RequestId)> hook);
  EngineLoopSnapshot snapshot() const override { return EngineLoopSnapshot(); }

  // Waits until `n` requests were submitted (at most kLiveness); their ids in order.
  std::vector<RequestId> AwaitSubmitted(size_t n);
  // Waits until `id` was cancelled; false if it was not within kLiveness.
  bool AwaitCancelled(RequestId id);
  std::vector<RequestId> cancelled() const;

  // The engine's side: the `index`-th token of `id` (token 10 + index), or its final event.
  // REQUIRES: `id` was submitted and had no final event yet.
  void Token(RequestId id, int64_t index);
  void Final(RequestId id, Outcome outcome, absl::Status status, int64_t generated);

 private:
  // As EngineLoop does: the callback (which holds the session) is dropped after the final event.
  void Send(const Event& event);

  mutable absl::Mutex mu_;
  std::function<void(RequestId)> submit_hook_ ABSL_GUARDED_BY(mu_);
  std::vector<RequestId> submitted_ ABSL_GUARDED_BY(mu_);
  std::vector<RequestId> cancelled_ ABSL_GUARDED_BY(mu_);
  std::map<RequestId, EventCallback> callbacks_ ABSL_GUARDED_BY(mu_);
};

// Serves InferenceService and KServeService (on InferenceService's hub) over engine_, model
// "fake" (vocabulary 100, context 256, no tokenizer), on 127.0.0.1; channel_ reaches them.
// TearDown checks that no call or session is left open.
class ReactorFixture : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  FakeEngine engine_;
  std::unique_ptr<InferenceService> service_;
  std::unique_ptr<KServeService> kserve_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

// Bytes that are no protobuf message of any type (a varint field cut short).
std::string UnparseableBytes();

// A unary call of `method` ("/package.Service/Method") with `request` as its bytes, within
// kLiveness; its status, and its reply's bytes in `*reply` when given.
grpc::Status RawUnaryCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                          const std::string& request, std::string* reply = nullptr);

// A bidirectional stream of bytes on `method`, one operation at a time, each within kLiveness.
class RawStream {
 public:
  RawStream(const std::shared_ptr<grpc::Channel>& channel, const std::string& method);
  ~RawStream();

  // Each returns false when the operation failed (the stream is over).
  bool Write(const std::string& bytes);
  bool Read(std::string* bytes);
  bool WritesDone();
  // Ends the call (after the reads have returned false); its status.
  grpc::Status Finish();

 private:
  bool Await(void* tag);

  grpc::CompletionQueue queue_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  intptr_t next_tag_ = 1;
};

// A KServe request for the prompt {1, 5, 9} (input_ids, typed contents) and `max_tokens`, with
// id `id`.
inference::ModelInferRequest KServeIdsRequest(const std::string& id, int32_t max_tokens);
// The output_ids of a response (empty when it has none).
std::vector<int32_t> KServeOutputIds(const inference::ModelInferResponse& response);
// Whether a ModelStreamInfer response is the last one of its request (triton_final_response).
bool KServeIsFinal(const inference::ModelInferResponse& response);

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_FRONTEND_REACTOR_HARNESS_H_
