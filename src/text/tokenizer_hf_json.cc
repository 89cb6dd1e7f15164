// Tokenizer::FromHuggingFaceJson: reads a Hugging Face tokenizer.json into TokenizerParts.
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "convoy/status_macros.h"
#include "nlohmann/json.hpp"
#include "text/string_views.h"
#include "text/tokenizer.h"
#include "text/tokenizer_parts.h"
#include "text/utf8.h"

namespace convoy {
namespace {

using Json = nlohmann::json;
using tokenizer_internal::AddedToken;
using tokenizer_internal::BpeModel;
using tokenizer_internal::BpeOptions;
using tokenizer_internal::DecoderStep;
using tokenizer_internal::Normalizer;
using tokenizer_internal::PrependScheme;
using tokenizer_internal::PreTokenizer;
using tokenizer_internal::SplitBehavior;
using tokenizer_internal::ToAbsl;
using tokenizer_internal::TokenDecoder;
using tokenizer_internal::TokenizerParts;
using tokenizer_internal::ToStd;
using tokenizer_internal::UnicodeForm;

absl::Status Malformed(std::string_view path, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("tokenizer.json: ", ToAbsl(path), ": ", ToAbsl(what)));
}

absl::Status Unsupported(std::string_view path, std::string_view what) {
  return absl::UnimplementedError(
      absl::StrCat("tokenizer.json: ", ToAbsl(path), ": ", ToAbsl(what)));
}

// The member `key` of `object`, or nullptr when it is absent or null.
const Json* Member(const Json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string Path(std::string_view path, std::string_view key) {
  return absl::StrCat(ToAbsl(path), ".", ToAbsl(key));
}

absl::StatusOr<std::string> GetString(const Json& object, std::string_view key,
                                      std::string_view path) {
  const Json* value = Member(object, key);
  if (value == nullptr || !value->is_string()) {
    return Malformed(Path(path, key), "expected a string");
  }
  return value->get<std::string>();
}

absl::StatusOr<bool> GetBool(const Json& object, std::string_view key, std::string_view path,
                             bool if_absent) {
  const Json* value = Member(object, key);
  if (value == nullptr) return if_absent;
  if (!value->is_boolean()) return Malformed(Path(path, key), "expected true or false");
  return value->get<bool>();
}

absl::StatusOr<int64_t> GetInt(const Json& object, std::string_view key, std::string_view path) {
  const Json* value = Member(object, key);
  if (value == nullptr || !value->is_number_integer()) {
    return Malformed(Path(path, key), "expected an integer");
  }
  return value->get<int64_t>();
}

absl::StatusOr<int32_t> GetId(const Json& value, std::string_view path) {
  if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > INT32_MAX) {
    return Malformed(path, "expected a token id");
  }
  return static_cast<int32_t>(value.get<int64_t>());
}

absl::StatusOr<std::string> GetType(const Json& object, std::string_view path) {
  if (!object.is_object()) return Malformed(path, "expected an object");
  return GetString(object, "type", path);
}

// A pattern {"String": s} (a literal) or {"Regex": r}.
absl::StatusOr<std::pair<std::string, bool>> GetPattern(const Json& object, std::string_view path) {
  const Json* pattern = Member(object, "pattern");
  if (pattern != nullptr) {
    if (const Json* s = Member(*pattern, "String"); s != nullptr && s->is_string()) {
      return std::make_pair(s->get<std::string>(), false);
    }
    if (const Json* r = Member(*pattern, "Regex"); r != nullptr && r->is_string()) {
      return std::make_pair(r->get<std::string>(), true);
    }
  }
  return Malformed(Path(path, "pattern"), "expected {\"String\": ...} or {\"Regex\": ...}");
}

absl::StatusOr<PrependScheme> GetPrependScheme(const Json& object, std::string_view path) {
  if (const Json* scheme = Member(object, "prepend_scheme"); scheme != nullptr) {
    const std::string name = scheme->is_string() ? scheme->get<std::string>() : "";
    if (name == "always") return PrependScheme::kAlways;
    if (name == "first") return PrependScheme::kFirst;
    if (name == "never") return PrependScheme::kNever;
    return Malformed(Path(path, "prepend_scheme"), "expected \"always\", \"first\" or \"never\"");
  }
  // Files from before prepend_scheme: add_prefix_space.
  ASSIGN_OR_RETURN(bool add_prefix_space, GetBool(object, "add_prefix_space", path, true));
  return add_prefix_space ? PrependScheme::kAlways : PrependScheme::kNever;
}

// "left right" (the older form) or ["left", "right"].
absl::StatusOr<std::pair<std::string, std::string>> ParseMerge(const Json& merge,
                                                               std::string_view path) {
  if (merge.is_string()) {
    const std::string text = merge.get<std::string>();
    const size_t space = text.find(' ', 1);
    if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
      return Malformed(path, absl::StrCat("merge \"", text, "\" is not two tokens"));
    }
    return std::make_pair(text.substr(0, space), text.substr(space + 1));
  }
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
    return std::make_pair(merge[0].get<std::string>(), merge[1].get<std::string>());
  }
  return Malformed(path, "a merge is \"left right\" or [\"left\", \"right\"]");
}

