// The OpenAI API's JSON, both ways, without any HTTP: a /v1/chat/completions or /v1/completions
// body becomes a v1::InferRequest (so that one validator, PrepareRequest, checks every protocol's
// requests), and a session's output becomes OpenAI's response objects, stream chunks and errors.
// openai_service.h puts this on the HTTP server.
//
// What is taken: messages (content as a string or as text parts), prompt (text, token ids, or a
// list holding one of those), max_tokens / max_completion_tokens, temperature, top_p, top_k (an
// extension; -1 keeps all, as vLLM reads it), seed, stop (a string or a list), n, stream,
// stream_options.include_usage, logprobs and top_logprobs, priority (an extension), user (a
// string, checked and not used: it names an end user, not the request), response_format (text,
// json_object, json_schema: a constraint), tools and tool_choice (openai_tools.h),
// presence_penalty, frequency_penalty, logit_bias, vLLM's repetition_penalty and min_p, and echo
// (completions). The chat fields that change nothing in a self-hosted answer (store, metadata,
// service_tier, the prompt cache's hints, safety_identifier, prediction, text modalities) are
// checked and not used. Fields that ask for what convoy does not do (suffix, best_of > 1, the
// deprecated functions API, audio, web search, moderation) are refused by name rather than
// ignored; unknown fields are refused.
#ifndef CONVOY_FRONTEND_OPENAI_API_H_
#define CONVOY_FRONTEND_OPENAI_API_H_

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "convoy/v1/inference.pb.h"
#include "frontend/generation.h"
#include "frontend/openai_tools.h"
#include "nlohmann/json.hpp"
#include "text/tokenizer.h"

namespace convoy {

class ResponsesStream;  // openai_responses.h

// kResponses: OpenAI's Responses API, read and answered as a chat request (openai_responses.h).
enum class OpenAiEndpoint { kChatCompletions, kCompletions, kResponses };

// Whether the endpoint's requests are chat requests (messages, tools, response formats).
inline bool ChatLike(OpenAiEndpoint endpoint) { return endpoint != OpenAiEndpoint::kCompletions; }

// An error as OpenAI's API gives it: the HTTP status and {"error": {message, type, param, code}}.
struct OpenAiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the request field at fault; empty: null
  std::string code;   // empty: null

  std::string ToJson() const;
};

// A 400 naming `param`: "param: message".
OpenAiError OpenAiFieldError(const std::string& param, const std::string& message);

// A JSON value's type as an error names it: "a string", "an object", "a number with a fraction".
const char* OpenAiJsonType(const nlohmann::json& value);

// A part kind of a message's content: its "type" and the field holding its text.
struct OpenAiPartKind {
  const char* type;
  const char* field;
};
// A message's text: `content` a string, or a list of parts of the `kinds` given, their texts
// joined; nullopt, with *error naming the part at fault (param[i], param[i].field), otherwise.
std::optional<std::string> OpenAiContentText(const nlohmann::json& content,
                                             const std::string& param,
                                             std::initializer_list<OpenAiPartKind> kinds,
                                             OpenAiError* error);

// The error for a status of the shared request path: INVALID_ARGUMENT and FAILED_PRECONDITION
// 400, an unknown model 404, UNAUTHENTICATED 401 (code "invalid_api_key"), RESOURCE_EXHAUSTED by
// its cause (status_mapping.h: a full queue 429 "queue_full", the client's in-flight limit 429
// "max_in_flight_per_client", a client that stopped reading 408 "slow_client"), UNAVAILABLE 503,
// DEADLINE_EXCEEDED 504, CANCELLED 499, others 500. The field the message starts
// with ("sampling.max_tokens: ...") becomes OpenAI's name for it ("max_tokens").
OpenAiError OpenAiErrorFromStatus(const absl::Status& status, OpenAiEndpoint endpoint);

