// The tokenizer and chat template a GGUF file carries in its metadata (tokenizer.ggml.*,
// tokenizer.chat_template), for the text module: the model module reads the file, the text module
// owns what the values mean.
#ifndef CONVOY_MODEL_GGUF_TOKENIZER_H_
#define CONVOY_MODEL_GGUF_TOKENIZER_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "model/gguf_file.h"
#include "text/tokenizer_spec.h"

namespace convoy {

// The tokenizer.ggml.* keys as a TokenizerSpec (Tokenizer::FromSpec checks what they mean).
// NOT_FOUND when the file has no tokenizer.ggml.model; INVALID_ARGUMENT naming the file and key
// when a value has the wrong type or an array the wrong length.
absl::StatusOr<TokenizerSpec> TokenizerSpecFromGguf(const GgufFile& file);

// tokenizer.chat_template, or nullopt when the file has none. INVALID_ARGUMENT when it is not a
// string.
absl::StatusOr<std::optional<std::string>> ChatTemplateFromGguf(const GgufFile& file);

}  // namespace convoy

#endif  // CONVOY_MODEL_GGUF_TOKENIZER_H_