absl::Status ParseModel(const Json& root, bool byte_level, TokenizerParts* parts) {
  const Json* model = Member(root, "model");
  if (model == nullptr) return Malformed("model", "missing");
  ASSIGN_OR_RETURN(std::string type, GetType(*model, "model"));
  if (type != "BPE") return Unsupported("model.type", absl::StrCat("model \"", type, "\""));
  if (const Json* dropout = Member(*model, "dropout");
      dropout != nullptr && !(dropout->is_number() && dropout->get<double>() == 0.0)) {
    return Unsupported("model.dropout", "BPE dropout (random merges)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (const Json* affix = Member(*model, key);
        affix != nullptr && !(affix->is_string() && affix->get<std::string>().empty())) {
      return Unsupported(Path("model", key), "a subword prefix or suffix");
    }
  }
  const Json* vocab_json = Member(*model, "vocab");
  if (vocab_json == nullptr || !vocab_json->is_object()) {
    return Malformed("model.vocab", "expected an object of token: id");
  }
  absl::flat_hash_map<std::string, int32_t> vocab;
  vocab.reserve(vocab_json->size());
  for (auto it = vocab_json->begin(); it != vocab_json->end(); ++it) {
    ASSIGN_OR_RETURN(int32_t id, GetId(it.value(), Path("model.vocab", it.key())));
    RETURN_IF_ERROR(tokenizer_internal::ValidateUtf8(it.key()));
    vocab[it.key()] = id;
  }
  std::vector<std::pair<std::string, std::string>> merges;
  if (const Json* merges_json = Member(*model, "merges"); merges_json != nullptr) {
    if (!merges_json->is_array()) return Malformed("model.merges", "expected an array");
    merges.reserve(merges_json->size());
    for (size_t i = 0; i < merges_json->size(); ++i) {
      ASSIGN_OR_RETURN(auto merge,
                       ParseMerge((*merges_json)[i], absl::StrCat("model.merges[", i, "]")));
      merges.push_back(std::move(merge));
    }
  }
  BpeOptions options;
  options.byte_level = byte_level;
  ASSIGN_OR_RETURN(options.byte_fallback, GetBool(*model, "byte_fallback", "model", false));
  ASSIGN_OR_RETURN(options.fuse_unk, GetBool(*model, "fuse_unk", "model", false));
  ASSIGN_OR_RETURN(options.ignore_merges, GetBool(*model, "ignore_merges", "model", false));
  if (Member(*model, "unk_token") != nullptr) {
    ASSIGN_OR_RETURN(std::string unk, GetString(*model, "unk_token", "model"));
    auto it = vocab.find(unk);
    if (it == vocab.end()) {
      return Malformed("model.unk_token", absl::StrCat("\"", unk, "\" is not in the vocabulary"));
    }
    options.unk_id = it->second;
    parts->unk_id = it->second;
  }
  absl::StatusOr<std::unique_ptr<BpeModel>> bpe =
      BpeModel::Create(std::move(vocab), merges, options);
  if (!bpe.ok()) return Malformed("model.merges", ToStd(bpe.status().message()));
  parts->model = *std::move(bpe);
  return absl::OkStatus();
}

absl::Status ParseAddedTokens(const Json& root, TokenizerParts* parts) {
  const Json* added = Member(root, "added_tokens");
  if (added == nullptr) return absl::OkStatus();
  if (!added->is_array()) return Malformed("added_tokens", "expected an array");
  for (size_t i = 0; i < added->size(); ++i) {
    const Json& entry = (*added)[i];
    const std::string path = absl::StrCat("added_tokens[", i, "]");
    AddedToken token;
    ASSIGN_OR_RETURN(int64_t id, GetInt(entry, "id", path));
    if (id < 0 || id > INT32_MAX) return Malformed(Path(path, "id"), "not a token id");
    token.id = static_cast<int32_t>(id);
    ASSIGN_OR_RETURN(token.content, GetString(entry, "content", path));
    RETURN_IF_ERROR(tokenizer_internal::ValidateUtf8(token.content));
    ASSIGN_OR_RETURN(token.special, GetBool(entry, "special", path, false));
    ASSIGN_OR_RETURN(token.normalized, GetBool(entry, "normalized", path, !token.special));
    ASSIGN_OR_RETURN(token.single_word, GetBool(entry, "single_word", path, false));
    ASSIGN_OR_RETURN(token.lstrip, GetBool(entry, "lstrip", path, false));
    ASSIGN_OR_RETURN(token.rstrip, GetBool(entry, "rstrip", path, false));
    parts->added_tokens.push_back(std::move(token));
  }
  return absl::OkStatus();
}

