// The KServe and OpenAI request encoders and response readers of convoy-bench's clients, and the
// token arrival bookkeeping they share with the native client.
#include <cstdint>
#include <string>
#include <vector>

#include "bench/loadgen/kserve_encoding.h"
#include "bench/loadgen/openai_encoding.h"
#include "bench/loadgen/request_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace convoy::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Kind = OpenAiStreamEvent::Kind;

PlannedRequest Planned() {
  PlannedRequest r;
  r.index = 42;
  r.class_index = 1;
  r.priority = 0;
  r.temperature = 0.5f;
  r.sampling_seed = 0xfedcba9876543210ULL;  // above 2^63
  r.max_tokens = 17;
  r.prompt_token_ids = {1, 258, 0x01020304, 7};
  return r;
}

TEST(KServeEncodingTest, PromptAsRawLittleEndianInt32) {
  const inference::ModelInferRequest request = BuildKServeRequest(Planned(), "tiny");
  EXPECT_EQ(request.model_name(), "tiny");
  EXPECT_EQ(request.id(), "bench-42");
  ASSERT_EQ(request.inputs_size(), 1);
  EXPECT_EQ(request.inputs(0).name(), "input_ids");
  EXPECT_EQ(request.inputs(0).datatype(), "INT32");
  EXPECT_THAT(request.inputs(0).shape(), ElementsAre(4));
  EXPECT_FALSE(request.inputs(0).has_contents());
  ASSERT_EQ(request.raw_input_contents_size(), 1);
  const std::string expected("\x01\x00\x00\x00\x02\x01\x00\x00\x04\x03\x02\x01\x07\x00\x00\x00",
                             16);
  EXPECT_EQ(request.raw_input_contents(0), expected);
  EXPECT_EQ(request.outputs_size(), 0);  // every output, as tritonclient asks by default
}

TEST(KServeEncodingTest, SamplingAsParameters) {
  PlannedRequest planned = Planned();
  inference::ModelInferRequest request = BuildKServeRequest(planned, "tiny");
  const auto& p = request.parameters();
  EXPECT_EQ(p.at("max_tokens").int64_param(), 17);
  EXPECT_DOUBLE_EQ(p.at("temperature").double_param(), 0.5);
  EXPECT_EQ(p.at("seed").uint64_param(), 0xfedcba9876543210ULL);
  EXPECT_FALSE(p.contains("priority"));  // 0: the server's default
  planned.priority = 2;
  request = BuildKServeRequest(planned, "tiny");
  EXPECT_EQ(request.parameters().at("priority").int64_param(), 2);
}

inference::ModelStreamInferResponse Response(std::vector<int64_t> ids_shape, bool final,
                                             const std::string& finish_reason) {
  inference::ModelStreamInferResponse message;
  inference::ModelInferResponse* response = message.mutable_infer_response();
  auto* text = response->add_outputs();
  text->set_name("text_output");
  text->set_datatype("BYTES");
  text->add_shape(1);
  auto* ids = response->add_outputs();
  ids->set_name("output_ids");
  ids->set_datatype("INT32");
  for (int64_t d : ids_shape) ids->add_shape(d);
  (*response->mutable_parameters())["triton_final_response"].set_bool_param(final);
  if (!finish_reason.empty()) {
    (*response->mutable_parameters())["finish_reason"].set_string_param(finish_reason);
  }
  return message;
}

TEST(KServeEncodingTest, ReadsTokensFinalAndFinishReason) {
  KServeStreamMessage m = ReadKServeStreamMessage(Response({3}, false, ""));
  EXPECT_EQ(m.output_ids, 3);
  EXPECT_FALSE(m.final);
  EXPECT_EQ(m.error, "");
  m = ReadKServeStreamMessage(Response({1, 2}, true, "length"));  // with a batch dimension
  EXPECT_EQ(m.output_ids, 2);
  EXPECT_TRUE(m.final);
  EXPECT_EQ(m.finish_reason, "length");
  m = ReadKServeStreamMessage(Response({0}, true, "stop"));
  EXPECT_EQ(m.output_ids, 0);
}

TEST(KServeEncodingTest, ReadsErrorMessage) {
  inference::ModelStreamInferResponse message;
  message.set_error_message("parameters.max_tokens: must be at least 1, got 0");
  const KServeStreamMessage m = ReadKServeStreamMessage(message);
  EXPECT_EQ(m.error, "parameters.max_tokens: must be at least 1, got 0");
  EXPECT_EQ(m.output_ids, 0);
}

