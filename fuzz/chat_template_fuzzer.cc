// ChatTemplate::Parse on arbitrary template source; a template that parses is rendered over a
// fixed conversation with small step and output bounds: it must render or refuse, never crash or
// run away (a run past the bounds is RESOURCE_EXHAUSTED, and libFuzzer's -timeout catches a
// bound that does not hold).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "text/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using convoy::fuzz::Check;
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<convoy::ChatTemplate> chat_template = convoy::ChatTemplate::Parse(source);
  if (!chat_template.ok()) {
    Check(chat_template.status().code() == absl::StatusCode::kInvalidArgument,
          "Parse failed with a code other than INVALID_ARGUMENT");
    return 0;
  }
  static const std::vector<convoy::ChatMessage> kMessages = {
      {"system", "You are helpful."},
      {"user", "Hi <|im_end|> {{ x }} \xC3\xA9"},
      {"assistant", "Hello!"},
      {"user", ""}};
  convoy::ChatTemplateOptions options;
  options.add_generation_prompt = (size & 1) != 0;
  options.bos_token = "<s>";
  options.eos_token = "</s>";
  options.extra_context_json =
      R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
          "enable_thinking": false, "date_string": "1 Dec 2026"})";
  options.now = std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));
  options.max_steps = 200'000;
  options.max_output_bytes = 1 << 20;
  absl::StatusOr<std::string> text = chat_template->Render(kMessages, options);
  if (text.ok()) {
    Check(text->size() <= options.max_output_bytes, "output past max_output_bytes");
  } else {
    Check(text.status().code() == absl::StatusCode::kInvalidArgument ||
              text.status().code() == absl::StatusCode::kResourceExhausted,
          "Render failed with an unexpected code: " + text.status().ToString());
  }
  return 0;
}
