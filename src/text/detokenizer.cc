#include "text/detokenizer.h"

#include "absl/strings/str_cat.h"
#include "text/tokenizer_parts.h"

namespace convoy {

using tokenizer_internal::TokenDecoder;

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(&tokenizer), skip_special_(skip_special) {}

absl::StatusOr<std::string> IncrementalDetokenizer::Next(int32_t id) {
  const tokenizer_internal::TokenizerParts& parts = *tokenizer_->parts_;
  if (id < 0 || id >= tokenizer_->vocab_size() || !parts.has_token[id]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token id ", id, " is not in the vocabulary (size ", tokenizer_->vocab_size(), ")"));
  }
  std::string out;
  if (skip_special_ && parts.special[id]) return out;
  switch (parts.decoder.form()) {
    case TokenDecoder::Form::kByteLevel:
      bytes_.Feed(parts.token_bytes[id], &out);
      break;
    case TokenDecoder::Form::kJoinWithSpace:
      if (started_) out.push_back(' ');
      out.append(parts.tokens[id]);
      started_ = true;
      break;
    case TokenDecoder::Form::kPieces:
      pending_.push_back(parts.tokens[id]);
      if (parts.decoder.EndsSegment(parts.tokens[id])) {
        out = parts.decoder.DecodeSegment(pending_, &state_);
        pending_.clear();
      }
      break;
  }
  return out;
}

std::string IncrementalDetokenizer::Flush() {
  std::string out;
  bytes_.Finish(&out);
  if (!pending_.empty()) {
    out = tokenizer_->parts_->decoder.DecodeSegment(pending_, &state_);
    pending_.clear();
  }
  state_ = TokenDecoder::State();
  started_ = false;
  return out;
}

}  // namespace convoy
