#include "model/model_tokenizer.h"

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

absl::StatusOr<HuggingFaceTokenizerExtras> ReadExtras(const std::filesystem::path& dir) {
  HuggingFaceTokenizerExtras extras;
  const std::filesystem::path path = dir / "tokenizer_config.json";
  std::ifstream in(path);
  if (!in) return extras;
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json config =
      nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": not a JSON object"));
  }
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

}  // namespace convoy
