// n choices (InferRequest.n, KServe's parameter n) through convoyd on the default model
// (SmolLM2-135M-Instruct; scripts/fetch-default-model.sh): a seeded request's choices are the
// answers of single requests seeded s, s + 1, s + 2 (sampling at temperature > 0), through Infer,
// InferStream, ModelInfer and ModelStreamInfer; usage counts the prompt once; n above
// request_limits.max_choices is refused naming the limit; a stream that fails or is cancelled
// ends every choice, each with exactly one last message, and leaves nothing in the engine; the
// choices compute their prompt once (the others take its blocks from the prefix cache).
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "daemon_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "metrics/http_get.h"

namespace convoy::testing {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;
using inference::ModelStreamInferResponse;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr int32_t kChoices = 3;
constexpr uint64_t kSeed = 1234;
constexpr int32_t kMaxTokens = 12;

std::chrono::system_clock::time_point Deadline() {
  return absl::ToChronoTime(absl::Now() + kLiveness);
}

// A seeded sampled request for a short prompt.
v1::InferRequest Sampled(uint64_t seed, int32_t n) {
  v1::InferRequest request;
  request.set_prompt_text("Once upon a time");
  request.mutable_sampling()->set_max_tokens(kMaxTokens);
  request.mutable_sampling()->set_temperature(1.0f);
  request.mutable_sampling()->set_seed(seed);
  request.set_n(n);
  return request;
}

std::vector<int32_t> Ids(const google::protobuf::RepeatedField<int32_t>& ids) {
  return std::vector<int32_t>(ids.begin(), ids.end());
}

// One choice's answer, however it came.
struct Answer {
  std::vector<int32_t> ids;
  std::string text;
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
  int finals = 0;  // last messages seen (streams)
};

class ChoicesTest : public ::testing::Test {
 protected:
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(DefaultModelPath()))
        << DefaultModelPath() << " is missing: run scripts/fetch-default-model.sh";
    if (daemon_ == nullptr) {
      daemon_ = DaemonProcess::Start(DefaultModelPath(),
                                     "kv_cache { block_size: 16 memory_budget_bytes: 67108864 }\n"
                                     "executor { device: CPU cpu_threads: 1 }\n"
                                     "request_limits { max_choices: 4 }\n")
                    .release();
    }
    ASSERT_NE(daemon_, nullptr) << "convoyd did not start on " << DefaultModelPath();
    stub_ = daemon_->inference();
    kserve_ = inference::GRPCInferenceService::NewStub(daemon_->channel());
  }

  // The answers of single requests seeded kSeed, kSeed + 1, ...
  std::vector<v1::InferResponse> Singles() {
    std::vector<v1::InferResponse> singles(kChoices);
    for (int32_t i = 0; i < kChoices; ++i) {
      const grpc::Status status = CallInfer(*stub_, Sampled(kSeed + i, 0), &singles[i]);
      EXPECT_TRUE(status.ok()) << status.error_message();
      EXPECT_EQ(singles[i].choices_size(), 0);
    }
    // Sampling at this temperature: the seeds give different answers (else the test shows
    // nothing).
    EXPECT_NE(Ids(singles[0].token_ids()), Ids(singles[1].token_ids()));
    return singles;
  }

  // Streams `request`; each choice's answer by index, and the call's status.
  grpc::Status Stream(const v1::InferRequest& request, std::map<int32_t, Answer>* answers,
                      bool cancel_after_first = false) {
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    auto reader = stub_->InferStream(&context, request);
    v1::InferStreamResponse message;
    bool cancelled = false;
    while (reader->Read(&message)) {
      Answer& answer = (*answers)[message.choice_index()];
      EXPECT_EQ(answer.finals, 0) << "a message after choice " << message.choice_index()
                                  << "'s last one";
      EXPECT_EQ(message.first_token_index(), static_cast<int64_t>(answer.ids.size()));
      answer.ids.insert(answer.ids.end(), message.token_ids().begin(), message.token_ids().end());
      answer.text += message.text();
      if (message.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
        answer.finish_reason = message.finish_reason();
        ++answer.finals;
      }
      if (cancel_after_first && !cancelled) {
        cancelled = true;
        context.TryCancel();
      }
    }
    return reader->Finish();
  }

  static DaemonProcess* daemon_;
  std::unique_ptr<v1::Inference::Stub> stub_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> kserve_;
};
DaemonProcess* ChoicesTest::daemon_ = nullptr;

