// The tokenizer that comes with a model: from a GGUF file's metadata, or from a model directory's
// tokenizer.json (with tokenizer_config.json naming BOS and EOS). The daemon and the tools load it
// beside the weights; the engine never sees it.
#ifndef CONVOY_MODEL_MODEL_TOKENIZER_H_
#define CONVOY_MODEL_MODEL_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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

// The special tokens of `tokenizer` that end a turn in the chat formats of the families convoy
// serves, by their text: <|eot_id|> and <|eom_id|> (Llama 3), <|im_end|> (ChatML: Qwen, SmolLM),
// <|end|> (Phi-3), <end_of_turn> (Gemma 2 and 3), <turn|> (Gemma 4), <|endoftext|> and
// <|end_of_text|> (end of text: Qwen, Phi-3, GPT-2, Llama 3) and </s> (Llama 2, Mistral), in that
// order, each only where the vocabulary marks it special (a normal or user-defined token of the
// same text, as Phi-3's "</s>", is text).
std::vector<int32_t> EndOfTurnTokenIds(const Tokenizer& tokenizer);

// The tokens that end generation for `weights`' model: ModelConfig::EndOfGenerationIds (config.json
// or generation_config.json's eos ids, GGUF eos, eot and eom ids, the tokenizer's eos) and, for a
// GGUF file, EndOfTurnTokenIds, as llama.cpp does: its converter writes
// tokenizer.ggml.eot_token_id for few models (Phi-3's files name <|endoftext|> as eos and no eot,
// Llama 3's <|end_of_text|>), while the chat template ends each turn with such a token.
// `tokenizer` may be null (a model without one).
std::vector<int32_t> ModelEndOfGenerationIds(const ModelWeights& weights,
                                             const Tokenizer* tokenizer);

}  // namespace convoy

#endif  // CONVOY_MODEL_MODEL_TOKENIZER_H_
