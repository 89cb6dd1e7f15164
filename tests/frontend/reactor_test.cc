// convoy.v1.Inference's reactors over a scripted fake engine, on a real gRPC server and client on
// loopback: the test decides the order in which the engine's events, the client's cancel and the
// server's abort arrive, so that each race is taken one way and then the other, every time. In
// each, the call ends exactly once, with the status the order calls for, the engine is told to
// cancel exactly the requests it still holds, and no call or session stays open.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "convoy/v1/inference.grpc.pb.h"
#include "engine/engine_loop.h"
#include "frontend/generation.h"
#include "frontend/inference_service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.pb.h"
#include "reactor_harness.h"

namespace convoy::testing {
namespace {

class ReactorTest : public ReactorFixture {
 protected:
  void SetUp() override {
    ReactorFixture::SetUp();
    stub_ = v1::Inference::NewStub(channel_);
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

// Bytes that are no request (a varint field cut short) get INVALID_ARGUMENT naming the message, on
// convoy.v1's Infer, InferStream, GetModelInfo and GetServerInfo and on KServe's ModelInfer
// (gRPC's own parsing answered UNIMPLEMENTED with no message); the inference requests are each
// counted as an invalid_argument refusal, and the engine never sees them; the server goes on
// serving.
TEST_F(ReactorTest, AnUnparseableRequestIsInvalidArgument) {
  const struct {
    const char* method;
    const char* message;
  } kCalls[] = {
      {"/convoy.v1.Inference/Infer", "not a valid convoy.v1.InferRequest"},
      {"/convoy.v1.Inference/InferStream", "not a valid convoy.v1.InferRequest"},
      {"/inference.GRPCInferenceService/ModelInfer", "not a valid inference.ModelInferRequest"},
      // No inference requests: not counted as refused.
      {"/convoy.v1.Inference/GetModelInfo", "not a valid convoy.v1.GetModelInfoRequest"},
      {"/convoy.v1.Inference/GetServerInfo", "not a valid convoy.v1.GetServerInfoRequest"},
  };
  for (const auto& call : kCalls) {
    const grpc::Status status = RawUnaryCall(channel_, call.method, UnparseableBytes());
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << call.method << ": " << status.error_code() << " " << status.error_message();
    EXPECT_THAT(status.error_message(), ::testing::HasSubstr(call.message)) << call.method;
  }
  EXPECT_TRUE(engine_.AwaitSubmitted(0).empty());
  EXPECT_EQ(service_->hub()->rejections()[static_cast<int>(RejectReason::kInvalidArgument)], 3);
  // Good requests after them are served.
  std::string reply;
  ASSERT_TRUE(RawUnaryCall(channel_, "/convoy.v1.Inference/GetServerInfo", "", &reply).ok());
  v1::ServerInfo server;
  ASSERT_TRUE(server.ParseFromString(reply));
  EXPECT_EQ(server.model(), "fake");
  EXPECT_TRUE(RawUnaryCall(channel_, "/convoy.v1.Inference/GetModelInfo", "", &reply).ok());
  grpc::Status status;
  std::thread unary = StartInfer(&status);
  const RequestId id = engine_.AwaitSubmitted(1).at(0);
  engine_.Token(id, 0);
  engine_.Final(id, Outcome::kCompleteLength, absl::OkStatus(), 1);
  unary.join();
  EXPECT_TRUE(status.ok()) << status.error_message();
}

// On ModelStreamInfer, bytes that are no ModelInferRequest get a stream message of their own, as
// any request refused on the stream does: error_message INVALID_ARGUMENT naming the message,
// triton_final_response = true, no id (they have none). The stream stays open: the good request
// after them is answered, and it ends OK when the client half-closes. One invalid_argument refusal.
TEST_F(ReactorTest, AnUnparseableRequestOnModelStreamInferIsAnsweredInTheStream) {
  RawStream stream(channel_, "/inference.GRPCInferenceService/ModelStreamInfer");
  ASSERT_TRUE(stream.Write(UnparseableBytes()));
  ASSERT_TRUE(stream.Write(KServeIdsRequest("good", 1).SerializeAsString()));
  std::string bytes;
  inference::ModelStreamInferResponse refused;
  ASSERT_TRUE(stream.Read(&bytes));
  ASSERT_TRUE(refused.ParseFromString(bytes));
  EXPECT_THAT(refused.error_message(), ::testing::StartsWith("INVALID_ARGUMENT"));
  EXPECT_THAT(refused.error_message(),
              ::testing::HasSubstr("not a valid inference.ModelInferRequest"));
  EXPECT_TRUE(KServeIsFinal(refused.infer_response()));
  EXPECT_EQ(refused.infer_response().id(), "");

  const RequestId id = engine_.AwaitSubmitted(1).at(0);
  engine_.Token(id, 0);
  engine_.Final(id, Outcome::kCompleteLength, absl::OkStatus(), 1);
  // Its answer: a chunk with the token, then a final response, or both in one.
  std::vector<int32_t> ids;
  inference::ModelStreamInferResponse answered;
  do {
    ASSERT_TRUE(stream.Read(&bytes));
    ASSERT_TRUE(answered.ParseFromString(bytes));
    EXPECT_EQ(answered.error_message(), "");
    EXPECT_EQ(answered.infer_response().id(), "good");
    const std::vector<int32_t> chunk = KServeOutputIds(answered.infer_response());
    ids.insert(ids.end(), chunk.begin(), chunk.end());
  } while (!KServeIsFinal(answered.infer_response()));
  EXPECT_THAT(ids, ::testing::ElementsAre(10));
  ASSERT_TRUE(stream.WritesDone());
  EXPECT_FALSE(stream.Read(&bytes));
  const grpc::Status status = stream.Finish();
  EXPECT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
  EXPECT_EQ(service_->hub()->rejections()[static_cast<int>(RejectReason::kInvalidArgument)], 1);
}

}  // namespace
}  // namespace convoy::testing