TEST_F(ChoicesTest, InferAnswersEachChoiceAsASingleRequestWithSeedPlusIndex) {
  const std::vector<v1::InferResponse> singles = Singles();
  v1::InferRequest request = Sampled(kSeed, kChoices);
  request.set_return_prompt_token_ids(true);
  v1::InferResponse response;
  const grpc::Status status = CallInfer(*stub_, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();

  ASSERT_EQ(response.choices_size(), kChoices);
  EXPECT_EQ(response.token_ids_size(), 0) << "n > 1: the answers are in choices";
  EXPECT_EQ(response.text(), "");
  EXPECT_EQ(response.prompt_token_ids_size(), singles[0].usage().prompt_tokens());
  int64_t completion_tokens = 0;
  for (int32_t i = 0; i < kChoices; ++i) {
    const v1::Choice& choice = response.choices(i);
    SCOPED_TRACE(absl::StrCat("choice ", i));
    EXPECT_EQ(choice.index(), i);
    EXPECT_EQ(choice.seed(), kSeed + i);
    EXPECT_NE(choice.request_id(), 0u);
    EXPECT_THAT(Ids(choice.token_ids()), ElementsAreArray(Ids(singles[i].token_ids())));
    EXPECT_EQ(choice.text(), singles[i].text());
    EXPECT_EQ(choice.finish_reason(), singles[i].finish_reason());
    completion_tokens += choice.token_ids_size();
  }
  EXPECT_EQ(response.request_id(), response.choices(0).request_id());
  EXPECT_EQ(response.usage().prompt_tokens(), singles[0].usage().prompt_tokens())
      << "the prompt counts once";
  EXPECT_EQ(response.usage().completion_tokens(), completion_tokens);
}

TEST_F(ChoicesTest, InferStreamEndsEveryChoiceOnceWithTheSingleRequestsTokens) {
  const std::vector<v1::InferResponse> singles = Singles();
  std::map<int32_t, Answer> answers;
  const grpc::Status status = Stream(Sampled(kSeed, kChoices), &answers);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(answers.size(), static_cast<size_t>(kChoices));
  for (int32_t i = 0; i < kChoices; ++i) {
    SCOPED_TRACE(absl::StrCat("choice ", i));
    const Answer& answer = answers[i];
    EXPECT_EQ(answer.finals, 1);
    EXPECT_THAT(answer.ids, ElementsAreArray(Ids(singles[i].token_ids())));
    EXPECT_EQ(answer.text, singles[i].text());
    EXPECT_EQ(answer.finish_reason, singles[i].finish_reason());
  }
}

// The choices share the prompt's KV blocks: the first computes them, the others wait for them and
// take them from the prefix cache (the scheduler's shared prefills), all but the last prompt
// block, which each computes to sample from.
TEST_F(ChoicesTest, TheChoicesComputeThePromptOnce) {
  auto hits = [&]() -> int64_t {
    const absl::StatusOr<HttpResponse> metrics = HttpGet(daemon_->metrics_port(), "/metrics");
    EXPECT_TRUE(metrics.ok()) << metrics.status();
    if (!metrics.ok()) return -1;
    for (absl::string_view line : absl::StrSplit(metrics->body, '\n')) {
      if (absl::ConsumePrefix(&line, "convoy_prefix_cache_hits_total ")) {
        double value = 0;
        EXPECT_TRUE(absl::SimpleAtod(line, &value)) << line;
        return static_cast<int64_t>(value);
      }
    }
    ADD_FAILURE() << "no convoy_prefix_cache_hits_total in /metrics";
    return -1;
  };
  // A prompt of several blocks that no other call sent (the time makes it new on every run).
  v1::InferRequest request = Sampled(kSeed, kChoices);
  request.set_prompt_text(absl::StrCat(
      "Call ", absl::ToUnixNanos(absl::Now()),
      ": a long story about a lighthouse keeper who counts ships every night, writes their names "
      "in a blue notebook, and waits for a letter from her brother across the cold northern sea, "
      "until one stormy evening a small boat without a name drifts into the harbour."));
  const int64_t before = hits();
  v1::InferResponse response;
  const grpc::Status status = CallInfer(*stub_, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.choices_size(), kChoices);
  const int64_t prompt_tokens = response.usage().prompt_tokens();
  const int64_t shared = (prompt_tokens - 1) / 16 * 16;  // block_size 16
  ASSERT_GE(shared, 48) << "the prompt is too short to show sharing";
  EXPECT_EQ(hits() - before, (kChoices - 1) * shared) << prompt_tokens << " prompt tokens";
}

TEST_F(ChoicesTest, OneChoiceIsAnsweredAsEver) {
  for (int32_t n : {0, 1}) {
    v1::InferResponse response;
    ASSERT_TRUE(CallInfer(*stub_, Sampled(kSeed, n), &response).ok());
    EXPECT_EQ(response.choices_size(), 0);
    EXPECT_EQ(response.seed(), kSeed);
    EXPECT_GT(response.token_ids_size(), 0);
    std::map<int32_t, Answer> answers;
    ASSERT_TRUE(Stream(Sampled(kSeed, n), &answers).ok());
    ASSERT_EQ(answers.size(), 1u);
    EXPECT_EQ(answers[0].finals, 1);
    EXPECT_THAT(answers[0].ids, ElementsAreArray(Ids(response.token_ids())));
  }
}

TEST_F(ChoicesTest, MoreChoicesThanTheLimitAreRefusedNamingIt) {
  v1::InferResponse response;
  grpc::Status status = CallInfer(*stub_, Sampled(kSeed, 5), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "n: 5 choices; this server allows at most 4 (request_limits.max_choices)");
  std::map<int32_t, Answer> answers;
  status = Stream(Sampled(kSeed, 5), &answers);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("request_limits.max_choices"));
  EXPECT_TRUE(answers.empty());
  status = CallInfer(*stub_, Sampled(kSeed, -1), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "n: must be >= 0, got -1");
}

