// The tokenizer that comes with a model: from a GGUF file's metadata, or from a model directory's
// tokenizer.json (with tokenizer_config.json naming BOS and EOS). The daemon and the tools load it
// beside the weights; the engine never sees it.
#ifndef CONVOY_MODEL_MODEL_TOKENIZER_H_
#define CONVOY_MODEL_MODEL_TOKENIZER_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "model/model_weights.h"
#include "text/tokenizer.h"

namespace convoy {

// The model's tokenizer; nullptr when the model carries none (a directory without tokenizer.json,
// a GGUF file without tokenizer.ggml.model): such a model serves token ids only. An error when
// the model has one that cannot be read, naming the file and key.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadModelTokenizer(const ModelWeights& weights);

// The model's chat template (Jinja2 source): a GGUF file's tokenizer.chat_template, or a model
// directory's chat_template.jinja, or the chat_template of its tokenizer_config.json (a string, or
// a list of named templates of which the one named "default" is taken). nullopt when the model has
// none; an error naming the file and key when the value has the wrong type.
absl::StatusOr<std::optional<std::string>> LoadModelChatTemplateSource(const ModelWeights& weights);

}  // namespace convoy

#endif  // CONVOY_MODEL_MODEL_TOKENIZER_H_
