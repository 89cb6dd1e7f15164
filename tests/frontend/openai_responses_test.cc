#include "frontend/openai_responses.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "frontend/openai_api.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace convoy {
namespace {

using ::testing::ElementsAre;
using ::testing::StartsWith;
using Json = nlohmann::json;

OpenAiRequest Parse(const std::string& body) {
  ParsedOpenAiRequest parsed = ParseOpenAiRequest(OpenAiEndpoint::kResponses, body);
  EXPECT_TRUE(parsed.request.has_value()) << parsed.error.message;
  return parsed.request.value_or(OpenAiRequest());
}

OpenAiError Error(const std::string& body) {
  ParsedOpenAiRequest parsed = ParseOpenAiRequest(OpenAiEndpoint::kResponses, body);
  EXPECT_FALSE(parsed.request.has_value()) << body;
  return parsed.error;
}

// An agent's conversation as Responses items becomes the chat request it means: instructions
// first, calls in a row one assistant turn, each call's output a tool message.
TEST(OpenAiResponsesTest, ItemsToolsAndFormatBecomeTheChatRequest) {
  const OpenAiRequest r = Parse(R"({
    "model": "smol", "instructions": "Be brief.",
    "input": [
      {"role": "user", "content": "Weather in Paris and Rome?"},
      {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
       "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
      {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "weather",
       "arguments": "{\"city\": \"Paris\"}", "status": "completed"},
      {"type": "function_call", "call_id": "c2", "name": "weather",
       "arguments": "{\"city\": \"Rome\"}"},
      {"type": "function_call_output", "call_id": "c1", "output": "18 C"},
      {"type": "function_call_output", "call_id": "c2",
       "output": [{"type": "input_text", "text": "21 C"}]},
      {"role": "developer", "content": [{"type": "input_text", "text": "Say both."}]}],
    "tools": [{"type": "function", "name": "weather", "description": "d", "strict": true,
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}],
    "tool_choice": {"type": "function", "name": "weather"},
    "max_output_tokens": 40, "temperature": 0.5, "top_p": 0.9, "seed": 3, "store": false,
    "metadata": {"k": "v"}, "parallel_tool_calls": false, "truncation": "disabled",
    "include": ["reasoning.encrypted_content"], "stream": true})");
  EXPECT_EQ(r.endpoint, OpenAiEndpoint::kResponses);
  EXPECT_EQ(r.request.model(), "smol");
  std::vector<std::string> roles;
  for (const auto& m : r.request.messages()) roles.push_back(m.role());
  EXPECT_THAT(roles, ElementsAre("system", "user", "assistant", "tool", "tool", "system"));
  EXPECT_EQ(r.request.messages(0).content(), "Be brief.");
  EXPECT_EQ(r.request.messages(2).content(), "Checking.");
  const Json calls = Json::parse(r.request.messages(2).extra_json())["tool_calls"];
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]["id"], "c1");
  EXPECT_EQ(calls[1]["function"]["name"], "weather");
  EXPECT_EQ(r.request.messages(4).content(), "21 C");
  EXPECT_EQ(r.request.messages(5).content(), "Say both.");
  EXPECT_EQ(r.tool_mode, OpenAiToolMode::kForced);
  EXPECT_EQ(r.request.sampling().max_tokens(), 40);
  EXPECT_FLOAT_EQ(r.request.sampling().temperature(), 0.5f);
  EXPECT_EQ(r.request.sampling().seed(), 3u);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);  // the usage goes into response.completed
  // What the Response repeats of the request.
  EXPECT_EQ(r.responses_echo["instructions"], "Be brief.");
  EXPECT_EQ(r.responses_echo["max_output_tokens"], 40);
  EXPECT_EQ(r.responses_echo["tools"][0]["name"], "weather");
  EXPECT_EQ(r.responses_echo["parallel_tool_calls"], false);
  EXPECT_EQ(r.responses_echo["metadata"]["k"], "v");

  const OpenAiRequest text = Parse(R"({"input": "hi", "text": {"format": {"type": "json_schema",
      "name": "x", "strict": true, "schema": {"type": "object"}}}})");
  ASSERT_EQ(text.request.messages_size(), 1);
  EXPECT_EQ(text.request.messages(0).role(), "user");
  EXPECT_EQ(text.request.constraint().json_schema(), R"({"type":"object"})");
  EXPECT_TRUE(Parse(R"({"input": "hi", "text": {"format": {"type": "json_object"}}})")
                  .request.constraint()
                  .json_object());
  // Log-probabilities: by include, and top_logprobs alternatives.
  const OpenAiRequest plain = Parse(R"({"input": "hi"})");
  EXPECT_FALSE(plain.request.return_logprobs());
  const OpenAiRequest included =
      Parse(R"({"input": "hi", "include": ["message.output_text.logprobs"]})");
  EXPECT_TRUE(included.request.return_logprobs());
  EXPECT_EQ(included.request.top_logprobs(), 0);
  const OpenAiRequest top = Parse(R"({"input": "hi", "top_logprobs": 3})");
  EXPECT_TRUE(top.request.return_logprobs());
  EXPECT_EQ(top.request.top_logprobs(), 3);
}