TEST_F(ChoicesTest, AFailedStreamEndsEveryChoiceWithOneLastMessage) {
  v1::InferRequest request = Sampled(kSeed, kChoices);
  request.set_timeout_microseconds(1);  // passes before any choice is scheduled
  std::map<int32_t, Answer> answers;
  const grpc::Status status = Stream(request, &answers);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  ASSERT_EQ(answers.size(), static_cast<size_t>(kChoices));
  for (const auto& [index, answer] : answers) {
    EXPECT_EQ(answer.finals, 1) << "choice " << index;
    EXPECT_NE(answer.finish_reason, v1::FINISH_REASON_UNSPECIFIED) << "choice " << index;
  }
}

TEST_F(ChoicesTest, ACancelledStreamEndsEveryChoiceAndFreesItsKvBlocks) {
  const std::optional<v1::ServerInfo> before = GetServerInfo(*stub_);
  ASSERT_TRUE(before.has_value());
  v1::InferRequest request = Sampled(kSeed, kChoices);
  request.mutable_sampling()->set_max_tokens(1000);
  std::map<int32_t, Answer> answers;
  const grpc::Status status = Stream(request, &answers, /*cancel_after_first=*/true);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED) << status.error_message();
  const std::optional<v1::ServerInfo> after =
      WaitForServerInfo(*stub_, [&before](const v1::ServerInfo& info) {
        return info.kv_blocks_free() == info.kv_blocks_total() && info.num_running() == 0 &&
               info.active_calls() == 0 &&
               info.requests_cancelled() - before->requests_cancelled() == kChoices;
      });
  ASSERT_TRUE(after.has_value());
  // CI's fresh root once saw the three sessions neither counted nor closed a minute later, with
  // nothing running: what the server said then, and its log, for the next time.
  const std::string state = absl::StrCat("server info: ", after->ShortDebugString(),
                                         "\nconvoyd's log:\n", daemon_->Log());
  EXPECT_EQ(after->requests_cancelled() - before->requests_cancelled(), kChoices) << state;
  EXPECT_EQ(after->active_calls(), 0);
  EXPECT_EQ(after->num_running(), 0);
}

// --- KServe v2: the parameter n.

void AddParameters(ModelInferRequest* request, int64_t n) {
  auto& p = *request->mutable_parameters();
  p["max_tokens"].set_int64_param(kMaxTokens);
  p["temperature"].set_double_param(1.0);
  p["seed"].set_uint64_param(kSeed);
  p["n"].set_int64_param(n);
}

ModelInferRequest KServeRequest(int64_t n, bool stream) {
  ModelInferRequest request;
  auto* input = request.add_inputs();
  input->set_name("text_input");
  input->set_datatype("BYTES");
  input->add_shape(1);
  input->mutable_contents()->add_bytes_contents("Once upon a time");
  AddParameters(&request, n);
  (*request.mutable_parameters())["stream"].set_bool_param(stream);
  return request;
}

