#include "text/tokenizer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "convoy/status_macros.h"
#include "text/byte_level.h"
#include "text/string_views.h"
#include "text/tokenizer_parts.h"
#include "text/utf8.h"

namespace convoy {

using tokenizer_internal::AddedToken;
using tokenizer_internal::AddedTokenMatcher;
using tokenizer_internal::TextSegment;
using tokenizer_internal::TokenDecoder;
using tokenizer_internal::TokenizerParts;

Tokenizer::Tokenizer(std::unique_ptr<TokenizerParts> parts) : parts_(std::move(parts)) {}
Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(
    std::unique_ptr<TokenizerParts> parts) {
  if (parts->model == nullptr) return absl::InvalidArgumentError("tokenizer without a model");
  // Ids index tables: a vocabulary past this is a malformed file, not a model.
  constexpr int32_t kMaxVocabulary = 1 << 24;
  int32_t size = 0;
  for (const auto& [token, id] : parts->model->vocab()) {
    if (id < 0 || id >= kMaxVocabulary) {
      return absl::InvalidArgumentError(absl::StrCat("token \"", token, "\" has id ", id));
    }
    size = std::max(size, id + 1);
  }
  for (const AddedToken& token : parts->added_tokens) {
    if (token.id < 0 || token.id >= kMaxVocabulary) {
      return absl::InvalidArgumentError(
          absl::StrCat("added token \"", token.content, "\" has id ", token.id));
    }
    size = std::max(size, token.id + 1);
  }
  parts->tokens.assign(size, std::string());
  parts->has_token.assign(size, false);
  parts->special.assign(size, false);
  for (const auto& [token, id] : parts->model->vocab()) {
    parts->tokens[id] = token;
    parts->has_token[id] = true;
  }
  parts->token_ids = parts->model->vocab();
  // An added token decodes to its content, even when the model spells its id otherwise; one that
  // is matched in normalized text decodes to its normalized content (as Hugging Face's does).
  std::vector<AddedToken> raw;
  std::vector<AddedToken> normalized;
  for (const AddedToken& token : parts->added_tokens) {
    parts->has_token[token.id] = true;
    parts->special[token.id] = token.special;
    parts->token_ids[token.content] = token.id;
    if (token.normalized) {
      AddedToken matched = token;
      if (!parts->normalizer.empty()) matched.content = parts->normalizer.Normalize(token.content);
      parts->tokens[token.id] = matched.content;
      normalized.push_back(std::move(matched));
    } else {
      parts->tokens[token.id] = token.content;
      raw.push_back(token);
    }
  }
  parts->raw_matcher = std::make_unique<AddedTokenMatcher>(raw);
  parts->normalized_matcher = std::make_unique<AddedTokenMatcher>(normalized);
  if (parts->decoder.form() == TokenDecoder::Form::kByteLevel) {
    parts->token_bytes.resize(size);
    for (int32_t id = 0; id < size; ++id) {
      parts->token_bytes[id] = tokenizer_internal::FromByteLevel(parts->tokens[id]);
    }
  }
  for (const std::optional<int32_t>* id :
       {&parts->bos_id, &parts->eos_id, &parts->unk_id, &parts->pad_id}) {
    if (id->has_value() && (**id < 0 || **id >= size || !parts->has_token[**id])) {
      return absl::InvalidArgumentError(
          absl::StrCat("special token id ", **id, " is not a token (vocabulary size ", size, ")"));
    }
  }
  for (const std::vector<int32_t>* ids : {&parts->prefix_ids, &parts->suffix_ids}) {
    for (int32_t id : *ids) {
      if (id < 0 || id >= size || !parts->has_token[id]) {
        return absl::InvalidArgumentError(
            absl::StrCat("post-processor token id ", id, " is not a token"));
      }
    }
  }
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(parts)));
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(std::string_view text,
                                                       bool add_special) const {
  RETURN_IF_ERROR(tokenizer_internal::ValidateUtf8(text));
  const TokenizerParts& p = *parts_;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + p.prefix_ids.size() + p.suffix_ids.size() + 1);
  if (add_special) ids.insert(ids.end(), p.prefix_ids.begin(), p.prefix_ids.end());
  tokenizer_internal::BpeScratch scratch;
  std::vector<TextSegment> raw_segments;
  std::vector<TextSegment> segments;
  tokenizer_internal::PieceList pieces;
  p.raw_matcher->Split(text, &raw_segments);
  for (const TextSegment& raw : raw_segments) {
    if (raw.token_id >= 0) {
      ids.push_back(raw.token_id);
      continue;
    }
    std::string_view run = text.substr(raw.begin, raw.end - raw.begin);
    std::string normalized;
    if (!p.normalizer.empty()) {
      normalized = p.normalizer.Normalize(run);
      run = normalized;
    }
    p.normalized_matcher->Split(run, &segments);
    for (const TextSegment& segment : segments) {
      if (segment.token_id >= 0) {
        ids.push_back(segment.token_id);
        continue;
      }
      const bool at_text_start = raw.begin == 0 && segment.begin == 0;
      RETURN_IF_ERROR(p.pre_tokenizer.Split(run.substr(segment.begin, segment.end - segment.begin),
                                            at_text_start, &pieces));
      for (size_t i = 0; i < pieces.spans.size(); ++i) {
        p.model->Encode(pieces.piece(i), scratch, &ids);
      }
    }
  }
  if (add_special) ids.insert(ids.end(), p.suffix_ids.begin(), p.suffix_ids.end());
  return ids;
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const int32_t> ids,
                                              bool skip_special) const {
  const TokenizerParts& p = *parts_;
  std::vector<std::string_view> tokens;
  tokens.reserve(ids.size());
  const bool byte_level = p.decoder.form() == TokenDecoder::Form::kByteLevel;
  std::string bytes;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size() || !p.has_token[id]) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " is not in the vocabulary (size ", vocab_size(), ")"));
    }
    if (skip_special && p.special[id]) continue;
    if (byte_level) {
      bytes.append(p.token_bytes[id]);
    } else {
      tokens.push_back(p.tokens[id]);
    }
  }
  if (byte_level) return tokenizer_internal::Utf8Lossy(bytes);
  return p.decoder.Decode(tokens);
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(parts_->tokens.size()); }
std::optional<int32_t> Tokenizer::bos_id() const { return parts_->bos_id; }
std::optional<int32_t> Tokenizer::eos_id() const { return parts_->eos_id; }
std::optional<int32_t> Tokenizer::unk_id() const { return parts_->unk_id; }
std::optional<int32_t> Tokenizer::pad_id() const { return parts_->pad_id; }

