// UTF-8 as the tokenizer needs it: validation with the offending byte's offset, code point
// iteration over text already validated, and Rust's String::from_utf8_lossy rule (what Hugging Face
// tokenizers uses to turn decoded bytes into text), also incrementally for streaming.
//
// Valid means RFC 3629: no overlong forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF.
#ifndef CONVOY_TEXT_UTF8_H_
#define CONVOY_TEXT_UTF8_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace convoy::tokenizer_internal {

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// OK for valid UTF-8; otherwise INVALID_ARGUMENT naming the byte offset of the first sequence
// that is not valid and its lead byte.
absl::Status ValidateUtf8(std::string_view text);

// How the bytes at the start of a non-empty string begin: a whole character, an invalid sequence,
// or a valid prefix of a character that the string ends before completing.
enum class Utf8Start { kCharacter, kInvalid, kIncomplete };
// `*length` is the character's length, the length of the invalid sequence's maximal subpart (the
// bytes one U+FFFD replaces under the lossy rule), or the length of the incomplete prefix.
Utf8Start ClassifyUtf8Start(std::string_view bytes, size_t* length);

// The length of the character that starts with `lead`, in valid UTF-8.
inline size_t Utf8CharLength(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// REQUIRES: `text` is valid UTF-8 and *pos < text.size(). Returns the code point at *pos and
// advances *pos past it.
char32_t NextCodePoint(std::string_view text, size_t* pos);

void AppendUtf8(char32_t code_point, std::string* out);

// The whole of `bytes` under the lossy rule: each maximal invalid subpart, and an incomplete
// sequence at the end, becomes one U+FFFD.
std::string Utf8Lossy(std::string_view bytes);

// The lossy rule over bytes that arrive in pieces. The concatenation of everything Feed and Finish
// append equals Utf8Lossy of all bytes fed, and each append is valid UTF-8: a character whose
// bytes have not all arrived is held back.
class Utf8LossyStream {
 public:
  // Appends the text that `bytes` completes.
  void Feed(std::string_view bytes, std::string* out);
  // Appends U+FFFD for a held incomplete character, and starts over.
  void Finish(std::string* out);
  bool holding() const { return !pending_.empty(); }

 private:
  std::string pending_;  // a valid prefix of one character, 1 to 3 bytes
};

}  // namespace convoy::tokenizer_internal

#endif  // CONVOY_TEXT_UTF8_H_
