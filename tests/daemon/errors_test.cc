// Bad requests against the real convoyd: each gets the right status code and a message naming
// what is wrong, through Infer and InferStream, and the server keeps serving after all of them.
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "daemon_harness.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"

namespace convoy::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct BadRequest {
  std::string name;
  v1::InferRequest request;
  grpc::StatusCode code;
  std::string message;  // a part of the status message
  // The call's deadline relative to now; zero: kLiveness.
  absl::Duration deadline = absl::ZeroDuration();
};

std::vector<int32_t> Ids(int n, int32_t id = 5) { return std::vector<int32_t>(n, id); }

std::vector<BadRequest> BadRequests() {
  std::vector<BadRequest> table;
  auto add = [&table](std::string name, grpc::StatusCode code, std::string message, auto&& edit) {
    v1::InferRequest request = MakeRequest({1, 2, 3}, 4);
    edit(request);
    table.push_back({std::move(name), std::move(request), code, std::move(message)});
  };
  using C = grpc::StatusCode;
  add("empty prompt", C::INVALID_ARGUMENT, "prompt_token_ids: the prompt is empty",
      [](v1::InferRequest& r) { r.clear_prompt_token_ids(); });
  add("token id at the vocabulary size", C::INVALID_ARGUMENT, "prompt_token_ids[1]",
      [](v1::InferRequest& r) { r.set_prompt_token_ids(1, 320); });
  add("negative token id", C::INVALID_ARGUMENT, "prompt_token_ids[0]: token id -1",
      [](v1::InferRequest& r) { r.set_prompt_token_ids(0, -1); });
  add("huge token id", C::INVALID_ARGUMENT, "outside the vocabulary [0, 320)",
      [](v1::InferRequest& r) { r.set_prompt_token_ids(2, 2000000000); });
  add("max_tokens 0", C::INVALID_ARGUMENT, "sampling.max_tokens: must be at least 1",
      [](v1::InferRequest& r) { r.mutable_sampling()->set_max_tokens(0); });
  add("negative max_tokens", C::INVALID_ARGUMENT, "sampling.max_tokens",
      [](v1::InferRequest& r) { r.mutable_sampling()->set_max_tokens(-7); });
  add("absurd max_tokens", C::INVALID_ARGUMENT, "sampling.max_tokens: 1000000000 exceeds",
      [](v1::InferRequest& r) { r.mutable_sampling()->set_max_tokens(1000000000); });
  add("top_p 0", C::INVALID_ARGUMENT, "sampling.top_p: must be in (0, 1]",
      [](v1::InferRequest& r) { r.mutable_sampling()->set_top_p(0.0f); });
  add("top_p above 1", C::INVALID_ARGUMENT, "sampling.top_p",
      [](v1::InferRequest& r) { r.mutable_sampling()->set_top_p(1.5f); });
  add("top_p NaN", C::INVALID_ARGUMENT, "sampling.top_p", [](v1::InferRequest& r) {
    r.mutable_sampling()->set_top_p(std::numeric_limits<float>::quiet_NaN());
  });
  add("negative temperature", C::INVALID_ARGUMENT, "sampling.temperature",
      [](v1::InferRequest& r) { r.mutable_sampling()->set_temperature(-0.5f); });
  add("infinite temperature", C::INVALID_ARGUMENT, "sampling.temperature", [](v1::InferRequest& r) {
    r.mutable_sampling()->set_temperature(std::numeric_limits<float>::infinity());
  });
  add("negative top_k", C::INVALID_ARGUMENT, "sampling.top_k",
      [](v1::InferRequest& r) { r.mutable_sampling()->set_top_k(-1); });
  add("stop token outside the vocabulary", C::INVALID_ARGUMENT, "sampling.stop_token_ids[1]",
      [](v1::InferRequest& r) {
        r.mutable_sampling()->add_stop_token_ids(2);
        r.mutable_sampling()->add_stop_token_ids(999);
      });
  add("prompt longer than the context", C::INVALID_ARGUMENT,
      "prompt_token_ids: the prompt has 300 tokens; the model's context is 256",
      [](v1::InferRequest& r) {
        r.clear_prompt_token_ids();
        for (int32_t id : Ids(300)) r.add_prompt_token_ids(id);
      });
  add("prompt filling the context", C::INVALID_ARGUMENT, "at most 255", [](v1::InferRequest& r) {
    r.clear_prompt_token_ids();
    for (int32_t id : Ids(256)) r.add_prompt_token_ids(id);
  });
  add("unknown model", C::INVALID_ARGUMENT, "model: unknown model 'gpt-17'",
      [](v1::InferRequest& r) { r.set_model("gpt-17"); });
  add("absurd priority", C::INVALID_ARGUMENT, "priority: 99 is outside 1..1",
      [](v1::InferRequest& r) { r.set_priority(99); });
  add("negative priority", C::INVALID_ARGUMENT, "priority: -3",
      [](v1::InferRequest& r) { r.set_priority(-3); });
  add("too many top logprobs", C::INVALID_ARGUMENT, "top_logprobs: must be in [0, 20]",
      [](v1::InferRequest& r) { r.set_top_logprobs(1000); });
  add("negative top logprobs", C::INVALID_ARGUMENT, "top_logprobs",
      [](v1::InferRequest& r) { r.set_top_logprobs(-1); });
  add("text and ids", C::INVALID_ARGUMENT,
      "prompt_text: set exactly one of prompt_token_ids, prompt_text and messages",
      [](v1::InferRequest& r) { r.set_prompt_text("hello"); });
  add("messages and ids", C::INVALID_ARGUMENT, "messages: set exactly one of",
      [](v1::InferRequest& r) {
        v1::ChatMessage* m = r.add_messages();
        m->set_role("user");
        m->set_content("hello");
      });
  add("messages without a tokenizer", C::FAILED_PRECONDITION,
      "messages: this model has no tokenizer", [](v1::InferRequest& r) {
        r.clear_prompt_token_ids();
        v1::ChatMessage* m = r.add_messages();
        m->set_role("user");
        m->set_content("hello");
      });
  add("stop strings without a tokenizer", C::FAILED_PRECONDITION,
      "sampling.stop: stop strings need a model with a tokenizer",
      [](v1::InferRequest& r) { r.mutable_sampling()->add_stop("."); });
  // The random test model has no tokenizer.
  add("text without a tokenizer", C::FAILED_PRECONDITION,
      "prompt_text: this model has no tokenizer; send prompt_token_ids", [](v1::InferRequest& r) {
        r.clear_prompt_token_ids();
        r.set_prompt_text("hello");
      });
  // Over frontend.max_message_bytes (1 MiB in this test's config): about 2 MB of token ids.
  add("oversize message", C::RESOURCE_EXHAUSTED, "", [](v1::InferRequest& r) {
    r.clear_prompt_token_ids();
    for (int32_t id : Ids(1000000, 300)) r.add_prompt_token_ids(id);
  });
  add("a timeout too short to generate", C::DEADLINE_EXCEEDED, "deadline",
      [](v1::InferRequest& r) { r.set_timeout_microseconds(1); });
  table.push_back({"a deadline already past", MakeRequest({1, 2, 3}, 4),
                   grpc::StatusCode::DEADLINE_EXCEEDED, "", absl::Seconds(-1)});
  return table;
}

