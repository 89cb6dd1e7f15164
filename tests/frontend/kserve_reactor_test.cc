// KServe v2's ModelInfer and ModelStreamInfer reactors over a scripted fake engine, on a real gRPC
// server and client on loopback, as reactor_test drives convoy.v1.Inference's: the test decides
// the order in which the engine's events, the client's cancel and the server's abort arrive. In
// each, a request ends exactly once (ModelInfer: its status; ModelStreamInfer: one response with
// triton_final_response = true, its error_message set when it failed, the stream staying open),
// the engine is told to cancel exactly the requests it still holds, and no call or session stays
// open.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/engine_loop.h"
#include "frontend/generation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "reactor_harness.h"

namespace convoy::testing {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

using inference::ModelInferResponse;
using inference::ModelStreamInferResponse;

using KServeStream =
    grpc::ClientReaderWriter<inference::ModelInferRequest, inference::ModelStreamInferResponse>;

class KServeReactorTest : public ReactorFixture {
 protected:
  void SetUp() override {
    ReactorFixture::SetUp();
    stub_ = inference::GRPCInferenceService::NewStub(channel_);
  }

  // A ModelInfer of 4 tokens on its own thread, cancellable through `*context`; its status and
  // response once joined.
  std::thread StartModelInfer(grpc::ClientContext* context, grpc::Status* status,
                              ModelInferResponse* response) {
    return std::thread([this, context, status, response] {
      *status = stub_->ModelInfer(context, KServeIdsRequest("unary", 4), response);
    });
  }

