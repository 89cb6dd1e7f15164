#include "frontend/openai_api.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/status_mapping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace convoy {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Json = nlohmann::json;

constexpr OpenAiEndpoint kChat = OpenAiEndpoint::kChatCompletions;
constexpr OpenAiEndpoint kCompletions = OpenAiEndpoint::kCompletions;

OpenAiRequest Parse(OpenAiEndpoint endpoint, const std::string& body) {
  ParsedOpenAiRequest parsed = ParseOpenAiRequest(endpoint, body);
  EXPECT_TRUE(parsed.request.has_value()) << parsed.error.message;
  return parsed.request.value_or(OpenAiRequest());
}

OpenAiError Error(OpenAiEndpoint endpoint, const std::string& body) {
  ParsedOpenAiRequest parsed = ParseOpenAiRequest(endpoint, body);
  EXPECT_FALSE(parsed.request.has_value()) << body;
  return parsed.error;
}

TEST(OpenAiApiTest, AChatRequestBecomesTheSharedRequest) {
  const OpenAiRequest r = Parse(kChat, R"({
    "model": "smol", "messages": [
      {"role": "developer", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]},
      {"role": "assistant", "content": null}, {"role": "user", "content": "?", "name": "ann"}],
    "max_completion_tokens": 12, "temperature": 0.5, "top_p": 0.9, "top_k": -1, "seed": 7,
    "stop": ["\n", "END"], "stream": true, "stream_options": {"include_usage": true},
    "logprobs": true, "top_logprobs": 3, "n": 1, "presence_penalty": 0, "user": "u1"})");
  EXPECT_EQ(r.request.model(), "smol");
  ASSERT_EQ(r.request.messages_size(), 4);
  EXPECT_EQ(r.request.messages(0).role(), "system");
  EXPECT_EQ(r.request.messages(1).content(), "Hi there");
  EXPECT_EQ(r.request.messages(2).content(), "");
  EXPECT_EQ(r.request.sampling().max_tokens(), 12);
  EXPECT_FLOAT_EQ(r.request.sampling().temperature(), 0.5f);
  EXPECT_FLOAT_EQ(r.request.sampling().top_p(), 0.9f);
  EXPECT_EQ(r.request.sampling().top_k(), 0);
  EXPECT_EQ(r.request.sampling().seed(), 7u);
  EXPECT_THAT(r.request.sampling().stop(), ElementsAre("\n", "END"));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.request.return_logprobs());
  EXPECT_EQ(r.request.top_logprobs(), 3);
  // `user` names an end user, not the request.
  EXPECT_EQ(r.request.client_request_id(), "");
}

// Penalties, logit_bias and the min_p and repetition_penalty extensions reach the shared request
// as given; their ranges are checked there, with every protocol's (request_validation_test).
TEST(OpenAiApiTest, PenaltiesAndLogitBiasBecomeTheSharedRequest) {
  const OpenAiRequest r = Parse(kChat, R"({
    "messages": [{"role": "user", "content": "a"}], "presence_penalty": 0.5,
    "frequency_penalty": -1, "repetition_penalty": 1.2, "min_p": 0.05,
    "logit_bias": {"17": 100, "250": -100, "3": 2.5}})");
  const v1::SamplingParameters& s = r.request.sampling();
  EXPECT_FLOAT_EQ(s.presence_penalty(), 0.5f);
  EXPECT_FLOAT_EQ(s.frequency_penalty(), -1.0f);
  EXPECT_FLOAT_EQ(s.repetition_penalty(), 1.2f);
  EXPECT_FLOAT_EQ(s.min_p(), 0.05f);
  ASSERT_EQ(s.logit_bias_size(), 3);
  EXPECT_FLOAT_EQ(s.logit_bias().at(17), 100.0f);
  EXPECT_FLOAT_EQ(s.logit_bias().at(250), -100.0f);
  EXPECT_FLOAT_EQ(s.logit_bias().at(3), 2.5f);
  // Left out, they stay unset: the defaults change nothing.
  const OpenAiRequest plain = Parse(kCompletions, R"({"prompt": "a", "logit_bias": {}})");
  EXPECT_FALSE(plain.request.sampling().has_presence_penalty());
  EXPECT_EQ(plain.request.sampling().logit_bias_size(), 0);
}

