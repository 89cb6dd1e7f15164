// Tokenizer::FromSpec: a tokenizer from GGUF metadata, built as transformers builds one from a GGUF
// file: "gpt2" as a byte-level BPE with the named pre-tokenizer's split, "llama" as Llama 2's
// tokenizer.json has it (SentencePiece BPE with byte fallback, the legacy normalizer).
#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "convoy/status_macros.h"
#include "text/byte_level.h"
#include "text/string_views.h"
#include "text/tokenizer.h"
#include "text/tokenizer_parts.h"
#include "text/utf8.h"

namespace convoy {
namespace {

using tokenizer_internal::AddedToken;
using tokenizer_internal::BpeModel;
using tokenizer_internal::BpeOptions;
using tokenizer_internal::DecoderStep;
using tokenizer_internal::ToAbsl;
using tokenizer_internal::TokenDecoder;
using tokenizer_internal::TokenizerParts;
using tokenizer_internal::ToStd;

constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // "▁"

absl::Status Invalid(std::string_view field, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("tokenizer spec: ", ToAbsl(field), ": ", ToAbsl(what)));
}

absl::Status CheckSpec(const TokenizerSpec& spec) {
  const size_t n = spec.tokens.size();
  if (n == 0) return Invalid("tokens", "empty");
  if (n > static_cast<size_t>(INT32_MAX)) return Invalid("tokens", "too many");
  if (!spec.token_types.empty() && spec.token_types.size() != n) {
    return Invalid("token_types",
                   absl::StrCat(spec.token_types.size(), " types for ", n, " tokens"));
  }
  if (!spec.scores.empty() && spec.scores.size() != n) {
    return Invalid("scores", absl::StrCat(spec.scores.size(), " scores for ", n, " tokens"));
  }
  for (size_t id = 0; id < n; ++id) {
    absl::Status valid = tokenizer_internal::ValidateUtf8(spec.tokens[id]);
    if (!valid.ok()) return Invalid(absl::StrCat("tokens[", id, "]"), ToStd(valid.message()));
  }
  for (auto [field, id] :
       {std::make_pair("bos_id", spec.bos_id), std::make_pair("eos_id", spec.eos_id),
        std::make_pair("unk_id", spec.unk_id), std::make_pair("pad_id", spec.pad_id)}) {
    if (id.has_value() && (*id < 0 || static_cast<size_t>(*id) >= n)) {
      return Invalid(field, absl::StrCat(*id, " is not a token id (", n, " tokens)"));
    }
  }
  return absl::OkStatus();
}

// Tokens that GGUF marks as control, unknown or user-defined are matched whole in the text, before
// normalizing (transformers adds them with normalized=False).
AddedToken AddedTokenFor(int32_t id, const std::string& content, bool special) {
  AddedToken token;
  token.id = id;
  token.content = content;
  token.special = special;
  return token;
}

TokenType TypeOf(const TokenizerSpec& spec, size_t id) {
  return spec.token_types.empty() ? TokenType::kNormal : spec.token_types[id];
}

size_t CodePoints(std::string_view text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

// transformers' generate_merges: every split of every token into two tokens, ordered by the
// token's score (best first) or, without scores, by its id; ties keep the order of the vocabulary
// and then the longer left part first (a stable sort, as Python's).
std::vector<std::pair<std::string, std::string>> DeriveMerges(
    const TokenizerSpec& spec, const absl::flat_hash_map<std::string, int32_t>& vocab) {
  struct Candidate {
    std::string left;
    std::string right;
    double key;
    size_t left_length;
    size_t right_length;
  };
  const bool by_score = !spec.scores.empty();
  // Each distinct token once, in the order of its first appearance, with its last id and score
  // (a Python dict built from the list).
  std::vector<std::pair<std::string_view, double>> distinct;
  absl::flat_hash_map<std::string_view, size_t> position;
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    const double key = by_score ? spec.scores[id] : static_cast<double>(id);
    auto [it, inserted] = position.try_emplace(spec.tokens[id], distinct.size());
    if (inserted) {
      distinct.emplace_back(spec.tokens[id], key);
    } else {
      distinct[it->second].second = key;
    }
  }
  std::vector<Candidate> candidates;
  std::vector<Candidate> local;
  for (const auto& [token, key] : distinct) {
    local.clear();
    for (size_t cut = 1; cut < token.size(); ++cut) {
      if ((static_cast<unsigned char>(token[cut]) & 0xC0) == 0x80) continue;
      const std::string_view left = token.substr(0, cut);
      const std::string_view right = token.substr(cut);
      if (vocab.contains(ToAbsl(left)) && vocab.contains(ToAbsl(right))) {
        local.push_back(
            {std::string(left), std::string(right), key, CodePoints(left), CodePoints(right)});
      }
    }
    std::stable_sort(local.begin(), local.end(), [&](const Candidate& a, const Candidate& b) {
      const int32_t al = vocab.at(a.left), bl = vocab.at(b.left);
      return al != bl ? al < bl : vocab.at(a.right) < vocab.at(b.right);
    });
    for (Candidate& c : local) candidates.push_back(std::move(c));
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](const Candidate& a, const Candidate& b) {
                     auto ka = std::make_tuple(a.key, a.left_length, a.right_length);
                     auto kb = std::make_tuple(b.key, b.left_length, b.right_length);
                     return by_score ? ka > kb : ka < kb;
                   });
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(candidates.size());
  for (Candidate& c : candidates) merges.emplace_back(std::move(c.left), std::move(c.right));
  return merges;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseMerges(
    const TokenizerSpec& spec) {
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(spec.merges.size());
  for (size_t i = 0; i < spec.merges.size(); ++i) {
    const std::string& merge = spec.merges[i];
    const size_t space = merge.find(' ', 1);
    if (space == std::string::npos) {
      return Invalid(absl::StrCat("merges[", i, "]"),
                     absl::StrCat("\"", merge, "\" is not two tokens"));
    }
    merges.emplace_back(merge.substr(0, space), merge.substr(space + 1));
  }
  return merges;
}

absl::Status BuildByteLevel(const TokenizerSpec& spec, TokenizerParts* parts) {
  bool ignore_merges = false;
  ASSIGN_OR_RETURN(parts->pre_tokenizer,
                   tokenizer_internal::PreTokenizerForGgufName(spec.pre, &ignore_merges));
  // Tokens spelled outside the byte-level alphabet (added tokens written as text) are respelled,
  // as transformers does, so that the model sees every token in one alphabet.
  absl::flat_hash_map<std::string, int32_t> vocab;
  vocab.reserve(spec.tokens.size());
  std::vector<bool> in_alphabet(spec.tokens.size(), true);
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    const std::string& token = spec.tokens[id];
    in_alphabet[id] =
        tokenizer_internal::ToByteLevel(tokenizer_internal::FromByteLevel(token)) == token;
    vocab[in_alphabet[id] ? token : tokenizer_internal::ToByteLevel(token)] =
        static_cast<int32_t>(id);
  }
  ASSIGN_OR_RETURN(auto merges, ParseMerges(spec));
  BpeOptions options;
  options.byte_level = true;
  options.ignore_merges = ignore_merges;
  absl::StatusOr<std::unique_ptr<BpeModel>> model =
      BpeModel::Create(std::move(vocab), merges, options);
  if (!model.ok()) return Invalid("merges", ToStd(model.status().message()));
  parts->model = *std::move(model);
  parts->decoder = TokenDecoder::ByteLevel();
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    const TokenType type = TypeOf(spec, id);
    // transformers leaves out control tokens spelled outside the alphabet (mislabelled ones).
    if ((type == TokenType::kControl && in_alphabet[id]) || type == TokenType::kUserDefined) {
      parts->added_tokens.push_back(
          AddedTokenFor(static_cast<int32_t>(id), spec.tokens[id], type == TokenType::kControl));
    }
  }
  return absl::OkStatus();
}

