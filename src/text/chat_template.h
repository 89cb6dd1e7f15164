// Chat templates: the Jinja2 program in a model's tokenizer_config.json (or GGUF
// `tokenizer.chat_template`) that turns a conversation into the prompt text the model was trained
// on. ChatTemplate renders it as Hugging Face transformers' apply_chat_template(tokenize=False)
// does, byte for byte: Jinja2 with trim_blocks and lstrip_blocks, the loopcontrols extension, the
// `generation` tag, and the globals raise_exception() and strftime_now().
//
// Why our own interpreter: Debian 12 packages no C++ Jinja2 implementation (apt-cache search
// finds only Python's jinja2 and its plugins, R's jinjar and Rust's tera sources; inja and minja
// are not packaged), the server cannot call into Python, and chat templates use a small, stable
// subset of the language. That subset is implemented in jinja_*.{h,cc} in this directory; anything
// outside it is refused with its line and column when the template is parsed (or, for errors that
// depend on the data, when it is rendered), never rendered differently. See jinja_parser.h for
// the supported tags and jinja_builtins.h for filters, tests and methods.
//
// Known differences from Python, none of which the real templates we test against touch:
// integers are 64-bit (overflow is an error, where Python grows big integers); case mapping covers
// ASCII, Latin-1 and basic Cyrillic only; `range(...)` and dict views print as lists; `d.items`
// without a call looks up the key "items" (Jinja2 would find the method); `'%s' % x` string
// formatting, str.format(), macros and recursive loops are refused.
#ifndef CONVOY_TEXT_CHAT_TEMPLATE_H_
#define CONVOY_TEXT_CHAT_TEMPLATE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace convoy {

namespace jinja {
struct Stmt;
}  // namespace jinja

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool", ...
  std::string content;
  // More members of the message's dict, as a JSON object (tool_calls, tool_call_id, name); empty
  // for none. Render refuses one that is not a JSON object (INVALID_ARGUMENT).
  std::string extra_json = {};
};

struct ChatTemplateOptions {
  // Ends the prompt with the header of an assistant turn, for the model to continue.
  bool add_generation_prompt = false;
  // The tokenizer's special tokens as text. Empty means the tokenizer has none: the variable is
  // then left undefined, as transformers leaves it.
  std::string bos_token;
  std::string eos_token;
  // More template variables, as a JSON object whose members become variables: `tools` (a list of
  // JSON schemas), `documents`, `date_string`, `enable_thinking`, `builtin_tools`, other special
  // tokens... Empty means none. `tools` and `documents` are none unless given here, as in
  // transformers. A member may not be named `messages`.
  std::string extra_context_json;
  // The clock strftime_now() reads (formatted in local time, as transformers does); unset means
  // now.
  std::optional<std::chrono::system_clock::time_point> now;
  // Bounds on one render, so that no template or conversation can make it run away.
  int64_t max_steps = 20'000'000;
  size_t max_output_bytes = 64 << 20;
};

// Immutable once parsed; Render() may be called from many threads at once. Copies share the
// parsed program.
class ChatTemplate {
 public:
  // INVALID_ARGUMENT, naming the line and column, for a template that is not valid Jinja2 or
  // uses a construct this implementation does not support.
  static absl::StatusOr<ChatTemplate> Parse(std::string_view jinja_source);

  // The prompt text for `messages`. Errors:
  //   INVALID_ARGUMENT when the template rejects the conversation through raise_exception() (the
  //     message is exactly the template's; IsRaisedByTemplate() tells these apart), when it fails
  //     on this data (e.g. messages[0] of an empty conversation; "line L, column C: ..."), or when
  //     extra_context_json is not a JSON object;
  //   RESOURCE_EXHAUSTED past max_steps or max_output_bytes.
  absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& messages,
                                     const ChatTemplateOptions& options) const;

 private:
  explicit ChatTemplate(std::shared_ptr<const std::vector<jinja::Stmt>> program);

  std::shared_ptr<const std::vector<jinja::Stmt>> program_;
};

// Whether `status` came from the template's own raise_exception(): its message is meant for the
// client, as the reason the conversation does not fit the model.
bool IsRaisedByTemplate(const absl::Status& status);

}  // namespace convoy

#endif  // CONVOY_TEXT_CHAT_TEMPLATE_H_