TEST(OpenAiApiTest, ACompletionPromptIsTextOrIds) {
  EXPECT_EQ(Parse(kCompletions, R"({"prompt": "Once upon"})").request.prompt_text(), "Once upon");
  EXPECT_EQ(Parse(kCompletions, R"({"prompt": ["Once upon"]})").request.prompt_text(), "Once upon");
  EXPECT_THAT(Parse(kCompletions, R"({"prompt": [1, 2, 3]})").request.prompt_token_ids(),
              ElementsAre(1, 2, 3));
  EXPECT_THAT(Parse(kCompletions, R"({"prompt": [[4, 5]]})").request.prompt_token_ids(),
              ElementsAre(4, 5));
  EXPECT_FALSE(
      Parse(kCompletions, R"({"prompt": "x", "cache_prompt": false})").request.cache_prompt());
  EXPECT_FALSE(Parse(kCompletions, R"({"prompt": "x"})").request.has_cache_prompt());
  const OpenAiRequest r = Parse(kCompletions, R"({"prompt": "x", "logprobs": 2, "stop": "."})");
  EXPECT_TRUE(r.request.return_logprobs());
  EXPECT_EQ(r.request.top_logprobs(), 2);
  EXPECT_THAT(r.request.sampling().stop(), ElementsAre("."));
  EXPECT_FALSE(r.request.sampling().has_max_tokens());  // the server's default
}

// What OpenAI's clients send beside a request and what changes nothing in a self-hosted answer
// (store, metadata, service_tier, the prompt cache's hints, safety_identifier, prediction, text
// modalities) is taken, and the request is the one without them; each is still checked.
TEST(OpenAiApiTest, OpenAisFieldsThatChangeNoAnswerAreTakenAndChecked) {
  const std::string plain = R"({"messages": [{"role": "user", "content": "a"}], "max_tokens": 3)";
  const OpenAiRequest reference = Parse(kChat, plain + "}");
  const char* const taken[] = {
      R"("store": true)",
      R"("store": false, "metadata": {"session": "s-1", "prompt": "p-2"})",
      R"("service_tier": "auto")",
      R"("service_tier": "flex", "prompt_cache_key": "user-42")",
      R"("prompt_cache_retention": "24h", "prompt_cache_options": {"ttl": "30m"})",
      R"("safety_identifier": "hash-of-a-user")",
      R"("prediction": {"type": "content", "content": "expected text"})",
      R"("prediction": {"type": "content", "content": [{"type": "text", "text": "x"}]})",
      R"("modalities": ["text"])",
      R"("metadata": null, "service_tier": null, "modalities": null)",
  };
  for (const char* extra : taken) {
    SCOPED_TRACE(extra);
    const OpenAiRequest r = Parse(kChat, absl::StrCat(plain, ", ", extra, "}"));
    EXPECT_EQ(r.request.SerializeAsString(), reference.request.SerializeAsString());
  }
  std::string many = "{";
  for (int i = 0; i < 17; ++i) absl::StrAppend(&many, i > 0 ? ", " : "", "\"k", i, "\": \"v\"");
  many += "}";
  struct Case {
    std::string extra;
    const char* param;
  };
  const Case refused[] = {
      {R"("store": "yes")", "store"},
      {R"("metadata": ["a"])", "metadata"},
      {R"("metadata": {"a": 1})", "metadata.a"},
      {absl::StrCat(R"("metadata": {")", std::string(65, 'k'), R"(": "v"})"),
       "metadata.kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"},
      {absl::StrCat(R"("metadata": {"a": ")", std::string(513, 'v'), R"("})"), "metadata.a"},
      {absl::StrCat(R"("metadata": )", many), "metadata"},
      {R"("service_tier": 1)", "service_tier"},
      {R"("prompt_cache_key": {})", "prompt_cache_key"},
      {R"("prompt_cache_options": "30m")", "prompt_cache_options"},
      {R"("safety_identifier": 7)", "safety_identifier"},
      {R"("prediction": {"type": "guess", "content": "x"})", "prediction"},
      {R"("prediction": {"type": "content", "content": [{"type": "image_url"}]})",
       "prediction.content[0]"},
      {R"("modalities": "text")", "modalities"},
      {R"("modalities": ["text", "audio"])", "modalities[1]"},
      // What would change the answer, or leave out what the client asked for, is refused.
      {R"("audio": {"voice": "alloy", "format": "wav"})", "audio"},
      {R"("web_search_options": {})", "web_search_options"},
      {R"("moderation": {"model": "omni-moderation-latest"})", "moderation"},
      {R"("reasoning_effort": "low")", "reasoning_effort"},
  };
  for (const Case& c : refused) {
    SCOPED_TRACE(c.extra);
    const OpenAiError error = Error(kChat, absl::StrCat(plain, ", ", c.extra, "}"));
    EXPECT_EQ(error.http_status, 400);
    EXPECT_EQ(error.param, c.param);
  }
  // They are the chat API's: the completions API refuses them as unknown.
  EXPECT_EQ(Error(kCompletions, R"({"prompt": "a", "store": false})").param, "store");
}