// "llama" and "gemma4": SentencePiece-style BPE over "▁"-for-space text with byte fallback.
// `space_prefix_default` is what an absent add_space_prefix reads as.
absl::Status BuildSentencePiece(const TokenizerSpec& spec, bool space_prefix_default,
                                TokenizerParts* parts) {
  absl::flat_hash_map<std::string, int32_t> vocab;
  vocab.reserve(spec.tokens.size());
  for (size_t id = 0; id < spec.tokens.size(); ++id)
    vocab[spec.tokens[id]] = static_cast<int32_t>(id);
  std::vector<std::pair<std::string, std::string>> merges;
  if (spec.merges.empty()) {
    merges = DeriveMerges(spec, vocab);
  } else {
    ASSIGN_OR_RETURN(merges, ParseMerges(spec));
  }
  BpeOptions options;
  options.byte_fallback = true;
  options.fuse_unk = true;
  if (spec.unk_id.has_value()) options.unk_id = vocab.at(spec.tokens[*spec.unk_id]);
  absl::StatusOr<std::unique_ptr<BpeModel>> model =
      BpeModel::Create(std::move(vocab), merges, options);
  if (!model.ok()) return Invalid("merges", ToStd(model.status().message()));
  parts->model = *std::move(model);
  const bool space_prefix = spec.add_space_prefix.value_or(space_prefix_default);
  if (space_prefix) parts->normalizer.AddPrepend(kMetaspace);
  parts->normalizer.AddReplace(" ", kMetaspace);
  // Llama 2's decoder: "▁" reads as a space, byte runs join, and the prefix space goes again.
  const std::string space(1, ' ');
  std::vector<DecoderStep> steps = {
      DecoderStep::Replace(std::string(kMetaspace), space),
      DecoderStep::Of(DecoderStep::Kind::kByteFallback),
      DecoderStep::Of(DecoderStep::Kind::kFuse),
  };
  if (space_prefix) steps.push_back(DecoderStep::Strip(space, /*start=*/1, /*stop=*/0));
  ASSIGN_OR_RETURN(parts->decoder, TokenDecoder::Pieces(std::move(steps)));
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    const TokenType type = TypeOf(spec, id);
    const bool special = type == TokenType::kControl || type == TokenType::kUnknown;
    if (special || type == TokenType::kUserDefined) {
      parts->added_tokens.push_back(
          AddedTokenFor(static_cast<int32_t>(id), spec.tokens[id], special));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromSpec(const TokenizerSpec& spec) {
  RETURN_IF_ERROR(CheckSpec(spec));
  auto parts = std::make_unique<TokenizerParts>();
  bool add_bos_default = false;
  if (spec.model == "gpt2") {
    RETURN_IF_ERROR(BuildByteLevel(spec, parts.get()));
  } else if (spec.model == "llama") {
    RETURN_IF_ERROR(BuildSentencePiece(spec, /*space_prefix_default=*/true, parts.get()));
    add_bos_default = true;
  } else if (spec.model == "gemma4") {
    // Gemma 4's tokenizer.json as llama.cpp's converter writes it: the merges themselves (no
    // scores to derive them from), no dummy prefix, BOS first.
    if (spec.merges.empty()) return Invalid("merges", "required for model \"gemma4\", absent");
    RETURN_IF_ERROR(BuildSentencePiece(spec, /*space_prefix_default=*/false, parts.get()));
    add_bos_default = true;
  } else {
    return absl::UnimplementedError(absl::StrCat("tokenizer spec: model \"", spec.model,
                                                 "\" (known: \"gpt2\", \"llama\", \"gemma4\")"));
  }
  parts->bos_id = spec.bos_id;
  parts->eos_id = spec.eos_id;
  parts->unk_id = spec.unk_id;
  parts->pad_id = spec.pad_id;
  if (spec.add_bos.value_or(add_bos_default)) {
    if (!spec.bos_id.has_value()) return Invalid("add_bos", "true without bos_id");
    parts->prefix_ids.push_back(*spec.bos_id);
  }
  if (spec.add_eos.value_or(false)) {
    if (!spec.eos_id.has_value()) return Invalid("add_eos", "true without eos_id");
    parts->suffix_ids.push_back(*spec.eos_id);
  }
  return Create(std::move(parts));
}

}  // namespace convoy
