// convoy.v1.Inference's reactors over a scripted fake engine, on a real gRPC server and client on
// loopback: the test decides the order in which the engine's events, the client's cancel and the
// server's abort arrive, so that each race is taken one way and then the other, every time. In
// each, the call ends exactly once, with the status the order calls for, the engine is told to
// cancel exactly the requests it still holds, and no call or session stays open.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "convoy/v1/inference.grpc.pb.h"
#include "engine/engine_loop.h"
#include "frontend/generation.h"
#include "frontend/inference_service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace convoy {
namespace {

constexpr absl::Duration kLiveness = absl::Seconds(60);

// Holds what the front end submits and cancels; the test sends each request's events.
class FakeEngine final : public RequestEngine {
 public:
  absl::Status Submit(Request request, EventCallback on_event) override {
    absl::MutexLock lock(&mu_);
    submitted_.push_back(request.id);
    callbacks_[request.id] = std::move(on_event);
    return absl::OkStatus();
  }
  void Cancel(RequestId id) override {
    absl::MutexLock lock(&mu_);
    cancelled_.push_back(id);
  }
  EngineLoopSnapshot snapshot() const override { return EngineLoopSnapshot(); }

  // Waits until `n` requests were submitted; their ids in order.
  std::vector<RequestId> AwaitSubmitted(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return submitted_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), kLiveness);
    return submitted_;
  }
  // Waits until `id` was cancelled; false if it was not within the liveness bound.
  bool AwaitCancelled(RequestId id) {
    absl::MutexLock lock(&mu_);
    auto seen = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return std::find(cancelled_.begin(), cancelled_.end(), id) != cancelled_.end();
    };
    return mu_.AwaitWithTimeout(absl::Condition(&seen), kLiveness);
  }
  std::vector<RequestId> cancelled() const {
    absl::MutexLock lock(&mu_);
    return cancelled_;
  }

  // The engine's side: the `index`-th token of `id`, or its final event.
  void Token(RequestId id, int64_t index) {
    Event event;
    event.kind = Event::Kind::kToken;
    event.request_id = id;
    event.token = static_cast<int32_t>(10 + index);
    event.token_index = index;
    Send(event);
  }
  void Final(RequestId id, Outcome outcome, absl::Status status, int64_t generated) {
    Event event;
    event.kind = Event::Kind::kFinal;
    event.request_id = id;
    event.outcome = outcome;
    event.status = std::move(status);
    event.num_generated = generated;
    event.queue_time = absl::Milliseconds(1);
    Send(event);
  }

 private:
  // As EngineLoop does: the callback (which holds the session) is dropped after the final event.
  void Send(const Event& event) {
    EventCallback callback;
    {
      absl::MutexLock lock(&mu_);
      auto it = callbacks_.find(event.request_id);
      ASSERT_NE(it, callbacks_.end()) << "an event after the final one";
      callback = it->second;
      if (event.kind == Event::Kind::kFinal) callbacks_.erase(it);
    }
    callback(event);
  }

  mutable absl::Mutex mu_;
  std::vector<RequestId> submitted_ ABSL_GUARDED_BY(mu_);
  std::vector<RequestId> cancelled_ ABSL_GUARDED_BY(mu_);
  std::map<RequestId, EventCallback> callbacks_ ABSL_GUARDED_BY(mu_);
};

class ReactorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    service_ = std::make_unique<InferenceService>("test");
    ServingContext context;
    context.engine = &engine_;
    context.limits.model_name = "fake";
    context.limits.vocab_size = 100;
    context.limits.max_context_length = 256;
    context.limits.slow_client_timeout = absl::Seconds(60);
    service_->Start(std::move(context));
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ =
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
    stub_ = v1::Inference::NewStub(channel_);
  }
  void TearDown() override {
    // Nothing may be left open by any test: every call ended, every session closed.
    EXPECT_TRUE(service_->WaitForNoCalls(kLiveness)) << service_->open_calls() << " calls open";
    server_->Shutdown();
    server_.reset();
    service_.reset();
  }

  static v1::InferRequest Request(int32_t max_tokens) {
    v1::InferRequest r;
    for (int32_t id : {1, 5, 9}) r.add_prompt_token_ids(id);
    r.mutable_sampling()->set_max_tokens(max_tokens);
    return r;
  }

  // A unary Infer of 4 tokens on its own thread; its status in `*status` once joined.
  std::thread StartInfer(grpc::Status* status) {
    return std::thread([this, status] {
      grpc::ClientContext context;
      v1::InferResponse response;
      *status = stub_->Infer(&context, Request(4), &response);
    });
  }

  FakeEngine engine_;
  std::unique_ptr<InferenceService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Inference::Stub> stub_;
};