absl::Status ParseNormalizer(const Json& object, const std::string& path, Normalizer* out) {
  ASSIGN_OR_RETURN(std::string type, GetType(object, path));
  if (type == "Sequence") {
    const Json* list = Member(object, "normalizers");
    if (list == nullptr || !list->is_array()) return Malformed(path, "expected normalizers");
    for (size_t i = 0; i < list->size(); ++i) {
      RETURN_IF_ERROR(
          ParseNormalizer((*list)[i], absl::StrCat(path, ".normalizers[", i, "]"), out));
    }
    return absl::OkStatus();
  }
  if (type == "Prepend") {
    ASSIGN_OR_RETURN(std::string prepend, GetString(object, "prepend", path));
    out->AddPrepend(prepend);
    return absl::OkStatus();
  }
  if (type == "Replace") {
    ASSIGN_OR_RETURN(auto pattern, GetPattern(object, path));
    if (pattern.second) return Unsupported(path, "Replace with a regex");
    if (pattern.first.empty()) return Malformed(path, "Replace of \"\"");
    ASSIGN_OR_RETURN(std::string content, GetString(object, "content", path));
    out->AddReplace(pattern.first, content);
    return absl::OkStatus();
  }
  for (const auto& [name, form] :
       {std::pair{"NFC", UnicodeForm::kNfc}, std::pair{"NFD", UnicodeForm::kNfd},
        std::pair{"NFKC", UnicodeForm::kNfkc}, std::pair{"NFKD", UnicodeForm::kNfkd}}) {
    if (type == name) {
      out->AddUnicodeForm(form);
      return absl::OkStatus();
    }
  }
  return Unsupported(path, absl::StrCat("normalizer \"", type, "\""));
}

absl::StatusOr<SplitBehavior> ParseBehavior(const Json& object, std::string_view path) {
  ASSIGN_OR_RETURN(std::string name, GetString(object, "behavior", path));
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return Malformed(Path(path, "behavior"), absl::StrCat("unknown behavior \"", name, "\""));
}

absl::Status ParsePreTokenizer(const Json& object, const std::string& path, PreTokenizer* out) {
  ASSIGN_OR_RETURN(std::string type, GetType(object, path));
  absl::Status added;
  if (type == "Sequence") {
    const Json* list = Member(object, "pretokenizers");
    if (list == nullptr || !list->is_array()) return Malformed(path, "expected pretokenizers");
    for (size_t i = 0; i < list->size(); ++i) {
      RETURN_IF_ERROR(
          ParsePreTokenizer((*list)[i], absl::StrCat(path, ".pretokenizers[", i, "]"), out));
    }
    return absl::OkStatus();
  } else if (type == "ByteLevel") {
    ASSIGN_OR_RETURN(bool add_prefix_space, GetBool(object, "add_prefix_space", path, true));
    ASSIGN_OR_RETURN(bool use_regex, GetBool(object, "use_regex", path, true));
    added = out->AddByteLevel(add_prefix_space, use_regex);
  } else if (type == "Split") {
    ASSIGN_OR_RETURN(auto pattern, GetPattern(object, path));
    ASSIGN_OR_RETURN(SplitBehavior behavior, ParseBehavior(object, path));
    ASSIGN_OR_RETURN(bool invert, GetBool(object, "invert", path, false));
    added = out->AddSplit(pattern.first, pattern.second, behavior, invert);
  } else if (type == "Digits") {
    ASSIGN_OR_RETURN(bool individual, GetBool(object, "individual_digits", path, false));
    added = out->AddDigits(individual);
  } else if (type == "Metaspace") {
    ASSIGN_OR_RETURN(std::string replacement, GetString(object, "replacement", path));
    ASSIGN_OR_RETURN(PrependScheme scheme, GetPrependScheme(object, path));
    ASSIGN_OR_RETURN(bool split, GetBool(object, "split", path, true));
    added = out->AddMetaspace(replacement, scheme, split);
  } else {
    return Unsupported(path, absl::StrCat("pre-tokenizer \"", type, "\""));
  }
  if (!added.ok()) {
    return absl::Status(added.code(),
                        absl::StrCat("tokenizer.json: ", path, ": ", added.message()));
  }
  return absl::OkStatus();
}

