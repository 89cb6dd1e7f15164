#include "model/model_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "convoy/status_macros.h"
#include "model/gguf_tokenizer.h"
#include "nlohmann/json.hpp"

namespace convoy {
namespace {

// A special token in tokenizer_config.json: a string, or an object with "content".
std::string TokenName(const nlohmann::json& config, const char* key) {
  if (!config.contains(key)) return "";
  const nlohmann::json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return "";
}

// tokenizer_config.json of `dir`; an empty object when there is none.
absl::StatusOr<nlohmann::json> ReadTokenizerConfig(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / "tokenizer_config.json";
  std::ifstream in(path);
  if (!in) return nlohmann::json::object();
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json config = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": not a JSON object"));
  }
  return config;
}

absl::StatusOr<HuggingFaceTokenizerExtras> ReadExtras(const std::filesystem::path& dir) {
  HuggingFaceTokenizerExtras extras;
  ASSIGN_OR_RETURN(const nlohmann::json config, ReadTokenizerConfig(dir));
  extras.bos_token = TokenName(config, "bos_token");
  extras.eos_token = TokenName(config, "eos_token");
  return extras;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadModelTokenizer(const ModelWeights& weights) {
  if (const GgufFile* gguf = weights.gguf_file(); gguf != nullptr) {
    absl::StatusOr<TokenizerSpec> spec = TokenizerSpecFromGguf(*gguf);
    if (absl::IsNotFound(spec.status())) return std::unique_ptr<Tokenizer>();
    if (!spec.ok()) return spec.status();
    absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromSpec(*spec);
    if (!tokenizer.ok()) {
      return absl::Status(tokenizer.status().code(),
                          absl::StrCat(gguf->path(), ": ", tokenizer.status().message()));
    }
    return tokenizer;
  }
  const std::filesystem::path dir(weights.dir());
  const std::filesystem::path json = dir / "tokenizer.json";
  std::error_code error;
  if (!std::filesystem::exists(json, error)) return std::unique_ptr<Tokenizer>();
  ASSIGN_OR_RETURN(HuggingFaceTokenizerExtras extras, ReadExtras(dir));
  return Tokenizer::FromHuggingFaceJsonFile(json.string(), extras);
}

absl::StatusOr<std::optional<std::string>> LoadModelChatTemplateSource(
    const ModelWeights& weights) {
  if (const GgufFile* gguf = weights.gguf_file(); gguf != nullptr) {
    return ChatTemplateFromGguf(*gguf);
  }
  const std::filesystem::path dir(weights.dir());
  // Recent transformers versions save the template in a file of its own.
  if (std::ifstream jinja(dir / "chat_template.jinja"); jinja) {
    std::stringstream text;
    text << jinja.rdbuf();
    return std::optional<std::string>(text.str());
  }
  ASSIGN_OR_RETURN(const nlohmann::json config, ReadTokenizerConfig(dir));
  if (!config.contains("chat_template")) return std::optional<std::string>();
  const nlohmann::json& value = config["chat_template"];
  if (value.is_string()) return std::optional<std::string>(value.get<std::string>());
  const std::string where = (dir / "tokenizer_config.json").string();
  if (value.is_array()) {
    for (const nlohmann::json& entry : value) {
      if (entry.is_object() && entry.contains("name") && entry["name"] == "default" &&
          entry.contains("template") && entry["template"].is_string()) {
        return std::optional<std::string>(entry["template"].get<std::string>());
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": chat_template is a list without an entry named \"default\""));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": chat_template must be a string or a list of {name, template}, got ",
                   value.type_name()));
}

std::vector<int32_t> EndOfTurnTokenIds(const Tokenizer& tokenizer) {
  static constexpr const char* kEndOfTurn[] = {"<|eot_id|>",    "<|eom_id|>",      "<|im_end|>",
                                               "<|end|>",       "<end_of_turn>",   "<turn|>",
                                               "<|endoftext|>", "<|end_of_text|>", "</s>"};
  std::vector<int32_t> ids;
  for (const char* text : kEndOfTurn) {
    const std::optional<int32_t> id = tokenizer.TokenToId(text);
    if (id.has_value() && tokenizer.IsSpecial(*id) &&
        std::find(ids.begin(), ids.end(), *id) == ids.end()) {
      ids.push_back(*id);
    }
  }
  return ids;
}

std::vector<int32_t> ModelEndOfGenerationIds(const ModelWeights& weights,
                                             const Tokenizer* tokenizer) {
  std::vector<int32_t> ids = weights.config().EndOfGenerationIds(
      tokenizer != nullptr ? tokenizer->eos_id() : std::nullopt);
  if (weights.gguf_file() == nullptr || tokenizer == nullptr) return ids;
  for (int32_t id : EndOfTurnTokenIds(*tokenizer)) {
    if (id < weights.config().vocab_size && std::find(ids.begin(), ids.end(), id) == ids.end()) {
      ids.push_back(id);
    }
  }
  return ids;
}

}  // namespace convoy