// The last token and the final event come before the client's cancel: the call is complete, and
// the engine is not asked to cancel a request it has already finished.
TEST_F(ReactorTest, TheLastTokenBeforeACancelCompletesTheCall) {
  grpc::ClientContext context;
  v1::InferRequest request = Request(2);
  std::unique_ptr<grpc::ClientReader<v1::InferStreamResponse>> reader =
      stub_->InferStream(&context, request);
  const RequestId id = engine_.AwaitSubmitted(1).at(0);
  engine_.Token(id, 0);
  engine_.Token(id, 1);
  engine_.Final(id, Outcome::kCompleteLength, absl::OkStatus(), 2);
  std::vector<int32_t> tokens;
  v1::InferStreamResponse message;
  while (reader->Read(&message)) {
    tokens.insert(tokens.end(), message.token_ids().begin(), message.token_ids().end());
  }
  const grpc::Status status = reader->Finish();
  context.TryCancel();  // after the end: nothing to cancel
  EXPECT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
  EXPECT_THAT(tokens, ::testing::ElementsAre(10, 11));
  EXPECT_TRUE(service_->WaitForNoCalls(kLiveness));
  EXPECT_THAT(engine_.cancelled(), ::testing::Not(::testing::Contains(id)));
}

// The client cancels before the last token: the engine is told to cancel, the token and final
// event it sends afterwards (a step already running) are dropped, and the call ends CANCELLED
// once, with the tokens sent before the cancel.
TEST_F(ReactorTest, ACancelBeforeTheLastTokenEndsTheCallOnceAndDropsLateEvents) {
  grpc::ClientContext context;
  v1::InferRequest request = Request(3);
  std::unique_ptr<grpc::ClientReader<v1::InferStreamResponse>> reader =
      stub_->InferStream(&context, request);
  const RequestId id = engine_.AwaitSubmitted(1).at(0);
  engine_.Token(id, 0);
  v1::InferStreamResponse message;
  ASSERT_TRUE(reader->Read(&message));
  EXPECT_THAT(message.token_ids(), ::testing::ElementsAre(10));
  context.TryCancel();
  ASSERT_TRUE(engine_.AwaitCancelled(id));
  engine_.Token(id, 1);
  engine_.Final(id, Outcome::kCancelled, absl::CancelledError("cancelled"), 2);
  while (reader->Read(&message)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(service_->WaitForNoCalls(kLiveness));
  const std::vector<RequestId> cancelled = engine_.cancelled();
  EXPECT_EQ(std::count(cancelled.begin(), cancelled.end(), id), 1);
}

// A client that goes away while the server has a write in flight (it stopped reading, tokens
// kept coming): the failed write ends the call and the request is cancelled in the engine.
TEST_F(ReactorTest, AWriteInFlightWhenTheClientGoesEndsTheCallAndCancelsTheRequest) {
  auto context = std::make_unique<grpc::ClientContext>();
  v1::InferRequest request = Request(200);
  std::unique_ptr<grpc::ClientReader<v1::InferStreamResponse>> reader =
      stub_->InferStream(context.get(), request);
  const RequestId id = engine_.AwaitSubmitted(1).at(0);
  for (int64_t i = 0; i < 100; ++i) engine_.Token(id, i);
  context->TryCancel();
  ASSERT_TRUE(engine_.AwaitCancelled(id));
  for (int64_t i = 100; i < 200; ++i) engine_.Token(id, i);
  engine_.Final(id, Outcome::kCancelled, absl::CancelledError("cancelled"), 200);
  v1::InferStreamResponse message;
  while (reader->Read(&message)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(service_->WaitForNoCalls(kLiveness));
}

// The drain timeout ran out: AbortAll ends every call whose request the engine still holds with
// UNAVAILABLE, unary and streaming alike, and cancels each of those requests in the engine; a
// final event that comes after it changes nothing.
TEST_F(ReactorTest, AbortAllEndsHeldCallsWithUnavailableAndCancelsTheirRequests) {
  grpc::Status unary_status;
  std::thread unary = StartInfer(&unary_status);
  grpc::ClientContext stream_context;
  v1::InferRequest request = Request(4);
  std::unique_ptr<grpc::ClientReader<v1::InferStreamResponse>> reader =
      stub_->InferStream(&stream_context, request);
  const std::vector<RequestId> ids = engine_.AwaitSubmitted(2);
  ASSERT_EQ(ids.size(), 2u);
  for (RequestId id : ids) engine_.Token(id, 0);
  service_->StopAccepting();
  service_->AbortAll();
  for (RequestId id : ids) EXPECT_TRUE(engine_.AwaitCancelled(id)) << "request " << id;
  for (RequestId id : ids) engine_.Final(id, Outcome::kCancelled, absl::CancelledError("x"), 1);
  unary.join();
  v1::InferStreamResponse message;
  while (reader->Read(&message)) {
  }
  const grpc::Status stream_status = reader->Finish();
  EXPECT_EQ(unary_status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << unary_status.error_message();
  EXPECT_EQ(stream_status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << stream_status.error_message();
  EXPECT_TRUE(service_->WaitForNoCalls(kLiveness));
}

// The engine refuses a request later (the scheduler's kRejected final event, e.g. a duplicate id):
// the call ends with the engine's status and nothing is cancelled.
TEST_F(ReactorTest, ALateRefusalByTheEngineEndsTheCallWithItsStatus) {
  grpc::Status status;
  std::thread unary = StartInfer(&status);
  const RequestId id = engine_.AwaitSubmitted(1).at(0);
  engine_.Final(id, Outcome::kRejected, absl::InvalidArgumentError("the prompt is too long"), 0);
  unary.join();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr("the prompt is too long"));
  EXPECT_TRUE(service_->WaitForNoCalls(kLiveness));
  EXPECT_THAT(engine_.cancelled(), ::testing::Not(::testing::Contains(id)));
}

// Bytes that are no InferRequest (a varint field cut short) get INVALID_ARGUMENT naming the
// message, on both RPCs (gRPC's own parsing answered UNIMPLEMENTED with no message), and the engine
// never sees them; the server goes on serving.
TEST_F(ReactorTest, AnUnparseableRequestIsInvalidArgument) {
  for (const char* method : {"/convoy.v1.Inference/Infer", "/convoy.v1.Inference/InferStream"}) {
    grpc::GenericStub stub(channel_);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kLiveness));
    const char garbage[] = {0x08, static_cast<char>(0xff)};
    grpc::Slice slice(garbage, sizeof(garbage));
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer reply;
    grpc::Status status;
    absl::Notification done;
    stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &reply, [&](grpc::Status s) {
      status = std::move(s);
      done.Notify();
    });
    done.WaitForNotification();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << method << ": " << status.error_code() << " " << status.error_message();
    EXPECT_THAT(status.error_message(), ::testing::HasSubstr("not a valid convoy.v1.InferRequest"))
        << method;
  }
  EXPECT_TRUE(engine_.AwaitSubmitted(0).empty());
  EXPECT_EQ(service_->hub()->rejections()[static_cast<int>(RejectReason::kInvalidArgument)], 2);
  // A good request after them is served.
  grpc::Status status;
  std::thread unary = StartInfer(&status);
  const RequestId id = engine_.AwaitSubmitted(1).at(0);
  engine_.Token(id, 0);
  engine_.Final(id, Outcome::kCompleteLength, absl::OkStatus(), 1);
  unary.join();
  EXPECT_TRUE(status.ok()) << status.error_message();
}

}  // namespace
}  // namespace convoy