TEST(OpenAiResponsesTest, EveryBadOrUnsupportedFieldIsNamedInTheResponsesApisTerms) {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({})", "input"},
      {R"({"input": []})", "input"},
      {R"({"input": [3]})", "input[0]"},
      {R"({"input": [{"role": "tool", "content": "a"}]})", "input[0].role"},
      {R"({"input": [{"role": "user", "content": "a", "name": "n"}]})", "input[0].name"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_image"}]}]})",
       "input[0].content[0]"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_text"}]}]})",
       "input[0].content[0].text"},
      {R"({"input": [{"type": "function_call", "call_id": "c", "name": "f"}]})",
       "input[0].arguments"},
      {R"({"input": [{"type": "function_call_output", "output": "x"}]})", "input[0].call_id"},
      {R"({"input": [{"type": "item_reference", "id": "msg_1"}]})", "input[0]"},
      {R"({"input": [{"type": "reasoning", "summary": []}]})", "input[0]"},
      {R"({"input": [{"type": "input_image", "image_url": "x"}]})", "input[0].type"},
      {R"({"input": "a", "previous_response_id": "resp_1"})", "previous_response_id"},
      {R"({"input": "a", "conversation": "conv_1"})", "conversation"},
      {R"({"input": "a", "reasoning": {"effort": "low"}})", "reasoning"},
      {R"({"input": "a", "background": true})", "background"},
      {R"({"input": "a", "prompt": {"id": "p"}})", "prompt"},
      {R"({"input": "a", "top_logprobs": 21})", "top_logprobs"},
      {R"({"input": "a", "truncation": "middle"})", "truncation"},
      {R"({"input": "a", "include": ["file_search_call.results"]})", "include[0]"},
      {R"({"input": "a", "tools": [{"type": "web_search"}]})", "tools[0].type"},
      {R"({"input": "a", "tools": [{"type": "function", "name": "f", "x": 1}]})", "tools[0].x"},
      {R"({"input": "a", "tools": [{"type": "function", "name": "bad name"}]})", "tools[0].name"},
      {R"({"input": "a", "tools": [{"type": "function", "name": "f"}],
           "tool_choice": {"type": "function", "name": "g"}})",
       "tool_choice.name"},
      {R"({"input": "a", "tool_choice": {"type": "web_search"}})", "tool_choice"},
      {R"({"input": "a", "text": {"format": {"type": "xml"}}})", "text.format.type"},
      {R"({"input": "a", "text": {"verbosity": "low"}})", "text.verbosity"},
      {R"({"input": "a", "text": {"format": {"type": "json_schema", "schema": 5}}})",
       "text.format.schema"},
      {R"({"input": "a", "max_output_tokens": 0})", "max_output_tokens"},
      {R"({"input": "a", "temperature": 9})", "temperature"},
      {R"({"input": "a", "stream_options": {"include_usage": true}})",
       "stream_options.include_usage"},
      {R"({"input": "a", "messages": []})", "messages"},
      {R"({"input": "a", "n": 2})", "n"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    const OpenAiError error = Error(c.body);
    EXPECT_EQ(error.http_status, 400);
    EXPECT_EQ(error.param, c.param);
    EXPECT_THAT(error.message, StartsWith(std::string(c.param) + ": "));
  }
  // The shared request path's errors too: a prompt too long names input, a token limit over the
  // context max_output_tokens.
  EXPECT_EQ(OpenAiErrorFromStatus(absl::InvalidArgumentError("prompt_text: too long"),
                                  OpenAiEndpoint::kResponses)
                .param,
            "input");
  EXPECT_EQ(OpenAiErrorFromStatus(absl::InvalidArgumentError("sampling.max_tokens: too many"),
                                  OpenAiEndpoint::kResponses)
                .message,
            "max_output_tokens: too many");
}

