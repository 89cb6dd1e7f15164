// KServe v2 gRPC (inference.GRPCInferenceService) through convoyd: the answers are convoy's own
// (convoy.v1.Inference's for the same request), whether the prompt comes as text or ids, the
// sampling values as input tensors or as parameters, the answer whole or streamed; metadata and
// readiness; errors that name the tensor or parameter at fault; a cancelled stream frees its KV
// blocks. The model is a random-weight Llama with SmolLM2's tokenizer, so its text is random:
// every check compares the two protocols, never fixed strings.
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"

namespace convoy::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

using inference::ModelInferRequest;
using inference::ModelInferResponse;
using inference::ModelStreamInferResponse;
using InputTensor = inference::ModelInferRequest::InferInputTensor;

// A random model with SmolLM2's vocabulary and tokenizer, and a long context (for a generation
// that goes on until it is cancelled).
const std::string& ModelDir() {
  static const std::string* dir = new std::string(
      WriteSmolLm2VocabModel("kserve_smollm2_vocab", 8192, /*chat_template=*/false));
  return *dir;
}

std::chrono::system_clock::time_point Deadline() {
  return absl::ToChronoTime(absl::Now() + kLiveness);
}

// --- Building requests, as tritonclient does (raw contents) or with typed contents.

std::string RawBytes(const std::vector<std::string>& elements) {
  std::string raw;
  for (const std::string& e : elements) {
    const uint32_t length = static_cast<uint32_t>(e.size());
    raw.append(reinterpret_cast<const char*>(&length), sizeof(length));
    raw.append(e);
  }
  return raw;
}

