// A conversation as a model's prompt: the model's chat template renders the messages and ends the
// text with the header of an assistant turn, and the tokenizer turns that text into ids as
// transformers' apply_chat_template(add_generation_prompt=True, tokenize=True) does: the special
// tokens the template writes become their ids, and nothing (no BOS) is added around the text.
// The one place where messages become prompt ids, for the server and the tools.
#ifndef CONVOY_TEXT_CHAT_PROMPT_H_
#define CONVOY_TEXT_CHAT_PROMPT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace convoy {

// The prompt text; the template sees the tokenizer's BOS and EOS tokens as bos_token and
// eos_token. The template's errors as ChatTemplate::Render gives them.
// `tools_json`: a JSON list, the template's `tools` variable; empty for none (the variable is
// then none, as transformers leaves it).
absl::StatusOr<std::string> RenderChatPrompt(const ChatTemplate& chat_template,
                                             const Tokenizer& tokenizer,
                                             const std::vector<ChatMessage>& messages,
                                             const std::string& tools_json = "");

// The prompt's token ids.
absl::StatusOr<std::vector<int32_t>> EncodeChatPrompt(const ChatTemplate& chat_template,
                                                      const Tokenizer& tokenizer,
                                                      const std::vector<ChatMessage>& messages,
                                                      const std::string& tools_json = "");

}  // namespace convoy

#endif  // CONVOY_TEXT_CHAT_PROMPT_H_