TEST(OpenAiResponsesTest, AChatAnswerBecomesAResponse) {
  const Json echo = {{"instructions", "Be brief."}, {"max_output_tokens", 8}};
  const Json usage = {{"prompt_tokens", 11}, {"completion_tokens", 8}, {"total_tokens", 19}};
  const Json cut = ResponseFromChat(
      "resp_7", 100, "smol", echo,
      {{"finish_reason", "length"}, {"message", {{"role", "assistant"}, {"content", "Hi"}}}},
      usage);
  EXPECT_EQ(cut["object"], "response");
  EXPECT_EQ(cut["status"], "incomplete");
  EXPECT_EQ(cut["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(cut["instructions"], "Be brief.");
  ASSERT_EQ(cut["output"].size(), 1u);
  EXPECT_EQ(cut["output"][0]["type"], "message");
  EXPECT_EQ(cut["output"][0]["content"][0]["type"], "output_text");
  EXPECT_EQ(cut["output"][0]["content"][0]["text"], "Hi");
  EXPECT_EQ(cut["usage"]["input_tokens"], 11);
  EXPECT_EQ(cut["usage"]["output_tokens"], 8);
  EXPECT_EQ(cut["usage"]["total_tokens"], 19);

  const Json called =
      ResponseFromChat("resp_7", 100, "smol", echo,
                       {{"finish_reason", "tool_calls"},
                        {"message",
                         {{"role", "assistant"},
                          {"content", nullptr},
                          {"tool_calls",
                           {{{"id", "call_resp_7_0"},
                             {"type", "function"},
                             {"function", {{"name", "f"}, {"arguments", "{}"}}}}}}}}},
                       usage);
  EXPECT_EQ(called["status"], "completed");
  EXPECT_TRUE(called["incomplete_details"].is_null());
  ASSERT_EQ(called["output"].size(), 1u);
  EXPECT_EQ(called["output"][0]["type"], "function_call");
  EXPECT_EQ(called["output"][0]["call_id"], "call_resp_7_0");
  EXPECT_EQ(called["output"][0]["name"], "f");
  EXPECT_EQ(called["output"][0]["arguments"], "{}");
}

// "event: TYPE\ndata: JSON\n\n" events as (type, data).
std::vector<std::pair<std::string, Json>> Events(const std::string& text) {
  std::vector<std::pair<std::string, Json>> events;
  for (absl::string_view block : absl::StrSplit(text, "\n\n", absl::SkipEmpty())) {
    std::vector<std::string> lines = absl::StrSplit(block, '\n');
    EXPECT_EQ(lines.size(), 2u) << block;
    if (lines.size() != 2) continue;
    EXPECT_THAT(lines[0], StartsWith("event: "));
    EXPECT_THAT(lines[1], StartsWith("data: "));
    const Json data = Json::parse(lines[1].substr(6));
    EXPECT_EQ(data["type"], lines[0].substr(7));
    events.emplace_back(lines[0].substr(7), data);
  }
  return events;
}

Json Chunk(Json delta, Json finish_reason = nullptr) {
  return {
      {"choices", {{{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", finish_reason}}}}};
}

TEST(OpenAiResponsesTest, AChatStreamBecomesTheResponsesEventsInOrder) {
  ResponsesStream stream("resp_9", 100, "smol", Json::object());
  std::string text = stream.Translate(Chunk({{"role", "assistant"}, {"content", ""}}));
  text += stream.Translate(Chunk({{"content", "Hel"}}));
  Json with_logprobs = Chunk({{"content", "lo"}});
  with_logprobs["choices"][0]["logprobs"] = {
      {"content", {{{"token", "lo"}, {"logprob", -0.5}, {"top_logprobs", Json::array()}}}}};
  text += stream.Translate(with_logprobs);
  text +=
      stream.Translate(Chunk({{"tool_calls",
                               {{{"index", 0},
                                 {"id", "call_resp_9_0"},
                                 {"type", "function"},
                                 {"function", {{"name", "f"}, {"arguments", "{\"a\":1}"}}}}}}}));
  text += stream.Translate(Chunk(Json::object(), "tool_calls"));
  text += stream.Translate(
      {{"choices", Json::array()},
       {"usage", {{"prompt_tokens", 5}, {"completion_tokens", 4}, {"total_tokens", 9}}}});
  const auto events = Events(text);
  std::vector<std::string> types;
  for (size_t i = 0; i < events.size(); ++i) {
    types.push_back(events[i].first);
    EXPECT_EQ(events[i].second["sequence_number"], i);
  }
  EXPECT_THAT(types,
              ElementsAre("response.created", "response.in_progress", "response.output_item.added",
                          "response.content_part.added", "response.output_text.delta",
                          "response.output_text.delta", "response.output_text.done",
                          "response.content_part.done", "response.output_item.done",
                          "response.output_item.added", "response.function_call_arguments.delta",
                          "response.function_call_arguments.done", "response.output_item.done",
                          "response.completed"));
  EXPECT_EQ(events[0].second["response"]["status"], "in_progress");
  EXPECT_EQ(events[6].second["text"], "Hello");
  EXPECT_EQ(events[5].second["logprobs"][0]["token"], "lo");
  EXPECT_EQ(events[6].second["logprobs"].size(), 1u);
  EXPECT_EQ(events[9].second["output_index"], 1);
  EXPECT_EQ(events[11].second["arguments"], "{\"a\":1}");
  const Json& done = events.back().second["response"];
  EXPECT_EQ(done["status"], "completed");
  ASSERT_EQ(done["output"].size(), 2u);
  EXPECT_EQ(done["output"][0]["content"][0]["text"], "Hello");
  EXPECT_EQ(done["output"][0]["content"][0]["logprobs"][0]["logprob"], -0.5);
  EXPECT_EQ(done["output"][1]["call_id"], "call_resp_9_0");
  EXPECT_EQ(done["usage"]["output_tokens"], 4);

  // Cut by max_output_tokens: response.incomplete; an error after the start: an error event.
  ResponsesStream cut("resp_10", 100, "smol", Json::object());
  std::string cut_text = cut.Translate(Chunk({{"role", "assistant"}, {"content", ""}}));
  cut_text += cut.Translate(Chunk({{"content", "Hi"}}));
  cut_text += cut.Translate(Chunk(Json::object(), "length"));
  cut_text += cut.Translate({{"choices", Json::array()}, {"usage", Json::object()}});
  const auto cut_events = Events(cut_text);
  EXPECT_EQ(cut_events.back().first, "response.incomplete");
  EXPECT_EQ(cut_events.back().second["response"]["incomplete_details"]["reason"],
            "max_output_tokens");
  EXPECT_EQ(cut_events[cut_events.size() - 2].second["item"]["status"], "incomplete");
  const auto error = Events(cut.Error(
      OpenAiErrorFromStatus(absl::UnavailableError("draining"), OpenAiEndpoint::kResponses)));
  ASSERT_EQ(error.size(), 1u);
  EXPECT_EQ(error[0].first, "error");
  EXPECT_EQ(error[0].second["message"], "draining");
}

}  // namespace
}  // namespace convoy