// An assistant's turn sent back in the history as OpenAI's answers hold it: null refusal, audio
// and function_call are taken, a refusal is what the assistant said (as a field or a part).
TEST(OpenAiApiTest, AnAssistantsAnswerAsOpenAiGaveItIsTakenBackInTheHistory) {
  const OpenAiRequest r = Parse(kChat, R"({"messages": [
    {"role": "user", "content": "a"},
    {"role": "assistant", "content": "b", "refusal": null, "audio": null, "function_call": null,
     "annotations": null, "tool_calls": null},
    {"role": "user", "content": "c"},
    {"role": "assistant", "content": null, "refusal": "I can't help with that."},
    {"role": "user", "content": "d"},
    {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
    {"role": "user", "content": "e"}]})");
  ASSERT_EQ(r.request.messages_size(), 7);
  EXPECT_EQ(r.request.messages(1).content(), "b");
  EXPECT_EQ(r.request.messages(3).content(), "I can't help with that.");
  EXPECT_EQ(r.request.messages(5).content(), "No.");
  struct Case {
    const char* message;
    const char* param;
  };
  const Case refused[] = {
      {R"({"role": "user", "content": "a", "refusal": null})", "messages[1].refusal"},
      {R"({"role": "user", "content": [{"type": "refusal", "refusal": "x"}]})",
       "messages[1].content[0]"},
      {R"({"role": "assistant", "content": "a", "refusal": 5})", "messages[1].refusal"},
      {R"({"role": "assistant", "content": "a", "annotations": {}})", "messages[1].annotations"},
      {R"({"role": "tool", "content": "a", "tool_call_id": "c", "annotations": []})",
       "messages[1].annotations"},
      {R"({"role": "assistant", "content": [{"type": "refusal"}]})",
       "messages[1].content[0].refusal"},
      {R"({"role": "assistant", "content": "a", "audio": {"id": "audio_1"}})", "messages[1].audio"},
      {R"({"role": "assistant", "content": null, "function_call": {"name": "f",
           "arguments": "{}"}})",
       "messages[1].function_call"},
  };
  for (const Case& c : refused) {
    SCOPED_TRACE(c.message);
    const OpenAiError error =
        Error(kChat,
              absl::StrCat(R"({"messages": [{"role": "user", "content": "q"}, )", c.message, "]}"));
    EXPECT_EQ(error.param, c.param);
  }
}