// The choices' rows of a response's typed outputs: text_output [n], output_ids [n, longest]
// padded with -1.
std::vector<Answer> Rows(const ModelInferResponse& response, int32_t n) {
  std::vector<Answer> rows(n);
  for (const auto& out : response.outputs()) {
    if (out.name() == "text_output") {
      EXPECT_THAT(out.shape(), ElementsAreArray({int64_t{n}}));
      for (int32_t i = 0; i < n && i < out.contents().bytes_contents_size(); ++i) {
        rows[i].text = out.contents().bytes_contents(i);
      }
    } else {
      EXPECT_EQ(out.name(), "output_ids");
      EXPECT_EQ(out.shape_size(), 2);
      if (out.shape_size() != 2) continue;
      EXPECT_EQ(out.shape(0), n);
      const int64_t longest = out.shape(1);
      EXPECT_EQ(out.contents().int_contents_size(), n * longest);
      for (int32_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < longest; ++j) {
          const int32_t id = out.contents().int_contents(i * longest + j);
          if (id >= 0) rows[i].ids.push_back(id);
        }
      }
    }
  }
  return rows;
}

TEST_F(ChoicesTest, ModelInferAnswersEveryChoiceWithALeadingChoiceDimension) {
  const std::vector<v1::InferResponse> singles = Singles();
  ModelInferResponse response;
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  const grpc::Status status =
      kserve_->ModelInfer(&context, KServeRequest(kChoices, /*stream=*/false), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const std::vector<Answer> rows = Rows(response, kChoices);
  std::vector<std::string> reasons;
  int64_t completion_tokens = 0;
  for (int32_t i = 0; i < kChoices; ++i) {
    SCOPED_TRACE(absl::StrCat("choice ", i));
    EXPECT_THAT(rows[i].ids, ElementsAreArray(Ids(singles[i].token_ids())));
    EXPECT_EQ(rows[i].text, singles[i].text());
    reasons.push_back(singles[i].finish_reason() == v1::FINISH_REASON_STOP ? "stop" : "length");
    completion_tokens += singles[i].token_ids_size();
  }
  const auto& parameters = response.parameters();
  EXPECT_EQ(parameters.at("finish_reason").string_param(), absl::StrJoin(reasons, ","));
  EXPECT_EQ(parameters.at("prompt_tokens").int64_param(), singles[0].usage().prompt_tokens());
  EXPECT_EQ(parameters.at("completion_tokens").int64_param(), completion_tokens);
}

TEST_F(ChoicesTest, ModelStreamInferStreamsEveryChoiceThenOneFinalResponse) {
  const std::vector<v1::InferResponse> singles = Singles();
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  auto stream = kserve_->ModelStreamInfer(&context);
  ModelInferRequest request = KServeRequest(kChoices, /*stream=*/true);
  request.set_id("three");
  ASSERT_TRUE(stream->Write(request));
  // Above the limit: refused by name, and the stream goes on.
  ModelInferRequest too_many = KServeRequest(5, /*stream=*/true);
  too_many.set_id("five");
  ASSERT_TRUE(stream->Write(too_many));
  ASSERT_TRUE(stream->WritesDone());
  std::vector<Answer> answers(kChoices);
  int finals = 0;
  std::string refusal;
  ModelStreamInferResponse message;
  while (stream->Read(&message)) {
    if (message.infer_response().id() == "five") {
      refusal = message.error_message();
      continue;
    }
    ASSERT_EQ(message.error_message(), "");
    EXPECT_EQ(finals, 0) << "a response after the final one";
    const std::vector<Answer> rows = Rows(message.infer_response(), kChoices);
    for (int32_t i = 0; i < kChoices; ++i) {
      answers[i].ids.insert(answers[i].ids.end(), rows[i].ids.begin(), rows[i].ids.end());
      answers[i].text += rows[i].text;
    }
    const auto& parameters = message.infer_response().parameters();
    if (parameters.at("triton_final_response").bool_param()) {
      ++finals;
      const std::vector<std::string> reasons =
          absl::StrSplit(parameters.at("finish_reason").string_param(), ',');
      EXPECT_EQ(reasons.size(), static_cast<size_t>(kChoices));
    }
  }
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_EQ(finals, 1);
  EXPECT_EQ(refusal,
            "INVALID_ARGUMENT: parameters.n: 5 choices; this server allows at most 4 "
            "(request_limits.max_choices)");
  for (int32_t i = 0; i < kChoices; ++i) {
    SCOPED_TRACE(absl::StrCat("choice ", i));
    EXPECT_THAT(answers[i].ids, ElementsAreArray(Ids(singles[i].token_ids())));
    EXPECT_EQ(answers[i].text, singles[i].text());
  }
}

}  // namespace
}  // namespace convoy::testing
