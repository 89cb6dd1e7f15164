#include "text/chat_prompt.h"

#include <optional>
#include <string_view>

#include "convoy/status_macros.h"

namespace convoy {
namespace {

std::string TokenText(const Tokenizer& tokenizer, std::optional<int32_t> id) {
  const std::optional<std::string_view> token =
      id ? tokenizer.IdToToken(*id) : std::optional<std::string_view>();
  return token ? std::string(*token) : std::string();
}

}  // namespace

absl::StatusOr<std::string> RenderChatPrompt(const ChatTemplate& chat_template,
                                             const Tokenizer& tokenizer,
                                             const std::vector<ChatMessage>& messages,
                                             const std::string& tools_json) {
  ChatTemplateOptions options;
  options.add_generation_prompt = true;
  if (!tools_json.empty())
    options.extra_context_json = absl::StrCat("{\"tools\": ", tools_json, "}");
  options.bos_token = TokenText(tokenizer, tokenizer.bos_id());
  options.eos_token = TokenText(tokenizer, tokenizer.eos_id());
  return chat_template.Render(messages, options);
}

absl::StatusOr<std::vector<int32_t>> EncodeChatPrompt(const ChatTemplate& chat_template,
                                                      const Tokenizer& tokenizer,
                                                      const std::vector<ChatMessage>& messages,
                                                      const std::string& tools_json) {
  ASSIGN_OR_RETURN(const std::string text,
                   RenderChatPrompt(chat_template, tokenizer, messages, tools_json));
  return tokenizer.Encode(text, /*add_special=*/false);
}

}  // namespace convoy