  // Writes a request of `max_tokens` with id `id` on `stream` and waits until the engine has it;
  // its id in the engine.
  RequestId Send(KServeStream* stream, const std::string& id, int32_t max_tokens) {
    const size_t before = engine_.AwaitSubmitted(0).size();
    EXPECT_TRUE(stream->Write(KServeIdsRequest(id, max_tokens)));
    const std::vector<RequestId> submitted = engine_.AwaitSubmitted(before + 1);
    EXPECT_EQ(submitted.size(), before + 1) << id << " did not reach the engine";
    return submitted.empty() ? RequestId{} : submitted.back();
  }

  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
};

// What one request of a stream got: the ids of every response, and its last response.
struct StreamedAnswer {
  std::vector<int32_t> ids;
  int responses = 0;
  int finals = 0;
  ModelStreamInferResponse last;
};

// Reads `stream` until `requests` requests have had their final response; what each got, by id.
std::map<std::string, StreamedAnswer> ReadFinals(KServeStream* stream, int requests) {
  std::map<std::string, StreamedAnswer> answers;
  int finals = 0;
  ModelStreamInferResponse message;
  while (finals < requests && stream->Read(&message)) {
    StreamedAnswer& answer = answers[message.infer_response().id()];
    const std::vector<int32_t> ids = KServeOutputIds(message.infer_response());
    answer.ids.insert(answer.ids.end(), ids.begin(), ids.end());
    ++answer.responses;
    if (KServeIsFinal(message.infer_response())) {
      ++answer.finals;
      ++finals;
    }
    answer.last = message;
  }
  EXPECT_EQ(finals, requests) << "the stream ended early";
  return answers;
}

// A call from 127.0.0.1 without an API key, as the test client's.
CallOrigin Loopback() {
  CallOrigin origin;
  origin.address = "127.0.0.1";
  return origin;
}

// convoy's request for the prompt {1, 5, 9} and `max_tokens`.
v1::InferRequest IdsRequest(int32_t max_tokens) {
  v1::InferRequest request;
  for (int32_t id : {1, 5, 9}) request.add_prompt_token_ids(id);
  request.mutable_sampling()->set_max_tokens(max_tokens);
  return request;
}

std::string Parameter(const ModelInferResponse& response, const std::string& key) {
  auto it = response.parameters().find(key);
  return it == response.parameters().end() ? "" : it->second.string_param();
}

// The last token and the final event come before the client's cancel of the stream (which stays
// open after its requests end): the request is complete, its final response holds every token,
// and the engine is not asked to cancel a request it has already finished.
TEST_F(KServeReactorTest, TheLastTokenBeforeACancelCompletesTheRequest) {
  grpc::ClientContext context;
  std::unique_ptr<KServeStream> stream = stub_->ModelStreamInfer(&context);
  const RequestId id = Send(stream.get(), "a", 2);
  engine_.Token(id, 0);
  engine_.Token(id, 1);
  engine_.Final(id, Outcome::kCompleteLength, absl::OkStatus(), 2);
  std::map<std::string, StreamedAnswer> answers = ReadFinals(stream.get(), 1);
  context.TryCancel();  // after the request's end: nothing left to cancel in the engine
  ModelStreamInferResponse message;
  EXPECT_FALSE(stream->Read(&message));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_THAT(answers["a"].ids, ElementsAre(10, 11));
  EXPECT_EQ(answers["a"].finals, 1);
  EXPECT_THAT(answers["a"].last.error_message(), IsEmpty());
  EXPECT_EQ(Parameter(answers["a"].last.infer_response(), "finish_reason"), "length");
  EXPECT_TRUE(service_->WaitForNoCalls(kLiveness));
  EXPECT_THAT(engine_.cancelled(), Not(Contains(id)));
}

// The client cancels a stream before its request's last token: the engine is told to cancel it
// once, the token and final event it sends afterwards (a step already running) are dropped, and
// the call ends CANCELLED once, after the tokens sent before the cancel.
TEST_F(KServeReactorTest, ACancelBeforeTheLastTokenEndsTheStreamOnceAndDropsLateEvents) {
  grpc::ClientContext context;
  std::unique_ptr<KServeStream> stream = stub_->ModelStreamInfer(&context);
  const RequestId id = Send(stream.get(), "a", 3);
  engine_.Token(id, 0);
  ModelStreamInferResponse message;
  ASSERT_TRUE(stream->Read(&message));
  EXPECT_THAT(KServeOutputIds(message.infer_response()), ElementsAre(10));
  EXPECT_FALSE(KServeIsFinal(message.infer_response()));
  context.TryCancel();
  ASSERT_TRUE(engine_.AwaitCancelled(id));
  engine_.Token(id, 1);
  engine_.Final(id, Outcome::kCancelled, absl::CancelledError("cancelled"), 2);
  while (stream->Read(&message)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(service_->WaitForNoCalls(kLiveness));
  const std::vector<RequestId> cancelled = engine_.cancelled();
  EXPECT_EQ(std::count(cancelled.begin(), cancelled.end(), id), 1);
}

// The same race on ModelInfer: the call ends CANCELLED once, the request is cancelled once, and
// the events after the cancel are dropped.
TEST_F(KServeReactorTest, ACancelBeforeTheLastTokenEndsModelInferOnce) {
  grpc::ClientContext context;
  grpc::Status status;
  ModelInferResponse response;
  std::thread unary = StartModelInfer(&context, &status, &response);
  const RequestId id = engine_.AwaitSubmitted(1).at(0);
  engine_.Token(id, 0);
  context.TryCancel();
  ASSERT_TRUE(engine_.AwaitCancelled(id));
  engine_.Token(id, 1);
  engine_.Final(id, Outcome::kCancelled, absl::CancelledError("cancelled"), 2);
  unary.join();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED) << status.error_message();
  EXPECT_TRUE(service_->WaitForNoCalls(kLiveness));
  const std::vector<RequestId> cancelled = engine_.cancelled();
  EXPECT_EQ(std::count(cancelled.begin(), cancelled.end(), id), 1);
}

// The drain timeout ran out (the daemon calls InferenceService::AbortAll, whose hub KServe
// shares): ModelInfer ends with UNAVAILABLE; on ModelStreamInfer the request held gets its tokens
// so far and then a final response whose error_message is UNAVAILABLE, the stream stays open and
// a request sent after it is refused there too, never reaching the engine. Each held request is
// cancelled in the engine; a final event that comes after changes nothing.
TEST_F(KServeReactorTest, AbortAllEndsHeldRequestsWithUnavailableAndCancelsThem) {
  grpc::ClientContext unary_context;
  grpc::Status unary_status;
  ModelInferResponse unary_response;
  std::thread unary = StartModelInfer(&unary_context, &unary_status, &unary_response);
  const RequestId unary_id = engine_.AwaitSubmitted(1).at(0);
  grpc::ClientContext stream_context;
  std::unique_ptr<KServeStream> stream = stub_->ModelStreamInfer(&stream_context);
  const RequestId stream_id = Send(stream.get(), "a", 4);
  for (RequestId id : {unary_id, stream_id}) engine_.Token(id, 0);
  ModelStreamInferResponse message;
  ASSERT_TRUE(stream->Read(&message));
  EXPECT_THAT(KServeOutputIds(message.infer_response()), ElementsAre(10));
  service_->StopAccepting();
  service_->AbortAll();
  for (RequestId id : {unary_id, stream_id}) {
    EXPECT_TRUE(engine_.AwaitCancelled(id)) << "request " << id;
    engine_.Final(id, Outcome::kCancelled, absl::CancelledError("x"), 1);
  }
  unary.join();
  EXPECT_EQ(unary_status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << unary_status.error_message();

  std::map<std::string, StreamedAnswer> answers = ReadFinals(stream.get(), 1);
  EXPECT_EQ(answers["a"].responses, 1);
  EXPECT_THAT(answers["a"].last.error_message(), StartsWith("UNAVAILABLE"));
  // The stream is still open: a new request on it is refused in it.
  ASSERT_TRUE(stream->Write(KServeIdsRequest("late", 4)));
  answers = ReadFinals(stream.get(), 1);
  EXPECT_THAT(answers["late"].last.error_message(), StartsWith("UNAVAILABLE"));
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_FALSE(stream->Read(&message));
  const grpc::Status stream_status = stream->Finish();
  EXPECT_TRUE(stream_status.ok()) << stream_status.error_message();
  EXPECT_EQ(engine_.AwaitSubmitted(0).size(), 2u);
  EXPECT_TRUE(service_->WaitForNoCalls(kLiveness));
}

// The engine refuses a request later (the scheduler's kRejected final event): ModelInfer ends
// with the engine's status, a streamed request gets it as its error_message and the stream goes
// on serving; nothing is cancelled.
TEST_F(KServeReactorTest, ALateRefusalByTheEngineEndsTheRequestWithItsStatus) {
  grpc::ClientContext unary_context;
  grpc::Status unary_status;
  ModelInferResponse unary_response;
  std::thread unary = StartModelInfer(&unary_context, &unary_status, &unary_response);
  const RequestId unary_id = engine_.AwaitSubmitted(1).at(0);
  engine_.Final(unary_id, Outcome::kRejected, absl::InvalidArgumentError("the prompt is too long"),
                0);
  unary.join();
  EXPECT_EQ(unary_status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(unary_status.error_message(), HasSubstr("the prompt is too long"));

  grpc::ClientContext context;
  std::unique_ptr<KServeStream> stream = stub_->ModelStreamInfer(&context);
  const RequestId refused = Send(stream.get(), "refused", 4);
  engine_.Final(refused, Outcome::kRejected, absl::InvalidArgumentError("the prompt is too long"),
                0);
  std::map<std::string, StreamedAnswer> answers = ReadFinals(stream.get(), 1);
  EXPECT_EQ(answers["refused"].responses, 1);
  EXPECT_THAT(answers["refused"].last.error_message(), StartsWith("INVALID_ARGUMENT"));
  EXPECT_THAT(answers["refused"].last.error_message(), HasSubstr("the prompt is too long"));
  const RequestId next = Send(stream.get(), "next", 1);
  engine_.Token(next, 0);
  engine_.Final(next, Outcome::kCompleteLength, absl::OkStatus(), 1);
  answers = ReadFinals(stream.get(), 1);
  EXPECT_THAT(answers["next"].ids, ElementsAre(10));
  EXPECT_THAT(answers["next"].last.error_message(), IsEmpty());
  ASSERT_TRUE(stream->WritesDone());
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(service_->WaitForNoCalls(kLiveness));
  EXPECT_THAT(engine_.cancelled(), IsEmpty());
}

// A request whose tensors are wrong (here input_ids declared FP32) is refused before the engine
// sees it, on ModelInfer with INVALID_ARGUMENT and on the stream with its error message, and each
// refusal is counted with the front end's other invalid_argument refusals.
TEST_F(KServeReactorTest, ARequestWithABadTensorIsRefusedAndCounted) {
  inference::ModelInferRequest bad = KServeIdsRequest("bad", 4);
  bad.mutable_inputs(0)->set_datatype("FP32");
  grpc::ClientContext unary_context;
  ModelInferResponse unary_response;
  const grpc::Status unary_status = stub_->ModelInfer(&unary_context, bad, &unary_response);
  EXPECT_EQ(unary_status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(unary_status.error_message(), HasSubstr("input_ids"));

  grpc::ClientContext context;
  std::unique_ptr<KServeStream> stream = stub_->ModelStreamInfer(&context);
  ASSERT_TRUE(stream->Write(bad));
  std::map<std::string, StreamedAnswer> answers = ReadFinals(stream.get(), 1);
  EXPECT_THAT(answers["bad"].last.error_message(), StartsWith("INVALID_ARGUMENT"));
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_TRUE(engine_.AwaitSubmitted(0).empty());
  EXPECT_EQ(service_->hub()->rejections()[static_cast<int>(RejectReason::kInvalidArgument)], 2);
}

// Three requests in flight on one stream, their events interleaved; the middle one fails in the
// engine after a token: it gets that token, then its error as its final response; the other two
// complete with all their tokens; each request has exactly one final response, and the stream
// ends OK once the client half-closes.
TEST_F(KServeReactorTest, OneFailingRequestOfAStreamLeavesTheOthersToComplete) {
  grpc::ClientContext context;
  std::unique_ptr<KServeStream> stream = stub_->ModelStreamInfer(&context);
  const RequestId a = Send(stream.get(), "a", 2);
  const RequestId b = Send(stream.get(), "b", 2);
  const RequestId c = Send(stream.get(), "c", 2);
  for (RequestId id : {a, b, c}) engine_.Token(id, 0);
  engine_.Final(b, Outcome::kFailed, absl::InternalError("the step failed"), 1);
  for (RequestId id : {a, c}) engine_.Token(id, 1);
  for (RequestId id : {a, c}) engine_.Final(id, Outcome::kCompleteLength, absl::OkStatus(), 2);
  std::map<std::string, StreamedAnswer> answers = ReadFinals(stream.get(), 3);
  ASSERT_TRUE(stream->WritesDone());
  ModelStreamInferResponse message;
  EXPECT_FALSE(stream->Read(&message));
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(answers.size(), 3u);
  for (const char* id : {"a", "c"}) {
    SCOPED_TRACE(id);
    EXPECT_THAT(answers[id].ids, ElementsAre(10, 11));
    EXPECT_EQ(answers[id].finals, 1);
    EXPECT_THAT(answers[id].last.error_message(), IsEmpty());
    EXPECT_EQ(Parameter(answers[id].last.infer_response(), "finish_reason"), "length");
  }
  EXPECT_THAT(answers["b"].ids, ElementsAre(10));
  EXPECT_EQ(answers["b"].finals, 1);
  EXPECT_THAT(answers["b"].last.error_message(), StartsWith("INTERNAL"));
  // The engine's own message stays in the server's log; the client is told which request failed.
  EXPECT_THAT(answers["b"].last.error_message(), HasSubstr(absl::StrCat("request ", b, ";")));
  EXPECT_TRUE(service_->WaitForNoCalls(kLiveness));
  EXPECT_THAT(engine_.cancelled(), IsEmpty());
}

// The client leaves a request before its session is begun (ModelStreamInfer's reader had the
// request and was about to submit it, or was still tokenizing its prompt when the cancel came):
// Begin submits nothing and the client's in-flight slot stays free, so its next call is taken.
TEST_F(KServeReactorTest, AClientGoneBeforeBeginLeavesNoRequestAndNoSlot) {
  GenerationHub* hub = service_->hub();
  hub->UpdateLimits([](ServingLimits* limits) { limits->max_in_flight_per_client = 1; });
  std::shared_ptr<GenerationSession> session = GenerationSession::Create(hub, [] {});
  session->ClientGone();
  const CallOrigin origin = Loopback();
  const v1::InferRequest request = IdsRequest(4);
  session->Begin(request, absl::InfiniteFuture(), origin);
  SessionOutput output;
  std::optional<SessionEnd> end = session->Take(&output);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->status.code(), absl::StatusCode::kCancelled) << end->status;
  const std::vector<RequestId> submitted = engine_.AwaitSubmitted(0);
  EXPECT_THAT(submitted, IsEmpty()) << "a request of a client that had gone reached the engine";
  EXPECT_EQ(hub->client_in_flight("address 127.0.0.1"), 0);
  for (RequestId id : submitted) engine_.Final(id, Outcome::kCancelled, absl::OkStatus(), 0);
  session->Detach();
  session.reset();

  // The same client's next request is admitted (with one slot, only if the first one was freed).
  std::shared_ptr<GenerationSession> next = GenerationSession::Create(hub, [] {});
  next->Begin(request, absl::InfiniteFuture(), origin);
  end = next->Take(&output);
  EXPECT_FALSE(end.has_value()) << end->status;
  const std::vector<RequestId> all = engine_.AwaitSubmitted(submitted.size() + 1);
  ASSERT_EQ(all.size(), submitted.size() + 1);
  engine_.Final(all.back(), Outcome::kCompleteLength, absl::OkStatus(), 0);
  next->Detach();
}

// The client leaves while the engine is taking its request (before the engine holds it, where
// a cancel finds nothing): the session cancels it once the engine's Submit has returned, and
// frees the client's slot once.
TEST_F(KServeReactorTest, AClientGoneWhileTheEngineTakesTheRequestCancelsItThere) {
  GenerationHub* hub = service_->hub();
  hub->UpdateLimits([](ServingLimits* limits) { limits->max_in_flight_per_client = 1; });
  std::shared_ptr<GenerationSession> session = GenerationSession::Create(hub, [] {});
  engine_.SetSubmitHook([&session](RequestId) { session->ClientGone(); });
  const CallOrigin origin = Loopback();
  const v1::InferRequest request = IdsRequest(4);
  session->Begin(request, absl::InfiniteFuture(), origin);
  engine_.SetSubmitHook(nullptr);
  const std::vector<RequestId> submitted = engine_.AwaitSubmitted(1);
  ASSERT_EQ(submitted.size(), 1u);
  EXPECT_THAT(engine_.cancelled(), ElementsAre(submitted[0]))
      << "the cancel came before the engine held the request, and was lost";
  EXPECT_EQ(hub->client_in_flight("address 127.0.0.1"), 0);
  engine_.Final(submitted[0], Outcome::kCancelled, absl::CancelledError("cancelled"), 0);
  SessionOutput output;
  std::optional<SessionEnd> end = session->Take(&output);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->status.code(), absl::StatusCode::kCancelled) << end->status;
  session->Detach();
}

// The same on ModelStreamInfer: the client cancels the stream while its request is being
// admitted. The request is cancelled in the engine, the call ends CANCELLED, and the client's
// one slot is free again for its next call.
TEST_F(KServeReactorTest, AStreamCancelledWhileItsRequestIsAdmittedEndsItAndFreesTheSlot) {
  GenerationHub* hub = service_->hub();
  hub->UpdateLimits([](ServingLimits* limits) { limits->max_in_flight_per_client = 1; });
  grpc::ClientContext context;
  std::unique_ptr<KServeStream> stream = stub_->ModelStreamInfer(&context);
  engine_.SetSubmitHook([&](RequestId) {
    context.TryCancel();
    // The server has seen the cancel once the request's slot is given back.
    const absl::Time deadline = absl::Now() + kLiveness;
    while (hub->client_in_flight("address 127.0.0.1") > 0 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
  });
  // The write may report the cancel the hook makes before it returns.
  stream->Write(KServeIdsRequest("a", 4));
  const std::vector<RequestId> submitted = engine_.AwaitSubmitted(1);
  ASSERT_EQ(submitted.size(), 1u);
  engine_.SetSubmitHook(nullptr);
  EXPECT_TRUE(engine_.AwaitCancelled(submitted[0])) << "the request ran on for a client gone";
  engine_.Final(submitted[0], Outcome::kCancelled, absl::CancelledError("cancelled"), 0);
  ModelStreamInferResponse message;
  while (stream->Read(&message)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(service_->WaitForNoCalls(kLiveness));
  EXPECT_EQ(hub->client_in_flight("address 127.0.0.1"), 0);
}

}  // namespace
}  // namespace convoy::testing
