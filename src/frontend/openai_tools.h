// Tool calling in the OpenAI API: the request's `tools` and `tool_choice`, assistant and tool
// messages of an agent's history, and tool calls read from the model's answer.
//
// The tools go to the chat template (its `tools` variable), which shows them to the model as its
// family expects. tool_choice:
//   "none"                 the tools are not shown and the answer is text;
//   "auto" (the default)   the answer is text, or calls the model writes in its family's syntax:
//                          <tool_call>{"name", "arguments"}</tool_call> (Hermes, Qwen), a bare
//                          {"name", "arguments"|"parameters"} object (Llama 3.1/3.2), or
//                          [TOOL_CALLS] [{"name", "arguments"}, ...] (Mistral);
//   "required", {"type": "function", "function": {"name"}}
//                          the answer is one call, held by a JSON-schema constraint to the
//                          functions' names and parameter schemas, so that it always parses.
#ifndef CONVOY_FRONTEND_OPENAI_TOOLS_H_
#define CONVOY_FRONTEND_OPENAI_TOOLS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "convoy/v1/inference.pb.h"
#include "nlohmann/json.hpp"

namespace convoy {

enum class OpenAiToolMode { kNone, kAuto, kForced };

// A field at fault: OpenAI's name for it and what is wrong.
struct ToolFieldError {
  std::string param;
  std::string message;
};

// Reads `tools`, `tool_choice` and `parallel_tool_calls` of a chat body into `request`
// (tools_json; for a forced choice, the constraint) and `mode`.
std::optional<ToolFieldError> ReadTools(const nlohmann::json& body, v1::InferRequest* request,
                                        OpenAiToolMode* mode);

// A history message's tool members (an assistant's `tool_calls`, a tool answer's `tool_call_id`
// and `name`) as ChatMessage.extra_json; the arguments of each call (a JSON string in OpenAI's
// API) become the object chat templates expect. `param` names the message ("messages[2]").
std::optional<ToolFieldError> MessageToolFields(const nlohmann::json& message,
                                                const std::string& param, std::string* extra_json);

struct ToolCall {
  std::string name;
  std::string arguments;  // JSON text of an object
};

struct ToolOutput {
  std::string content;  // the text outside the calls, trimmed; empty when there is none
  std::vector<ToolCall> calls;
};

// The calls in a finished answer; nullopt when it holds none (then it is plain content).
std::optional<ToolOutput> ParseToolOutput(absl::string_view text, OpenAiToolMode mode);

// Streaming with tools: whether `text`, the answer so far, may still turn out to be calls (it is
// held back until that is known). Decided by its first characters.
bool MayBeToolCall(absl::string_view text, OpenAiToolMode mode);

// OpenAI's tool_calls list; ids "call_<id_base>_<i>". `with_index`: a stream's deltas.
nlohmann::json ToolCallsJson(const std::vector<ToolCall>& calls, const std::string& id_base,
                             bool with_index);

}  // namespace convoy

#endif  // CONVOY_FRONTEND_OPENAI_TOOLS_H_
