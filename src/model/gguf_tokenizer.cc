#include "model/gguf_tokenizer.h"

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "convoy/status_macros.h"

namespace convoy {
namespace {

absl::Status WrongType(const GgufFile& file, std::string_view key, std::string_view expected,
                       const GgufValue& found) {
  return absl::InvalidArgumentError(absl::StrCat(file.path(), ": ", std::string(key), ": expected ",
                                                 std::string(expected), ", found ",
                                                 found.Describe()));
}

absl::StatusOr<std::optional<std::string>> OptionalString(const GgufFile& file,
                                                          std::string_view key) {
  const GgufValue* v = file.FindValue(key);
  if (v == nullptr) return std::optional<std::string>();
  if (v->type != GgufValueType::kString) return WrongType(file, key, "a string", *v);
  return std::optional<std::string>(std::string(v->string));
}

absl::StatusOr<std::optional<int32_t>> OptionalId(const GgufFile& file, std::string_view key) {
  const GgufValue* v = file.FindValue(key);
  if (v == nullptr) return std::optional<int32_t>();
  const std::optional<int64_t> id = v->AsInt();
  if (!id || *id < 0 || *id > INT32_MAX) return WrongType(file, key, "a token id", *v);
  return std::optional<int32_t>(static_cast<int32_t>(*id));
}

absl::StatusOr<std::optional<bool>> OptionalBool(const GgufFile& file, std::string_view key) {
  const GgufValue* v = file.FindValue(key);
  if (v == nullptr) return std::optional<bool>();
  const std::optional<bool> b = v->AsBool();
  if (!b) return WrongType(file, key, "a bool", *v);
  return b;
}

// An array of `element` values, or nullptr when the key is absent.
absl::StatusOr<const GgufValue*> OptionalArray(const GgufFile& file, std::string_view key,
                                               GgufValueType element, std::string_view expected) {
  const GgufValue* v = file.FindValue(key);
  if (v == nullptr) return nullptr;
  if (v->type != GgufValueType::kArray || v->element_type != element) {
    return WrongType(file, key, expected, *v);
  }
  return v;
}

absl::Status CheckLength(const GgufFile& file, std::string_view key, uint64_t found,
                         size_t tokens) {
  if (found == tokens) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(file.path(), ": ", std::string(key), ": expected ",
                                                 tokens, " values (one per token), found ", found));
}

}  // namespace

absl::StatusOr<TokenizerSpec> TokenizerSpecFromGguf(const GgufFile& file) {
  TokenizerSpec spec;
  ASSIGN_OR_RETURN(std::optional<std::string> model, OptionalString(file, "tokenizer.ggml.model"));
  if (!model) {
    return absl::NotFoundError(
        absl::StrCat(file.path(), ": no tokenizer (tokenizer.ggml.model is absent)"));
  }
  spec.model = *model;
  ASSIGN_OR_RETURN(std::optional<std::string> pre, OptionalString(file, "tokenizer.ggml.pre"));
  spec.pre = pre.value_or("");

  ASSIGN_OR_RETURN(
      const GgufValue* tokens,
      OptionalArray(file, "tokenizer.ggml.tokens", GgufValueType::kString, "an array of strings"));
  if (tokens == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(file.path(), ": tokenizer.ggml.tokens: required, absent"));
  }
  spec.tokens.assign(tokens->strings.begin(), tokens->strings.end());
  const size_t n = spec.tokens.size();

  ASSIGN_OR_RETURN(
      const GgufValue* types,
      OptionalArray(file, "tokenizer.ggml.token_type", GgufValueType::kInt32, "an array of int32"));
  if (types != nullptr) {
    RETURN_IF_ERROR(CheckLength(file, "tokenizer.ggml.token_type", types->count, n));
    spec.token_types.reserve(n);
    for (uint64_t i = 0; i < types->count; ++i) {
      spec.token_types.push_back(static_cast<TokenType>(*types->ArrayInt(i)));
    }
  }
  ASSIGN_OR_RETURN(
      const GgufValue* scores,
      OptionalArray(file, "tokenizer.ggml.scores", GgufValueType::kFloat32, "an array of float32"));
  if (scores != nullptr) {
    RETURN_IF_ERROR(CheckLength(file, "tokenizer.ggml.scores", scores->count, n));
    spec.scores.resize(n);
    std::memcpy(spec.scores.data(), scores->elements, n * sizeof(float));  // little-endian file
  }
  ASSIGN_OR_RETURN(
      const GgufValue* merges,
      OptionalArray(file, "tokenizer.ggml.merges", GgufValueType::kString, "an array of strings"));
  if (merges != nullptr) spec.merges.assign(merges->strings.begin(), merges->strings.end());

  ASSIGN_OR_RETURN(spec.bos_id, OptionalId(file, "tokenizer.ggml.bos_token_id"));
  ASSIGN_OR_RETURN(spec.eos_id, OptionalId(file, "tokenizer.ggml.eos_token_id"));
  ASSIGN_OR_RETURN(spec.unk_id, OptionalId(file, "tokenizer.ggml.unknown_token_id"));
  ASSIGN_OR_RETURN(spec.pad_id, OptionalId(file, "tokenizer.ggml.padding_token_id"));
  ASSIGN_OR_RETURN(spec.add_bos, OptionalBool(file, "tokenizer.ggml.add_bos_token"));
  ASSIGN_OR_RETURN(spec.add_eos, OptionalBool(file, "tokenizer.ggml.add_eos_token"));
  ASSIGN_OR_RETURN(spec.add_space_prefix, OptionalBool(file, "tokenizer.ggml.add_space_prefix"));
  return spec;
}

absl::StatusOr<std::optional<std::string>> ChatTemplateFromGguf(const GgufFile& file) {
  return OptionalString(file, "tokenizer.chat_template");
}

}  // namespace convoy