TEST(OpenAiApiTest, EveryBadFieldIsNamed) {
  struct Case {
    OpenAiEndpoint endpoint;
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {kChat, R"({"messages": []})", "messages"},
      {kChat, R"({"model": "m"})", "messages"},
      {kChat, R"({"messages": [{"role": 3, "content": "a"}]})", "messages[0].role"},
      {kChat, R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {kChat, R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content[0]"},
      {kChat, R"({"messages": [{"role": "user", "content": "a", "tool_calls": 5}]})",
       "messages[0].tool_calls"},
      {kChat,
       R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c",
           "type": "function", "function": {"name": "f", "arguments": "[1]"}}]}]})",
       "messages[0].tool_calls[0].function.arguments"},
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "tool_choice": "required"})",
       "tool_choice"},
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"type": "function",
           "function": {"name": "f"}}], "tool_choice": {"type": "function",
           "function": {"name": "g"}}})",
       "tool_choice.function.name"},
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"type": "function",
           "function": {"name": "no spaces"}}]})",
       "tools[0].function.name"},
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"type": "function",
           "function": {"name": "f"}}], "tool_choice": "required",
           "response_format": {"type": "json_object"}})",
       "tool_choice"},
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "response_format": {"type":
           "json_schema", "json_schema": {"name": "x"}, "extra": 1}})",
       "response_format.extra"},
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "max_tokens": "5"})",
       "max_tokens"},
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "max_tokens": 2.5})",
       "max_tokens"},
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "max_tokens": 0})", "max_tokens"},
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "temperature": 3})",
       "temperature"},
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "stop": 4})", "stop"},
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "stop": ["a", 1]})", "stop[1]"},
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "n": 0})", "n"},
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "frequency_penalty": "1"})",
       "frequency_penalty"},
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "logit_bias": [1]})",
       "logit_bias"},
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "logit_bias": {"x": 1}})",
       "logit_bias"},
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "logit_bias": {"-3": 1}})",
       "logit_bias"},
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "logit_bias": {"3": "a"}})",
       "logit_bias.3"},
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "min_p": true})", "min_p"},
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "tools": [{}]})",
       "tools[0].type"},
      // Fields of the wrong type (each threw from Json::value once; the fuzzer found the first).
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"type": 2,
           "function": {"name": "f"}}]})",
       "tools[0].type"},
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"type": "function",
           "function": {"name": "f"}}], "tool_choice": {"type": 1, "function": {"name": "f"}}})",
       "tool_choice"},
      {kChat,
       R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": 5,
           "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]})",
       "messages[0].tool_calls[0].id"},
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "top_logprobs": 2})",
       "top_logprobs"},
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "stream_options": {}})",
       "stream_options"},
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "bogus": 1})", "bogus"},
      {kChat, R"({"messages": [{"role": "user", "content": "a"}], "model": 1})", "model"},
      {kCompletions, R"({"prompt": ""})", "prompt"},
      {kCompletions, R"({"prompt": ["a", "b"]})", "prompt"},
      {kCompletions, R"({"prompt": [1, -2]})", "prompt[1]"},
      {kCompletions, R"({"prompt": "a", "echo": 1})", "echo"},
      {kCompletions, R"({"prompt": "a", "logprobs": 9})", "logprobs"},
      {kCompletions, R"({"prompt": "a", "messages": []})", "messages"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    const OpenAiError error = Error(c.endpoint, c.body);
    EXPECT_EQ(error.http_status, 400);
    EXPECT_EQ(error.param, c.param);
    EXPECT_THAT(error.message, StartsWith(std::string(c.param) + ": "));
    const Json json = Json::parse(error.ToJson());
    EXPECT_EQ(json["error"]["param"], c.param);
    EXPECT_EQ(json["error"]["type"], "invalid_request_error");
  }
  for (const char* body : {"{", "[1]", "\"x\"", "{\"prompt\": \"\xff\"}"}) {
    SCOPED_TRACE(body);
    const OpenAiError error = Error(kCompletions, body);
    EXPECT_EQ(error.http_status, 400);
    EXPECT_THAT(error.message, HasSubstr("JSON"));
    EXPECT_TRUE(Json::parse(error.ToJson())["error"]["param"].is_null());
  }
}

