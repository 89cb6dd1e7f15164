// Streaming detokenization: one IncrementalDetokenizer per generated sequence turns ids, one at a
// time, into the text they add.
//
// Contract: for any ids, the concatenation of what Next returns and what Flush returns equals
// Tokenizer::Decode(ids, skip_special), and every string returned is valid UTF-8 on its own. To
// keep both, text is held back while it can still change:
//   - byte-level vocabularies: the bytes of a character that has not all arrived;
//   - byte-fallback vocabularies: a run of "<0xXX>" tokens, until a token that is not one ends it
//     (the run decodes to its text only if the whole run is valid UTF-8; else to one U+FFFD per
//     byte, as Hugging Face does).
// SentencePiece's leading space is dropped at the start of the text only, as Decode does.
//
// Not thread-safe; the Tokenizer must outlive it.
#ifndef CONVOY_TEXT_DETOKENIZER_H_
#define CONVOY_TEXT_DETOKENIZER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "text/decoder.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace convoy {

class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special);

  // The text that `id` completes; often empty while text is held back. INVALID_ARGUMENT for an id
  // that is not a token, and then nothing changes.
  absl::StatusOr<std::string> Next(int32_t id);

  // The text held back, ended as Decode ends it (an incomplete character becomes U+FFFD). After
  // it the detokenizer starts a new text.
  std::string Flush();

  // Whether text is held back.
  bool holding() const { return bytes_.holding() || !pending_.empty(); }

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  tokenizer_internal::Utf8LossyStream bytes_;  // byte-level decoders
  std::vector<std::string_view> pending_;      // piece-wise decoders: the segment so far
  tokenizer_internal::TokenDecoder::State state_;
  bool started_ = false;  // join-with-space: a token has been seen
};

}  // namespace convoy

#endif  // CONVOY_TEXT_DETOKENIZER_H_