std::chrono::system_clock::time_point Deadline(const BadRequest& bad) {
  return absl::ToChronoTime(absl::Now() +
                            (bad.deadline == absl::ZeroDuration() ? kLiveness : bad.deadline));
}

TEST(DaemonErrorsTest, EveryBadRequestGetsItsCodeAndAClearMessageAndTheServerStaysUp) {
  const std::string model_dir = WriteTestModel("errors", TinyModelConfig());
  auto daemon = DaemonProcess::Start(model_dir, DefaultTestConfig("max_message_bytes: 1048576"));
  ASSERT_NE(daemon, nullptr);
  auto stub = daemon->inference();

  const std::vector<BadRequest> table = BadRequests();
  ASSERT_GE(table.size(), 20u);
  for (const BadRequest& bad : table) {
    SCOPED_TRACE(bad.name);
    {
      grpc::ClientContext context;
      context.set_deadline(Deadline(bad));
      v1::InferResponse response;
      const grpc::Status status = stub->Infer(&context, bad.request, &response);
      EXPECT_EQ(status.error_code(), bad.code) << status.error_message();
      EXPECT_THAT(status.error_message(), HasSubstr(bad.message));
    }
    {
      grpc::ClientContext context;
      context.set_deadline(Deadline(bad));
      auto reader = stub->InferStream(&context, bad.request);
      v1::InferStreamResponse message;
      int tokens = 0;
      while (reader->Read(&message)) tokens += message.token_ids_size();
      const grpc::Status status = reader->Finish();
      EXPECT_EQ(status.error_code(), bad.code) << status.error_message();
      EXPECT_THAT(status.error_message(), HasSubstr(bad.message));
      if (bad.code != grpc::StatusCode::DEADLINE_EXCEEDED) {
        EXPECT_EQ(tokens, 0);
      }
    }
  }

  // Still serving, with nothing held.
  v1::InferResponse response;
  const grpc::Status status = CallInfer(*stub, MakeRequest({1, 2, 3}, 4), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.token_ids_size(), 4);
  auto health = daemon->health();
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckResponse health_response;
  ASSERT_TRUE(
      health->Check(&context, grpc::health::v1::HealthCheckRequest(), &health_response).ok());
  EXPECT_EQ(health_response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  const absl::Time give_up = absl::Now() + kLiveness;
  std::optional<v1::ServerInfo> info;
  while (absl::Now() < give_up) {
    info = GetServerInfo(*stub);
    if (info && info->kv_blocks_free() == info->kv_blocks_total()) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->kv_blocks_free(), info->kv_blocks_total());
  EXPECT_EQ(info->requests_failed(), 0);
}

TEST(DaemonErrorsTest, HealthKnowsTheInferenceServiceAndNoOther) {
  const std::string model_dir = WriteTestModel("health", TinyModelConfig());
  auto daemon = DaemonProcess::Start(model_dir, DefaultTestConfig());
  ASSERT_NE(daemon, nullptr);
  auto health = daemon->health();
  {
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckRequest request;
    request.set_service("convoy.v1.Inference");
    grpc::health::v1::HealthCheckResponse response;
    ASSERT_TRUE(health->Check(&context, request, &response).ok());
    EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }
  {
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckRequest request;
    request.set_service("no.such.Service");
    grpc::health::v1::HealthCheckResponse response;
    EXPECT_EQ(health->Check(&context, request, &response).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
}

// Asks server reflection for list_services; the reply's bytes, and the call's status. The request
// and the reply are handled as bytes: Debian ships no generated code for grpc.reflection.v1alpha.
grpc::Status ListServices(DaemonProcess& daemon, std::string* bytes) {
  grpc::GenericStub stub(daemon.channel());
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kLiveness));
  auto call = stub.PrepareCall(
      &context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  void* tag;
  bool ok;
  auto next = [&](void* expected) {
    EXPECT_TRUE(cq.Next(&tag, &ok));
    EXPECT_EQ(tag, expected);
    return ok;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  next(reinterpret_cast<void*>(1));
  // ServerReflectionRequest { list_services: "" } is field 7, length-delimited, empty.
  const char request_bytes[] = {0x3a, 0x00};
  grpc::Slice slice(request_bytes, sizeof(request_bytes));
  grpc::ByteBuffer request(&slice, 1);
  call->Write(request, reinterpret_cast<void*>(2));
  next(reinterpret_cast<void*>(2));
  grpc::ByteBuffer reply;
  call->Read(&reply, reinterpret_cast<void*>(3));
  if (next(reinterpret_cast<void*>(3))) {
    std::vector<grpc::Slice> slices;
    EXPECT_TRUE(reply.Dump(&slices).ok());
    for (const grpc::Slice& s : slices)
      bytes->append(reinterpret_cast<const char*>(s.begin()), s.size());
    call->WritesDone(reinterpret_cast<void*>(4));
    next(reinterpret_cast<void*>(4));
  }
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  next(reinterpret_cast<void*>(5));
  return status;
}

// Server reflection, when the config turns it on, answers list_services with both services.
TEST(DaemonErrorsTest, ReflectionListsTheServicesWhenOn) {
  const std::string model_dir = WriteTestModel("reflection", TinyModelConfig());
  auto daemon = DaemonProcess::Start(model_dir, DefaultTestConfig("reflection: true"));
  ASSERT_NE(daemon, nullptr);
  std::string bytes;
  const grpc::Status status = ListServices(*daemon, &bytes);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(bytes, HasSubstr("convoy.v1.Inference"));
  EXPECT_THAT(bytes, HasSubstr("grpc.health.v1.Health"));
}

// By default there is no reflection service.
TEST(DaemonErrorsTest, ReflectionIsOffByDefault) {
  const std::string model_dir = WriteTestModel("reflection", TinyModelConfig());
  auto daemon = DaemonProcess::Start(model_dir, DefaultTestConfig());
  ASSERT_NE(daemon, nullptr);
  std::string bytes;
  const grpc::Status status = ListServices(*daemon, &bytes);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << status.error_message();
  EXPECT_THAT(bytes, Not(HasSubstr("convoy.v1.Inference")));
}

}  // namespace
}  // namespace convoy::testing