// Numbers too large for their field, or below its range, are refused as out of range, naming the
// field; a fraction is named as a fraction; a number without one (1e3, 5.0) is an integer.
TEST(OpenAiApiTest, IntegerFieldsNameTheirRangeOrTheFraction) {
  struct Case {
    const char* field_and_value;
    const char* param;
    const char* fault;
  };
  const Case cases[] = {
      {R"("seed": -1e19)", "seed",
       "out of range: must be in [-9223372036854775808, 18446744073709551615], got -1e+19"},
      {R"("seed": 18446744073709551616)", "seed",
       "out of range: must be in [-9223372036854775808, 18446744073709551615]"},
      {R"("seed": 1e300)", "seed", "out of range"},
      {R"("max_tokens": 1e308)", "max_tokens",
       "out of range: must be in [1, 2147483647], got 1e+308"},
      {R"("max_tokens": 9223372036854775808)", "max_tokens", "out of range"},
      {R"("max_tokens": -5)", "max_tokens", "out of range"},
      {R"("max_tokens": 2.5)", "max_tokens",
       "expected an integer, got 2.5, a number with a fraction"},
      {R"("top_k": "3")", "top_k", "expected an integer, got a string"},
  };
  for (const Case& c : cases) {
    const std::string body = absl::StrCat(R"({"prompt": "a", )", c.field_and_value, "}");
    SCOPED_TRACE(body);
    const OpenAiError error = Error(kCompletions, body);
    EXPECT_EQ(error.http_status, 400);
    EXPECT_EQ(error.param, c.param);
    EXPECT_THAT(error.message, StartsWith(absl::StrCat(c.param, ": ", c.fault)));
  }
  const OpenAiRequest r =
      Parse(kCompletions, R"({"prompt": "a", "seed": 18446744073709551615, "max_tokens": 1e3,
                              "top_k": 5.0})");
  EXPECT_EQ(r.request.sampling().seed(), 18446744073709551615u);
  EXPECT_EQ(r.request.sampling().max_tokens(), 1000);
  EXPECT_EQ(r.request.sampling().top_k(), 5);
  // OpenAI declares the seed a signed 64-bit integer: a negative one is its two's complement.
  EXPECT_EQ(Parse(kCompletions, R"({"prompt": "a", "seed": -1})").request.sampling().seed(),
            18446744073709551615u);
  EXPECT_EQ(Parse(kCompletions, R"({"prompt": "a", "seed": -9223372036854775808})")
                .request.sampling()
                .seed(),
            9223372036854775808u);
}

// RESOURCE_EXHAUSTED has three causes, each with its own code: a full queue, the client's own
// in-flight limit, and a client that stopped reading (no queue at all).
TEST(OpenAiApiTest, EachCauseOfResourceExhaustedHasItsOwnCode) {
  struct Case {
    absl::Status status;
    int http_status;
    const char* type;
    const char* code;
  };
  const Case cases[] = {
      {absl::ResourceExhaustedError("queue full"), 429, "rate_limit_error", "queue_full"},
      {WithExhaustedCause(absl::ResourceExhaustedError("address 1.2.3.4 has 4 requests in flight"),
                          ExhaustedCause::kClientLimit),
       429, "rate_limit_error", "max_in_flight_per_client"},
      {WithExhaustedCause(absl::ResourceExhaustedError("the client read none of the output"),
                          ExhaustedCause::kSlowClient),
       408, "timeout_error", "slow_client"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.code);
    const OpenAiError e = OpenAiErrorFromStatus(c.status, kChat);
    EXPECT_EQ(e.http_status, c.http_status);
    EXPECT_EQ(e.type, c.type);
    EXPECT_EQ(e.code, c.code);
  }
}