template <typename T>
std::string RawValues(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

InputTensor* AddInput(ModelInferRequest* request, const std::string& name,
                      const std::string& datatype, std::vector<int64_t> shape) {
  InputTensor* input = request->add_inputs();
  input->set_name(name);
  input->set_datatype(datatype);
  for (int64_t d : shape) input->add_shape(d);
  return input;
}

// A request in raw contents: text_input, then max_tokens (INT32) unless it is 0.
ModelInferRequest RawTextRequest(const std::string& model, const std::string& prompt,
                                 int32_t max_tokens) {
  ModelInferRequest request;
  request.set_model_name(model);
  AddInput(&request, "text_input", "BYTES", {1});
  request.add_raw_input_contents(RawBytes({prompt}));
  if (max_tokens != 0) {
    AddInput(&request, "max_tokens", "INT32", {1});
    request.add_raw_input_contents(RawValues(std::vector<int32_t>{max_tokens}));
  }
  return request;
}

// --- Reading responses.

struct Answer {
  std::vector<int32_t> ids;
  std::string text;
};

// The outputs of `response`, raw or typed.
Answer Read(const ModelInferResponse& response) {
  Answer answer;
  for (int i = 0; i < response.outputs_size(); ++i) {
    const auto& out = response.outputs(i);
    if (response.raw_output_contents_size() > 0) {
      const std::string& raw = response.raw_output_contents(i);
      if (out.name() == "text_output") {
        uint32_t length = 0;
        EXPECT_GE(raw.size(), sizeof(length));
        std::memcpy(&length, raw.data(), sizeof(length));
        EXPECT_EQ(raw.size(), sizeof(length) + length);
        answer.text = raw.substr(sizeof(length));
      } else {
        answer.ids.resize(raw.size() / sizeof(int32_t));
        // memcpy's pointers must not be null, even for no bytes (an empty chunk's ids).
        if (!answer.ids.empty()) {
          std::memcpy(answer.ids.data(), raw.data(), answer.ids.size() * sizeof(int32_t));
        }
      }
    } else if (out.name() == "text_output") {
      EXPECT_EQ(out.contents().bytes_contents_size(), 1);
      if (out.contents().bytes_contents_size() > 0) answer.text = out.contents().bytes_contents(0);
    } else {
      answer.ids.assign(out.contents().int_contents().begin(), out.contents().int_contents().end());
    }
  }
  return answer;
}

bool FinalFlag(const ModelInferResponse& response) {
  auto it = response.parameters().find("triton_final_response");
  EXPECT_NE(it, response.parameters().end()) << "no triton_final_response parameter";
  return it != response.parameters().end() && it->second.bool_param();
}

class KServeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = DaemonProcess::Start(ModelDir(), DefaultTestConfig()).release();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(daemon_, nullptr);
    stub_ = daemon_->inference();
    kserve_ = inference::GRPCInferenceService::NewStub(daemon_->channel());
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    v1::ModelInfo info;
    ASSERT_TRUE(stub_->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok());
    model_ = info.name();
  }

  grpc::Status Infer(const ModelInferRequest& request, ModelInferResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    return kserve_->ModelInfer(&context, request, response);
  }

  // convoy's own answer.
  v1::InferResponse Convoy(const v1::InferRequest& request) {
    v1::InferResponse response;
    const grpc::Status status = CallInfer(*stub_, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  // Sends `requests` on one ModelStreamInfer call and reads until every one has had its final
  // response; the responses by request id, in order.
  std::map<std::string, std::vector<ModelStreamInferResponse>> Stream(
      const std::vector<ModelInferRequest>& requests) {
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    auto stream = kserve_->ModelStreamInfer(&context);
    for (const ModelInferRequest& request : requests) EXPECT_TRUE(stream->Write(request));
    EXPECT_TRUE(stream->WritesDone());
    std::map<std::string, std::vector<ModelStreamInferResponse>> by_id;
    ModelStreamInferResponse message;
    while (stream->Read(&message)) by_id[message.infer_response().id()].push_back(message);
    const grpc::Status status = stream->Finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
    return by_id;
  }

  static DaemonProcess* daemon_;
  std::unique_ptr<v1::Inference::Stub> stub_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> kserve_;
  std::string model_;
};
DaemonProcess* KServeTest::daemon_ = nullptr;

constexpr char kPrompt[] = "The capital of France is";

TEST_F(KServeTest, ModelInferAnswersAsConvoysInferForTextAndForIds) {
  v1::InferRequest text_request;
  text_request.set_prompt_text(kPrompt);
  text_request.mutable_sampling()->set_max_tokens(16);
  text_request.set_return_prompt_token_ids(true);
  const v1::InferResponse from_text = Convoy(text_request);
  ASSERT_GT(from_text.token_ids_size(), 0);

  // Raw contents, max_tokens as a request parameter: answered in raw contents.
  ModelInferRequest request = RawTextRequest(model_, kPrompt, 0);
  request.set_id("text-1");
  (*request.mutable_parameters())["max_tokens"].set_int64_param(16);
  ModelInferResponse response;
  grpc::Status status = Infer(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.model_name(), model_);
  EXPECT_EQ(response.model_version(), "1");
  EXPECT_EQ(response.id(), "text-1");
  ASSERT_EQ(response.outputs_size(), 2);
  EXPECT_EQ(response.raw_output_contents_size(), 2);
  EXPECT_EQ(response.outputs(0).name(), "text_output");
  EXPECT_EQ(response.outputs(0).datatype(), "BYTES");
  EXPECT_THAT(response.outputs(0).shape(), ElementsAre(1));
  EXPECT_EQ(response.outputs(1).name(), "output_ids");
  EXPECT_EQ(response.outputs(1).datatype(), "INT32");
  EXPECT_THAT(response.outputs(1).shape(), ElementsAre(from_text.token_ids_size()));
  Answer answer = Read(response);
  EXPECT_THAT(answer.ids, ElementsAreArray(from_text.token_ids()));
  EXPECT_EQ(answer.text, from_text.text());
  EXPECT_EQ(response.parameters().at("completion_tokens").int64_param(),
            from_text.token_ids_size());
  EXPECT_EQ(response.parameters().at("finish_reason").string_param(),
            from_text.finish_reason() == v1::FINISH_REASON_STOP ? "stop" : "length");

  // The prompt's ids as INT64 in typed contents with a batch dimension, max_tokens as an input:
  // answered in typed contents, with the batch dimension. A prompt of ids stops only at max_tokens,
  // so it is compared with convoy's answer to the same ids.
  v1::InferRequest ids_request =
      MakeRequest({from_text.prompt_token_ids().begin(), from_text.prompt_token_ids().end()}, 20);
  const v1::InferResponse from_ids = Convoy(ids_request);
  ModelInferRequest by_ids;
  by_ids.set_model_name(model_);
  by_ids.set_model_version("1");
  InputTensor* ids =
      AddInput(&by_ids, "input_ids", "INT64", {1, from_text.prompt_token_ids_size()});
  for (int32_t id : from_text.prompt_token_ids()) ids->mutable_contents()->add_int64_contents(id);
  AddInput(&by_ids, "max_tokens", "INT32", {1})->mutable_contents()->add_int_contents(20);
  response.Clear();
  status = Infer(by_ids, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.raw_output_contents_size(), 0);
  EXPECT_THAT(response.outputs(0).shape(), ElementsAre(1, 1));
  EXPECT_THAT(response.outputs(1).shape(), ElementsAre(1, 20));
  answer = Read(response);
  EXPECT_THAT(answer.ids, ElementsAreArray(from_ids.token_ids()));
  EXPECT_EQ(answer.text, from_ids.text());

  // exclude_input_in_output: false puts the prompt first; outputs: only the ones named.
  (*by_ids.mutable_parameters())["exclude_input_in_output"].set_bool_param(false);
  by_ids.add_outputs()->set_name("output_ids");
  response.Clear();
  status = Infer(by_ids, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.outputs_size(), 1);
  std::vector<int32_t> prompt_then_output(from_text.prompt_token_ids().begin(),
                                          from_text.prompt_token_ids().end());
  prompt_then_output.insert(prompt_then_output.end(), from_ids.token_ids().begin(),
                            from_ids.token_ids().end());
  EXPECT_THAT(Read(response).ids, ElementsAreArray(prompt_then_output));
}

TEST_F(KServeTest, SamplingInputsAndParametersMeanWhatConvoysFieldsMean) {
  v1::InferRequest convoy_request;
  convoy_request.set_prompt_text(kPrompt);
  v1::SamplingParameters* s = convoy_request.mutable_sampling();
  s->set_max_tokens(12);
  s->set_temperature(0.8f);
  s->set_top_k(40);
  s->set_top_p(0.9f);
  s->set_seed(7);
  const v1::InferResponse expected = Convoy(convoy_request);

  ModelInferRequest request = RawTextRequest(model_, kPrompt, 12);
  AddInput(&request, "temperature", "FP32", {1});
  request.add_raw_input_contents(RawValues(std::vector<float>{0.8f}));
  AddInput(&request, "seed", "UINT64", {1});
  request.add_raw_input_contents(RawValues(std::vector<uint64_t>{7}));
  (*request.mutable_parameters())["top_k"].set_int64_param(40);
  (*request.mutable_parameters())["top_p"].set_double_param(0.9f);
  ModelInferResponse response;
  const grpc::Status status = Infer(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const Answer answer = Read(response);
  EXPECT_THAT(answer.ids, ElementsAreArray(expected.token_ids()));
  EXPECT_EQ(answer.text, expected.text());
}

// The penalties, min_p and logit_bias as request parameters mean what convoy's fields mean.
TEST_F(KServeTest, PenaltyAndLogitBiasParametersMeanWhatConvoysFieldsMean) {
  v1::InferRequest convoy_request;
  convoy_request.set_prompt_text(kPrompt);
  v1::SamplingParameters* s = convoy_request.mutable_sampling();
  s->set_max_tokens(12);
  s->set_temperature(0.9f);
  s->set_seed(3);
  s->set_min_p(0.05f);
  s->set_presence_penalty(1.5f);
  s->set_frequency_penalty(0.5f);
  s->set_repetition_penalty(1.2f);
  (*s->mutable_logit_bias())[5] = 100.0f;
  const v1::InferResponse expected = Convoy(convoy_request);
  // The bias all but forces token 5.
  EXPECT_THAT(expected.token_ids(), ::testing::Each(5));

  ModelInferRequest request = RawTextRequest(model_, kPrompt, 12);
  auto& p = *request.mutable_parameters();
  p["temperature"].set_double_param(0.9);
  p["seed"].set_int64_param(3);
  p["min_p"].set_double_param(0.05);
  p["presence_penalty"].set_double_param(1.5);
  p["frequency_penalty"].set_double_param(0.5);
  p["repetition_penalty"].set_double_param(1.2);
  p["logit_bias"].set_string_param(R"({"5": 100})");
  ModelInferResponse response;
  const grpc::Status status = Infer(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(Read(response).ids, ElementsAreArray(expected.token_ids()));

  ModelInferRequest bad = RawTextRequest(model_, kPrompt, 12);
  (*bad.mutable_parameters())["logit_bias"].set_string_param(R"({"x": 1})");
  const grpc::Status refused = Infer(bad, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), ::testing::StartsWith("parameters.logit_bias: "));
}

TEST_F(KServeTest, ModelStreamInferAnswersEachRequestInChunksThenAFinalResponse) {
  v1::InferRequest convoy_request;
  convoy_request.set_prompt_text(kPrompt);
  convoy_request.mutable_sampling()->set_max_tokens(24);
  const v1::InferResponse expected = Convoy(convoy_request);
  v1::InferRequest convoy_short = convoy_request;
  convoy_short.mutable_sampling()->set_max_tokens(5);
  const v1::InferResponse expected_short = Convoy(convoy_short);

  // Three requests on one stream: streamed, refused, and whole (stream: false).
  ModelInferRequest streamed = RawTextRequest(model_, kPrompt, 24);
  streamed.set_id("streamed");
  ModelInferRequest refused = RawTextRequest(model_, kPrompt, 0);
  refused.set_id("refused");
  (*refused.mutable_parameters())["max_tokens"].set_int64_param(0);
  ModelInferRequest whole = RawTextRequest(model_, kPrompt, 5);
  whole.set_id("whole");
  (*whole.mutable_parameters())["stream"].set_bool_param(false);
  auto by_id = Stream({streamed, refused, whole});

  const std::vector<ModelStreamInferResponse>& chunks = by_id["streamed"];
  ASSERT_GE(chunks.size(), 2u);
  Answer joined;
  for (size_t i = 0; i < chunks.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(chunks[i].error_message(), "");
    EXPECT_EQ(FinalFlag(chunks[i].infer_response()), i + 1 == chunks.size());
    const Answer chunk = Read(chunks[i].infer_response());
    joined.ids.insert(joined.ids.end(), chunk.ids.begin(), chunk.ids.end());
    joined.text += chunk.text;
  }
  EXPECT_THAT(joined.ids, ElementsAreArray(expected.token_ids()));
  EXPECT_EQ(joined.text, expected.text());
  EXPECT_EQ(chunks.back().infer_response().parameters().at("completion_tokens").int64_param(),
            expected.token_ids_size());

  ASSERT_EQ(by_id["refused"].size(), 1u);
  EXPECT_THAT(by_id["refused"][0].error_message(),
              HasSubstr("INVALID_ARGUMENT: parameters.max_tokens: must be at least 1, got 0"));
  EXPECT_TRUE(FinalFlag(by_id["refused"][0].infer_response()));

  ASSERT_EQ(by_id["whole"].size(), 1u);
  EXPECT_TRUE(FinalFlag(by_id["whole"][0].infer_response()));
  const Answer answer = Read(by_id["whole"][0].infer_response());
  EXPECT_THAT(answer.ids, ElementsAreArray(expected_short.token_ids()));
  EXPECT_EQ(answer.text, expected_short.text());
}

TEST_F(KServeTest, MetadataAndReadiness) {
  grpc::ClientContext live_context;
  inference::ServerLiveResponse live;
  ASSERT_TRUE(kserve_->ServerLive(&live_context, {}, &live).ok());
  EXPECT_TRUE(live.live());

  grpc::ClientContext ready_context;
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(kserve_->ServerReady(&ready_context, {}, &ready).ok());
  EXPECT_TRUE(ready.ready());

  for (const auto& [name, version, want] : std::vector<std::tuple<std::string, std::string, bool>>{
           {model_, "", true}, {model_, "1", true}, {model_, "2", false}, {"other", "", false}}) {
    SCOPED_TRACE(name + " version '" + version + "'");
    grpc::ClientContext context;
    inference::ModelReadyRequest request;
    request.set_name(name);
    request.set_version(version);
    inference::ModelReadyResponse response;
    ASSERT_TRUE(kserve_->ModelReady(&context, request, &response).ok());
    EXPECT_EQ(response.ready(), want);
  }

  grpc::ClientContext server_context;
  inference::ServerMetadataResponse server;
  ASSERT_TRUE(kserve_->ServerMetadata(&server_context, {}, &server).ok());
  EXPECT_EQ(server.name(), "convoy");
  EXPECT_FALSE(server.version().empty());

  grpc::ClientContext model_context;
  inference::ModelMetadataRequest model_request;
  model_request.set_name(model_);
  inference::ModelMetadataResponse model;
  ASSERT_TRUE(kserve_->ModelMetadata(&model_context, model_request, &model).ok());
  EXPECT_EQ(model.name(), model_);
  EXPECT_THAT(model.versions(), ElementsAre("1"));
  std::map<std::string, std::string> inputs, outputs;
  for (const auto& t : model.inputs()) inputs[t.name()] = t.datatype();
  for (const auto& t : model.outputs()) outputs[t.name()] = t.datatype();
  EXPECT_EQ(inputs["text_input"], "BYTES");
  EXPECT_EQ(inputs["input_ids"], "INT32");
  EXPECT_EQ(inputs["max_tokens"], "INT32");
  EXPECT_EQ(inputs["stream"], "BOOL");
  EXPECT_EQ(outputs["text_output"], "BYTES");
  EXPECT_EQ(outputs["output_ids"], "INT32");
  EXPECT_THAT(model.outputs(0).shape(), ElementsAre(-1));

  grpc::ClientContext config_context;
  inference::ModelConfigRequest config_request;
  config_request.set_name(model_);
  inference::ModelConfigResponse config;
  ASSERT_TRUE(kserve_->ModelConfig(&config_context, config_request, &config).ok());
  EXPECT_EQ(config.config().name(), model_);
  EXPECT_TRUE(config.config().model_transaction_policy().decoupled());
  EXPECT_EQ(config.config().input_size(), model.inputs_size());

  grpc::ClientContext unknown_context;
  model_request.set_name("other");
  const grpc::Status unknown = kserve_->ModelMetadata(&unknown_context, model_request, &model);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(unknown.error_message(), HasSubstr("name: unknown model 'other'"));
}

TEST_F(KServeTest, BadRequestsNameTheTensorOrParameterAndTheServerServesOn) {
  struct Case {
    std::string name;
    ModelInferRequest request;
    std::string message;
  };
  std::vector<Case> cases;
  {
    ModelInferRequest r;
    r.set_model_name(model_);
    AddInput(&r, "max_tokens", "INT32", {1})->mutable_contents()->add_int_contents(4);
    cases.push_back({"no prompt", r, "text_input: the request has no prompt"});
  }
  {
    ModelInferRequest r;
    r.set_model_name(model_);
    AddInput(&r, "input_ids", "FP32", {2})->mutable_contents()->add_fp32_contents(1.0f);
    cases.push_back({"wrong datatype", r, "input_ids: datatype FP32; expected INT32 or INT64"});
  }
  cases.push_back(
      {"unknown model", RawTextRequest("other", kPrompt, 4), "model_name: unknown model 'other'"});
  cases.push_back({"max_tokens -3 as an input", RawTextRequest(model_, kPrompt, -3),
                   "max_tokens: must be at least 1, got -3"});
  {
    ModelInferRequest r = RawTextRequest(model_, kPrompt, 0);
    (*r.mutable_parameters())["max_tokens"].set_string_param("many");
    cases.push_back(
        {"max_tokens as a string parameter", r, "parameters.max_tokens: expected an integer"});
  }
  {
    ModelInferRequest r = RawTextRequest(model_, kPrompt, 4);
    (*r.mutable_parameters())["max_tokens"].set_int64_param(4);
    cases.push_back({"max_tokens twice", r, "given twice (also as max_tokens)"});
  }
  {
    ModelInferRequest r = RawTextRequest(model_, kPrompt, 4);
    AddInput(&r, "temperature", "FP32", {1});
    r.add_raw_input_contents(std::string(2, '\0'));
    cases.push_back({"short raw contents", r, "temperature: shape [1] of FP32 needs 4 bytes"});
  }
  {
    ModelInferRequest r = RawTextRequest(model_, kPrompt, 4);
    AddInput(&r, "beam_width", "INT32", {1});
    r.add_raw_input_contents(RawValues(std::vector<int32_t>{2}));
    cases.push_back({"unknown input", r, "inputs[2]: unknown input 'beam_width'"});
  }
  {
    ModelInferRequest r = RawTextRequest(model_, kPrompt, 4);
    r.add_outputs()->set_name("logits");
    cases.push_back({"unknown output", r, "outputs[0]: unknown output 'logits'"});
  }
  {
    ModelInferRequest r = RawTextRequest(model_, kPrompt, 4);
    (*r.mutable_parameters())["stream"].set_bool_param(true);
    cases.push_back({"stream on ModelInfer", r, "parameters.stream: true needs ModelStreamInfer"});
  }
  {
    ModelInferRequest r = RawTextRequest(model_, kPrompt, 4);
    AddInput(&r, "stop", "BYTES", {1});
    r.add_raw_input_contents(RawBytes({""}));
    cases.push_back({"empty stop string", r, "stop[0]: a stop string may not be empty"});
  }
  {
    ModelInferRequest r = RawTextRequest(model_, kPrompt, 4);
    (*r.mutable_parameters())["max_new_tokens"].set_int64_param(4);
    cases.push_back({"unknown parameter", r, "parameters.max_new_tokens: unknown parameter"});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ModelInferResponse response;
    const grpc::Status status = Infer(c.request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(c.message));
  }
  // What Triton's own clients send besides (tritonclient: priority, timeout, and on streams
  // triton_enable_empty_final_response) is taken.
  ModelInferRequest triton = RawTextRequest(model_, kPrompt, 3);
  (*triton.mutable_parameters())["priority"].set_uint64_param(1);
  (*triton.mutable_parameters())["timeout"].set_int64_param(60000000);
  (*triton.mutable_parameters())["triton_enable_empty_final_response"].set_bool_param(true);
  ModelInferResponse fine;
  const grpc::Status status = Infer(triton, &fine);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_LE(Read(fine).ids.size(), 3u);
}

TEST_F(KServeTest, ACancelledStreamCancelsItsRequestsAndFreesTheirKvBlocks) {
  const std::optional<v1::ServerInfo> before = GetServerInfo(*stub_);
  ASSERT_TRUE(before.has_value());
  ASSERT_EQ(before->kv_blocks_free(), before->kv_blocks_total());

  grpc::ClientContext context;
  context.set_deadline(Deadline());
  auto stream = kserve_->ModelStreamInfer(&context);
  ModelInferRequest request;
  request.set_model_name(model_);
  InputTensor* ids = AddInput(&request, "input_ids", "INT32", {30});
  for (int i = 0; i < 30; ++i) ids->mutable_contents()->add_int_contents(100 + 7 * i);
  AddInput(&request, "max_tokens", "INT32", {1})->mutable_contents()->add_int_contents(8000);
  ASSERT_TRUE(stream->Write(request));
  ModelStreamInferResponse message;
  size_t tokens = 0;
  while (tokens < 3 && stream->Read(&message)) {
    ASSERT_EQ(message.error_message(), "");
    tokens += Read(message.infer_response()).ids.size();
  }
  ASSERT_GE(tokens, 3u);
  const std::optional<v1::ServerInfo> during = GetServerInfo(*stub_);
  ASSERT_TRUE(during.has_value());
  EXPECT_LT(during->kv_blocks_free(), during->kv_blocks_total());

  context.TryCancel();
  while (stream->Read(&message)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);

  // The engine's snapshot is refreshed after the request's final event: poll, bounded.
  // The cancellation is counted when the engine lets the request go: wait for that too.
  const std::optional<v1::ServerInfo> after =
      WaitForServerInfo(*stub_, [&before](const v1::ServerInfo& info) {
        return info.kv_blocks_free() == info.kv_blocks_total() && info.num_running() == 0 &&
               info.active_calls() == 0 && info.requests_cancelled() > before->requests_cancelled();
      });
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->kv_blocks_free(), after->kv_blocks_total());
  EXPECT_EQ(after->requests_cancelled() - before->requests_cancelled(), 1);
  EXPECT_EQ(after->active_calls(), 0);
}

// Streams cancelled at random moments while their long prompts are tokenized, admitted or run
// (as a client that gives up at once would), from one client with max_in_flight_per_client 4:
// every request ends, none runs on for the gone client, and the client's slots are all free
// again: its next request is taken, and the server holds nothing.
TEST(KServeCancelTest, StreamsCancelledAtAnyMomentLeaveNoRequestAndNoSlotBehind) {
  std::unique_ptr<DaemonProcess> daemon = DaemonProcess::Start(
      ModelDir(), DefaultTestConfig() + "request_limits { max_in_flight_per_client: 4 }\n");
  ASSERT_NE(daemon, nullptr);
  auto kserve = inference::GRPCInferenceService::NewStub(daemon->channel());
  std::unique_ptr<v1::Inference::Stub> stub = daemon->inference();
  std::string model;
  {
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    v1::ModelInfo info;
    ASSERT_TRUE(stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok());
    model = info.name();
  }
  std::string prompt;
  for (int i = 0; i < 3000; ++i) absl::StrAppend(&prompt, " word", i % 10);
  const ModelInferRequest request = RawTextRequest(model, prompt, 64);

  constexpr int kThreads = 4;
  constexpr int kCallsPerThread = 15;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&kserve, &request, t] {
      std::mt19937 random(1234 + t);
      std::uniform_int_distribution<int> delay_us(0, 8000);
      for (int i = 0; i < kCallsPerThread; ++i) {
        grpc::ClientContext context;
        context.set_deadline(Deadline());
        auto stream = kserve->ModelStreamInfer(&context);
        stream->Write(request);
        absl::SleepFor(absl::Microseconds(delay_us(random)));
        context.TryCancel();
        ModelStreamInferResponse message;
        while (stream->Read(&message)) {
        }
        stream->Finish().IgnoreError();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  // Nothing is left: no request in the engine, no call open, every KV block free (polled: the
  // engine's snapshot follows the requests' final events).
  std::optional<v1::ServerInfo> after;
  const absl::Time give_up = absl::Now() + kLiveness;
  do {
    after = GetServerInfo(*stub);
    if (after && after->num_running() == 0 && after->num_waiting() == 0 &&
        after->active_calls() == 0 && after->kv_blocks_free() == after->kv_blocks_total()) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  } while (absl::Now() < give_up);
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->num_running(), 0);
  EXPECT_EQ(after->num_waiting(), 0);
  EXPECT_EQ(after->active_calls(), 0);
  EXPECT_EQ(after->kv_blocks_free(), after->kv_blocks_total());

  // The same client's slots are free: four requests at once are all taken.
  std::vector<std::thread> next;
  std::vector<grpc::Status> statuses(4);
  for (int i = 0; i < 4; ++i) {
    next.emplace_back([&, i] {
      grpc::ClientContext context;
      context.set_deadline(Deadline());
      ModelInferResponse response;
      statuses[i] = kserve->ModelInfer(&context, RawTextRequest(model, kPrompt, 2), &response);
    });
  }
  for (std::thread& thread : next) thread.join();
  for (const grpc::Status& status : statuses) {
    EXPECT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
  }
}

TEST_F(KServeTest, StructuredOutputParametersHoldTheAnswer) {
  ModelInferRequest request = RawTextRequest(model_, kPrompt, 0);
  (*request.mutable_parameters())["choices"].set_string_param(R"(["Paris", "Lyon", "Nice"])");
  ModelInferResponse response;
  grpc::Status status = Infer(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const Answer answer = Read(response);
  EXPECT_THAT(answer.text, ::testing::AnyOf("Paris", "Lyon", "Nice"));
  // The same answer as convoy's own API with the same constraint.
  v1::InferRequest own;
  own.set_prompt_text(kPrompt);
  for (const char* c : {"Paris", "Lyon", "Nice"}) {
    own.mutable_constraint()->mutable_choices()->add_choices(c);
  }
  EXPECT_EQ(Convoy(own).text(), answer.text);

  ModelInferRequest regex = RawTextRequest(model_, kPrompt, 0);
  (*regex.mutable_parameters())["regex"].set_string_param("[0-9]{4}");
  ASSERT_TRUE(Infer(regex, &response).ok());
  EXPECT_TRUE(std::regex_match(Read(response).text, std::regex("[0-9]{4}"))) << Read(response).text;

  // Refusals name the parameter as the client sent it.
  ModelInferRequest bad = RawTextRequest(model_, kPrompt, 0);
  (*bad.mutable_parameters())["regex"].set_string_param("(unclosed");
  status = Infer(bad, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), ::testing::StartsWith("parameters.regex: "));
  ModelInferRequest not_a_list = RawTextRequest(model_, kPrompt, 0);
  (*not_a_list.mutable_parameters())["choices"].set_string_param("Paris");
  status = Infer(not_a_list, &response);
  EXPECT_THAT(status.error_message(), ::testing::StartsWith("parameters.choices: "));
  ModelInferRequest two = RawTextRequest(model_, kPrompt, 0);
  (*two.mutable_parameters())["regex"].set_string_param("a");
  (*two.mutable_parameters())["json_object"].set_bool_param(true);
  status = Infer(two, &response);
  EXPECT_THAT(status.error_message(), HasSubstr("given twice"));
}

}  // namespace
}  // namespace convoy::testing