struct OpenAiRequest {
  OpenAiEndpoint endpoint = OpenAiEndpoint::kChatCompletions;
  v1::InferRequest request;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // Chat: logprobs (bool) and top_logprobs. Completions: logprobs (an int, the top count).
  bool logprobs = false;
  int32_t top_logprobs = 0;
  // Choices (n): each one request of its own, with seed + i when the request has a seed.
  int32_t n = 1;
  // Completions: the answer's text (and logprobs) start with the prompt's.
  bool echo = false;
  // Chat with tools (openai_tools.h): whether and how the answer may be tool calls.
  OpenAiToolMode tool_mode = OpenAiToolMode::kNone;
  // Responses: what the Response object repeats of the request (ResponsesToChat).
  nlohmann::json responses_echo;
};

// The request in `body`, or the error naming the field at fault.
struct ParsedOpenAiRequest {
  std::optional<OpenAiRequest> request;
  OpenAiError error;
};
ParsedOpenAiRequest ParseOpenAiRequest(OpenAiEndpoint endpoint, std::string_view body);

// Formats one request's answer.
class OpenAiResponder {
 public:
  // `id`: the response's id ("chatcmpl-..." or "cmpl-..."); `created`: Unix seconds; `tokenizer`
  // (may be null) spells the tokens of logprobs.
  // `index`: the choice it formats (of the request's n).
  OpenAiResponder(const OpenAiRequest& request, std::string id, int64_t created, std::string model,
                  const Tokenizer* tokenizer, int32_t index = 0);
  ~OpenAiResponder();

  // The whole response (not streamed), of one choice.
  std::string Whole(const SessionOutput& output, const SessionEnd& end) const;
  // This choice, as the whole response's `choices` holds it.
  nlohmann::json Choice(const SessionOutput& output, const SessionEnd& end) const;
  // The whole response with these choices, its usage counted by `totals` (the prompt once, every
  // choice's completion tokens).
  std::string Whole(std::vector<nlohmann::json> choices, const SessionEnd& totals) const;

  // Server-sent events, each "data: {...}\n\n". The first chunk of a chat stream (the role).
  std::string FirstEvent() const;
  // New output. With tools, an answer that may be tool calls is held back (empty events) until
  // it is known: at the end, or at its first characters.
  std::string OutputEvent(const SessionOutput& output);
  // The end: held output or tool calls, the chunk with the finish reason, the usage chunk when
  // asked for, and [DONE]. An error after the stream began is sent as an error event before
  // [DONE].
  // ChoiceEndEvents, then CloseEvents when it ended well.
  std::string EndEvents(const SessionEnd& end);
  // One choice's end: held output or tool calls, and the chunk with its finish reason; or, when
  // it failed, the error event and [DONE].
  std::string ChoiceEndEvents(const SessionEnd& end);
  // After every choice's end: the usage chunk, counted by `totals`, when asked for; and [DONE].
  std::string CloseEvents(const SessionEnd& totals) const;

 private:
  // A chunk as its event: "data: {...}"; for the Responses API, the events it means.
  std::string Event(const nlohmann::json& chunk) const;
  // The stream's last line, "data: [DONE]" (none for the Responses API).
  std::string Done() const;
  // Marks the prompt echoed when it puts it in the chunk.
  std::string Chunk(const SessionOutput* output, const char* finish_reason);
  // The prompt as echoed: its text as given, or its ids decoded.
  std::string EchoText() const;
  // A chat chunk whose delta is `delta`.
  std::string DeltaChunk(nlohmann::json delta, const char* finish_reason) const;
  // The calls in a finished chat answer, when the request had tools and the answer holds some.
  std::optional<ToolOutput> ToolCalls(const std::string& text, const SessionEnd& end) const;

  const OpenAiRequest& request_;
  const std::string id_;
  const int64_t created_;
  const std::string model_;
  const Tokenizer* const tokenizer_;
  const int32_t index_;
  // Streaming with tools: output held back while it may be tool calls.
  SessionOutput held_;
  bool holding_ = true;
  bool echoed_ = false;  // streamed with echo: the prompt went out
  // Responses: the chat stream's chunks as the Responses API's events.
  std::unique_ptr<ResponsesStream> responses_;
};

// "stop" or "length" (OpenAI has no other reasons for an answer that finished).
const char* OpenAiFinishReason(v1::FinishReason reason);

}  // namespace convoy

#endif  // CONVOY_FRONTEND_OPENAI_API_H_