TEST(OpenAiApiTest, SharedStatusesBecomeOpenAiErrors) {
  OpenAiError e = OpenAiErrorFromStatus(
      absl::InvalidArgumentError("sampling.max_tokens: 9000 exceeds the model's context"), kChat);
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.param, "max_tokens");
  EXPECT_EQ(e.message, "max_tokens: 9000 exceeds the model's context");
  e = OpenAiErrorFromStatus(absl::InvalidArgumentError("sampling.stop[2]: empty"), kChat);
  EXPECT_EQ(e.param, "stop");
  e = OpenAiErrorFromStatus(absl::InvalidArgumentError("prompt_text: the prompt has 9 tokens"),
                            kCompletions);
  EXPECT_EQ(e.param, "prompt");
  e = OpenAiErrorFromStatus(absl::InvalidArgumentError("model: unknown model 'x'"), kChat);
  EXPECT_EQ(e.http_status, 404);
  EXPECT_EQ(e.code, "model_not_found");
  EXPECT_EQ(OpenAiErrorFromStatus(absl::ResourceExhaustedError("queue full"), kChat).http_status,
            429);
  e = OpenAiErrorFromStatus(absl::UnavailableError("the model is loading; retry shortly"), kChat);
  EXPECT_EQ(e.http_status, 503);
  EXPECT_TRUE(e.param.empty());
  EXPECT_EQ(e.message, "the model is loading; retry shortly");
  EXPECT_EQ(OpenAiErrorFromStatus(absl::InternalError("boom"), kChat).http_status, 500);
}

TEST(OpenAiApiTest, ResponsesHaveOpenAisShape) {
  const OpenAiRequest request =
      Parse(kChat, R"({"messages": [{"role": "user", "content": "a"}], "stream": true,
                       "stream_options": {"include_usage": true}})");
  OpenAiResponder responder(request, "chatcmpl-7", 1700000000, "smol", nullptr);
  SessionOutput output;
  output.token_ids = {5, 6};
  output.text = "Hello";
  SessionEnd end;
  end.finish_reason = v1::FINISH_REASON_STOP;
  end.prompt_tokens = 3;
  end.completion_tokens = 2;

  const Json whole = Json::parse(responder.Whole(output, end));
  EXPECT_EQ(whole["object"], "chat.completion");
  EXPECT_EQ(whole["id"], "chatcmpl-7");
  EXPECT_EQ(whole["choices"][0]["message"]["content"], "Hello");
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(whole["usage"]["total_tokens"], 5);

  const std::string first = responder.FirstEvent();
  ASSERT_THAT(first, StartsWith("data: "));
  EXPECT_EQ(Json::parse(first.substr(6))["choices"][0]["delta"]["role"], "assistant");
  const std::string chunk = responder.OutputEvent(output);
  EXPECT_EQ(chunk.substr(chunk.size() - 2), "\n\n");
  EXPECT_EQ(Json::parse(chunk.substr(6))["choices"][0]["delta"]["content"], "Hello");
  const std::string ending = responder.EndEvents(end);
  EXPECT_THAT(ending, HasSubstr("\"finish_reason\":\"stop\""));
  EXPECT_THAT(ending, HasSubstr("\"choices\":[],"));
  EXPECT_THAT(ending, HasSubstr("\"total_tokens\":5"));
  EXPECT_EQ(ending.substr(ending.size() - 14), "data: [DONE]\n\n");

  SessionEnd failed;
  failed.status = absl::UnavailableError("the server shut down before request 7 finished");
  const std::string error_events = responder.EndEvents(failed);
  EXPECT_THAT(error_events, StartsWith("data: {\"error\":"));
  EXPECT_THAT(error_events, HasSubstr("data: [DONE]"));
}