bool Tokenizer::add_bos() const {
  return parts_->bos_id.has_value() && !parts_->prefix_ids.empty() &&
         parts_->prefix_ids.front() == *parts_->bos_id;
}

bool Tokenizer::add_eos() const {
  return parts_->eos_id.has_value() && !parts_->suffix_ids.empty() &&
         parts_->suffix_ids.back() == *parts_->eos_id;
}

std::optional<std::string_view> Tokenizer::IdToToken(int32_t id) const {
  if (id < 0 || id >= vocab_size() || !parts_->has_token[id]) return std::nullopt;
  return parts_->tokens[id];
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  auto it = parts_->token_ids.find(tokenizer_internal::ToAbsl(token));
  if (it == parts_->token_ids.end()) return std::nullopt;
  return it->second;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && id < vocab_size() && parts_->special[id];
}

std::string Tokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= vocab_size() || !parts_->has_token[id] || parts_->special[id]) return "";
  using Form = tokenizer_internal::TokenDecoder::Form;
  switch (parts_->decoder.form()) {
    case Form::kByteLevel:
      return parts_->token_bytes[id];
    case Form::kPieces:
      return parts_->decoder.PieceBytes(parts_->tokens[id]);
    case Form::kJoinWithSpace:
      break;
  }
  return absl::StrCat(" ", parts_->tokens[id]);
}

}  // namespace convoy
