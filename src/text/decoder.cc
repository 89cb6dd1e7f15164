#include "text/decoder.h"

#include <utility>

#include "absl/strings/str_join.h"
#include "text/byte_level.h"
#include "text/utf8.h"

namespace convoy::tokenizer_internal {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void ReplaceAll(std::string* text, std::string_view pattern, std::string_view content) {
  if (text->find(pattern) == std::string::npos) return;
  std::string out;
  size_t prev = 0;
  size_t pos = text->find(pattern);
  while (pos != std::string::npos) {
    out.append(*text, prev, pos - prev);
    out.append(content);
    prev = pos + pattern.size();
    pos = text->find(pattern, prev);
  }
  out.append(*text, prev, std::string::npos);
  text->swap(out);
}

// Hugging Face's ByteFallback: each run of byte tokens becomes its text when the run is valid
// UTF-8, else one U+FFFD per byte.
std::vector<std::string> JoinByteRuns(std::vector<std::string> elements) {
  std::vector<std::string> out;
  out.reserve(elements.size());
  std::string run;
  size_t run_tokens = 0;
  auto flush = [&] {
    if (run_tokens == 0) return;
    if (ValidateUtf8(run).ok()) {
      out.push_back(std::move(run));
    } else {
      for (size_t i = 0; i < run_tokens; ++i) out.emplace_back(kReplacementCharacter);
    }
    run.clear();
    run_tokens = 0;
  };
  for (std::string& element : elements) {
    unsigned char byte;
    if (IsByteFallbackToken(element, &byte)) {
      run.push_back(static_cast<char>(byte));
      ++run_tokens;
      continue;
    }
    flush();
    out.push_back(std::move(element));
  }
  flush();
  return out;
}

// Hugging Face's Strip of one element: up to `start` leading and `stop` trailing `content`
// characters. Returns how many leading characters it took.
size_t StripElement(std::string* element, std::string_view content, size_t start, size_t stop) {
  size_t begin = 0;
  size_t taken = 0;
  while (taken < start && element->compare(begin, content.size(), content) == 0 &&
         begin < element->size()) {
    begin += content.size();
    ++taken;
  }
  size_t end = element->size();
  for (size_t i = 0; i < stop && end > begin; ++i) {
    if (end - begin < content.size() ||
        element->compare(end - content.size(), content.size(), content) != 0) {
      break;
    }
    end -= content.size();
  }
  *element = element->substr(begin, end - begin);
  return taken;
}

// Hugging Face's Metaspace decoder: the replacement character reads as ' ', except in the first
// element (when it prepends), where every one of them is dropped.
void MetaspaceElement(std::string* element, std::string_view replacement, bool drop) {
  ReplaceAll(element, replacement, drop ? "" : " ");
}

}  // namespace

bool IsByteFallbackToken(std::string_view token, unsigned char* byte) {
  if (token.size() != 6 || token.substr(0, 3) != "<0x" || token[5] != '>') return false;
  const int hi = HexDigit(token[3]);
  const int lo = HexDigit(token[4]);
  if (hi < 0 || lo < 0) return false;
  *byte = static_cast<unsigned char>(hi * 16 + lo);
  return true;
}

TokenDecoder TokenDecoder::ByteLevel() {
  TokenDecoder decoder;
  decoder.form_ = Form::kByteLevel;
  return decoder;
}

absl::StatusOr<TokenDecoder> TokenDecoder::Pieces(std::vector<DecoderStep> steps) {
  TokenDecoder decoder;
  decoder.form_ = Form::kPieces;
  bool fused = false;
  for (const DecoderStep& step : steps) {
    switch (step.kind) {
      case DecoderStep::Kind::kFuse:
        fused = true;
        break;
      case DecoderStep::Kind::kByteFallback:
        if (fused) return absl::UnimplementedError("decoder ByteFallback after Fuse");
        decoder.byte_fallback_ = true;
        break;
      case DecoderStep::Kind::kReplace: {
        if (step.pattern.empty()) return absl::InvalidArgumentError("decoder Replace of \"\"");
        size_t length = 0;
        ClassifyUtf8Start(step.pattern, &length);
        if (fused && length != step.pattern.size()) {
          return absl::UnimplementedError("decoder Replace of more than one character after Fuse");
        }
        break;
      }
      case DecoderStep::Kind::kStrip:
        if (step.content.empty()) return absl::InvalidArgumentError("decoder Strip of \"\"");
        if (fused && step.stop > 0) {
          return absl::UnimplementedError("decoder Strip from the end after Fuse");
        }
        break;
      case DecoderStep::Kind::kMetaspace:
        if (step.pattern.empty()) return absl::InvalidArgumentError("Metaspace replacement \"\"");
        break;
    }
  }
  decoder.steps_ = std::move(steps);
  return decoder;
}