TEST(OpenAiToolsTest, ToolsReachTheTemplateAndARequiredChoiceBecomesASchema) {
  const OpenAiRequest r = Parse(kChat, R"({
      "messages": [{"role": "user", "content": "weather?"},
                   {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
                    "type": "function", "function": {"name": "get_weather",
                    "arguments": "{\"city\": \"Paris\"}"}}]},
                   {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}],
      "tools": [{"type": "function", "function": {"name": "get_weather",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
                {"type": "function", "function": {"name": "get_time"}}],
      "tool_choice": "required"})");
  EXPECT_EQ(r.tool_mode, OpenAiToolMode::kForced);
  EXPECT_EQ(Json::parse(r.request.tools_json()).size(), 2u);
  // The call's arguments reach the template as an object, as chat templates expect them.
  const Json assistant = Json::parse(r.request.messages(1).extra_json());
  EXPECT_EQ(assistant["tool_calls"][0]["function"]["arguments"]["city"], "Paris");
  EXPECT_EQ(Json::parse(r.request.messages(2).extra_json())["tool_call_id"], "call_1");
  const Json schema = Json::parse(r.request.constraint().json_schema());
  ASSERT_EQ(schema["anyOf"].size(), 2u);
  EXPECT_EQ(schema["anyOf"][0]["properties"]["name"]["const"], "get_weather");
  EXPECT_EQ(schema["anyOf"][1]["properties"]["arguments"]["type"], "object");

  const OpenAiRequest named = Parse(kChat, R"({"messages": [{"role": "user", "content": "a"}],
      "tools": [{"type": "function", "function": {"name": "f"}},
                {"type": "function", "function": {"name": "g"}}],
      "tool_choice": {"type": "function", "function": {"name": "g"}}})");
  EXPECT_EQ(Json::parse(named.request.constraint().json_schema())["properties"]["name"]["const"],
            "g");
  const OpenAiRequest automatic = Parse(kChat, R"({"messages": [{"role": "user", "content": "a"}],
      "tools": [{"type": "function", "function": {"name": "f"}}]})");
  EXPECT_EQ(automatic.tool_mode, OpenAiToolMode::kAuto);
  EXPECT_FALSE(automatic.request.has_constraint());
  const OpenAiRequest none = Parse(kChat, R"({"messages": [{"role": "user", "content": "a"}],
      "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "none"})");
  EXPECT_EQ(none.tool_mode, OpenAiToolMode::kNone);
  EXPECT_TRUE(none.request.tools_json().empty());

  // A call whose id is null or missing reaches the template with an empty id.
  const OpenAiRequest no_ids = Parse(kChat, R"({"messages": [{"role": "user", "content": "a"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": null, "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"type": "function", "function": {"name": "g", "arguments": "{}"}}]}]})");
  const Json calls = Json::parse(no_ids.request.messages(1).extra_json())["tool_calls"];
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]["id"], "");
  EXPECT_EQ(calls[1]["id"], "");
  EXPECT_EQ(calls[1]["function"]["name"], "g");
}

