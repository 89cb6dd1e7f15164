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

namespace convoy::testing {

inline constexpr absl::Duration kLiveness = absl::Seconds(60);

// Holds what the front end submits and cancels; the test sends each request's events.
// Thread-safe.
class FakeEngine final : public RequestEngine {
 public:
  absl::Status Submit(Request request, EventCallback on_event) override;
  void Cancel(RequestId id) override;
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

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_FRONTEND_REACTOR_HARNESS_H_