std::string TokenDecoder::Decode(absl::Span<const std::string_view> tokens) const {
  switch (form_) {
    case Form::kJoinWithSpace: {
      std::string text;
      for (size_t i = 0; i < tokens.size(); ++i) {
        if (i > 0) text.push_back(' ');
        text.append(tokens[i]);
      }
      return text;
    }
    case Form::kByteLevel: {
      std::string bytes;
      for (std::string_view token : tokens) bytes.append(FromByteLevel(token));
      return Utf8Lossy(bytes);
    }
    case Form::kPieces:
      break;
  }
  State state;
  return DecodeSegment(tokens, &state);
}

bool TokenDecoder::EndsSegment(std::string_view token) const {
  if (!byte_fallback_) return true;
  // The token as ByteFallback will see it.
  std::string element(token);
  for (const DecoderStep& step : steps_) {
    if (step.kind == DecoderStep::Kind::kByteFallback) break;
    if (step.kind == DecoderStep::Kind::kReplace) ReplaceAll(&element, step.pattern, step.content);
    if (step.kind == DecoderStep::Kind::kStrip) {
      StripElement(&element, step.content, step.start, step.stop);
    }
    if (step.kind == DecoderStep::Kind::kMetaspace) {
      MetaspaceElement(&element, step.pattern, /*drop=*/false);
    }
  }
  unsigned char byte;
  return !IsByteFallbackToken(element, &byte);
}

std::string TokenDecoder::PieceBytes(std::string_view token) const {
  std::string element(token);
  bool fused = false;
  for (const DecoderStep& step : steps_) {
    switch (step.kind) {
      case DecoderStep::Kind::kReplace:
        ReplaceAll(&element, step.pattern, step.content);
        break;
      case DecoderStep::Kind::kByteFallback:
        if (unsigned char byte; IsByteFallbackToken(element, &byte)) {
          return std::string(1, static_cast<char>(byte));
        }
        break;
      case DecoderStep::Kind::kFuse:
        fused = true;
        break;
      case DecoderStep::Kind::kStrip:
        if (!fused) StripElement(&element, step.content, step.start, step.stop);
        break;
      case DecoderStep::Kind::kMetaspace:
        MetaspaceElement(&element, step.pattern, /*drop=*/false);
        break;
    }
  }
  return element;
}

std::string TokenDecoder::DecodeSegment(absl::Span<const std::string_view> tokens,
                                        State* state) const {
  state->stripped.resize(steps_.size(), 0);
  state->strip_done.resize(steps_.size(), false);
  std::vector<std::string> elements(tokens.begin(), tokens.end());
  bool fused = false;
  for (size_t k = 0; k < steps_.size(); ++k) {
    const DecoderStep& step = steps_[k];
    switch (step.kind) {
      case DecoderStep::Kind::kReplace:
        for (std::string& element : elements) ReplaceAll(&element, step.pattern, step.content);
        break;
      case DecoderStep::Kind::kByteFallback:
        elements = JoinByteRuns(std::move(elements));
        break;
      case DecoderStep::Kind::kFuse: {
        std::string all = absl::StrJoin(elements, "");
        elements.clear();
        elements.push_back(std::move(all));
        fused = true;
        break;
      }
      case DecoderStep::Kind::kStrip:
        if (!fused) {
          for (std::string& element : elements) {
            StripElement(&element, step.content, step.start, step.stop);
          }
          break;
        }
        // After Fuse the one element is the whole text, of which this segment is a part: take
        // what the start has left to take, and stop at the first character kept.
        if (!state->strip_done[k]) {
          state->stripped[k] +=
              StripElement(&elements[0], step.content, step.start - state->stripped[k], 0);
          if (!elements[0].empty() || state->stripped[k] >= step.start) {
            state->strip_done[k] = true;
          }
        }
        break;
      case DecoderStep::Kind::kMetaspace:
        for (size_t i = 0; i < elements.size(); ++i) {
          // After Fuse the element is the whole text, the first; before, only the list's first.
          const bool first = fused || (state->first_segment && i == 0);
          MetaspaceElement(&elements[i], step.pattern, step.prepend && first);
        }
        break;
    }
  }
  state->first_segment = false;
  return absl::StrJoin(elements, "");
}

}  // namespace convoy::tokenizer_internal