TEST(OpenAiToolsTest, CallsAreReadInEachFamilysSyntax) {
  using Mode = OpenAiToolMode;
  auto calls = [](absl::string_view text, Mode mode) {
    std::vector<std::string> out;
    std::optional<ToolOutput> parsed = ParseToolOutput(text, mode);
    if (!parsed) return out;
    out.push_back(parsed->content);
    for (const ToolCall& c : parsed->calls) out.push_back(c.name + " " + c.arguments);
    return out;
  };
  EXPECT_THAT(calls(R"({"name": "f", "arguments": {"x": 1}})", Mode::kForced),
              ElementsAre("", R"(f {"x":1})"));
  EXPECT_THAT(calls("Let me look.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n"
                    "</tool_call>\n<tool_call>{\"name\": \"g\", \"arguments\": "
                    "\"{\\\"a\\\": 2}\"}</tool_call>",
                    Mode::kAuto),
              ElementsAre("Let me look.", "f {}", R"(g {"a":2})"));
  EXPECT_THAT(calls(R"([TOOL_CALLS] [{"name": "f", "arguments": {"y": "z"}}])", Mode::kAuto),
              ElementsAre("", R"(f {"y":"z"})"));
  EXPECT_THAT(calls(R"( {"name": "f", "parameters": {"q": true}})", Mode::kAuto),
              ElementsAre("", R"(f {"q":true})"));
  EXPECT_THAT(calls("Paris is sunny.", Mode::kAuto), ElementsAre());
  EXPECT_THAT(calls(R"({"not": "a call"})", Mode::kAuto), ElementsAre());
  EXPECT_THAT(calls("<tool_call>{broken</tool_call>", Mode::kAuto), ElementsAre());
  EXPECT_THAT(calls(R"({"name": "f", "arguments": {}})", Mode::kNone), ElementsAre());

  EXPECT_TRUE(MayBeToolCall("  <tool", Mode::kAuto));
  EXPECT_TRUE(MayBeToolCall("{\"na", Mode::kAuto));
  EXPECT_TRUE(MayBeToolCall("[TOOL", Mode::kAuto));
  EXPECT_TRUE(MayBeToolCall("\n", Mode::kAuto));
  EXPECT_FALSE(MayBeToolCall("Sure", Mode::kAuto));
  EXPECT_FALSE(MayBeToolCall("<b>", Mode::kAuto));
}

TEST(OpenAiToolsTest, AnAnswerWithCallsIsSentAsToolCallsWholeAndStreamed) {
  const OpenAiRequest request = Parse(kChat, R"({"messages": [{"role": "user", "content": "a"}],
      "tools": [{"type": "function", "function": {"name": "f"}}], "stream": true})");
  SessionEnd end;
  end.finish_reason = v1::FINISH_REASON_STOP;
  SessionOutput output;
  output.text = R"(<tool_call>{"name": "f", "arguments": {"k": 1}}</tool_call>)";

  OpenAiResponder whole_responder(request, "chatcmpl-9", 1, "smol", nullptr);
  const Json whole = Json::parse(whole_responder.Whole(output, end));
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_TRUE(whole["choices"][0]["message"]["content"].is_null());
  const Json& call = whole["choices"][0]["message"]["tool_calls"][0];
  EXPECT_EQ(call["function"]["name"], "f");
  EXPECT_EQ(call["function"]["arguments"], R"({"k":1})");
  EXPECT_EQ(call["type"], "function");
  EXPECT_FALSE(call["id"].get<std::string>().empty());

  // Streamed in pieces: nothing goes out until the calls are known, then one delta with them.
  OpenAiResponder streaming(request, "chatcmpl-9", 1, "smol", nullptr);
  std::string events;
  for (size_t i = 0; i < output.text.size(); i += 7) {
    SessionOutput piece;
    piece.text = output.text.substr(i, 7);
    events += streaming.OutputEvent(piece);
  }
  EXPECT_EQ(events, "");
  events = streaming.EndEvents(end);
  EXPECT_THAT(events,
              HasSubstr(R"("tool_calls":[{"function":{"arguments":"{\"k\":1}","name":"f"})"));
  EXPECT_THAT(events, HasSubstr(R"("index":0)"));
  EXPECT_THAT(events, HasSubstr(R"("finish_reason":"tool_calls")"));

  // Plain text streams once its first characters rule a call out.
  OpenAiResponder plain(request, "chatcmpl-9", 1, "smol", nullptr);
  SessionOutput sure;
  sure.text = "Sure";
  EXPECT_THAT(plain.OutputEvent(sure), HasSubstr(R"("content":"Sure")"));
  EXPECT_THAT(plain.EndEvents(end), HasSubstr(R"("finish_reason":"stop")"));
}

}  // namespace
}  // namespace convoy