TEST(OpenAiEncodingTest, CompletionBody) {
  const nlohmann::json body = nlohmann::json::parse(BuildOpenAiCompletionBody(Planned(), "tiny"));
  EXPECT_EQ(body["model"], "tiny");
  EXPECT_EQ(body["prompt"], nlohmann::json({1, 258, 0x01020304, 7}));
  EXPECT_EQ(body["max_tokens"], 17);
  EXPECT_DOUBLE_EQ(body["temperature"].get<double>(), 0.5);
  // The seed's bits as a signed 64-bit integer.
  EXPECT_EQ(static_cast<uint64_t>(body["seed"].get<int64_t>()), 0xfedcba9876543210ULL);
  EXPECT_LT(body["seed"].get<int64_t>(), 0);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"], nlohmann::json({{"include_usage", true}}));
  EXPECT_EQ(body["user"], "bench-42");
  EXPECT_FALSE(body.contains("priority"));
  PlannedRequest planned = Planned();
  planned.priority = 3;
  EXPECT_EQ(nlohmann::json::parse(BuildOpenAiCompletionBody(planned, "tiny"))["priority"], 3);
}

TEST(OpenAiEncodingTest, OutputChunks) {
  OpenAiStreamEvent e = ParseOpenAiStreamEvent(
      R"({"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"Hi",)"
      R"("logprobs":null,"finish_reason":null}],"usage":null})");
  EXPECT_EQ(e.kind, Kind::kChunk);
  EXPECT_TRUE(e.output);
  EXPECT_EQ(e.finish_reason, "");
  EXPECT_EQ(e.completion_tokens, -1);
  // Tokens whose text is held back still arrive as an event.
  e = ParseOpenAiStreamEvent(R"({"choices":[{"index":0,"text":"","finish_reason":null}]})");
  EXPECT_TRUE(e.output);
}

TEST(OpenAiEncodingTest, FinishUsageAndDone) {
  OpenAiStreamEvent e = ParseOpenAiStreamEvent(
      R"({"choices":[{"index":0,"text":"","finish_reason":"length"}],"usage":null})");
  EXPECT_EQ(e.kind, Kind::kChunk);
  EXPECT_FALSE(e.output);
  EXPECT_EQ(e.finish_reason, "length");
  // Text and the finish reason in one chunk (as other servers send the last text).
  e = ParseOpenAiStreamEvent(R"({"choices":[{"index":0,"text":"end","finish_reason":"stop"}]})");
  EXPECT_TRUE(e.output);
  EXPECT_EQ(e.finish_reason, "stop");
  e = ParseOpenAiStreamEvent(
      R"({"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":17,"total_tokens":21}})");
  EXPECT_EQ(e.kind, Kind::kChunk);
  EXPECT_FALSE(e.output);
  EXPECT_EQ(e.completion_tokens, 17);
  EXPECT_EQ(ParseOpenAiStreamEvent("[DONE]").kind, Kind::kDone);
}

TEST(OpenAiEncodingTest, ChatChunks) {
  // The role chunk that opens a chat stream carries no output; content deltas do.
  OpenAiStreamEvent e = ParseOpenAiStreamEvent(
      R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]})");
  EXPECT_FALSE(e.output);
  e = ParseOpenAiStreamEvent(
      R"({"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]})");
  EXPECT_TRUE(e.output);
}

TEST(OpenAiEncodingTest, ErrorEvent) {
  const OpenAiStreamEvent e = ParseOpenAiStreamEvent(
      R"({"error":{"message":"the queue is full","type":"rate_limit_error","param":null,)"
      R"("code":"queue_full"}})");
  EXPECT_EQ(e.kind, Kind::kError);
  EXPECT_EQ(e.error, "the queue is full");
}

TEST(OpenAiEncodingTest, Malformed) {
  OpenAiStreamEvent e = ParseOpenAiStreamEvent("{\"choices\": [");
  EXPECT_EQ(e.kind, Kind::kMalformed);
  EXPECT_THAT(e.error, HasSubstr("not a JSON object"));
  e = ParseOpenAiStreamEvent(R"({"object":"text_completion"})");
  EXPECT_EQ(e.kind, Kind::kMalformed);
  EXPECT_THAT(e.error, HasSubstr("without choices"));
}

TEST(TokenArrivalsTest, SpreadsAMessagesGapOverItsTokens) {
  RequestRecord record;
  TokenArrivals arrivals;
  arrivals.Add(1.0, 2, &record);  // the first message: the second token's gap is 0
  arrivals.Add(1.5, 0, &record);  // nothing
  arrivals.Add(2.0, 4, &record);
  EXPECT_DOUBLE_EQ(record.first_token_s, 1.0);
  EXPECT_EQ(record.output_tokens, 6);
  EXPECT_EQ(record.output_messages, 2);
  EXPECT_THAT(record.token_gaps_s, ElementsAre(0, 0.25, 0.25, 0.25, 0.25));
}

TEST(ProtocolTest, NamesRoundTrip) {
  for (Protocol p : {Protocol::kNative, Protocol::kOpenAi, Protocol::kKServe}) {
    absl::StatusOr<Protocol> parsed = ParseProtocol(ProtocolName(p));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, p);
  }
  EXPECT_FALSE(ParseProtocol("http").ok());
}

}  // namespace
}  // namespace convoy::bench
