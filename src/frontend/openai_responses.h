// OpenAI's Responses API (POST /v1/responses) on the chat completions path, without state of its
// own: a request becomes the chat request it means, which ParseOpenAiRequest then reads and
// checks as every chat request is read; the chat answer becomes a Response object, and a chat
// stream the Responses API's typed events.
//
// Request: `input` (a string, or a list of items: messages with text parts, function_call and
// function_call_output items) and `instructions` become the messages; flat function `tools`
// become chat tools (no built-in tools), `tool_choice` follows; `text.format` becomes
// response_format; include message.output_text.logprobs and top_logprobs ask for the tokens'
// log-probabilities; max_output_tokens, temperature, top_p, stream, parallel_tool_calls and the
// fields that change no answer (store, metadata, ...) are taken as the chat API takes them, and
// so are convoy's extensions (seed, top_k, stop, priority, ...). What needs a stored response or
// conversation (previous_response_id, conversation, item_reference), reasoning, background mode,
// built-in tools and parts other than text are refused by name. Errors name the Responses field
// (input[2].content[0], tools[1].name, max_output_tokens).
//
// Answer: an assistant message item with one output_text part (when the answer has text) and a
// function_call item per tool call; status "incomplete" (incomplete_details.reason
// max_output_tokens) when max_output_tokens cut it; usage as input/output tokens. Streamed:
// response.created, response.in_progress, the output items' added / delta / done events,
// then response.completed (or response.incomplete), each with its sequence_number; an error after
// the stream began is an `error` event.
#ifndef CONVOY_FRONTEND_OPENAI_RESPONSES_H_
#define CONVOY_FRONTEND_OPENAI_RESPONSES_H_

#include <cstdint>
#include <optional>
#include <string>

#include "frontend/openai_api.h"
#include "nlohmann/json.hpp"

namespace convoy {

// The chat request body that the Responses request `body` means, or the error naming the
// Responses field at fault. `echo` receives what a Response object repeats of its request
// (instructions, tools, tool_choice, text, temperature, top_p, max_output_tokens, metadata,
// parallel_tool_calls, user).
std::optional<OpenAiError> ResponsesToChat(const nlohmann::json& body, nlohmann::json* chat,
                                           nlohmann::json* echo);

// A chat parser's error in the Responses API's names: messages -> input, max_completion_tokens ->
// max_output_tokens, response_format -> text.format, tools[i].function.name -> tools[i].name.
OpenAiError ResponsesError(OpenAiError chat_error);

// The Response object for a whole chat answer: `choice` as a chat completion's choices[0] holds
// it, `usage` as its usage.
nlohmann::json ResponseFromChat(const std::string& id, int64_t created, const std::string& model,
                                const nlohmann::json& echo, const nlohmann::json& choice,
                                const nlohmann::json& usage);

// One request's chat stream chunks (as OpenAiResponder builds them) as the Responses API's
// events, "event: TYPE\ndata: {...}\n\n" each.
class ResponsesStream {
 public:
  ResponsesStream(std::string id, int64_t created, std::string model, nlohmann::json echo);

  // The events a chat chunk means: the first (the role) opens the response; text deltas stream
  // into a message item; tool calls become function_call items; the finish reason closes the
  // open item; the usage chunk completes the response.
  std::string Translate(const nlohmann::json& chunk);
  // An error after the stream began.
  std::string Error(const OpenAiError& error);

 private:
  std::string Emit(const char* type, nlohmann::json event);
  nlohmann::json Response(const char* status, const nlohmann::json& usage) const;
  std::string CloseMessage();

  const std::string id_;
  const int64_t created_;
  const std::string model_;
  const nlohmann::json echo_;
  int64_t sequence_ = 0;
  nlohmann::json output_ = nlohmann::json::array();  // the items done
  bool message_open_ = false;
  std::string text_;                                   // the open message's text so far
  nlohmann::json logprobs_ = nlohmann::json::array();  // and its tokens' log-probabilities
  std::string finish_reason_;
};

}  // namespace convoy

#endif  // CONVOY_FRONTEND_OPENAI_RESPONSES_H_
