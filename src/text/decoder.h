// Decoders: ids' token strings back to text, with the meaning of Hugging Face tokenizers'
// decoders (its Tokenizer::decode joins what the decoder chain returns). Three forms:
//   - no decoder: tokens joined with ' ';
//   - ByteLevel: each token's bytes (its byte-level spelling read back, or its own bytes when it is
//     not spelled in that alphabet), all joined, then made text by the lossy UTF-8 rule;
//   - a chain of piece-wise decoders: Replace, ByteFallback, Fuse, Strip, Metaspace, in any order
//     that can be decoded incrementally (see Pieces).
#ifndef CONVOY_TEXT_DECODER_H_
#define CONVOY_TEXT_DECODER_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace convoy::tokenizer_internal {

struct DecoderStep {
  enum class Kind { kReplace, kByteFallback, kFuse, kStrip, kMetaspace };
  Kind kind = Kind::kFuse;
  std::string pattern;  // kReplace: the string replaced (non-empty); kMetaspace: the replacement
  std::string content;  // kReplace: what replaces it; kStrip: the character stripped
  size_t start = 0;     // kStrip: at most this many `content` characters from the start
  size_t stop = 0;      // kStrip: and from the end
  bool prepend = true;  // kMetaspace: its prepend scheme is not "never"

  static DecoderStep Of(Kind kind) {
    DecoderStep step;
    step.kind = kind;
    return step;
  }
  static DecoderStep Replace(std::string pattern, std::string content) {
    DecoderStep step = Of(Kind::kReplace);
    step.pattern = std::move(pattern);
    step.content = std::move(content);
    return step;
  }
  static DecoderStep Strip(std::string content, size_t start, size_t stop) {
    DecoderStep step = Of(Kind::kStrip);
    step.content = std::move(content);
    step.start = start;
    step.stop = stop;
    return step;
  }
};

// "<0xXX>": a byte fallback token (two hex digits).
bool IsByteFallbackToken(std::string_view token, unsigned char* byte);

class TokenDecoder {
 public:
  enum class Form { kJoinWithSpace, kByteLevel, kPieces };

  TokenDecoder() = default;  // kJoinWithSpace
  static TokenDecoder ByteLevel();
  // A chain of piece-wise steps. Segments of the token list are decoded one after another in
  // streaming, so a step after Fuse must not look across the whole text: UNIMPLEMENTED for
  // ByteFallback after Fuse, Replace of more than one character after Fuse, and Strip from the end
  // after Fuse.
  static absl::StatusOr<TokenDecoder> Pieces(std::vector<DecoderStep> steps);

  Form form() const { return form_; }

  // The text of `tokens` (each valid UTF-8), exactly as Hugging Face decodes them.
  std::string Decode(absl::Span<const std::string_view> tokens) const;

  // Incremental decoding for kPieces. The token list is cut into segments; the concatenation of
  // DecodeSegment over the segments, in order and with one State, equals Decode of the whole
  // list, provided each segment but the last ends where EndsSegment allows.
  struct State {
    bool first_segment = true;
    std::vector<size_t> stripped;  // per step: characters a Strip after Fuse has taken so far
    std::vector<bool> strip_done;  // per step: that Strip has met a character it keeps
  };
  std::string DecodeSegment(absl::Span<const std::string_view> tokens, State* state) const;
  // Whether a segment may end after `token`: not when ByteFallback may still join it with the
  // byte tokens that follow.
  bool EndsSegment(std::string_view token) const;

  // kPieces: the bytes `token` adds to a text it does not begin (what a grammar over the output
  // matches): each step applied to it alone, a byte-fallback token as its one raw byte (even one
  // that is not UTF-8 alone), no Strip after Fuse (that strips the text's start only).
  std::string PieceBytes(std::string_view token) const;

 private:
  Form form_ = Form::kJoinWithSpace;
  std::vector<DecoderStep> steps_;
  bool byte_fallback_ = false;
};

}  // namespace convoy::tokenizer_internal

#endif  // CONVOY_TEXT_DECODER_H_