// Adds what a post-processor puts around a single sequence, outside what the ones before it put.
absl::Status ParsePostProcessor(const Json& object, const std::string& path,
                                TokenizerParts* parts) {
  ASSIGN_OR_RETURN(std::string type, GetType(object, path));
  std::vector<int32_t> prefix;
  std::vector<int32_t> suffix;
  if (type == "Sequence") {
    const Json* list = Member(object, "processors");
    if (list == nullptr || !list->is_array()) return Malformed(path, "expected processors");
    for (size_t i = 0; i < list->size(); ++i) {
      RETURN_IF_ERROR(
          ParsePostProcessor((*list)[i], absl::StrCat(path, ".processors[", i, "]"), parts));
    }
    return absl::OkStatus();
  } else if (type == "ByteLevel") {
    return absl::OkStatus();  // offsets only
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    for (const char* key : {"cls", "sep"}) {
      const Json* pair = Member(object, key);
      if (pair == nullptr || !pair->is_array() || pair->size() != 2) {
        return Malformed(Path(path, key), "expected [token, id]");
      }
      ASSIGN_OR_RETURN(int32_t id, GetId((*pair)[1], Path(path, key)));
      (std::string_view(key) == "cls" ? prefix : suffix).push_back(id);
    }
  } else if (type == "TemplateProcessing") {
    const Json* single = Member(object, "single");
    const Json* specials = Member(object, "special_tokens");
    if (single == nullptr || !single->is_array())
      return Malformed(Path(path, "single"), "expected an array");
    bool seen_sequence = false;
    for (size_t i = 0; i < single->size(); ++i) {
      const std::string item_path = absl::StrCat(path, ".single[", i, "]");
      const Json& item = (*single)[i];
      if (Member(item, "Sequence") != nullptr) {
        seen_sequence = true;
        continue;
      }
      const Json* special = Member(item, "SpecialToken");
      if (special == nullptr) return Malformed(item_path, "expected Sequence or SpecialToken");
      ASSIGN_OR_RETURN(std::string name, GetString(*special, "id", item_path));
      const Json* entry = specials == nullptr ? nullptr : Member(*specials, name);
      const Json* ids = entry == nullptr ? nullptr : Member(*entry, "ids");
      if (ids == nullptr || !ids->is_array()) {
        return Malformed(item_path, absl::StrCat("\"", name, "\" is not in special_tokens"));
      }
      for (const Json& id_json : *ids) {
        ASSIGN_OR_RETURN(int32_t id, GetId(id_json, item_path));
        (seen_sequence ? suffix : prefix).push_back(id);
      }
    }
  } else {
    return Unsupported(path, absl::StrCat("post-processor \"", type, "\""));
  }
  prefix.insert(prefix.end(), parts->prefix_ids.begin(), parts->prefix_ids.end());
  parts->prefix_ids = std::move(prefix);
  parts->suffix_ids.insert(parts->suffix_ids.end(), suffix.begin(), suffix.end());
  return absl::OkStatus();
}

// Appends the piece-wise steps of a decoder; `*byte_level` when it is (or holds) ByteLevel.
absl::Status ParseDecoderSteps(const Json& object, const std::string& path,
                               std::vector<DecoderStep>* steps, int* byte_level) {
  ASSIGN_OR_RETURN(std::string type, GetType(object, path));
  DecoderStep step;
  if (type == "Sequence") {
    const Json* list = Member(object, "decoders");
    if (list == nullptr || !list->is_array()) return Malformed(path, "expected decoders");
    for (size_t i = 0; i < list->size(); ++i) {
      RETURN_IF_ERROR(ParseDecoderSteps((*list)[i], absl::StrCat(path, ".decoders[", i, "]"), steps,
                                        byte_level));
    }
    return absl::OkStatus();
  } else if (type == "ByteLevel") {
    ++*byte_level;
    return absl::OkStatus();
  } else if (type == "Replace") {
    ASSIGN_OR_RETURN(auto pattern, GetPattern(object, path));
    if (pattern.second) return Unsupported(path, "Replace with a regex");
    step.kind = DecoderStep::Kind::kReplace;
    step.pattern = pattern.first;
    ASSIGN_OR_RETURN(step.content, GetString(object, "content", path));
  } else if (type == "ByteFallback") {
    step.kind = DecoderStep::Kind::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = DecoderStep::Kind::kFuse;
  } else if (type == "Strip") {
    step.kind = DecoderStep::Kind::kStrip;
    ASSIGN_OR_RETURN(step.content, GetString(object, "content", path));
    ASSIGN_OR_RETURN(int64_t start, GetInt(object, "start", path));
    ASSIGN_OR_RETURN(int64_t stop, GetInt(object, "stop", path));
    if (start < 0 || stop < 0) return Malformed(path, "negative start or stop");
    step.start = static_cast<size_t>(start);
    step.stop = static_cast<size_t>(stop);
  } else if (type == "Metaspace") {
    step.kind = DecoderStep::Kind::kMetaspace;
    ASSIGN_OR_RETURN(step.pattern, GetString(object, "replacement", path));
    ASSIGN_OR_RETURN(PrependScheme scheme, GetPrependScheme(object, path));
    step.prepend = scheme != PrependScheme::kNever;
  } else {
    return Unsupported(path, absl::StrCat("decoder \"", type, "\""));
  }
  steps->push_back(std::move(step));
  return absl::OkStatus();
}

absl::StatusOr<TokenDecoder> ParseDecoder(const Json& root) {
  const Json* decoder = Member(root, "decoder");
  if (decoder == nullptr) return TokenDecoder();
  std::vector<DecoderStep> steps;
  int byte_level = 0;
  RETURN_IF_ERROR(ParseDecoderSteps(*decoder, "decoder", &steps, &byte_level));
  if (byte_level > 0) {
    if (!steps.empty() || byte_level > 1) {
      return Unsupported("decoder", "ByteLevel together with other decoders");
    }
    return TokenDecoder::ByteLevel();
  }
  absl::StatusOr<TokenDecoder> pieces = TokenDecoder::Pieces(std::move(steps));
  if (!pieces.ok()) {
    return absl::Status(pieces.status().code(),
                        absl::StrCat("tokenizer.json: decoder: ", pieces.status().message()));
  }
  return pieces;
}

absl::Status ResolveSpecialNames(const HuggingFaceTokenizerExtras& extras, TokenizerParts* parts) {
  auto find = [&](const std::string& name) -> std::optional<int32_t> {
    for (const AddedToken& token : parts->added_tokens) {
      if (token.content == name) return token.id;
    }
    auto it = parts->model->vocab().find(name);
    if (it == parts->model->vocab().end()) return std::nullopt;
    return it->second;
  };
  for (auto [name, id] : {std::make_pair(&extras.bos_token, &parts->bos_id),
                          std::make_pair(&extras.eos_token, &parts->eos_id)}) {
    if (name->empty()) continue;
    *id = find(*name);
    if (!id->has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("special token \"", *name, "\" is not in tokenizer.json's vocabulary"));
    }
  }
  if (!parts->bos_id.has_value() && !parts->prefix_ids.empty()) {
    parts->bos_id = parts->prefix_ids.front();
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromHuggingFaceJson(
    std::string_view json, const HuggingFaceTokenizerExtras& extras) {
  const Json root = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return absl::InvalidArgumentError("tokenizer.json: not a JSON object");
  }
  auto parts = std::make_unique<TokenizerParts>();
  if (const Json* normalizer = Member(root, "normalizer"); normalizer != nullptr) {
    RETURN_IF_ERROR(ParseNormalizer(*normalizer, "normalizer", &parts->normalizer));
  }
  if (const Json* pre = Member(root, "pre_tokenizer"); pre != nullptr) {
    RETURN_IF_ERROR(ParsePreTokenizer(*pre, "pre_tokenizer", &parts->pre_tokenizer));
  }
  RETURN_IF_ERROR(ParseModel(root, parts->pre_tokenizer.byte_level(), parts.get()));
  RETURN_IF_ERROR(ParseAddedTokens(root, parts.get()));
  if (const Json* post = Member(root, "post_processor"); post != nullptr) {
    RETURN_IF_ERROR(ParsePostProcessor(*post, "post_processor", parts.get()));
  }
  ASSIGN_OR_RETURN(parts->decoder, ParseDecoder(root));
  RETURN_IF_ERROR(ResolveSpecialNames(extras, parts.get()));
  return Create(std::move(parts));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromHuggingFaceJsonFile(
    const std::string& path, const HuggingFaceTokenizerExtras& extras) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream contents;
  contents << file.rdbuf();
  if (file.bad()) return absl::DataLossError(absl::StrCat(path, ": cannot read"));
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      FromHuggingFaceJson(contents.str(), extras);
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        absl::StrCat(path, ": ", tokenizer.status().message()));
  }
  return tokenizer;
}

}  // namespace convoy
